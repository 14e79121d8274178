"""The reference values of every experiment: each source notebook run under three seeds, in full mode.

Each notebook is executed from ``solutions/week6/`` in a fresh kernel (the same runner as
``week6-check``), with ``WEEK6_SEED`` set to the seed and ``WEEK6_RECORD`` naming a file where the
notebook's ``record(...)`` calls (``week6_helpers/reference.py``) write each experiment's headline
numbers. One more run per notebook in fast mode, seed 0, gives the fast-mode column.

    .venv/bin/python benchmarks/reference_values.py                      # everything still missing
    .venv/bin/python benchmarks/reference_values.py --mode fast          # the fast-mode runs only
    .venv/bin/python benchmarks/reference_values.py --notebooks exercise4_model_size --seeds 0 1 2

Results go to ``benchmarks/results/reference_values.json`` after every run, so a crash or an
interruption loses at most the run in progress. A run already there for the same notebook, mode
and seed is kept unless the notebook's code cells changed since (``--again`` runs it anyway).
``make regen`` turns the file into the "What you should see" tables of the notebooks and the
full-mode column of the README's table of run times (``autograder/build/reference_tables.py``).

A notebook whose cells raise, or whose visible tests fail, is reported and not recorded: its
numbers would not be what a student with a correct solution sees.

**What a student's run should show.** Students' experiments are seeded from their id
(``week6_helpers.reference.student_seed``), so the course staff can recompute a student's
numbers: ``--student ID`` runs the instructor notebooks with that student's seed instead of the
reference seeds, prints what each experiment recorded and writes nothing; ``--submission DIR``
(the student's submitted ``week6`` folder) puts each value beside what the student's notebook
recorded (what the formgrader shows beside their answers), with a verdict:

    .venv/bin/python benchmarks/reference_values.py --student alice --notebooks part_b_finetuning \
        --mode full --submission submitted/alice/week6

A value "agrees" within ``AGREES`` (absolute, or relative above 1): a rerun on another machine or
thread count can move the last digits of a long training run, never an accuracy by points. A
copied reference table, a run with another id or numbers typed by hand "differ".
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.build.reference_tables import RESULTS, SOURCE  # noqa: E402
from autograder.course import load_course  # noqa: E402
from week6_helpers.check import report, run_notebook  # noqa: E402
from week6_helpers.reference import RECORD_VARIABLE, SEED_VARIABLE, student_seed  # noqa: E402

SEEDS = (0, 1, 2)
AGREES = 0.01
STEMS = list(load_course().stems)  # the course's notebooks, in its order


def code_hash(path: Path) -> str:
    """A digest of the notebook's code cells: what decides its numbers (markdown does not)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = "\n\x00\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def machine() -> str:
    import torch

    return (f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__} "
            f"with {torch.get_num_threads()} threads, Python {platform.python_version()}")


def load(path: Path = RESULTS) -> dict:
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return {"runs": []}


def save(results: dict, path: Path = RESULTS) -> None:
    results["runs"].sort(key=lambda run: (STEMS.index(run["notebook"]), run["mode"], run["seed"]))
    temporary = path.with_suffix(".json.part")
    temporary.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)  # atomic: a crash leaves the previous file whole


def execute(stem: str, mode: str, seed: int) -> dict | None:
    """Run one notebook once; its run record, or None when a cell failed."""
    path = SOURCE / f"{stem}.ipynb"
    with tempfile.TemporaryDirectory(prefix="week6-reference-") as scratch:
        records = Path(scratch) / "records.jsonl"
        os.environ[SEED_VARIABLE] = str(seed)
        os.environ[RECORD_VARIABLE] = str(records)
        try:
            result = run_notebook(path, full=mode == "full")
        finally:
            del os.environ[SEED_VARIABLE], os.environ[RECORD_VARIABLE]
        report(result)
        if not result.clean:
            return None
        lines = records.read_text(encoding="utf-8").splitlines() if records.is_file() else []
    values: dict[str, dict[str, float | None]] = {}
    for line in lines:
        entry = json.loads(line)
        values.setdefault(entry["experiment"], {}).update(entry["values"])
    return {"notebook": stem, "mode": mode, "seed": seed, "seconds": round(result.seconds, 1),
            "code": code_hash(path), "machine": machine(),
            "date": datetime.date.today().isoformat(), "values": values}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", nargs="+", choices=STEMS, default=STEMS)
    parser.add_argument("--mode", choices=("full", "fast", "both"), default="both")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS),
                        help="full-mode seeds (fast mode always runs seed 0)")
    parser.add_argument("--again", action="store_true", help="run even where a result for the same code exists")
    parser.add_argument("--student", metavar="ID",
                        help="run with this student's seed, print what each experiment recorded, write nothing")
    parser.add_argument("--submission", type=Path, metavar="DIR",
                        help="with --student: the student's week6 folder, whose recorded values are compared")
    args = parser.parse_args(argv)
    if args.submission is not None and args.student is None:
        parser.error("--submission needs --student (the id whose seed the notebooks run with)")
    if args.student is not None:
        return recompute(args.student, args.notebooks, "fast" if args.mode == "fast" else "full", args.submission)

    # Fast mode first, then one seed of every notebook at a time: an interrupted run still
    # leaves every notebook measured at least once.
    plan = [(stem, "fast", 0) for stem in args.notebooks if args.mode in ("fast", "both")]
    if args.mode in ("full", "both"):
        plan += [(stem, "full", seed) for seed in args.seeds for stem in args.notebooks]

    results, failed = load(), []
    for stem, mode, seed in plan:
        current = code_hash(SOURCE / f"{stem}.ipynb")
        done = [run for run in results["runs"] if (run["notebook"], run["mode"], run["seed"]) == (stem, mode, seed)]
        if done and done[0]["code"] == current and not args.again:
            print(f"{stem} {mode} seed {seed}: already measured for this code, kept")
            continue
        print(f"\n== {stem}, {mode} mode, seed {seed}", flush=True)
        run = execute(stem, mode, seed)
        if run is None:
            failed.append(f"{stem} ({mode}, seed {seed})")
            continue
        results["runs"] = [r for r in results["runs"] if r not in done] + [run]
        save(results)
        print(f"   {run['seconds']:.0f} s; {sum(len(v) for v in run['values'].values())} numbers recorded", flush=True)
    if failed:
        print("\nnot recorded, a cell failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


def agrees(recomputed: float | None, recorded: float | None) -> bool:
    if recomputed is None or recorded is None:
        return recomputed is None and recorded is None
    return abs(recomputed - recorded) <= AGREES * max(1.0, abs(recomputed))


def recompute(student: str, stems: list[str], mode: str, submission: Path | None) -> int:
    """Run ``stems`` with ``student``'s seed; print each value, beside the submission's when given.
    Exit status 0 when every value agrees (or there is nothing to compare), 1 otherwise."""
    import nbformat

    from autograder.printed import records

    seed = student_seed(student)
    print(f"student {student!r}: seed {seed}, {mode} mode")
    compared = differing = 0
    for stem in stems:
        print(f"\n== {stem}", flush=True)
        run = execute(stem, mode, seed)
        if run is None:
            print(f"   a cell failed: nothing to compare for {stem}")
            differing += 1
            continue
        theirs: dict[str, dict] = {}
        if submission is not None:
            path = submission / f"{stem}.ipynb"
            if path.is_file():
                for record in records(nbformat.read(path, as_version=4), set(run["values"])):
                    theirs[record["experiment"]] = record
            else:
                print(f"   {path} is not there: the values alone")
        for experiment, values in run["values"].items():
            record = theirs.get(experiment)
            note = ""
            if record is not None and (record["seed"] != seed or record["mode"] != mode):
                note = f" (the student's run: seed {record['seed']}, {record['mode']} mode)"
            print(f"   {experiment}{note}")
            for label, value in values.items():
                shown = "-" if value is None else f"{value:.4g}"
                if submission is None:
                    print(f"     {label:<48} {shown:>10}")
                    continue
                mine = None if record is None else record["values"].get(label)
                verdict = "not recorded" if record is None or label not in record["values"] else (
                    "agrees" if agrees(value, mine) else "DIFFERS")
                compared += 1
                differing += verdict != "agrees"
                print(f"     {label:<48} {shown:>10}   student: {'-' if mine is None else f'{mine:.4g}':>10}   {verdict}")
    if submission is not None:
        print(f"\n{compared - differing} of {compared} values agree (within {AGREES:g}, absolute or relative)")
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
