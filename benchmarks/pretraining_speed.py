"""Seconds per pre-training step, float32 against bfloat16 autocast, side by side.

One training step (forward, backward, optimiser) of each objective on 16 rows of 128
tokens, for the shipped size (``small``) and a wider one (``medium``), with and without
``--bf16``. The configurations take turns within each round, so a busy machine weighs on
each alike; the figure is the median over rounds and steps after two warm-up steps.
On a CPU, bfloat16 pays only where the processor has bfloat16 matrix units (AMX);
elsewhere autocast emulates it and is slower.

    .venv/bin/python benchmarks/pretraining_speed.py [--rounds 3] [--steps 6] [--threads 1]

writes ``benchmarks/results/pretraining_speed.json`` and prints a table with the ratios.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from week6_pretraining.data import load_tokenizer, with_sentinels
from week6_pretraining.model import build_model
from autograder.build.pretraining import reference_functions
from week6_pretraining.train import SIZES, clm_step_loss, make_optimizer, mlm_step_loss, span_step_loss

RESULTS = Path(__file__).resolve().parent / "results" / "pretraining_speed.json"
OBJECTIVES = ("mlm", "clm", "span")


def step_seconds(objective, size, bf16, steps, tokenizer):
    """Seconds of each of ``steps`` training steps, after two warm-up steps (main takes the median)."""
    torch.manual_seed(0)
    tok = with_sentinels(tokenizer) if objective == "span" else tokenizer
    model = build_model(objective, tok, SIZES[size]).train()
    optimizer = make_optimizer(model, objective, 1e-3)
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(len(tok.all_special_ids), len(tokenizer), (16, 128))
    rows[:, 0] = tok.cls_token_id
    references = reference_functions()
    mask_fn, mlm_loss, clm_loss = references["mask_fn"], references["mlm_loss_fn"], references["clm_loss_fn"]
    noise_fn, corrupt_fn, span_loss = references["noise_fn"], references["corrupt_fn"], references["span_loss_fn"]
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if objective == "mlm":
                loss, _ = mlm_step_loss(model, rows, tok, generator, mask_fn, mlm_loss)
            elif objective == "clm":
                loss, _ = clm_step_loss(model, rows, clm_loss)
            else:
                loss, _ = span_step_loss(model, rows, tok, generator, noise_fn, corrupt_fn, span_loss)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=sorted(SIZES))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer()
    configs = [(o, s, b) for s in args.sizes for o in OBJECTIVES for b in (False, True)]
    samples = {c: [] for c in configs}
    for _ in range(args.rounds):
        for config in configs:
            samples[config] += step_seconds(*config, args.steps, tokenizer)
    rows = []
    print(f"{'size':8} {'objective':9} {'float32 s/step':>15} {'bf16 s/step':>12} {'speed-up':>9}")
    for size in args.sizes:
        for objective in OBJECTIVES:
            fp32 = statistics.median(samples[(objective, size, False)])
            bf16 = statistics.median(samples[(objective, size, True)])
            rows.append({"size": size, "objective": objective, "float32_seconds": round(fp32, 4),
                         "bf16_seconds": round(bf16, 4), "speedup": round(fp32 / bf16, 2)})
            print(f"{size:8} {objective:9} {fp32:15.3f} {bf16:12.3f} {fp32 / bf16:9.2f}")
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "command": "benchmarks/pretraining_speed.py", "rounds": args.rounds, "steps": args.steps,
        "threads": args.threads, "machine": platform.machine(), "amx_bf16": "amx_bf16" in flags,
        "torch": torch.__version__, "results": rows}, indent=2) + "\n")
    print(f"-> {RESULTS}")


if __name__ == "__main__":
    main()
