"""Pre-train a small BERT (masked LM), GPT-2 (causal LM) or T5 (span corruption) on the Austen corpus.

    python -m week6_pretraining.train --objective mlm            # -> data/checkpoints/austen-bert-mlm/
    python -m week6_pretraining.train --objective clm            # -> data/checkpoints/austen-gpt-clm/
    python -m week6_pretraining.train --objective span           # -> data/checkpoints/austen-t5-span/
    python -m week6_pretraining.train --objective clm --max-steps 20 --size tiny --out /tmp/try

The defaults are the shipped runs (5,000 steps of 16 x 128 tokens, peak learning rate
2e-3): on a 2-core CPU about 22 minutes for BERT on one thread and 36 minutes for GPT on
two (GPT scores every position, so its output layer costs more).

All objectives read the same rows of the same token stream for the same number of
steps, so they *process* the same number of tokens: that is the fair budget, since
compute is spent on every token read. They differ in how many tokens they *predict*:
GPT is scored on every next token (127 of 128 per row), BERT only on the ~15 % it
masked, T5 on the ~15 % it dropped plus one sentinel per dropped span and a final
one. The log records both counts so the loss curves can be put side by side.

A run is a :class:`TrainConfig` (what to train, for how long, how) and a
``functions.Functions`` (the corruption and loss functions it calls): a notebook passes
its own; the command line takes the course's references from the installed grader
(``week6_pretraining/functions.py`` says how).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from week6_helpers.small_models import DEFAULT_FOLDER

from .data import CONTEXT, DATA, SOURCES, TOKENIZER_DIR, Batches, load_tokenizer, sentinel_ids, token_stream, windows, with_sentinels
from .functions import Functions, installed, require
from .model import Size, build_model

CHECKPOINTS = DATA / "checkpoints"
DEFAULT_OUT = {objective: CHECKPOINTS / folder for objective, folder in DEFAULT_FOLDER.items()}
OBJECTIVES = tuple(DEFAULT_OUT)
SIZES = {
    "small": Size(layers=4, hidden=128, heads=4, ffn=512),  # the shipped models
    "tiny": Size(layers=2, hidden=64, heads=2, ffn=256),  # tests and the notebook's quick run
    "medium": Size(layers=4, hidden=256, heads=4, ffn=1024),  # twice the width: recipes, GPU runs
}
# (end of the phase as a fraction of the steps, row length); 128 after the last one.
CONTEXT_WARMUP = ((0.25, 16), (0.325, 32), (0.40, 64))
HELDOUT_MASK_SEED = 1234  # one fixed masking of the held-out rows, so MLM losses are comparable


def special_ids(tokenizer) -> list[int]:
    return sorted(set(tokenizer.all_special_ids))


def mask_rows(mask_fn, rows, tokenizer, generator):
    """(masked inputs, labels): ``mask_fn`` (a ``mask_tokens``) with the tokenizer's ids."""
    return mask_fn(
        rows,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        special_token_ids=special_ids(tokenizer),
        generator=generator,
    )


# ----------------------------------------------------------------------------- one step
def mlm_step_loss(model, rows, tokenizer, generator, mask_fn, mlm_loss_fn):
    """Corrupt ``rows`` BERT-style and return (loss, number of predicted tokens)."""
    masked, labels = mask_rows(mask_fn, rows, tokenizer, generator)
    # Only the selected ~15 % of positions are scored, so only they go through the
    # vocabulary-sized output layer: same loss, about a third less compute per step.
    hidden = model.bert(input_ids=masked).last_hidden_state
    selected = labels != -100
    logits = model.cls(hidden[selected])
    return mlm_loss_fn(logits, labels[selected]), int(selected.sum())


def span_batch(rows, tokenizer, generator, noise_fn, corrupt_fn):
    """T5's (encoder inputs, labels) for ``rows``: each row without its leading [CLS] (T5 has no
    such token), spans dropped by ``noise_fn``, the pair built by ``corrupt_fn``. Rows whose pairs
    differ in length are padded: inputs with the padding id, labels with -100."""
    sentinels = sentinel_ids(tokenizer)
    pairs = []
    for row in rows[:, 1:]:
        mask = noise_fn(len(row), generator=generator).to(row.device)
        pairs.append(corrupt_fn(row, mask, sentinel_ids=sentinels))
    pad = torch.nn.utils.rnn.pad_sequence
    inputs = pad([i for i, _ in pairs], batch_first=True, padding_value=tokenizer.pad_token_id)
    labels = pad([t for _, t in pairs], batch_first=True, padding_value=-100)
    return inputs, labels


def shift_right(labels, start_id: int, pad_id: int):
    """Teacher forcing: the decoder reads ``start_id`` then the targets but the last (-100 -> pad)."""
    shifted = labels.new_full(labels.shape, start_id)
    shifted[:, 1:] = labels[:, :-1].masked_fill(labels[:, :-1] == -100, pad_id)
    return shifted


def span_logits(model, inputs, labels):
    config = model.config
    return model(input_ids=inputs, attention_mask=inputs.ne(config.pad_token_id),
                 decoder_input_ids=shift_right(labels, config.decoder_start_token_id, config.pad_token_id)).logits


def span_step_loss(model, rows, tokenizer, generator, noise_fn, corrupt_fn, span_loss_fn):
    """Span-corrupt ``rows`` T5-style and return (mean loss per target token, number of targets);
    ``span_loss_fn`` gives each row's summed loss (``span_corruption_loss``)."""
    inputs, labels = span_batch(rows, tokenizer, generator, noise_fn, corrupt_fn)
    n = int((labels != -100).sum())
    return span_loss_fn(span_logits(model, inputs, labels), labels).sum() / max(n, 1), n


def clm_step_loss(model, rows, clm_loss_fn):
    """Next-token loss on ``rows``; every position but the last predicts a token."""
    logits = model(input_ids=rows).logits
    return clm_loss_fn(logits, rows), rows.numel() - rows.size(0)


# ----------------------------------------------------------------------------- evaluation
def heldout_batches(tokenizer, objective, n_rows=None, device="cpu", batch_size=32, mask_fn=None,
                    noise_fn=None, corrupt_fn=None):
    """The held-out rows (the first ``n_rows``, or all), masked (MLM) or span-corrupted (span)
    once with a fixed seed.

    Returns a list of (inputs, targets): for MLM targets are the labels, for CLM the
    inputs themselves, for span the T5 labels. Fixing the corruption makes every
    evaluation of every model of one objective score the very same blanks.
    """
    rows = windows(token_stream(tokenizer, "heldout"), tokenizer.cls_token_id)
    if n_rows is not None:
        rows = rows[:n_rows]
    if objective == "clm":
        inputs, targets = rows, rows
    elif objective == "span":
        require("the held-out span pairs", noise_fn=noise_fn, corrupt_fn=corrupt_fn)
        generator = torch.Generator().manual_seed(HELDOUT_MASK_SEED)
        inputs, targets = span_batch(rows, tokenizer, generator, noise_fn, corrupt_fn)
    else:
        require("the held-out masked rows", mask_fn=mask_fn)
        generator = torch.Generator().manual_seed(HELDOUT_MASK_SEED)
        inputs, targets = mask_rows(mask_fn, rows, tokenizer, generator)
    return [
        (inputs[i : i + batch_size].to(device), targets[i : i + batch_size].to(device))
        for i in range(0, len(inputs), batch_size)
    ]


@torch.no_grad()
def heldout_loss(model, batches, objective, autocast=nullcontext, mlm_loss_fn=None, clm_loss_fn=None,
                 span_loss_fn=None) -> float:
    """Mean cross-entropy per predicted token over ``batches``, with the loss of ``objective``."""
    loss_fn = {"mlm": mlm_loss_fn, "clm": clm_loss_fn, "span": span_loss_fn}[objective]
    require(f"the held-out {objective} loss", **{f"{objective}_loss_fn": loss_fn})
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for inputs, targets in batches:
        with autocast():
            logits = span_logits(model, inputs, targets) if objective == "span" else model(input_ids=inputs).logits
        if objective == "span":
            n = int((targets != -100).sum())
            total += float(span_loss_fn(logits, targets).sum())
        elif objective == "mlm":
            n = int((targets != -100).sum())
            total += float(mlm_loss_fn(logits, targets)) * n
        else:
            n = targets.numel() - targets.size(0)
            total += float(clm_loss_fn(logits, targets)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)


# ----------------------------------------------------------------------------- schedule
def learning_rate(progress: float, peak: float, warmup: float = 0.05, floor: float = 0.1) -> float:
    """Linear warm-up over the first ``warmup`` of training, then cosine decay to ``floor * peak``.

    ``progress`` runs from 0 to 1. Warm-up keeps the first, large and noisy
    gradients of a random model from wrecking Adam's moment estimates.
    """
    if progress < warmup:
        return peak * progress / warmup
    decay = (progress - warmup) / (1 - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(decay, 1.0))))


PEAK_LR = {"mlm": 2e-3, "clm": 2e-3, "span": 1e-2}  # per objective, with its optimizer (below)


def make_optimizer(model, objective, lr, weight_decay=0.01):
    """AdamW for BERT and GPT-2 (no weight decay on biases and LayerNorm gains, as in both);
    Adafactor for T5, as Raffel et al. trained it.

    Why not AdamW for T5 too: T5 initialises its embeddings with standard deviation 1 and
    its other weights with about width ** -0.5, where BERT and GPT-2 use 0.02. AdamW's
    steps have the same size whatever a weight's scale, so at BERT's learning rate T5's
    weights move 5 to 50 times more slowly relative to their size. Adafactor with
    ``scale_parameter`` scales each step by the weight's root mean square. With AdamW the
    small T5 stayed on the word-frequency plateau for all 5,000 steps, its decoder
    ignoring the encoder.
    """
    if objective == "span":
        from transformers.optimization import Adafactor

        return Adafactor(model.parameters(), lr=lr, scale_parameter=True, relative_step=False,
                         warmup_init=False, clip_threshold=1.0)
    decay, no_decay = [], []
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:  # tied embeddings appear twice
            continue
        seen.add(id(p))
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6)


# ----------------------------------------------------------------------------- the loop
@dataclass(frozen=True)
class TrainConfig:
    """One run's settings; ``python -m week6_pretraining.train``'s options are these fields.

    The run ends after ``max_steps`` steps or ``minutes`` of wall time, whichever comes
    first; the learning-rate schedule follows whichever is further along, so a
    time-limited run still warms up and decays properly. ``lr`` None is the objective's
    peak rate (``PEAK_LR``).

    Context warm-up (``CONTEXT_WARMUP``): the rows start 16 tokens long and double to 128
    during the first 40 % of the steps, with proportionally more rows per batch, so every
    step reads ``batch_size * 128`` tokens. BERT did the same at its scale (128 tokens for
    90 % of the steps, then 512), for speed. Here it matters for another reason: a [MASK]
    must learn to look at its neighbours, and in a long row a freshly initialised attention
    spreads over all positions, so the signal that would teach it is diluted 128-fold.
    Without the warm-up, the small BERT spent 4 M tokens predicting the same word
    frequencies at every [MASK]. ``context_warmup=False`` turns it off.

    ``whole_word`` (MLM only): choose whole words for the training rows (the functions'
    ``whole_word_mask_fn``) instead of ``mask_fn``; the held-out rows keep ``mask_fn``'s
    token-level masking, so losses stay comparable. The span objective adds T5's 100
    sentinel tokens to the tokenizer (``data.with_sentinels``) and trains with Adafactor
    (``make_optimizer``).

    ``text``: the training text's sources (``data.SOURCES``), read in that order; the
    held-out rows are always Austen's, so every model's held-out loss is comparable.

    ``bf16``: run the forward pass under bfloat16 autocast (weights, optimiser state and
    losses stay float32). None means on for a GPU that supports it and off on a CPU,
    where it pays only on processors with bfloat16 matrix units (AMX) and its rounding
    makes the run depend on the processor.
    """

    objective: str
    max_steps: int = 5000
    minutes: float | None = None
    batch_size: int = 16
    lr: float | None = None
    context_warmup: bool = True
    whole_word: bool = False
    size: Size = field(default_factory=lambda: SIZES["small"])
    text: tuple[str, ...] = ("austen",)
    seed: int = 0
    device: str = "auto"
    bf16: bool | None = None
    eval_every: int = 100
    eval_rows: int | None = 64  # held-out rows per evaluation; None: all of them
    log_every: int = 10

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.whole_word and self.objective != "mlm":
            raise ValueError(f"whole-word masking is a masked-LM recipe; objective {self.objective!r} does not mask tokens")


def train(config: TrainConfig, functions: Functions, *, tokenizer=None, stream: torch.Tensor | None = None,
          progress: bool = True):
    """Train one model of ``config`` from random weights with ``functions``; return
    ``(model, tokenizer, log)``.

    ``functions`` must hold what the objective calls (``functions.needed``), each following
    its graded function's contract; the held-out evaluation uses the same ones, with the
    corruption of the held-out rows seeded once and for all. ``tokenizer`` None is the
    course's; ``stream`` (already tokenized) replaces ``config.text``, for tests and notebooks.
    """
    functions.require(config.objective, whole_word=config.whole_word)
    objective = config.objective
    mask_fn, mlm_loss_fn, clm_loss_fn = functions.mask_fn, functions.mlm_loss_fn, functions.clm_loss_fn
    noise_fn, corrupt_fn, span_loss_fn = functions.noise_fn, functions.corrupt_fn, functions.span_loss_fn
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if config.device == "auto" else config.device)
    torch.manual_seed(config.seed)
    lr = PEAK_LR[objective] if config.lr is None else config.lr
    tokenizer = tokenizer or load_tokenizer()
    if objective == "span":
        tokenizer = with_sentinels(tokenizer)  # new ids at the end: the stream's ids do not change
    # ``stream`` (already tokenized) replaces the ``text`` sources, for tests and notebooks.
    text = list(config.text) if stream is None else None
    stream = token_stream(tokenizer, "train", sources=text) if stream is None else stream
    # One endless supply of rows per row length; the same seeds give both objectives
    # exactly the same rows in the same order.
    phases = CONTEXT_WARMUP if config.context_warmup else ()
    contexts = [c for _, c in phases] + [CONTEXT]
    supply = {c: Batches(stream, tokenizer.cls_token_id, config.batch_size * CONTEXT // c, seed=config.seed + c, context=c)
              for c in contexts}
    eval_batches = heldout_batches(tokenizer, objective, config.eval_rows, device, mask_fn=mask_fn,
                                   noise_fn=noise_fn, corrupt_fn=corrupt_fn)

    train_mask_fn = functions.whole_word_mask_fn(tokenizer, device) if config.whole_word else mask_fn
    model = build_model(objective, tokenizer, config.size).to(device)
    optimizer = make_optimizer(model, objective, lr)
    mask_generator = torch.Generator(device=device).manual_seed(config.seed + 1)
    # bf16 autocast: the matrix products run on the GPU's tensor cores (or the CPU's AMX
    # units) while the weights, optimiser and losses stay in float32.
    use_bf16 = (device.type == "cuda" and torch.cuda.is_bf16_supported()) if config.bf16 is None else config.bf16
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if use_bf16 else nullcontext

    n_params = sum(p.numel() for p in model.parameters())  # .parameters() counts tied weights once
    log = {
        "objective": objective,
        "model": type(model).__name__,
        "parameters": n_params,
        "size": asdict(config.size),
        "vocab_size": len(tokenizer),
        "context": CONTEXT,
        "batch_size": config.batch_size,
        "tokens_per_step": config.batch_size * CONTEXT,
        "context_warmup": [list(p) for p in phases],
        "max_steps": config.max_steps,
        "minutes": config.minutes,
        "peak_lr": lr,
        "whole_word_masking": config.whole_word,
        "optimizer": type(optimizer).__name__,
        "seed": config.seed,
        "device": str(device),
        "bf16_autocast": use_bf16,
        "torch_threads": torch.get_num_threads(),
        "hardware": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine(),
        "text": text,  # the training text's sources (data.SOURCES); None for a stream passed in
        "train_stream_tokens": len(stream),
        "eval_rows": len(torch.cat([b[0] for b in eval_batches])),
        "log_every": config.log_every,
        "records": [],  # one per log point: step, tokens, train loss, lr, time
        "evals": [],  # one per evaluation: step, tokens, held-out loss
    }

    def evaluate(step, tokens, predicted):
        loss = heldout_loss(model, eval_batches, objective, autocast, mlm_loss_fn, clm_loss_fn, span_loss_fn)
        entry = {"step": step, "tokens_processed": tokens, "tokens_predicted": predicted, "heldout_loss": round(loss, 5)}
        if objective == "clm":
            entry["heldout_perplexity"] = round(math.exp(loss), 3)
        log["evals"].append(entry)
        return loss

    model.train()
    tokens = predicted = 0
    window_loss, window_steps = 0.0, 0
    start, cpu_start = time.perf_counter(), time.process_time()
    evaluate(0, 0, 0)
    bar = tqdm(total=config.max_steps, desc=f"{objective} pre-training", disable=not progress, unit="step")
    step = 0
    while True:
        elapsed = time.perf_counter() - start
        done = max(step / config.max_steps, elapsed / (60 * config.minutes) if config.minutes else 0.0)
        if done >= 1.0:
            break
        lr_now = learning_rate(done, lr)
        for group in optimizer.param_groups:
            group["lr"] = lr_now

        context = next((c for end, c in phases if done < end), CONTEXT)
        rows = next(supply[context]).to(device)
        with autocast():
            if objective == "mlm":
                loss, n_pred = mlm_step_loss(model, rows, tokenizer, mask_generator, train_mask_fn, mlm_loss_fn)
            elif objective == "span":
                loss, n_pred = span_step_loss(model, rows, tokenizer, mask_generator, noise_fn, corrupt_fn,
                                              span_loss_fn)
            else:
                loss, n_pred = clm_step_loss(model, rows, clm_loss_fn)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # a safety rail for the early, spiky steps
        optimizer.step()

        step += 1
        tokens += rows.numel()
        predicted += n_pred
        window_loss += loss.item()
        window_steps += 1
        bar.update(1)
        if step % config.log_every == 0:
            train_loss = window_loss / window_steps
            log["records"].append({
                "step": step, "tokens_processed": tokens, "tokens_predicted": predicted,
                "train_loss": round(train_loss, 5), "lr": lr_now, "context": context,
                "seconds": round(time.perf_counter() - start, 2),
            })
            bar.set_postfix(loss=f"{train_loss:.3f}", heldout=f"{log['evals'][-1]['heldout_loss']:.3f}",
                            tokens=f"{tokens / 1e6:.2f}M")
            window_loss, window_steps = 0.0, 0
        if step % config.eval_every == 0:
            evaluate(step, tokens, predicted)
    bar.close()
    if not log["evals"] or log["evals"][-1]["step"] != step:
        evaluate(step, tokens, predicted)
    log.update(
        steps=step, tokens_processed=tokens, tokens_predicted=predicted, epochs=round(tokens / len(stream), 3),
        seconds=round(time.perf_counter() - start, 1),
        # CPU time says what the run costs on a machine shared with other jobs, where
        # wall time mostly says how busy the machine was.
        cpu_seconds=round(time.process_time() - cpu_start, 1),
        final_train_loss=log["records"][-1]["train_loss"] if log["records"] else None,
        final_heldout_loss=log["evals"][-1]["heldout_loss"],
    )
    return model.eval(), tokenizer, log


# ----------------------------------------------------------------------------- saving
def save(model, tokenizer, log, out: Path):
    """Weights (safetensors), config, tokenizer and the training log (JSON + CSV)."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")
    # The CSV holds the curve alone, one row per log point, for spreadsheets and pandas.
    evals = {e["step"]: e["heldout_loss"] for e in log["evals"]}
    with (out / "train_log.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "tokens_processed", "tokens_predicted", "train_loss", "heldout_loss", "lr", "seconds"])
        for r in log["records"]:
            writer.writerow([r["step"], r["tokens_processed"], r["tokens_predicted"], r["train_loss"],
                             evals.get(r["step"], ""), f"{r['lr']:.6g}", r["seconds"]])


def main(argv=None, functions: Functions | None = None):
    """The command line; ``functions`` None: the reference ones of the installed grader."""
    parser = argparse.ArgumentParser(description="Pre-train a small BERT (mlm), GPT-2 (clm) or T5 (span) on Austen.")
    parser.add_argument("--objective", choices=OBJECTIVES, required=True)
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--minutes", type=float, default=None, help="wall-clock cap (the schedule adapts)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=None,
                        help="peak learning rate (default: " + ", ".join(f"{o} {v:g}" for o, v in PEAK_LR.items()) + ")")
    parser.add_argument("--whole-word-masking", action="store_true",
                        help="mlm: choose whole words, every piece of a chosen word (whole_word_mask)")
    parser.add_argument("--no-context-warmup", action="store_true", help="128-token rows from the first step")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--text", nargs="+", choices=list(SOURCES), default=["austen"],
                        help="training text, in this order (default: austen); held-out is always Austen's")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help=f"a tokenizer folder (default: {TOKENIZER_DIR.relative_to(DATA.parent)}); "
                             "python -m week6_pretraining.tokenizer --text ... --out DIR makes one")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-rows", type=int, default=64, help="held-out rows per periodic evaluation")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="bfloat16 autocast (default: on for a GPU with bf16, off on a CPU)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (1 keeps a shared machine usable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    config = TrainConfig(
        args.objective, max_steps=args.max_steps, minutes=args.minutes, batch_size=args.batch_size, lr=args.lr,
        context_warmup=not args.no_context_warmup, whole_word=args.whole_word_masking, text=tuple(args.text),
        size=SIZES[args.size], seed=args.seed, device=args.device, bf16=args.bf16,
        eval_every=args.eval_every, eval_rows=args.eval_rows, log_every=args.log_every)
    functions = installed() if functions is None else functions
    try:
        functions.require(config.objective, whole_word=config.whole_word)
    except ValueError as err:
        parser.error(str(err))
    torch.set_num_threads(args.threads)
    model, tokenizer, log = train(config, functions, progress=not args.no_progress,
                                  tokenizer=load_tokenizer(args.tokenizer) if args.tokenizer else None)
    if args.tokenizer:
        log["tokenizer"] = str(args.tokenizer)
    log["command"] = "python -m week6_pretraining.train " + " ".join(argv if argv is not None else os.sys.argv[1:])
    out = args.out or DEFAULT_OUT[args.objective]
    save(model, tokenizer, log, out)
    print(f"{log['steps']} steps, {log['tokens_processed']:,} tokens processed, "
          f"{log['tokens_predicted']:,} predicted, {log['seconds']:.0f} s; "
          f"held-out loss {log['final_heldout_loss']:.3f} -> {out}")


if __name__ == "__main__":
    main()
