"""`nbgrader autograde` shows the CLI's progress: notebooks done of the run's total, failures so far.

nbgrader's own ``Autograde`` converter runs here, in this process, with the
repository's ``nbgrader_config.py`` on a scratch course of two notebooks
(generated once by nbgrader's ``GenerateAssignment``); only the sandboxed grading
is replaced, by canned reports, so nothing is graded and no worker starts. Output
is captured, so stderr is no terminal: one plain line per notebook, as in CI or a
log file. The bar itself is checked on ``Progress`` with a terminal faked.
"""
from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest
from nbgrader.converters import Autograde, GenerateAssignment, NbGraderException
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from autograder.nbgrader import plugin as nbgrader_plugin
from autograder.paths import venv_env
from autograder.progress import Progress
from autograder.report import Report

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6"
POINTS = {"exercise2_finetune_vs_scratch": 2, "part_a_discovery": 12}
# nbgrader's own gradebook code warns so whenever it records a new submission.
pytestmark = pytest.mark.filterwarnings("ignore:Object of type <Submitted:sqlalchemy.exc.SAWarning")


def configured(root: Path):
    """The repository's nbgrader configuration, for the course at ``root``."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}"
    config.SandboxedGrading.device = "cpu"
    return config


def coursedir(root: Path, **settings) -> CourseDirectory:
    directory = CourseDirectory(config=configured(root))
    directory.assignment_id = "week6"
    for name, value in settings.items():
        setattr(directory, name, value)
    return directory


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    for stem in POINTS:
        (root / "solutions" / "week6").mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "solutions" / "week6" / f"{stem}.ipynb", root / "solutions" / "week6")
    converter = GenerateAssignment(coursedir=coursedir(root), config=configured(root))
    converter.force = True
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", venv_env()["PATH"])  # nbgrader runs `alembic` to create the gradebook
        converter.start()
    return root


@pytest.fixture
def course(generated, tmp_path) -> Path:
    """A copy of the generated course with Alice, Bob and Carol's two notebooks submitted."""
    root = tmp_path / "course"
    shutil.copytree(generated, root)
    for student in ("alice", "bob", "carol"):
        target = root / "submitted" / student / "week6"
        target.mkdir(parents=True)
        for stem in POINTS:
            shutil.copy(SAMPLE / f"{stem}.ipynb", target)
    return root


@pytest.fixture
def canned(monkeypatch):
    """Grading replaced: {(student, stem): "failed" | "crash"}, full marks for the others."""
    outcomes: dict[tuple[str, str], str] = {}

    def grade(path, *, student, config):
        stem = Path(path).stem
        outcome = outcomes.get((student, stem))
        if outcome == "crash":
            raise RuntimeError("the fork server died")
        if outcome == "failed":
            return Report.problem(student, f"{stem}.ipynb", "grading did not finish within 900 s", outcome="failed")
        return Report(student, f"{stem}.ipynb", score=POINTS[stem], max_score=POINTS[stem])

    monkeypatch.setattr(nbgrader_plugin, "grade_in_subprocess", grade)
    return outcomes


def converter_for(root: Path, **settings) -> Autograde:
    """``nbgrader autograde week6 --create --force`` on the course at ``root``, to start in this process."""
    converter = Autograde(coursedir=coursedir(root, **settings), config=configured(root))
    converter.force = True
    converter.create_student = True
    return converter


def autograde(root: Path, **settings) -> Autograde:
    converter = converter_for(root, **settings)
    converter.start()
    return converter


def progress_of(converter: Autograde) -> Progress:
    return nbgrader_plugin.AutogradeProgress._runs[converter].progress


def assert_run(converter: Autograde, out: str, expected: list[str]) -> None:
    """The run printed ``expected``, one line per notebook, and its progress ended there: as many
    notebooks counted as the total nbgrader ended with, each that could not be graded a failure."""
    assert [line for line in out.splitlines() if line.startswith("[")] == expected
    progress = progress_of(converter)
    failures = sum(line.endswith("(could not be graded)") for line in expected)
    assert (progress.count, progress.failures, progress.total) == (len(expected), failures, len(expected))


def test_one_line_per_notebook_with_the_total_nbgrader_found(course, canned, capsys):
    canned[("bob", "part_a_discovery")] = "failed"
    converter = autograde(course)
    assert_run(converter, capsys.readouterr().out, [
        "[1/6] alice/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[2/6] alice/part_a_discovery.ipynb: 12/12",
        "[3/6] bob/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[4/6] bob/part_a_discovery.ipynb: 0/0 (could not be graded)",
        "[5/6] carol/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[6/6] carol/part_a_discovery.ipynb: 12/12",
    ])


def test_a_notebook_the_grader_could_not_grade_counts_as_a_failure(course, canned, capsys):
    """A crash in grading stops that student in nbgrader: the total drops by what was not converted."""
    canned[("bob", "exercise2_finetune_vs_scratch")] = "crash"
    canned[("carol", "part_a_discovery")] = "failed"
    converter = converter_for(course)
    with pytest.raises(NbGraderException):
        converter.start()
    assert_run(converter, capsys.readouterr().out, [
        "[1/6] alice/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[2/6] alice/part_a_discovery.ipynb: 12/12",
        "[3/6] bob/exercise2_finetune_vs_scratch.ipynb: 0/0 (could not be graded)",
        "[4/5] carol/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[5/5] carol/part_a_discovery.ipynb: 0/0 (could not be graded)",
    ])


def test_the_total_follows_what_nbgrader_skips(course, canned, capsys):
    """An excluded student and a notebook the gradebook does not know leave the total."""
    shutil.copy(SAMPLE / "part_b_bert_gpt.ipynb", course / "submitted" / "bob" / "week6" / "notes.ipynb")
    converter = autograde(course, student_id_exclude="alice")
    assert_run(converter, capsys.readouterr().out, [
        "[1/4] bob/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[2/4] bob/part_a_discovery.ipynb: 12/12",
        "[3/4] carol/exercise2_finetune_vs_scratch.ipynb: 2/2",
        "[4/4] carol/part_a_discovery.ipynb: 12/12",
    ])


def test_one_student_and_one_notebook_are_a_run_of_their_own(course, canned, capsys):
    converter = autograde(course, student_id="carol", notebook_id="part_a_discovery")
    assert_run(converter, capsys.readouterr().out, ["[1/1] carol/part_a_discovery.ipynb: 12/12"])


def test_on_a_terminal_a_bar_counts_notebooks_and_failures_below_the_log(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    log = logging.getLogger("test_autograde_progress")
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.INFO)
    monkeypatch.setattr(log, "handlers", [console])
    log.setLevel(logging.DEBUG)  # as nbgrader's: the logger lets everything through, its handler does not

    class Done:
        student, name = "alice", "part_a_discovery.ipynb"

    with Progress(3, loggers=[log]) as progress:
        progress.done(Done, Report("alice", Done.name, score=12, max_score=12))
        log.warning("alice/part_a_discovery: graded WITHOUT the full sandbox")
        log.debug("nbgrader's debug line")
        progress.done(Done, Report.problem("alice", Done.name, "killed", outcome="failed"))
        progress.set_total(2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "2/2" in captured.err and "failed 1" in captured.err
    # tqdm clears the bar's line, prints the log line, then draws the bar again below it.
    assert "\ralice/part_a_discovery: graded WITHOUT the full sandbox\n" in captured.err
    assert "debug" not in captured.err, "the console handler's level still holds"
    assert progress.total == 2 and log.handlers == [console]
