"""The floor of row (a) of ``benchmarks/grading_speed.py``, measured in a process of its own.

    python benchmarks/floor_worker.py OUT.json TREE

imports the grader of ``TREE`` (this repository, or a baseline's git worktree) as the fork
server does, then times only its eight hidden suites with its reference implementations as
the student: wall and CPU seconds per suite, and per hidden test where that tree's
``run_hidden_suite`` takes plugins. It writes them to ``OUT.json``.

It is a script of its own, importing nothing of any grader before ``TREE`` is first on
``sys.path``: a process that had already imported one tree's ``autograder`` package would
take the other tree's modules from it, and measure the wrong suites. It checks that the
grader it imported is ``TREE``'s.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
import time
from pathlib import Path

DEAREST = 10  # the hidden tests the JSON (and the README) lists, dearest first


def main(out: Path, tree: Path) -> int:
    tree = tree.resolve()
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    import autograder.preload  # noqa: F401  (what the fork server imports)

    imported = Path(sys.modules["autograder"].__file__).resolve().parents[1]
    if imported != tree:
        print(f"floor_worker: imported the grader of {imported}, not of {tree}", file=sys.stderr)
        return 1
    import pytest

    from autograder.course import load_course
    from autograder.pytest_plugin import run_hidden_suite
    from autograder.reference import arithmetic
    from tests.grading.inprocess import InProcessSession, grading_environment, reference_namespace

    class TestTimes:
        """CPU and wall seconds of each hidden test, set-up and teardown included."""

        def __init__(self):
            self.rows: list[dict] = []

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            wall, cpu = time.perf_counter(), time.process_time()
            yield
            self.rows.append({"test": item.nodeid, "cpu_s": round(time.process_time() - cpu, 3),
                              "wall_s": round(time.perf_counter() - wall, 3)})

    per_test = "plugins" in inspect.signature(run_hidden_suite).parameters
    times = TestTimes()
    stems = [notebook.stem for notebook in load_course().notebooks if notebook.auto_points]
    namespace = reference_namespace()
    namespace["CAT_NEXT_WORD_PROBS"] = arithmetic.softmax_worked_example()
    suites = {}
    with grading_environment():
        started, started_cpu = time.perf_counter(), time.process_time()
        for stem in stems:
            began, began_cpu = time.perf_counter(), time.process_time()
            results = run_hidden_suite(stem, InProcessSession(namespace), device="cpu",
                                       **({"plugins": [times]} if per_test else {}))
            suites[stem] = {"s": round(time.perf_counter() - began, 2),
                            "cpu_s": round(time.process_time() - began_cpu, 2), "tests": len(results),
                            "passed": sum(r.status == "passed" for r in results),
                            "points": round(sum(r.points for r in results), 4),
                            "max_points": round(sum(r.max_points for r in results), 4)}
        total, total_cpu = time.perf_counter() - started, time.process_time() - started_cpu
    dearest = sorted(times.rows, key=lambda row: -row["cpu_s"])[:DEAREST] if per_test else None
    out.write_text(json.dumps({"total_s": total, "cpu_s": total_cpu, "suites": suites, "dearest": dearest,
                               "grader": str(imported)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
