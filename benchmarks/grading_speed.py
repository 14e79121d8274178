"""Grading speed at class scale: this grader on full submissions, its floor, and stock nbgrader.

    .venv/bin/python benchmarks/grading_speed.py [--quick] [--sizes 10 50 300] [--jobs 2]
                                                 [--stock-students 2] [--skip-stock] [--results FILE]

Every submission is a whole one: the eight notebooks of
``data/sample_submissions/alice_full_solution/week6`` (all the course's auto-graded points),
copied into ``<student>/week6/`` for each student of a class. One run measures,
side by side, on this machine:

(a) the floor: the eight hidden suites with the reference implementations playing
    the student, in one process that has imported everything first, with no
    sandbox, no notebook and no CLI (``tests/grading/inprocess.py``). It is what
    grading costs when only the tests run, so the grader's own cost per student is
    read against it.
(b) this grader, ``python -m autograder grade --jobs 1 --device cpu`` on one
    student, then on a class of 5: the growth of the total divided by the 4 extra
    students is the cost of a student after set-up (CLI start, fork server), on one
    core; that over (a) is the grader's overhead.
(c) classes of 10, 50 and 300 students with ``--jobs 2`` (``--quick`` skips 300):
    total and per student, and whether the total is linear in the class: a line
    through the 10- and 50-student totals, and how far the 300-student total is
    from it. The slope of that line is this grader's cost per student at class
    scale.
(d) stock ``nbgrader autograde``: the student's notebook executed top to bottom in
    a Jupyter kernel with nbgrader's own preprocessors, experiments in fast mode
    (``WEEK6_FAST=1``), ``WEEK6_DATA`` naming this repository's data folder so the
    notebooks find their files; ``--stock-students`` students (default 2), one
    notebook at a time, as stock nbgrader grades. Its cost per student after set-up
    comes from the run's own log: the total from the first notebook on, divided by
    the students. Stock nbgrader runs student code in its kernel (the cheats among
    the samples score full marks there); it is here for its time only.
(e) sharding: the 50-student class of (c) (the second size) and the largest class
    (300; with ``--quick``, 50) each graded as 3 shards one after another
    (``--shard 0/3``, ``1/3``, ``2/3`` into one folder, then ``python -m autograder
    merge``), against (c)'s one unsharded run of the same class: what splitting a
    class into a job array costs. Each shard pays the run's start-up (the fork
    server's and the zygotes' imports, seconds of CPU) once more, a fixed cost that
    a class worth sharding dwarfs: the target is read on the largest class, and the
    50-student ratio shows how the cost weighs on a small one.

Start-up, what every run (and so every shard) pays before its first report: the
imports of the CLI, of the fork server (``autograder.preload``) and of one zygote
(the drivers and every fixture's model code), each timed in a fresh Python (wall
and CPU seconds), beside the extra seconds each shard of (e) cost over the
unsharded run.

A time counts only when its grading was right. For this grader: every notebook
has a report, every report's score equals its max_score, and each student has
all its points. For (a): every test passed. For (d): nbgrader's gradebook gives each
student all the auto-graded points (a notebook that cannot find its data
fails fast, and would make stock nbgrader look fast). A side whose check fails is
printed as such and its figures count for no target.

Memory: each report carries ``grader_peak_rss_mib``, the peak RSS of the trusted
grading process of that notebook; the max and median are reported per run. The
sandboxed workers (and the whole process tree of a run) are sampled with psutil
every 0.5 s while the CLI runs: a sampled peak, so a lower bound of the true one.

It prints every figure, then the ratios the targets are about, each with PASS or
MISS, and writes ``benchmarks/results/grading_speed.json`` (``--results``). It
is a benchmark, not a test: nothing here asserts a time. ``--sizes`` replaces the
class sizes of (c) for a smoke test, and caps the others by them: (b) grades 1
and min(5, the second size) students, (e) the second size.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FULL = REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6"
RESULTS = REPO / "benchmarks" / "results" / "grading_speed.json"
# The floor runs in a script of its own: a process that imported this script's grader
# could not import a baseline's.
FLOOR_WORKER = REPO / "benchmarks" / "floor_worker.py"
sys.path.insert(0, str(REPO))
from autograder.course import load_course  # noqa: E402  (the course model: its points, not a copy)
from autograder.files import write_json_atomically  # noqa: E402

AUTO_POINTS = sum(notebook.auto_points for notebook in load_course().notebooks)  # the eight notebooks together
NOTEBOOKS = 8
SERIAL_CLASS = 5
SHARDS = 3
SAMPLE_EVERY_S = 0.5
# The sandboxed processes run modules of this package (the worker, the zygote it is forked from).
SANDBOX_MODULES = "autograder.sandbox."
TARGETS = {  # name: (what, limit, "max" or "min")
    "overhead": ("(b) s per student after set-up / (a)", 1.3, "max"),
    "speedup": ("(d) stock / (c) s per student after set-up", 10.0, "min"),
    "class_300": ("300-student class total, s", 15 * 60.0, "max"),
    "linearity": ("300-student total off the 10-50 line, %", 10.0, "max"),
    "shards": ("3 shards / 1 run", 1.1, "max"),
    "slope": ("(c) s per student after set-up / (a), 2 cores", 0.6, "max"),
    "floor_per_point": ("(a) CPU s per point / the baseline's", 0.67, "max"),
    "startup_fork_server": ("fork server's imports, wall s / the baseline's", 0.5, "max"),
    "startup_zygote": ("a zygote's imports, wall s / the baseline's", 0.5, "max"),
}
# The commit the ratios to a baseline are read against: the hidden suites before they were made cheaper.
BASELINE = "095cd0f"
STOCK_CONFIG = """c = get_config()
c.CourseDirectory.course_id = "bench"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.Execute.timeout = 900
c.Application.log_format = "%(asctime)s.%(msecs)03d [%(levelname)s] %(message)s"
c.Application.log_datefmt = "%Y-%m-%d %H:%M:%S"
"""


# ------------------------------------------------------------------ running things
def env(**extra: str) -> dict[str, str]:
    environment = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                       **extra)
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    return environment


class TreeSampler:
    """Peak RSS of a process tree, sampled: the largest sandboxed process, and the whole tree's sum
    (which counts pages that forked processes share once per process: an upper bound)."""

    def __init__(self, pid: int):
        self.pid, self.worker_mib, self.tree_mib = pid, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                processes = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            tree = 0.0
            for process in processes:
                try:
                    rss = process.memory_info().rss / 2**20
                    tree += rss
                    if any(part.startswith(SANDBOX_MODULES) for part in process.cmdline()):
                        self.worker_mib = max(self.worker_mib, rss)
                except psutil.Error:
                    continue
            self.tree_mib = max(self.tree_mib, tree)


def timed(command: list[str], cwd: Path = REPO, environment: dict[str, str] | None = None,
          sample: bool = False) -> tuple[float, subprocess.CompletedProcess, TreeSampler | None]:
    """Wall seconds of ``command``, its result, and its sampled memory (``sample``)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=environment or env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(process.pid) if sample else None
    if sampler is not None:
        with sampler:
            stdout, stderr = process.communicate()
    else:
        stdout, stderr = process.communicate()
    elapsed = time.perf_counter() - started
    return elapsed, subprocess.CompletedProcess(command, process.returncode, stdout, stderr), sampler


def commit() -> str:
    """The repository's commit, "+changes" when the working tree differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"


def tail(result: subprocess.CompletedProcess, lines: int = 15) -> str:
    return "\n".join((result.stdout + result.stderr).strip().splitlines()[-lines:])


def make_class(root: Path, students: int) -> Path:
    """``root/<student>/week6/`` with the eight notebooks of the full solution, for each student."""
    for index in range(students):
        target = root / f"student{index:03d}" / "week6"
        target.mkdir(parents=True)
        for notebook in sorted(FULL.glob("*.ipynb")):
            shutil.copyfile(notebook, target / notebook.name)
    return root


# ------------------------------------------------------------------ (a) the floor
def in_process_floor(scratch: Path, tree: Path = REPO) -> dict:
    """The floor of ``tree``, checked: every hidden test passed, every point earned (and,
    for this repository, the course's total; a baseline had its own)."""
    out = scratch / f"floor-{tree.name}.json"
    elapsed, result, _ = timed([sys.executable, str(FLOOR_WORKER), str(out), str(tree)])
    if result.returncode != 0 or not out.is_file():
        return {"ok": False, "problem": f"exit {result.returncode}: {tail(result)}"}
    floor = json.loads(out.read_text())
    suites = floor["suites"]
    earned = sum(s["points"] for s in suites.values())
    available = sum(s["max_points"] for s in suites.values())
    failing = [stem for stem, s in suites.items() if s["passed"] != s["tests"]]
    ok = (not failing and len(suites) == NOTEBOOKS and abs(earned - available) < 1e-6
          and (tree != REPO or abs(earned - AUTO_POINTS) < 1e-6))
    return {"ok": ok, "s_per_student": round(floor["total_s"], 2), "cpu_s_per_student": round(floor["cpu_s"], 2),
            "s_per_point": round(floor["total_s"] / earned, 4) if earned else None,
            "cpu_s_per_point": round(floor["cpu_s"] / earned, 4) if earned else None,
            "process_s": round(elapsed, 1), "points": earned, "suites": suites,
            **({"dearest_tests": floor["dearest"]} if floor.get("dearest") else {}),
            **({} if ok else {"problem": f"tests failed in {failing or 'none'}, {earned:g}/{available:g} points"})}


# ------------------------------------------------------------------ start-up
STARTUP_IMPORTS = {  # what a run imports before its first report, process by process
    "cli": "autograder.cli",
    "fork_server": "autograder.preload",
    "zygote": "autograder.drivers.models, autograder.drivers.probes, autograder.drivers.fixture_modules, "
              "autograder.sandbox.worker_main",
}


def startup_costs(tree: Path = REPO) -> dict:
    """Wall and CPU seconds of each start-up import of ``tree``, in a fresh Python each (median of 3)."""
    import resource

    costs = {}
    for name, modules in STARTUP_IMPORTS.items():
        walls, cpus = [], []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import {modules}"], cwd=tree, env=env(PYTHONPATH=str(tree)),
                           check=True)
            walls.append(time.perf_counter() - began)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        costs[name] = {"wall_s": round(statistics.median(walls), 2), "cpu_s": round(statistics.median(cpus), 2)}
    return costs


# ------------------------------------------------------------------ the baseline and the machine
def baseline(scratch: Path, revision: str) -> dict:
    """The floor and the start-up of ``revision``, in a git worktree of it, with this
    environment: the same machine, minutes apart, so the ratios hold on any machine."""
    tree = scratch / "baseline"
    added = subprocess.run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=REPO,
                           capture_output=True, text=True)
    if added.returncode != 0:
        return {"ok": False, "commit": revision, "problem": f"git worktree add: {tail(added)}"}
    try:
        resolved = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                                  text=True).stdout.strip()
        floor = in_process_floor(scratch, tree)
        return {"ok": floor["ok"], "commit": resolved, "floor": floor, "startup": startup_costs(tree),
                **({"problem": floor["problem"]} if not floor["ok"] else {})}
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)


def speed_index(repeats: int = 5) -> dict:
    """CPU seconds of a fixed workload on one core, the least of ``repeats`` runs: pure
    Python (dicts, ints, sorting strings: the interpreter work of pytest, the unpickler and
    the suites' loops) and small single-threaded torch matrix products. A figure divided by
    ``workload_cpu_s`` compares across machines; the repository's own machine is about 0.5 s."""
    import torch

    def interpreter() -> None:
        counts: dict[int, int] = {}
        for i in range(1_200_000):
            counts[i % 1000] = counts.get(i % 1000, 0) + i * i
        sorted(str(value) for value in counts.values())

    def tensors() -> None:
        matrix = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))
        for _ in range(1200):
            matrix = torch.tanh(matrix @ matrix.T / 128)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        parts = {}
        for name, work in (("python_cpu_s", interpreter), ("torch_cpu_s", tensors)):
            runs = []
            for _ in range(repeats):
                began = time.process_time()
                work()
                runs.append(time.process_time() - began)
            parts[name] = round(min(runs), 3)
    finally:
        torch.set_num_threads(threads)
    return {"workload_cpu_s": round(sum(parts.values()), 3), **parts}


def graded_by() -> dict:
    """What the figures were measured on: the hash of the grader, hidden suites, references
    and instructor notebooks (``autograder.version.suite_hash``, what a report records)."""
    from autograder.version import suite_hash

    return {"suite_hash": suite_hash()}


# ------------------------------------------------------------------ this grader
def check_reports(out: Path, students: int) -> dict:
    """Every notebook of every student reported with full marks; peak RSS of the grading processes."""
    reports = [json.loads(path.read_text()) for path in sorted(out.glob("*/*.json"))]
    short = [f"{r['student']}/{r['notebook']}: {r['score']:g}/{r['max_score']:g} ({r['outcome']})"
             for r in reports if r["score"] != r["max_score"] or r["outcome"] != "graded"]
    per_student: dict[str, float] = {}
    for report in reports:
        per_student[report["student"]] = per_student.get(report["student"], 0.0) + report["score"]
    wrong_total = {s: p for s, p in per_student.items() if abs(p - AUTO_POINTS) > 1e-6}
    rss = [r["grader_peak_rss_mib"] for r in reports if r.get("grader_peak_rss_mib") is not None]
    problems = short[:5]
    if len(reports) != students * NOTEBOOKS:
        problems.append(f"{len(reports)} reports for {students} x {NOTEBOOKS} notebooks")
    if wrong_total:
        problems.append(f"students without {AUTO_POINTS} points: {dict(list(wrong_total.items())[:5])}")
    return {"ok": not problems, "reports": len(reports), **({"problem": "; ".join(problems)} if problems else {}),
            "grader_peak_rss_mib": {"max": max(rss, default=None),
                                    "median": round(statistics.median(rss), 1) if rss else None}}


def grade_command(tree: Path, out: Path, jobs: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(tree), "--out", str(out), "--jobs", str(jobs),
            "--device", "cpu", *extra]


def this_grader(scratch: Path, students: int, jobs: int) -> dict:
    """``python -m autograder grade`` on a fresh class of ``students`` and a fresh output folder."""
    tree = make_class(scratch / f"class{students}-jobs{jobs}", students)
    out = scratch / f"grades{students}-jobs{jobs}"
    elapsed, result, sampler = timed(grade_command(tree, out, jobs), sample=True)
    row = {"students": students, "jobs": jobs, "total_s": round(elapsed, 1),
           "s_per_student": round(elapsed / students, 2), "exit": result.returncode,
           **check_reports(out, students), "worker_peak_rss_mib_sampled": round(sampler.worker_mib, 1),
           "tree_peak_rss_mib_sampled": round(sampler.tree_mib, 1)}
    if result.returncode != 0:
        row["ok"] = False
        row["problem"] = f"exit {result.returncode}: {tail(result)}"
    shutil.rmtree(tree)
    return row


def sharded(scratch: Path, students: int, jobs: int) -> dict:
    """The class graded as ``SHARDS`` shards one after another into one folder, then merged."""
    tree = make_class(scratch / f"sharded{students}", students)
    out = scratch / f"sharded{students}-grades"
    total, problems, worker, whole = 0.0, [], 0.0, 0.0
    for index in range(SHARDS):
        elapsed, result, sampler = timed(grade_command(tree, out, jobs, "--shard", f"{index}/{SHARDS}"),
                                         sample=True)
        total += elapsed
        worker, whole = max(worker, sampler.worker_mib), max(whole, sampler.tree_mib)
        if result.returncode != 0:
            problems.append(f"shard {index}: exit {result.returncode}: {tail(result)}")
    elapsed, result, _ = timed([sys.executable, "-m", "autograder", "merge", str(out)])
    total += elapsed
    if result.returncode != 0:
        problems.append(f"merge: exit {result.returncode}: {tail(result)}")
    row = {"students": students, "jobs": jobs, "shards": SHARDS, "total_s": round(total, 1),
           "merge_s": round(elapsed, 1), **check_reports(out, students),
           "worker_peak_rss_mib_sampled": round(worker, 1), "tree_peak_rss_mib_sampled": round(whole, 1)}
    if problems:
        row["ok"] = False
        row["problem"] = "; ".join(problems + [row.get("problem", "")]).strip("; ")
    shutil.rmtree(tree)
    return row


# ------------------------------------------------------------------ (d) stock nbgrader
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \[\w+\] Sanitizing (.+\.ipynb)$")


def sanitizing_times(log: str) -> list[tuple[float, str]]:
    """(epoch seconds, notebook path) of each notebook nbgrader starts, from its log."""
    found = []
    for line in log.splitlines():
        match = LOG_LINE.match(line.strip())
        if match:
            stamp = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            found.append((stamp, match.group(2)))
    return found


def stock_nbgrader(scratch: Path, students: int) -> dict:
    """Stock in-kernel ``nbgrader autograde`` of ``students`` full submissions, checked in its gradebook."""
    root = scratch / "stock"
    shutil.copytree(REPO / "solutions" / "week6", root / "source" / "week6",
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    (root / "nbgrader_config.py").write_text(STOCK_CONFIG)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    stock_env = env(WEEK6_FAST="1", WEEK6_DATA=str(REPO / "data"))
    _, generated, _ = timed(nbgrader + ["generate_assignment", "week6", "--force"], root, stock_env)
    if generated.returncode != 0:
        return {"ok": False, "students": students, "problem": f"generate_assignment: {tail(generated)}"}
    make_class(root / "submitted", students)
    started = time.time()
    elapsed, result, _ = timed(nbgrader + ["autograde", "week6", "--create", "--force"], root, stock_env)
    ended = started + elapsed
    starts = sanitizing_times(result.stderr)
    row = {"students": students, "total_s": round(elapsed, 1), "exit": result.returncode}
    if starts:
        row["setup_s"] = round(starts[0][0] - started, 1)
        row["s_per_student"] = round((ended - starts[0][0]) / students, 1)
        row["s_per_notebook"] = stock_notebook_times(starts, ended)
    scores, problems = stock_scores(root, students)
    row["auto_scores"] = scores
    if result.returncode != 0:
        problems.append(f"exit {result.returncode}: {tail(result)}")
    if not starts:
        problems.append("no 'Sanitizing' lines in nbgrader's log to time the notebooks by")
    row["ok"] = not problems
    if problems:
        row["problem"] = "; ".join(problems)
    return row


def stock_notebook_times(starts: list[tuple[float, str]], ended: float) -> dict[str, float]:
    """Mean seconds per notebook over the students: from its start to the next notebook's (or the end)."""
    spans: dict[str, list[float]] = {}
    for (stamp, path), following in zip(starts, [s for s, _ in starts[1:]] + [ended]):
        spans.setdefault(Path(path).stem, []).append(following - stamp)
    return {stem: round(statistics.mean(values), 1) for stem, values in sorted(spans.items())}


def stock_scores(root: Path, students: int) -> tuple[dict[str, str], list[str]]:
    """Each student's auto-graded score in nbgrader's gradebook, and what is wrong with them."""
    from nbgrader.api import Gradebook, MissingEntry

    scores, problems = {}, []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "bench") as gradebook:
        for index in range(students):
            student = f"student{index:03d}"
            try:
                submission = gradebook.find_submission("week6", student)
            except MissingEntry:
                problems.append(f"{student}: no submission in the gradebook")
                continue
            scores[student] = f"{submission.code_score:g}/{submission.max_code_score:g}"
            if not (submission.code_score == submission.max_code_score == AUTO_POINTS):
                low = [f"{n.name} {n.code_score:g}/{n.max_code_score:g}" for n in submission.notebooks
                       if n.code_score != n.max_code_score]
                problems.append(f"{student}: {scores[student]} auto-graded points, not {AUTO_POINTS} "
                                f"({', '.join(low)})")
    return scores, problems


# ------------------------------------------------------------------ figures and targets
def figures(results: dict) -> dict:
    """The ratios the targets are about, each None where its inputs are missing or failed their check."""
    floor, serial, classes = results["floor"], results["one_job"], results["classes"]
    stock = results.get("stock")

    def good(*rows) -> bool:
        return all(row is not None and row.get("ok") for row in rows)

    out: dict[str, float | None] = dict.fromkeys(TARGETS)
    one, few = serial
    if good(one, few) and few["students"] > one["students"]:
        results["one_job_s_per_student_after_setup"] = round(
            (few["total_s"] - one["total_s"]) / (few["students"] - one["students"]), 2)
        if good(floor):
            out["overhead"] = results["one_job_s_per_student_after_setup"] / floor["s_per_student"]
    if len(classes) >= 2 and good(*classes[:2]):
        small, large = classes[:2]
        slope = (large["total_s"] - small["total_s"]) / (large["students"] - small["students"])
        results["class_s_per_student_after_setup"] = round(slope, 2)
        if good(floor):
            out["slope"] = slope / floor["s_per_student"]
        if good(stock) and "s_per_student" in stock and slope > 0:
            out["speedup"] = stock["s_per_student"] / slope
        if len(classes) >= 3 and good(classes[2]):
            predicted = small["total_s"] + slope * (classes[2]["students"] - small["students"])
            out["linearity"] = abs(classes[2]["total_s"] - predicted) / predicted * 100
    big = [row for row in classes if row["students"] == 300]
    if big and good(big[0]):
        out["class_300"] = big[0]["total_s"]
    results["shard_ratio"], results["extra_s_per_shard"] = {}, {}
    for shards in results.get("shards") or []:
        unsharded = next((row for row in classes if row["students"] == shards["students"]), None)
        if good(shards, unsharded):
            key = str(shards["students"])
            results["shard_ratio"][key] = round(shards["total_s"] / unsharded["total_s"], 3)
            results["extra_s_per_shard"][key] = round((shards["total_s"] - unsharded["total_s"]) / (SHARDS - 1), 1)
            out["shards"] = shards["total_s"] / unsharded["total_s"]  # the largest class, the last row
    base = results.get("baseline")
    if good(base, floor):
        out["floor_per_point"] = floor["cpu_s_per_point"] / base["floor"]["cpu_s_per_point"]
    if base is not None and base.get("startup") and results.get("startup"):
        for process in ("fork_server", "zygote"):
            out[f"startup_{process}"] = results["startup"][process]["wall_s"] / base["startup"][process]["wall_s"]
    return {name: None if value is None else round(value, 3) for name, value in out.items()}


def verdict(name: str, value: float | None) -> str:
    if value is None:
        return "not measured"
    _, limit, kind = TARGETS[name]
    return "PASS" if (value <= limit if kind == "max" else value >= limit) else "MISS"


def row_line(label: str, row: dict | None) -> str:
    if row is None:
        return f"{label:52} {'skipped':>10}"
    total = row.get("total_s")
    per = row.get("s_per_student")
    check = "ok" if row.get("ok") else f"NOT COUNTED: {row.get('problem', '?')}"
    return (f"{label:52} {total if total is not None else '-':>10} {per if per is not None else '-':>12}"
            f"  {check}")


def print_results(results: dict) -> None:
    floor, jobs = results["floor"], results["jobs"]
    print()
    print(f"{'run':52} {'total s':>10} {'s / student':>12}  check")
    print(f"{'(a) in-process floor: 8 suites, reference as student':52} {'-':>10} "
          f"{floor.get('s_per_student', '-'):>12}  " + ("ok" if floor["ok"] else f"NOT COUNTED: {floor['problem']}"))
    base = results.get("baseline")
    if base is not None:
        shown = (f"{base['floor']['s_per_student']} s, {base['floor']['cpu_s_per_point']} CPU s per point"
                 if base.get("ok") else f"NOT COUNTED: {base.get('problem', '?')}")
        print(f"{'(a) the baseline ' + base['commit'] + ', the same floor':52} {'-':>10} {shown}")
    for row in results["one_job"]:
        print(row_line(f"(b) this grader, {row['students']} student(s), --jobs 1", row))
    for row in results["classes"]:
        print(row_line(f"(c) this grader, class of {row['students']}, --jobs {jobs}", row))
    stock = results.get("stock")
    print(row_line(f"(d) stock nbgrader autograde, {stock['students'] if stock else '-'} student(s)", stock))
    if stock and stock.get("auto_scores"):
        print(f"{'':52} auto-graded: {', '.join(f'{s} {p}' for s, p in stock['auto_scores'].items())}")
    if stock and stock.get("s_per_notebook"):
        print(f"{'':52} s per notebook (mean over the students):")
        for stem, seconds in stock["s_per_notebook"].items():
            print(f"{'':54}{stem:40} {seconds:>6g}")
    for shards in results.get("shards") or [None]:
        print(row_line(f"(e) {SHARDS} shards one after another + merge, "
                       f"{shards['students'] if shards else '-'} student(s)", shards))
    print()
    print("after set-up, s per student: "
          f"--jobs 1 {results.get('one_job_s_per_student_after_setup', '-')}, "
          f"--jobs {jobs} {results.get('class_s_per_student_after_setup', '-')}, "
          f"stock {stock.get('s_per_student', '-') if stock else '-'}")
    startup = results.get("startup") or {}
    if startup:
        print("start-up imports, wall / CPU s: " + ", ".join(
            f"{name} {cost['wall_s']} / {cost['cpu_s']}" for name, cost in startup.items())
              + "; extra s per shard of (e) over the single run, by class size: "
              + (", ".join(f"{size}: {extra}" for size, extra in results.get("extra_s_per_shard", {}).items()) or "-"))
    if base is not None and base.get("startup"):
        print(f"the baseline {base['commit']}'s start-up imports, wall / CPU s: " + ", ".join(
            f"{name} {cost['wall_s']} / {cost['cpu_s']}" for name, cost in base["startup"].items()))
    print()
    print_floor(floor, results["speed_index"])
    print("peak RSS, MiB: grading process (max / median over the reports); sandboxed worker and whole "
          "process tree (sampled)")
    for label, row in memory_rows(results):
        grader = row["grader_peak_rss_mib"]
        print(f"  {label:44} grader {grader['max']} / {grader['median']}, worker {row['worker_peak_rss_mib_sampled']}"
              f", tree {row['tree_peak_rss_mib_sampled']}")
    print()
    print(f"{'target':52} {'measured':>10} {'limit':>12}  verdict")
    for name, value in results["figures"].items():
        what, limit, kind = TARGETS[name]
        shown = "-" if value is None else f"{value:g}"
        print(f"{what:52} {shown:>10} {('<= ' if kind == 'max' else '>= ') + f'{limit:g}':>12}  "
              f"{results['verdicts'][name]}")


def print_floor(floor: dict, index: dict) -> None:
    """(a) per suite and its dearest hidden tests, in CPU seconds and in units of the speed index."""
    unit = index["workload_cpu_s"]
    print(f"speed index: the fixed workload took {unit:g} CPU s on one core "
          f"(python {index['python_cpu_s']:g}, torch {index['torch_cpu_s']:g}); 'units' = CPU s / {unit:g}")
    print(f"{'(a) suite':44} {'tests':>6} {'points':>7} {'wall s':>7} {'CPU s':>7} {'units':>6}")
    for stem, suite in floor.get("suites", {}).items():
        print(f"  {stem:42} {suite['tests']:>6} {suite['points']:>7g} {suite['s']:>7g} {suite.get('cpu_s', 0):>7g} "
              f"{suite.get('cpu_s', 0) / unit:>6.2f}")
    if floor.get("cpu_s_per_student") is not None:
        print(f"  {'all':42} {'':>6} {floor['points']:>7g} {floor['s_per_student']:>7g} "
              f"{floor['cpu_s_per_student']:>7g} {floor['cpu_s_per_student'] / unit:>6.2f}"
              f"   ({floor['cpu_s_per_point']:g} CPU s per point)")
    if floor.get("dearest_tests"):
        print(f"the {len(floor['dearest_tests'])} dearest hidden tests (CPU s, units):")
        for row in floor["dearest_tests"]:
            print(f"  {row['cpu_s']:6.3f} {row['cpu_s'] / unit:5.2f}  {row['test']}")


def print_floor_only() -> int:
    with tempfile.TemporaryDirectory(prefix="grading-floor-") as scratch:
        index = speed_index()
        floor = in_process_floor(Path(scratch))
    print_floor(floor, index)
    if not floor["ok"]:
        print(f"NOT COUNTED: {floor['problem']}")
    return 0 if floor["ok"] else 1


def memory_rows(results: dict) -> list[tuple[str, dict]]:
    rows = [(f"(b) {r['students']} student(s), --jobs 1", r) for r in results["one_job"]]
    rows += [(f"(c) class of {r['students']}, --jobs {r['jobs']}", r) for r in results["classes"]]
    for shards in results.get("shards") or []:
        rows.append((f"(e) {SHARDS} shards of {shards['students']}", shards))
    return [(label, row) for label, row in rows if "grader_peak_rss_mib" in row]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 300],
                        help="the class sizes of (c); the second (else the first) is also (e)'s class "
                             "(default 10 50 300)")
    parser.add_argument("--quick", action="store_true", help="skip the third (300-student) class")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs of (c) and (e) (default 2)")
    parser.add_argument("--stock-students", type=int, default=2, help="students of stock nbgrader (default 2)")
    parser.add_argument("--skip-stock", action="store_true", help="do not run stock nbgrader")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"where the JSON goes (default {RESULTS.relative_to(REPO)})")
    parser.add_argument("--baseline", default=BASELINE, metavar="REV",
                        help=f"the commit whose floor and start-up the ratios compare with, measured in the same "
                             f"run in a git worktree (default {BASELINE}; 'none' skips it)")
    parser.add_argument("--floor-only", action="store_true",
                        help="only the machine's speed index and (a) the floor, per suite and its dearest hidden "
                             "tests (what docs/authoring.md's budget is read against); writes no JSON")
    args = parser.parse_args(argv)
    if args.floor_only:
        return print_floor_only()
    notebooks = sorted(FULL.glob("*.ipynb"))
    if len(notebooks) != NOTEBOOKS:
        raise SystemExit(f"expected {NOTEBOOKS} notebooks in {FULL}: run python -m autograder.build.samples")
    sizes = args.sizes[:2] if args.quick else args.sizes
    serial = min(SERIAL_CLASS, args.sizes[1] if len(args.sizes) > 1 else args.sizes[0])

    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                     "date": datetime.date.today().isoformat(), "commit": commit(),
                     "submission": str(FULL.relative_to(REPO)),
                     "notebooks": [p.name for p in notebooks], "auto_points": AUTO_POINTS,
                     "jobs": args.jobs, "sizes": sizes, "quick": args.quick, **graded_by()}
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as scratch:
        scratch = Path(scratch)
        print("the machine's speed index: a fixed CPU workload ...", flush=True)
        results["speed_index"] = speed_index()
        print("(a) in-process floor: the eight hidden suites, reference implementations as the student ...",
              flush=True)
        results["floor"] = in_process_floor(scratch)
        if args.baseline != "none":
            print(f"the baseline {args.baseline}: its floor and start-up, in a worktree ...", flush=True)
            results["baseline"] = baseline(scratch, args.baseline)
        print("start-up: the imports of the CLI, the fork server and a zygote ...", flush=True)
        results["startup"] = startup_costs()
        results["one_job"] = []
        for students in (1, serial):
            print(f"(b) this grader, {students} student(s), --jobs 1 ...", flush=True)
            results["one_job"].append(this_grader(scratch, students, 1))
        results["classes"] = []
        for students in sizes:
            print(f"(c) this grader, class of {students}, --jobs {args.jobs} ...", flush=True)
            results["classes"].append(this_grader(scratch, students, args.jobs))
        results["shards"] = []
        for shard_class in sorted({sizes[1] if len(sizes) > 1 else sizes[0], sizes[-1]}):
            print(f"(e) {SHARDS} shards of the class of {shard_class}, one after another, then merge ...",
                  flush=True)
            results["shards"].append(sharded(scratch, shard_class, args.jobs))
        if args.skip_stock:
            results["stock"] = None
        else:
            print(f"(d) stock nbgrader autograde, {args.stock_students} student(s), fast mode ...", flush=True)
            results["stock"] = stock_nbgrader(scratch, args.stock_students)
    results["benchmark_s"] = round(time.perf_counter() - started, 1)
    results["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # 1-minute, before and after
    results["figures"] = figures(results)
    results["verdicts"] = {name: verdict(name, value) for name, value in results["figures"].items()}
    results["targets"] = {name: {"what": what, "limit": limit, "kind": kind}
                          for name, (what, limit, kind) in TARGETS.items()}
    results["worker_peak_rss"] = (f"sampled with psutil every {SAMPLE_EVERY_S:g} s (the largest process "
                                  f"running a module of {SANDBOX_MODULES}*): a lower bound of the true peak")
    print_results(results)
    written = write_json_atomically(args.results.parent, args.results.stem, results)
    print(f"\n{results['benchmark_s']:.0f} s in all; written to {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
