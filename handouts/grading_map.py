"""grading_map.md: every topic of the week, its notebook, graded cells and points.

The points come from the nbgrader metadata of ``solutions/week6/*.ipynb`` through
the course model (``autograder/course.py``); which cell belongs to which topic is
the topic table ``TOPICS`` of ``handouts/build.py``, passed in as ``topics``.
A graded item that ``TOPICS`` does not name belongs where its notebook puts it
(:func:`with_unlisted_items`): counted under the topic of the graded item before it
in the notebook, right after that item (the first items of a notebook: before the
item after them), so adding a graded function to a notebook section needs no
edit here. A notebook none of whose items ``TOPICS`` names, or a topic naming a
cell that does not exist, is a :class:`BuildError`, so the map cannot silently
drift from the notebooks.

Each topic lists (notebook stem, item) pairs. An item is a graded function or
constant (its points sit on the visible-test cell ``test_<item>``) or a written
answer (a markdown cell with that grade_id). An entry with a third element is a
cross-reference: shown under that topic but counted under the topic named there.
"""
from __future__ import annotations

from dataclasses import dataclass

from autograder.course import TEST, CourseError, load_course

from . import BuildError


@dataclass(frozen=True)
class GradedItem:
    notebook: str   # stem
    item: str       # function / constant name, or the written answer's grade_id
    cell: str       # the cell that carries the points: test_<item>, or the written answer itself
    kind: str       # "auto" or "written"
    points: float
    # A notebook still being written once showed its planned items here; the course model
    # (autograder/course.py) now refuses a notebook it cannot find, so this stays False.
    planned: bool = False


def notebook_items() -> dict[str, dict[str, GradedItem]]:
    """Graded items of every notebook, in the course's order, keyed by item name (autograder/course.py)."""
    try:
        course = load_course()
    except CourseError as err:
        raise BuildError(str(err)) from err
    result = {}
    for notebook in course.notebooks:
        result[notebook.stem] = {}
        for cell in notebook.graded:
            item = cell.solution if cell.kind == TEST else cell.grade_id
            result[notebook.stem][item] = GradedItem(notebook.stem, item, cell.grade_id,
                                                     "auto" if cell.kind == TEST else "written", cell.points)
    return result


Topics = list[tuple[str, str, list[tuple]]]


def _counted_at(topics: Topics, stem: str, item: str) -> tuple[int, int] | None:
    """(topic index, entry index) of the entry that counts ``stem:item``, or None."""
    for number, (_, _, entries) in enumerate(topics):
        for position, entry in enumerate(entries):
            if len(entry) == 2 and (entry[0], entry[1]) == (stem, item):
                return number, position
    return None


def with_unlisted_items(items: dict[str, dict[str, GradedItem]], topics: Topics) -> Topics:
    """``topics`` (a copy) with every graded item it does not name counted next to its
    neighbour in the notebook: after the nearest earlier item that has a topic, or else
    before the nearest later one. A notebook with no item in ``topics`` gains nothing."""
    placed = [(key, title, list(entries)) for key, title, entries in topics]
    for stem, by_name in items.items():
        names = list(by_name)
        for index, name in enumerate(names):
            if _counted_at(placed, stem, name) is not None:
                continue
            earlier = (_counted_at(placed, stem, other) for other in reversed(names[:index]))
            later = (_counted_at(placed, stem, other) for other in names[index + 1:])
            after = next((found for found in earlier if found is not None), None)
            before = next((found for found in later if found is not None), None)
            if after is not None:
                placed[after[0]][2].insert(after[1] + 1, (stem, name))
            elif before is not None:
                placed[before[0]][2].insert(before[1], (stem, name))
    return placed


def points_text(value: float) -> str:
    """Points as the handout and the map write them: 2, 1.5."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def render_grading_map(items: dict[str, dict[str, GradedItem]], topics: Topics) -> str:
    """grading_map.md as text; raises BuildError if ``topics`` and the notebooks disagree.

    ``topics`` is expected to name every graded item (:func:`with_unlisted_items`)."""
    counted: dict[tuple[str, str], str] = {}
    topic_ids = {key for key, _, _ in topics}
    for key, _, entries in topics:
        for entry in entries:
            stem, item = entry[0], entry[1]
            if stem not in items or item not in items[stem]:
                where = "planned items" if items.get(stem) and next(iter(items[stem].values())).planned else "notebook"
                raise BuildError(f"TOPICS ({key}) names {stem}:{item}, which is not a graded item of that {where}")
            if len(entry) == 3:
                if entry[2] not in topic_ids:
                    raise BuildError(f"TOPICS ({key}) refers {stem}:{item} to unknown topic {entry[2]}")
                continue
            if (stem, item) in counted:
                raise BuildError(f"{stem}:{item} is counted under both {counted[(stem, item)]} and {key}")
            counted[(stem, item)] = key
    for stem, by_name in items.items():
        missing = [name for name in by_name if (stem, name) not in counted]
        if missing:
            raise BuildError(f"graded items of {stem} assigned to no topic in handouts/build.py TOPICS: {missing} "
                             "(name at least one item of each notebook there; the others follow their neighbours)")

    lines = [
        "# Grading map, week 6",
        "",
        "Generated by `python handouts/build.py` from the nbgrader metadata of `solutions/week6/*.ipynb`",
        "and the topic table in `handouts/build.py`. Do not edit by hand: `python handouts/build.py --check`",
        "fails when this file is out of date.",
        "",
        "*auto*: auto-graded code; the points sit on the visible-test cell `test_<item>` and a hidden test",
        "suite awards them. *written*: a written answer, graded by hand with the rubric of the source",
        "notebook. Points in parentheses are listed under a second topic but counted under the topic",
        "named. *planned*: the notebook is still being written; its points are the planned ones and are",
        "not part of the totals.",
        "",
        "## By topic",
        "",
        "| topic | notebook | item | graded cell | kind | points |",
        "| --- | --- | --- | --- | --- | ---: |",
    ]
    for key, title, entries in topics:
        label = f"{key} · {title}"
        if not entries:
            lines.append(f"| {label} | (none) | no graded cell | | | 0 |")
            continue
        previous_stem = None
        for k, entry in enumerate(entries):
            stem, item = entry[0], entry[1]
            info = items[stem][item]
            notebook = f"`{stem}.ipynb`" if stem != previous_stem else ""
            previous_stem = stem
            kind = info.kind + (", planned" if info.planned else "")
            points = points_text(info.points)
            if len(entry) == 3:
                points = f"({points}, counted under {entry[2]})"
            lines.append(f"| {label if k == 0 else ''} | {notebook} | `{item}` | `{info.cell}` | {kind} | {points} |")

    lines += ["", "## Points per topic", "",
              "| topic | auto-graded | written | total |", "| --- | ---: | ---: | ---: |"]
    for key, title, entries in topics:
        primary = [items[e[0]][e[1]] for e in entries if len(e) == 2]
        auto = sum(i.points for i in primary if i.kind == "auto" and not i.planned)
        written = sum(i.points for i in primary if i.kind == "written" and not i.planned)
        planned = sum(i.points for i in primary if i.planned)
        total = points_text(auto + written) + (f" (+{points_text(planned)} planned)" if planned else "")
        lines.append(f"| {key} · {title} | {points_text(auto)} | {points_text(written)} | {total} |")

    lines += ["", "## Totals per notebook", "",
              "| notebook | auto-graded points | manually graded points | total | status |",
              "| --- | ---: | ---: | ---: | --- |"]
    grand_auto = grand_written = 0.0
    for stem, by_name in items.items():
        auto = sum(i.points for i in by_name.values() if i.kind == "auto")
        written = sum(i.points for i in by_name.values() if i.kind == "written")
        planned = any(i.planned for i in by_name.values())
        if not planned:
            grand_auto, grand_written = grand_auto + auto, grand_written + written
        status = "planned, not counted" if planned else "present"
        lines.append(f"| `{stem}.ipynb` | {points_text(auto)} | {points_text(written)} | "
                     f"{points_text(auto + written)} | {status} |")
    lines.append(f"| **all present notebooks** | {points_text(grand_auto)} | {points_text(grand_written)} | "
                 f"{points_text(grand_auto + grand_written)} | |")
    return "\n".join(lines) + "\n"
