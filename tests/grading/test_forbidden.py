"""The forbidden-shortcut rules: every rule belongs to a graded item, every tripwire
points at a real library callable, and the static check tells a shortcut from a
student's own function of the same name."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder import notebook
from autograder.forbidden import RULES, static_violations
from autograder.sandbox.tripwires import _resolve


def _solution_ids(repo_root: Path) -> set[str]:
    ids = set()
    for path in sorted((repo_root / "solutions" / "week6").glob("*.ipynb")):
        ids.update(cell.metadata["nbgrader"]["grade_id"] for cell in notebook.read_notebook(path).cells
                   if notebook.is_solution_code(cell))
    return ids


def test_every_rule_names_a_solution_cell(repo_root):
    unknown = sorted(set(RULES) - _solution_ids(repo_root))
    assert not unknown, f"rules for items that no notebook has: {unknown}"


@pytest.mark.parametrize("dotted", sorted({t for rule in RULES.values() for t in rule.tripwires}))
def test_every_tripwire_resolves(dotted):
    # A tripwire that names nothing would silently never fire.
    import torch  # noqa: F401
    import transformers  # noqa: F401

    found = _resolve(dotted)
    assert found is not None, f"{dotted} does not resolve to an attribute"
    assert callable(found[2]), f"{dotted} is not callable"


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
