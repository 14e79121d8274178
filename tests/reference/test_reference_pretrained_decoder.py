"""Optional: the decoding and loss references on the real pre-trained decoder.

Skipped unless the course's loader ``week6_helpers.load_decoder`` (the course
package, installed in the environment) imports and loads its model. The tiny random models of the
other test files already pin the algorithms down; this file checks that nothing
changes on a real checkpoint (SmolLM2-135M, a LlamaForCausalLM) and its tokenizer.
"""

import pytest
import torch

from autograder.reference.decoding import beam_search, greedy_decode
from autograder.reference.losses import clm_loss

pytestmark = pytest.mark.slow  # loads a 135M-parameter model


@pytest.fixture(scope="module")
def real_decoder():
    try:
        from week6_helpers import load_decoder
    except ImportError as error:
        pytest.skip(f"week6_helpers.load_decoder is not available: {error}")
    try:
        tokenizer, model = load_decoder()
    except Exception as error:  # missing weights package, conversion failure, ...
        pytest.skip(f"the pre-trained decoder could not be loaded: {error}")
    return tokenizer, model.eval()


PROMPTS = ["The capital of France is", "Once upon a time, there"]


def _prompt_batch(tokenizer):
    """Both prompts cut to a common length: a batch without padding."""
    rows = [tokenizer(text).input_ids for text in PROMPTS]
    length = min(map(len, rows))
    return torch.tensor([row[:length] for row in rows])


def test_greedy_matches_generate_on_real_decoder(real_decoder):
    tokenizer, model = real_decoder
    eos = tokenizer.eos_token_id
    ids = _prompt_batch(tokenizer)
    expected = model.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False,
        max_new_tokens=10, eos_token_id=eos, pad_token_id=eos,
    )
    assert torch.equal(greedy_decode(model, ids, 10, eos_token_id=eos), expected)


def test_beam_search_matches_generate_on_real_decoder(real_decoder):
    tokenizer, model = real_decoder
    eos = tokenizer.eos_token_id
    ids = tokenizer(PROMPTS[0], return_tensors="pt").input_ids
    for num_beams, length_penalty in [(3, 1.0), (2, 2.0)]:
        expected = model.generate(
            ids, attention_mask=torch.ones_like(ids), num_beams=num_beams, do_sample=False,
            max_new_tokens=6, length_penalty=length_penalty, early_stopping=True,
            eos_token_id=eos, pad_token_id=eos,
        )
        ours = beam_search(
            model, ids, num_beams=num_beams, max_new_tokens=6,
            length_penalty=length_penalty, eos_token_id=eos,
        )
        assert torch.equal(ours, expected), (num_beams, length_penalty)


def test_clm_loss_matches_model_loss_on_real_decoder(real_decoder):
    tokenizer, model = real_decoder
    tokenizer.padding_side = "right"
    batch = tokenizer(["Paris is the capital of France.", "Hello world"], return_tensors="pt", padding=True)
    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
    with torch.no_grad():
        out = model(**batch, labels=labels)
    ours = clm_loss(out.logits, batch.input_ids, batch.attention_mask)
    # tolerance: float32 reductions over a 49k-token vocabulary
    torch.testing.assert_close(ours, out.loss, atol=1e-5, rtol=1e-5)
    assert 0.5 < ours.item() < 10  # a trained model: far below ln(49152) = 10.8
