"""The seed of a notebook's experiments, and the numbers they measure.

**Your own numbers.** Every student's experiments run with a seed of their own, made from their
student id (:func:`student_seed`), so two students' runs differ and the course staff, who know
your id, can compute what your run should show. Enter your id in the ``STUDENT_ID`` line of a
notebook's settings cell, or once for every notebook with ``python -m week6_helpers.lab --student
ID`` (on the course's JupyterHub it is your hub user and you may leave the line empty). Each experiment then shows what it measured in one line, "Recorded
for your answers ...": the values a written answer that quotes numbers should quote, and the
values the TA sees beside that answer when grading it.

**The reference tables.** Every experiment ends with a "What you should see" table: the mean and
spread of its headline numbers over three seeds, measured by the course with
``python benchmarks/reference_values.py``. That script runs each notebook with ``WEEK6_SEED`` set
to 0, 1 and 2 (a seed that wins over the student id), and ``WEEK6_RECORD`` naming a file where
:func:`record` also writes what each experiment measured.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping

from .runtime import fast_mode

SEED_VARIABLE = "WEEK6_SEED"
RECORD_VARIABLE = "WEEK6_RECORD"
STUDENT_VARIABLE = "WEEK6_STUDENT"   # the student id, where it is set for the whole session
HUB_USER_VARIABLE = "JUPYTERHUB_USER"
# The display output record() shows: the grader reads the values back from this MIME type.
MEASURES_MIME = "application/vnd.week6.measures+json"
# Students' seeds start here, so a student's run never uses a seed of the reference tables
# (0, 1, 2) and cannot pass for one.
FIRST_STUDENT_SEED = 1_000
STUDENT_SEEDS = 1_000_000

# What experiment_seed() last chose, for record() to show beside the values.
_run: dict = {"seed": None, "student": None, "source": None}


def normalised_student_id(student: str) -> str:
    """The id as the seed reads it: surrounding spaces dropped, letters in lower case (so
    "Alice " and "alice" give one seed)."""
    return str(student).strip().lower()


def student_seed(student: str) -> int:
    """The seed of a student's experiments: a hash of the course's name and the student id.

    Public on purpose: there is no secret in it, so the course staff recompute it from the
    id alone. It is never one of the reference tables' seeds (0, 1, 2)."""
    digest = hashlib.sha256(f"week6-experiments:{normalised_student_id(student)}".encode()).digest()
    return FIRST_STUDENT_SEED + int.from_bytes(digest[:8], "big") % STUDENT_SEEDS


def student_id(entered: str = "") -> tuple[str | None, str | None]:
    """(the student id, where it came from): what the notebook's ``STUDENT_ID`` line holds, else
    ``$WEEK6_STUDENT``, else the JupyterHub user; (None, None) when none of them is set."""
    for value, source in ((entered, "STUDENT_ID"), (os.environ.get(STUDENT_VARIABLE, ""), STUDENT_VARIABLE),
                          (os.environ.get(HUB_USER_VARIABLE, ""), "the JupyterHub user")):
        if str(value or "").strip():
            return str(value).strip(), source
    return None, None


def experiment_seed(student: str = "", default: int = 0) -> int:
    """The seed of this run's experiments, said in one printed line.

    ``$WEEK6_SEED`` when set (the course's reference runs); else the seed of the student id
    (:func:`student_seed`, the id from :func:`student_id`); else ``default``, with a reminder
    to enter the id."""
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    if raw:
        try:
            seed = int(raw)
        except ValueError:
            raise ValueError(f"{SEED_VARIABLE}={raw!r} is not a whole number: set it to a seed such as 0, 1 or 2, "
                             f"or unset it for the seed of your student id") from None
        if seed < 0:
            raise ValueError(f"{SEED_VARIABLE}={seed} is negative: torch and datasets need a seed of 0 or more")
        _run.update(seed=seed, student=None, source=SEED_VARIABLE)
        print(f"Experiments seeded with {SEED_VARIABLE}={seed} (a course run: not a student's seed).")
        return seed
    who, source = student_id(student)
    if who is None:
        _run.update(seed=default, student=None, source="default")
        print(f"No student id: the experiments use seed {default}, the course's. Put your student id in the "
              f"STUDENT_ID line above (or start JupyterLab with python -m week6_helpers.lab --student YOUR_ID) "
              f"and run the notebook again, so that your numbers are your own.")
        return default
    seed = student_seed(who)
    _run.update(seed=seed, student=who, source=source)
    print(f"Experiments seeded from student id {who!r} ({source}): seed {seed}.")
    return seed


def _plain(values: Mapping[str, float]) -> dict[str, float | None]:
    numbers = {}
    for label, value in values.items():
        number = float(value)  # tensors, numpy scalars and Python numbers alike
        if not math.isfinite(number):
            number = None  # JSON has no NaN; a diverged run is recorded as missing, not as a number
        numbers[str(label)] = number
    return numbers


def record(experiment: str, values: Mapping[str, float]) -> None:
    """Show an experiment's headline numbers in one line (and note them for the reference tables
    when ``$WEEK6_RECORD`` names a file).

    The line is a display output that also carries the values as data
    (:data:`MEASURES_MIME`, with the run's seed): the grader reads them back from the
    submitted notebook and shows them to the TA beside the written answers that quote them.

    Args:
        experiment: the name of the experiment's table, for example ``"B3 learning rate"``; the
            notebook's "What you should see" cell for that table carries the same name.
        values: row label -> number, in the order the table lists them.
    """
    numbers = _plain(values)
    path = os.environ.get(RECORD_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"experiment": experiment, "values": numbers}) + "\n")
    shown = "; ".join(f"{label} {'-' if number is None else f'{number:.4g}'}" for label, number in numbers.items())
    text = f"Recorded for your answers ({experiment}, seed {_run['seed']}): {shown}"
    # values as [label, number] pairs: a notebook file stores JSON objects with sorted keys
    data = {"experiment": str(experiment), "values": [[label, number] for label, number in numbers.items()], "seed": _run["seed"], "student": _run["student"],
            "seed_source": _run["source"], "mode": "fast" if fast_mode() else "full"}
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: the line alone
        print(text)
        return
    if get_ipython() is None:
        print(text)
        return
    display({"text/plain": text, MEASURES_MIME: data}, raw=True)
