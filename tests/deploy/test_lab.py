"""``python -m week6_helpers.lab`` (what ``make lab`` runs): a student's JupyterLab, as root or not."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from week6_helpers import lab


def test_root_gets_allow_root_and_a_user_does_not(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "--allow-root" in lab.command(tmp_path, [])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--allow-root" not in lab.command(tmp_path, ["--port", "1"])
    assert lab.command(tmp_path, ["--port", "1"])[-2:] == ["--port", "1"]


def test_the_student_settings_come_first_on_jupyters_path(monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/elsewhere")
    assert lab.environment()["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(lab.STUDENT_CONFIG), "/elsewhere"]


def test_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert lab.main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (urllib.error.URLError, ConnectionError):
        return 0, ""  # not listening yet


@pytest.mark.slow
def test_lab_starts_here_with_a_students_view(tmp_path):
    """As whoever runs the tests (root in CI): it starts, and shows no instructor tools."""
    (tmp_path / "notes.ipynb").write_text(json.dumps(
        {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    port, token = _free_port(), "week6-test"
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "week6_helpers.lab", str(tmp_path), "--no-browser", f"--port={port}",
             f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and _get(f"{base}/api/status?token={token}")[0] != 200:
            assert server.poll() is None, f"JupyterLab exited:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        assert _get(f"{base}/api/status?token={token}")[0] == 200, log.read_text()[-3000:]
        status, page = _get(f"{base}/lab?token={token}")
        assert status == 200
        disabled = json.loads(re.search(r'"disabledExtensions": (\[[^\]]*\])', page).group(1))
        assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                "@jupyter/nbgrader:course-list"} <= set(disabled)
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        assert _get(f"{base}/formgrader?token={token}")[0] == 404
        assert "not a subdirectory of the notebook server root" not in log.read_text()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
