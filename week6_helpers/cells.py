"""A notebook cell as the student-side tools read it: its nbgrader metadata, its source and
its name. One reader for the self-check (``check.py``) and for borrowing Part B's functions
(``part_b.py``), which take notebooks as nbformat objects or as plain JSON dicts."""
from __future__ import annotations


def nbgrader(cell: dict) -> dict:
    """The cell's nbgrader metadata; empty where there is none or it is not a mapping
    (a student may have edited it)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def source(cell: dict) -> str:
    """The cell's source as one string (JSON on disk may hold a list of lines)."""
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def name(cell: dict, number: int) -> str:
    """The cell's nbgrader ``grade_id``, or ``cell N`` (numbered from 1) where it has none."""
    return str(nbgrader(cell).get("grade_id") or f"cell {number}")
