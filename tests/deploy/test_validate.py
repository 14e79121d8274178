"""nbgrader's Validate with the students' settings (week6_helpers/jupyter_student/nbgrader_config.py).

Stock nbgrader gives a cell 30 s, interrupts it, and still says "Success!" when
the interrupted cell was not a test cell. With the course's settings, Validate
runs in fast mode and an error anywhere, an interrupted cell included, fails.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from week6_helpers.lab import STUDENT_CONFIG

pytestmark = pytest.mark.slow


def _notebook(path: Path, *sources: str, test: str) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    check = nbformat.v4.new_code_cell(test)
    check.metadata["nbgrader"] = {"grade": True, "grade_id": "test_it", "locked": True, "points": 1,
                                  "solution": False, "schema_version": 3}
    notebook.cells.append(check)
    nbformat.write(notebook, path)
    return path


def _validate(notebook: Path, *options: str) -> str:
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(STUDENT_CONFIG)}
    env.pop("WEEK6_FAST", None)  # the setting, not the caller's environment, must turn fast mode on
    done = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(notebook), *options],
                          cwd=notebook.parent, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def test_validate_runs_in_fast_mode(tmp_path):
    notebook = _notebook(tmp_path / "fast.ipynb", "import os",
                         test="assert os.environ.get('WEEK6_FAST') == '1', 'not in fast mode'")
    output = _validate(notebook)
    assert "Success! Your notebook passes all the tests." in output, output[-2000:]


def test_an_interrupted_cell_is_never_a_success(tmp_path):
    notebook = _notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(60)", test="assert True")
    # The course's 10 minutes would make this test slow; the rule, not the limit, is under test.
    output = _validate(notebook, "--Execute.timeout=3")
    assert "Success!" not in output, output[-2000:]
    assert "VALIDATION FAILED" in output


def test_an_error_in_an_ungraded_cell_fails_validation(tmp_path):
    notebook = _notebook(tmp_path / "broken.ipynb", "raise ValueError('experiment broke')", test="assert True")
    output = _validate(notebook)
    assert "VALIDATION FAILED" in output and "experiment broke" in output, output[-2000:]
