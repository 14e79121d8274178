"""``python -m autograder report``: the class report, one self-contained HTML page.

The page (``<grades>/class-report.html``) reads top to bottom as a TA needs it: the
score distributions, the graded items and hidden tests that cost the class points,
the notebooks with problems, the written answers whose numbers the student's notebook did not
record (and runs not seeded with the student's id), grading time, pairs of unusually alike answers, and the
grades that re-grading changed. It loads nothing: the histograms are SVG drawn by
matplotlib and inlined as ``data:`` images, the styles are in the page, and its
Content-Security-Policy forbids scripts, so nothing a student wrote can run in the
TA's browser even if it escaped the template, which escapes every value
(jinja2, ``autoescape``). Figures and their definitions: ``statistics.py``.
"""
from __future__ import annotations

import base64
import datetime as dt
import io
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..grade_history import Change, read_changes
from ..paths import ASSIGNMENT, CLASS_REPORT, SIMILARITY_CSV
from ..report import clip
from . import statistics
from .results import ClassResults
from .similarity import Similarity, highlighted

PAGE = CLASS_REPORT
TEMPLATE = "class_report.html.j2"
TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_SHOWN_PAIRS = 50        # flagged pairs drawn side by side; every pair is in similarity.csv
MAX_SHOWN_CODE = 6_000      # characters of one answer on the page
MAX_SHOWN_MESSAGE = 600     # characters of one failure message on the page
MAX_SHOWN_PROBLEMS = 500    # rows of the problems table (a class where everything broke still loads)
HISTOGRAM_BINS = 20


@dataclass
class Extras:
    """What the page shows besides the results themselves."""

    similarity: Similarity | None = None
    similarity_note: str = ""        # why there is no similarity check, when there is none
    similarity_seconds: float = 0.0
    changes: list[Change] = field(default_factory=list)
    history_note: str = ""
    warnings: list[str] = field(default_factory=list)


def histogram(scores: list[float], max_points: float, title: str) -> str:
    """A histogram of ``scores`` as an SVG ``data:`` URI (the page loads no file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # One bar per point where a notebook has few points, else HISTOGRAM_BINS bars over its range.
    if 0 < max_points <= HISTOGRAM_BINS:
        bins = [edge - 0.5 for edge in range(int(math.ceil(max_points)) + 2)]
    else:
        bins = [max_points * i / HISTOGRAM_BINS for i in range(HISTOGRAM_BINS + 1)] if max_points else [0, 1]
    with matplotlib.rc_context({"svg.hashsalt": "class-report", "font.size": 8}):
        figure, axes = plt.subplots(figsize=(3.2, 1.9))
        try:
            axes.hist(scores, bins=bins, color="#3b6ea8", edgecolor="white")
            axes.set_title(title, fontsize=9)
            axes.set_xlabel("points")
            axes.set_ylabel("students")
            axes.yaxis.get_major_locator().set_params(integer=True)
            figure.tight_layout()
            buffer = io.BytesIO()
            figure.savefig(buffer, format="svg", metadata={"Date": None})
        finally:
            plt.close(figure)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _pair_view(pair) -> dict:
    left, right = highlighted(pair)
    return {"score": pair.score, "notebook": pair.notebook, "item": pair.item, "a": pair.a.student,
            "b": pair.b.student, "left": _clipped_pieces(left), "right": _clipped_pieces(right),
            "source_a": clip(pair.a.source, MAX_SHOWN_CODE), "source_b": clip(pair.b.source, MAX_SHOWN_CODE)}


def _clipped_pieces(pieces: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    out, left = [], MAX_SHOWN_CODE
    for text, shared in pieces:
        if left <= 0:
            out.append(("\n[... cut ...]", False))
            break
        out.append((text[:left], shared))
        left -= len(text)
    return out


def context(results: ClassResults, extras: Extras) -> dict:
    """Everything the template shows, computed."""
    notebooks, total = statistics.notebook_figures(results)
    tests = statistics.hidden_test_figures(results)
    problems = statistics.problems(results)
    numbers = [(n, clip(n.detail, MAX_SHOWN_MESSAGE)) for n in statistics.numbers_to_check(results)]
    similarity = extras.similarity
    flagged = similarity.flagged if similarity else []
    return {
        "assignment": ASSIGNMENT,
        "results": results,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "students": len(results.students),
        "notebooks": [(n, histogram(n.scores, n.max_points, n.stem)) for n in notebooks],
        "total": (total, histogram(total.scores, total.max_points, "total")),
        "items": statistics.item_figures(results),
        "tests": [(t, [(status, clip(message, MAX_SHOWN_MESSAGE), count) for status, message, count in
                       t.top_failures()]) for t in tests],
        "problems": problems[:MAX_SHOWN_PROBLEMS],
        "problems_cut": max(0, len(problems) - MAX_SHOWN_PROBLEMS),
        "numbers": numbers[:MAX_SHOWN_PROBLEMS],
        "numbers_cut": max(0, len(numbers) - MAX_SHOWN_PROBLEMS),
        "timings": statistics.timings(results),
        "similarity": similarity,
        "similarity_note": extras.similarity_note,
        "similarity_seconds": extras.similarity_seconds,
        "pairs": [_pair_view(p) for p in flagged[:MAX_SHOWN_PAIRS]],
        "pairs_cut": max(0, len(flagged) - MAX_SHOWN_PAIRS),
        "changes": extras.changes,
        "history_note": extras.history_note,
        "warnings": [*results.warnings, *extras.warnings],
        "written": sum(results.written.values()),
        "ungraded_written": results.ungraded_written,
    }


def _number(value: float | None, digits: int = 2) -> str:
    """``value`` with at most ``digits`` decimals, no trailing zeros; "-" for no value."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def render(results: ClassResults, extras: Extras) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)
    environment.filters["num"] = _number
    environment.filters["pct"] = lambda value: "-" if value is None else f"{100 * value:.0f} %"
    return environment.get_template(TEMPLATE).render(**context(results, extras))


def write(results: ClassResults, extras: Extras, out: Path) -> Path:
    """Write ``out/class-report.html`` atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / PAGE
    if target.is_dir():
        raise NotADirectoryError(f"{target} is a folder (a student of that name?); rename it to write the report")
    page = render(results, extras)
    fd, temporary = tempfile.mkstemp(dir=out, prefix=f".{PAGE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def build(grades: Path, *, nbgrader_root: Path | None = None, submissions: list[Path] | None = None,
          similarity: bool = True, threshold: float | None = None, jobs: int = 1) -> tuple[Path, ClassResults, Extras]:
    """Read the class, run the similarity check, write the page and ``similarity.csv``; what ``report`` runs."""
    from . import sources
    from .nbgrader_results import load_gradebook
    from .results import load_grades
    from .similarity import THRESHOLD, find_similar, write_csv

    grades = Path(grades)
    results = load_gradebook(nbgrader_root) if nbgrader_root is not None else load_grades(grades)
    extras = Extras()
    if nbgrader_root is None:
        extras.changes, extras.warnings = read_changes(grades)
    else:
        extras.history_note = ("nbgrader's gradebook keeps only the latest scores; re-grades through "
                               "`python -m autograder grade` keep their history")
    if similarity:
        if submissions:
            runs = [{"paths": [str(p) for p in submissions], "student": None}]
        elif nbgrader_root is not None:
            runs = [{"paths": [str(Path(nbgrader_root) / "submitted")], "student": None}]
        else:
            runs = sources.recorded(grades)
        if not runs:
            extras.similarity_note = (f"{grades} does not say where its submissions are (it was graded before the "
                                      "run recorded it); give them with --submissions DIR")
        else:
            started = time.perf_counter()
            notebooks, warnings = sources.submitted_notebooks(results.reports, results.keys, runs)
            extras.warnings += warnings
            extras.similarity = find_similar(notebooks, results.course, threshold=threshold or THRESHOLD, jobs=jobs)
            extras.warnings += extras.similarity.warnings
            extras.similarity_seconds = time.perf_counter() - started
            grades.mkdir(parents=True, exist_ok=True)
            write_csv(extras.similarity, grades / SIMILARITY_CSV)
    else:
        extras.similarity_note = "the similarity check was not run (--no-similarity)"
    return write(results, extras, grades), results, extras
