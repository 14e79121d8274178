"""The forbidden-shortcut rules: every rule belongs to a graded item, every watched
operator and library function exists under the name the worker looks for, the static
check tells a shortcut from a student's own function of the same name, and the
grading session turns what the worker saw into a forbidden item.

What the worker sees, route by route, is tests/sandbox/test_behavioural_forbidden.py."""
from __future__ import annotations

import inspect
import pkgutil
from pathlib import Path

import pytest
import torch

from autograder import notebook
from autograder.config import GradingConfig
from autograder.forbidden import RULES, TAMPERED, static_violations
from autograder.plan import Cell, GradingPlan
from autograder.sandbox import worker as worker_module
from autograder.sandbox.watch import _entry_point_table
from autograder.session import GradingSession
from autograder.suite import Forbidden


def _solution_ids(repo_root: Path) -> set[str]:
    ids = set()
    for path in sorted((repo_root / "solutions" / "week6").glob("*.ipynb")):
        ids.update(cell.metadata["nbgrader"]["grade_id"] for cell in notebook.read_notebook(path).cells
                   if notebook.is_solution_code(cell))
    return ids


def test_every_rule_names_a_solution_cell(repo_root):
    unknown = sorted(set(RULES) - _solution_ids(repo_root))
    assert not unknown, f"rules for items that no notebook has: {unknown}"


@pytest.mark.parametrize("entry_point", sorted({e for rule in RULES.values() for e in rule.entry_points}))
def test_every_entry_point_is_the_code_the_worker_looks_for(entry_point):
    # An entry point whose name or file does not match its code would silently never trip.
    import transformers  # noqa: F401

    function = inspect.unwrap(pkgutil.resolve_name(entry_point))  # generate is wrapped in torch.no_grad
    code = function.__code__
    [(qualname, places)] = _entry_point_table([entry_point]).items()
    assert code.co_qualname == qualname, f"{entry_point} is {code.co_qualname} in the library"
    assert any(code.co_filename.endswith(suffix) for suffix, _ in places), code.co_filename


@pytest.mark.parametrize("prefix", sorted({op for rule in RULES.values() for op in rule.aten_ops}))
def test_every_operator_prefix_names_an_operator(prefix):
    namespace, _, name = prefix.partition(".")
    assert [op for op in torch._C._dispatch_get_all_op_names() if op.startswith(f"{namespace}::{name}")], prefix


def test_only_items_whose_calls_run_nothing_but_student_code_watch_operators():
    # Elsewhere the grader's own models run softmax and attention during the call.
    # The assembled BERT's items take tensors and dicts of tensors only: no model of the grader's runs.
    assert sorted(item for item, rule in RULES.items() if rule.aten_ops) == [
        "bert_encoder", "encoder_layer", "multi_head_self_attention", "scaled_dot_product_attention", "softmax"]


@pytest.mark.parametrize("grade_id, shortcut", [
    ("softmax", "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"),
    ("softmax", "def softmax(x, dim=-1):\n    return getattr(torch, 'softmax')(x, dim)\n"),
    ("mask_tokens", "from transformers import DataCollatorForLanguageModeling as C\n"),
    ("beam_search", "def beam_search(model, ids, **kw):\n    return model.generate(ids)\n"),
    ("top_k_mask_predictions", "def top_k_mask_predictions(l, i, m, k=5):\n"
                               "    from transformers import pipeline\n    return pipeline('fill-mask')\n"),
    ("top_k_mask_predictions", "def top_k_mask_predictions(l, i, m, k=5):\n"
                               "    import transformers\n    return transformers.FillMaskPipeline\n"),
])
def test_static_check_flags_shortcuts(grade_id, shortcut):
    assert static_violations(grade_id, shortcut)


@pytest.mark.parametrize("grade_id, own", [
    # The student's own function of the same name, even recursive, is not a shortcut.
    ("softmax", "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                "    return e / e.sum(dim, keepdim=True)\n"),
    ("top_k_mask_predictions", "def top_k_mask_predictions(logits, ids, mask_id, k=5):\n"
                               "    probs = torch.softmax(logits[ids == mask_id].float(), -1)\n"
                               "    return probs.topk(k).values, probs.topk(k).indices\n"),
])
def test_static_check_leaves_own_code_alone(grade_id, own):
    assert static_violations(grade_id, own) == []


class ReportingWorker:
    """Stands in for ``Worker``: answers every guarded probe with ``REPLY``."""

    sandbox, forked, REPLY = "degraded", True, {}

    def __init__(self, **kwargs):
        self.sent: list[tuple[str, dict]] = []

    def exec_cell(self, source, *, cell_id, timeout):
        from autograder.sandbox.worker import CellResult

        return CellResult(cell_id, True)

    def probe(self, name, params, *, timeout):
        self.sent.append((name, params))
        return dict(self.REPLY)

    def close(self):
        pass


@pytest.mark.parametrize("reply, expected", [
    ({"value": 1, "tripped": [], "tampered": []}, None),
    ({"value": None, "tripped": ["aten._softmax"], "tampered": []},
     "'softmax' uses aten._softmax, which does the work"),
    ({"value": 1, "tripped": [], "tampered": ["the profile hook was replaced"]},
     f"{TAMPERED} \\(the profile hook was replaced\\)"),
    ({"value": None, "tripped": ["aten._softmax"], "tampered": ["x"]}, TAMPERED),
])
def test_the_session_sends_the_rule_and_turns_what_tripped_into_forbidden(monkeypatch, reply, expected):
    monkeypatch.setattr(worker_module, "Worker", ReportingWorker)
    monkeypatch.setattr(ReportingWorker, "REPLY", reply)
    session = GradingSession(GradingPlan(stem="part_b_bert_gpt", cells=[Cell("softmax", "", "solution")]),
                             GradingConfig(timeout_call=5))
    session.start()
    if expected is None:
        assert session.call("softmax", "softmax", (torch.ones(2),), {}, timeout=None) == 1
    else:
        with pytest.raises(Forbidden, match=expected):
            session.call("softmax", "softmax", (torch.ones(2),), {}, timeout=None)
    [(probe, params)] = session.worker.sent
    assert probe == "guarded_call" and params["name"] == "softmax"
    assert params["aten_ops"] == list(RULES["softmax"].aten_ops) and params["entry_points"] == []
