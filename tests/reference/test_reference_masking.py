"""masking.mask_tokens: its contract, and transformers.DataCollatorForLanguageModeling as a cross-check.

The contract fixes the distribution of the output, not the order of the random draws; the
reference happens to draw in the collator's order, which lets the library check it draw for draw.
"""

import math

import pytest
import torch

from autograder.reference.masking import mask_tokens

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _padded_batch(tokenizer, seed, batch=16, length=64):
    """[CLS] random words [SEP] [PAD]...: a realistic batch with specials and padding."""
    g = torch.Generator().manual_seed(seed)
    specials = set(tokenizer.all_special_ids)
    ordinary = torch.tensor([i for i in range(len(tokenizer)) if i not in specials])
    ids = torch.full((batch, length), tokenizer.pad_token_id)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=g)
    words = ordinary[torch.randint(len(ordinary), (batch, length), generator=g)]
    real = torch.arange(length)[None, :] < lengths[:, None]
    ids = torch.where(real, words, ids)
    ids[:, 0] = tokenizer.cls_token_id
    ids[torch.arange(batch), lengths - 1] = tokenizer.sep_token_id
    return ids


def _ours(ids, tokenizer, seed, **kw):
    return mask_tokens(
        ids,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        special_token_ids=tokenizer.all_special_ids,
        generator=torch.Generator(device=ids.device).manual_seed(seed),
        **kw,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identical_to_hf_collator_with_same_seed(bert_tokenizer, seed):
    """The reference draws in the HF collator's order (its own choice), so the same seed gives the same batch."""
    from transformers import DataCollatorForLanguageModeling

    ids = _padded_batch(bert_tokenizer, seed)
    collator = DataCollatorForLanguageModeling(bert_tokenizer, mlm_probability=0.15, seed=seed)
    hf = collator([{"input_ids": row.tolist()} for row in ids])
    ours_ids, ours_labels = _ours(ids, bert_tokenizer, seed)
    assert torch.equal(ours_ids, hf["input_ids"])
    assert torch.equal(ours_labels, hf["labels"])


def test_statistics_match_bert_recipe_and_hf_collator(bert_tokenizer):
    """15 % selected, then 80 / 10 / 10, each within 5 standard deviations."""
    from transformers import DataCollatorForLanguageModeling

    tok = bert_tokenizer
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=1234)

    def counts(masked, labels, ids):
        special = torch.isin(ids, torch.tensor(tok.all_special_ids))
        selected = labels != -100
        return {
            "eligible": int((~special).sum()),
            "selected": int(selected.sum()),
            "mask": int((selected & (masked == tok.mask_token_id)).sum()),
            "kept": int((selected & (masked == ids)).sum()),
            "special_selected": int((selected & special).sum()),
        }

    ours_total, hf_total = {}, {}
    for seed in range(20):
        ids = _padded_batch(tok, 100 + seed, batch=32, length=128)
        ours = counts(*_ours(ids, tok, 100 + seed), ids)
        hf_batch = collator([{"input_ids": row.tolist()} for row in ids])
        hf = counts(hf_batch["input_ids"], hf_batch["labels"], ids)
        for key in ours:
            ours_total[key] = ours_total.get(key, 0) + ours[key]
            hf_total[key] = hf_total.get(key, 0) + hf[key]

    def within_5_sigma(k, n, p):
        # binomial: |k - n p| <= 5 sqrt(n p (1 - p))
        return abs(k - n * p) <= 5 * math.sqrt(n * p * (1 - p))

    # A random replacement equals the original with probability 1 / |V|, so
    # "kept" = 10 % + 10 % / |V| of the selected.
    p_kept = 0.1 + 0.1 / len(tok)
    for c in (ours_total, hf_total):
        assert c["special_selected"] == 0
        assert within_5_sigma(c["selected"], c["eligible"], 0.15)
        assert within_5_sigma(c["mask"], c["selected"], 0.8)
        assert within_5_sigma(c["kept"], c["selected"], p_kept)
        # random = selected - mask - kept, whose share is 10 % - 10 % / |V|
        assert within_5_sigma(c["selected"] - c["mask"] - c["kept"], c["selected"], 0.1 - 0.1 / len(tok))


@pytest.mark.parametrize("device", DEVICES)
def test_contract_details(bert_tokenizer, device):
    tok = bert_tokenizer
    ids = _padded_batch(tok, 7).to(device)
    before = ids.clone()
    masked, labels = _ours(ids, tok, 7)
    again_masked, again_labels = _ours(ids, tok, 7)

    assert torch.equal(ids, before)  # input not modified
    assert masked.dtype == ids.dtype and labels.dtype == ids.dtype
    assert masked.device == ids.device and labels.device == ids.device
    assert torch.equal(masked, again_masked) and torch.equal(labels, again_labels)  # same seed, same output
    selected = labels != -100
    assert torch.equal(labels[selected], ids[selected])  # labels are the originals
    assert torch.equal(masked[~selected], ids[~selected])  # unselected untouched
    assert not selected[ids == tok.pad_token_id].any()  # padding never selected
    assert ((masked >= 0) & (masked < len(tok))).all()

    other_masked, _ = _ours(ids, tok, 8)
    assert not torch.equal(other_masked, masked)  # a different seed changes the draw


def test_probability_extremes():
    ids = torch.tensor([[101, 5, 6, 7, 102, 0]])
    specials = [0, 101, 102, 103]
    masked, labels = mask_tokens(
        ids, mask_token_id=103, vocab_size=200, special_token_ids=specials, mlm_probability=0.0
    )
    assert torch.equal(masked, ids) and (labels == -100).all()
    _, labels = mask_tokens(ids, mask_token_id=103, vocab_size=200, special_token_ids=specials, mlm_probability=1.0)
    assert torch.equal(labels, torch.tensor([[-100, 5, 6, 7, -100, -100]]))
