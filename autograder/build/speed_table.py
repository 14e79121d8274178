"""The README's grading-speed table, written from the benchmark's results.

``benchmarks/grading_speed.py`` writes ``benchmarks/results/grading_speed.json``; ``make
regen`` rewrites the block of the README between the two markers below from it: the
machine and its speed index, every figure with its target and verdict, the ratios to the
baseline commit, and the dearest hidden tests. The prose around the block is kept by
hand; no figure is. ``tests/test_benchmark_results.py`` fails when the results were
measured on other hidden suites, references or grader than today's.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..paths import RESULTS as RESULTS_DIR

RESULTS = RESULTS_DIR / "grading_speed.json"
BEGIN = "<!-- grading-speed table: written by make regen from benchmarks/results/grading_speed.json -->"
END = "<!-- end of the grading-speed table -->"
BLOCK = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)


class SpeedTableError(Exception):
    """The README has no place for the table, or the results cannot fill it."""


def _n(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _verdict(results: dict, name: str) -> tuple[str, str, str]:
    """(target, measured, verdict) cells of one of the benchmark's targets."""
    target = results.get("targets", {}).get(name)
    if target is None:
        return "-", "-", "not measured"
    bound = f"at most {_n(target['limit'])}" if target["kind"] == "max" else f"at least {_n(target['limit'])}"
    value = results.get("figures", {}).get(name)
    verdict = {"PASS": "met", "MISS": "missed"}.get(results.get("verdicts", {}).get(name), "not measured")
    return bound, _n(value, 3), verdict


def _total(row: dict | None) -> str:
    return "-" if not row or not row.get("ok") else _n(row["total_s"], 1)


def table(results: dict) -> str:
    """The block's Markdown: a sentence on what was measured, the table, the dearest tests."""
    floor, base = results["floor"], results.get("baseline") or {}
    index = results.get("speed_index", {})
    classes = {row["students"]: row for row in results["classes"]}
    one_job = results["one_job"]
    shards = {row["students"]: row for row in results.get("shards") or []}
    stock = results.get("stock") or {}
    startup, base_startup = results.get("startup", {}), base.get("startup", {})
    load = results.get("load_average")
    lines = [
        f"Measured in one run ({_n(results['benchmark_s'], 0)} s in all) on {results['machine']}, "
        f"speed index {_n(index.get('workload_cpu_s'), 3)} CPU s (the benchmark's fixed workload on one core; "
        f"divide a figure by it to compare machines)"
        + (f", load average {_n(load[0])} before and {_n(load[1])} after" if load else "")
        + f", at commit `{results['commit']}` (suite hash `{results.get('suite_hash', '?')[:12]}`), "
          f"{_n(results['auto_points'], 0)} auto-graded points per student; the baseline `{base.get('commit', '-')}` "
          "was measured in the same run, in a worktree:",
        "",
        "| figure | target | measured | verdict |",
        "| --- | ---: | ---: | --- |",
        f"| (a) floor, s per student: wall / CPU | | {_n(floor.get('s_per_student'))} / "
        f"{_n(floor.get('cpu_s_per_student'))} | |",
        f"| (a) CPU s per auto-graded point: today / `{base.get('commit', '-')}` | | "
        f"{_n(floor.get('cpu_s_per_point'), 4)} / {_n(base.get('floor', {}).get('cpu_s_per_point'), 4)} | |",
        "| (a) per point, today / baseline | {} | {} | {} |".format(*_verdict(results, "floor_per_point")),
        f"| (b) this grader, `--jobs 1`: {' / '.join(str(r['students']) for r in one_job)} student(s), total s | | "
        f"{' / '.join(_total(r) for r in one_job)} | |",
        f"| (b) s per student after set-up | | {_n(results.get('one_job_s_per_student_after_setup'))} | |",
        "| (b) / (a) | {} | {} | {} |".format(*_verdict(results, "overhead")),
        f"| (c) class of {' / '.join(str(size) for size in classes)}, `--jobs {results['jobs']}`, total s | | "
        f"{' / '.join(_total(row) for row in classes.values())} | |",
        f"| (c) s per student after set-up (slope of the first two classes) | | "
        f"{_n(results.get('class_s_per_student_after_setup'))} | |",
        "| (c) slope / (a) | {} | {} | {} |".format(*_verdict(results, "slope")),
        "| (c) class of 300, total s | {} | {} | {} |".format(*_verdict(results, "class_300")),
        "| (c) 300-student total off the line, % | {} | {} | {} |".format(*_verdict(results, "linearity")),
        f"| (d) stock nbgrader, {stock.get('students', '-')} students, total s / s per student after set-up | | "
        f"{_total(stock)} / {_n(stock.get('s_per_student'), 1)} | |",
        "| (d) / (c) per student | {} | {} | {} |".format(*_verdict(results, "speedup")),
        f"| (e) 3 shards + merge, total s: {' / '.join(str(size) for size in shards)} students | | "
        f"{' / '.join(_total(row) for row in shards.values())} | |",
        "| (e) 3 shards / 1 run, largest class | {} | {} | {} |".format(*_verdict(results, "shards")),
    ]
    for process, name in (("fork_server", "fork server"), ("zygote", "one zygote")):
        today, before = startup.get(process, {}), base_startup.get(process, {})
        lines.append(f"| start-up, {name}'s imports, wall s: today / baseline | | {_n(today.get('wall_s'))} / "
                     f"{_n(before.get('wall_s'))} | |")
        lines.append(f"| start-up, {name}, today / baseline | {{}} | {{}} | {{}} |"
                     .format(*_verdict(results, f"startup_{process}")))
    lines.append(f"| start-up, the CLI's imports, wall s | | {_n(startup.get('cli', {}).get('wall_s'))} | |")
    if stock.get("s_per_notebook"):
        lines += ["", "Stock nbgrader's seconds per notebook (fast mode, mean over its students): " + ", ".join(
            f"{stem} {_n(seconds, 1)}" for stem, seconds in stock["s_per_notebook"].items()) + "."]
    dearest = floor.get("dearest_tests") or []
    unit = index.get("workload_cpu_s")
    if dearest and unit:
        lines += ["", f"The {len(dearest)} dearest hidden tests of (a), CPU s on this machine (and in units of "
                      "the speed index, the figure `docs/authoring.md`'s budget is stated in):", ""]
        lines += [f"- `{row['test']}`: {_n(row['cpu_s'], 3)} s ({_n(row['cpu_s'] / unit)})" for row in dearest]
    return "\n".join([BEGIN, *lines, END])


def with_speed_table(text: str, results: dict) -> str:
    """``text`` (the README) with its grading-speed block written from ``results``."""
    if not BLOCK.search(text):
        raise SpeedTableError(f"README.md has no grading-speed block: put the two lines {BEGIN!r} and {END!r} "
                              "where the table goes")
    return BLOCK.sub(lambda _: table(results), text, count=1)


def load_results(path: Path = RESULTS) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SpeedTableError(f"{path}: {err}; run .venv/bin/python benchmarks/grading_speed.py") from err
