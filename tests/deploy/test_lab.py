"""``python -m week6_helpers.lab`` (what ``make lab`` runs): a student's JupyterLab, as root or not."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from week6_helpers import lab

from .browser import JupyterServer, free_port, http_get


def test_root_gets_allow_root_and_a_user_does_not(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "--allow-root" in lab.command(tmp_path, [])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--allow-root" not in lab.command(tmp_path, ["--port", "1"])
    assert lab.command(tmp_path, ["--port", "1"])[-2:] == ["--port", "1"]


def test_the_student_settings_come_first_on_jupyters_path(monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/elsewhere")
    assert lab.environment()["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(lab.STUDENT_CONFIG), "/elsewhere"]


def test_the_student_id_is_entered_once_for_the_session(monkeypatch, tmp_path, capsys):
    from week6_helpers.reference import STUDENT_VARIABLE

    assert lab.environment("jdoe")[STUDENT_VARIABLE] == "jdoe"
    calls = []
    monkeypatch.setattr(lab.subprocess, "call", lambda args, env, cwd: calls.append((args, env)) or 0)
    assert lab.main([str(tmp_path), "--student", "jdoe", "--port", "1"]) == 0
    (args, env), = calls
    assert env[STUDENT_VARIABLE] == "jdoe" and args[-2:] == ["--port", "1"] and "jdoe" not in args
    assert lab.main([str(tmp_path), "--student"]) == 2 and "needs your student id" in capsys.readouterr().err


def test_a_missing_folder_is_a_clear_error(tmp_path, capsys):
    assert lab.main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_lab_starts_here_with_a_students_view(tmp_path):
    """As whoever runs the tests (root in CI): it starts, and shows no instructor tools."""
    (tmp_path / "notes.ipynb").write_text(json.dumps(
        {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    server = JupyterServer([sys.executable, "-m", "week6_helpers.lab", str(tmp_path)],
                           cwd=tmp_path, env=dict(os.environ), log=tmp_path / "lab.log")
    try:
        server.wait_until_ready(90)
        status, page = server.get("lab")
        assert status == 200
        disabled = json.loads(re.search(r'"disabledExtensions": (\[[^\]]*\])', page).group(1))
        assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                "@jupyter/nbgrader:course-list"} <= set(disabled)
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        assert server.status_of("formgrader") == 404
        assert "not a subdirectory of the notebook server root" not in server.log_tail(10**6)
    finally:
        server.stop()


@pytest.mark.slow
def test_lab_starts_for_an_unprivileged_user(tmp_path, repo_root):
    """As a student account (created here as root): no --allow-root, and the same student view."""
    import threading
    from pathlib import Path

    from .unix_users import SYSTEM_PATH, Runner, chown_tree, create_user, missing_prerequisites, remove_user

    why = missing_prerequisites()
    if why:
        pytest.skip(why)
    import shutil
    import tempfile

    # Not under tmp_path: pytest keeps that below a folder only root may enter.
    base = Path(tempfile.mkdtemp(prefix="w6lab-"))
    base.chmod(0o755)
    user = create_user(f"w6lab_{os.getpid()}", base / "home")
    try:
        folder = user.home / "week6"
        folder.mkdir()
        (folder / "notes.ipynb").write_text(json.dumps(
            {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        chown_tree(user.home, user)
        needed = {os.path.realpath(p): True for p in (sys.base_prefix, sys.prefix, repo_root)}
        runner = Runner(needed, {"PATH": f"{Path(sys.executable).parent}:{SYSTEM_PATH}", "LANG": "C.UTF-8"})
        port, token = free_port(), "week6-user"
        finished = {}
        command = ["timeout", "60", sys.executable, "-m", "week6_helpers.lab", str(folder), "--no-browser",
                   f"--port={port}", f"--IdentityProvider.token={token}"]
        thread = threading.Thread(target=lambda: finished.setdefault(
            "result", runner.run(user, command, cwd=user.home, timeout=120)))
        thread.start()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and http_get(f"{base}/api/status?token={token}", timeout=5)[0] != 200:
            time.sleep(0.5)
        served = http_get(f"{base}/api/status?token={token}", timeout=5)[0]
        formgrader = http_get(f"{base}/formgrader?token={token}", timeout=5)[0]
        subprocess.run(["pkill", "-TERM", "-u", user.name], check=False)  # done: stop the server
        thread.join()
        log = finished["result"].stdout + finished["result"].stderr
        assert served == 200, log[-3000:]
        assert formgrader == 404
        assert "allow-root" not in log and "Running as root" not in log
    finally:
        remove_user(user)
        shutil.rmtree(base, ignore_errors=True)
