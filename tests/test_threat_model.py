"""docs/threat-model.md states the grader's limits; each value there is the one in the code,
and each CLI option and nbgrader setting it names sets that very value."""
from __future__ import annotations

import dataclasses
import importlib
import re

from autograder.paths import REPO

DOC = REPO / "docs" / "threat-model.md"
ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<value>[0-9][^|]*) \| `(?P<constant>autograder\.[\w.]+)` "
                 r"\| (?P<setting>[^|]*) \|$", re.M)
SETTING = re.compile(r"^`(?P<option>--[\w-]+)`; `c\.SandboxedGrading\.(?P<trait>\w+)`$")
CONFIG = "autograder.config.GradingConfig."


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


def rows() -> list[re.Match]:
    found = list(ROW.finditer(DOC.read_text()))
    assert len(found) >= 25, "the limits table of docs/threat-model.md was not found"
    return found


def test_every_limit_in_the_threat_model_is_the_one_in_the_code():
    for row in rows():
        stated = float(row["value"].split()[0].replace(",", ""))
        assert resolve(row["constant"]) == stated, f"{row['what']}: the doc says {stated}, {row['constant']} differs"


def test_every_setting_in_the_threat_model_is_a_setting_of_the_config():
    """A row's CLI option and nbgrader traitlet are those of its config field's entry in
    ``config.SETTINGS`` (tests/grading/test_config.py shows each entry sets its field);
    every timeout is in the table (the one place the limits are documented)."""
    from autograder.config import TIMEOUTS

    by_field = {setting.field: setting for setting in TIMEOUTS}
    documented = set()
    for row in rows():
        if row["setting"].strip() == "—":
            continue
        named = SETTING.match(row["setting"].strip())
        assert named, f"{row['what']}: '{row['setting']}' is not `--option`; `c.SandboxedGrading.trait`"
        assert row["constant"].startswith(CONFIG), f"{row['what']}: only GradingConfig fields are settable"
        setting = by_field.get(row["constant"][len(CONFIG):])
        assert setting, f"{row['what']}: {row['constant']} is no timeout of config.SETTINGS"
        assert (named["option"], named["trait"]) == (setting.option, setting.trait), \
            f"{row['what']}: the table names {named['option']} / {named['trait']}, the config {setting.option} / {setting.trait}"
        documented.add(setting.field)
    assert documented == set(by_field), f"timeouts missing from the table: {sorted(set(by_field) - documented)}"
