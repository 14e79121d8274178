"""The "Where in the notebooks" boxes of week6.md: their item lines, written from the topics.

Each section of the handout ends with a box that names the graded cells of its topic,
with their points. A directive line on top says which topic of ``TOPICS``
(``handouts/build.py``) the box lists::

    <!-- graded items: B4 -->
    > **Where in the notebooks**
    >
    > - `part_b_finetuning.ipynb` → `architecture_table` (graded by `test_architecture_table`, 2 points)
    > - `part_b_finetuning.ipynb` → `model_for_task` (graded by `test_model_for_task`, 3 points)

The build rewrites the item lines (``> - `<notebook>.ipynb` → `<item>` (...)``) of each such
box from its topic, as the grading map counts it (``grading_map.with_unlisted_items``), and
the course model's points, in ``week6.md`` itself; any other line of a box (a note) stays as
written, after them. So a graded item added to a notebook shows up in its section's box with
``make regen``, and a box cannot state points that the notebook does not award. Every topic
has exactly one box. The directive lines are left out of the rendered page
(:func:`without_box_directives`).
"""
from __future__ import annotations

import re

from . import BuildError
from .grading_map import GradedItem, Topics, points_text

BOX_DIRECTIVE = re.compile(r"^<!-- graded items: (\w+) -->$")
BOX_TITLE = "> **Where in the notebooks**"
ITEM_LINE = re.compile(r"^> - `\w+\.ipynb` → `\w+` \(")


def item_line(item: GradedItem) -> str:
    """The box's line for one graded item."""
    points = f"{points_text(item.points)} point{'' if item.points == 1 else 's'}"
    how = f"graded by `{item.cell}`, {points}" if item.kind == "auto" else f"written answer, {points}"
    return f"> - `{item.notebook}.ipynb` → `{item.item}` ({how})"


def _box_end(lines: list[str], start: int) -> int:
    """The index just after the box whose first line is ``lines[start]``."""
    end = start
    while end < len(lines) and lines[end].startswith(">"):
        end += 1
    return end


def with_item_boxes(markdown: str, items: dict[str, dict[str, GradedItem]], topics: Topics) -> str:
    """``markdown`` with the item lines of every box written from ``topics``; raises BuildError
    for a directive that names no topic, a topic named twice or never, or a directive with no box under it."""
    entries = {key: entries for key, _, entries in topics}
    lines = markdown.split("\n")
    out: list[str] = []
    seen: list[str] = []
    index = 0
    while index < len(lines):
        directive = BOX_DIRECTIVE.match(lines[index])
        out.append(lines[index])
        index += 1
        if directive is None:
            continue
        key = directive.group(1)
        if key not in entries:
            raise BuildError(f"week6.md: a box lists the graded items of topic {key}, which TOPICS does not have")
        if key in seen:
            raise BuildError(f"week6.md: two boxes list the graded items of topic {key}")
        seen.append(key)
        if index + 1 >= len(lines) or lines[index] != BOX_TITLE or lines[index + 1] != ">":
            raise BuildError(f"week6.md: the directive of topic {key} is not followed by a "
                             f"'{BOX_TITLE}' box (its title, then a '>' line)")
        end = _box_end(lines, index)
        notes = [line for line in lines[index + 2:end] if not ITEM_LINE.match(line)]
        out += lines[index:index + 2]
        out += [item_line(items[entry[0]][entry[1]]) for entry in entries[key]]
        out += notes
        index = end
    boxless = [key for key in entries if key not in seen]
    if boxless:
        raise BuildError(f"week6.md has no 'Where in the notebooks' box for the topics {boxless} "
                         "(a '<!-- graded items: KEY -->' line above each box)")
    return "\n".join(out)


def without_box_directives(markdown: str) -> str:
    """``markdown`` without the directive lines, as the page shows it."""
    return "\n".join(line for line in markdown.split("\n") if not BOX_DIRECTIVE.match(line))
