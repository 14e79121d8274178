"""The student handout (handouts/) stays aligned with the notebooks.

- every graded item that the handout's "Where in the notebooks" boxes name exists in its
  notebook, with the points the handout states;
- every graded cell of every notebook (auto-graded tests and written answers) is named in the
  handout; notebooks that do not exist yet are skipped;
- every figure the handout shows exists, and figure references point at shown figures;
- ``python handouts/build.py --check`` passes (week6.html and grading_map.md are up to date);
- every formula of week6.md is MathML in week6.html, and no LaTeX is left in its text;
- the totals of grading_map.md equal the sums of the notebooks' points.

All fast: nothing here loads a model.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import TEST, load_course
from autograder.paths import REPO

HANDOUTS = REPO / "handouts"
HANDOUT = HANDOUTS / "week6.md"
GRADING_MAP = HANDOUTS / "grading_map.md"
SOURCE = REPO / "solutions" / "week6"

# "- `part_b_bert_gpt.ipynb` → `mask_tokens` (graded by `test_mask_tokens`, 6 points)"
# "- `part_b_bert_gpt.ipynb` → `b1_token_counts` (written answer, 1 point)"
ITEM = re.compile(
    r"^>?\s*[-*]\s+`(?P<notebook>\w+)\.ipynb`\s*(?:→|->)\s*`(?P<item>\w+)`\s*"
    r"\((?:graded by `(?P<test>\w+)`|(?P<written>written answer)),\s*(?P<points>\d+(?:\.\d+)?) points?\)",
    re.M)
IMAGE = re.compile(r"!\[[^\]]*\]\((figures/[\w.-]+\.png)(?: \"[^\"]*\")?\)")
OPTIONAL_FIGURE = re.compile(r"^<!-- optional-figure: (figures/[\w.-]+\.png) \| .+? -->$", re.M)
FIGURE_REFERENCE = re.compile(r"\[Figure\]\(#fig-([\w.-]+)\)")


def _handout() -> str:
    return HANDOUT.read_text(encoding="utf-8")


def _items() -> list[re.Match]:
    return list(ITEM.finditer(_handout()))


def _notebook_stems() -> list[str]:
    """The course's notebooks (autograder/course.py), in its order."""
    return load_course().stems


def _graded_cells(stem: str) -> dict[str, tuple[str, float]]:
    """grade_id -> (kind, points) of the cells that carry points: test cells and written answers."""
    return {item.grade_id: ("auto" if item.kind == TEST else "written", item.points)
            for item in load_course().notebook(stem).graded}


def _solution_ids(stem: str) -> set[str]:
    return {item.grade_id for item in load_course().notebook(stem).solutions}


def test_the_handout_names_graded_items():
    items = _items()
    assert len(items) >= 40, f"expected the handout's 'Where in the notebooks' boxes, found {len(items)} items"
    notebooks = {m["notebook"] for m in items}
    assert set(_notebook_stems()) <= notebooks, (
        f"notebooks with no box in the handout: {sorted(set(_notebook_stems()) - notebooks)}")


def test_named_items_exist_with_the_stated_points():
    present = set(_notebook_stems())
    problems = []
    for match in _items():
        stem, item, points = match["notebook"], match["item"], float(match["points"])
        if stem not in present:  # a notebook still being written: nothing to compare yet
            continue
        cells = _graded_cells(stem)
        if match["test"]:
            if match["test"] != f"test_{item}":
                problems.append(f"{stem}: {item} is graded by test_{item}, not {match['test']}")
            elif match["test"] not in cells or cells[match["test"]][0] != "auto":
                problems.append(f"{stem}: no auto-graded cell {match['test']}")
            elif cells[match["test"]][1] != points:
                problems.append(f"{stem}: {match['test']} has {cells[match['test']][1]:g} points, "
                                f"the handout says {points:g}")
            if item not in _solution_ids(stem):
                problems.append(f"{stem}: no solution cell {item}")
        else:
            if item not in cells or cells[item][0] != "written":
                problems.append(f"{stem}: no written-answer cell {item}")
            elif cells[item][1] != points:
                problems.append(f"{stem}: {item} has {cells[item][1]:g} points, the handout says {points:g}")
    assert not problems, "the handout disagrees with the notebooks:\n" + "\n".join(problems)


@pytest.mark.parametrize("stem", _notebook_stems())
def test_every_graded_cell_is_named_in_the_handout(stem):
    named = set()
    for match in _items():
        if match["notebook"] == stem:
            named.add(match["test"] or match["item"])
    missing = sorted(set(_graded_cells(stem)) - named)
    assert not missing, (f"graded cells of {stem}.ipynb that the handout's boxes do not name "
                         f"(add them to handouts/week6.md): {missing}")


def test_grade_ids_in_the_text_exist():
    """Any `test_...` cell name anywhere in the handout is a real graded cell (of a present notebook)."""
    known = set()
    for stem in _notebook_stems():
        known |= set(_graded_cells(stem))
    planned = {m["test"] for m in _items() if m["test"] and m["notebook"] not in _notebook_stems()}
    mentioned = set(re.findall(r"`(test_\w+)`", _handout())) - {"test_function_name"}
    unknown = sorted(mentioned - known - planned)
    assert not unknown, f"the handout names test cells that no notebook has: {unknown}"


def test_figures_exist():
    text = _handout()
    shown = IMAGE.findall(OPTIONAL_FIGURE.sub("", text))
    assert len(shown) >= 8, f"expected the handout's figures, found {shown}"
    missing = [path for path in shown if not (HANDOUTS / path).is_file()]
    assert not missing, f"figures missing (run python handouts/figures.py): {missing}"
    names = {Path(path).stem for path in shown} | {Path(p).stem for p in OPTIONAL_FIGURE.findall(text)}
    dangling = sorted(set(FIGURE_REFERENCE.findall(text)) - names)
    assert not dangling, f"[Figure](#fig-...) references to figures the handout does not show: {dangling}"
    page = (HANDOUTS / "week6.html").read_text(encoding="utf-8")
    linked = set(re.findall(r'src="(figures/[^"]+)"', page))
    assert linked, "week6.html shows no figure"
    assert all((HANDOUTS / path).is_file() for path in linked), f"week6.html links missing figures: {linked}"


def test_html_is_self_contained():
    page = (HANDOUTS / "week6.html").read_text(encoding="utf-8")
    assert "<script" not in page, "the page should need no script"
    loaded = re.findall(r'(?:src|href)="(https?:)?//', page) + re.findall(r"@import|url\(\s*['\"]?https?:", page)
    assert not loaded, "the page must not load anything from the network (no CDN)"
    assert 'id="toc"' in page, "the page has a table of contents"


def test_every_formula_is_mathml():
    """Each formula that the shared math rules find in week6.md is one <math> element of week6.html."""
    from autograder.mathml import replace_math

    displays: list[bool] = []
    replace_math(_handout(), lambda latex, display: displays.append(display) or "")
    page = (HANDOUTS / "week6.html").read_text(encoding="utf-8")
    assert len(displays) >= 150, f"expected the handout's formulas, found {len(displays)}"
    assert page.count("<math ") == len(displays), "a formula of week6.md is not MathML in week6.html"
    assert page.count('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">') == displays.count(True)
    prose = re.sub(r"<pre>.*?</pre>|<code>.*?</code>|<style>.*?</style>", "", page, flags=re.S)
    assert "$" not in prose, "a $ of the handout was neither math nor code"
    mathml_text = "".join(re.findall(r">([^<]*)<", "".join(re.findall(r"<math .*?</math>", page))))
    assert "\\" not in mathml_text, "a LaTeX command was left as text in the MathML"


def test_latex2mathml_gaps_are_filled_and_unknown_commands_refused():
    """autograder/mathml.py: \\arg and \\text escapes, which latex2mathml 3.81 shows as LaTeX, and strictness."""
    from autograder.mathml import MathError, convert_formula

    assert "<mi>arg</mi>" in convert_formula(r"\arg\max_w z_w", display=False)
    assert "<mtext>a_b&#x000A0;5%&#x000A0;x&amp;y</mtext>" in convert_formula(r"\text{a\_b 5\% x\&y}", display=False)
    assert "\\unknowncommand" in convert_formula(r"\unknowncommand x", display=False)  # not strict: as latex2mathml
    with pytest.raises(MathError, match="does not know"):
        convert_formula(r"\unknowncommand x", display=False, strict=True)
    with pytest.raises(MathError):
        convert_formula(r"\frac{1}{", display=True)


def test_build_check_passes(repo_root):
    result = subprocess.run([sys.executable, str(HANDOUTS / "build.py"), "--check"], capture_output=True,
                            text=True, cwd=repo_root, timeout=120)
    assert result.returncode == 0, (
        "handouts/week6.html or handouts/grading_map.md is out of date or cannot be built; run "
        f"`python handouts/build.py`:\n{result.stdout}{result.stderr}")


def _map_totals() -> dict[str, tuple[float, float, float, str]]:
    rows = {}
    section = GRADING_MAP.read_text(encoding="utf-8").split("## Totals per notebook", 1)
    assert len(section) == 2, "grading_map.md has no 'Totals per notebook' section"
    for line in section[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[\d.]+", cells[1]):
            continue
        name = cells[0].strip("`*")
        rows[name] = (float(cells[1]), float(cells[2]), float(cells[3]), cells[4])
    return rows


def test_grading_map_totals_equal_the_notebooks_points():
    rows = _map_totals()
    grand_auto = grand_manual = 0.0
    for notebook in load_course().notebooks:
        stem, auto, manual = notebook.stem, notebook.auto_points, notebook.written_points
        key = f"{stem}.ipynb"
        assert key in rows, f"grading_map.md has no totals row for {key}"
        assert rows[key][3] == "present", f"{key} exists but grading_map.md calls it {rows[key][3]!r}"
        assert rows[key][:3] == (auto, manual, auto + manual), (
            f"{key}: grading_map.md says auto {rows[key][0]:g}, manual {rows[key][1]:g}, total {rows[key][2]:g}; "
            f"the notebook has {auto:g} + {manual:g} = {auto + manual:g}")
        grand_auto, grand_manual = grand_auto + auto, grand_manual + manual
    for name, row in rows.items():
        if name.endswith(".ipynb") and not (SOURCE / name).is_file():
            assert row[3].startswith("planned"), f"{name} does not exist but is counted in grading_map.md"
    total = rows.get("all present notebooks")
    assert total is not None, "grading_map.md has no grand-total row"
    assert total[:3] == (grand_auto, grand_manual, grand_auto + grand_manual), (
        f"grand total {total[:3]} differs from the notebooks' {grand_auto:g} + {grand_manual:g}")


def test_a_figure_is_drawn_deterministically(tmp_path):
    """figures.py writes no timestamp or version into its PNGs (checked on a figure without torch)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("handout_figures", HANDOUTS / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    for out in ("a", "b"):
        assert figures.main(["--only", "pipeline", "--out", str(tmp_path / out)]) == 0
    assert (tmp_path / "a" / "pipeline.png").read_bytes() == (tmp_path / "b" / "pipeline.png").read_bytes()
