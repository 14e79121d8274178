"""Jobs for ``test_runner.py``: module-level, so the fork server can find them by name."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def describe_process(out: str) -> None:
    import torch

    Path(out).write_text(json.dumps({
        "pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(),
        "preloaded": [m for m in ("torch", "pytest", "transformers.models.bert.modeling_bert",
                                  "autograder.grading") if m in sys.modules],
        "cuda_initialized": torch.cuda.is_initialized(),
    }))
    print("hello from the job")


def exit_with(code: int) -> None:
    print("leaving with", code, flush=True)
    os._exit(code)


def raise_error() -> None:
    raise RuntimeError("the job broke on purpose")


def kill_itself() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang_with_escaped_child(pid_file: str) -> None:
    """Start a process in a session of its own (out of the job's group), then hang."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    with open(pid_file, "w") as handle:
        handle.write(str(child.pid))
    while True:
        time.sleep(1)


def grade_by_name(notebooks: list[str], student: str, config, events) -> None:
    """Stands in for ``runner._grade_job``: "hang" in a notebook's name hangs the job,
    "crash" kills it; any other notebook gets a report of 1 point out of 1."""
    from autograder.report import Report

    print("job", os.getpid(), flush=True)
    for index, notebook in enumerate(notebooks):
        events.send(("started", index))
        name = Path(notebook).name
        if "hang" in name:
            while True:
                time.sleep(1)
        if "crash" in name:
            print("crashing on", name, flush=True)
            os._exit(9)
        report = Report(student=student, notebook=name, score=1.0, max_score=1.0, sandbox="none",
                        device=config.device, duration_s=0.0, tests=[], warnings=[f"graded by {os.getpid()}"])
        events.send(("graded", index, json.dumps(report.to_json())))
