"""Evaluate the shipped checkpoints and write the numbers into their model cards.

    python -m week6_pretraining.evaluate                 # every checkpoint there is, cards + SHA256SUMS
    python -m week6_pretraining.evaluate --no-write      # print only

Measured here, on the full held-out part of the corpus (austen_heldout.txt):

- BERT: masked-LM loss on one fixed, seeded 80/10/10 masking of the held-out rows,
  and top-1 / top-5 accuracy on the cloze set ``data/cloze/cloze.jsonl``;
- GPT: causal-LM loss and perplexity (exp of the loss) on the same rows;
- T5: span-corruption loss on one fixed, seeded corruption of the same rows.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from .card import write_card, write_sha256sums
from .data import DATA
from .train import DEFAULT_OUT, heldout_batches, heldout_loss

CLOZE = DATA / "cloze" / "cloze.jsonl"


def load_cloze(path: Path = CLOZE) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@torch.no_grad()
def cloze_predictions(model, tokenizer, items: list[dict], k: int = 5) -> list[list[str]]:
    """The top-``k`` vocabulary entries at the [MASK] of each item's text."""
    model.eval()
    batch = tokenizer([item["text"] for item in items], padding=True, return_tensors="pt")
    logits = model(**batch).logits
    rows, cols = (batch["input_ids"] == tokenizer.mask_token_id).nonzero(as_tuple=True)
    assert rows.tolist() == list(range(len(items))), "every cloze item needs exactly one [MASK]"
    top = logits[rows, cols].topk(k, dim=-1).indices
    return [tokenizer.convert_ids_to_tokens(ids) for ids in top.tolist()]


def cloze_accuracy(model, tokenizer, items: list[dict] | None = None, k: int = 5) -> dict:
    """Top-1 and top-k accuracy (fractions) of a masked LM on the cloze items."""
    items = load_cloze() if items is None else items
    predictions = cloze_predictions(model, tokenizer, items, k)
    top1 = sum(p[0] == item["answer"] for p, item in zip(predictions, items))
    topk = sum(item["answer"] in p for p, item in zip(predictions, items))
    return {"items": len(items), "top1": top1 / len(items), f"top{k}": topk / len(items), "predictions": predictions}


def evaluate_mlm(folder: Path) -> dict:
    from transformers import AutoTokenizer, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForMaskedLM.from_pretrained(folder).eval()
    batches = heldout_batches(tokenizer, "mlm")
    loss = heldout_loss(model, batches, "mlm")
    cloze = cloze_accuracy(model, tokenizer)
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_mlm_loss": round(loss, 4),
            "heldout_mlm_predicted_tokens": sum(int((b[1] != -100).sum()) for b in batches),
            "cloze_items": cloze["items"],
            "cloze_top1": round(cloze["top1"], 4), "cloze_top5": round(cloze["top5"], 4)}


def evaluate_clm(folder: Path) -> dict:
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    batches = heldout_batches(tokenizer, "clm")
    loss = heldout_loss(model, batches, "clm")
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_clm_loss": round(loss, 4),
            "heldout_perplexity": round(math.exp(loss), 2)}


def evaluate_span(folder: Path) -> dict:
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = T5ForConditionalGeneration.from_pretrained(folder).eval()
    batches = heldout_batches(tokenizer, "span")
    loss = heldout_loss(model, batches, "span")
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_span_loss": round(loss, 4),
            "heldout_span_predicted_tokens": sum(int((b[1] != -100).sum()) for b in batches)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlm", type=Path, default=DEFAULT_OUT["mlm"])
    parser.add_argument("--clm", type=Path, default=DEFAULT_OUT["clm"])
    parser.add_argument("--span", type=Path, default=DEFAULT_OUT["span"])
    parser.add_argument("--no-write", action="store_true", help="print the metrics, touch no file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = {}
    for objective, folder, evaluate in [("mlm", args.mlm, evaluate_mlm), ("clm", args.clm, evaluate_clm),
                                        ("span", args.span, evaluate_span)]:
        if not (folder / "config.json").is_file():
            print(f"skipping {folder}: no checkpoint there")
            continue
        results[objective] = metrics = evaluate(folder)
        print(f"{objective} ({folder.name}): {metrics}")
        if not args.no_write:
            # The card and the sums are (re)written together: a card always describes these bytes.
            (folder / "eval_results.json").write_text(json.dumps(metrics, indent=1) + "\n")
            log = json.loads((folder / "train_log.json").read_text())
            write_card(folder, objective, log, metrics)
            write_sha256sums(folder)
    return results


if __name__ == "__main__":
    main()
