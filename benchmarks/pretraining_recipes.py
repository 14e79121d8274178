"""What it takes to fill everyday blanks: pre-training recipes side by side on the cloze set.

Each recipe trains one model from random weights with ``week6_pretraining.train`` for a
fixed wall-clock budget (the schedule follows the clock, so every run warms up and decays
fully), then scores it as the shipped cards do: held-out loss on Austen's held-out rows and
top-1 / top-5 on ``data/cloze/cloze.jsonl`` for function words, content words and the
everyday content-word part (ids 126 to 242). A masked LM reads both sides of the blank, a
causal LM the words before it only (``next_token_cloze_predictions``).

    .venv/bin/python benchmarks/pretraining_recipes.py RECIPE [RECIPE ...] [--minutes 35]
    .venv/bin/python benchmarks/pretraining_recipes.py --checkpoint FOLDER [FOLDER ...]

A recipe is ``objective:size:text[:flag...]``, e.g. ``mlm:small:austen`` or
``mlm:medium:austen+wordnet+novels:bf16:wwm`` (sizes: ``week6_pretraining.train.SIZES``; text
sources: ``week6_pretraining.data.SOURCES``; flags: ``bf16`` for bfloat16 autocast, ``wwm``
for whole-word masking). Recipes run one after another on one thread each; start two
processes to use two cores. ``--checkpoint`` scores models trained already (by
``week6_pretraining.train``, whose log gives the recipe) with the same measures, so a
fixed-step run such as a shipped model sits in the same table. Results are added to
``benchmarks/results/pretraining_recipes.json``, keyed by recipe and budget, or by folder.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from autograder.build.pretraining import reference_functions
from week6_helpers.small_models import load_mlm, load_small_gpt
from week6_pretraining.data import SOURCES
from week6_pretraining.evaluate import (cloze_accuracy, cloze_predictions, is_everyday, load_cloze,
                                        next_token_cloze_predictions)
from week6_pretraining.functions import Functions
from week6_pretraining.train import SIZES, TrainConfig, heldout_batches, heldout_loss, train

RESULTS = Path(__file__).resolve().parent / "results" / "pretraining_recipes.json"
# The course's references, as the shipped checkpoints were trained with them.
REFERENCES = Functions(**reference_functions())


FLAGS = ("bf16", "wwm")


def parse(recipe: str) -> dict:
    parts = recipe.split(":")
    flags = parts[3:]
    if len(parts) < 3 or parts[0] not in ("mlm", "clm") or parts[1] not in SIZES \
            or any(s not in SOURCES for s in parts[2].split("+")) or any(f not in FLAGS for f in flags) \
            or len(set(flags)) != len(flags) or ("wwm" in flags and parts[0] != "mlm"):
        raise SystemExit(f"bad recipe {recipe!r}: write objective:size:text[:flag...], objective mlm or clm, "
                         f"size one of {sorted(SIZES)}, text sources joined by + from {sorted(SOURCES)}, "
                         f"flags from {FLAGS} (wwm for mlm only)")
    return {"objective": parts[0], "size": parts[1], "text": tuple(parts[2].split("+")),
            "bf16": "bf16" in flags, "whole_word": "wwm" in flags}


def run_row(log: dict, threads: int) -> dict:
    """What a training log says about the run, for the results table."""
    return {"parameters": log["parameters"], "steps": log["steps"], "tokens_processed": log["tokens_processed"],
            "tokens_predicted": log["tokens_predicted"], "train_stream_tokens": log["train_stream_tokens"],
            "epochs": log["epochs"], "seconds": log["seconds"], "cpu_seconds": log["cpu_seconds"],
            "threads": threads, "machine": platform.processor() or platform.machine(), "torch": torch.__version__}


def save_row(key: str, row: dict) -> None:
    print(json.dumps(row), flush=True)
    # Several processes may add results at once: re-read just before writing.
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[key] = row
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def score_checkpoint(folder: Path) -> None:
    """Score a trained folder (weights + ``train_log.json``) as the recipes are scored."""
    log = json.loads((folder / "train_log.json").read_text())
    objective = log["objective"]
    if objective not in ("mlm", "clm"):
        raise SystemExit(f"{folder}: objective {objective!r}; the cloze recipes score mlm and clm models")
    tokenizer, model = (load_mlm if objective == "mlm" else load_small_gpt)(str(folder))
    row = {"checkpoint": folder.name, "command": log.get("command"), **run_row(log, log.get("torch_threads")),
           "date": time.strftime("%Y-%m-%d"), **score(model, tokenizer, objective)}
    save_row(f"checkpoint:{folder.name}@{log['steps']}steps", row)


def score(model, tokenizer, objective) -> dict:
    items = load_cloze()
    predict = cloze_predictions if objective == "mlm" else next_token_cloze_predictions
    everyday = [item for item in items if is_everyday(item)]
    with torch.no_grad():
        overall = cloze_accuracy(model, tokenizer, items, predict=predict)
        daily = cloze_accuracy(model, tokenizer, everyday, predict=predict)
        batches = heldout_batches(tokenizer, objective, mask_fn=REFERENCES.mask_fn)
        loss = heldout_loss(model, batches, objective, mlm_loss_fn=REFERENCES.mlm_loss_fn,
                            clm_loss_fn=REFERENCES.clm_loss_fn)
    pct = lambda x: round(100 * x, 1)  # noqa: E731
    scores = {f"{kind}_top{k}": pct(overall["by_kind"][kind][f"top{k}"]) for kind in ("function", "content") for k in (1, 5)}
    scores.update(everyday_top1=pct(daily["top1"]), everyday_top5=pct(daily["top5"]), heldout_loss=round(loss, 4))
    return scores


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipes", nargs="*")
    parser.add_argument("--checkpoint", type=Path, nargs="+", default=[], help="score trained folders instead")
    parser.add_argument("--minutes", type=float, default=35.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if bool(args.recipes) == bool(args.checkpoint):
        parser.error("give recipes to train, or --checkpoint folders to score (not both)")
    recipes = [(r, parse(r)) for r in args.recipes]
    torch.set_num_threads(args.threads)
    for folder in args.checkpoint:
        score_checkpoint(folder)
    for name, recipe in recipes:
        config = TrainConfig(recipe["objective"], max_steps=10**7, minutes=args.minutes, size=SIZES[recipe["size"]],
                             text=recipe["text"], bf16=recipe["bf16"], whole_word=recipe["whole_word"],
                             seed=args.seed, eval_every=500)
        model, tokenizer, log = train(config, REFERENCES, progress=False)
        model.float()
        row = {"recipe": name, "minutes": args.minutes, "seed": args.seed, **run_row(log, args.threads),
               "date": time.strftime("%Y-%m-%d"), **score(model, tokenizer, recipe["objective"])}
        save_row(f"{name}@{args.minutes:g}min", row)


if __name__ == "__main__":
    main()
