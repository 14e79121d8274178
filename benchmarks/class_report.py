"""What the class report and its similarity check cost on a class of 300 full submissions.

The class is built in a scratch folder. Each student hands in the eight notebooks of
``data/sample_submissions/alice_full_solution`` (every answer a full solution) with:

* **code of their own**: two to four lines in every answer cell, each a computation on
  random constants (``scale = 0.7316 * 1.2849``). Copydetect keeps number literals, so
  these lines give each student's answer fingerprints no other student has, as an
  independent student's own code would; the solution every student shares is, beyond 10
  answers, an idiom that the check sets aside (``similarity.COMMON_ANSWERS``);
* **broken items**: one student in ten has one answer replaced by the release's stub;
* **planted copies**: ``--copies`` students hand in another student's notebooks with every
  identifier renamed, comments added and the layout changed (``ast.unparse``).

Each notebook also gets a report, built with ``Report`` (its stubbed item's tests fail as
"not implemented", 3 % of the other tests fail with a message, grading times drawn between
0.3 and 4 s), a few notebooks are reported not taken in or not finished, and 20 re-grades
change a score (the history). What is timed:

* **(a) the page**: ``python -m autograder report GRADES --no-similarity``, a fresh process
  (its imports included): the figures, the histograms, the page;
* **(b) the similarity check**, per phase (reading, normalising and fingerprinting the
  answers: linear in the class; scoring every pair of answers to an item: quadratic):
  in this process with ``jobs=1`` on the first 50 students (the cost of one core), and as
  ``python -m autograder report GRADES --jobs 2`` on the whole class (the command a TA
  runs on a 2-core machine, the page included);
* **(c) the quadratic part alone**: ``similarity._item_pairs`` on 300, 1,000, 3,000 and
  10,000 answers to one item, each a fingerprint set of the size of this course's answers
  (60 fingerprints: 30 from a pool of 2,000 shared ones, drawn with Zipf weights as idioms
  are, and 30 of its own): where the check stops being practical.

and checked: every planted copy is flagged, no other pair is.

    .venv/bin/python benchmarks/class_report.py [--students 300] [--copies 10] [--jobs 2]
    .venv/bin/python benchmarks/class_report.py --students 12 --copies 2 --pair-sizes 300 --results /tmp/smoke.json
                                                      # a smoke test of the benchmark itself

writes ``benchmarks/results/class_report.json`` (with the machine's load average before and
after: on a shared machine the figures are upper bounds) and prints every figure.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import copy
import datetime
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from autograder.analytics import similarity  # noqa: E402
from autograder.analytics.sources import record  # noqa: E402
from autograder.course import load_course  # noqa: E402
from autograder.files import write_json_atomically  # noqa: E402
from autograder.grade_history import write_report  # noqa: E402
from autograder.paths import RELEASE  # noqa: E402
from autograder.report import Report, TestResult

RESULTS = REPO / "benchmarks" / "results" / "class_report.json"
ALICE = REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6"
SEED = 35
PAIR_SIZES = (300, 1_000, 3_000, 10_000)


def solution_cells(notebook: dict) -> dict[str, dict]:
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in notebook["cells"]
            if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def source_of(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def own_lines(generator: random.Random, indent: str) -> list[str]:
    names = ("scale", "offset", "weight", "bias", "ratio", "step")
    return [f"{indent}{generator.choice(names)}_{i} = {generator.uniform(0, 9):.4f} * {generator.uniform(0, 9):.4f}"
            f" + {generator.randint(1, 999)}" for i in range(generator.randint(2, 4))]


def with_own_code(source: str, generator: random.Random) -> str:
    """``source`` with a few lines of the student's own at the start of its graded function's body
    (or at the end of a cell that defines no function)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    lines = source.splitlines()
    if not functions:
        return "\n".join(lines + own_lines(generator, ""))
    body = functions[-1].body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(
        getattr(body[0], "value", None), ast.Constant) else body[0]
    indent = " " * first.col_offset
    at = first.lineno - 1
    return "\n".join(lines[:at] + own_lines(generator, indent) + lines[at:])


def disguised(source: str) -> str:
    """A copy as a student would hide it: every assigned name and argument renamed, comments, new layout."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    kept = set(dir(builtins)) | {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    local = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed = {name: f"v{index}_" for index, name in enumerate(sorted(local - kept))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id = renamed[node.id]
        elif isinstance(node, ast.arg) and node.arg in renamed:
            node.arg = renamed[node.arg]
    return "# my solution\n" + "\n".join(f"{line}  # ok" if i % 3 == 0 else line
                                         for i, line in enumerate(ast.unparse(tree).splitlines()))


def build_class(root: Path, students: int, copies: int) -> dict:
    """Submissions, reports and history of the synthetic class; what was planted."""
    generator = random.Random(SEED)
    course = load_course()
    originals = {path.stem: json.loads(path.read_text()) for path in sorted(ALICE.glob("*.ipynb"))}
    stubs = {stem: solution_cells(json.loads((RELEASE / f"{stem}.ipynb").read_text())) for stem in originals}
    submitted, grades = root / "submitted", root / "grades"
    names = [f"student{i:03d}" for i in range(1, students + 1)]
    copiers = dict(zip(names[-copies:], generator.sample(names[:-copies], copies))) if copies else {}
    handed: dict[str, dict[str, dict]] = {}
    broken: dict[str, tuple[str, str]] = {}
    for student in names:
        notebooks = {}
        if student in copiers:
            for stem, notebook in handed[copiers[student]].items():
                notebook = copy.deepcopy(notebook)
                for cell in solution_cells(notebook).values():
                    cell["source"] = disguised(source_of(cell))
                notebooks[stem] = notebook
        else:
            for stem, original in originals.items():
                notebook = copy.deepcopy(original)
                for cell in solution_cells(notebook).values():
                    cell["source"] = with_own_code(source_of(cell), generator)
                notebooks[stem] = notebook
            if generator.random() < 0.1:
                stem = generator.choice(sorted(notebooks))
                grade_id = generator.choice(sorted(solution_cells(notebooks[stem])))
                solution_cells(notebooks[stem])[grade_id]["source"] = source_of(stubs[stem][grade_id])
                broken[student] = (stem, grade_id)
        handed[student] = notebooks
        folder = submitted / student / "week6"
        folder.mkdir(parents=True)
        for stem, notebook in notebooks.items():
            (folder / f"{stem}.ipynb").write_text(json.dumps(notebook))
    record(grades, [submitted], None)

    for student in names:
        for notebook in course.notebooks:
            stem = notebook.stem
            tests = []
            for item in notebook.tests:
                stubbed = broken.get(student) == (stem, item.solution)
                for case in range(int(item.points)):
                    failed = stubbed or generator.random() < 0.03
                    message = ("not implemented: the function still raises NotImplementedError" if stubbed else
                               f"differs from the expected values by up to {generator.uniform(0, 3):.3g}")
                    tests.append(TestResult(item.grade_id, f"{item.grade_id}_case{case}[cpu]",
                                            ("error" if stubbed else "failed") if failed else "passed",
                                            0.0 if failed else 1.0, 1.0, message if failed else ""))
            report = Report(student, f"{stem}.ipynb", score=sum(t.points for t in tests),
                            max_score=notebook.auto_points, sandbox="bwrap",
                            duration_s=round(generator.uniform(0.3, 4.0), 2), tests=tests,
                            submission_sha256=f"{generator.getrandbits(256):064x}", suite_hash="s" * 64)
            write_report(grades, student, stem, report)
    for student in generator.sample(names, min(20, len(names))):  # re-grades that change a score: the history
        stem = generator.choice(course.stems)
        path = grades / student / f"{stem}.json"
        data = json.loads(path.read_text())
        data["tests"][0]["points"] = 0.0 if data["tests"][0]["points"] else 1.0
        data["score"] = sum(t["points"] for t in data["tests"])
        data["submission_sha256"] = f"{generator.getrandbits(256):064x}"
        write_report(grades, student, stem, Report.from_json(data))
    for student in names[:3]:
        write_report(grades, student, "misplaced-0", Report.problem(student, "old/part_a_discovery.ipynb",
                                                                    "in a sub-folder; not graded"))
    for student in names[3:5]:
        write_report(grades, student, "exercise2_finetune_vs_scratch", Report.problem(
            student, "exercise2_finetune_vs_scratch.ipynb", "the grading process was killed", outcome="failed"))
    return {"copies": copiers, "broken": len(broken), "submitted": submitted, "grades": grades}


def subset(class_: dict, root: Path, students: int) -> Path:
    """A grades folder of the first ``students`` students, pointing at the same submissions."""
    grades = root / f"grades-{students}"
    for folder in sorted(p for p in class_["grades"].iterdir() if p.is_dir())[:students]:
        shutil.copytree(folder, grades / folder.name)
    record(grades, [class_["submitted"]], None)
    return grades


def cli(*args: str) -> tuple[float, str, float]:
    """(wall seconds, stdout, peak RSS of the child in MiB) of one ``python -m autograder`` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"autograder {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return seconds, result.stdout, peak


def similarity_phases(grades: Path, jobs: int) -> dict:
    from autograder.analytics import sources
    from autograder.analytics.results import load_grades

    results = load_grades(grades)
    notebooks, _ = sources.submitted_notebooks(results.reports, results.keys, sources.recorded(grades))
    found = similarity.find_similar(notebooks, results.course, jobs=jobs)
    return {"students": len(results.students), "notebooks": len(notebooks), "answers": found.answers,
            "too_short": found.too_short, "pairs_compared": found.compared, "jobs": jobs,
            "reading_and_fingerprinting_s": round(found.seconds_reading, 2),
            "pairs_s": round(found.seconds_pairs, 2),
            "per_answer_ms": round(1000 * found.seconds_reading * jobs / max(1, found.answers), 2)}


def pair_scaling(sizes: list[int]) -> list[dict]:
    """``_item_pairs`` on synthetic fingerprint sets shaped like the course's answers."""
    generator = np.random.default_rng(SEED)
    pool = generator.integers(1, 2**62, size=2_000)
    weights = 1 / np.arange(1, len(pool) + 1)
    weights /= weights.sum()
    rows = []
    for size in sizes:
        answers = []
        for index in range(size):
            shared = set(generator.choice(pool, size=30, p=weights).tolist())
            own = set(generator.integers(2**62, 2**63 - 1, size=30).tolist())
            hashes = shared | own
            fingerprint = similarity.Fingerprint("", np.zeros((0, 2)), hashes, {h: [0] for h in hashes})
            answers.append(similarity.Answer(f"s{index}", "nb", "item", "", "", fingerprint))
        result = similarity.Similarity([], similarity.THRESHOLD, similarity.CSV_FLOOR)
        started = time.perf_counter()
        similarity._item_pairs(answers, result)
        seconds = time.perf_counter() - started
        rows.append({"answers": size, "pairs": result.compared, "seconds": round(seconds, 3),
                     "microseconds_per_pair": round(1e6 * seconds / max(1, result.compared), 3)})
        print(f"(c) {size:6d} answers to one item: {result.compared:>12,} pairs in {seconds:7.2f} s", flush=True)
    return rows


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--copies", type=int, default=10, help="students who hand in a disguised copy")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs of the whole-class report (default 2)")
    parser.add_argument("--pair-sizes", type=int, nargs="+", default=list(PAIR_SIZES),
                        help="answers to one item for (c) (default: 300 1000 3000 10000)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    out = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip(),
           "cpus": os.cpu_count(), "uptime_before": uptime(), "students": args.students, "copies": args.copies}
    print(out["uptime_before"], flush=True)
    with tempfile.TemporaryDirectory(prefix="class-report-bench-") as scratch:
        root = Path(scratch)
        started = time.perf_counter()
        class_ = build_class(root, args.students, args.copies)
        out["build_s"] = round(time.perf_counter() - started, 1)
        grades = class_["grades"]
        print(f"built {args.students} students ({class_['broken']} with a broken item, {args.copies} copies) "
              f"in {out['build_s']} s", flush=True)

        seconds, _, peak = cli("report", str(grades), "--no-similarity")
        out["a_page"] = {"wall_s": round(seconds, 2), "peak_rss_mib": round(peak)}
        print(f"(a) report --no-similarity, {args.students} students: {seconds:.1f} s", flush=True)

        small = subset(class_, root, 50)
        out["b_one_core_50"] = similarity_phases(small, jobs=1)
        print(f"(b) similarity, 50 students, jobs=1: {out['b_one_core_50']}", flush=True)

        seconds, stdout, peak = cli("report", str(grades), "--jobs", str(args.jobs))
        phases = re.search(r"(\d+) answers read and fingerprinted in ([\d.]+) s, (\d+) pairs scored in ([\d.]+) s; "
                           r"(\d+) at or above", stdout)
        out["b_whole_class"] = {"jobs": args.jobs, "wall_s": round(seconds, 2), "peak_rss_mib": round(peak),
                                "answers": int(phases[1]), "reading_and_fingerprinting_s": float(phases[2]),
                                "pairs_compared": int(phases[3]), "pairs_s": float(phases[4]),
                                "flagged": int(phases[5])}
        print(f"(b) report --jobs {args.jobs}, {args.students} students: {seconds:.1f} s: {out['b_whole_class']}",
              flush=True)

        with (grades / "similarity.csv").open() as handle:
            rows = [line.strip().split(",") for line in handle][1:]
        flagged = {frozenset(row[:2]) for row in rows if float(row[4]) >= similarity.THRESHOLD}
        planted = {frozenset(pair) for pair in class_["copies"].items()}
        out["quality"] = {"planted_copies": len(planted),
                          "planted_students_flagged": len([p for p in planted if p in flagged]),
                          "other_pairs_flagged": len(flagged - planted),
                          "flagged_answer_pairs": sum(1 for row in rows if float(row[4]) >= similarity.THRESHOLD)}
        print(f"quality: {out['quality']}", flush=True)
    out["c_pairs_one_item"] = pair_scaling(args.pair_sizes)
    out["uptime_after"] = uptime()
    print(out["uptime_after"])
    print(f"wrote {write_json_atomically(args.results.parent, args.results.stem, out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
