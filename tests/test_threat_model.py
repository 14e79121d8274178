"""docs/threat-model.md states the grader's limits; each value there is the one in the code."""
from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "threat-model.md"
ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<value>[0-9][^|]*) \| `(?P<constant>autograder\.[\w.]+)` \|$", re.M)


def resolve(dotted: str):
    """``module.CONSTANT`` or ``module.Dataclass.field`` (the field's default)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            if dataclasses.is_dataclass(target) and name in {f.name for f in dataclasses.fields(target)}:
                target = next(f.default for f in dataclasses.fields(target) if f.name == name)
            else:
                target = getattr(target, name)
        return target
    raise ModuleNotFoundError(dotted)


def test_every_limit_in_the_threat_model_is_the_one_in_the_code():
    rows = list(ROW.finditer(DOC.read_text()))
    assert len(rows) >= 25, "the limits table of docs/threat-model.md was not found"
    for row in rows:
        stated = float(row["value"].split()[0].replace(",", ""))
        assert resolve(row["constant"]) == stated, f"{row['what']}: the doc says {stated}, {row['constant']} differs"
