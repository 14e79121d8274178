"""nbgrader's whole lifecycle with real Unix users: an instructor and two students.

What a JupyterHub deployment does, on one machine: a root-owned exchange
(mode 1777, nbgrader's ``Exchange.root``), an instructor who runs nbgrader from a
course folder in their home with the repository's configuration
(``generate_assignment``, ``release_assignment``, ``collect``, ``autograde``
through the sandboxed grader, written answers graded through nbgrader's gradebook
API, ``generate_feedback``, ``release_feedback``), and two students who
``fetch_assignment``, fill the notebooks in with the bundled samples
(``alice_full_solution``, ``carol_half_correct``), ``validate`` one notebook,
``submit`` and ``fetch_feedback``. Every command runs as its user (see
``unix_users``, which also explains the mount namespace each one runs in).

Checked: the gradebook's auto-graded scores are the samples' expected scores
(``data/sample_submissions/expected.json``), student 1's total includes the
manual scores entered; the fetched feedback exists, shows a failing hidden test
of student 2 with the grader's message and no hidden test code; submissions in
the exchange belong to their students; and after every student step, no file
in a student's home holds a line of a solution cell, of a reference
implementation or of a hidden test, nor a hidden test's name, except what the
student wrote themselves (and, once feedback is back, the names of the tests
the grader reports, which feedback shows by design).

Runs as root only, with ``useradd``, ``setpriv``, ``unshare`` and bubblewrap; it
takes about two and a half minutes on a 2-core machine, half of it ``nbgrader
autograde``. Each step's duration is printed (``pytest -s``).
"""
from __future__ import annotations

import ast
import contextlib
import html
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.notebook import solution_regions
from autograder.paths import REPO
from tests.deploy.unix_users import (
    SYSTEM_PATH,
    Runner,
    UnixUser,
    chown_tree,
    create_user,
    missing_prerequisites,
    remove_user,
    write_as,
)

SAMPLES = REPO / "data" / "sample_submissions"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
ASSIGNMENT = "week6"
COURSE_ID = "nlp-week6"
RELEASE_DIRECTORY = "assignments"  # the repository's CourseDirectory.release_directory
FULL, HALF, UNTOUCHED = "alice_full_solution", "carol_half_correct", "bob_untouched_release"
# One cheap notebook each for `nbgrader validate` (about 10 s in fast mode).
VALIDATE = {FULL: "part_a_discovery", HALF: "part_b_bert_gpt"}
# What students never get: instructor-only folders are covered in their namespace.
INSTRUCTOR_ONLY = [REPO / "autograder" / "hidden", REPO / "autograder" / "reference", REPO / "solutions",
                   SAMPLES]
MIN_LINE = 30  # shorter lines are too generic to be evidence of a leak
MIN_NAME = 8

_reason = missing_prerequisites()
pytestmark = pytest.mark.slow
needs_root_tools = pytest.mark.skipif(_reason is not None, reason=f"nbgrader lifecycle with Unix users: {_reason}")


# ------------------------------------------------------------------ text helpers

def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def text_of(path: Path) -> str:
    """A file's text, one stripped line per line: a notebook's strings (JSON
    escapes undone), an HTML page's text (tags and syntax highlighting removed),
    without terminal colour codes."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        with contextlib.suppress(ValueError):
            raw = "\n".join(_strings(json.loads(raw)))
    elif path.suffix in (".html", ".htm"):
        raw = html.unescape(re.sub(r"<[^>]*>", "", raw))
    raw = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw)  # terminal colours of tracebacks
    return "\n".join(line.strip() for line in raw.splitlines())


def notebook_texts(folder: Path) -> str:
    return "\n".join(text_of(p) for p in sorted(folder.glob("*.ipynb")))


def solution_lines(cell_type: str) -> set[str]:
    """Lines of the solution regions of the source notebooks' solution cells
    (code: the code between the markers; markdown: the model answers)."""
    lines = set()
    for path in sorted((REPO / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != cell_type or not cell["metadata"].get("nbgrader", {}).get("solution"):
                continue
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            regions = solution_regions(source) or [source]
            for region in regions:
                body = [line.strip() for line in region.splitlines() if line.strip()]
                if len(body) >= 3:
                    lines.update(line for line in body if len(line) >= MIN_LINE)
    return lines


def _function_body_lines(path: Path) -> set[str]:
    """The lines of every function's body (docstrings and comments left out)."""
    source = path.read_text()
    text = source.splitlines()
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        for statement in body:
            for line in text[statement.lineno - 1:statement.end_lineno]:
                line = line.strip()
                if len(line) >= MIN_LINE and not line.startswith("#"):
                    lines.add(line)
    return lines


def hidden_names() -> set[str]:
    names = set()
    for path in sorted((REPO / "autograder" / "hidden").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.name) >= MIN_NAME:
                names.add(node.name)
    return names


class Needles:
    """What must never reach a student: solution, reference and hidden-test text.

    A needle that the released notebooks contain (a function signature, a visible
    test, a grade_id that is also a test's name) is not evidence of anything and
    is left out."""

    def __init__(self, release_text: str):
        hidden_dir, reference_dir = REPO / "autograder" / "hidden", REPO / "autograder" / "reference"
        self.lines = {
            "solution": solution_lines("code"),
            "model answer": solution_lines("markdown"),
            "reference": set().union(*(_function_body_lines(p) for p in reference_dir.glob("*.py"))),
            "hidden test code": set().union(*(_function_body_lines(p) for p in hidden_dir.rglob("*.py"))),
        }
        self.lines = {kind: {n for n in found if n not in release_text} for kind, found in self.lines.items()}
        self.names = {n for n in hidden_names() if not re.search(rf"\b{re.escape(n)}\b", release_text)}
        self.test_names = {n for n in self.names if n.startswith("test_")}
        assert all(self.lines.values()) and self.names, "no needles: the scan would prove nothing"

    def found_in(self, text: str, *, own: str = "", feedback: bool = False) -> list[str]:
        """The needles in ``text``, less those in ``own`` (the student's own writing)
        and, with ``feedback``, the test names that feedback shows by design."""
        hits = [f"{kind}: {line!r}" for kind, lines in self.lines.items()
                for line in lines if line in text and line not in own]
        for name in self.names - (self.test_names if feedback else set()):
            pattern = rf"\b{re.escape(name)}\b"
            if re.search(pattern, text) and not re.search(pattern, own):
                hits.append(f"hidden test name: {name}")
        return sorted(hits)


# ------------------------------------------------------------------ the lifecycle

class Lifecycle:
    def __init__(self, base: Path):
        self.base = base
        self.users: list[UnixUser] = []
        self.exchange = base / "exchange"
        self.own: dict[str, str] = {}  # student name -> text they wrote themselves

    @contextlib.contextmanager
    def step(self, name: str):
        start = time.monotonic()
        try:
            yield
        finally:
            elapsed = time.monotonic() - start
            print(f"[lifecycle] {name:<48} {elapsed:7.1f} s", flush=True)

    def user(self, name: str) -> UnixUser:
        user = create_user(name, self.base / "home" / name)
        self.users.append(user)
        os.chmod(user.home, 0o700)  # homes are private, as on a JupyterHub
        return user


def _cleanup_users(users: list[UnixUser]) -> list[str]:
    """Kill what the test's own users left running (by pid), remove what they left in
    the shared temporary folders (torch's ``/tmp/torchinductor_<user>``), then
    ``userdel -r`` them."""
    import psutil

    problems = []
    uids = {user.uid for user in users}
    for process in psutil.process_iter(["uids"]):
        if process.info["uids"] and process.info["uids"].real in uids:
            with contextlib.suppress(psutil.Error):
                process.kill()
    for shared in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
        with contextlib.suppress(OSError), os.scandir(shared) as entries:
            for entry in entries:
                if entry.stat(follow_symlinks=False).st_uid in uids:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
    for user in users:
        problem = remove_user(user)
        if problem:
            problems.append(problem)
    return problems


def _each(students: dict[str, UnixUser], action) -> dict[str, object]:
    """``action(sample, student)`` for both students at once (they are independent)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(students)) as pool:
        futures = {sample: pool.submit(action, sample, student) for sample, student in students.items()}
        return {sample: future.result() for sample, future in futures.items()}


def _nbgrader(runner: Runner, user: UnixUser, *args: str, cwd: Path, **kwargs):
    result = runner.run(user, [sys.executable, "-m", "nbgrader", *args], cwd=cwd, **kwargs)
    assert result.returncode == 0, (f"`nbgrader {' '.join(args)}` as {user.name} failed "
                                    f"(exit {result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}")
    return result


def _scan_home(needles: Needles, student: UnixUser, own: str, *, feedback: bool = False) -> None:
    leaks = []
    for folder, _, files in os.walk(student.home):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 64 * 2**20:
                continue
            leaks += [f"{path.relative_to(student.home)}: {hit}"
                      for hit in needles.found_in(text_of(path), own=own, feedback=feedback)]
    assert not leaks, f"{student.name}'s home holds what students must never get:\n" + "\n".join(leaks[:20])


GRADEBOOK_SCRIPT = r"""
import json, sys
from nbgrader.api import Gradebook
db, course, assignment, manual_for = sys.argv[1:5]
entered = []
with Gradebook(db, course) as gradebook:
    if manual_for:
        # What the formgrader does for each written answer (its GradeHandler.put): a
        # manual score on the Grade row, which then no longer needs grading.
        for notebook in gradebook.find_submission(assignment, manual_for).notebooks:
            for grade in notebook.grades:
                if grade.auto_score is None and grade.needs_manual_grade:
                    grade.manual_score = max(0.0, grade.max_score - 0.5)
                    grade.needs_manual_grade = False
                    entered.append([notebook.name, grade.name, grade.manual_score, grade.max_score])
        gradebook.db.commit()
    scores = {}
    for student in gradebook.students:
        submission = gradebook.find_submission(assignment, student.id)
        scores[student.id] = {
            "score": submission.score, "max_score": submission.max_score,
            "needs_manual_grade": submission.needs_manual_grade,
            "notebooks": {nb.name: {"code_score": nb.code_score, "max_code_score": nb.max_code_score,
                                    "written_score": nb.written_score, "max_written_score": nb.max_written_score}
                          for nb in submission.notebooks}}
print(json.dumps({"entered": entered, "scores": scores}))
"""


def _gradebook(runner: Runner, instructor: UnixUser, course: Path, manual_for: str = "") -> dict:
    result = runner.run(instructor, [sys.executable, "-c", GRADEBOOK_SCRIPT, f"sqlite:///{course / 'gradebook.db'}",
                                     COURSE_ID, ASSIGNMENT, manual_for], cwd=course)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _written_points() -> tuple[int, float]:
    """(number, total points) of the written answers: graded markdown cells of the source."""
    count, points = 0, 0.0
    for path in (REPO / "solutions" / ASSIGNMENT).glob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if cell["cell_type"] == "markdown" and meta.get("grade"):
                count, points = count + 1, points + meta.get("points", 0)
    return count, points


def _course_config(course: Path, exchange: Path) -> str:
    return f'''"""The week 6 course of this instructor: the repository's configuration, then this
course's own folder, gradebook and exchange (run nbgrader from this folder)."""
from pathlib import Path

c = get_config()  # noqa: F821
REPOSITORY_CONFIG = Path({str(REPO / "nbgrader_config.py")!r})
if not REPOSITORY_CONFIG.is_file():  # load_subconfig would pass over a missing file in silence
    raise FileNotFoundError(REPOSITORY_CONFIG)
load_subconfig(str(REPOSITORY_CONFIG))  # noqa: F821
COURSE = Path(__file__).resolve().parent
c.CourseDirectory.root = str(COURSE)
c.CourseDirectory.db_url = f"sqlite:///{{COURSE / 'gradebook.db'}}"
c.CourseDirectory.course_id = {COURSE_ID!r}
c.Exchange.root = {str(exchange)!r}
'''


def _student_config(exchange: Path) -> str:
    return (f"c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.Exchange.root = {str(exchange)!r}\n")


def _owned_by(path: Path, user: UnixUser) -> list[str]:
    """Files and folders at or below ``path`` not owned by ``user``."""
    wrong = []
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            if os.lstat(name).st_uid != user.uid:
                wrong.append(name)
    return wrong


def test_the_leak_scan_finds_instructor_files(repo_root):
    """The scan below proves something only if it recognises what it looks for."""
    needles = Needles(notebook_texts(repo_root / RELEASE_DIRECTORY / ASSIGNMENT))
    kinds = {hit.split(":")[0] for hit in needles.found_in(notebook_texts(repo_root / "solutions" / ASSIGNMENT))}
    assert {"solution", "model answer"} <= kinds
    hidden = text_of(repo_root / "autograder" / "hidden" / "part_b_bert_gpt" / "test_2_attention.py")
    assert {"hidden test code", "hidden test name"} <= {hit.split(":")[0] for hit in needles.found_in(hidden)}
    # In feedback the tests' names are shown by design, their code never.
    assert {hit.split(":")[0] for hit in needles.found_in(hidden, feedback=True)} == {"hidden test code",
                                                                                     "hidden test name"}
    assert not any(hit.endswith("test_softmax_matches_reference") for hit in needles.found_in(hidden, feedback=True))
    assert needles.found_in(text_of(repo_root / "autograder" / "reference" / "losses.py"))
    # What a student wrote is theirs.
    own = notebook_texts(SAMPLES / FULL / ASSIGNMENT)
    assert needles.found_in(own) and not needles.found_in(own, own=own)


@needs_root_tools
def test_nbgrader_lifecycle_with_real_users(repo_root):
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="w6-lifecycle-"))
    os.chmod(base, 0o755)
    life = Lifecycle(base)
    pid = os.getpid()
    try:
        with life.step("create users and the exchange"):
            (base / "home").mkdir(mode=0o755)
            instructor = life.user(f"w6i_{pid}")
            students = {FULL: life.user(f"w6s1_{pid}"), HALF: life.user(f"w6s2_{pid}")}
            # nbgrader's documented exchange: root's, writable by all; sticky, so that
            # nobody removes what someone else put at its top level.
            life.exchange.mkdir()
            os.chmod(life.exchange, 0o1777)
            course = instructor.home / "course"
            shutil.copytree(repo_root / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
            write_as(instructor, course / "nbgrader_config.py", _course_config(course, life.exchange))
            chown_tree(course, instructor)
            for student in students.values():
                write_as(student, student.home / ".jupyter" / "nbgrader_config.py", _student_config(life.exchange))

        from week6_helpers.assets import cache_dir

        cache = cache_dir()
        needed = {os.path.realpath(p): True for p in (sys.base_prefix, sys.prefix, repo_root)}
        env = {"PATH": f"{Path(sys.executable).parent}:{SYSTEM_PATH}", "LANG": "C.UTF-8",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "MPLBACKEND": "Agg",
               # nbgrader only logs an error in a configuration file and goes on without it
               # (for autograde: stock Execute, student code in a kernel); this makes it stop.
               "TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR": "1"}
        if cache.is_dir():  # the converted decoder, shared read-only
            needed[os.path.realpath(cache)] = True
            env["WEEK6_CACHE"] = os.path.realpath(cache)
        runner = Runner(needed, env)
        hide_from_students = [str(p) for p in INSTRUCTOR_ONLY if p.is_dir()]

        def as_student(student: UnixUser, *args: str, **kwargs):
            return _nbgrader(runner, student, *args, cwd=student.home, hidden=hide_from_students, **kwargs)

        with life.step("instructor: nbgrader generate_assignment"):
            _nbgrader(runner, instructor, "generate_assignment", ASSIGNMENT, cwd=course)
        release = course / RELEASE_DIRECTORY / ASSIGNMENT
        stems = sorted(p.stem for p in release.glob("*.ipynb"))
        assert stems == sorted(p.stem for p in (repo_root / "solutions" / ASSIGNMENT).glob("*.ipynb"))
        needles = Needles(notebook_texts(release))

        with life.step("instructor: nbgrader release_assignment"):
            _nbgrader(runner, instructor, "release_assignment", ASSIGNMENT, cwd=course)
        outbound = life.exchange / COURSE_ID / "outbound" / ASSIGNMENT
        assert sorted(p.stem for p in outbound.glob("*.ipynb")) == stems
        assert not _owned_by(outbound, instructor)
        root_stat = os.stat(life.exchange)
        assert (root_stat.st_uid, stat.S_IMODE(root_stat.st_mode)) == (0, 0o1777), "nbgrader changed the exchange"

        with life.step("students: nbgrader fetch_assignment"):
            _each(students, lambda sample, student: as_student(student, "fetch_assignment", ASSIGNMENT))
            for sample, student in students.items():
                assert sorted(p.stem for p in (student.home / ASSIGNMENT).glob("*.ipynb")) == stems
                _scan_home(needles, student, own="")

        with life.step("students: fill in (copy the sample notebooks)"):
            for sample, student in students.items():
                for notebook in sorted((SAMPLES / sample / ASSIGNMENT).glob("*.ipynb")):
                    target = student.home / ASSIGNMENT / notebook.name
                    shutil.copyfile(notebook, target)
                    os.chown(target, student.uid, student.gid)
                life.own[student.name] = notebook_texts(SAMPLES / sample / ASSIGNMENT)
                _scan_home(needles, student, own=life.own[student.name])

        with life.step("students: nbgrader validate (one notebook each)"):
            results = _each(students, lambda sample, student: as_student(
                student, "validate", f"{ASSIGNMENT}/{VALIDATE[sample]}.ipynb", extra_env={"WEEK6_FAST": "1"}))
            for sample, student in students.items():
                output = results[sample].stdout + results[sample].stderr
                if sample == FULL:
                    assert "Success! Your notebook passes all the tests." in output, output[-4000:]
                else:
                    assert re.search(r"VALIDATION FAILED ON \d+ CELL\(S\)", output), output[-4000:]
                    assert "NotImplementedError" in output, output[-4000:]
                _scan_home(needles, student, own=life.own[student.name])

        with life.step("students: nbgrader submit"):
            _each(students, lambda sample, student: as_student(student, "submit", ASSIGNMENT))
            for sample, student in students.items():
                _scan_home(needles, student, own=life.own[student.name])
        inbound = life.exchange / COURSE_ID / "inbound"
        for student in students.values():
            submissions = sorted(inbound.glob(f"{student.name}+{ASSIGNMENT}+*"))
            assert len(submissions) == 1, f"{student.name}: {submissions}"
            assert sorted(p.stem for p in submissions[0].glob("*.ipynb")) == stems
            wrong = _owned_by(submissions[0], student)
            assert not wrong, f"not owned by {student.name} in the exchange: {wrong}"
        assert os.stat(inbound).st_mode & 0o7777 == 0o2733, oct(os.stat(inbound).st_mode)

        with life.step("instructor: nbgrader collect"):
            _nbgrader(runner, instructor, "collect", ASSIGNMENT, cwd=course)
        for student in students.values():
            collected = course / "submitted" / student.name / ASSIGNMENT
            assert sorted(p.stem for p in collected.glob("*.ipynb")) == stems
            assert not _owned_by(collected, instructor)

        with life.step("instructor: bubblewrap probe (as the grader does)"):
            probe = runner.run(instructor, [sys.executable, "-c", "from autograder.sandbox.isolation import "
                                            "bwrap_support as s; print(s().usable, s().reason)"], cwd=course)
        # Otherwise autograde would grade in degraded mode, and nothing in its output would say so.
        assert probe.stdout.startswith("True"), f"bwrap does not work for the instructor: {probe.stdout}{probe.stderr}"

        with life.step("instructor: nbgrader autograde (2 students x 8)"):
            _nbgrader(runner, instructor, "autograde", ASSIGNMENT, cwd=course)
        # The sandboxed grader wrote each test cell's outputs, not a kernel.
        graded = text_of(course / "autograded" / students[HALF].name / ASSIGNMENT / "part_b_bert_gpt.ipynb")
        assert re.search(r"FAILED\s+\S+/\S+\s+test_clm_loss", graded), "no grader report in the test cells"

        with life.step("instructor: manual grades (gradebook API)"):
            book = _gradebook(runner, instructor, course, manual_for=students[FULL].name)
        scores, entered = book["scores"], book["entered"]
        for sample, student in students.items():
            for stem in stems:
                expected = EXPECTED.get(f"{sample}/{stem}") or EXPECTED[f"{UNTOUCHED}/{stem}"]
                got = scores[student.name]["notebooks"][stem]
                assert (got["code_score"], got["max_code_score"]) == (expected["score"], expected["max_score"]), \
                    f"{student.name} ({sample}) {stem}: {got} != expected {expected}"
        count, points = _written_points()
        assert len(entered) == count, f"{len(entered)} written answers graded, the notebooks have {count}"
        assert sum(e[3] for e in entered) == points
        manual = sum(e[2] for e in entered)
        auto_full = sum(EXPECTED[f"{FULL}/{stem}"]["score"] for stem in stems)
        full, half = scores[students[FULL].name], scores[students[HALF].name]
        assert full["score"] == pytest.approx(auto_full + manual), (full["score"], auto_full, manual)
        assert not full["needs_manual_grade"]
        auto_half = EXPECTED[f"{HALF}/part_b_bert_gpt"]["score"]
        assert half["score"] == pytest.approx(auto_half) and half["needs_manual_grade"]
        print(f"[lifecycle] scores: {students[FULL].name} ({FULL}) {full['score']:g}/{full['max_score']:g} "
              f"= {auto_full:g} auto-graded + {manual:g} manual; {students[HALF].name} ({HALF}) "
              f"{half['score']:g}/{half['max_score']:g}", flush=True)

        with life.step("instructor: nbgrader generate_feedback"):
            _nbgrader(runner, instructor, "generate_feedback", ASSIGNMENT, cwd=course)
        with life.step("instructor: nbgrader release_feedback"):
            _nbgrader(runner, instructor, "release_feedback", ASSIGNMENT, cwd=course)

        with life.step("students: nbgrader fetch_feedback"):
            _each(students, lambda sample, student: as_student(student, "fetch_feedback", ASSIGNMENT))
            for sample, student in students.items():
                _scan_home(needles, student, own=life.own[student.name], feedback=True)
        for sample, student in students.items():
            pages = {p.stem: p for p in (student.home / ASSIGNMENT / "feedback").glob("*/*.html")}
            assert sorted(pages) == stems, f"{student.name}'s feedback: {sorted(pages)}"
            assert not _owned_by(student.home / ASSIGNMENT / "feedback", student)
            for page in pages.values():
                text = text_of(page)
                assert "BEGIN HIDDEN TESTS" not in text
                assert not needles.found_in(text, own=life.own[student.name], feedback=True)
        # Student 2's feedback names each failing hidden test of the item and gives the grader's message.
        half_page = text_of(next((students[HALF].home / ASSIGNMENT / "feedback").glob("*/part_b_bert_gpt.html")))
        for item, status in EXPECTED[f"{HALF}/part_b_bert_gpt"]["statuses"].items():
            shown = re.findall(rf"^{status.upper()}\s+\S+/\S+\s+({re.escape(item)}\S*)\n(\S.*)$", half_page, re.M)
            assert shown, f"feedback of {HALF} does not show {item} as {status} with a message"
            assert all(len(message) > 20 for _, message in shown), shown
    finally:
        problems = _cleanup_users(life.users)
        shutil.rmtree(base, ignore_errors=True)
        total = time.monotonic() - started
        print(f"[lifecycle] {'total':<48} {total:7.1f} s", flush=True)
    assert not problems, problems
