"""Command line of the grader.

    python -m autograder grade [PATH ...] [--out DIR] [--jobs N] [--device auto|cpu|cuda]
    python -m autograder check NOTEBOOK

``grade`` writes ``DIR/<student>/<notebook stem>.json`` per submission and
``DIR/grades.csv`` for the class, prints a table, and exits 0 whenever grading
completed, whatever the scores. ``check`` is the student's self-check: the
notebook's visible tests, run in the same sandboxed worker.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .notebook import ASSIGNMENT, REPO
from .runner import DEFAULT_HIDDEN, grade_in_subprocess

SAMPLES = REPO / "data" / "sample_submissions"


@dataclass(frozen=True)
class Submission:
    student: str
    notebook: Path


def discover(paths: list[Path]) -> list[Submission]:
    """Notebooks to grade, each with its student id.

    In an nbgrader tree (``.../<student>/<assignment>/<name>.ipynb``) the student
    is the folder above the assignment; otherwise it is the notebook's folder.
    """
    found: list[Submission] = []
    for path in paths:
        if not path.exists():
            raise SystemExit(f"error: {path} does not exist (give a notebook, a folder or a submitted/ tree)")
        notebooks = [path] if path.is_file() else sorted(
            p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
        )
        for notebook in notebooks:
            parent = notebook.resolve().parent
            student = parent.parent.name if parent.name == ASSIGNMENT else parent.name
            found.append(Submission(student, notebook))
    return found


def write_outputs(reports: list[dict], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for report in reports:
        target = out / report["student"] / (Path(report["notebook"]).stem + ".json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report, indent=2) + "\n")
    table = out / "grades.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "notebook", "score", "max_score", "sandbox", "device", "duration_s",
                         "passed", "failed", "error", "timeout", "forbidden", "missing"])
        for r in sorted(reports, key=lambda r: (r["student"], r["notebook"])):
            counts = {s: sum(1 for t in r["tests"] if t["status"] == s)
                      for s in ("passed", "failed", "error", "timeout", "forbidden", "missing")}
            writer.writerow([r["student"], r["notebook"], r["score"], r["max_score"], r["sandbox"],
                             r["device"], r["duration_s"], *counts.values()])
    return table


def print_table(reports: list[dict]) -> None:
    rows = [(r["student"], r["notebook"], f'{r["score"]:g}/{r["max_score"]:g}', r["sandbox"],
             f'{r["duration_s"]:.1f}s', "; ".join(r.get("warnings", []))[:70])
            for r in sorted(reports, key=lambda r: (r["student"], r["notebook"]))]
    header = ("student", "notebook", "score", "sandbox", "time", "notes")
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def grade(paths: list[Path], out: Path, jobs: int, device: str) -> int:
    submissions = discover(paths or [SAMPLES])
    if not submissions:
        print("No notebooks found to grade.", file=sys.stderr)
        return 0
    hidden = DEFAULT_HIDDEN + [str(p.resolve()) for p in paths] + [str(out.resolve())]
    started = time.perf_counter()
    print(f"Grading {len(submissions)} notebook(s) with {jobs} job(s) on device '{device}'...", flush=True)

    def one(sub: Submission) -> dict:
        return grade_in_subprocess(sub.notebook, student=sub.student, device=device, hidden=hidden)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        reports = list(pool.map(one, submissions))
    table = write_outputs(reports, out)
    print_table(reports)
    if any(r["sandbox"] == "degraded" for r in reports):
        print("warning: bubblewrap is unavailable; student code ran with process isolation and limits only "
              "(install the Debian package 'bubblewrap' for the full sandbox)", file=sys.stderr)
    print(f"\n{len(reports)} report(s) in {out}/, class table {table} ({time.perf_counter() - started:.1f} s)")
    return 0


def check(notebook: Path) -> int:
    from .selfcheck import run_visible_tests

    return run_visible_tests(notebook)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Week 6 sandboxed autograder")
    commands = parser.add_subparsers(dest="command", required=True)
    grade_parser = commands.add_parser("grade", help="grade notebooks in a sandbox, out of the student's kernel")
    grade_parser.add_argument("paths", nargs="*", type=Path,
                              help="notebooks, folders of notebooks, or an nbgrader submitted/ tree "
                                   "(default: the bundled sample submissions)")
    grade_parser.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades/)")
    grade_parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade_parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                              help="where reference and student tensors live (default: cuda if available)")
    check_parser = commands.add_parser("check", help="run a notebook's visible tests in the sandbox (self-check)")
    check_parser.add_argument("notebook", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "grade":
        if args.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                print("error: --device cuda was requested, but torch sees no CUDA GPU", file=sys.stderr)
                return 2
        return grade(args.paths, args.out, args.jobs, args.device)
    return check(args.notebook)
