"""The course's drivers (``autograder.drivers``): safe to expose, complete in what they declare.

* The package is bound into the sandbox, so it must not pull in a reference
  implementation or a hidden suite.
* Each fixture declares the slow modules it needs; building it after importing
  them imports no further model code (else the first call that builds it would pay
  for that import inside its own time limit).
* The session imports a fixture's modules once per worker, before the first call
  that builds it, under the start-up timeout.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from autograder import drivers
from autograder.config import GradingConfig
from autograder.drivers import models  # noqa: F401  (registers the fixtures)
from autograder.paths import REPO
from autograder.plan import Cell, GradingPlan
from autograder.sandbox import worker as worker_module
from autograder.sandbox.fixtures import available_fixtures, fixture, fixture_imports, fixture_names
from autograder.session import GradingSession
from tests.grading.stand_in_worker import StandInWorker

# A fixture's parameters where its defaults do not build it.
PARAMS = {"bigram_lm": {"log_probs": torch.zeros(4, 4).log_softmax(-1).tolist()}}


def test_the_driver_modules_import_no_reference_and_no_hidden_suite():
    probe = ("import sys, json\n"
             f"for name in {list(drivers.WORKER_MODULES)!r}:\n"
             "    __import__(name)\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('autograder.'))))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert not [m for m in loaded if m.startswith(("autograder.reference", "autograder.hidden"))], loaded
    assert {m.split(".")[1] for m in loaded} <= {"drivers", "sandbox"}, loaded


@pytest.mark.parametrize("name", available_fixtures())
def test_each_fixture_declares_the_model_code_it_imports(name):
    probe = ("import importlib, json, sys, torch\n"
             "from autograder.drivers import models\n"
             "from autograder.sandbox.fixtures import build_fixture, fixture, fixture_imports\n"
             f"name, params = {name!r}, json.loads({json.dumps(json.dumps(PARAMS.get(name, {})))})\n"
             "params = {k: torch.tensor(v) if isinstance(v, list) else v for k, v in params.items()}\n"
             "for module in fixture_imports([name]):\n"
             "    importlib.import_module(module)\n"
             "before = set(sys.modules)\n"
             "build_fixture(fixture(name, **params))\n"
             "print(json.dumps(sorted(m for m in set(sys.modules) - before\n"
             "                        if m.startswith(('transformers.models.', 'transformers.generation')))))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == [], (
        f"building {name} imported model code it does not declare: add it to its register_fixture(imports=...)")


def test_fixture_names_are_found_at_any_depth():
    payload = ([1, fixture("decoder_lm", seed=0)], {"x": {"model": fixture("bert_mlm")}, "n": 3})
    assert fixture_names(payload) == {"decoder_lm", "bert_mlm"}
    assert fixture_names({"args": [1, 2.0, "decoder_lm"]}) == set()
    assert fixture_imports(["decoder_lm"]) == ["transformers.models.llama.modeling_llama"]


class WarmingWorker(StandInWorker):
    """Records the probes and calls the session sends."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.requests: list[tuple[str, object, float]] = []

    def probe(self, name, params, *, timeout):
        self.requests.append(("probe", name, timeout))
        return []

    def call(self, name, *args, timeout, **kwargs):
        self.requests.append(("call", name, timeout))
        return super().call(name, *args, timeout=timeout, **kwargs)


def test_the_session_imports_a_fixtures_modules_once_per_worker_before_the_call(monkeypatch):
    monkeypatch.setattr(worker_module, "Worker", WarmingWorker)
    config = GradingConfig(timeout_call=7, timeout_worker_start=99)
    # An item the forbidden-shortcut watch does not cover, so its calls reach the worker as calls.
    session = GradingSession(GradingPlan(stem="part_b_bert_gpt", cells=[Cell("my_cell", "", "solution")]), config)
    session.start()
    worker = session.worker
    assert str(drivers.PACKAGE_DIR) in worker.kwargs["exposed_paths"]
    assert list(worker.kwargs["preload"]) == list(drivers.WORKER_MODULES)
    assert not [p for p in worker.kwargs["exposed_paths"] if "reference" in p or "hidden" in p]

    session.call("my_cell", "decode", (torch.ones(2),), {}, timeout=None)
    model = fixture("decoder_lm", seed=0)
    session.call("my_cell", "decode", (model, torch.ones(2)), {}, timeout=None)
    session.call("my_cell", "decode", (model,), {"n": 1}, timeout=None)
    assert worker.requests == [("call", "decode", 7), ("probe", "import_fixture_modules", 99),
                               ("call", "decode", 7), ("call", "decode", 7)]
    session._restart()  # a fresh worker process has imported nothing yet
    worker.requests.clear()
    session.call("my_cell", "decode", (model,), {}, timeout=None)
    assert worker.requests == [("probe", "import_fixture_modules", 99), ("call", "decode", 7)]
    session._restart()
    worker.forked, worker.requests = True, []  # forked from a zygote, which preloaded them all
    session.call("my_cell", "decode", (model,), {}, timeout=None)
    assert worker.requests == [("call", "decode", 7)]
