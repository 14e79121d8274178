"""Hidden inputs of each student's own (``autograder/draws.py``), and a grade that stays right
whatever the inputs drawn.

With a course secret, every hidden test draws its inputs from seeds derived from the secret
and the student. The grade must not depend on which inputs were drawn: under several
secrets and students, the reference and every alternative correct solution still earn
every point, and every mutant still loses its points. And hard-coding the answers of the
public inputs, the attack the secret exists for, earns nothing once inputs are drawn.
"""
from __future__ import annotations

import hashlib
from typing import Any

import pytest
import torch

from autograder.config import GradingConfig
from autograder.draws import MIN_SECRET_CHARS, PUBLIC, SECRET_ENV, Draws, course_secret, describe
from autograder.errors import ConfigurationError
from autograder.version import suite_hash
from tests.grading import variants
from tests.grading.inprocess import failures, grade_in_process, grading_environment, points_per_cell, student_namespace
from tests.grading.test_clauses import grade_round, rounds
from tests.grading.test_suites import COURSE, STEMS, student_names

# Three courses' secrets, each with a student: the suites are graded under every one.
DRAWS = [Draws.of(f"a course secret for the tests, number {i}", student)
         for i, student in enumerate(("ada", "ben", "cy"))]


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


# --------------------------------------------------------------------------- the seeds
def test_public_draws_are_the_suites_own_numbers():
    assert Draws.of(None, "ada") is PUBLIC and PUBLIC.public
    assert [PUBLIC.seed(n) for n in (0, 1, 7, 1000)] == [0, 1, 7, 1000]


def test_a_secret_gives_each_student_seeds_of_their_own_and_the_same_ones_again():
    ada, ada_again = Draws.of("x" * 20, "ada"), Draws.of("x" * 20, "ada")
    ben, other_course = Draws.of("x" * 20, "ben"), Draws.of("y" * 20, "ada")
    seeds = [ada.seed(n) for n in range(50)]
    assert seeds == [ada_again.seed(n) for n in range(50)], "re-grading draws other inputs"
    assert len(set(seeds)) == 50 and set(seeds).isdisjoint(range(50))
    assert set(seeds).isdisjoint(ben.seed(n) for n in range(50))
    assert set(seeds).isdisjoint(other_course.seed(n) for n in range(50))
    assert all(0 <= s < 2 ** 63 for s in seeds)
    torch.Generator().manual_seed(max(seeds))  # every seed is one torch accepts
    assert "x" * 20 not in repr(ada) and "x" * 20 not in describe("x" * 20)


def test_the_secret_comes_from_the_environment_or_the_file(monkeypatch, tmp_path):
    from autograder import draws

    monkeypatch.setattr(draws, "SECRET_FILE", tmp_path / ".grading-secret")
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert course_secret() is None and GradingConfig.build().secret is None
    draws.SECRET_FILE.write_text("f" * 32 + "\n")
    assert course_secret() == "f" * 32
    monkeypatch.setenv(SECRET_ENV, "e" * 32)
    assert course_secret() == "e" * 32, "the environment comes before the file"
    assert GradingConfig.build().secret == "e" * 32
    assert "e" * 32 not in repr(GradingConfig.build()), "the config's repr shows the secret"
    monkeypatch.setenv(SECRET_ENV, "short")
    with pytest.raises(ConfigurationError, match=f"at least {MIN_SECRET_CHARS}"):
        GradingConfig.build()


def test_a_new_secret_makes_earlier_reports_out_of_date():
    assert suite_hash(None) != suite_hash("s" * 20) != suite_hash("t" * 20)
    assert suite_hash("s" * 20) == suite_hash("s" * 20)
    assert hashlib.sha256(b"s" * 20).hexdigest() not in suite_hash("s" * 20)


# --------------------------------------------------------------------------- the grade, whatever is drawn
def _assert_full_marks(results, what: str) -> None:
    assert results and all(r.status == "passed" for r in results), f"{what} lost points:\n{failures(results)}"


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("draws", range(len(DRAWS)), ids=lambda i: f"secret{i}")
def test_reference_and_alternatives_earn_every_point_on_drawn_inputs(stem, draws):
    _assert_full_marks(grade_in_process(stem, student_namespace(stem), DRAWS[draws]), "the reference")
    for index, alternative in enumerate(variants.of(stem).ALTERNATIVES):
        _assert_full_marks(grade_in_process(stem, student_namespace(stem, **alternative), DRAWS[draws]),
                           f"ALTERNATIVES[{index}] ({', '.join(alternative)})")


@pytest.mark.parametrize("stem", STEMS)
def test_every_clause_mutant_loses_points_on_drawn_inputs(stem):
    """Each round under one of the secrets in turn: every mutant, every secret, in one pass."""
    problems = []
    for index, mutants in enumerate(rounds(stem, "cpu")):
        problems += grade_round(stem, mutants, "cpu", DRAWS[index % len(DRAWS)])
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- hard-coded answers
def _fingerprint(value: Any) -> Any:
    """A hashable summary of a call's argument: tensors by their values, modules by their weights."""
    if isinstance(value, torch.Tensor):
        # The raw bytes: numpy has no bfloat16, so the values are read as bytes of any dtype.
        raw = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        return ("tensor", value.dtype, tuple(value.shape), raw.numpy().tobytes())
    if isinstance(value, torch.nn.Module):
        return ("module", type(value).__name__,
                tuple(_fingerprint(p) for p in value.state_dict().values()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_fingerprint(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _fingerprint(v)) for k, v in value.items())))
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    return type(value).__name__


class Memorised:
    """A graded function that answers from a table of the public inputs' answers and fails
    on any input it has not seen: a student who copied the outputs of the public suites."""

    def __init__(self, function):
        self.function, self.table, self.recording = function, {}, True
        self.__name__ = getattr(function, "__name__", "memorised")

    def __call__(self, *args, **kwargs):
        key = _fingerprint((args, kwargs))
        if self.recording:
            self.table[key] = self.function(*args, **kwargs)
        if key not in self.table:
            raise KeyError("an input this submission has no answer for")
        return self.table[key]


@pytest.mark.parametrize("stem", STEMS)
def test_hard_coded_answers_of_the_public_inputs_earn_nothing_on_drawn_ones(stem):
    """Graded with the public seeds, the table scores what the reference does on the items whose
    tests only call the function (the others need more than a table). Each such item must lose
    points once a secret draws the inputs."""
    notebook = COURSE.notebook(stem)
    functions = {name: value for name, value in student_namespace(stem).items()
                 if name in student_names(notebook) and callable(value) and not isinstance(value, type)}
    if not functions:
        pytest.skip(f"{stem} grades no plain function")
    memorised = {name: Memorised(function) for name, function in functions.items()}
    grade_in_process(stem, student_namespace(stem, **memorised))  # record the public answers
    for table in memorised.values():
        table.recording = False
    public = points_per_cell(grade_in_process(stem, student_namespace(stem, **memorised)))
    drawn = points_per_cell(grade_in_process(stem, student_namespace(stem, **memorised), DRAWS[0]))
    cell_of = student_names(notebook)
    copied = {cell_of[name] for name in memorised}
    if not any(public[cell][0] == public[cell][1] for cell in copied):
        pytest.skip(f"{stem}: its tests check more than answers to inputs (determinism, calls through "
                    "probes, state), so a table scores no item even with the public seeds")
    fooled = [cell for cell in sorted(copied) if public[cell][0] == public[cell][1] and drawn[cell][0] == drawn[cell][1]]
    assert not fooled, f"a table of the public inputs' answers keeps every point of {fooled} on drawn inputs"


def test_no_hidden_suite_draws_when_it_is_imported():
    """The fork server imports every hidden module once for all students
    (``autograder/preload.py``), outside any student's draws: a module that drew an input
    at import would give every student the public one. Imported here in a fresh Python
    whose draws refuse to be read, every module must import all the same."""
    import subprocess
    import sys

    from autograder.paths import REPO

    script = (
        "import importlib, sys\n"
        "import autograder.suite as suite\n"
        "from autograder.pytest_plugin import HIDDEN_DIR, suite_modules\n"
        "class Refused:\n"
        "    def __getattr__(self, name):\n"
        "        raise AssertionError('a hidden module drew an input at import')\n"
        "suite._DRAWS = Refused()\n"
        "sys.path.insert(0, str(HIDDEN_DIR))\n"
        f"for stem in {STEMS!r}:\n"
        "    for module in suite_modules(stem):\n"
        "        importlib.import_module(stem if module.stem == '__init__' else f'{stem}.{module.stem}')\n"
        "        print(stem, module.stem)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.split("\n")) > 2 * len(STEMS)
