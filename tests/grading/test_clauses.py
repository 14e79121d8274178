"""Every graded item's contract as a table of clauses, each clause with the hidden test that
checks it and a mutant that breaks it, or the reason it is deliberately not enforced.

The tables are instructor-only, beside the references: ``autograder/reference/clauses/<stem>/``,
one file per section of the notebook (``<section>.toml``, the sections of its hidden suite), with
one array of tables per graded name of the section (the function, class or answer constant that
a solution cell defines), one entry per clause:

``id``
    unique within the item.
``clause``
    the clause in one line: a shape, dtype or device, an edge or error case, the randomness,
    inputs left unmodified, a forbidden call, an answer of an answer key.
``test``
    the hidden test (a function of ``autograder/hidden/<stem>/``) that checks the clause;
    it must score the item's cell.

optionally

``rule``
    the docstring's words that state the clause (a string, or a list of strings), verbatim up to
    whitespace: every rule the docstring states (an error raised, an input not modified, a call
    not allowed, an edge case) must stand inside such a quotation or a tolerance's ``stated``
    (test_docstring_rules.py),

and exactly one of:

``mutant``
    a name in ``tests/grading/variants/<stem>/``: the reference, wrong in this clause only.
    Graded in place of the item, it must fail ``test`` and so lose points on the item's cell.
    With ``device = "cuda"`` only a GPU tells it apart (a result left on the CPU), so it is
    graded where a GPU is visible, and counted as unverified elsewhere.
``tolerated``
    why the clause is deliberately not enforced, with ``stated``: the words of the item's
    docstring (in the notebook's solution cell, and in the reference where there is one) that
    tell the student so.
``forbidden``
    the grade_id of the item's rule in ``autograder/forbidden.py``, with ``checked_by``: the test
    files that check it. Forbidden calls are watched in the sandboxed worker, which these
    in-process runs do not start, so such a clause has no ``test`` and no mutant here.

Mutants are graded in rounds: round i puts the i-th mutant of every item of a notebook in place
at once (each item is its own cell, and points are per cell), so a notebook's suite runs as
often as its item with the most clauses has mutants.

``python -m tests.grading.test_clauses`` grades every mutant and prints the number of clauses,
how many have a mutant, how many are tolerated or forbidden-call clauses, the kill rate, and how
many rules the graded docstrings state and how many of them no clause quotes.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import torch

from autograder.draws import PUBLIC, Draws
from autograder.forbidden import RULES
from autograder.pytest_plugin import run_hidden_suite, suite_files
from tests.grading import docstring_rules, variants
from tests.grading.inprocess import (
    GRADER_BUG,
    InProcessSession,
    failures,
    grading_environment,
    points_per_cell,
    reference_namespace,
    student_namespace,
)
from tests.grading.test_suites import COURSE, STEMS, defined_names, student_names

REPO = Path(__file__).resolve().parents[2]
TABLES = REPO / "autograder" / "reference" / "clauses"
# Graded names without a clause table yet (none: a new graded function brings its table).
PENDING: set[str] = set()
KINDS = ("mutant", "tolerated", "forbidden")


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


# --------------------------------------------------------------------------- the tables
def table_files(stem: str) -> list[Path]:
    """The section tables of ``stem`` (none when the notebook has no table)."""
    return sorted((TABLES / stem).glob("*.toml"))


@cache
def table(stem: str) -> dict[str, list[dict]]:
    """graded name -> its clauses, from every section table of ``stem`` ({} when it has none)."""
    clauses: dict[str, list[dict]] = {}
    for path in table_files(stem):
        section = tomllib.loads(path.read_text())
        twice = sorted(clauses.keys() & section.keys())
        assert not twice, f"{path.relative_to(REPO)}: {twice} have clauses in another section's table too"
        clauses.update(section)
    return clauses


def table_file(stem: str, name: str) -> Path:
    """The section table that holds ``name``'s clauses (the notebook's folder of tables when none does)."""
    return next((path for path in table_files(stem) if name in tomllib.loads(path.read_text())), TABLES / stem)


def graded_names(stem: str) -> dict[str, str]:
    """Each name a solution cell of ``stem`` defines, PENDING excluded -> the cell that grades it."""
    return {name: cell for name, cell in student_names(COURSE.notebook(stem)).items() if name not in PENDING}


def grade_ids(stem: str) -> dict[str, str]:
    """Each graded name -> the grade_id of the solution cell that defines it (``LoRALinear`` -> ``lora_linear``)."""
    return {name: item.grade_id for item in COURSE.notebook(stem).solutions for name in defined_names(item.source)}


@cache
def hidden_tests(stem: str) -> dict[str, str]:
    """Each test function of the hidden suite of ``stem`` -> the cell its ``@graded`` marks it for."""
    tests = {}
    for node in (node for path in suite_files(stem) for node in ast.parse(path.read_text()).body):
        for decorator in getattr(node, "decorator_list", []):
            if (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "graded"
                    and decorator.args and isinstance(decorator.args[0], ast.Constant)):
                tests[node.name] = decorator.args[0].value
    return tests


def selected_tests(stem: str, cells: set[str]) -> list[str]:
    """The hidden tests of ``stem`` that score one of ``cells``: all a round needs to run, since
    a mutant is judged by the points of its own item's cell."""
    return sorted(test for test, cell in hidden_tests(stem).items() if cell in cells)


def clauses(stem: str, *, device: str | None = None, kind: str | None = None) -> list[tuple[str, dict]]:
    """(graded name, clause) of ``stem``'s table, optionally of one kind and mutant device."""
    return [(name, clause) for name, entries in table(stem).items() for clause in entries
            if (kind is None or kind in clause)
            and (device is None or clause.get("device", "cpu") == device)]


def rounds(stem: str, device: str) -> list[dict[str, dict]]:
    """Round i: graded name -> its i-th clause with a mutant graded on ``device``."""
    per_name: dict[str, list[dict]] = {}
    for name, clause in clauses(stem, device=device, kind="mutant"):
        per_name.setdefault(name, []).append(clause)
    return [{name: mutants[i] for name, mutants in per_name.items() if i < len(mutants)}
            for i in range(max(map(len, per_name.values()), default=0))]


def _normalised(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- the tables are complete
@pytest.mark.parametrize("stem", STEMS)
def test_every_graded_item_has_a_clause_table(stem):
    names, tabled = set(graded_names(stem)), set(table(stem))
    assert not names - tabled, f"autograder/reference/clauses/{stem}/ has no clauses for {sorted(names - tabled)}"
    assert not tabled - names, f"clauses for names no solution cell of {stem} grades: {sorted(tabled - names)}"
    for name in names:
        assert table(stem)[name], f"{stem}: {name} has an empty clause table"


@pytest.mark.parametrize("stem", STEMS)
def test_every_clause_names_its_test_and_a_mutant_or_a_reason(stem):
    module, tests, cells = variants.of(stem), hidden_tests(stem), graded_names(stem)
    documented = {item.grade_id: _normalised(item.source) for item in COURSE.notebook(stem).solutions}
    references = reference_namespace()
    for name, entries in table(stem).items():
        ids = [clause.get("id") for clause in entries]
        assert len(ids) == len(set(ids)), f"{stem}: {name} has two clauses with one id: {ids}"
        for clause in entries:
            where = f"{stem}: {name}.{clause.get('id')}"
            assert clause.get("id") and re.fullmatch(r"[a-z0-9_]+", clause["id"]), f"{where}: ids are snake_case"
            assert clause.get("clause") and "\n" not in clause["clause"], f"{where}: the clause in one line"
            kinds = [kind for kind in KINDS if kind in clause]
            assert len(kinds) == 1, f"{where}: needs exactly one of {KINDS}, has {kinds}"
            unknown = set(clause) - {"id", "clause", "test", "device", "stated", "checked_by", "rule", *KINDS}
            assert not unknown, f"{where}: unknown keys {sorted(unknown)}"
            rule = clause.get("rule", [])
            quoted = [rule] if isinstance(rule, str) else rule
            assert isinstance(quoted, list) and all(isinstance(words, str) and words.strip() for words in quoted), (
                f"{where}: rule is the docstring's words, a string or a list of strings")
            if kinds == ["forbidden"]:
                assert clause["forbidden"] == grade_ids(stem)[name] and clause["forbidden"] in RULES, (
                    f"{where}: names no rule of autograder/forbidden.py for {grade_ids(stem)[name]}")
                assert clause.get("checked_by"), f"{where}: checked_by names the tests of the rule"
                for path in clause["checked_by"]:
                    assert (REPO / path).is_file(), f"{where}: {path} does not exist"
                continue
            assert clause.get("test") in tests, f"{where}: {clause.get('test')!r} is no test of autograder/hidden/{stem}/"
            assert tests[clause["test"]] == cells[name], (
                f"{where}: {clause['test']} scores {tests[clause['test']]}, not {cells[name]}")
            if kinds == ["mutant"]:
                assert hasattr(module, clause["mutant"]), f"{where}: {module.__name__} has no {clause['mutant']}"
                assert clause.get("device", "cpu") in ("cpu", "cuda"), f"{where}: device is cpu or cuda"
            else:
                assert clause["tolerated"].strip() and clause.get("stated"), (
                    f"{where}: a reason, and the words of the docstring that state it")
                stated = _normalised(clause["stated"])
                assert stated in documented[grade_ids(stem)[name]], (
                    f"{where}: the notebook's solution cell does not say {clause['stated']!r}")
                if name in references and references[name].__doc__:
                    assert stated in _normalised(references[name].__doc__), (
                        f"{where}: the reference's docstring does not say {clause['stated']!r}")


@pytest.mark.parametrize("stem", STEMS)
def test_every_forbidden_shortcut_rule_is_a_clause(stem):
    for name, grade_id in grade_ids(stem).items():
        if grade_id in RULES and name not in PENDING:
            assert any(clause.get("forbidden") == grade_id for clause in table(stem).get(name, [])), (
                f"{stem}: {name} has a rule in autograder/forbidden.py but no forbidden-call clause")


# --------------------------------------------------------------------------- every mutant loses points
def grade_round(stem: str, mutants: dict[str, dict], device: str, draws: Draws = PUBLIC) -> list[str]:
    """Grade one round on inputs drawn with ``draws``; the problems found, one line each (empty:
    every mutant was caught by its test)."""
    module, cell_of = variants.of(stem), graded_names(stem)
    namespace = student_namespace(stem, **{name: getattr(module, c["mutant"]) for name, c in mutants.items()})
    results = run_hidden_suite(stem, InProcessSession(namespace), device=device, draws=draws,
                               tests=selected_tests(stem, {cell_of[name] for name in mutants}))
    problems = [f"a test crashed:\n{failures(results)}"] if any(GRADER_BUG in r.message for r in results) else []
    cells = points_per_cell(results)
    for name, clause in mutants.items():
        cell = cell_of[name]
        earned, available = cells[cell]
        failed = {r.test.split("[")[0] for r in results if r.grade_id == cell and r.status != "passed"}
        if earned == available:
            problems.append(f"{clause['mutant']} ({name}.{clause['id']}) kept all {available} points of {cell}")
        elif clause["test"] not in failed:
            problems.append(f"{clause['mutant']} ({name}.{clause['id']}) passed {clause['test']}; it lost the "
                            f"points of {sorted(failed)}: name that test, or make the mutant break only the clause")
    return problems


def _round_params(device: str) -> list:
    return [pytest.param(stem, index, id=f"{stem}-{index}")
            for stem in STEMS for index in range(len(rounds(stem, device)))]


@pytest.mark.parametrize("stem, index", _round_params("cpu"))
def test_clause_mutants_lose_points_on_their_item(stem, index):
    problems = grade_round(stem, rounds(stem, "cpu")[index], "cpu")
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="device clauses are told apart only on a GPU")
@pytest.mark.parametrize("stem, index", _round_params("cuda"))
def test_device_clause_mutants_lose_points_on_a_gpu(stem, index):
    problems = grade_round(stem, rounds(stem, "cuda")[index], "cuda")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- the counts
def main() -> int:
    """Grade every mutant (those of device clauses where a GPU is visible) and print the counts."""
    every = [(stem, name, clause) for stem in STEMS for name, clause in clauses(stem)]
    count = {kind: sum(kind in clause for *_, clause in every) for kind in KINDS}
    devices = ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    killed = graded = 0
    problems = []
    with grading_environment():
        for stem in STEMS:
            for device in devices:
                for mutants in rounds(stem, device):
                    found = grade_round(stem, mutants, device)
                    problems += [f"{stem}: {problem}" for problem in found]
                    graded += len(mutants)
                    killed += len(mutants) - sum(" kept all " in problem for problem in found)
    items = sum(len(table(stem)) for stem in STEMS)
    unverified = sum(clause.get("device") == "cuda" for *_, clause in every) if "cuda" not in devices else 0
    print(f"{items} graded items, {len(every)} clauses: {count['mutant']} with a mutant, "
          f"{count['tolerated']} tolerated, {count['forbidden']} forbidden-call clauses checked in the worker")
    print(f"kill rate: {killed}/{graded} mutants lose points on their item"
          + (f" ({unverified} device mutants need a GPU and were not graded)" if unverified else ""))
    stated = [(stem, name, docstring_rules.rules(text), docstring_rules.unclaimed(text, table(stem).get(name, [])))
              for stem in STEMS for item in COURSE.notebook(stem).solutions
              for name, text in docstring_rules.docstrings(item.source).items()]
    print(f"docstring rules: {sum(len(found) for *_, found, _ in stated)} found in the docstrings of "
          f"{sum(bool(found) for *_, found, _ in stated)} graded items, "
          f"{sum(len(left) for *_, left in stated)} quoted by no clause")
    problems += [f"{stem}: {name} states a rule no clause quotes: {rule.sentence}"
                 for stem, name, _, left in stated for rule in left]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
