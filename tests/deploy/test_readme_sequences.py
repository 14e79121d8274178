"""The README's TA sequence, run as written, in a fresh clone of the repository.

The commands come from the README itself (the bash block under "With nbgrader"),
so the documentation cannot drift from what works. Lines that need an exchange
or a person are left to ``test_nbgrader_lifecycle.py``; everything else runs
verbatim through ``bash`` from the clone's root, with the samples of a full and
a half-correct student put where the README says.
"""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import load_course
from autograder.paths import REPO

SAMPLES = REPO / "data" / "sample_submissions"
STUDENTS = ("alice_full_solution", "carol_half_correct")
# Needs an exchange (collect, release_feedback) or a person at a browser (jupyter lab).
INTERACTIVE = ("nbgrader collect", "nbgrader release_feedback", "jupyter lab")
pytestmark = pytest.mark.slow


def readme_block(heading: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    start = text.index(heading)
    block = re.search(r"```bash\n(.*?)```", text[start:], flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_the_ta_block_is_found_and_complete():
    commands = [line.split("#")[0].strip() for line in readme_block("**With nbgrader**")]
    assert commands[0] == "source .venv/bin/activate"
    for step in ("generate_assignment", "collect", "autograde", "generate_feedback", "release_feedback", "export"):
        assert any(f"nbgrader {step} " in f"{c} " for c in commands), step


@pytest.fixture(scope="module")
def clone(tmp_path_factory, repo_root) -> Path:
    if shutil.which("git") is None or not (repo_root / ".git").exists():
        pytest.skip("needs git and a git checkout of the repository")
    root = tmp_path_factory.mktemp("clone") / "week6"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(repo_root), str(root)], check=True)
    # What `make setup` would create; the environment is the one running the tests.
    (root / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    for student in STUDENTS:
        shutil.copytree(SAMPLES / student / "week6", root / "submitted" / student / "week6")
    return root


def test_the_ta_sequence_runs_verbatim_from_a_fresh_clone(clone, repo_root):
    lines = [line for line in readme_block("**With nbgrader**") if not line.startswith(INTERACTIVE)]
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    done = subprocess.run(["bash", "-c", script], cwd=clone, capture_output=True, text=True, timeout=1200)
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"the README's TA sequence failed:\n{log[-4000:]}"
    # No alarm where nothing is wrong: no checksum warnings, no errors in nbgrader's log.
    assert "checksum" not in log.lower(), log[-4000:]
    assert not re.search(r"\[(ERROR|CRITICAL)\]|\| (ERROR|CRITICAL) \]", log), log[-4000:]

    expected = json.loads((SAMPLES / "expected.json").read_text())
    with (clone / "grades.csv").open() as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(STUDENTS)
    stems = sorted(p.stem for p in (repo_root / "solutions" / "week6").glob("*.ipynb"))
    columns = list(next(iter(rows.values())))
    assert all(f"{stem}_score" in columns and f"{stem}_max_score" in columns for stem in stems), columns
    assert float(rows["alice_full_solution"]["part_b_bert_gpt_score"]) == load_course().notebook("part_b_bert_gpt").auto_points
    auto_total = {s: sum(v for v in expected_scores(expected, s)) for s in STUDENTS}
    for student in STUDENTS:
        assert float(rows[student]["raw_score"]) == pytest.approx(auto_total[student]), student
    feedback = clone / "feedback" / "carol_half_correct" / "week6" / "part_b_bert_gpt.html"
    assert feedback.is_file() and "hidden tests did not pass" in feedback.read_text()


def expected_scores(expected: dict, student: str) -> list[float]:
    """The auto-graded score of each of the student's notebooks, from expected.json."""
    return [float(entry["score"]) for key, entry in expected.items() if key.split("/")[0] == student]
