"""Grading speed: this grader vs stock ``nbgrader autograde``, and a class of N.

    .venv/bin/python benchmarks/grading_speed.py [--class-sizes 10 25 50] [--jobs 2]

All runs use the same sample submission (the full solution of
``part_b_bert_gpt``, from ``data/sample_submissions``), on this machine, in one
run, and print side by side:

1. stock nbgrader: ``nbgrader autograde`` with nbgrader's own preprocessors, i.e.
   the student's notebook executed top to bottom in a Jupyter kernel with the
   tests in it (experiments in fast mode, ``WEEK6_FAST=1``, to be kind to it), on
   1 and on 3 copies (it grades one notebook at a time);
2. this grader: ``python -m autograder grade`` on the same notebook, one job;
3. classes of N copies of that submission with ``--jobs J``, to show the time
   per submission and that the total grows linearly with the class.

The comparison is per submission *after set-up*: the growth of the total from the
smaller to the larger run divided by the extra submissions, so that one-off costs
(starting the CLI, nbgrader's database, the fork server's imports) count for
neither side.

It prints a table and writes ``benchmarks/results/grading_speed.json``. It is a
benchmark, not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6" / "part_b_bert_gpt.ipynb"
RESULTS = REPO / "benchmarks" / "results" / "grading_speed.json"
STOCK_CONFIG = """c = get_config()
c.CourseDirectory.course_id = "bench"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.Execute.timeout = 900
"""


def env() -> dict[str, str]:
    environment = dict(os.environ, WEEK6_FAST="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                       TRANSFORMERS_OFFLINE="1")
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    return environment


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return elapsed


def stock_nbgrader(scratch: Path, submissions: int) -> float:
    """Total seconds of stock, in-kernel ``nbgrader autograde`` on ``submissions`` copies."""
    root = scratch / f"stock{submissions}"
    shutil.copytree(REPO / "solutions" / "week6", root / "source" / "week6",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "nbgrader_config.py").write_text(STOCK_CONFIG)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    timed(nbgrader + ["generate_assignment", "week6", "--force"], root)
    for index in range(submissions):
        target = root / "submitted" / f"student{index:02d}" / "week6"
        target.mkdir(parents=True)
        shutil.copy(SAMPLE, target)
    # The stock kernel imports week6_helpers from the environment, like a student's.
    return timed(nbgrader + ["autograde", "week6", "--create", "--force"], root)


def this_grader(scratch: Path, students: int, jobs: int) -> float:
    """Total seconds for ``python -m autograder grade`` on ``students`` copies."""
    tree = scratch / f"class{students}"
    for index in range(students):
        target = tree / f"student{index:03d}" / "week6"
        target.mkdir(parents=True)
        shutil.copy(SAMPLE, target)
    command = [sys.executable, "-m", "autograder", "grade", str(tree), "--jobs", str(jobs),
               "--out", str(scratch / f"grades{students}"), "--device", "cpu"]
    return timed(command, REPO)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--class-sizes", type=int, nargs="+", default=[10, 25, 50])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--serial-class", type=int, default=5,
                        help="this grader with --jobs 1 grades 1 and then this many copies")
    parser.add_argument("--stock-submissions", type=int, default=3,
                        help="stock nbgrader grades 1 and then this many copies")
    args = parser.parse_args(argv)
    if not SAMPLE.is_file():
        raise SystemExit(f"missing {SAMPLE}: run python data/sample_submissions/build.py")

    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
                     "sample": str(SAMPLE.relative_to(REPO)), "jobs": args.jobs}
    small, large = 1, args.stock_submissions
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as scratch:
        scratch = Path(scratch)
        stock = {}
        for size in (small, large):
            print(f"stock nbgrader autograde (in-kernel), {size} submission(s) ...", flush=True)
            stock[size] = stock_nbgrader(scratch, size)
        print("this grader, one submission, one job ...", flush=True)
        single = this_grader(scratch, 1, 1)
        print(f"this grader, {args.serial_class} submissions, one job ...", flush=True)
        serial = this_grader(scratch, args.serial_class, 1)
        results["classes"] = []
        for size in args.class_sizes:
            print(f"this grader, class of {size}, --jobs {args.jobs} ...", flush=True)
            total = this_grader(scratch, size, args.jobs)
            results["classes"].append({"students": size, "total_s": round(total, 1),
                                       "s_per_submission": round(total / size, 2)})

    # Marginal cost of one more submission, set-up (start-up, imports, fork server) excluded.
    stock_marginal = (stock[large] - stock[small]) / (large - small)
    first, last = results["classes"][0], results["classes"][-1]
    class_marginal = (last["total_s"] - first["total_s"]) / (last["students"] - first["students"])
    results["stock_nbgrader"] = {"submissions": [small, large], "total_s": [round(stock[small], 1),
                                 round(stock[large], 1)], "s_per_submission_after_setup": round(stock_marginal, 2)}
    serial_marginal = (serial - single) / (args.serial_class - 1)
    results["this_grader_one_job"] = {"submissions": [1, args.serial_class], "total_s": [round(single, 1),
                                      round(serial, 1)], "s_per_submission_after_setup": round(serial_marginal, 2)}
    results["this_grader_s_per_submission_after_setup"] = round(class_marginal, 2)
    results["speedup_vs_stock"] = round(stock_marginal / class_marginal, 2)
    results["speedup_vs_stock_one_job"] = round(stock_marginal / serial_marginal, 2)
    print()
    print(f"{'':46} {'total s':>9} {'s / submission':>15}")
    print(f"{'stock nbgrader autograde (in-kernel), 1':46} {stock[small]:>9.1f} {stock[small]:>15.2f}")
    print(f"{f'stock nbgrader autograde (in-kernel), {large}':46} {stock[large]:>9.1f} {stock[large] / large:>15.2f}")
    print(f"{'this grader (sandboxed), 1, --jobs 1':46} {single:>9.1f} {single:>15.2f}")
    label = f"this grader (sandboxed), {args.serial_class}, --jobs 1"
    print(f"{label:46} {serial:>9.1f} {serial / args.serial_class:>15.2f}")
    for row in results["classes"]:
        label = f"this grader, class of {row['students']}, --jobs {args.jobs}"
        print(f"{label:46} {row['total_s']:>9.1f} {row['s_per_submission']:>15.2f}")
    print()
    print(f"after set-up, s per submission: stock {stock_marginal:.2f} (from {small} to {large}); this grader "
          f"{serial_marginal:.2f} with --jobs 1 (from 1 to {args.serial_class}, "
          f"{stock_marginal / serial_marginal:.1f}x), {class_marginal:.2f} with --jobs {args.jobs} "
          f"(from {first['students']} to {last['students']}, {stock_marginal / class_marginal:.1f}x)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
