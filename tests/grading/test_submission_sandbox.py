"""One submission's notebooks share one sandboxed worker, each in a fresh namespace.

What one notebook defines or changes in passing (names, seeds, the default dtype,
grad mode) is gone when the next notebook of the same submission starts, as if it
had a worker of its own; a worker that hung or crashed is not reused. Students
never share a worker: that is ``tests/sandbox/test_sandbox_zygote.py``'s subject.
"""
from __future__ import annotations

import pytest

from autograder.config import GradingConfig
from autograder.plan import Cell, GradingPlan
from autograder.sandbox.errors import WorkerTimeout
from autograder.session import GradingSession, SubmissionSandbox

PROBE_STATE = """
import random
import torch

def state():
    return {"dtype64": torch.get_default_dtype() == torch.float64, "grad": torch.is_grad_enabled(),
            "torch_draws": torch.rand(3).tolist(), "python_draw": random.random(),
            "left_behind": "secret" in globals()}
"""

CHANGE_EVERYTHING = """
secret = 42
torch.manual_seed(123)
random.seed(5)
torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)

def spin():
    while True:
        pass
"""


def notebook(submission: SubmissionSandbox, config: GradingConfig, *sources: str) -> GradingSession:
    plan = GradingPlan(stem="part_a_discovery",
                       cells=[Cell(f"cell{index}", source, "solution") for index, source in enumerate(sources)])
    session = GradingSession(plan, config, submission=submission)
    session.start()
    assert not session.cell_errors, session.cell_errors
    return session


@pytest.fixture(scope="module")
def config() -> GradingConfig:
    return GradingConfig(device="cpu", timeout_call=3, timeout_hung_call=2)


def test_the_next_notebook_gets_the_same_worker_with_a_fresh_namespace_and_global_state(config):
    with SubmissionSandbox(config) as submission:
        first = notebook(submission, config, PROBE_STATE)
        worker, pid = first.worker, first.worker.pid
        at_start = first.call("cell0", "state", (), {}, timeout=None)
        first.worker.exec_cell(CHANGE_EVERYTHING, cell_id="cell1")
        changed = first.call("cell0", "state", (), {}, timeout=None)
        assert changed["dtype64"] and not changed["grad"] and changed["left_behind"]
        first.close()

        second = notebook(submission, config, PROBE_STATE)
        assert second.worker is worker and second.worker.pid == pid, "no new sandbox for the next notebook"
        assert second.call("cell0", "state", (), {}, timeout=None) == at_start, \
            "names, random generators, default dtype and grad mode are as a new worker has them"
        with pytest.raises(Exception, match="spin"):  # the last notebook's function is gone
            second.worker.call("spin", timeout=3)
        second.close()


def test_a_worker_that_hung_is_not_given_the_next_notebook(config):
    with SubmissionSandbox(config) as submission:
        first = notebook(submission, config, PROBE_STATE + CHANGE_EVERYTHING)
        worker = first.worker
        with pytest.raises(WorkerTimeout):
            first.call("cell0", "spin", (), {}, timeout=None)
        first.close()
        second = notebook(submission, config, PROBE_STATE)
        assert second.worker is not worker, "a new worker after a hang"
        assert not second.call("cell0", "state", (), {}, timeout=None)["left_behind"]
        second.close()


def test_a_notebook_that_broke_the_reset_gets_a_new_worker(config):
    with SubmissionSandbox(config) as submission:
        first = notebook(submission, config, "import sys\ndel sys.modules['numpy']\n" + PROBE_STATE)
        worker = first.worker
        first.close()
        second = notebook(submission, config, PROBE_STATE)
        assert second.worker is not worker and second.worker.alive
        assert "dtype64" in second.call("cell0", "state", (), {}, timeout=None)
        second.close()
