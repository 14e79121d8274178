"""What the grade's defences cost: the sample class graded with and without them, side by side.

Three configurations of ``python -m autograder grade`` on the bundled sample class
(``--jobs 2 --force``), run in turns so that a busy machine weighs on each alike:

* ``unwatched``: the run-time watch of forbidden shortcuts off (every item's calls run
  plainly; the static check stays), hidden inputs from the public seeds: the baseline;
* ``watched``: the watch on (``autograder/sandbox/watch.py``), public seeds: what CI grades;
* ``watched+secret``: the watch on and a course secret, so every hidden input is drawn
  for the student, with the margin-checked redraws of ``autograder/draws.py``.

The watch is switched off only inside this script's own grading process (``Rule.watched``
patched before the CLI starts); the grader has no option for it. The target: the watch,
and the drawn inputs, each add at most 10 % to the class's grading time.

    .venv/bin/python benchmarks/grading_overhead.py [--rounds 3]

writes ``benchmarks/results/grading_overhead.json`` and prints the medians and ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "grading_overhead.json"
SECRET = "a course secret for the overhead benchmark"

UNWATCHED = (
    "import sys, autograder.forbidden as forbidden\n"
    "forbidden.Rule.watched = property(lambda rule: False)\n"
    "from autograder.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
CONFIGURATIONS = {
    "unwatched": ([sys.executable, "-c", UNWATCHED], {}),
    "watched": ([sys.executable, "-m", "autograder"], {}),
    "watched+secret": ([sys.executable, "-m", "autograder"], {"WEEK6_GRADING_SECRET": SECRET}),
}


def grade_once(name: str, out: Path) -> float:
    """Seconds to grade the sample class in configuration ``name``."""
    command, extra = CONFIGURATIONS[name]
    env = {k: v for k, v in os.environ.items() if k != "WEEK6_GRADING_SECRET"} | extra
    started = time.perf_counter()
    result = subprocess.run([*command, "grade", "--out", str(out), "--jobs", "2", "--force", "--device", "cpu"],
                            cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{name}: the grader exited {result.returncode}:\n{result.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each configuration (default 3)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CONFIGURATIONS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for name in CONFIGURATIONS:
                seconds = grade_once(name, Path(scratch) / name)
                times[name].append(round(seconds, 2))
                print(f"round {round_ + 1}: {name:15s} {seconds:7.1f} s", flush=True)
    median = {name: statistics.median(values) for name, values in times.items()}
    ratios = {
        "watched / unwatched": round(median["watched"] / median["unwatched"], 3),
        "watched+secret / watched": round(median["watched+secret"] / median["watched"], 3),
        "watched+secret / unwatched": round(median["watched+secret"] / median["unwatched"], 3),
    }
    RESULTS.write_text(json.dumps({"runs_s": times, "median_s": median, "ratios": ratios,
                                   "machine": f"{os.cpu_count()} CPUs", "rounds": args.rounds}, indent=2) + "\n")
    for name, value in median.items():
        print(f"median {name:15s} {value:7.1f} s")
    for name, value in ratios.items():
        print(f"{name:28s} {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
