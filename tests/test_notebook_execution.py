"""Every notebook runs: solutions top to bottom, releases up to their first stub.

Both run in fast mode (WEEK6_FAST=1), in a real Jupyter kernel, from a copy of
their folder so that nothing they write lands in the repository.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "solutions" / "week6"
RELEASE = REPO / "assignments" / "week6"
STEMS = sorted(p.stem for p in SOURCE.glob("*.ipynb"))
pytestmark = pytest.mark.slow


def _run(folder: Path, stem: str, tmp_path: Path):
    work = tmp_path / "week6"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    notebook = nbformat.read(work / f"{stem}.ipynb", as_version=4)
    env = {"WEEK6_FAST": "1", "WEEK6_DATA": str(REPO / "data"), "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}})
        started = time.perf_counter()
        try:
            client.execute()
            error = None
        except CellExecutionError as err:
            error = err
        return notebook, error, time.perf_counter() - started
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.parametrize("stem", STEMS)
def test_solution_notebook_runs_top_to_bottom(stem, tmp_path):
    _, error, seconds = _run(SOURCE, stem, tmp_path)
    assert error is None, f"solutions/week6/{stem}.ipynb failed in fast mode:\n{error}"
    print(f"{stem}: {seconds:.1f} s in fast mode")


@pytest.mark.parametrize("stem", STEMS)
def test_release_notebook_runs_until_its_first_stub(stem, tmp_path):
    notebook, error, _ = _run(RELEASE, stem, tmp_path)
    assert error is not None, f"assignments/week6/{stem}.ipynb ran to the end although its stubs are empty"
    assert error.ename == "NotImplementedError", (
        f"assignments/week6/{stem}.ipynb failed with {error.ename} before reaching a stub:\n{error}")
