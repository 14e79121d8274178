"""Hidden tests of part_b_bert_gpt.ipynb, B2: generation: sampling one token, greedy
decoding and beam search."""
from __future__ import annotations

import functools
import math
import types

import torch

from autograder.reference import decoding
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.sandbox.fixtures import build_fixture, fixture
from autograder.suite import expect, expect_tensor, graded, on_devices, within_sigma
from autograder.hidden._shared import _expect_draws_from_the_generator, _expect_draws_from_the_global_generator

from ._common import _gen, _randn


# =============================================================== sample_next_token
# Ten logits without ties, in the order of this student's draw (so that the most likely
# token is not always id 0): drawn when a test runs, where the student's draws are known.
_LOGITS = torch.tensor([2.0, 1.2, 0.9, 0.5, 0.1, -0.3, -0.6, -1.0, -1.5, -2.2])


def _sampling_logits() -> torch.Tensor:
    return _LOGITS[torch.randperm(_LOGITS.numel(), generator=_gen(2024))]


DRAWS = 30_000


def _samples(student, logits: torch.Tensor, device: str, *, seed: int, repeat: int = 1, rows: int | None = None,
             global_generator: bool = False, **kwargs):
    """The student's tokens for ``logits`` [B, V] (or, with ``rows``, for the one row of ``logits``
    repeated ``rows`` times in the sandbox), for each of ``repeat`` calls. With ``global_generator``,
    generator=None and PyTorch's global generator seeded with ``seed``."""
    reply = student.probe("seeded_call", name="sample_next_token", args=[logits.to(device)], kwargs=kwargs,
                          seed=seed, device=device, repeat=repeat, rows=rows, return_args=False,
                          global_generator=global_generator)
    return [expect_tensor(value, dtype=torch.int64, shape=(rows or logits.size(0),), device=device,
                          what="sample_next_token's result (one token id per row)").cpu()
            for value in reply["values"]]


def _expect_frequencies(student, device: str, *, seed: int, **kwargs) -> None:
    """DRAWS rows of ``_sampling_logits()``: one draw each; compare the counts with the reference distribution."""
    logits = _sampling_logits()
    [tokens] = _samples(student, logits[None], device, seed=seed, rows=DRAWS, **kwargs)
    probs = decoding.next_token_distribution(logits[None], **kwargs)[0].double()
    counts = torch.bincount(tokens.clamp(0, 9), minlength=10)
    setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    expect(bool(((tokens >= 0) & (tokens < 10)).all()), f"sample_next_token({setting}) returned ids outside [0, V)")
    for token in range(10):
        count, p = int(counts[token]), float(probs[token])
        # The student reads how often a token was drawn, never its probability (nor the band's
        # width, from which the probability follows).
        if p == 0.0:
            expect(count == 0, f"sample_next_token({setting}) drew {count} times a token that top-k / top-p "
                               "filtering removes with these settings: a removed token must never be drawn",
                   detail=f"sample_next_token({setting}) drew token {token} {count} times, but that token "
                          "is filtered out (top-k / top-p) and must never be drawn")
        else:
            # 5-sigma band around the reference probability
            expect(within_sigma(count, DRAWS, p),
                   f"sample_next_token({setting}) drew token {token} in {count / DRAWS:.4f} of {DRAWS} draws, "
                   "outside the 5-sigma band around its probability with these settings",
                   detail=f"sample_next_token({setting}) drew token {token} in {count / DRAWS:.4f} of {DRAWS} "
                          f"draws; its probability is {p:.4f} (5-sigma band: "
                          f"±{5 * math.sqrt(p * (1 - p) / DRAWS):.4f})")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_frequencies_with_temperature(student, device):
    for seed, temperature in [(1, 1.0), (2, 0.7), (3, 2.0)]:
        _expect_frequencies(student, device, seed=seed, temperature=temperature)


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_frequencies_with_top_k_and_top_p(student, device):
    settings = [dict(top_k=3), dict(temperature=1.5, top_k=5), dict(top_p=0.7),
                dict(temperature=1.5, top_p=0.7), dict(temperature=0.8, top_k=6, top_p=0.9)]
    for seed, kwargs in enumerate(settings, start=10):
        _expect_frequencies(student, device, seed=seed, **kwargs)
    # k > V keeps every token: torch.topk(scores, k) alone fails there, and the k-th highest score
    # read at position V - k of an ascending sort wraps round to a middle one and drops tokens
    logits = _sampling_logits()
    beyond = dict(top_k=logits.numel() + 7)
    reply = student.probe("raises", name="sample_next_token", args=[logits[None].to(device)],
                          kwargs=beyond)
    expect(reply["raised"] is None, f"sample_next_token with top_k larger than the vocabulary raised "
                                    f"{reply['raised']}; k > V must keep every token")
    [tokens] = _samples(student, logits[None], device, seed=15, rows=DRAWS, **beyond)
    expect(set(tokens.tolist()) == set(range(logits.numel())),
           "with top_k larger than the vocabulary, some tokens were never drawn (k > V keeps every token)")
    _expect_frequencies(student, device, seed=16, **beyond)
    # tokens tied with the k-th highest score are kept too: with top_k=2, token 0 and the three tied second
    tied, kept = torch.tensor([[1.5, 0.7, -0.4, 0.7, 0.0, 0.7, -1.0]]), {0, 1, 3, 5}
    drawn = set(_samples(student, tied, device, seed=17, rows=4000, top_k=2)[0].tolist())
    expect(drawn <= kept, "with top_k=2, sample_next_token drew a token below the 2nd highest score")
    expect(drawn == kept, "with top_k=2 and three tokens tied at the 2nd highest score, some of them were never "
                          "drawn: tokens tied with the k-th highest score are kept too")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_greedy_limits(student, device):
    logits = _randn(5, 20, seed=30, scale=2.0, device=device)
    argmax = logits.argmax(dim=-1).cpu()
    for seed, kwargs in enumerate([dict(temperature=0.0), dict(top_k=1), dict(top_p=1e-6),
                                   dict(temperature=3.0, top_k=1)], start=31):
        [tokens] = _samples(student, logits, device, seed=seed, **kwargs)
        setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        expect(torch.equal(tokens, argmax),
               f"sample_next_token({setting}) must return the argmax of every row, got {tokens.tolist()}",
               detail=f"sample_next_token({setting}) must return the argmax of every row {argmax.tolist()}, "
                      f"got {tokens.tolist()}")
    # temperature 0 with tied highest scores: the lowest tied id, as torch.argmax
    tied = torch.tensor([[0.5, 2.0, -1.0, 2.0, 0.1], [3.0, 1.0, 3.0, 3.0, 0.0]])
    [tokens] = _samples(student, tied, device, seed=37, temperature=0.0)
    expect(torch.equal(tokens, tied.argmax(dim=-1)),
           "with temperature=0 and tied highest scores, sample_next_token did not return the lowest tied id "
           "(ties go to the lowest id, as torch.argmax)")
    # p = 0 gives greedy: the most likely token is always kept, and with p = 0 nothing else is
    for row in range(2):
        [tokens] = _samples(student, logits[row:row + 1], device, seed=35 + row, rows=500, top_p=0.0)
        expect(bool((tokens == argmax[row]).all()),
               "with top_p=0, sample_next_token drew tokens other than the most likely one: p = 0 keeps "
               "only the most likely token (greedy), it does not switch the filter off")


@graded("test_sample_next_token")
@on_devices
def test_sample_next_token_shapes_and_generator(student, device):
    for batch, vocab in [(1, 3), (4, 7)]:
        _samples(student, _randn(batch, vocab, seed=batch, device=device), device, seed=0)
    logits = _randn(64, 50, seed=40, scale=0.1, device=device)
    first = _samples(student, logits, device, seed=41, repeat=2)
    again = _samples(student, logits, device, seed=41)
    other = _samples(student, logits, device, seed=42)
    _expect_draws_from_the_generator(first, again, other, differ="drew different tokens",
                                     same="drew the same 64 tokens", hint="pass generator=generator to torch.multinomial")
    # generator=None: PyTorch's global generator, so its seed decides
    [seeded], [alike], [unlike] = (_samples(student, logits, device, seed=seed, global_generator=True)
                                   for seed in (43, 43, 44))
    _expect_draws_from_the_global_generator(seeded, alike, unlike, differ="drew different tokens")
    for kwargs in (dict(temperature=-0.5), dict(top_k=0), dict(top_p=1.5), dict(top_p=-0.1)):
        reply = student.probe("raises", name="sample_next_token", args=[logits.to(device)], kwargs=kwargs)
        setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        expect(reply["raised"] == "ValueError", f"sample_next_token({setting}) must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== greedy_decode
def _decoder(seed: int, device: str) -> dict:
    """The fixture reference of a seeded tiny Llama, for the student; ``_decoded`` runs the
    reference on the same model. One layer: decoding does not depend on the depth, and each
    forward pass costs a third less than with two (the closest top candidates along the tests'
    paths stay more than 2e-3 apart in log-probability, far above float32 rounding)."""
    return fixture("decoder_lm", seed=seed, device=device, layers=1)


@functools.lru_cache(maxsize=None)
def _decoder_model(seed: int, device: str):
    """The model of ``_decoder(seed, device)``, built here once (and its logits remembered, see
    ``_Remembered``): the reference decoders only read it."""
    return _Remembered(build_fixture(_decoder(seed, device)))


class _Remembered(torch.nn.Module):
    """``model`` that computes the logits of each input once and returns the remembered ones after.
    A reference decoding and its two nudged copies (``_decoded``) feed the model the same sequences
    step by step (until a nudge changes a choice), and decodings of one prompt share their first
    steps, so most forward passes of the reference decodings are read back instead of recomputed:
    the logits are those of the model itself (deterministic), the nudges and their noise unchanged."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model, self.logits = model, {}

    def forward(self, input_ids: torch.Tensor):
        key = (tuple(input_ids.shape), tuple(input_ids.flatten().tolist()))
        if key not in self.logits:
            self.logits[key] = self.model(input_ids=input_ids).logits
        return types.SimpleNamespace(logits=self.logits[key])


_DECODED: dict[tuple, torch.Tensor | None] = {}
# Every logit moved by up to this much: a decoding that changes has a near-tie within twice as much.
NUDGE = 1e-3


class _Unsettled(Exception):
    """A reference decoding of the drawn prompt turns on a near-tie (see ``_decoded``)."""


class _Nudged(torch.nn.Module):
    """``model`` with a fresh uniform random amount of at most ``NUDGE`` added to every logit."""

    def __init__(self, model: torch.nn.Module, seed: int):
        super().__init__()
        self.model, self.noise = model, torch.Generator().manual_seed(seed)

    def forward(self, input_ids: torch.Tensor, **kwargs):
        logits = self.model(input_ids=input_ids, **kwargs).logits
        noise = (torch.rand(logits.shape, generator=self.noise) * 2 - 1) * NUDGE
        return types.SimpleNamespace(logits=logits + noise.to(logits.device, logits.dtype))


def _decoded(decode, seed: int, device: str, prompt: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """``decode(model, prompt, *args, **kwargs)`` (``decoding.greedy_decode`` or ``beam_search``) on the
    model of ``_decoder(seed, device)``. The reference is deterministic, so each decoding is computed
    once per grading process (some tests need the same one twice); callers only read the result.

    A decoding is graded only where it is settled: the same on two nudged copies of the model. One
    that turns on a near-tie (two candidates closer than 2 * NUDGE, where an implementation's
    rounding, 1e-6, could decide) raises ``_Unsettled``, and ``_settled`` draws the test's prompts
    again. Drawn prompts meet one about once in a few hundred decodings."""
    key = (decode.__name__, seed, device, tuple(prompt.shape), tuple(prompt.flatten().tolist()), args,
           tuple(sorted(kwargs.items())))
    if key not in _DECODED:
        model = _decoder_model(seed, device)
        result = decode(model, prompt, *args, **kwargs)
        settled = all(torch.equal(decode(_Nudged(model, nudge), prompt, *args, **kwargs), result) for nudge in (1, 2))
        _DECODED[key] = result if settled else None
    if _DECODED[key] is None:
        raise _Unsettled(key)
    return _DECODED[key]


# Which draw of the prompts a ``_settled`` test is on (0: the first).
_ATTEMPT = 0


def _settled(test):
    """Run ``test`` on its first drawn prompts, or, where a reference decoding of them is unsettled
    (``_decoded``), on the next draw: the student's answers are compared only on settled ones."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        global _ATTEMPT
        try:
            for _ATTEMPT in range(20):
                try:
                    return test(*args, **kwargs)
                except _Unsettled:
                    continue
            raise RuntimeError(f"{test.__name__}: no settled prompts in 20 draws")
        finally:
            _ATTEMPT = 0
    return run


def _prompt(batch: int, length: int, *, seed: int, device: str) -> torch.Tensor:
    """Token ids [batch, length] of the draw ``_ATTEMPT`` of the prompts numbered ``seed``."""
    return torch.randint(0, 96, (batch, length), generator=_gen(seed + 1_000_000 * _ATTEMPT)).to(device)


def _expect_tokens(actual, expected: torch.Tensor, what: str) -> None:
    expect_tensor(actual, dtype=torch.int64, device=expected.device, what=what)
    expect(actual.dim() == 2 and actual.size(0) == expected.size(0),
           f"{what} must be [B, T + n], got shape {list(actual.shape)}")
    # The student reads their own tokens and how many differ, never the reference's decoding.
    differ = (f"in {int((actual != expected).sum())} of {expected.numel()} tokens" if actual.shape == expected.shape
              else "in its length")
    expect(actual.shape == expected.shape and torch.equal(actual, expected),
           f"{what} is {actual.tolist()}, which differs from the expected decoding {differ}",
           detail=f"{what} is {actual.tolist()}, expected {expected.tolist()}")


def _expect_decoding(student, decode, seed: int, device: str, prompt: torch.Tensor, *args, what: str,
                     **kwargs) -> None:
    """The student's decoding of ``prompt`` with the model of ``_decoder(seed, device)`` is the
    reference's, ``decode(model, prompt, *args, **kwargs)`` (see ``_decoded``)."""
    _expect_tokens(student.call(_decoder(seed, device), prompt, *args, **kwargs),
                   _decoded(decode, seed, device, prompt, *args, **kwargs), what)


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_matches_reference(student, device):
    for seed, (batch, length, new) in enumerate([(1, 4, 8), (3, 5, 6), (2, 1, 5)]):
        _expect_decoding(student, decoding.greedy_decode, seed, device, _prompt(batch, length, seed=seed, device=device),
                         new, what=f"greedy_decode(model, prompt [{batch}, {length}], max_new_tokens={new})")


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_stops_at_eos(student, device):
    prompt = _prompt(3, 4, seed=1, device=device)
    free = _decoded(decoding.greedy_decode, 1, device, prompt, 10)
    # eos = a token row 0 produces at its 3rd step: row 0 finishes early and is padded with eos
    eos = int(free[0, 4 + 2])
    _expect_decoding(student, decoding.greedy_decode, 1, device, prompt, 10, eos_token_id=eos,
                     what=f"greedy_decode with eos_token_id={eos} (a finished row gets eos at every later step)")
    # one prompt that finishes at its 4th step: decoding stops there
    eos = int(free[2, 4 + 3])
    _expect_decoding(student, decoding.greedy_decode, 1, device, prompt[2:3], 10, eos_token_id=eos,
                     what=f"greedy_decode with eos_token_id={eos} (stop as soon as every row has produced eos)")


@graded("test_greedy_decode")
@on_devices
@_settled
def test_greedy_decode_edge_cases(student, device):
    prompt = _prompt(2, 3, seed=2, device=device)
    _expect_tokens(student.call(_decoder(2, device), prompt, 0), prompt.clone(),
                   "greedy_decode with max_new_tokens=0 (the prompts unchanged)")
    first = _decoded(decoding.greedy_decode, 2, device, prompt[:1], 1)
    eos = int(first[0, -1])
    _expect_decoding(student, decoding.greedy_decode, 2, device, prompt[:1], 5, eos_token_id=eos,
                     what="greedy_decode when eos is the very first generated token")
    _expect_decoding(student, decoding.greedy_decode, 2, device, _prompt(1, 1, seed=3, device=device), 4,
                     what="greedy_decode from a one-token prompt")


# =============================================================== beam_search
# The contract is the textbook algorithm of the docstring (reference: decoding.beam_search). The seeded
# decoders check it at scale; the hand-made bigram models below put one clause at a time to the test,
# with margins far above float32 rounding and exact ties only where the tie rule is tested.
def _bigram(rows: dict[int, dict[int, float]], vocab: int = 7) -> torch.Tensor:
    """[vocab, vocab] log-probabilities: row ``last`` puts the given probabilities on the given
    tokens and 1e-6 on every other token, then is normalised."""
    probs = torch.full((vocab, vocab), 1e-6)
    for last, nexts in rows.items():
        for token, p in nexts.items():
            probs[last, token] = p
    return (probs / probs.sum(-1, keepdim=True)).log()


def _bigram_model(log_probs: torch.Tensor, device: str) -> dict:
    return fixture("bigram_lm", log_probs=log_probs, device=device)


# Vocabulary of the hand-made models: 0 = eos, 1 = a, 2 = b, 3 = c, 4 = d, 5 = f, 6 = the prompt.
EOS = 0

# Refilling and stopping, two beams, alpha = 1. Step 1: "eos" (ln 0.4 = -0.916) is among the 2 best and
# finishes (score -0.916); "a" (-1.050) runs, and "b" (-1.386), the next-best unfinished candidate,
# refills the beam. Step 2: "b eos" (-1.396, score -0.698) and "a c" (-1.561) are the 2 best: "b eos"
# finishes, the pool holds 2 hypotheses and the search stops, so "b eos" wins although "a c eos"
# (-1.562, score -0.521) would beat it one step later.
# Without refilling, only "a" runs: "a eos" (score -0.983) finishes and "eos" wins. Finished beams
# kept running, or a search that does not stop at k finished hypotheses, end elsewhere.
REFILL_AND_STOP = _bigram({6: {0: 0.4, 1: 0.35, 2: 0.25}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99, 4: 0.01},
                           3: {0: 0.999}, 4: {0: 0.999}, 0: {0: 1.0}})

# The length limit finishes the running beams, two beams, alpha = 1, max_new_tokens = 2. Step 1: "a"
# (-0.693) and "b" (refilled) run, "eos" finishes (score -1.204). Step 2 is the last: "a c" (-1.204) and
# "a eos" (-1.609) are the 2 best; "a eos" finishes (score -0.805) and the limit finishes "a c"
# (score -0.602), which wins. A search that scores only the hypotheses ending in eos returns "a eos".
LENGTH_LIMIT = _bigram({6: {1: 0.5, 0: 0.3, 2: 0.2}, 1: {3: 0.6, 0: 0.4}, 2: {0: 0.99}, 3: {0: 1.0}})

# The sign of alpha, three beams: "eos" finishes with L = 1 (log-probability -1.204), "a eos" with
# L = 2 (-1.155), "b d eos" with L = 3 (-1.238), before the pool fills. alpha = -1 ranks them -1.204,
# -2.31, -3.71 (shortest first); alpha = 0 by log-probability alone (-1.204, -1.155, -1.238: "a eos");
# alpha = 1 ranks them -1.204, -0.578, -0.413 (longest first).
LENGTH_SIGNS = _bigram({6: {1: 0.35, 0: 0.3, 2: 0.29, 3: 0.06}, 1: {0: 0.9, 5: 0.1}, 2: {4: 1.0},
                        3: {5: 1.0}, 4: {0: 1.0}, 5: {0: 1.0}})
LENGTH_SIGN_ANSWERS = {-1.0: [[6, 0]], 0.0: [[6, 1, 0]], 1.0: [[6, 2, 4, 0]]}

# Ties. From the prompt, a, b and c tie exactly (equal logits); a and b continue alike, c better.
# One beam takes a (lower token id); two beams take a and b, not c. At step 2 "a eos" and "b eos" tie
# exactly, finish and fill the pool: "a eos", of the earlier beam, ranks first and wins the equal score.
TIES = _bigram({6: {1: 0.3, 2: 0.3, 3: 0.3, 0: 0.1}, 1: {0: 0.6, 5: 0.4}, 2: {0: 0.6, 5: 0.4},
                3: {0: 0.99, 5: 0.01}, 5: {0: 1.0}})


def _expect_beam(student, log_probs: torch.Tensor, expected, device: str, why: str, **kwargs) -> None:
    """beam_search(**kwargs) of the prompt [[6]] on the hand-made model ``log_probs`` is ``expected``."""
    expected = torch.as_tensor(expected, device=device)
    prompt = torch.tensor([[6]], device=device)
    _expect_tokens(student.call(_bigram_model(log_probs, device), prompt, **kwargs), expected,
                   f"beam_search({', '.join(f'{k}={v}' for k, v in kwargs.items())}) {why}")


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_width_on_seeded_decoders(student, device):
    for seed, (length, beams, new) in [(0, (4, 2, 6)), (3, (4, 3, 5)), (5, (1, 4, 4))]:
        _expect_decoding(student, decoding.beam_search, seed, device, _prompt(1, length, seed=seed, device=device),
                         num_beams=beams, max_new_tokens=new,
                         what=f"beam_search(num_beams={beams}, max_new_tokens={new}) without eos (keep the "
                              f"{beams} most likely candidates at every step)")
    for seed, beams in [(6, 2), (7, 3), (2, 5)]:
        prompt = _prompt(1, 4, seed=seed, device=device)
        free = _decoded(decoding.beam_search, seed, device, prompt, num_beams=beams, max_new_tokens=8)
        eos = int(free[0, 4 + 2])  # a token the best beam wants early
        _expect_decoding(student, decoding.beam_search, seed, device, prompt, num_beams=beams, max_new_tokens=8,
                         eos_token_id=eos, what=f"beam_search(num_beams={beams}, max_new_tokens=8, eos_token_id={eos})")


@graded("test_beam_search")
@on_devices
def test_beam_search_eos_refill_and_stopping(student, device):
    _expect_beam(student, REFILL_AND_STOP, [[6, 2, 0]], device,
                 "on a hand-made model: a candidate ending in eos finishes and leaves the beam, the beam is "
                 "refilled to num_beams from the next-best unfinished candidates, and the search stops as soon "
                 "as num_beams hypotheses have finished",
                 num_beams=2, max_new_tokens=6, eos_token_id=EOS)
    _expect_beam(student, LENGTH_LIMIT, [[6, 1, 3]], device,
                 "on a hand-made model: at max_new_tokens every running beam is finished (L = max_new_tokens) "
                 "and competes with the hypotheses that ended in eos",
                 num_beams=2, max_new_tokens=2, eos_token_id=EOS)
    # without eos, token 0 is a token like any other ("eos eos", -0.916, is the most likely pair) and
    # only the length limit finishes hypotheses
    _expect_beam(student, REFILL_AND_STOP, [[6, 0, 0]], device,
                 "on a hand-made model without eos_token_id (only the length limit finishes hypotheses)",
                 num_beams=2, max_new_tokens=2)


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_length_penalty(student, device):
    for alpha, expected in LENGTH_SIGN_ANSWERS.items():
        _expect_beam(student, LENGTH_SIGNS, expected, device,
                     "on a hand-made model (score = log-probability / L ** length_penalty, L = generated tokens "
                     "including eos: length_penalty > 0 favours longer hypotheses, < 0 shorter ones)",
                     num_beams=3, max_new_tokens=6, length_penalty=alpha, eos_token_id=EOS)
    prompt = _prompt(1, 3, seed=4, device=device)
    free = _decoded(decoding.beam_search, 4, device, prompt, num_beams=3, max_new_tokens=8)
    eos = int(free[0, 3 + 3])
    for alpha in (-1.0, 0.0, 2.0):
        _expect_decoding(student, decoding.beam_search, 4, device, prompt, num_beams=3, max_new_tokens=8,
                         length_penalty=alpha, eos_token_id=eos,
                         what=f"beam_search(num_beams=3, length_penalty={alpha}, eos_token_id={eos})")


@graded("test_beam_search")
@on_devices
def test_beam_search_tie_rule(student, device):
    _expect_beam(student, TIES, [[6, 1, 0]], device,
                 "on a hand-made model where tokens 1, 2 and 3 tie exactly: of tied candidates the lower "
                 "token id ranks first", num_beams=1, max_new_tokens=4, eos_token_id=EOS)
    _expect_beam(student, TIES, [[6, 1, 0]], device,
                 "on a hand-made model with exact ties: tied candidates rank by beam (earlier first), then "
                 "token id (lower first), and of equal scores the hypothesis that finished first wins",
                 num_beams=2, max_new_tokens=4, eos_token_id=EOS)


@graded("test_beam_search")
@on_devices
@_settled
def test_beam_search_edge_cases(student, device):
    ref = _decoder(3, device)
    prompt = _prompt(1, 5, seed=3, device=device)
    _expect_tokens(student.call(ref, prompt, num_beams=3, max_new_tokens=0), prompt.clone(),
                   "beam_search with max_new_tokens=0 (the prompt unchanged)")
    # the result is the prompt, unchanged, then the generated tokens; input_ids itself is not modified
    kwargs = dict(num_beams=2, max_new_tokens=3, eos_token_id=7)
    reply = student.probe("call_keeping_inputs", name="beam_search", args=[ref, prompt], kwargs=kwargs, keep=[1])
    _expect_tokens(reply["value"], _decoded(decoding.beam_search, 3, device, prompt, **kwargs),
                   "beam_search(num_beams=2, max_new_tokens=3, eos_token_id=7) (the prompt, then the generated tokens)")
    expect(torch.equal(reply["args_after"][0], prompt), "beam_search modified its input_ids; leave the prompt as it is "
                                                        "(work on a copy)")
    # a batch of prompts and num_beams < 1 are refused
    for args, kwargs, what in [([_prompt(2, 3, seed=3, device=device)], dict(num_beams=2), "a batch of 2 prompts"),
                               ([prompt], dict(num_beams=0), "num_beams=0")]:
        reply = student.probe("raises", name="beam_search", args=[ref, *args], kwargs=dict(max_new_tokens=2, **kwargs))
        expect(reply["raised"] == "ValueError",
               f"beam_search with {what} must raise ValueError, got {reply['raised'] or 'no exception'}")
    # one beam is greedy decoding
    ref = _decoder(7, device)
    prompt = _prompt(1, 3, seed=7, device=device)
    free = _decoded(decoding.greedy_decode, 7, device, prompt, 9, eos_token_id=None)
    for eos in (None, int(free[0, 3 + 4])):
        _expect_tokens(student.call(ref, prompt, num_beams=1, max_new_tokens=9, eos_token_id=eos),
                       _decoded(decoding.greedy_decode, 7, device, prompt, 9, eos_token_id=eos),
                       f"beam_search with num_beams=1 (greedy decoding), eos_token_id={eos}")
