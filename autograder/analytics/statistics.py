"""The class report's figures, from :class:`~autograder.analytics.results.ClassResults`.

Definitions (the page repeats them where it shows each figure):

* **Scores**: a notebook's score is its report's (auto-graded points); a student's total
  is the sum over the course's notebooks, a notebook not handed in counting 0. A
  notebook the grader could not finish (``outcome`` ``failed``) is not a grade: it is
  left out of every figure and listed under problems.
* **Quartiles**: numpy's default (linear interpolation between order statistics).
* **Per graded item** (a visible-test cell, which its hidden tests score): the share of
  the students who handed the notebook in that earned all its points; the points lost
  in total; its *difficulty*, the mean share of its points earned (classical test
  theory's p-value: 1.0 means everyone earned everything); its *discrimination*, the
  point-biserial correlation between earning all its points (1 or 0) and the rest of
  the student's total (the total without this item), by ``scipy.stats.pointbiserialr``.
  An item everyone passed, or everyone failed, has no discrimination (shown as "-").
* **Per hidden test** (and device variant): the share of its runs that passed, the
  points lost, and its failure messages grouped: numbers replaced by ``#`` and only
  the first line kept, so "differs by up to 1.62" and "... 0.24" count as one.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..report import Report
from .results import ClassResults

MESSAGE_GROUP_CHARS = 200      # of a message's first line, for grouping
FAILURE_GROUPS_SHOWN = 5       # per hidden test
NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?", re.I)
FULL = 1e-9                    # points within this of the maximum count as all of them


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float
    max_points: float


def summarize(values: list[float], max_points: float) -> Summary | None:
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    q1, median, q3 = np.percentile(array, [25, 50, 75])
    return Summary(len(values), float(array.mean()), float(median), float(q1), float(q3), float(array.min()),
                   float(array.max()), max_points)


@dataclass(frozen=True)
class NotebookFigures:
    stem: str
    max_points: float
    scores: list[float]
    summary: Summary | None
    handed_in: int          # students with a report of it
    not_graded: int         # of those, reports that are not a grade (the grader failed)


@dataclass(frozen=True)
class ItemFigures:
    notebook: str
    grade_id: str            # the visible-test cell
    function: str            # the solution cell it grades
    max_points: float
    n: int
    share_full: float
    points_lost: float
    difficulty: float
    discrimination: float | None


@dataclass
class HiddenTestFigures:
    notebook: str
    grade_id: str
    test: str
    n: int = 0
    passed: int = 0
    points_lost: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)   # (status, group) -> count
    examples: dict = field(default_factory=dict)         # (status, group) -> the first message of the group

    @property
    def share_passed(self) -> float:
        return self.passed / self.n if self.n else 0.0

    def top_failures(self) -> list[tuple[str, str, int]]:
        """(status, an example message, count) of the most common failure groups."""
        return [(status, self.examples[(status, group)], count)
                for (status, group), count in self.failures.most_common(FAILURE_GROUPS_SHOWN)]


@dataclass(frozen=True)
class Problem:
    student: str
    notebook: str
    kind: str       # "not taken in", "grader failed", "not readable", "timed out", "forbidden shortcut"
    reason: str


@dataclass(frozen=True)
class Timing:
    stem: str
    n: int
    median_s: float
    slowest_s: float
    slowest_student: str


def message_group(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return NUMBER.sub("#", first)[:MESSAGE_GROUP_CHARS]


def graded_reports(results: ClassResults) -> list[Report]:
    """The reports that are a grade: of a course notebook, not left unfinished by the grader."""
    return [r for r in results.notebook_reports() if r.outcome != "failed"]


def notebook_figures(results: ClassResults) -> tuple[list[NotebookFigures], NotebookFigures]:
    """Per notebook, in the course's order, and the total (every student, a missing notebook counting 0)."""
    figures = []
    for notebook in results.course.notebooks:
        reports = [r for r in results.notebook_reports() if results.stem(r) == notebook.stem]
        scores = [r.score for r in reports if r.outcome != "failed"]
        figures.append(NotebookFigures(notebook.stem, notebook.auto_points, scores,
                                       summarize(scores, notebook.auto_points), len(reports),
                                       sum(r.outcome == "failed" for r in reports)))
    totals = [sum(by_notebook.values()) for by_notebook in _graded_scores(results).values()]
    total = NotebookFigures("total", results.course.auto_points, totals, summarize(totals, results.course.auto_points),
                            len(totals), 0)
    return figures, total


def _graded_scores(results: ClassResults) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {student: {} for student in results.students}
    for report in graded_reports(results):
        table[report.student][results.stem(report)] = report.score
    return table


def item_figures(results: ClassResults) -> list[ItemFigures]:
    """Per graded item (visible-test cell), in the course's order."""
    from scipy.stats import pointbiserialr

    totals = {student: sum(scores.values()) for student, scores in _graded_scores(results).items()}
    by_notebook: dict[str, list[Report]] = {}
    for report in graded_reports(results):
        by_notebook.setdefault(results.stem(report), []).append(report)
    figures = []
    for notebook in results.course.notebooks:
        reports = by_notebook.get(notebook.stem, [])
        for item in notebook.tests:
            earned = [sum(t.points for t in r.tests if t.grade_id == item.grade_id) for r in reports]
            if not earned:
                continue
            full = [int(e >= item.points - FULL) for e in earned]
            rest = [totals[r.student] - e for r, e in zip(reports, earned)]
            discrimination = None
            if len(set(full)) > 1 and len(set(rest)) > 1:
                r = pointbiserialr(full, rest).statistic
                discrimination = float(r) if math.isfinite(r) else None
            figures.append(ItemFigures(
                notebook.stem, item.grade_id, item.solution or "", item.points, len(earned), sum(full) / len(full),
                float(sum(item.points - e for e in earned)),
                float(np.mean(earned) / item.points) if item.points else 1.0, discrimination))
    return figures


def hidden_test_figures(results: ClassResults) -> list[HiddenTestFigures]:
    """Per hidden test (and device variant), in the course's order of items, then by name."""
    order = {(nb.stem, item.grade_id): (i, j) for i, nb in enumerate(results.course.notebooks)
             for j, item in enumerate(nb.tests)}
    found: dict[tuple[str, str, str], HiddenTestFigures] = {}
    for report in graded_reports(results):
        stem = results.stem(report)
        for test in report.tests:
            key = (stem, test.grade_id, test.test)
            figures = found.setdefault(key, HiddenTestFigures(*key))
            figures.n += 1
            figures.statuses[test.status] += 1
            figures.points_lost += max(0.0, test.max_points - test.points)
            if test.status == "passed":
                figures.passed += 1
            else:
                group = (test.status, message_group(test.message))
                figures.failures[group] += 1
                figures.examples.setdefault(group, test.message)
    return sorted(found.values(), key=lambda f: (order.get((f.notebook, f.grade_id), (99, 99)), f.test))


def problems(results: ClassResults) -> list[Problem]:
    """Notebooks not taken in, not finished, not readable, timed out or caught using a forbidden shortcut."""
    found = []
    for report in sorted(results.reports, key=lambda r: (r.student, r.notebook)):
        reason = "; ".join(report.warnings) or "no reason was recorded"
        if report.outcome == "rejected":
            found.append(Problem(report.student, report.notebook, "not taken in", reason))
            continue
        if report.outcome == "failed":
            found.append(Problem(report.student, report.notebook, "grader failed", reason))
            continue
        if report.warnings and (not report.tests or all(t.status == "missing" for t in report.tests)):
            found.append(Problem(report.student, report.notebook, "not readable", reason))
            continue
        for status, kind in (("timeout", "timed out"), ("forbidden", "forbidden shortcut")):
            hit = [t for t in report.tests if t.status == status]
            if hit:
                items = sorted({t.grade_id.removeprefix("test_") for t in hit})
                messages = sorted({t.message for t in hit})
                found.append(Problem(report.student, report.notebook, kind,
                                     f"{', '.join(items)}: {' | '.join(messages)}"))
    return found


@dataclass
class NumbersToCheck:
    """A notebook whose recorded values disagree with its seed or with an answer that quotes them."""

    student: str
    notebook: str
    answer: str        # the written answer's grade_id; "" for the notebook's seed
    what: str          # "seed", "not recorded", "from the reference table", "not among the recorded values"
    detail: str


def numbers_to_check(results: ClassResults) -> list[NumbersToCheck]:
    """Per student and notebook (``Report.printed``, ``autograder/printed.py``): a run whose seed is
    not the student's, quoted experiments the notebook did not record, and quoted numbers that
    only the reference table holds or that match no recorded value. An answer that quotes no
    number is not listed, nor a notebook that recorded nothing unless an answer quotes numbers
    (submitted without running its experiments, it has no numbers to check otherwise)."""
    found = []
    for report in sorted(results.notebook_reports(), key=lambda r: (r.student, r.notebook)):
        printed = report.printed
        if printed is None:
            continue
        if printed.seed_note and printed.seed is not None:
            found.append(NumbersToCheck(report.student, report.notebook, "", "seed", printed.seed_note))
        for answer in printed.answers:
            if not answer.numbers:
                continue
            if answer.missing:
                found.append(NumbersToCheck(report.student, report.notebook, answer.grade_id, "not recorded",
                                            ", ".join(answer.missing)))
            copied = [n for n in answer.numbers if n.match == "reference table"]
            if copied:
                found.append(NumbersToCheck(report.student, report.notebook, answer.grade_id,
                                            "from the reference table",
                                            "; ".join(f"{n.text} ({n.label})" for n in copied)))
            unknown = [n.text for n in answer.numbers if n.match == "none"]
            if unknown and answer.recorded:
                found.append(NumbersToCheck(report.student, report.notebook, answer.grade_id,
                                            "not among the recorded values", ", ".join(unknown)))
    return found


def timings(results: ClassResults) -> list[Timing]:
    """Grading time per notebook (reports the grader finished), in the course's order."""
    if not results.timing:
        return []
    found = []
    for notebook in results.course.notebooks:
        reports = [r for r in graded_reports(results) if results.stem(r) == notebook.stem and r.outcome == "graded"]
        if not reports:
            continue
        slowest = max(reports, key=lambda r: r.duration_s)
        found.append(Timing(notebook.stem, len(reports), float(np.median([r.duration_s for r in reports])),
                            slowest.duration_s, slowest.student))
    return found
