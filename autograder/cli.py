"""Command line of the grader.

    python -m autograder grade [PATH ...] [--out DIR] [--jobs N] [--device auto|cpu|cuda] [--student NAME]
    python -m autograder check NOTEBOOK

``grade`` writes ``DIR/<student>/<notebook stem>.json`` per submission, each as
soon as it is graded, and ``DIR/grades.csv`` for the class, prints a table, and
exits 0 whenever grading completed, whatever the scores. What was handed in is
taken in by ``autograder.intake``: the student is the first folder under a class
root (or ``--student``), only regular files are read, and every problem with a
file becomes that student's report. ``check`` is the student's self-check: the
notebook's visible tests, run in the same sandboxed worker.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .intake import Submission, collect
from .notebook import REPO
from .report import print_table, problem_report, write_report, write_table
from .runner import DEFAULT_HIDDEN, grade_in_subprocess

SAMPLES = REPO / "data" / "sample_submissions"


def grade(paths: list[Path], out: Path, jobs: int, device: str, student: str | None = None) -> int:
    submissions = collect(paths or [SAMPLES], student=student)
    if not submissions:
        print("No notebooks found to grade.", file=sys.stderr)
        return 0
    graded = [s for s in submissions if s.problem is None]
    # The sandbox hides every submission folder given and the output folder, on top
    # of the repository: no student reads another's notebook or report.
    hidden = DEFAULT_HIDDEN + [str(p.resolve()) for p in paths] + [str(out.resolve())]
    started = time.perf_counter()
    print(f"Grading {len(graded)} notebook(s) with {jobs} job(s) on device '{device}'"
          + (f"; {len(submissions) - len(graded)} file(s) not graded, see their reports" if len(graded) < len(submissions) else "")
          + "...", flush=True)

    reports = []
    for sub in submissions:
        if sub.problem is not None:
            reports.append(_record(out, sub, problem_report(sub.student, sub.name, sub.problem, device=device)))

    def one(sub: Submission) -> dict:
        return grade_in_subprocess(sub.path, student=sub.student, device=device, hidden=hidden)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, sub): sub for sub in graded}
        for done, future in enumerate(as_completed(futures), 1):
            sub = futures[future]
            report = _record(out, sub, future.result())
            reports.append(report)
            print(f"[{done}/{len(graded)}] {sub.student}/{sub.name}: {report['score']:g}/{report['max_score']:g}",
                  flush=True)
    table = write_table(reports, out)
    print()
    print_table(reports)
    if any(r["sandbox"] == "degraded" for r in reports):
        print("warning: bubblewrap is unavailable; student code ran with process isolation and limits only "
              "(install the Debian package 'bubblewrap' for the full sandbox)", file=sys.stderr)
    print(f"\n{len(reports)} report(s) in {out}/, class table {table} ({time.perf_counter() - started:.1f} s)")
    return 0


def _record(out: Path, sub: Submission, report: dict) -> dict:
    """Name the report after the intake's student and file, and write it at once."""
    report["student"], report["notebook"] = sub.student, sub.name
    write_report(out, sub.student, sub.key, report)
    return report


def check(notebook: Path) -> int:
    from .selfcheck import run_visible_tests

    return run_visible_tests(notebook)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Week 6 sandboxed autograder")
    commands = parser.add_subparsers(dest="command", required=True)
    grade_parser = commands.add_parser("grade", help="grade notebooks in a sandbox, out of the student's kernel")
    grade_parser.add_argument("paths", nargs="*", type=Path,
                              help="notebooks, one student's folder, or an nbgrader submitted/ tree "
                                   "(default: the bundled sample submissions)")
    grade_parser.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades/)")
    grade_parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade_parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                              help="where reference and student tensors live (default: cuda if available)")
    grade_parser.add_argument("--student", help="the student of a single notebook or folder "
                                                "(default: the folder's name, or the one above week6/)")
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
        return grade(args.paths, args.out, args.jobs, args.device, args.student)
    return check(args.notebook)
