"""Where the course's parts are: the one home of every repository path that the grader,
its nbgrader face and its build tools share, and of the environment its helper commands
run in."""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "autograder"
ASSIGNMENT = "week6"
SOURCE_DIR = REPO / "solutions"           # the instructor's notebooks, one folder per assignment
SOURCE = SOURCE_DIR / ASSIGNMENT
RELEASE = REPO / "assignments" / ASSIGNMENT  # what nbgrader generates from SOURCE for students
README = REPO / "README.md"
DATA = REPO / "data"
SAMPLES = DATA / "sample_submissions"
RESULTS = REPO / "benchmarks" / "results"   # measured figures the README and the notebooks quote

# Files that `report` and `export` write into a grades folder, beside the student folders
# (intake refuses these names as student ids, as it refuses grades.csv).
CLASS_REPORT = "class-report.html"
SIMILARITY_CSV = "similarity.csv"
LMS_EXPORTS = {"canvas": "canvas-grades.csv", "moodle": "moodle-grades.csv"}
OUTPUT_NAMES = (CLASS_REPORT, SIMILARITY_CSV, *LMS_EXPORTS.values())


def venv_env() -> dict[str, str]:
    """The environment with this interpreter's ``bin/`` first on PATH.

    nbgrader runs the ``alembic`` command to set up its gradebook; inside a
    virtual environment that is not activated, it would not be found.
    """
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env
