"""The device chosen for grading decides whether student code sees a GPU."""
from __future__ import annotations

import pytest

from autograder import session as grading_session
from autograder.config import GradingConfig
from autograder.plan import GradingPlan
from autograder.sandbox import isolation


@pytest.mark.parametrize("device, gpu", [("cpu", False), ("cuda", True)])
def test_the_worker_gets_gpu_nodes_only_when_grading_on_cuda(monkeypatch, device, gpu):
    seen = {}

    class FakeWorker:
        sandbox = "bwrap"

        def __init__(self, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr("autograder.sandbox.worker.Worker", FakeWorker)
    plan = GradingPlan(stem="part_a_discovery", cells=[])
    session = grading_session.GradingSession(plan, GradingConfig(device=device))
    session.start()
    assert seen["gpu"] is gpu


def test_no_device_node_is_bound_without_gpu_even_where_they_exist(monkeypatch):
    monkeypatch.setattr(isolation, "gpu_device_nodes", lambda: ["/dev/nvidia0", "/dev/nvidiactl"])
    common = dict(env={}, placeholder_file="/dev/null")
    without = isolation.bwrap_argv(["python"], gpu=False, **common)
    with_gpu = isolation.bwrap_argv(["python"], gpu=True, **common)
    assert "--dev-bind" not in without
    assert with_gpu[with_gpu.index("--dev-bind"):][:3] == ["--dev-bind", "/dev/nvidia0", "/dev/nvidia0"]
