"""``python -m autograder.build.regen`` (``make regen``): every generated file, one check-or-write helper.

- on the repository, ``--check`` passes and writes nothing;
- a stale file is reported, with exit status 1, and left as it is: the handout
  (its build made to expect other bytes), the samples and the release (in
  temporary copies, where write mode then repairs them: rewritten, and a file
  that should not exist removed);
- the helper itself, and the SHA256SUMS check, on files in a temporary folder.

Nothing here changes a file of the repository.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.build import regen, sample_students
from autograder.build.generated import update
from autograder.paths import SAMPLES


def _generated_files(repo_root: Path) -> dict[Path, int]:
    """The files that regen may write, with their modification times."""
    paths = [repo_root / "handouts" / "week6.html", repo_root / "handouts" / "grading_map.md",
             *sorted((repo_root / "assignments" / "week6").glob("*.ipynb")),
             *sorted((repo_root / "data" / "sample_submissions").rglob("*.ipynb")),
             repo_root / "data" / "sample_submissions" / "expected.json"]
    return {path: path.stat().st_mtime_ns for path in paths}


def test_check_passes_on_the_repository_and_writes_nothing(repo_root):
    before = _generated_files(repo_root)
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    result = subprocess.run([sys.executable, "-m", "autograder.build.regen", "--check"], cwd=repo_root, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (
        f"generated files are out of date: run `make regen`\n{result.stdout}{result.stderr}")
    for step in regen.STEPS:
        assert f"== {step}" in result.stdout, f"step {step} did not run:\n{result.stdout}"
    assert _generated_files(repo_root) == before, "regen --check touched a file"


def test_a_stale_handout_is_reported_and_left_alone(monkeypatch, capsys):
    build = regen._handout_build()
    original = build.build

    def expects_other_bytes():
        return {path: text + "<!-- newer -->\n" if path == build.OUTPUT_HTML else text
                for path, text in original().items()}

    monkeypatch.setattr(build, "build", expects_other_bytes)
    page = build.OUTPUT_HTML.read_bytes()
    assert regen.main(["--check", "--only", "handout"]) == 1
    out = capsys.readouterr().out
    assert "out of date: handouts/week6.html (differs)" in out
    assert "grading_map.md" not in out, "only the stale file is listed"
    assert build.OUTPUT_HTML.read_bytes() == page, "--check wrote the file"


def test_stale_samples_are_reported_then_repaired_in_a_copy(monkeypatch, tmp_path, capsys):
    copy = tmp_path / "sample_submissions"
    shutil.copytree(sample_students.FOLDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "expected.json").write_text("{}\n")
    stray = copy / "alice_full_solution" / "week6" / "left_over.ipynb"
    stray.write_text("{}\n")
    monkeypatch.setattr(sample_students, "FOLDER", copy)

    assert regen.main(["--check", "--only", "samples"]) == 1
    out = capsys.readouterr().out
    assert f"out of date: {copy / 'expected.json'} (differs)" in out
    assert f"out of date: {stray} (should not exist)" in out
    assert stray.is_file() and (copy / "expected.json").read_text() == "{}\n", "--check wrote something"

    assert regen.main(["--only", "samples"]) == 0
    assert not stray.exists()
    assert (copy / "expected.json").read_bytes() == (SAMPLES / "expected.json").read_bytes()
    capsys.readouterr()
    assert regen.main(["--check", "--only", "samples"]) == 0


@pytest.mark.parametrize("added, error", [
    ('stub = ["mlm_loss"]', "[notebooks.part_b_bert_gpt]: unknown key(s) ['stub']"),
    ('stubs = ["mlm_los"]', "[notebooks.part_b_bert_gpt]: no cell of the release part_b_bert_gpt.ipynb has the "
                            "grade_id 'mlm_los'"),
])
def test_a_sample_student_file_the_build_cannot_follow_is_an_error(monkeypatch, tmp_path, capsys, added, error):
    copy = tmp_path / "sample_submissions"
    shutil.copytree(sample_students.FOLDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    student = copy / "heidi_ignores_sigint.toml"
    student.write_text(student.read_text().replace('base = "solved"', f'base = "solved"\n{added}'))
    monkeypatch.setattr(sample_students, "FOLDER", copy)

    assert regen.main(["--check", "--only", "samples"]) == 1
    assert f"heidi_ignores_sigint.toml {error}" in capsys.readouterr().out


def test_a_stale_release_is_reported_then_repaired_in_a_copy(monkeypatch, tmp_path, capsys, repo_root):
    from autograder.build import release

    copy = tmp_path / "week6"
    shutil.copytree(release.RELEASE, copy)
    notebook = sorted(copy.glob("*.ipynb"))[0]
    notebook.write_text(notebook.read_text() + " ")
    extra = copy / "notes" / "old.txt"
    extra.parent.mkdir()
    extra.write_text("no longer generated\n")
    monkeypatch.setattr(release, "RELEASE", copy)

    assert sorted(release.regenerate(check=True)) == sorted([notebook, extra])
    out = capsys.readouterr().out
    assert f"out of date: {notebook} (differs)" in out and f"out of date: {extra} (should not exist)" in out
    assert extra.is_file()

    assert sorted(release.regenerate(check=False)) == sorted([notebook, extra])
    assert not extra.parent.exists(), "the emptied folder is removed too"
    assert release.differences(copy, repo_root / "assignments" / "week6") == []


def test_the_helper_writes_or_only_reports(tmp_path, capsys):
    path = tmp_path / "sub" / "file.txt"
    assert update(path, b"one\n", check=True) is True
    assert not path.exists() and "(missing)" in capsys.readouterr().out
    assert update(path, b"one\n", check=False) is True
    assert path.read_bytes() == b"one\n" and "wrote" in capsys.readouterr().out
    assert update(path, b"one\n", check=True) is False
    assert update(path, b"one\n", check=False) is False
    assert capsys.readouterr().out == "", "an up-to-date file is not mentioned"
    assert update(path, b"two\n", check=True) is True
    assert path.read_bytes() == b"one\n" and "(differs)" in capsys.readouterr().out
    assert update(path, None, check=True) is True
    assert path.is_file() and "(should not exist)" in capsys.readouterr().out
    assert update(path, None, check=False) is True
    assert not path.exists() and "removed" in capsys.readouterr().out
    assert update(path, None, check=True) is False


@pytest.mark.parametrize("check", [True, False])
def test_checksums_are_verified_in_both_modes(tmp_path, check):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "good.txt").write_bytes(b"good\n")
    (folder / "bad.txt").write_bytes(b"changed\n")
    digest = hashlib.sha256(b"good\n").hexdigest()
    listing = f"{digest}  good.txt\n{digest}  bad.txt\n{digest}  gone.txt\n"
    (folder / "SHA256SUMS").write_text(listing)
    found = regen.checksums(check, root=tmp_path)
    assert found.stale == []
    assert len(found.errors) == 2
    assert "bad.txt: does not match" in found.errors[0] and "gone.txt: listed in" in found.errors[1]
    assert (folder / "SHA256SUMS").read_text() == listing, "a list is never rewritten"


def test_the_readme_points_follow_the_course_and_its_prose_stays():
    from autograder.build.readme_points import README, ReadmeError, with_course_points
    from autograder.course import load_course

    course = load_course()
    text = README.read_text(encoding="utf-8")
    assert with_course_points(text, course) == text, "run make regen"
    stale = text.replace("| 12 | 8 |", "| 11 | 8 |", 1)
    assert stale != text and with_course_points(stale, course) == text
    row = next(line for line in text.splitlines() if line.startswith("| `exercise4_model_size.ipynb`"))
    with pytest.raises(ReadmeError, match="no row for exercise4_model_size"):
        with_course_points(text.replace(row + "\n", ""), course)
    with pytest.raises(ReadmeError, match="not one of the course's notebooks"):
        with_course_points(text.replace(row, row.replace("exercise4_model_size", "exercise9_missing")), course)
