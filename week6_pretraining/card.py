"""Model cards (README.md) and SHA256SUMS for the shipped checkpoints.

The cards are generated from the training log and the evaluation results, so
every number in them was measured, and regenerating them after a retraining
cannot leave a stale figure behind.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from week6_helpers.small_models import BY_FOLDER, DEFAULT_FOLDER

# objective -> (its default checkpoint's folder, what the card's subtitle calls the model)
TITLES = {
    "mlm": (DEFAULT_FOLDER["mlm"], "a toy BERT (masked LM)"),
    "clm": (DEFAULT_FOLDER["clm"], "a toy GPT-2 (causal LM)"),
    "span": (DEFAULT_FOLDER["span"], "a toy T5 (span corruption)"),
}
OPTIMISERS = {
    "AdamW": "AdamW (beta 0.9/0.98, weight decay 0.01 except biases and LayerNorm), gradient clipping at 1.0",
    "Adafactor": ("Adafactor, T5's optimiser (each step scaled by the weight's root mean square, no momentum, "
                  "no weight decay), gradient clipping at 1.0; see `make_optimizer` in `week6_pretraining/train.py`"),
}


def write_sha256sums(folder: Path) -> None:
    """``sha256sum -c SHA256SUMS`` format, every file of the folder but the list itself."""
    lines = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != "SHA256SUMS"):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def curve_table(log: dict, points: int = 6) -> str:
    """A few rows of the held-out curve: tokens processed/predicted -> loss."""
    evals = log["evals"]
    picks = sorted({round(i * (len(evals) - 1) / (points - 1)) for i in range(points)})
    head = "| step | tokens processed | tokens predicted | held-out loss (64 rows) |\n|---:|---:|---:|---:|\n"
    return head + "\n".join(
        f"| {evals[i]['step']:,} | {evals[i]['tokens_processed']:,} | {evals[i]['tokens_predicted']:,} | "
        f"{evals[i]['heldout_loss']:.3f} |" for i in picks)


def _warmup_text(log: dict) -> str:
    phases = log.get("context_warmup") or []
    if not phases:
        return f"{log['context']} tokens throughout"
    parts, start = [], 0.0
    for end, context in phases:
        parts.append(f"{context} for steps {start:.1%}-{end:.1%}")
        start = end
    parts.append(f"{log['context']} for the remaining {1 - start:.0%}")
    text = ("context warm-up, always " + f"{log['tokens_per_step']:,} tokens per step: " + ", ".join(parts)
            + " (without it the BERT never left the word-frequency plateau; see `week6_pretraining/train.py`)")
    if log["objective"] == "span":
        text += (". While the rows are short, the held-out loss on 128-token rows rises: a short row "
                 "holds 1 to 3 dropped spans, so the decoder has not yet written targets as long as a "
                 "full row's (6 spans) nor met the later sentinels")
    return text


def data_text(log: dict) -> str:
    """The card's training text: Austen alone (logs from before ``--text`` say nothing), or the
    files of each source in the order they were read."""
    text = log.get("text") or ["austen"]
    if text == ["austen"]:
        return ("`data/corpus/austen_train.txt`: Jane Austen's six novels minus the last 5 % of each\n"
                f"(9,493 paragraphs, 672,500 words, {log['train_stream_tokens']:,} tokens with one `[SEP]` after\n"
                "each paragraph). ")
    from .data import SOURCES

    files = "".join(f"- `data/corpus/{SOURCES[name].file}`: {SOURCES[name].about}\n" for name in text)
    return (f"The training text, read in this order ({log['train_stream_tokens']:,} tokens with one `[SEP]` "
            f"after each paragraph; provenance and licences in `data/corpus/README.md`):\n\n{files}\n")


def text_title(log: dict) -> str:
    """The training text as the card's title names it: "Jane Austen", "Jane Austen and ...",
    "Jane Austen, WordNet's examples and ..." (the folder names keep the Austen prefix)."""
    from .data import SOURCES

    names = [SOURCES[name].short for name in (log.get("text") or ["austen"])]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def licence_text(log: dict) -> str:
    if (log.get("text") or ["austen"]) == ["austen"]:
        return ("The training text is in the public domain (Jane Austen, 1811-1817; packaging MIT, see\n"
                "`data/corpus/README.md`).")
    return ("The training text is in the public domain, except WordNet's examples (WordNet 3.0 licence:\n"
            "\"WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.\"); see\n"
            "`data/corpus/README.md`.")


def reproduce_command(objective: str, log: dict, name: str | None = None) -> str:
    """The training command, rebuilt from the logged settings (the output path only where it is
    not the objective's default folder)."""
    from .train import SIZES

    flags = f"--objective {objective} --max-steps {log['max_steps']} --batch-size {log['batch_size']} --lr {log['peak_lr']:g} --seed {log['seed']}"
    size = next((key for key, value in SIZES.items() if vars(value) == log["size"]), None)
    if size not in (None, "small"):
        flags += f" --size {size}"
    if name not in (None, TITLES[objective][0]):
        flags += f" --out data/checkpoints/{name}"
    if log.get("text") not in (None, ["austen"]):
        flags += " --text " + " ".join(log["text"])
    if log.get("tokenizer"):
        flags += f" --tokenizer {log['tokenizer']}"
    if log.get("whole_word_masking"):
        flags += " --whole-word-masking"
    if log.get("bf16_autocast") and log["device"] == "cpu":
        flags += " --bf16"
    if log["device"] == "cpu":
        flags += f" --threads {log['torch_threads']}"
    if not log.get("context_warmup"):
        flags += " --no-context-warmup"
    return "python -m week6_pretraining.train " + flags


def cloze_rows(metrics: dict, how: str) -> str:
    """The cloze results of a card, overall and for function and content words apart."""
    rows = (f"| cloze top-1 accuracy ({metrics['cloze_items']} items, `data/cloze/`; {how}) | {metrics['cloze_top1']:.1%} |\n"
            f"| cloze top-5 accuracy | {metrics['cloze_top5']:.1%} |\n")
    for kind, words in (("function", "function words"), ("content", "content words: nouns, verbs, adjectives")):
        if f"cloze_{kind}_top1" in metrics:
            rows += (f"| cloze top-1 / top-5, {words} ({metrics[f'cloze_{kind}_items']} items) | "
                     f"{metrics[f'cloze_{kind}_top1']:.1%} / {metrics[f'cloze_{kind}_top5']:.1%} |\n")
    return rows


def render(objective: str, log: dict, metrics: dict, size_bytes: int, files: list[str],
           siblings: list[str] | None = None, name: str | None = None) -> str:
    """The card's markdown; ``siblings``: the other objectives whose checkpoints ship beside this
    one (default: all of them); ``name``: the folder, when not the objective's default."""
    default_name, title = TITLES[objective]
    name = name or default_name
    s = log["size"]
    is_mlm = objective == "mlm"
    siblings = [o for o in TITLES if o != objective] if siblings is None else siblings
    others = " and ".join(f"`{TITLES[o][0]}`" for o in siblings)
    plural = len(siblings) > 1
    objectives = " vs ".join(o.upper() for o in TITLES if o == objective or o in siblings)
    from .train import SIZES

    small = vars(SIZES["small"])
    is_default_size = log["size"] == small
    default_size = f"{small['layers']} layers of width {small['hidden']}"
    larger = ("" if is_default_size or name == default_name else
              f" `{default_name}` is this recipe at that size: compare the two for what size buys.")
    if is_mlm:
        results = (
            f"| held-out masked-LM loss (all {metrics['heldout_rows']} held-out rows, one fixed seeded masking) | "
            f"{metrics['heldout_mlm_loss']:.3f} nats |\n"
            + cloze_rows(metrics, "the blank is `[MASK]`"))
        objective_text = (
            "Masked language modelling, BERT's recipe: in every row 15 % of the non-special tokens are "
            "selected; of those 80 % become `[MASK]`, 10 % a random token and 10 % stay unchanged "
            "(`autograder.reference.masking.mask_tokens`). The loss is the mean cross-entropy at the "
            "selected positions (`autograder.reference.losses.mlm_loss`). No next-sentence prediction."
            if not log.get("whole_word_masking") else
            "Masked language modelling, BERT's recipe with whole-word masking: in every row 15 % of the "
            "words are selected, and every WordPiece of a selected word is a target "
            "(`autograder.reference.masking.whole_word_mask`), so a blank is never a piece whose neighbours "
            "spell the rest of its word; of the targets 80 % become `[MASK]`, 10 % a random token and 10 % "
            "stay unchanged. The loss is the mean cross-entropy at the targets "
            "(`autograder.reference.losses.mlm_loss`). The held-out rows are masked token by token "
            "(`autograder.reference.masking.mask_tokens`), as for a model trained without it, so the two "
            "held-out losses compare. No next-sentence prediction.")
    elif objective == "span":
        results = (
            f"| held-out span-corruption loss (all {metrics['heldout_rows']} held-out rows, one fixed seeded "
            f"corruption) | {metrics['heldout_span_loss']:.3f} nats per target token |\n"
            f"| target tokens scored | {metrics['heldout_span_predicted_tokens']:,} |\n"
            + cloze_rows(metrics, "the blank is a dropped span, `<extra_id_0>`; the first token written for it"))
        objective_text = (
            "Span corruption, T5's recipe: in every row (its `[CLS]` left out) 15 % of the tokens are "
            "dropped in spans of mean length 3 (`autograder.reference.span_corruption.random_spans_noise_mask`); "
            "the encoder reads the row with each dropped span replaced by one sentinel, and the decoder writes "
            "each sentinel followed by its span, then a final sentinel (`span_corrupt`). The loss is the "
            "chapter's span-corruption loss (`span_corruption_loss`, a sum per row) divided by the number of "
            "target tokens, the decoder reading the targets shifted right (teacher forcing). The tokenizer "
            "is the course's WordPiece with T5's 100 sentinels `<extra_id_0>` ... `<extra_id_99>` added at "
            "the end of the vocabulary.")
    else:
        results = (
            f"| held-out causal-LM loss (all {metrics['heldout_rows']} held-out rows) | "
            f"{metrics['heldout_clm_loss']:.3f} nats per token |\n"
            f"| held-out perplexity (exp of the loss) | {metrics['heldout_perplexity']:.1f} |\n"
            + (cloze_rows(metrics, "the blank is the next token after the words before it; the words after it are "
                                   "not seen") if "cloze_top1" in metrics else ""))
        objective_text = (
            "Causal language modelling: every position predicts the next token "
            "(`autograder.reference.losses.clm_loss`), 127 targets per 128-token row.")
    gpu_note = (
        "On a CUDA GPU the same command runs with bf16 autocast (`--device auto` picks it). No GPU run "
        "was measured, so no speed-up figure is given here. What a GPU would change is the scale that fits "
        "the budget: a wider and deeper model (e.g. 6-12 layers, hidden 512-768), larger batches and many "
        f"more passes over the text; with only {log['train_stream_tokens'] / 1e6:.2f} M training tokens, more "
        "passes soon over-fit, so the real gain would come from a larger corpus.")
    return f"""# {name}: {title} pre-trained on {text_title(log)}

A teaching model for Week 6 of the course. It exists because no checkpoint with a
{"T5 encoder-decoder" if objective == "span" else "masked-LM head"} can be installed offline; it is meant for the notebooks' demos (fill-in-the-blank,
next-token prediction, {objectives} training curves), not for any real task. {"Its siblings" if plural else "Its twin"},
{others}, {"have" if plural else "has"} {"the same layer sizes" if is_default_size else "the default size (" + default_size + ")"} and {"were" if plural else "was"} trained on the same text for the same number of tokens
with the other objective{"s" if plural else ""}.{larger}

Load it offline with {f"`week6_helpers.small_models.{BY_FOLDER[name].loader}`, or" if name in BY_FOLDER else "transformers:"}
`{log['model']}.from_pretrained("data/checkpoints/{name}")`.

## Model

| | |
|---|---|
| class | `transformers.{log['model']}`, random initialisation (seed {log['seed']}) |
| layers / hidden / heads / feed-forward | {s['layers']}{" encoder + " + str(s['layers']) + " decoder" if objective == "span" else ""} / {s['hidden']} / {s['heads']} / {s['ffn']} |
| context | {log['context']} tokens |
| vocabulary | {log['vocab_size']:,} WordPiece pieces (`data/tokenizer/austen-wordpiece`, lower-cased{", its last 100 the sentinels" if objective == "span" else ""}) |
| output layer | tied to the input embeddings |
| dropout | {s['dropout']} |
| parameters | {log['parameters']:,} (tied weights counted once) |
| `model.safetensors` | {size_bytes / 1e6:.1f} MB (float32) |

## Data

{data_text(log)}A row is `[CLS]` followed by consecutive tokens of that stream; each pass
over the data shifts the row boundaries by a random offset and shuffles the rows. Evaluation
uses `austen_heldout.txt` (the last 5 % of each novel, never trained on), in rows of 128.
{"All three" if plural else "Both"} models read exactly the same rows in the same order.

## Training

{objective_text}

| | |
|---|---|
| steps x batch | {log['steps']:,} x {log['batch_size']} rows x {log['context']} tokens |
| tokens processed | {log['tokens_processed']:,} ({log['epochs']:.2f} passes over the training text) |
| tokens predicted (in the loss) | {log['tokens_predicted']:,} ({log['tokens_predicted'] / log['tokens_processed']:.1%} of those processed) |
| row length | {_warmup_text(log)} |
| optimiser | {OPTIMISERS[log.get('optimizer', 'AdamW')]} |
| learning rate | peak {log['peak_lr']:g}, linear warm-up over 5 % of the steps, cosine decay to 10 % |
| hardware | {log['device']} ({log['hardware']}), {log['torch_threads']} thread{'s' if log['torch_threads'] > 1 else ''}, bf16 autocast: {log['bf16_autocast']} |
| wall time | {_minutes(log['seconds'])}, CPU time {_minutes(log['cpu_seconds'])} (on a 2-core machine that also ran other work, so CPU time is the better measure of the cost) |

## Results

| measure | value |
|---|---|
| final training loss (mean of the last {log.get('log_every', 10)} steps) | {log['final_train_loss']:.3f} nats |
{results}
Held-out loss during training (first 64 held-out rows; the full-set number above is the final word):

{curve_table(log)}

The full curve is in `train_log.json` (`records`: training loss every {log.get('log_every', 10)} steps;
`evals`: held-out loss) and `train_log.csv`.

## Reproduce

From the repository root, with the pinned environment (`make setup`):

```sh
python -m week6_pretraining.tokenizer      # data/tokenizer/austen-wordpiece (deterministic)
{reproduce_command(objective, log, name)}
python -m week6_pretraining.evaluate       # metrics into every card, SHA256SUMS
```

On the same hardware and thread count the run is deterministic for a given seed; other
hardware gives slightly different numbers. {gpu_note}

## Files

{", ".join(f"`{f}`" for f in files)}, this `README.md`; `SHA256SUMS` lists their sha256
(`sha256sum -c SHA256SUMS`). `eval_results.json` holds the results above.

## Licence

{licence_text(log)} The weights, the tokenizer and the code that produced them are
released under the MIT licence of this repository.
"""


def write_card(folder: Path, objective: str, log: dict, metrics: dict) -> None:
    size = (folder / "model.safetensors").stat().st_size
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name not in ("README.md", "SHA256SUMS"))
    siblings = [o for o, (name, _) in TITLES.items() if o != objective and (folder.parent / name / "config.json").is_file()]
    (folder / "README.md").write_text(render(objective, log, metrics, size, files, siblings, folder.name))
