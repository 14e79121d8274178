"""Evaluate the shipped checkpoints and write the numbers into their model cards.

    python -m week6_pretraining.evaluate                 # every checkpoint there is, cards + SHA256SUMS
    python -m week6_pretraining.evaluate DIR [DIR ...]   # these checkpoint folders only
    python -m week6_pretraining.evaluate --no-write      # print only

Measured here, on the full held-out part of the corpus (austen_heldout.txt):

- BERT: masked-LM loss on one fixed, seeded 80/10/10 masking of the held-out rows,
  and top-1 / top-5 accuracy on the cloze set ``data/cloze/cloze.jsonl``, overall and
  for function and content words (nouns, verbs, adjectives) apart;
- GPT: causal-LM loss and perplexity (exp of the loss) on the same rows, and the same cloze set
  read left to right: is the answer among the next tokens predicted after the words before the
  blank (the words after it unseen)?
- T5: span-corruption loss on one fixed, seeded corruption of the same rows, and the
  same cloze set with each blank a dropped span (``<extra_id_0>``): does the first token
  the decoder writes after the sentinel name the answer?
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from .card import write_card, write_sha256sums
from .data import DATA
from .functions import Functions, installed
from .train import CHECKPOINTS, heldout_batches, heldout_loss

CLOZE = DATA / "cloze" / "cloze.jsonl"
EVERYDAY_FROM = 126  # the everyday content-word sentences: cloze-126 to cloze-242 (data/cloze/README.md)


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


@torch.no_grad()
def span_cloze_predictions(model, tokenizer, items: list[dict], k: int = 5) -> list[list[str]]:
    """The top-``k`` first tokens a T5 writes for the span dropped at each item's blank.

    The blank becomes ``<extra_id_0>`` in the encoder's input (no [CLS] or [SEP]: the T5 never
    read them as a row's frame); the decoder reads its start token and ``<extra_id_0>``, and the
    logits at that position rank what comes next: the first token of the dropped span.
    """
    model.eval()
    sentinel = tokenizer.convert_tokens_to_ids("<extra_id_0>")
    texts = [item["text"].replace("[MASK]", "<extra_id_0>") for item in items]
    batch = tokenizer(texts, padding=True, add_special_tokens=False, return_tensors="pt")
    assert ((batch["input_ids"] == sentinel).sum(dim=1) == 1).all(), "every cloze item needs exactly one [MASK]"
    decoder = torch.tensor([[model.config.decoder_start_token_id, sentinel]] * len(items))
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   decoder_input_ids=decoder).logits[:, -1]
    return [tokenizer.convert_ids_to_tokens(ids) for ids in logits.topk(k, dim=-1).indices.tolist()]


@torch.no_grad()
def next_token_cloze_predictions(model, tokenizer, items: list[dict], k: int = 5) -> list[list[str]]:
    """The top-``k`` next tokens a causal LM predicts after the words before each item's blank.

    The words after the blank are never read: this is the cloze as a left-to-right model can
    play it. The row starts with [CLS], as the course GPT's rows do.
    """
    model.eval()
    predictions = []
    for item in items:
        left = item["text"].split("[MASK]")[0]
        ids = [tokenizer.cls_token_id] + tokenizer(left, add_special_tokens=False)["input_ids"]
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        predictions.append(tokenizer.convert_ids_to_tokens(logits.topk(k).indices.tolist()))
    return predictions


def is_everyday(item: dict) -> bool:
    """Whether a cloze item is one of the set's everyday content-word sentences."""
    return int(item["id"].removeprefix("cloze-")) >= EVERYDAY_FROM


def word_kind(item: dict) -> str:
    """``function`` or ``content`` (the cloze set's nouns, verbs and adjectives)."""
    return "function" if item["kind"] == "function" else "content"


def cloze_accuracy(model, tokenizer, items: list[dict] | None = None, k: int = 5, predict=cloze_predictions) -> dict:
    """Top-1 and top-k accuracy (fractions) on the cloze items, overall and per word kind
    (``by_kind``: function and content words); ``predict`` ranks the candidates (a masked LM's
    by default, :func:`span_cloze_predictions` for a T5)."""
    items = load_cloze() if items is None else items
    predictions = predict(model, tokenizer, items, k)

    def scores(pairs):
        pairs = list(pairs)
        return {"items": len(pairs), "top1": sum(p[0] == item["answer"] for p, item in pairs) / len(pairs),
                f"top{k}": sum(item["answer"] in p for p, item in pairs) / len(pairs)}

    result = scores(zip(predictions, items))
    kinds = [word_kind(item) for item in items]
    result["by_kind"] = {kind: scores((p, item) for p, item, of in zip(predictions, items, kinds) if of == kind)
                         for kind in ("function", "content") if kind in kinds}  # a kind with no item has no score
    result["predictions"] = predictions
    return result


def _cloze_metrics(cloze: dict) -> dict:
    metrics = {"cloze_items": cloze["items"], "cloze_top1": round(cloze["top1"], 4), "cloze_top5": round(cloze["top5"], 4)}
    for kind, scores in cloze["by_kind"].items():
        metrics.update({f"cloze_{kind}_items": scores["items"], f"cloze_{kind}_top1": round(scores["top1"], 4),
                        f"cloze_{kind}_top5": round(scores["top5"], 4)})
    return metrics


def _load_and_score(folder: Path, model_class: str, objective: str, functions: Functions):
    """(tokenizer, model, held-out batches, held-out loss) of the checkpoint in ``folder``,
    the rows corrupted and scored by ``functions``."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = getattr(transformers, model_class).from_pretrained(folder).eval()
    batches = heldout_batches(tokenizer, objective, mask_fn=functions.mask_fn, noise_fn=functions.noise_fn,
                              corrupt_fn=functions.corrupt_fn)
    loss = heldout_loss(model, batches, objective, mlm_loss_fn=functions.mlm_loss_fn,
                        clm_loss_fn=functions.clm_loss_fn, span_loss_fn=functions.span_loss_fn)
    return tokenizer, model, batches, loss


def evaluate_mlm(folder: Path, functions: Functions) -> dict:
    tokenizer, model, batches, loss = _load_and_score(folder, "BertForMaskedLM", "mlm", functions)
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_mlm_loss": round(loss, 4),
            "heldout_mlm_predicted_tokens": sum(int((b[1] != -100).sum()) for b in batches),
            **_cloze_metrics(cloze_accuracy(model, tokenizer))}


def evaluate_clm(folder: Path, functions: Functions) -> dict:
    tokenizer, model, batches, loss = _load_and_score(folder, "GPT2LMHeadModel", "clm", functions)
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_clm_loss": round(loss, 4),
            "heldout_perplexity": round(math.exp(loss), 2),
            **_cloze_metrics(cloze_accuracy(model, tokenizer, predict=next_token_cloze_predictions))}


def evaluate_span(folder: Path, functions: Functions) -> dict:
    tokenizer, model, batches, loss = _load_and_score(folder, "T5ForConditionalGeneration", "span", functions)
    return {"heldout_rows": sum(len(b[0]) for b in batches), "heldout_span_loss": round(loss, 4),
            "heldout_span_predicted_tokens": sum(int((b[1] != -100).sum()) for b in batches),
            **_cloze_metrics(cloze_accuracy(model, tokenizer, predict=span_cloze_predictions))}


EVALUATIONS = {"mlm": evaluate_mlm, "clm": evaluate_clm, "span": evaluate_span}


def main(argv=None, functions: Functions | None = None):
    """The command line; ``functions`` None: the reference ones of the installed grader."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="*",
                        help="checkpoint folders (default: every folder of data/checkpoints with a training log)")
    parser.add_argument("--no-write", action="store_true", help="print the metrics, touch no file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    folders = args.folders or sorted(p.parent for p in CHECKPOINTS.glob("*/train_log.json"))
    functions = installed() if functions is None else functions
    results = {}
    for folder in folders:
        if not (folder / "config.json").is_file() or not (folder / "train_log.json").is_file():
            print(f"skipping {folder}: no checkpoint with a training log there")
            continue
        log = json.loads((folder / "train_log.json").read_text())
        objective = log["objective"]
        try:
            functions.require(objective)
        except ValueError as err:
            parser.error(str(err))
        results[folder.name] = metrics = EVALUATIONS[objective](folder, functions)
        print(f"{objective} ({folder.name}): {metrics}")
        if not args.no_write:
            # The card and the sums are (re)written together: a card always describes these bytes.
            (folder / "eval_results.json").write_text(json.dumps(metrics, indent=1) + "\n")
            write_card(folder, objective, log, metrics)
            write_sha256sums(folder)
    return results


if __name__ == "__main__":
    main()
