"""``python -m autograder check NOTEBOOK``: the student's own check, with visible tests only.

The notebook's setup and solution cells run in the same sandboxed worker as in
grading; then each visible-test cell of the *released* notebook runs after them.
Nothing hidden is used, so this tells a student what the release's checks say,
not their grade.
"""
from __future__ import annotations

from pathlib import Path

import nbformat

from .notebook import ASSIGNMENT, REPO, UnreadableNotebook, is_test_cell, plan_grading, read_notebook
from .runner import DEFAULT_HIDDEN

RELEASE_DIR = REPO / "assignments" / ASSIGNMENT


def run_visible_tests(path: Path) -> int:
    from .sandbox.errors import SandboxError
    from .sandbox.launcher import Worker

    stem = Path(path).stem
    try:
        plan = plan_grading(read_notebook(path), stem)
    except UnreadableNotebook as err:
        print(f"error: {err}")
        return 2
    release = nbformat.read(RELEASE_DIR / f"{stem}.ipynb", as_version=4)
    for why in plan.missing.values():
        print(f"missing: {why}")
    failures = 0
    with Worker(threads=1, hidden_paths=DEFAULT_HIDDEN,
                exposed_paths=[str(REPO / "week6_helpers")]) as worker:
        for cell in plan.cells:
            result = worker.exec_cell(cell.source, cell_id=cell.grade_id, timeout=60)
            if not result.ok:
                print(f"cell {cell.grade_id}: {result.error.type_name}: {result.error.message}")
        for cell in release.cells:
            if not is_test_cell(cell):
                continue
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            try:
                result = worker.exec_cell(cell.source, cell_id=grade_id, timeout=120)
            except SandboxError as err:
                print(f"FAIL  {grade_id}: did not finish ({type(err).__name__})")
                failures += 1
                worker.restart()
                continue
            if result.ok:
                print(f"ok    {grade_id}")
            else:
                failures += 1
                print(f"FAIL  {grade_id}: {result.error.type_name}: {result.error.message}")
    print(f"\n{failures} visible test cell(s) failed." if failures else "\nAll visible tests passed.")
    print("Visible tests are a quick check; the grade comes from more thorough hidden tests.")
    return 1 if failures else 0
