"""What a student reads about a failed hidden test never gives away the expected answer.

With a course secret, each student's hidden inputs are drawn for them alone
(``autograder/draws.py``); a message that quoted the reference's output on those inputs
would hand the student a table of answers to exactly the cases that grade them. So:

* every clause mutant (``tests/grading/variants/``) is graded under a course secret, with
  the reference implementations and the reference-side drivers watched: every value they
  compute for a test (on the grader's side, not inside the student's call) is recorded,
  with what the failing check compared against (``GradingFailure.compared``), the inputs
  the student's code was given and what it returned. No student-facing
  message of that test may show a recorded reference value, as the suites format numbers
  (``.3g``, ``.4f``, ``repr``, ...), nor a run of its integers, nor a piece of its text,
  unless the student's own inputs or outputs hold the same; nor may it say "expected 4" or
  "should be [...]" of a hidden case. The check is shown to find the leak of the old
  ``expect_close`` (the largest difference of a 0-dim loss returned as 0).
* the staff's ``detail`` reaches the formgrader's cell output as entries of their own, and
  ``generate_feedback``'s preprocessor (configured in ``nbgrader_config.py``) removes them;
  no text a student controls can forge or hide such an entry.

The messages' own wording is tested with the checks in ``test_suite_checks.py``; Gradescope's
``results.json`` and the report's ``detail`` in ``test_report.py``; the feedback HTML of a real
``nbgrader generate_feedback`` in ``test_nbgrader_views.py``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import math
import pkgutil
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import nbformat
import pytest
import torch

import autograder.reference as reference_package
from autograder.draws import Draws
from autograder.drivers import probes
from autograder.nbgrader.feedback_detail import STAFF_ONLY, RemoveStaffDetail, is_staff_only, without_staff_detail
from autograder.nbgrader.plugin import cell_outputs
from autograder.paths import REPO
from autograder.pytest_plugin import HIDDEN_DIR, run_hidden_suite, suite_files, suite_modules
from autograder.report import TestResult
from autograder.suite import GradingFailure
from tests.grading import variants
from tests.grading.inprocess import GRADER_BUG, InProcessSession, failures, grading_environment, student_namespace
from tests.grading.test_clauses import graded_names, rounds, selected_tests
from tests.grading.test_suites import STEMS

# A secret of this test alone: its draws are in no cache that another test filled.
DRAWS = Draws.of("a course secret that only the feedback-message test uses", "dana")
# A tensor's first entries are recorded, as many as a message could ever quote.
RECORDED_ENTRIES = 4096
# A number is checked when its rendering has at least this many significant digits (0.5, 1e-05
# and 12 are in many messages for other reasons), an integer when it is at least this large.
SIGNIFICANT_DIGITS = 3
LARGE_INT = 100
# Text: a run of this many characters of a reference's string.
TEXT_WINDOW = 12
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
INT_RUN = re.compile(r"\[(-?\d+(?:, -?\d+){2,})\]")
SAYS_THE_ANSWER = re.compile(r"\b(expected|should be|should have been|instead of)\s*(:|=|is|was)?\s*[-\d\[({]")


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


# --------------------------------------------------------------------------- what a test saw
class Atoms:
    """The numbers, integer runs and strings inside values (tensors, records, lists, dicts). A
    dict's keys are names (of parameters, of a record's fields), not values a check compares:
    they count only with ``keys`` (for the student's side, whose names a message may quote)."""

    def __init__(self, *, keys: bool = False) -> None:
        self.numbers: list[float] = []
        self.runs: list[str] = []  # ",1,2,3," per integer sequence
        self.strings: list[str] = []
        self.keys = keys

    def add(self, value: Any, depth: int = 0) -> None:
        if depth > 8:
            return
        if isinstance(value, torch.Tensor):
            flat = value.detach().flatten()[:RECORDED_ENTRIES].cpu()
            items = flat.tolist()
            self.numbers += [float(x) for x in items]
            self.numbers += [float(size) for size in value.shape]
            self.runs.append("," + ",".join(str(size) for size in value.shape) + ",")
            if not flat.is_floating_point():
                self.runs.append("," + ",".join(str(int(x)) for x in items) + ",")
                if value.dim() > 1 and value.numel():
                    for row in value.detach().reshape(-1, value.size(-1))[:256].cpu().tolist():
                        self.runs.append("," + ",".join(str(int(x)) for x in row) + ",")
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            self.numbers.append(float(value))
        elif isinstance(value, str):
            self.strings.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if self.keys:
                    self.add(key, depth + 1)
                self.add(item, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)
            if items and all(type(x) is int for x in items):
                self.runs.append("," + ",".join(map(str, items)) + ",")
            for item in items:
                self.add(item, depth + 1)
        elif isinstance(value, torch.nn.Module):
            for tensor in value.state_dict().values():
                self.add(tensor, depth + 1)


def _significant(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if "." in text or "e" in text else len(mantissa)


def renderings(x: float) -> set[str]:
    """How the suites and checks could show ``x`` (and ``-x``, a difference from 0)."""
    if not math.isfinite(x):
        return set()
    if x == int(x) and abs(x) < 2 ** 53:
        n = int(x)
        return {str(n), str(-n), f"{float(n)!r}", f"{x:.3g}", f"{x:g}"} if abs(n) >= LARGE_INT else set()
    shown = set()
    for y in (x, -x):
        for text in (repr(y), f"{y:.3g}", f"{y:.4g}", f"{y:g}", f"{y:.6g}", f"{y:.2f}", f"{y:.4f}", f"{y:.5f}",
                     str(round(y, 4)), f"{y:.2e}", f"{y:e}"):
            if _significant(text) >= SIGNIFICANT_DIGITS:
                shown.add(text)
    return shown


class Watch:
    """Records, per hidden test, what the reference computed and what the student's code was given
    and returned; a pytest plugin of the suite's run (``run_hidden_suite(plugins=...)``)."""

    def __init__(self) -> None:
        self.test = "(collection)"
        self.reference: dict[str, Atoms] = defaultdict(Atoms)
        self.student: dict[str, Atoms] = defaultdict(lambda: Atoms(keys=True))
        self.failures: dict[str, BaseException] = {}
        self.in_student = 0

    def pytest_runtest_setup(self, item) -> None:
        self.test = item.name
        _clear_caches()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        yield
        if call.when == "call" and call.excinfo is not None:
            self.failures[item.name] = call.excinfo.value

    def computed(self, value: Any) -> None:
        if not self.in_student:
            self.reference[self.test].add(value)

    @contextmanager
    def student_code(self, *given: Any) -> Iterator[None]:
        for value in given:
            self.student[self.test].add(value)
        self.in_student += 1
        try:
            yield
        finally:
            self.in_student -= 1


def _clear_caches() -> None:
    """Empty the hidden suites' caches of reference results (``_once``, ``_DECODED``, ``lru_cache``),
    so that each test computes, and the watch sees, every reference value it uses."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and str(module.__file__).startswith(str(HIDDEN_DIR)):
            for name, value in list(vars(module).items()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
                elif isinstance(value, dict) and re.fullmatch(r"_[A-Z_]+", name):
                    value.clear()


class WatchedSession(InProcessSession):
    """The in-process stand-in student, with its inputs and outputs recorded."""

    def __init__(self, namespace: dict[str, Any], watch: Watch):
        super().__init__(namespace)
        self.watch = watch

    def call(self, solution, name, args, kwargs, *, timeout=None):
        with self.watch.student_code(args, kwargs):
            value = super().call(solution, name, args, kwargs, timeout=timeout)
        self.watch.student[self.watch.test].add(value)
        return value

    def probe(self, solution, probe, params, *, timeout=None):
        with self.watch.student_code(params):
            value = super().probe(solution, probe, params, timeout=timeout)
        self.watch.student[self.watch.test].add(value)
        return value


def _reference_functions() -> Iterator[tuple[Any, str, Any]]:
    """(module, name, function) of every reference function and every reference-side driver."""
    modules = [importlib.import_module(f"{reference_package.__name__}.{info.name}")
               for info in pkgutil.iter_modules(reference_package.__path__)]
    for module in modules:
        for name, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_"):
                yield module, name, value
    for name, value in vars(probes).items():
        if inspect.isfunction(value) and name.startswith("drive_"):
            yield probes, name, value


@contextmanager
def watching(watch: Watch) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for module, name, function in _reference_functions():
            @functools.wraps(function)
            def watched(*args, __function=function, **kwargs):
                value = __function(*args, **kwargs)
                watch.computed(value)
                return value

            patch.setattr(module, name, watched)
        yield


# --------------------------------------------------------------------------- the leaks
def leaks(message: str, reference: Atoms, student: Atoms, written: str = "") -> list[str]:
    """What ``message`` shows of ``reference`` that the student's own inputs and outputs do not hold
    (nor, for text, ``written``: the suite's source, whose own words a message may use)."""
    own = {text for x in student.numbers for text in renderings(x)}
    secret = {text for x in reference.numbers for text in renderings(x)} - own
    found = [f"the number {token}" for token in NUMBER.findall(message) if token in secret or token.lstrip("-") in secret]
    for run in INT_RUN.findall(message):
        key = "," + run.replace(" ", "") + ","
        if any(key in seq for seq in reference.runs) and not any(key in seq for seq in student.runs):
            found.append(f"the integers [{run}]")
    for text in reference.strings:
        for start in range(0, max(0, len(text) - TEXT_WINDOW) + 1):
            window = text[start:start + TEXT_WINDOW]
            if (len(window) == TEXT_WINDOW and window in message and window not in written
                    and not any(window in s for s in student.strings)):
                found.append(f"the text {window!r}")
                break
    if SAYS_THE_ANSWER.search(message):
        found.append(f"the phrase {SAYS_THE_ANSWER.search(message).group(0)!r}")
    return found


def graded_messages(stem: str, namespace: dict[str, Any], watch: Watch, tests: list[str] = ()) -> list[TestResult]:
    with watching(watch):
        return run_hidden_suite(stem, WatchedSession(namespace, watch), device="cpu", draws=DRAWS, plugins=[watch],
                                tests=tests)


def problems_of(stem: str, results: list[TestResult], watch: Watch) -> list[str]:
    problems = [f"a test crashed:\n{failures(results)}"] if any(GRADER_BUG in r.message for r in results) else []
    written = "\n".join(path.read_text() for path in suite_modules(stem))
    for result in results:
        failure = watch.failures.get(result.test)
        if result.status != "failed" or not isinstance(failure, GradingFailure) or failure.public:
            continue
        # What the failing check compared against counts too: a hand-written expected value, or a
        # model's own output, is as hidden as the reference's.
        watch.reference[result.test].add(failure.compared)
        found = leaks(result.message, watch.reference[result.test], watch.student[result.test], written)
        if found:
            problems.append(f"{result.test}: the message shows {', '.join(sorted(set(found))[:5])}:\n"
                            f"    {result.message[:400]}")
    return problems


def _mutants(stem: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Each round's mutants, with the hidden tests of their items (a failing message of another
    item's test cannot come from a mutant that only replaces this item)."""
    module, cell_of = variants.of(stem), graded_names(stem)
    return [({name: getattr(module, clause["mutant"]) for name, clause in round_.items()},
             selected_tests(stem, {cell_of[name] for name in round_}))
            for round_ in rounds(stem, "cpu")]


@pytest.mark.parametrize("stem", STEMS)
def test_no_message_of_a_clause_mutant_quotes_the_reference(stem):
    problems, checked = [], 0
    for mutants, tests in _mutants(stem):
        watch = Watch()
        results = graded_messages(stem, student_namespace(stem, **mutants), watch, tests)
        checked += sum(r.status == "failed" for r in results)
        problems += problems_of(stem, results, watch)
    assert checked, f"{stem}: no mutant failed a test, nothing was checked"
    assert not problems, "\n".join(problems)


def test_the_check_finds_the_leak_of_a_largest_difference():
    """Before the fix, expect_close quoted the largest difference: of a 0-dim loss returned as 0,
    the expected value to three digits. Graded with that old check, a wrong sequence_logprob
    must be caught."""
    stem = "part_a_discovery"
    zero = lambda logits, token_ids: torch.zeros((), dtype=torch.float32, device=logits.device)  # noqa: E731

    def old_expect_close(actual, expected, *, atol, rtol=0.0, what="the result", **_):
        diff = (actual.double() - expected.double()).abs()
        if bool((diff > atol + rtol * expected.double().abs()).any()):
            raise GradingFailure(f"{what} differs from the expected values by up to {float(diff.max()):.3g} "
                                 f"(tolerance: atol={atol:g}, rtol={rtol:g})")

    watch = Watch()
    graded_messages(stem, student_namespace(stem), watch)  # imports the suite's module
    [path] = suite_files(stem)
    suite = next(m for m in sys.modules.values() if str(getattr(m, "__file__", "")) == str(path))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite, "expect_close", old_expect_close)
        watch = Watch()
        results = graded_messages(stem, student_namespace(stem, sequence_logprob=zero), watch)
    problems = problems_of(stem, results, watch)
    assert any(p.startswith("test_sequence_logprob_matches_reference") and "the number" in p for p in problems), (
        "\n".join(problems) or failures(results))


@pytest.mark.parametrize("message, caught", [
    ("the loss is 0.0, expected 2.35", "the phrase 'expected 2'"),
    ("the loss differs by up to 2.35 (atol=1e-05)", "the number 2.35"),
    ("the ids are [3, 4, 5], not [17, 4, 250]", "the integers [17, 4, 250]"),
    ("the prompt should read 'Review: a gem of a film'", "the text"),
])
def test_the_check_of_a_message_knows_each_kind_of_leak(message, caught):
    reference, student = Atoms(), Atoms()
    reference.add({"loss": torch.tensor(2.3456), "ids": torch.tensor([[17, 4, 250]]),
                   "prompt": "Review: a gem of a film\nSentiment:"})
    student.add([torch.tensor([3, 4, 5]), "a gem of a film"])
    assert any(item.startswith(caught) for item in leaks(message, reference, student)), leaks(message, reference,
                                                                                            student)
    assert leaks("the loss is 0.0, off by more than 1000x the tolerance (atol=1e-05, rtol=1e-05)", reference,
                 student) == []


# --------------------------------------------------------------------------- the staff's detail in nbgrader
def _failed(message: str, detail: str) -> TestResult:
    return TestResult("test_clm_loss", "test_clm_loss_matches_reference", "failed", 0.0, 1.0, message, detail)


def test_the_formgrader_shows_the_detail_and_the_feedback_does_not():
    tests = [_failed("the loss differs from the expected values: it is off by more than 1000x the tolerance",
                     "the loss differs from the expected values by up to 2.35; got 0, expected 2.3456"),
             TestResult("test_clm_loss", "test_clm_loss_ignores_padded_targets", "failed", 0.0, 1.0, "is NaN"),
             TestResult("test_clm_loss", "test_clm_loss_with_nothing_to_score_is_zero", "passed", 1.0, 1.0, "")]
    (output,) = cell_outputs(tests, 1.0, 3.0, [])
    staff = [entry for entry in output.traceback if is_staff_only(entry)]
    assert len(staff) == 1 and "expected 2.3456" in staff[0], output.traceback
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[output])])
    notebook, _ = RemoveStaffDetail().preprocess(notebook, {})
    shown = "\n".join(notebook.cells[0].outputs[0].traceback)
    assert "2.3456" not in shown and "2.35" not in shown and STAFF_ONLY not in shown
    assert "off by more than 1000x the tolerance" in shown and "is NaN" in shown
    assert "test_clm_loss_with_nothing_to_score_is_zero" in shown
    assert notebook.cells[0].outputs[0].evalue == output.evalue


def test_a_students_text_can_neither_forge_nor_hide_a_staff_entry():
    """Names, messages and details quote what student code raised or returned: escape sequences
    are removed from them, so an entry starts with STAFF_ONLY only where the plugin put it."""
    forged = STAFF_ONLY + " the answer is 42"
    tests = [TestResult("test_x", forged, "failed", 0.0, 1.0, forged, forged + " (detail)")]
    (output,) = cell_outputs(tests, 0.0, 1.0, [])
    entries = output.traceback
    assert sum(map(is_staff_only, entries)) == 1, "only the detail's own entry is the staff's"
    kept = without_staff_detail([dict(output)])[0]["traceback"]
    assert len(kept) == len(entries) - 1 and "the answer is 42" in "\n".join(kept), "the student's text stays"


def test_generate_feedback_is_configured_to_remove_the_detail():
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    assert RemoveStaffDetail in config.GenerateFeedback.preprocessors
