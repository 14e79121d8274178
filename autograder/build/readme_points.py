"""The points columns of the README's table of notebooks, written from the course model.

The README's "The assignment" table says, per notebook, what it covers (prose, kept
by hand) and its auto-graded and written points (facts of the source notebooks,
whose one home is ``course.py``). ``make regen`` rewrites the two points columns of
every row that names a course notebook, so adding a graded item never means editing
the README; a row naming a notebook that is not in the course is an error, and so
is a course notebook without a row (a new notebook needs its line of prose).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..course import Course, load_course
from ..paths import README

# | `stem.ipynb` | what it covers | auto | written |
ROW = re.compile(r"^\| `(?P<stem>[A-Za-z0-9_]+)\.ipynb` \| (?P<covers>.*) \| (?P<auto>[^|]*) \| (?P<written>[^|]*) \|$")


class ReadmeError(Exception):
    """The README's table and the course disagree in a way regenerating cannot fix."""


def _points(value: float) -> str:
    return f"{value:g}"


def with_course_points(text: str, course: Course) -> str:
    """``text`` (the README) with each notebook row's points taken from ``course``."""
    lines, seen = [], []
    for line in text.split("\n"):
        match = ROW.match(line)
        if match:
            stem = match["stem"]
            if stem not in course.stems:
                raise ReadmeError(f"README.md names {stem}.ipynb, which is not one of the course's notebooks")
            notebook = course.notebook(stem)
            line = (f"| `{stem}.ipynb` | {match['covers']} | {_points(notebook.auto_points)} "
                    f"| {_points(notebook.written_points)} |")
            seen.append(stem)
        lines.append(line)
    missing = [stem for stem in course.stems if stem not in seen]
    if missing:
        raise ReadmeError(f"README.md's table of notebooks has no row for {', '.join(missing)}: add one "
                          "(what the notebook covers; the points are filled in by make regen)")
    return "\n".join(lines)


def outputs(readme: Path = README) -> dict[Path, bytes]:
    """The README as it should be, for ``autograder.build.generated.update``."""
    return {readme: with_course_points(readme.read_text(encoding="utf-8"), load_course()).encode("utf-8")}
