"""One configuration object for grading (``autograder.config.GradingConfig``): built once by
the CLI from its options and by nbgrader from its traitlets, passed down to the runner, the
grading session and the sandboxed worker. Nothing here grades a notebook."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import cli
from autograder.config import SETTINGS, GradingConfig
from autograder.errors import ConfigurationError
from autograder.nbgrader.plugin import SandboxedGrading
from autograder.paths import REPO
from autograder.plan import Cell, GradingPlan
from autograder.sandbox import isolation
from autograder.sandbox import worker as worker_module
from autograder.sandbox.errors import WorkerTimeout
from autograder.sandbox.limits import GiB, MiB, ResourceLimits
from autograder.session import GradingSession
from tests.grading.stand_in_worker import StandInWorker

TIMEOUTS = ("timeout_notebook", "timeout_cell", "timeout_call", "timeout_hung_call", "timeout_worker_start")
GPU_NODES = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]


def parse(*args: str):
    return cli.build_parser().parse_args(["grade", *args])


def test_defaults_are_the_values_the_grader_was_measured_with():
    config = GradingConfig()
    assert config.device == "cpu"
    assert (config.timeout_notebook, config.timeout_cell, config.timeout_call, config.timeout_hung_call,
            config.timeout_worker_start, config.max_restarts) == (900, 30, 20, 5, 60, 6)
    assert (config.tree_memory_bytes, config.tree_processes, config.tree_cpu_seconds, config.scratch_bytes) == (
        6 * GiB, 256, 900, 512 * MiB)
    assert config.hidden_paths == (str(REPO),) and config.out is None
    # The tree limits the worker got before the config existed: ResourceLimits' own defaults.
    assert config.resource_limits() == ResourceLimits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timeout_call = 1  # type: ignore[misc]


def test_every_field_says_why_its_default_is_what_it_is():
    source = (REPO / "autograder" / "config.py").read_text().splitlines()
    for field in dataclasses.fields(GradingConfig):
        line = next(i for i, text in enumerate(source) if text.startswith(f"    {field.name}: "))
        assert source[line - 1].strip().startswith("# "), f"{field.name} has no comment above it"


def test_cli_options_reach_the_config(tmp_path):
    submitted, out = tmp_path / "submitted", tmp_path / "grades"
    args = parse(str(submitted), "--out", str(out), "--device", "cpu", "--timeout-notebook", "600",
                 "--timeout-cell", "45", "--timeout-call", "7.5", "--timeout-hung-call", "2",
                 "--timeout-worker-start", "90")
    config = cli.grading_config(args)
    assert config.device == "cpu" and config.out == out
    assert [getattr(config, name) for name in TIMEOUTS] == [600, 45, 7.5, 2, 90]
    # The repository, every submission path given and the output folder are hidden from the sandbox.
    assert config.hidden_paths == (str(REPO), str(submitted.resolve()), str(out.resolve()))


def test_cli_defaults_are_the_config_defaults():
    config = cli.grading_config(parse("--device", "cpu"))
    assert dataclasses.replace(config, hidden_paths=GradingConfig.hidden_paths, out=None) == GradingConfig()


def test_auto_resolves_once_to_a_real_device():
    import torch

    config = cli.grading_config(parse())
    assert config.device == ("cuda" if torch.cuda.is_available() else "cpu")


def test_nbgrader_traitlets_reach_the_config():
    grading_step = SandboxedGrading(device="cpu", timeout=600, timeout_cell=45, timeout_call=7.5,
                                    timeout_hung_call=2, timeout_worker_start=90)
    config = grading_step.grading_config()
    assert config.device == "cpu"
    assert [getattr(config, name) for name in TIMEOUTS] == [600, 45, 7.5, 2, 90]
    assert grading_step.grading_config() is config, "built once"
    # Per notebook, the course root and the notebook's scratch copy are hidden too.
    assert config.hiding("/course", "/tmp/x").hidden_paths == (str(REPO), "/course", "/tmp/x")
    assert SandboxedGrading(device="cpu").grading_config() == GradingConfig()


def test_every_setting_is_an_option_of_grade_and_a_traitlet_of_nbgrader_with_its_fields_default():
    from traitlets.config import Config

    traits = SandboxedGrading.class_traits(config=True)
    defaults = vars(parse())
    for setting in SETTINGS:
        default = getattr(GradingConfig, setting.field)
        assert defaults[setting.field] == default, f"{setting.option}: the CLI's default differs"
        assert traits[setting.trait].default_value == default, f"{setting.trait}: nbgrader's default differs"
        changed = False if type(default) is bool else default + 1.5
        c = Config()
        c.SandboxedGrading[setting.trait] = changed
        assert getattr(SandboxedGrading(config=c, device="cpu").grading_config(), setting.field) == changed
        given = [setting.option] if type(default) is bool else [setting.option, str(changed)]
        assert getattr(cli.grading_config(parse("--device", "cpu", *given)), setting.field) == changed


@pytest.mark.parametrize("fields, wrong", [
    ({"timeout_call": -1.0}, "timeout_call"),
    ({"timeout_notebook": 0}, "timeout_notebook"),
    ({"timeout_cell": float("nan")}, "timeout_cell"),
    ({"timeout_hung_call": "5"}, "timeout_hung_call"),
    ({"max_restarts": -1}, "max_restarts"),
    ({"tree_processes": 0}, "tree_processes"),
    ({"tree_memory_bytes": 1.5}, "tree_memory_bytes"),
    ({"device": "auto"}, "device"),
    ({"device": "tpu"}, "device"),
])
def test_a_bad_value_is_a_configuration_error(fields, wrong):
    with pytest.raises(ConfigurationError, match=wrong):
        GradingConfig(**fields)


def test_an_unknown_device_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="tpu"):
        GradingConfig.build(device="tpu")
    with pytest.raises(ConfigurationError, match="SandboxedGrading.*timeout_call"):
        SandboxedGrading(device="cpu", timeout_call=-1).grading_config()
    with pytest.raises(ConfigurationError, match="device"):
        SandboxedGrading(device="tpu").grading_config()


@pytest.mark.parametrize("args", [
    ["--timeout-call", "-1"],
    ["--timeout-notebook=0"],
    ["--timeout-cell", "soon"],
    ["--device", "tpu"],
])
def test_the_cli_exits_3_on_a_bad_value_and_grades_nothing(tmp_path, args):
    out = tmp_path / "grades"
    result = subprocess.run([sys.executable, "-m", "autograder", "grade", "--out", str(out), *args],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == cli.EXIT_CONFIGURATION, result.stderr
    assert "error" in result.stderr and "Grading" not in result.stdout
    assert not out.exists()


class RecordingWorker(StandInWorker):
    """Records the timeouts of the cells and calls the session sends; hangs on a call when told."""

    sandbox = "bwrap"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.timeouts: list[tuple[str, float]] = []
        self.hang = False

    def exec_cell(self, source, *, cell_id, timeout):
        self.timeouts.append(("cell", timeout))
        return super().exec_cell(source, cell_id=cell_id, timeout=timeout)

    def call(self, name, *args, timeout, **kwargs):
        self.timeouts.append(("call", timeout))
        if self.hang:
            raise WorkerTimeout("hung")
        return super().call(name, *args, timeout=timeout, **kwargs)


def test_the_session_takes_its_timeouts_limits_and_paths_from_the_config(monkeypatch):
    monkeypatch.setattr(worker_module, "Worker", RecordingWorker)
    config = GradingConfig(timeout_cell=11, timeout_call=7, timeout_hung_call=3, timeout_worker_start=99,
                           max_restarts=1, tree_processes=64, hidden_paths=("/a", "/b"))
    plan = GradingPlan(stem="part_a_discovery", cells=[Cell("my_cell", "x = 1", "solution")])
    session = GradingSession(plan, config)
    session.start()
    worker = session.worker
    assert worker.kwargs["hidden_paths"] == ("/a", "/b")
    assert worker.kwargs["start_timeout"] == 99 and worker.kwargs["gpu"] is False
    assert worker.kwargs["limits"] == dataclasses.replace(ResourceLimits(), tree_processes=64)
    session.call("my_cell", "f", (), {}, timeout=None)
    session.call("my_cell", "f", (), {}, timeout=15)  # a test's own timeout wins
    worker.hang = True
    with pytest.raises(WorkerTimeout):
        session.call("my_cell", "f", (), {}, timeout=None)
    worker.hang = False
    session.call("my_cell", "f", (), {}, timeout=15)  # hung before: the hung-call timeout
    assert worker.timeouts == [("cell", 11), ("call", 7), ("call", 15), ("call", 7), ("call", 3)]
    worker.hang = True
    with pytest.raises(WorkerTimeout):
        session.call("my_cell", "f", (), {}, timeout=None)
    assert session.fatal and "too many times" in session.fatal, "max_restarts comes from the config"


def bwrap_argv_of_a_session(monkeypatch, tmp_path, config: GradingConfig) -> tuple[list[str], worker_module.Worker]:
    """The bwrap command line the grading session's real ``Worker`` would start, on a
    machine that has NVIDIA device nodes (simulated) and a working bubblewrap."""
    monkeypatch.setattr(isolation, "gpu_device_nodes", lambda: GPU_NODES)
    monkeypatch.setattr(worker_module, "gpu_device_nodes", lambda: GPU_NODES)
    monkeypatch.setattr(worker_module, "_choose_sandbox", lambda isolation_kind: "bwrap")
    monkeypatch.setattr(worker_module, "bwrap_support",
                        lambda: isolation.BwrapSupport("/usr/bin/bwrap", True, True, "ok", False))
    monkeypatch.setattr(worker_module.Worker, "_start", lambda self: None)
    session = GradingSession(GradingPlan(stem="part_a_discovery", cells=[]), config)
    session.start()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv, _, _ = session.worker._command(str(scratch), "tag", None)
    return argv, session.worker


def test_device_cpu_binds_no_gpu_node_even_where_the_machine_has_them(monkeypatch, tmp_path):
    submitted, out = tmp_path / "submitted", tmp_path / "grades"
    submitted.mkdir()
    out.mkdir()
    config = cli.grading_config(parse(str(submitted), "--out", str(out), "--device", "cpu"))
    argv, worker = bwrap_argv_of_a_session(monkeypatch, tmp_path, config)
    assert not [arg for arg in argv if arg.startswith("/dev/nvidia")]
    assert "--dev-bind" not in argv
    # The same config hides the submissions and the output folder from the worker.
    assert {str(submitted.resolve()), str(out.resolve()), str(REPO)} <= set(worker.hidden_paths)


def test_device_cuda_binds_the_gpu_nodes(monkeypatch, tmp_path):
    argv, _ = bwrap_argv_of_a_session(monkeypatch, tmp_path, GradingConfig(device="cuda"))
    for node in GPU_NODES:
        assert argv[argv.index(node) - 1: argv.index(node) + 1] == ["--dev-bind", node]


def test_the_runner_passes_the_config_to_the_grading_job(monkeypatch, tmp_path):
    from autograder import runner

    seen = {}

    def fake_run_forked(target, args, *, timeout, log_path, on_event=None):
        seen.update(target=target, args=args, timeout=timeout)
        return None

    monkeypatch.setattr(runner, "run_forked", fake_run_forked)
    config = GradingConfig(timeout_notebook=42)
    report = runner.grade_in_subprocess(Path("x.ipynb"), student="eve", config=config)
    assert seen["timeout"] == 42 and config in seen["args"]
    assert "did not finish within 42 s" in report.warnings[0] and report.device == "cpu"
