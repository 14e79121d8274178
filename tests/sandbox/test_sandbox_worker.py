"""Requests and replies, in both sandbox kinds, on one shared worker per kind."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from autograder.sandbox import protocol
from autograder.sandbox.errors import RequestError, StudentError, ValueRejected, WorkerCrashed
from autograder.sandbox.fixtures import FIXTURE_KEY, build_fixture, fixture, seeded
from tests.sandbox import sample_drivers  # noqa: F401  (registers the fixtures and probes of these tests)
from autograder.sandbox.isolation import REPO_ROOT, scrubbed_env
from autograder.sandbox.worker import OUTPUT_TAIL_BYTES, TAG_VARIABLE, Worker
from autograder.sandbox.protocol import expect_tensor


def test_a_cell_defines_a_function_and_a_call_returns_its_tensor(worker):
    assert worker.exec_cell("import torch\ndef double(x):\n    return 2 * x\n").ok
    out = worker.call("double", torch.arange(4.0))
    assert type(out) is torch.Tensor
    assert torch.equal(out, torch.tensor([0.0, 2.0, 4.0, 6.0]))


def test_keyword_arguments_and_nested_values_cross_both_ways(worker):
    worker.exec_cell(
        "def summary(xs, *, scale=1):\n"
        "    return {'n': len(xs), 'total': sum(float(x.sum()) for x in xs) * scale,\n"
        "            'shapes': [x.shape for x in xs]}\n"
    ).raise_for_error()
    out = worker.call("summary", [torch.ones(2), torch.ones(3)], scale=2)
    assert out == {"n": 2, "total": 10.0, "shapes": [(2,), (3,)]}


def test_a_failing_cell_is_reported_and_later_cells_still_run(worker):
    failed = worker.exec_cell("partial = 1\nraise ValueError('bad input')\nnever = 2\n", cell_id="broken")
    assert not failed.ok
    assert (failed.error.type_name, failed.error.message) == ("ValueError", "bad input")
    assert 'File "<cell broken>", line 2' in failed.error.traceback
    assert "worker.py" not in failed.error.traceback  # the student sees only their frames
    later = worker.exec_cell("def after():\n    return partial + 1\n")
    assert later.ok and worker.call("after") == 2
    with pytest.raises(StudentError, match="does not define 'never'"):
        worker.call("never")


def test_errors_raised_deep_in_student_functions_keep_their_student_frames(worker):
    worker.exec_cell("def inner(x):\n    return x @ x\ndef outer(x):\n    return inner(x)\n",
                     cell_id="shapes").raise_for_error()
    with pytest.raises(StudentError) as caught:
        worker.call("outer", torch.ones(2, 3))
    error = caught.value
    assert error.type_name == "RuntimeError" and "cannot be multiplied" in error.message
    assert "in outer" in error.traceback and "in inner" in error.traceback and "torch/" not in error.traceback


def test_syntax_errors_are_reported_as_student_errors(worker):
    result = worker.exec_cell("def broken(:\n    pass\n", cell_id="syntax")
    assert result.error.type_name == "SyntaxError" and "<cell syntax>" in result.error.traceback


@pytest.mark.parametrize("source, kind", [
    ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    ("import sys\nsys.exit(3)", "SystemExit"),
    ("exit()", "SystemExit"),
])
def test_interrupts_and_exits_in_student_code_do_not_end_the_worker(worker, source, kind):
    assert worker.exec_cell(source).error.type_name == kind
    worker.exec_cell(f"def bail():\n    {source.replace(chr(10), '; ')}\n").raise_for_error()
    with pytest.raises(StudentError, match=kind):
        worker.call("bail")
    assert worker.ping()["pid"]


def test_printing_does_not_corrupt_the_channel(worker):
    worker.exec_cell(
        "import os, subprocess, sys\n"
        "def noisy(x):\n"
        "    print('AGSB' * 100)\n"
        "    sys.stdout.write('\\x00' * 64)\n"
        "    sys.stdout.flush()\n"
        "    os.write(1, b'AGSB\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05hello')\n"
        "    subprocess.run(['echo', 'from a child process'], check=True)\n"
        "    print('on stderr', file=sys.stderr)\n"
        "    return x + 1\n"
    ).raise_for_error()
    assert torch.equal(worker.call("noisy", torch.zeros(2)), torch.ones(2))
    assert worker.ping()["pid"]
    assert "from a child process" in worker.output()


def test_a_flood_of_output_neither_blocks_the_worker_nor_fills_the_grader(worker):
    worker.exec_cell(
        "def flood():\n"
        "    for i in range(100_000):\n"
        "        print('line', i, 'x' * 80)\n"
        "    return 'done'\n"
    ).raise_for_error()
    assert worker.call("flood", timeout=60) == "done"
    # Output and replies travel on different pipes: the last lines may still be on their way.
    deadline = time.monotonic() + 5
    while "line 99999" not in worker.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "line 99999" in worker.output() and len(worker.output()) <= OUTPUT_TAIL_BYTES


def test_the_environment_is_scrubbed(worker):
    worker.exec_cell("import os\ndef environment():\n    return dict(os.environ)\n").raise_for_error()
    env = worker.call("environment")
    # PWD is set by bwrap to the sandbox's working directory, not inherited.
    allowed = set(scrubbed_env(home="/tmp", threads=1)) | {TAG_VARIABLE, "CUDA_VISIBLE_DEVICES", "PWD"}
    assert set(env) <= allowed, f"leaked from the grader: {sorted(set(env) - allowed)}"
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == env["HF_DATASETS_OFFLINE"] == "1"
    assert env["OMP_NUM_THREADS"] == "1" and env["PYTHONPATH"] == str(REPO_ROOT)


def test_the_course_secret_does_not_reach_student_code(monkeypatch, sandbox):
    """The secret that draws each student's hidden inputs (autograder/draws.py) is in the
    grader's environment; a worker started from it must not see it."""
    secret = "a course secret that must stay with the grader"
    monkeypatch.setenv("WEEK6_GRADING_SECRET", secret)
    with Worker(isolation=sandbox, timeout=30) as fresh:
        fresh.exec_cell("import os\ndef environment():\n    return dict(os.environ)\n").raise_for_error()
        env = fresh.call("environment")
    assert "WEEK6_GRADING_SECRET" not in env and secret not in env.values()


def test_input_reads_nothing_from_the_channel(worker):
    worker.exec_cell("def ask():\n    return input()\n").raise_for_error()
    with pytest.raises(StudentError, match="EOFError"):
        worker.call("ask")


REJECTED = {
    "tensor_subclass": (
        "class Lying(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return True\n"
        "def tensor_subclass():\n"
        "    return torch.zeros(2).as_subclass(Lying)\n", "tensor subclass"),
    "custom_object": (
        "class Anything:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "def custom_object():\n"
        "    return Anything()\n", "Anything"),
    "spoofed_class": (
        "class Fake:\n"
        "    __class__ = property(lambda self: torch.Tensor)\n"
        "def spoofed_class():\n"
        "    return Fake()\n", "Fake"),
    "a_lambda": ("def a_lambda():\n    return lambda x: x\n", "function"),
    "a_module": ("import math\ndef a_module():\n    return math\n", "Python modules"),
    "nn_module": ("def nn_module():\n    return torch.nn.Linear(2, 2)\n", "Linear"),
    "parameter": ("def parameter():\n    return torch.nn.Parameter(torch.ones(2))\n", "detach"),
    "deep_inside": ("def deep_inside():\n    return {'ok': torch.zeros(1), 'bad': [1, object()]}\n",
                    r"return value\['bad'\]\[1\]"),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_values_that_may_not_cross_are_rejected_with_a_clear_message(worker, name):
    source, fragment = REJECTED[name]
    worker.exec_cell("import torch\n" + source).raise_for_error()
    with pytest.raises(ValueRejected, match=fragment) as caught:
        worker.call(name)
    assert "cannot cross the sandbox boundary" in caught.value.message
    assert worker.ping()["pid"]  # the worker lives on


def test_grader_side_mistakes_are_request_errors(worker):
    with pytest.raises(RequestError, match="unknown probe"):
        worker.probe("no_such_probe")
    worker.exec_cell("def identity(x):\n    return x\n").raise_for_error()
    with pytest.raises(RequestError, match="unknown fixture"):
        worker.call("identity", {FIXTURE_KEY: "no_such_fixture"})
    with pytest.raises(RequestError, match="unknown fixture"):
        fixture("no_such_fixture")


def test_a_fixture_reference_builds_the_same_seeded_model_in_worker_and_grader(worker):
    worker.exec_cell(
        "import torch\n"
        "def logits(model, ids):\n"
        "    with torch.no_grad():\n"
        "        return model(input_ids=ids).logits\n"
    ).raise_for_error()
    ids = torch.tensor([[1, 5, 9, 3]])
    llama = fixture("tiny_llama", seed=3, vocab_size=64)
    bert = fixture("tiny_bert_classifier", seed=3, num_labels=3)
    remote_llama = expect_tensor(worker.call("logits", llama, ids), dtype=torch.float32, shape=(1, 4, 64))
    remote_bert = expect_tensor(worker.call("logits", bert, ids), dtype=torch.float32, shape=(1, 3))
    with torch.no_grad():
        torch.testing.assert_close(remote_llama, build_fixture(llama)(input_ids=ids).logits, rtol=0, atol=1e-6)
        torch.testing.assert_close(remote_bert, build_fixture(bert)(input_ids=ids).logits, rtol=0, atol=1e-6)
    # The seed matters: a different one gives a different model.
    reseeded = worker.call("logits", fixture("tiny_llama", seed=4, vocab_size=64), ids)
    assert not torch.allclose(reseeded, remote_llama)


LORA = """
import math
import torch
from torch import nn

class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.scaling = alpha / r
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling
"""


def test_the_lora_probe_reports_a_student_class(worker):
    worker.exec_cell(LORA, cell_id="LoRALinear").raise_for_error()
    x = torch.randn(3, 4)
    report = worker.probe("lora_linear", {"in_features": 4, "out_features": 5, "r": 2, "alpha": 4.0, "x": x})
    assert report["requires_grad"] == {"base.weight": False, "base.bias": False, "lora_A": True, "lora_B": True}
    assert report["has_grad"] == {"base.weight": False, "base.bias": False, "lora_A": True, "lora_B": True}
    assert report["trainable"] == 2 * 4 + 5 * 2
    with seeded(0):
        base = nn.Linear(4, 5)
    torch.testing.assert_close(report["base_weight"], base.weight.detach())
    torch.testing.assert_close(report["output"], base(x).detach())  # B starts at zero
    assert torch.count_nonzero(report["parameters"]["lora_B"]) == 0


def test_the_lora_probe_names_a_missing_class(worker):
    with pytest.raises(StudentError, match="does not define 'MissingLoRA'"):
        worker.probe("lora_linear", {"class_name": "MissingLoRA", "in_features": 2, "out_features": 2,
                                     "r": 1, "alpha": 1.0, "x": torch.ones(1, 2)})


def test_preloaded_modules_register_probes(worker):
    worker.exec_cell("alpha = 1\ndef beta():\n    pass\n").raise_for_error()
    names = worker.probe("namespace_names")  # registered by tests/sandbox/sample_drivers.py
    assert {"alpha", "beta"} <= set(names)


def test_a_preload_that_fails_to_import_fails_the_start():
    with pytest.raises(WorkerCrashed, match="No module named"):
        Worker(isolation="degraded", preload=["tests.sandbox.no_such_module"])


def test_the_worker_answers_raw_frames_and_shuts_down_on_request():
    # The entry point without the launcher: frames in, frames out, exit status 0.
    worker = subprocess.Popen([sys.executable, "-m", "autograder.sandbox.worker_main"], cwd=REPO_ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        for request in (["not", "a", "dict"], {"op": "ping", "id": 1}, {"op": "shutdown", "id": 2}):
            protocol.write_frame(worker.stdin, protocol.encode(request))
        replies = [protocol.decode(protocol.read_frame(worker.stdout)) for _ in range(3)]
        assert worker.wait(timeout=30) == 0
    finally:
        worker.kill()
    assert replies[0]["error"]["kind"] == "request"
    assert replies[1]["ok"] and replies[1]["id"] == 1 and replies[1]["value"]["pid"] == worker.pid
    assert replies[2] == {"id": 2, "ok": True, "value": None}
