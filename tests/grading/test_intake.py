"""What a submitted tree holds never decides who is graded, what is read, or whether the class finishes.

Unit tests of ``autograder.intake`` on hostile trees built here (links, devices,
FIFOs, huge files, names that are not UTF-8, impersonation, duplicates), then one
class run through the CLI: the honest student keeps full marks, every hostile file
is its own student's report, the run exits 0, and the grading process stays within
its memory and time bounds.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import errors, files, intake
from autograder.paths import REPO
from autograder.report import MAX_REPORT_BYTES

SAMPLES = REPO / "data" / "sample_submissions"
SMALL = "part_a_discovery"
FULL = SAMPLES / "alice_full_solution" / "week6" / f"{SMALL}.ipynb"
RELEASE = REPO / "assignments" / "week6" / f"{SMALL}.ipynb"
INSTRUCTOR = REPO / "solutions" / "week6" / f"{SMALL}.ipynb"
SECRET = "instructor-only: the answer key is 42"
# Bounds on the trusted grading process for one small notebook, whatever the class
# holds (measured about 0.35 GiB and 5 s for part_a_discovery on 2 cores).
GRADER_PEAK_RSS_MIB = 1536
CLASS_SECONDS = 240


def notebook(folder: Path, name: str = f"{SMALL}.ipynb", source: Path = FULL) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    shutil.copy(source, target)
    return target


@pytest.fixture
def private_file(tmp_path) -> Path:
    secret = tmp_path / "private" / "answers.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    return secret


def problems(submissions) -> dict[tuple[str, str], str]:
    return {(s.student, s.name): s.problem for s in submissions if s.problem}


def graded(submissions) -> set[tuple[str, str]]:
    return {(s.student, s.name) for s in submissions if s.problem is None}


# ----------------------------------------------------------------------- identity
def test_the_student_is_the_first_folder_never_a_deeper_one(tmp_path):
    root = tmp_path / "submitted"
    notebook(root / "alice" / "week6")
    notebook(root / "mallet" / "week6" / "alice", source=RELEASE)  # filed under Alice's name
    notebook(root / "mallet" / "week6" / "alice" / "week6", source=RELEASE)
    found = intake.collect([root])
    assert graded(found) == {("alice", f"{SMALL}.ipynb")}
    assert [s.student for s in found if s.problem] == ["mallet", "mallet"]
    assert all("sub-folder" in p for p in problems(found).values())


def test_notebooks_directly_in_the_student_folder_are_graded_too(tmp_path):
    notebook(tmp_path / "submitted" / "bob")
    assert graded(intake.collect([tmp_path / "submitted"])) == {("bob", f"{SMALL}.ipynb")}


def test_duplicate_identities_are_refused_not_merged(tmp_path):
    for root in ("one", "two"):
        notebook(tmp_path / root / "alice" / "week6")
    notebook(tmp_path / "one" / "Bob" / "week6")
    notebook(tmp_path / "two" / "bob" / "week6")
    found = intake.collect([tmp_path / "one", tmp_path / "two"])
    assert graded(found) == set()
    assert sorted(s.student for s in found) == ["Bob", "alice", "alice", "bob"]
    assert all("more than one place" in s.problem for s in found)
    assert len({(s.student, s.key) for s in found}) == 4, "each refusal has a report of its own"


def test_two_copies_of_one_notebook_are_refused(tmp_path):
    notebook(tmp_path / "submitted" / "carol")
    notebook(tmp_path / "submitted" / "carol" / "week6")
    (found,) = intake.collect([tmp_path / "submitted"])
    assert found.path is None and "more than once" in found.problem


def test_the_ta_names_the_student_of_a_single_notebook(tmp_path):
    path = notebook(tmp_path / "anywhere")
    (found,) = intake.collect([path], student="dora")
    assert (found.student, found.problem) == ("dora", None)
    with pytest.raises(errors.ConfigurationError, match="--student"):
        intake.collect([path], student="../etc")
    with pytest.raises(errors.ConfigurationError, match="class root"):
        notebook(tmp_path / "submitted" / "erin" / "week6")
        intake.collect([tmp_path / "submitted"], student="dora")


# ----------------------------------------------------------------------- what is read
def test_links_devices_fifos_and_huge_files_are_reported_never_read(tmp_path, private_file, repo_root):
    root = tmp_path / "submitted"
    folder = root / "eve" / "week6"
    folder.mkdir(parents=True)
    (folder / "part_a_discovery.ipynb").symlink_to(private_file)
    (folder / "part_b_bert_gpt.ipynb").symlink_to(INSTRUCTOR)
    (folder / "part_b_finetuning.ipynb").symlink_to("/dev/zero")
    os.mkfifo(folder / "exercise1_masked_predictions.ipynb")
    with open(folder / "exercise2_finetune_vs_scratch.ipynb", "wb") as huge:
        huge.truncate(files.MAX_NOTEBOOK_BYTES + 1)  # sparse: costs no disk
    (root / "solutions").symlink_to(repo_root / "solutions", target_is_directory=True)  # a "student" that is a link
    (root / "frank").symlink_to(repo_root / "data" / "sample_submissions" / "alice_full_solution")
    started = time.perf_counter()
    found = intake.collect([root])
    assert time.perf_counter() - started < 5
    assert graded(found) == set()
    why = {s.name: s.problem for s in found}
    assert "symbolic link" in why["part_a_discovery.ipynb"] and "symbolic link" in why["part_b_bert_gpt.ipynb"]
    assert "symbolic link" in why["part_b_finetuning.ipynb"]
    assert "FIFO" in why["exercise1_masked_predictions.ipynb"]
    assert "MiB" in why["exercise2_finetune_vs_scratch.ipynb"]
    assert "symbolic link" in why["solutions"] and "symbolic link" in why["frank"]
    assert SECRET not in json.dumps([s.problem for s in found])


def test_read_regular_file_refuses_what_is_not_a_regular_file(tmp_path, private_file):
    link = tmp_path / "link.ipynb"
    link.symlink_to(private_file)
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)
    for path, fragment in ((link, "symbolic link"), (fifo, "FIFO"), (Path("/dev/zero"), "character device"),
                           (tmp_path, "folder")):
        with pytest.raises(errors.IntakeError, match=fragment):
            files.read_regular_file(path)
    big = tmp_path / "big.ipynb"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(errors.IntakeError, match="MiB"):
        files.read_regular_file(big, limit=1024)
    assert files.read_regular_file(private_file) == SECRET.encode()


# ----------------------------------------------------------------------- what a notebook holds
def _padded(tmp_path: Path, cells: int = 0, metadata=None) -> Path:
    """Alice's notebook with ``cells`` empty cells more and ``metadata`` on its first cell,
    written as plain JSON (nbformat would validate every cell)."""
    notebook = json.loads(FULL.read_text())
    notebook["cells"] += [{"cell_type": "code", "execution_count": None, "id": f"pad{i}", "metadata": {},
                           "outputs": [], "source": ""} for i in range(cells)]
    if metadata is not None:
        notebook["cells"][0]["metadata"]["extra"] = metadata
    path = tmp_path / f"{SMALL}.ipynb"
    path.write_text(json.dumps(notebook))
    return path


def _nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("build, fragments", [
    (lambda tmp: _padded(tmp, cells=files.MAX_CELLS), [f"{files.MAX_CELLS:,} cells", "delete the cells you added"]),
    (lambda tmp: _padded(tmp, metadata=[[] for _ in range(files.MAX_JSON_VALUES)]),
     [f"{files.MAX_JSON_VALUES:,} a notebook may have", "Clear Outputs"]),
    (lambda tmp: _padded(tmp, metadata=["line"] * files.MAX_JSON_VALUES), ["JSON values", "Clear Outputs"]),
    (lambda tmp: _padded(tmp, metadata=[[]] * (20 * files.MAX_JSON_VALUES)), ["JSON values", "Clear Outputs"]),
    (lambda tmp: _padded(tmp, metadata=_nested(files.MAX_JSON_DEPTH)),
     [f"nested more than {files.MAX_JSON_DEPTH} levels", "download the notebook again"]),
])
def test_a_notebook_over_a_limit_of_its_structure_is_refused_before_nbformat_reads_it(tmp_path, monkeypatch,
                                                                                      build, fragments):
    import nbformat

    from autograder.notebook import UnreadableNotebook, read_notebook

    path = build(tmp_path)
    monkeypatch.setattr(nbformat, "reads", lambda *a, **k: pytest.fail("nbformat read a notebook over a limit"))
    with pytest.raises(UnreadableNotebook) as refused:
        read_notebook(path)
    assert str(refused.value).startswith(f"{SMALL}.ipynb: ")
    for fragment in fragments:
        assert fragment in str(refused.value)


def test_a_notebook_just_within_every_limit_is_read(tmp_path):
    """The last cell, object and level a notebook may have are allowed; brackets in text
    (code, a printed tensor) are not structure."""
    from autograder.notebook import read_notebook

    cells = files.MAX_CELLS - len(json.loads(FULL.read_text())["cells"])
    # The first cell's metadata is 3 levels down (document, cells, cell, metadata, extra).
    path = _padded(tmp_path, cells=cells, metadata=[_nested(files.MAX_JSON_DEPTH - 5), "[[[[" * 100, "{" * 100])
    assert len(read_notebook(path).cells) == files.MAX_CELLS
    assert files.structure_problem(FULL.read_bytes()) is None


# ----------------------------------------------------------------------- names
@pytest.mark.parametrize("raw, fragment", [
    (b"\xff\xfe.ipynb", "not valid UTF-8"),
    ("part_a\nforged.ipynb".encode(), "control characters"),
    (b"=cmd|calc.ipynb", "must start with"),
    (b"-rf.ipynb", "must start with"),
])
def test_unusable_notebook_names_are_reported_for_their_student(tmp_path, raw, fragment):
    folder = tmp_path / "submitted" / "grace" / "week6"
    notebook(folder)
    with open(os.path.join(os.fsencode(folder), raw), "wb") as handle:
        handle.write(FULL.read_bytes())
    found = intake.collect([tmp_path / "submitted"])
    assert graded(found) == {("grace", f"{SMALL}.ipynb")}
    (bad,) = [s for s in found if s.problem]
    assert bad.student == "grace" and fragment in bad.problem
    bad.name.encode("utf-8")  # printable, whatever the bytes were


def test_unusable_student_folder_names_are_reported_not_fatal(tmp_path):
    root = tmp_path / "submitted"
    notebook(root / "heidi" / "week6")
    for raw in (b"\xff\xfe", b"=HYPERLINK(1)", "ivan\r".encode()):
        notebook(Path(os.fsdecode(os.path.join(os.fsencode(root), raw))) / "week6")
    found = intake.collect([root])
    assert graded(found) == {("heidi", f"{SMALL}.ipynb")}
    rejected = [s for s in found if s.problem]
    assert len(rejected) == 3
    assert all(s.student.startswith("unusable-name-") for s in rejected)
    assert len({s.student for s in rejected}) == 3


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "<script>", "$(touch pwned)", "`id`",
                                  "a;rm -rf ~", "x'onmouseover='1", 'say"hi"', "a b", "a&b", "50%", "-rf", "~root",
                                  "a\u202eb", "a" * (intake.MAX_NAME_CHARS + 1)])
def test_student_ids_with_markup_shell_or_control_characters_are_refused(tmp_path, name):
    """Refused with the rule and the fix, under a report name of its own; never graded as
    a mangled name, and the rest of the class is graded."""
    root = tmp_path / "submitted"
    notebook(root / "heidi" / "week6")
    notebook(root / name / "week6")
    found = intake.collect([root])
    assert graded(found) == {("heidi", f"{SMALL}.ipynb")}
    (refused,) = [s for s in found if s.problem]
    assert refused.student.startswith("unusable-name-") and refused.path is None
    assert intake.STUDENT_ID_RULE in refused.problem and "rename the folder to the student's id" in refused.problem


def test_usable_student_ids_are_graded_under_their_own_name(tmp_path):
    root = tmp_path / "submitted"
    names = ["s1234567", "ada.lovelace@example.org", "jose+week6", "_ta-check", "José", "M_Ng-2"]
    for name in names:
        notebook(root / name / "week6")
    assert graded(intake.collect([root])) == {(name, f"{SMALL}.ipynb") for name in names}


# ----------------------------------------------------------------------- the class run
def test_a_hostile_class_is_graded_to_the_end_and_the_honest_student_is_untouched(tmp_path, private_file, repo_root):
    root = tmp_path / "submitted"
    notebook(root / "alice" / "week6")
    notebook(root / "mallet" / "week6" / "alice", source=RELEASE)
    eve = root / "eve" / "week6"
    eve.mkdir(parents=True)
    (eve / f"{SMALL}.ipynb").symlink_to(private_file)
    (eve / "part_b_bert_gpt.ipynb").symlink_to(INSTRUCTOR)
    (eve / "part_b_finetuning.ipynb").symlink_to("/dev/zero")
    os.mkfifo(eve / "exercise1_masked_predictions.ipynb")
    notebook(Path(os.fsdecode(os.path.join(os.fsencode(root), b"\xff\xfe"))) / "week6")
    with open(os.path.join(os.fsencode(root / "alice" / "week6"), b"\xff.ipynb"), "wb") as handle:
        handle.write(b"{}")
    out = tmp_path / "grades"

    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "autograder", "grade", str(root), "--out", str(out),
                             "--jobs", "2", "--device", "cpu"], cwd=repo_root, capture_output=True, timeout=900)
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    assert elapsed < CLASS_SECONDS

    reports = {p.relative_to(out).as_posix(): json.loads(p.read_text()) for p in out.glob("*/*.json")}
    alice = reports.pop(f"alice/{SMALL}.json")
    assert alice["score"] == alice["max_score"] == 12
    assert alice["grader_peak_rss_mib"] < GRADER_PEAK_RSS_MIB
    alice_rejected = [r for k, r in reports.items() if k.startswith("alice/")]
    assert len(alice_rejected) == 1 and "not valid UTF-8" in alice_rejected[0]["warnings"][0]
    # Mallet, Eve and the unusable folder get nothing, each under their own name.
    assert {r["student"] for r in reports.values()} >= {"mallet", "eve"}
    assert all(r["score"] == 0 for r in reports.values())
    assert len([k for k in reports if k.startswith("eve/")]) == 4
    text = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert SECRET not in text
    assert all(p.stat().st_size < MAX_REPORT_BYTES for p in out.glob("*/*.json"))
    with (out / "grades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["student"] for r in rows].count("alice") == 2  # the notebook, and the unusable file name
    assert len(rows) == len(reports) + 1


def test_the_grader_imports_nothing_from_its_working_directory(tmp_path):
    """Grading from inside a student's folder does not import the student's modules."""
    folder = tmp_path / "submitted" / "judy" / "week6"
    notebook(folder)
    for module in ("argparse", "pytest", "json", "csv", "multiprocessing", "nbformat", "torch"):
        (folder / f"{module}.py").write_text(
            f"open({str(tmp_path / ('HIJACKED-' + module))!r}, 'w').close()\nraise SystemExit('hijacked')\n")
    out = tmp_path / "grades"
    result = subprocess.run([sys.executable, "-m", "autograder", "grade", f"{SMALL}.ipynb", "--out", str(out),
                             "--device", "cpu"], cwd=folder, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert list(tmp_path.glob("HIJACKED-*")) == []
    report = json.loads((out / "judy" / f"{SMALL}.json").read_text())
    assert report["score"] == report["max_score"] == 12


def test_report_names_never_collide_and_never_shadow_the_class_table(tmp_path):
    root = tmp_path / "submitted"
    notebook(root / "grades.csv" / "week6")  # would make grades.csv a folder
    notebook(root / "kim")
    (root / "kim" / "folder.ipynb").write_text("{}")
    notebook(Path(os.fsdecode(os.fsencode(root) + b"/\xff")))
    found = intake.collect([root])
    assert "class table" in next(s.problem for s in found if s.name == "grades.csv")
    keys = [(s.student, s.key) for s in found]
    assert len(keys) == len(set(keys))


def test_a_linked_folder_is_reported_and_junk_is_capped(tmp_path, repo_root):
    root = tmp_path / "submitted"
    (root / "lena").mkdir(parents=True)
    (root / "lena" / "week6").symlink_to(repo_root / "solutions" / "week6", target_is_directory=True)
    junk = root / "max" / "week6"
    junk.mkdir(parents=True)
    for index in range(intake.MAX_PROBLEMS_PER_STUDENT * 3):
        (junk / f"copy{index}.ipynb").write_text("{}")
    found = intake.collect([root])
    (lena,) = [s for s in found if s.student == "lena"]
    assert lena.path is None and "symbolic link" in lena.problem
    mine = [s for s in found if s.student == "max"]
    assert len(mine) == intake.MAX_PROBLEMS_PER_STUDENT
    assert "101 more files" in mine[-1].problem
