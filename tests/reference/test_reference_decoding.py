"""decoding.py against transformers' logits warpers and model.generate on tiny seeded models."""

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from autograder.reference.decoding import (
    beam_search,
    greedy_decode,
    next_token_distribution,
    sample_next_token,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# ---------------------------------------------------------------- next-token distribution


def _hf_distribution(logits, temperature, top_k, top_p):
    from transformers import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k is not None:
        warpers.append(TopKLogitsWarper(top_k, min_tokens_to_keep=1))
    if top_p is not None:
        warpers.append(TopPLogitsWarper(top_p, min_tokens_to_keep=1))
    scores = warpers(torch.zeros(logits.size(0), 1, dtype=torch.long), logits.float())
    return scores.softmax(dim=-1)


CONFIGS = [
    (1.0, None, None),
    (0.7, None, None),
    (1.5, 5, None),
    (1.0, 1, None),
    (1.0, 100, None),  # k > V keeps everything
    (1.0, None, 0.9),
    (0.8, None, 0.5),
    (1.0, None, 0.0),  # keeps only the most likely token
    (1.0, None, 1.0),
    (1.3, 10, 0.8),
    (0.5, 3, 0.95),
]


@pytest.mark.parametrize("temperature, top_k, top_p", CONFIGS)
def test_distribution_matches_hf_warper_chain(temperature, top_k, top_p):
    logits = torch.randn(6, 40, generator=torch.Generator().manual_seed(0)) * 3
    ours = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    expected = _hf_distribution(logits, temperature, top_k, top_p)
    assert ours.dtype == torch.float32 and ours.shape == logits.shape
    # tolerance: float32 rounding; the support must be identical
    assert torch.equal(ours > 0, expected > 0)
    torch.testing.assert_close(ours, expected, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("top_p", [0.25, 0.5, 0.75, 0.875, 0.3, 0.6])
def test_top_p_boundaries_and_ties_match_hf(top_p):
    # Probabilities 1/2, 1/4, 1/8, 1/8 put cumulative sums exactly on 0.5, 0.75, 0.875;
    # the second row is all ties.
    logits = torch.tensor([[3.0, 2.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]) * math.log(2)
    ours = next_token_distribution(logits, top_p=top_p)
    expected = _hf_distribution(logits, 1.0, None, top_p)
    assert torch.equal(ours > 0, expected > 0)
    torch.testing.assert_close(ours, expected, atol=1e-7, rtol=0)


def test_top_p_hand_computed():
    # p = (1/2, 1/4, 1/8, 1/8), top_p = 0.75: {1/2, 1/4} already reaches 0.75, so the
    # nucleus is the first two tokens, renormalised to 2/3 and 1/3.
    logits = torch.tensor([[3.0, 2.0, 1.0, 1.0]]) * math.log(2)
    ours = next_token_distribution(logits, top_p=0.75)
    torch.testing.assert_close(ours, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]), atol=1e-6, rtol=0)
    # top_p = 0.76 needs a third token
    assert int((next_token_distribution(logits, top_p=0.76) > 0).sum()) == 3


def test_temperature_and_top_k_hand_computed():
    logits = torch.tensor([[2.0, 1.0, 0.0, 1.0]])
    # T = 0.5 doubles the logits
    torch.testing.assert_close(
        next_token_distribution(logits, temperature=0.5), torch.softmax(logits * 2, -1), atol=1e-7, rtol=0
    )
    # top-2 of [2, 1, 0, 1]: the second-best value 1 is tied, both 1s stay
    kept = next_token_distribution(logits, top_k=2) > 0
    assert kept.tolist() == [[True, True, False, True]]
    # T = 0 is greedy: a one-hot vector on the argmax
    assert next_token_distribution(logits, temperature=0).tolist() == [[1.0, 0.0, 0.0, 0.0]]


def test_invalid_arguments_raise():
    logits = torch.zeros(1, 5)
    for kwargs in ({"temperature": -1.0}, {"top_k": 0}, {"top_p": 1.5}, {"top_p": -0.1}):
        with pytest.raises(ValueError):
            next_token_distribution(logits, **kwargs)


# ---------------------------------------------------------------- sampling


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, None), (0.7, 4, None), (1.2, None, 0.8)])
def test_sampling_frequencies_match_distribution(device, temperature, top_k, top_p):
    n = 40_000
    row = torch.randn(1, 8, generator=torch.Generator().manual_seed(1)).to(device)
    probs = next_token_distribution(row, temperature=temperature, top_k=top_k, top_p=top_p)[0]
    g = torch.Generator(device=device).manual_seed(0)
    draws = sample_next_token(
        row.expand(n, -1), temperature=temperature, top_k=top_k, top_p=top_p, generator=g
    )
    assert draws.shape == (n,) and draws.dtype == torch.long and draws.device == row.device
    freq = torch.bincount(draws, minlength=8).double() / n
    # binomial: each frequency within 5 standard deviations (tokens of probability 0 never drawn)
    sigma = (probs.double() * (1 - probs.double()) / n).sqrt()
    assert ((freq - probs.double()).abs() <= 5 * sigma).all()


def test_sampling_uses_the_generator_exactly():
    logits = torch.randn(5, 30, generator=torch.Generator().manual_seed(2))
    kwargs = dict(temperature=0.9, top_k=12, top_p=0.9)
    a = sample_next_token(logits, generator=torch.Generator().manual_seed(7), **kwargs)
    b = sample_next_token(logits, generator=torch.Generator().manual_seed(7), **kwargs)
    expected = torch.multinomial(
        next_token_distribution(logits, **kwargs), 1, generator=torch.Generator().manual_seed(7)
    ).squeeze(-1)
    assert torch.equal(a, b) and torch.equal(a, expected)


def test_temperature_zero_is_argmax():
    logits = torch.randn(7, 20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(sample_next_token(logits, temperature=0), logits.argmax(-1))


# ---------------------------------------------------------------- greedy decoding


def _generate(model, ids, eos, **kwargs):
    return model.generate(
        ids,
        attention_mask=torch.ones_like(ids),  # no padding in the prompts
        do_sample=False,
        eos_token_id=eos,
        pad_token_id=eos if eos is not None else 0,
        **kwargs,
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_matches_generate(tiny_llama, seed):
    model = tiny_llama(seed)
    prompts = torch.randint(0, 96, (4, 3 + seed), generator=torch.Generator().manual_seed(seed))
    free = _generate(model, prompts, None, max_new_tokens=12)
    assert torch.equal(greedy_decode(model, prompts, 12), free)

    # eos = a token that row 0 produces at step 3 and row 1 at some step: rows finish at
    # different times, and the finished ones must be padded with eos
    t = prompts.size(1)
    for eos in (int(free[0, t + 2]), int(free[1, t + 6])):
        expected = _generate(model, prompts, eos, max_new_tokens=12)
        ours = greedy_decode(model, prompts, 12, eos_token_id=eos)
        assert ours.shape == expected.shape and torch.equal(ours, expected)


def test_greedy_stops_when_every_row_has_eos(tiny_llama):
    model = tiny_llama(5)
    prompt = torch.randint(0, 96, (1, 4), generator=torch.Generator().manual_seed(5))
    free = greedy_decode(model, prompt, 10)
    eos = int(free[0, 4 + 2])
    stop = int((free[0, 4:] == eos).nonzero()[0]) + 1  # first occurrence, 1-based step
    ours = greedy_decode(model, prompt, 10, eos_token_id=eos)
    assert ours.shape == (1, 4 + stop) and int(ours[0, -1]) == eos
    assert greedy_decode(model, prompt, 0).shape == (1, 4)


# ---------------------------------------------------------------- beam search


# generate(..., num_beams=k, early_stopping=True) keeps 2k candidates per step and discards finished
# ones ranked k+1..2k, and breaks ties as torch.topk does; the reference is the textbook rule of its
# docstring. The two provably coincide
# - without eos: nothing finishes before max_new_tokens, so both keep the k most likely candidates at
#   every step and return the most likely one at the end (all have L = max_new_tokens, so the length
#   penalty does not matter);
# - with one beam: both are greedy decoding that stops at eos;
# as long as no two candidates tie, which the peaked tiny Llamas make sure of (their top candidates
# are tenths apart). Only these cases are compared with the library.


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_search_without_eos_matches_generate(tiny_llama, seed):
    model = tiny_llama(seed)
    prompt = torch.randint(0, 96, (1, 5), generator=torch.Generator().manual_seed(100 + seed))
    for num_beams, length_penalty, max_new in itertools.product([2, 4], [-1.0, 1.0], [1, 12]):
        expected = _generate(model, prompt, None, num_beams=num_beams, max_new_tokens=max_new,
                             length_penalty=length_penalty, early_stopping=True)
        ours = beam_search(model, prompt, num_beams=num_beams, max_new_tokens=max_new, length_penalty=length_penalty)
        assert ours.shape == expected.shape and torch.equal(ours, expected), (num_beams, length_penalty, max_new)


def test_one_beam_is_greedy_and_matches_generate(tiny_llama):
    model = tiny_llama(7)
    prompt = torch.randint(0, 96, (1, 3), generator=torch.Generator().manual_seed(7))
    free = greedy_decode(model, prompt, 9)
    for eos in (None, int(free[0, 3 + 4])):
        ours = beam_search(model, prompt, num_beams=1, max_new_tokens=9, eos_token_id=eos)
        assert torch.equal(ours, greedy_decode(model, prompt, 9, eos_token_id=eos))
        expected = _generate(model, prompt, eos, num_beams=1, max_new_tokens=9, early_stopping=True)
        assert torch.equal(ours, expected)


def test_beam_search_does_not_modify_the_prompt(tiny_llama):
    model = tiny_llama(3)
    prompt = torch.randint(0, 96, (1, 4), generator=torch.Generator().manual_seed(3))
    before = prompt.clone()
    out = beam_search(model, prompt, num_beams=3, max_new_tokens=5, eos_token_id=int(prompt[0, 0]))
    assert torch.equal(prompt, before) and torch.equal(out[:, :4], prompt) and out.dtype == torch.long
    unchanged = beam_search(model, prompt, num_beams=3, max_new_tokens=0)
    assert torch.equal(unchanged, prompt) and unchanged is not prompt


def _bigram(rows, vocab=7):
    """A BigramLM whose row ``last`` puts the given probabilities on the given tokens, 1e-6 elsewhere."""
    probs = torch.full((vocab, vocab), 1e-6)
    for last, nexts in rows.items():
        for token, p in nexts.items():
            probs[last, token] = p
    return BigramLM((probs / probs.sum(-1, keepdim=True)).log())


PROMPT = torch.tensor([[6]])  # vocabulary of the hand-made models: 0 = eos, 1 = a, 2 = b, 3 = c, 4 = d, 5 = f


def test_beam_search_refills_and_stops_at_k_finished():
    """Two beams, alpha = 1. Step 1: "eos" (ln 0.4) is among the 2 best and finishes (score -0.916);
    "a" runs, and "b", the next-best unfinished candidate, refills the beam. Step 2: "b eos" (-1.396,
    score -0.698) and "a c" (-1.561) are the 2 best; "b eos" finishes, 2 hypotheses have finished and
    the search stops, although "a c eos" (score -0.521) would beat "b eos" one step later."""
    model = _bigram({6: {0: 0.4, 1: 0.35, 2: 0.25}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99, 4: 0.01},
                     3: {0: 0.999}, 4: {0: 0.999}, 0: {0: 1.0}})
    assert beam_search(model, PROMPT, num_beams=2, max_new_tokens=6, eos_token_id=0).tolist() == [[6, 2, 0]]


def test_beam_search_length_limit_finishes_running_beams():
    """Two beams, max_new_tokens = 2: at step 2 "a c" (-1.204) runs into the limit and finishes with
    L = 2 (score -0.602); it beats "a eos" (-0.805) and "eos" (-1.204)."""
    model = _bigram({6: {1: 0.5, 0: 0.3, 2: 0.2}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99}, 3: {0: 1.0}})
    assert beam_search(model, PROMPT, num_beams=2, max_new_tokens=2, eos_token_id=0).tolist() == [[6, 1, 3]]
    assert beam_search(model, PROMPT, num_beams=2, max_new_tokens=1, eos_token_id=0).tolist() == [[6, 1]]


def test_beam_search_length_penalty_signs():
    """Three beams: "eos" finishes with L = 1 (log-probability -1.204), "a eos" with L = 2 (-1.155),
    "b d eos" with L = 3 (-1.238). alpha < 0 prefers the shortest, alpha = 0 the most likely,
    alpha > 0 the longest."""
    model = _bigram({6: {1: 0.35, 0: 0.3, 2: 0.29, 3: 0.06}, 1: {0: 0.9, 5: 0.1}, 2: {4: 1.0},
                     3: {5: 1.0}, 4: {0: 1.0}, 5: {0: 1.0}})
    for alpha, expected in [(-1.0, [[6, 0]]), (0.0, [[6, 1, 0]]), (1.0, [[6, 2, 4, 0]]), (2.0, [[6, 2, 4, 0]])]:
        out = beam_search(model, PROMPT, num_beams=3, max_new_tokens=6, length_penalty=alpha, eos_token_id=0)
        assert out.tolist() == expected, alpha


def test_beam_search_tie_rule():
    """a, b and c tie exactly after the prompt: lower token ids rank first, so one beam takes a and two
    beams take a and b (not c, whose continuation is better). "a eos" and "b eos" then tie exactly and
    fill the pool: the one ranked first, of the earlier beam, wins the equal score."""
    model = _bigram({6: {1: 0.3, 2: 0.3, 3: 0.3, 0: 0.1}, 1: {0: 0.6, 5: 0.4}, 2: {0: 0.6, 5: 0.4},
                     3: {0: 0.99, 5: 0.01}, 5: {0: 1.0}})
    assert beam_search(model, PROMPT, num_beams=1, max_new_tokens=4, eos_token_id=0).tolist() == [[6, 1, 0]]
    assert beam_search(model, PROMPT, num_beams=2, max_new_tokens=4, eos_token_id=0).tolist() == [[6, 1, 0]]
    # three beams keep c too, and "c eos" wins
    assert beam_search(model, PROMPT, num_beams=3, max_new_tokens=4, eos_token_id=0).tolist() == [[6, 3, 0]]


def test_beam_search_with_a_vocabulary_of_eos_only_stops():
    """No candidate can keep running: the search stops after one step with the eos hypothesis."""
    model = BigramLM(torch.zeros(1, 1))
    assert beam_search(model, torch.tensor([[0]]), num_beams=2, max_new_tokens=5, eos_token_id=0).tolist() == [[0, 0]]


class BigramLM(nn.Module):
    """A fake causal LM whose next-token log-probabilities depend on the last token only."""

    def __init__(self, log_probs: torch.Tensor):
        super().__init__()
        self.register_buffer("table", log_probs)  # [V, V]

    def forward(self, input_ids):
        return SimpleNamespace(logits=self.table[input_ids])


def test_beam_search_hand_computed_length_rule():
    """Two beams; vocabulary: 0 = eos, 1 = a, 2 = b, 3..5 = fillers, 6 = prompt.

    Step 1 from the prompt: eos 0.4, a 0.35, b 0.25. The top-2 candidates are eos and a;
    eos finishes with L = 1: score ln 0.4 = -0.916. Running beams: a, b.
    Step 2: from a and b, eos has probability 0.9: candidates "a eos" (ln 0.315 = -1.155)
    and "b eos" (ln 0.225 = -1.492) are the top 2 and both finish with L = 2, filling the
    pool of 2, so the search stops.
    - alpha = 1: scores -0.578 (a eos), -0.746 (b eos), -0.916 (eos): best "a eos".
    - alpha = 0: scores -1.155, -1.492, -0.916: best "eos" alone.
    """
    probs = torch.full((7, 7), 1e-6)
    probs[6, :3] = torch.tensor([0.4, 0.35, 0.25])
    probs[1, 0], probs[1, 1] = 0.9, 0.1
    probs[2, 0], probs[2, 2] = 0.9, 0.1
    probs[0, 0] = 1.0
    model = BigramLM((probs / probs.sum(-1, keepdim=True)).log())
    prompt = torch.tensor([[6]])
    assert beam_search(model, prompt, num_beams=2, max_new_tokens=5, eos_token_id=0).tolist() == [[6, 1, 0]]
    assert beam_search(
        model, prompt, num_beams=2, max_new_tokens=5, length_penalty=0.0, eos_token_id=0
    ).tolist() == [[6, 0]]
    # without eos only the length limit finishes hypotheses: the best sum of log-probs wins
    assert beam_search(model, prompt, num_beams=2, max_new_tokens=1).tolist() == [[6, 0]]
    assert beam_search(model, prompt, num_beams=2, max_new_tokens=0).tolist() == [[6]]


def test_beam_search_rejects_batches():
    with pytest.raises(ValueError):
        beam_search(BigramLM(torch.zeros(8, 8)), torch.zeros(2, 3, dtype=torch.long), num_beams=2, max_new_tokens=3)
