"""``python -m week6_helpers.check [NOTEBOOK ...]``: a student's own check of their notebooks.

Runs each notebook top to bottom in a fresh Jupyter kernel (fast mode unless
``--full``), exactly as "Restart and run all" would, and then reads the result
cell by cell:

* a solution cell that still holds the stub ``raise NotImplementedError()`` is
  a function left to write (``STUB``);
* a visible test cell (nbgrader ``grade: true``) passes when it ran without an
  error (``ok``) and fails otherwise (``FAIL``, with the error's last line);
  a cell that failed only because a function above is still a stub is
  ``waiting``;
* any other cell that raised (an experiment, an interrupted cell) is reported
  too, because the grade of a written answer may rest on its output.

Only the tests you can see in the notebook run, in your own environment: this
tells you what those checks say, not your grade, which comes from more
thorough hidden tests. The notebook file itself is never modified. Exit status:
0 when every notebook ran with no error at all, 1 otherwise, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import cells

STUB_ERROR = "NotImplementedError"
STUB_LINE = "raise NotImplementedError()"  # nbgrader's code stub in this course
# A full-mode experiment cell trains for minutes; a cell that runs longer than
# this is reported as interrupted, never as passed.
CELL_TIMEOUT_S = {"fast": 600, "full": 1800}


@dataclass
class Finding:
    status: str  # ok | STUB | FAIL | waiting | error
    cell: int  # 1-based index among the notebook's cells
    name: str  # the nbgrader grade_id, or "cell N"
    message: str = ""


@dataclass
class NotebookResult:
    path: Path
    seconds: float
    findings: list[Finding] = field(default_factory=list)
    first_error: Finding | None = None

    @property
    def stubs(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "STUB"]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.status in ("FAIL", "error")]

    @property
    def clean(self) -> bool:
        return all(f.status == "ok" for f in self.findings)


def _error(cell) -> tuple[str, str] | None:
    """(error name, one-line message) of a code cell's first error output."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            value = str(output.get("evalue", "")).strip().splitlines()
            return str(output.get("ename", "Error")), (value[-1] if value else "")
    return None


def is_stub(cell) -> bool:
    """A solution cell still holding the release's placeholder line (not one that mentions it)."""
    return bool(cells.nbgrader(cell).get("solution")) and any(
        line.strip() == STUB_LINE for line in cell.source.splitlines())


def classify(notebook) -> tuple[list[Finding], Finding | None]:
    """Findings for an executed notebook, and the first cell that raised."""
    findings: list[Finding] = []
    first: Finding | None = None
    stubs_above = False
    for index, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        meta, name = cells.nbgrader(cell), cells.name(cell, index)
        error = _error(cell)
        # A stub only raises when called, so a cell that calls one is waiting for
        # the student, not failing; a NameError there usually follows from it.
        waiting = bool(error) and stubs_above and error[0] in (STUB_ERROR, "NameError")
        if is_stub(cell):
            todo = Finding("STUB", index, name, "still raises NotImplementedError: write this function")
            findings.append(todo)
            stubs_above = True
            if error and error[0] == STUB_ERROR:  # a stub that raises as it runs (an answer constant)
                first = first or todo
                continue
        if not error:
            ran = cell.get("execution_count") is not None  # cells after a stop were never run
            if ran and meta.get("grade") and not meta.get("solution"):
                findings.append(Finding("ok", index, name))
            continue
        message = f"{error[0]}: {error[1]}".rstrip(": ")
        if waiting:
            finding = Finding("waiting", index, name, f"{message} (a function above is still a stub)")
        elif meta.get("grade") and not meta.get("solution"):
            finding = Finding("FAIL", index, name, message)
        else:
            finding = Finding("error", index, name, message)
        findings.append(finding)
        first = first or finding
    return findings, first


def run_notebook(path: Path, *, full: bool = False, timeout: int | None = None,
                 stop_at_first_error: bool = False) -> NotebookResult:
    """Execute a copy of ``path`` in a fresh kernel started in its folder."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    mode = "full" if full else "fast"
    # The kernel inherits this process's environment; fast mode is what the
    # course's own tests run, in a minute or so per notebook.
    os.environ["WEEK6_FAST"] = "0" if full else "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    client = NotebookClient(
        notebook,
        timeout=timeout or CELL_TIMEOUT_S[mode],
        interrupt_on_timeout=True,  # an interrupted cell is recorded as an error, never skipped
        allow_errors=not stop_at_first_error,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.resolve().parent)}},
    )
    started = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError:
        pass  # stop_at_first_error: the error is in that cell's outputs, classified below
    findings, first = classify(notebook)
    return NotebookResult(path, time.perf_counter() - started, findings, first)


def report(result: NotebookResult, out=sys.stdout) -> None:
    print(f"\n{result.path.name}  ({result.seconds:.0f} s)", file=out)
    for f in result.findings:
        tail = f"  {f.message}" if f.message else ""
        print(f"  {f.status:<8}{f.name}{tail}", file=out)
    if result.clean:
        print("  every cell ran; every visible test passed", file=out)


def _notebooks(paths: list[str]) -> list[Path]:
    if not paths:
        found = sorted(Path.cwd().glob("*.ipynb"))
        if not found:
            raise SystemExit("error: no .ipynb file here; run this in your assignment folder or name the notebooks")
        return found
    chosen = [Path(p) for p in paths]
    for path in chosen:
        if path.suffix != ".ipynb" or not path.is_file():
            raise SystemExit(f"error: {path} is not a notebook file (.ipynb)")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m week6_helpers.check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to check (default: every .ipynb here)")
    parser.add_argument("--full", action="store_true", help="run the experiments in full mode (minutes each)")
    parser.add_argument("--timeout", type=int, help="seconds allowed per cell (default 600 fast, 1800 full)")
    parser.add_argument("--stop-at-first-error", action="store_true",
                        help="stop each notebook at the first cell that raises (quicker; later cells unchecked)")
    parser.add_argument("--json", type=Path, help="also write the findings to this file")
    args = parser.parse_args(argv)
    try:
        paths = _notebooks(args.notebooks)
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    results = [run_notebook(p, full=args.full, timeout=args.timeout, stop_at_first_error=args.stop_at_first_error)
               for p in paths]
    for result in results:
        report(result)
    if args.json:
        args.json.write_text(json.dumps([
            {"notebook": r.path.name, "seconds": round(r.seconds, 1), "clean": r.clean,
             "first_error": asdict(r.first_error) if r.first_error else None,
             "findings": [asdict(f) for f in r.findings]} for r in results], indent=1))
    stubs = sum(len(r.stubs) for r in results)
    failures = sum(len(r.failures) for r in results)
    print()
    if stubs:
        print(f"{stubs} function(s) still to write (STUB above).")
    if failures:
        print(f"{failures} cell(s) failed (FAIL/error above).")
    if not stubs and not failures and all(r.clean for r in results):
        print("All visible checks passed.")
    print("These are the visible checks only; your grade comes from more thorough hidden tests.")
    return 0 if all(r.clean for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
