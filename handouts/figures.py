"""Draw the handout's figures into handouts/figures/*.png.

    python handouts/figures.py                       # every figure
    python handouts/figures.py --only lora_params    # one figure (name without .png)
    python handouts/figures.py --checkpoints DIR     # read the pre-training logs from DIR
    python handouts/figures.py --out DIR             # write somewhere else (default handouts/figures)

Every figure is drawn from code and small computations (no model is loaded and
nothing is trained), with the course's reference implementations where one
exists (``autograder.reference``): the handout build is instructor-side. The
script takes a few seconds on one CPU core.

The pre-training curves need the training logs of the course's own models
(``data/checkpoints/austen-{bert-mlm,gpt-clm,t5-span}/train_log.json``, or their ``train_log.csv``).
Where they are absent that figure is skipped and any earlier copy is left alone;
the handout build then shows a note instead of the figure.

The PNGs are written without a timestamp or software tag, so running the script
twice with the same library versions gives byte-identical files.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIGURES = HERE / "figures"
CHECKPOINTS = REPO / "data" / "checkpoints"
PRETRAINING_CAPTION = "pretraining_curves.caption.md"  # written next to the figure, read by figure_refs.py

if str(REPO) not in sys.path:  # the reference implementations, also without an editable install
    sys.path.insert(0, str(REPO))

BLUE, ORANGE, GREEN, RED, GREY, PURPLE = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f", "#9467bd"
LIGHT_GREY = "#e6e6e6"


def _style() -> None:
    plt.rcdefaults()
    plt.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.hashsalt": "week6",
    })


def _save(fig, name: str) -> Path:
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.png"
    # No "Software" or creation-time chunk: the bytes depend on the drawing only.
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def _box(ax, x, y, w, h, text, color, *, fontsize=9.5, weight="normal", text_color="black"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=color, edgecolor="black", linewidth=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, weight=weight,
            color=text_color, wrap=True)


def _arrow(ax, start, end, *, color="black", style="-|>", lw=1.2, connection="arc3"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, lw=lw,
                                 connectionstyle=connection, shrinkA=2, shrinkB=2))


# ------------------------------------------------------------------------------ figures
def pipeline():
    """The pre-train / fine-tune pipeline, with the course's stand-ins underneath."""
    fig, ax = plt.subplots(figsize=(10, 4.3))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4.3)
    ax.axis("off")

    _box(ax, 0.1, 2.35, 1.9, 1.2, "unlabelled text\nbooks, web pages\n(billions of tokens)", "#fdf2d0")
    _box(ax, 2.55, 2.35, 2.3, 1.2, "PRE-TRAINING\nself-supervised:\nMLM, CLM or\nspan corruption", "#d6e6f5",
         weight="bold", fontsize=9)
    _box(ax, 5.3, 2.35, 1.6, 1.2, "pre-trained\nmodel\n$\\theta_{pre}$", "#cfe8cf", weight="bold")
    _arrow(ax, (2.0, 2.95), (2.55, 2.95))
    _arrow(ax, (4.85, 2.95), (5.3, 2.95))
    ax.text(3.7, 3.75, "once, expensive (weeks on many accelerators)", ha="center", fontsize=8.5, color=GREY)

    tasks = [("sentiment\n(one label per text)", 3.6), ("named entities\n(one label per token)", 2.6),
             ("question answering\n(an answer span)", 1.6)]
    for label, y in tasks:
        _box(ax, 7.45, y - 0.38, 2.45, 0.76, "fine-tune: " + label, "#f5dada", fontsize=8.5)
        _arrow(ax, (6.9, 2.95), (7.45, y), connection="arc3,rad=0.0")
    ax.text(8.67, 1.08, "per task, cheap: a small labelled set,\nsmall learning rate, few epochs,\n"
            "starting from $\\theta_0 = \\theta_{pre}$", ha="center", va="top", fontsize=8.5, color=GREY)

    ax.plot([0.1, 6.9], [1.75, 1.75], color=GREY, lw=0.6, ls=":")
    ax.text(0.1, 1.45, "In this course (offline):", fontsize=9, weight="bold")
    ax.text(0.1, 0.35,
            "encoder  all-MiniLM-L6-v2 (a 6-layer BERT) stands in for BERT-base\n"
            "decoder  SmolLM2-135M-Instruct stands in for GPT-2\n"
            "MLM head  the course's own BERT (pre-trained here, toy scale)\n"
            "T5  the course's own T5 (pre-trained here); the decoder summarises",
            fontsize=8.5, family="monospace", va="bottom")
    ax.set_title("Learn language once, adapt it many times", loc="left", weight="bold")
    return _save(fig, "pipeline")


def attention_masks():
    """BERT's full attention pattern next to GPT's causal mask, as 0/1 matrices."""
    from autograder.reference.attention import attention_connections, causal_mask

    words = ["The", "cat", "sat", "on", "the", "mat"]
    n = len(words)
    causal = causal_mask(n).int().tolist()
    full = [[1] * n for _ in range(n)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
    panels = [(full, f"BERT (encoder): bidirectional\nevery token sees every token: "
                     f"{attention_connections(n, causal=False)} pairs", BLUE),
              (causal, f"GPT (decoder): causal mask\ntoken i sees tokens 1..i: "
                       f"{attention_connections(n, causal=True)} pairs", ORANGE)]
    for ax, (matrix, title, color) in zip(axes, panels):
        for i in range(n):
            for j in range(n):
                allowed = matrix[i][j] == 1
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=color if allowed else "white",
                                           alpha=0.55 if allowed else 1.0, edgecolor="#999999", lw=0.6))
                ax.text(j + 0.5, i + 0.5, "1" if allowed else "0", ha="center", va="center",
                        fontsize=10, color="black" if allowed else "#aaaaaa")
        ax.set_xlim(0, n)
        ax.set_ylim(n, 0)
        ax.set_xticks([k + 0.5 for k in range(n)], words)
        ax.set_yticks([k + 0.5 for k in range(n)], words)
        ax.xaxis.tick_top()
        ax.set_xlabel("key: the token attended to (column j)")
        ax.set_ylabel("query: the token attending (row i)")
        ax.set_title(title, fontsize=10.5, pad=28)
        ax.tick_params(length=0)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
    # Outline the row of 'cat' (row 2): GPT, predicting what follows 'cat', sees only 'The' and 'cat'.
    axes[1].add_patch(plt.Rectangle((0, 1), n, 1, facecolor="none", edgecolor=RED, lw=2.2))
    fig.tight_layout()
    return _save(fig, "attention_masks")


def attention_connections_plot():
    """How the number of (query, key) pairs grows with the sequence length."""
    from autograder.reference.attention import attention_connections

    lengths = list(range(1, 513))
    full = [attention_connections(n, causal=False) for n in lengths]
    causal = [attention_connections(n, causal=True) for n in lengths]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].plot(lengths, full, color=BLUE, label="bidirectional (BERT)")
    axes[0].plot(lengths, causal, color=ORANGE, label="causal (GPT)")
    marks = (128, 512)
    axes[0].plot(marks, [attention_connections(n, causal=False) for n in marks], "o", color=BLUE, ms=4)
    axes[0].plot(marks, [attention_connections(n, causal=True) for n in marks], "o", color=ORANGE, ms=4)
    axes[0].text(0.97, 0.04, "\n".join(f"n = {n}: {attention_connections(n, causal=False):,} vs "
                                       f"{attention_connections(n, causal=True):,}" for n in marks),
                 transform=axes[0].transAxes, ha="right", va="bottom", fontsize=8.5,
                 bbox=dict(facecolor="white", edgecolor=LIGHT_GREY))
    axes[0].set(xlabel="sequence length n (tokens)", ylabel="(query, key) pairs", title="Both grow quadratically")
    axes[0].legend(loc="upper left", fontsize=9)
    axes[0].ticklabel_format(axis="y", style="plain")
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:,.0f}k"))
    ratio = [f / c for f, c in zip(full, causal)]
    axes[1].plot(lengths, ratio, color=PURPLE)
    axes[1].axhline(2, color=GREY, ls=":", lw=1)
    axes[1].set(xlabel="sequence length n (tokens)", ylabel="bidirectional / causal pairs", ylim=(0.9, 2.1),
                title="Causal attention needs just over half the pairs")
    fig.tight_layout()
    return _save(fig, "attention_connections")


def masking_breakdown():
    """BERT's 15 % selection and its 80/10/10 split, as expected shares of 200 tokens."""
    import random

    columns, rows = 20, 10
    total = columns * rows                     # 200 tokens
    selected = round(0.15 * total)             # 30
    as_mask, as_random = round(0.8 * selected), round(0.1 * selected)   # 24, 3
    unchanged = selected - as_mask - as_random                          # 3
    kinds = ["mask"] * as_mask + ["random"] * as_random + ["unchanged"] * unchanged
    kinds += ["untouched"] * (total - selected)
    random.Random(6).shuffle(kinds)            # a fixed, random-looking layout
    style = {"mask": (BLUE, "[M]"), "random": (ORANGE, "rnd"), "unchanged": (GREEN, "=")}

    fig = plt.figure(figsize=(10, 4.2))
    grid = fig.add_gridspec(1, 2, width_ratios=[2.1, 1])
    ax = fig.add_subplot(grid[0])
    for k, kind in enumerate(kinds):
        x, y = k % columns, k // columns
        color, label = style.get(kind, ("white", ""))
        ax.add_patch(plt.Rectangle((x + 0.06, y + 0.06), 0.88, 0.88, facecolor=color if label else LIGHT_GREY,
                                   alpha=0.85 if label else 1.0, edgecolor="none"))
        if label:
            ax.text(x + 0.5, y + 0.5, label, ha="center", va="center", fontsize=6.5, color="white", weight="bold")
    ax.set_xlim(0, columns)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"200 tokens of text: {selected} selected (15 %), {total - selected} not (grey)", fontsize=10.5)

    bars = fig.add_subplot(grid[1])
    shares = [("[MASK]", 0.8, BLUE), ("random token", 0.1, ORANGE), ("unchanged", 0.1, GREEN)]
    left = 0.0
    for label, share, color in shares:
        bars.barh([1], [share], left=left, color=color, alpha=0.85)
        bars.barh([0], [share * 0.15], left=left * 0.15, color=color, alpha=0.85)
        left += share
    bars.barh([0], [0.85], left=0.15, color=LIGHT_GREY)
    bars.text(0.4, 1, "80 %", ha="center", va="center", color="white", weight="bold")
    bars.text(0.9, 1.47, "10 % + 10 %", ha="center", fontsize=8.5)
    bars.text(0.075, -0.55, "15 %", ha="center", fontsize=8.5)
    bars.text(0.57, 0, "85 % not selected:\nno loss, no change", ha="center", va="center", fontsize=8.5)
    bars.set_yticks([0, 1], ["of all\ntokens", "of the\nselected"])
    bars.spines["bottom"].set_position(("data", -0.85))
    bars.set_xlim(0, 1)
    bars.set_ylim(-2.3, 1.8)
    bars.set_xticks([0, 0.5, 1], ["0", "50 %", "100 %"])
    bars.spines["left"].set_visible(False)
    bars.tick_params(axis="y", length=0)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, alpha=0.85) for _, _, c in shares]
    bars.legend(handles, ["[MASK] (12 % of all)", "random token (1.5 %)", "unchanged (1.5 %)"],
                loc="lower center", fontsize=8.5, frameon=False)
    bars.set_title("Expected shares", fontsize=10.5)
    fig.tight_layout()
    return _save(fig, "masking_breakdown")


def softmax_temperature():
    """softmax(z / T) of the handout's four logits at three temperatures."""
    import torch

    from autograder.reference.attention import softmax

    words = ["sat", "ran", "jumped", "slept"]
    logits = torch.tensor([2.5, 1.0, 0.5, 1.5], dtype=torch.float64)
    temperatures = (0.5, 1.0, 2.0)
    colors = (BLUE, GREEN, ORANGE)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.3), sharey=True)
    for ax, temperature, color in zip(axes, temperatures, colors):
        probs = softmax(logits / temperature)
        entropy = -float((probs * probs.log2()).sum())
        ax.bar(words, probs.tolist(), color=color, alpha=0.85)
        ax.axhline(0.25, color=GREY, ls=":", lw=1)
        ax.set_title(f"T = {temperature:g}", fontsize=11)
        ax.text(0.97, 0.95, f"entropy {entropy:.2f} bits\n$2^H$ = {2 ** entropy:.2f} choices",
                transform=ax.transAxes, ha="right", va="top", fontsize=8.5)
    axes[0].set_ylabel("P(next word | 'The cat')")
    axes[0].set_ylim(0, 1)
    axes[2].text(3.45, 0.27, "uniform", fontsize=8, color=GREY, ha="right")
    fig.suptitle("Logits [2.5, 1.0, 0.5, 1.5] divided by the temperature T, then softmax", fontsize=10.5)
    fig.tight_layout()
    return _save(fig, "softmax_temperature")


def lr_schedule():
    """Linear warm-up then linear decay, drawn with the reference schedule."""
    from autograder.reference.finetuning import linear_warmup_decay

    total, warmup, peak = 1000, 100, 2e-5
    steps = list(range(0, total + 60))
    lr = [peak * linear_warmup_decay(s, warmup_steps=warmup, total_steps=total) for s in steps]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(steps, lr, color=BLUE)
    ax.fill_between(steps[: warmup + 1], lr[: warmup + 1], color=ORANGE, alpha=0.25, lw=0)
    ax.axvline(warmup, color=GREY, ls=":", lw=1)
    ax.axvline(total, color=GREY, ls=":", lw=1)
    ax.annotate("warm-up: the first\n10 % of the updates", xy=(warmup * 0.7, peak * 0.3),
                xytext=(warmup + 60, peak * 0.18), fontsize=8.5, arrowprops=dict(arrowstyle="->", lw=0.7))
    ax.text((warmup + total) / 2, peak * 0.62, "linear decay to 0", ha="center", fontsize=9)
    ax.annotate("peak 2e-5", xy=(warmup, peak), xytext=(warmup + 120, peak * 0.98), fontsize=9,
                arrowprops=dict(arrowstyle="->", lw=0.7))
    ax.set(xlabel="update step s", ylabel="learning rate $\\eta \\cdot m(s)$", ylim=(0, peak * 1.12),
           title="The fine-tuning schedule: 1,000 updates, 100 of them warm-up")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    fig.tight_layout()
    return _save(fig, "lr_schedule")


def lora_params():
    """Trainable numbers of a LoRA adapter on one 768 x 768 matrix, against the rank."""
    from autograder.reference.lora import lora_parameter_count

    d = 768
    full = d * d
    ranks = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768]
    counts = [lora_parameter_count(d, d, r) for r in ranks]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(ranks, counts, "o-", color=BLUE, label="LoRA: $r\\,(d_{in} + d_{out}) = 1536\\,r$")
    ax.axhline(full, color=RED, ls="--", lw=1.2, label=f"full update of W: $768^2$ = {full:,}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ranks, [str(r) for r in ranks])
    r16 = lora_parameter_count(d, d, 16)
    ax.annotate(f"r = 16: {r16:,} numbers\n= {100 * r16 / full:.1f} % of the matrix",
                xy=(16, r16), xytext=(22, r16 / 9), fontsize=9, arrowprops=dict(arrowstyle="->", lw=0.7))
    ax.annotate("r = 384: break-even\n(a low-rank update is no\nlonger any cheaper)", xy=(384, full),
                xytext=(70, full * 2.2), fontsize=8.5, arrowprops=dict(arrowstyle="->", lw=0.7))
    ax.set(xlabel="rank r", ylabel="trainable numbers", ylim=(800, full * 8),
           title="LoRA on one 768 x 768 weight matrix (BERT-base width)")
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    return _save(fig, "lora_params")


def span_corruption():
    """T5's span corruption of the paper's example sentence, built by the reference code."""
    import torch

    from autograder.reference.span_corruption import span_corrupt

    words = "Thank you for inviting me to your party last week".split()
    sentinels = {100: "<X>", 101: "<Y>", 102: "<Z>"}
    vocab = {i: w for i, w in enumerate(words)} | sentinels
    mask = torch.tensor([w in ("for", "inviting", "last") for w in words])
    inputs, targets = span_corrupt(torch.arange(len(words)), mask, sentinel_ids=list(sentinels))
    rows = [("original", [(w, RED if m else None) for w, m in zip(words, mask.tolist())]),
            ("encoder input", [(vocab[i], PURPLE if i in sentinels else None) for i in inputs.tolist()]),
            ("decoder target", [(vocab[i], PURPLE if i in sentinels else RED) for i in targets.tolist()])]

    fig, ax = plt.subplots(figsize=(10, 2.7))
    ax.axis("off")
    ax.set_xlim(-1.9, 10.6)
    ax.set_ylim(-0.35, 3.0)
    for r, (label, tokens) in enumerate(rows):
        y = 2.4 - r * 1.0
        ax.text(-1.85, y, f"{label}\n({len(tokens)} tokens)", va="center", fontsize=9, weight="bold")
        for k, (token, color) in enumerate(tokens):
            face = "white" if color is None else color
            ax.add_patch(FancyBboxPatch((k, y - 0.27), 0.92, 0.54, boxstyle="round,pad=0.01,rounding_size=0.08",
                                        facecolor=face, alpha=0.25 if color else 1.0, edgecolor="#666666", lw=0.7))
            ax.text(k + 0.46, y, token, ha="center", va="center", fontsize=9)
    ax.text(6.3, 0.4, "each dropped span becomes one sentinel in the input;\nthe target lists only the dropped "
            "spans, each after its\nsentinel, and ends with a closing sentinel", ha="left", va="center",
            fontsize=8.5, color=GREY)
    ax.set_title("Span corruption: T = 10 tokens, n = 3 dropped in S = 2 spans  ->  input T - n + S = 9, "
                 "target n + S + 1 = 6", fontsize=10, loc="left")
    return _save(fig, "span_corruption")


def bert_parameter_counts(vocab: int, positions: int, hidden: int, layers: int, ffn: int) -> dict[str, int]:
    """Parameters of a BertModel (with pooler, without a task head), counted from its shapes."""
    embeddings = (vocab + positions + 2) * hidden + 2 * hidden             # word, position, 2 segments; LayerNorm
    attention = 4 * (hidden * hidden + hidden) + 2 * hidden                # Q, K, V, output projection; LayerNorm
    feed_forward = 2 * hidden * ffn + ffn + hidden + 2 * hidden            # two linear layers; LayerNorm
    pooler = hidden * hidden + hidden
    return {"embeddings": embeddings, "layers": layers * (attention + feed_forward), "pooler": pooler,
            "total": embeddings + layers * (attention + feed_forward) + pooler}


BERT_SIZES = {  # name: (vocabulary, positions, hidden, layers, feed-forward width)
    "all-MiniLM-L6-v2\n(this course)": (30522, 512, 384, 6, 1536),
    "BERT-base": (30522, 512, 768, 12, 3072),
    "BERT-large": (30522, 512, 1024, 24, 4096),
}


def bert_parameters():
    """Where the parameters of three BERT sizes sit: embeddings, layers, pooler."""
    counts = {name: bert_parameter_counts(*shape) for name, shape in BERT_SIZES.items()}
    fig, ax = plt.subplots(figsize=(9, 3.2))
    names = list(counts)
    for k, name in enumerate(names):
        c = counts[name]
        left = 0
        for part, color in (("embeddings", ORANGE), ("layers", BLUE), ("pooler", GREEN)):
            ax.barh(k, c[part] / 1e6, left=left / 1e6, color=color, alpha=0.85,
                    label=part if k == 0 else None)
            left += c[part]
        share = 100 * c["embeddings"] / c["total"]
        ax.text(c["total"] / 1e6 + 4, k, f"{c['total'] / 1e6:.1f} M  (embeddings {share:.0f} %)",
                va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set(xlabel="parameters (millions)", xlim=(0, 430),
           title="Parameters by part, counted from the shapes (no task head)")
    ax.legend(loc="upper right", fontsize=9)
    fig.tight_layout()
    return _save(fig, "bert_parameters")


# ------------------------------------------------------------------- pre-training curves
def _read_log(folder: Path) -> dict | None:
    """The training log of one checkpoint: JSON if present, else the CSV; None if neither."""
    json_path, csv_path = folder / "train_log.json", folder / "train_log.csv"
    if json_path.is_file():
        log = json.loads(json_path.read_text())
        if log.get("records"):
            return log
    if csv_path.is_file():
        with csv_path.open(newline="") as handle:
            records = [{key: float(value) for key, value in row.items() if value not in ("", None)}
                       for row in csv.DictReader(handle)]
        if records:
            last = records[-1]
            return {"records": records, "tokens_processed": int(last["tokens_processed"]),
                    "tokens_predicted": int(last["tokens_predicted"]), "final_train_loss": last.get("train_loss")}
    return None


def _pretrained() -> dict:
    """The course's three pre-trained models: objective -> (checkpoint folder, legend label, colour)."""
    from week6_helpers.small_models import DEFAULT_FOLDER  # the folders' one home (it imports torch)

    labels = {"mlm": ("BERT (masked LM)", BLUE), "clm": ("GPT (causal LM)", RED), "span": ("T5 (span corruption)", GREEN)}
    return {objective: (DEFAULT_FOLDER[objective], *labels[objective]) for objective in labels}


def pretraining_curves(checkpoints: Path = CHECKPOINTS):
    """Training loss of the course's own BERT, GPT and T5 per token processed and per token predicted."""
    pretrained = _pretrained()
    logs = {objective: _read_log(checkpoints / folder) for objective, (folder, _, _) in pretrained.items()}
    missing = [pretrained[objective][0] for objective, log in logs.items() if log is None]
    if missing:
        print(f"  skipped pretraining_curves: no training log for {', '.join(missing)} under {checkpoints}")
        return None

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for objective, log in logs.items():
        folder, label, color = pretrained[objective]
        records = [r for r in log["records"] if r.get("train_loss") is not None and r.get("tokens_processed", 0) > 0]
        loss = [r["train_loss"] for r in records]
        axes[0].plot([r["tokens_processed"] for r in records], loss, color=color, label=f"{folder}: {label}", lw=1.2)
        axes[1].plot([r["tokens_predicted"] for r in records], loss, color=color, label=f"{folder}: {label}", lw=1.2)
    axes[0].set(xscale="log", xlabel="tokens processed (read by the model)",
                ylabel="training loss (nats per predicted token)", title="Per token processed (compute)")
    axes[1].set(xscale="log", xlabel="tokens predicted (entering the loss)", title="Per token predicted (signal)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8.5)
    fig.tight_layout()
    path = _save(fig, "pretraining_curves")

    def numbers(log):
        processed, predicted = int(log["tokens_processed"]), int(log["tokens_predicted"])
        final = log.get("final_train_loss")
        if final is None:
            final = log["records"][-1].get("train_loss")
        heldout = log.get("final_heldout_loss")
        text = (f"{processed:,} tokens processed, {predicted:,} predicted "
                f"({100 * predicted / processed:.1f} %), final training loss {final:.2f} nats")
        if heldout is not None:
            text += f", held-out loss {heldout:.2f} nats on the first 64 held-out rows"
        return text

    described = ". ".join(f"{label}: {numbers(logs[objective])}" for objective, (_, label, _) in pretrained.items())
    (FIGURES / PRETRAINING_CAPTION).write_text(
        "Training loss of the course's three small models, read from their training logs in "
        f"`data/checkpoints/`. {described}. The three losses score different tasks, so compare how fast "
        "each curve falls, not which one is lower.\n")
    return path


FIGURES_TO_DRAW = {
    "pipeline": pipeline,
    "attention_masks": attention_masks,
    "attention_connections": attention_connections_plot,
    "masking_breakdown": masking_breakdown,
    "softmax_temperature": softmax_temperature,
    "lr_schedule": lr_schedule,
    "lora_params": lora_params,
    "span_corruption": span_corruption,
    "bert_parameters": bert_parameters,
    "pretraining_curves": pretraining_curves,
}


def main(argv: list[str] | None = None) -> int:
    global FIGURES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(FIGURES_TO_DRAW),
                        help="draw only this figure (repeatable)")
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS,
                        help="folder with the default checkpoint of each objective (default: data/checkpoints)")
    parser.add_argument("--out", type=Path, default=FIGURES, help="output folder (default: handouts/figures)")
    args = parser.parse_args(argv)
    FIGURES = args.out.resolve()
    _style()
    for name in args.only or FIGURES_TO_DRAW:
        draw = FIGURES_TO_DRAW[name]
        path = draw(args.checkpoints) if name == "pretraining_curves" else draw()
        if path is not None:
            print(f"  wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
