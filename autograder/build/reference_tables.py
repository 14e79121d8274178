"""The "What you should see" tables of the notebooks, and the README's run times, from the reference runs.

``benchmarks/reference_values.py`` runs every source notebook under seeds 0, 1 and 2 in full mode
and once in fast mode, and writes what each experiment's ``record(name, {...})`` call reported to
``benchmarks/results/reference_values.json``: the one home of those numbers. ``make regen``
(its ``tables`` step, before the release) writes them into the source notebooks' markdown cells
whose metadata says ``{"week6": {"reference_values": name}}``, and its ``readme`` step writes the
measured times into the README's table of run times.

Each ``record`` name in a notebook's code must have its table cell and each table cell its
``record`` call, in the same notebook: a missing half is an error naming the notebook and the name.
An experiment with no full-mode run yet gets a table that says so, never invented numbers.
"""
from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path

from .. import paths
from ..paths import SOURCE

RESULTS = paths.RESULTS / "reference_values.json"
METADATA_KEY = "reference_values"
# | `stem` | 8 s | 27 s |   (the README's table of run times)
TIME_ROW = re.compile(r"^\| `(?P<stem>[A-Za-z0-9_]+)` \| (?P<fast>[^|]*) \| (?P<full>[^|]*) \|$")


class TablesError(Exception):
    """The notebooks' record calls and table cells disagree."""


# ------------------------------------------------------------------------------ reading
def load_runs(path: Path = RESULTS) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["runs"] if path.is_file() else []


def recorded_names(notebook: dict) -> list[str]:
    """The experiment names of the notebook's ``record("name", ...)`` calls, in order."""
    names = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if "record(" not in source:
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:  # IPython magics; the course notebooks have none in record cells
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "record"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.append(node.args[0].value)
    return names


def table_cells(notebook: dict) -> dict[str, dict]:
    return {cell["metadata"]["week6"][METADATA_KEY]: cell for cell in notebook["cells"]
            if cell["cell_type"] == "markdown" and METADATA_KEY in cell.get("metadata", {}).get("week6", {})}


# ------------------------------------------------------------------------------ formatting
def number(value: float, like: float | None = None) -> str:
    """``value`` with as many decimals as suit the size of ``like`` (itself by default), so that a
    spread is written to the precision of the mean it belongs to."""
    size = abs(value if like is None else like)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _values(runs: list[dict], experiment: str, label: str) -> list[float | None]:
    return [run["values"].get(experiment, {}).get(label) for run in runs if label in run["values"].get(experiment, {})]


def table(stem: str, experiment: str, runs: list[dict]) -> str:
    """The markdown of one "What you should see" cell."""
    full = sorted((r for r in runs if r["notebook"] == stem and r["mode"] == "full"), key=lambda r: r["seed"])
    fast = [r for r in runs if r["notebook"] == stem and r["mode"] == "fast" and r["seed"] == 0]
    heading = f"**What you should see: {experiment}.**"
    labels: list[str] = []
    for run in full + fast:
        labels += [label for label in run["values"].get(experiment, {}) if label not in labels]
    if not full or not labels:
        return (f"{heading} The course has not measured this experiment yet: "
                "`python benchmarks/reference_values.py` fills in this table.")
    seeds = ", ".join(str(r["seed"]) for r in full)
    lines = [
        f"{heading} The course's own solution, run in full mode with `WEEK6_SEED` = {seeds} "
        "on a 2-core CPU. A correct solution of yours lands near these numbers; the spread says how "
        "much of a difference is just the seed. Fast mode trains on less data for fewer updates: "
        "its column shows what a working notebook prints there, not what the method achieves. "
        "Where its section asks questions, it stands after them: answer from your own run's "
        "output, then check here that your run is sane.",
        "",
        f"| | full mode: mean ± sd over {len(full)} seeds | full mode: lowest to highest | fast mode, seed 0 |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label in labels:
        values = _values(full, experiment, label)
        finite = [v for v in values if v is not None]
        if not values:  # a row of fast mode only (a smaller subset size, say)
            middle, span = "not in full mode", ""
        elif finite:
            mean = statistics.mean(finite)
            spread = statistics.stdev(finite) if len(finite) > 1 else 0.0
            middle = f"{number(mean)} ± {number(spread, like=mean)}"
            span = f"{number(min(finite), like=mean)} to {number(max(finite), like=mean)}"
            if len(finite) < len(values):
                span += f" ({len(values) - len(finite)} diverged)"
        else:
            middle, span = "diverged", "diverged"
        fast_values = _values(fast, experiment, label)
        fast_cell = ("diverged" if fast_values[0] is None else number(fast_values[0])) if fast_values else "not in fast mode"
        lines.append(f"| {label} | {middle} | {span} | {fast_cell} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ outputs
def notebook_outputs(runs: list[dict] | None = None, source: Path = SOURCE) -> dict[Path, bytes]:
    """Every source notebook with a table cell, with its tables as they should be."""
    runs = load_runs() if runs is None else runs
    outputs = {}
    for path in sorted(source.glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        notebook = json.loads(text)
        names, cells = recorded_names(notebook), table_cells(notebook)
        missing_cell = [name for name in names if name not in cells]
        missing_call = [name for name in cells if name not in names]
        if missing_cell or missing_call:
            problems = [f"record({name!r}, ...) has no markdown cell with metadata "
                        f'{{"week6": {{"{METADATA_KEY}": "{name}"}}}} after it' for name in missing_cell]
            problems += [f"the table cell {name!r} has no record({name!r}, ...) call" for name in missing_call]
            raise TablesError(f"{path.name}: " + "; ".join(problems))
        if len(set(names)) != len(names):
            raise TablesError(f"{path.name}: an experiment name is recorded twice: {names}")
        for name, cell in cells.items():
            cell["source"] = table(path.stem, name, runs).splitlines(keepends=True)
        if cells:
            outputs[path] = (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    return outputs


def with_run_times(text: str, runs: list[dict] | None = None) -> str:
    """The README with its table of run times filled from the reference runs: the fast-mode run
    (seed 0) and the median of the full-mode runs of each notebook."""
    runs = load_runs() if runs is None else runs
    lines = []
    for line in text.split("\n"):
        match = TIME_ROW.match(line)
        if match:
            stem = match["stem"]
            fast = [r["seconds"] for r in runs if r["notebook"] == stem and r["mode"] == "fast"]
            full = [r["seconds"] for r in runs if r["notebook"] == stem and r["mode"] == "full"]
            fast_text = f"{fast[0]:.0f} s" if fast else match["fast"]
            full_text = f"{statistics.median(full):.0f} s" if full else match["full"]
            line = f"| `{stem}` | {fast_text} | {full_text} |"
        lines.append(line)
    return "\n".join(lines)
