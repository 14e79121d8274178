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


def test_every_setting_in_the_threat_model_sets_its_limit():
    """The CLI option and the nbgrader traitlet named in a row set the row's config field;
    every timeout option of ``grade`` is in the table (the one place they are documented)."""
    from autograder import cli
    from autograder.nbgrader.plugin import SandboxedGrading

    defaults = vars(cli.build_parser().parse_args(["grade"]))
    documented = set()
    for row in rows():
        if row["setting"].strip() == "—":
            continue
        setting = SETTING.match(row["setting"].strip())
        assert setting, f"{row['what']}: '{row['setting']}' is not `--option`; `c.SandboxedGrading.trait`"
        assert row["constant"].startswith(CONFIG), f"{row['what']}: only GradingConfig fields are settable"
        field = row["constant"][len(CONFIG):]
        assert defaults[field] == resolve(row["constant"]), f"{row['what']}: the CLI's default differs"
        parsed = cli.build_parser().parse_args(["grade", "--device", "cpu", setting["option"], "12.5"])
        assert getattr(cli.grading_config(parsed), field) == 12.5, f"{row['what']}: not set by {setting['option']}"
        trait = SandboxedGrading.class_traits()[setting["trait"]]
        assert trait.default_value == resolve(row["constant"]), f"{row['what']}: nbgrader's default differs"
        grading = SandboxedGrading(device="cpu", **{setting["trait"]: 12.5})
        assert getattr(grading.grading_config(), field) == 12.5, f"{row['what']}: not set by {setting['trait']}"
        documented.add(setting["option"])
    options = set(re.findall(r"--timeout[\w-]*", _grade_help(cli)))
    assert options == documented, "every timeout option of grade is in the table"


def _grade_help(cli) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.build_parser().parse_args(["grade", "--help"])
    return out.getvalue()
