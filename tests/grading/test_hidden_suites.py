"""The hidden suites, graded in this process with stand-in students.

* The reference implementations must earn every point, and the points of each
  grade cell must add up to the cell's points.
* Deliberately wrong solutions (``variants.MUTANTS``) must lose points on the
  cell they belong to, and only there.
* Correct solutions written differently from the reference
  (``variants.ALTERNATIVES``) must earn every point.
* A function that still raises NotImplementedError scores zero, with the status
  "error" and a message that says it is not implemented.

Suites run through ``autograder.pytest_plugin.run_hidden_suite`` with an
``InProcessSession`` (no sandbox, values still cross the wire format), on the CPU.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
from autograder.course import load_course  # noqa: E402
from autograder.reference import arithmetic  # noqa: E402
from autograder.drivers import models, probes  # noqa: E402,F401  (the fixtures and probes of the suites)
from tests.grading.inprocess import (  # noqa: E402
    GRADER_BUG,
    failures,
    grade_in_process,
    grading_environment,
    points_per_cell,
    reference_namespace,
)
from tests.grading.variants import ALTERNATIVES, MUTANTS, cell_of  # noqa: E402

# The notebooks whose hidden suites are exercised here (exercises 1-4: test_exercise_suites.py),
# and the points of their auto-graded cells, from the course model.
STEMS = ["part_b_bert_gpt", "part_b_finetuning", "exercise5_span_corruption", "part_a_discovery"]
CELL_POINTS: dict[str, dict[str, float]] = {stem: load_course().notebook(stem).test_points for stem in STEMS}


# The graded functions and classes of each notebook (answer constants excluded).
FUNCTIONS = {
    "part_b_bert_gpt": ["mask_tokens", "mlm_signal", "softmax", "causal_mask", "scaled_dot_product_attention",
                        "attention_connections", "clm_loss", "mlm_loss", "sample_next_token", "greedy_decode",
                        "beam_search"],
    "part_b_finetuning": ["linear_warmup_decay", "freeze_layers", "train_epoch", "evaluate", "LoRALinear",
                          "lora_parameter_count", "apply_lora", "fine_tuning_footprint"],
    "exercise5_span_corruption": ["random_spans_noise_mask", "span_corrupt"],
    "part_a_discovery": ["sequence_logprob", "top_k_next_tokens", "pretraining_costs"],
}


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


def _namespace(**overrides) -> dict:
    """The reference implementations (and answers) as a student's namespace, with ``overrides``."""
    namespace = reference_namespace()
    namespace["CAT_NEXT_WORD_PROBS"] = arithmetic.softmax_worked_example()
    namespace.update(overrides)
    return namespace


_REFERENCE_RESULTS: dict[str, list] = {}


def _reference_results(stem: str):
    if stem not in _REFERENCE_RESULTS:
        _REFERENCE_RESULTS[stem] = grade_in_process(stem, _namespace())
    return _REFERENCE_RESULTS[stem]


# --------------------------------------------------------------------------- full marks
@pytest.mark.parametrize("stem", STEMS)
def test_reference_earns_every_point(stem):
    results = _reference_results(stem)
    assert results, f"the suite of {stem} ran no test"
    assert all(r.status == "passed" for r in results), "the reference lost points:\n" + failures(results)
    cells = points_per_cell(results)
    assert set(cells) == set(CELL_POINTS[stem]), f"cells graded by the suite: {sorted(cells)}"
    for cell, points in CELL_POINTS[stem].items():
        assert cells[cell] == (points, points), f"{cell}: earned/available {cells[cell]}, the cell has {points}"


@pytest.mark.parametrize("stem", STEMS)
def test_alternative_correct_solutions_earn_every_point(stem):
    results = grade_in_process(stem, _namespace(**ALTERNATIVES[stem]))
    assert all(r.status == "passed" for r in results), (
        f"correct solutions written differently from the reference lost points:\n{failures(results)}")


# --------------------------------------------------------------------------- wrong solutions
MUTANT_ROUNDS = [pytest.param(stem, index, id=f"{stem}-{index}")
                 for stem, rounds in MUTANTS.items() for index in range(len(rounds))]


@pytest.mark.parametrize("stem, index", MUTANT_ROUNDS)
def test_wrong_solutions_lose_points_on_their_cell(stem, index):
    mutants = MUTANTS[stem][index]
    mutated_cells = {cell_of(name) for name in mutants}
    assert len(mutated_cells) == len(mutants), "one mutant per cell and round"
    results = grade_in_process(stem, _namespace(**mutants))
    assert not any(GRADER_BUG in r.message for r in results), "a test crashed:\n" + failures(results)
    cells = points_per_cell(results)
    for name, mutant in mutants.items():
        earned, available = cells[cell_of(name)]
        assert earned < available, f"{getattr(mutant, '__name__', name)} kept all {available} points of {cell_of(name)}"
    for cell, (earned, available) in cells.items():
        if cell not in mutated_cells:
            assert earned == available, f"{cell} lost points although it was not mutated:\n{failures(results, cell)}"


@pytest.mark.parametrize("stem", STEMS)
def test_not_implemented_scores_zero_with_error_status(stem):
    def stub(*args, **kwargs):
        raise NotImplementedError

    class StubLayer(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError

    stubs = {name: StubLayer if name[0].isupper() else stub for name in FUNCTIONS[stem]}
    results = grade_in_process(stem, _namespace(**stubs))
    graded_cells = {cell_of(name) for name in stubs}
    stubbed = [r for r in results if r.grade_id in graded_cells]
    assert {r.grade_id for r in stubbed} == graded_cells
    for result in stubbed:
        assert result.points == 0 and result.status == "error", (result.test, result.status, result.message)
        assert "not implemented" in result.message, (result.test, result.message)
