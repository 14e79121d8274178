"""What students receive gives no graded answer away.

Students get the release notebooks (``assignments/week6/*.ipynb``) and the handout
(``handouts/week6.md``, the page built from it, ``week6.html``, and the grading map
beside it). None of them may contain

(i)  code that solves a graded item: the code between ``### BEGIN SOLUTION`` and
     ``### END SOLUTION`` of the source notebooks' code cells, or the body of a reference
     implementation in ``autograder/reference/*.py``;
(ii) text of a rubric or model answer: the solution part of the source notebooks'
     written-answer (markdown) cells;
(iii) the values of a graded answer constant (``FINETUNE_CONFIG``'s learning rate, say) on a
     line that names its key: a table of typical values is the answer itself.

Both are found by overlap of normalised fragments, wherever they sit (code cell,
markdown cell, print statement, handout paragraph):

- code: runs of ``CODE_NGRAM`` tokens, with comments dropped and each string literal one
  token. Sixteen tokens is longer than any idiom two pieces of code share by accident
  (``import torch`` is 2 tokens, ``logits.softmax(dim=-1)`` 9, a whole
  ``torch.ones(n, n, dtype=torch.bool)`` 14) and shorter than one copied statement of a
  graded body, let alone a block of a few lines;
- text: runs of ``TEXT_SHINGLE`` words, lower-cased, LaTeX commands dropped (so
  ``\\frac``, ``\\mathcal`` are not words). Nine words in the same order do not recur by
  chance between a question and its rubric, unless one quotes the other.

A failure names the file, the cell index (0-based, as ``nbformat`` counts) and the
shared fragment, and where that fragment comes from. The fix is in the source: reword the
public text, or the rubric, or take the code out of the release, then ``make regen``.

The last tests plant a copied solution block and a copied rubric sentence into
in-memory copies of a release notebook and of the handout, and check that both are
found, so this test cannot pass by finding nothing. Reads JSON and text only: well
under a second.
"""
from __future__ import annotations

import ast
import copy
import html
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from autograder.notebook import reference_table, solution_regions
from autograder.paths import REPO

SOURCE = REPO / "solutions" / "week6"
RELEASE = REPO / "assignments" / "week6"
REFERENCE = REPO / "autograder" / "reference"
HANDOUTS = REPO / "handouts"
# What students read of the handout: the markdown, the page built from it, and the grading map.
HANDOUT_FILES = ("week6.md", "week6.html", "grading_map.md")

CODE_NGRAM = 16
TEXT_SHINGLE = 9

STRING = re.compile(r'("""|\'\'\')(?:.|\n)*?\1|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
COMMENT = re.compile(r"#[^\n]*")
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|==|!=|<=|>=|\*\*|//|->|[^\s\w]")
LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
WORD = re.compile(r"[a-z0-9]+")


# ------------------------------------------------------------------------------- normalising
def code_tokens(text: str, *, drop_comments: bool = True) -> list[str]:
    """Python-like tokens; every string literal is one token (whitespace collapsed)."""
    tokens: list[str] = []
    position = 0

    def plain(segment: str) -> list[str]:
        return TOKEN.findall(COMMENT.sub(" ", segment) if drop_comments else segment)

    for literal in STRING.finditer(text):
        tokens += plain(text[position:literal.start()])
        tokens.append(" ".join(literal.group(0).split()))
        position = literal.end()
    return tokens + plain(text[position:])


def words(text: str) -> list[str]:
    return WORD.findall(LATEX_COMMAND.sub(" ", text).lower())


def runs(sequence: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(sequence[i:i + n]) for i in range(len(sequence) - n + 1)]


def page_text(page: str) -> str:
    """The text of an HTML page: no style, no tags, entities decoded."""
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


# ------------------------------------------------------------------------------- the secrets
def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def _grade_id(cell: dict) -> str:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return str(meta.get("grade_id", "")) if isinstance(meta, dict) else ""


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def reference_bodies() -> dict[str, str]:
    """'autograder/reference/<module>.py: <name>' -> the statements of every function and class
    body there, without docstrings, signatures or nested definitions (each counted on its own)."""
    bodies = {}
    for module in sorted(REFERENCE.glob("*.py")):
        text = module.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                body = node.body[1:] if ast.get_docstring(node) else node.body
                body = [b for b in body if not isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
                segment = "\n".join(ast.get_source_segment(text, statement) or "" for statement in body)
                if segment.strip():
                    bodies[f"{_shown(module)}: {node.name}"] = segment
    return bodies


@lru_cache(maxsize=1)
def secrets() -> tuple[dict[tuple[str, ...], str], dict[tuple[str, ...], str]]:
    """(code n-gram -> origin, rubric shingle -> origin) over every instructor-only text."""
    code: dict[tuple[str, ...], str] = {}
    text: dict[tuple[str, ...], str] = {}
    for path in sorted(SOURCE.glob("*.ipynb")):
        for index, cell in enumerate(_cells(path)):
            origin = f"{_shown(path)} cell {index} ({_grade_id(cell) or 'no grade_id'})"
            for region in solution_regions(_source(cell)):
                if cell.get("cell_type") == "code":
                    for gram in runs(code_tokens(region), CODE_NGRAM):
                        code.setdefault(gram, f"the solution code of {origin}")
                else:
                    for gram in runs(words(region), TEXT_SHINGLE):
                        text.setdefault(gram, f"the rubric / model answer of {origin}")
    for origin, body in reference_bodies().items():
        for gram in runs(code_tokens(body), CODE_NGRAM):
            code.setdefault(gram, f"the reference implementation {origin}")
    return code, text


# ------------------------------------------------------------------------------- the detector
@dataclass(frozen=True)
class Leak:
    where: str        # the file students receive
    cell: int | None  # the cell index in a notebook (0-based); None for a handout file
    kind: str         # "solution code" or "rubric text"
    fragment: str     # the shared fragment, as normalised tokens or words
    origin: str       # where the secret comes from

    def __str__(self) -> str:
        place = f"{self.where}, cell {self.cell}" if self.cell is not None else self.where
        fragment = self.fragment if len(self.fragment) <= 240 else self.fragment[:237] + "..."
        return f"{place}: {self.kind} from {self.origin}: {fragment!r}"


def _merged(hits: list[int], n: int) -> list[tuple[int, int]]:
    """Maximal spans [start, end) covered by the matching runs of length ``n`` that start at ``hits``."""
    spans: list[tuple[int, int]] = []
    for start in hits:
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], start + n))
        else:
            spans.append((start, start + n))
    return spans


def _found(sequence: list[str], n: int, known: dict[tuple[str, ...], str]) -> list[tuple[str, str]]:
    """(shared fragment, origin of its first run) for every stretch of ``sequence`` found in ``known``."""
    hits = [i for i, gram in enumerate(runs(sequence, n)) if gram in known]
    return [(" ".join(sequence[a:b]), known[tuple(sequence[a:a + n])]) for a, b in _merged(hits, n)]


def find_leaks(text: str, where: str, cell: int | None = None, *, is_code: bool = False) -> list[Leak]:
    """Every fragment of ``text`` that is solution code or rubric text."""
    code, rubric = secrets()
    leaks = [Leak(where, cell, "solution code", fragment, origin)
             for fragment, origin in _found(code_tokens(text, drop_comments=is_code), CODE_NGRAM, code)]
    leaks += [Leak(where, cell, "rubric text", fragment, origin)
              for fragment, origin in _found(words(text), TEXT_SHINGLE, rubric)]
    return leaks


def notebook_leaks(notebook: dict, where: str) -> list[Leak]:
    leaks = []
    for index, cell in enumerate(notebook["cells"]):
        leaks += find_leaks(_source(cell), where, index, is_code=cell.get("cell_type") == "code")
    return leaks


def handout_text(name: str) -> str:
    text = (HANDOUTS / name).read_text(encoding="utf-8")
    return page_text(text) if name.endswith(".html") else text


def _report(leaks: list[Leak]) -> str:
    return ("answers given away to students (reword the public text or the rubric in the source, or take "
            "the code out; then `make regen`):\n" + "\n".join(f"- {leak}" for leak in leaks))


# ------------------------------------------------------------------------------- the checks
RELEASED = sorted(path.stem for path in RELEASE.glob("*.ipynb"))


def test_there_is_something_to_protect():
    """The secrets are found at all (a broken marker pattern would make every check pass)."""
    code, rubric = secrets()
    origins = {origin.split(" cell ")[0] for origin in [*code.values(), *rubric.values()]}
    assert len(code) > 5000 and len(rubric) > 5000, (len(code), len(rubric))
    assert {f"the solution code of {_shown(SOURCE / f'{stem}.ipynb')}" for stem in RELEASED} <= origins
    assert {f"the rubric / model answer of {_shown(SOURCE / f'{stem}.ipynb')}" for stem in RELEASED} <= origins
    assert any(origin.startswith("the reference implementation") for origin in code.values())
    assert RELEASED == sorted(path.stem for path in SOURCE.glob("*.ipynb"))


@pytest.mark.parametrize("stem", RELEASED)
def test_release_notebook_gives_no_answer_away(stem):
    path = RELEASE / f"{stem}.ipynb"
    leaks = notebook_leaks(json.loads(path.read_text(encoding="utf-8")), _shown(path))
    assert not leaks, _report(leaks)


@pytest.mark.parametrize("name", HANDOUT_FILES)
def test_handout_gives_no_answer_away(name):
    leaks = find_leaks(handout_text(name), _shown(HANDOUTS / name))
    assert not leaks, _report(leaks)


# ------------------------------------------------------------------------------- the detector detects
def _solution_block(stem: str, grade_id: str, lines: int = 3) -> str:
    """The first ``lines`` code lines (no comments, no blank lines) of a source solution region."""
    (cell,) = [c for c in _cells(SOURCE / f"{stem}.ipynb") if _grade_id(c) == grade_id]
    (region,) = solution_regions(_source(cell))
    code = [line for line in region.splitlines() if line.strip() and not line.strip().startswith("#")]
    return "\n".join(line.strip() for line in code[:lines])


def _rubric_sentence(stem: str, grade_id: str) -> str:
    """One line of prose from the model answer of a written-answer cell of the source."""
    (cell,) = [c for c in _cells(SOURCE / f"{stem}.ipynb") if _grade_id(c) == grade_id]
    (region,) = solution_regions(_source(cell))
    return max(region.splitlines(), key=lambda line: len(words(line)))


def test_a_planted_solution_and_rubric_sentence_are_found_in_a_notebook():
    path = RELEASE / "exercise1_masked_predictions.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert not notebook_leaks(notebook, "copy")
    planted = copy.deepcopy(notebook)
    code_cell = next(i for i, c in enumerate(planted["cells"]) if c["cell_type"] == "code" and not _grade_id(c))
    text_cell = next(i for i, c in enumerate(planted["cells"]) if c["cell_type"] == "markdown" and not _grade_id(c))
    block = _solution_block("part_b_bert_gpt", "mask_tokens")
    sentence = _rubric_sentence("part_b_finetuning", "b3_large_lr")
    planted["cells"][code_cell]["source"] = _source(planted["cells"][code_cell]) + "\n\n# my helper\n" + block
    planted["cells"][text_cell]["source"] = _source(planted["cells"][text_cell]) + "\n\nHint: " + sentence + "\n"

    leaks = notebook_leaks(planted, "copy")
    by_kind = {leak.kind: leak for leak in leaks}
    assert set(by_kind) == {"solution code", "rubric text"} and len(leaks) == 2, [str(leak) for leak in leaks]
    assert by_kind["solution code"].cell == code_cell
    assert "part_b_bert_gpt.ipynb cell" in by_kind["solution code"].origin
    assert "(mask_tokens)" in by_kind["solution code"].origin
    assert by_kind["rubric text"].cell == text_cell
    assert "(b3_large_lr)" in by_kind["rubric text"].origin
    # The reported fragment is the whole shared run, not just its first n-gram.
    assert len(by_kind["rubric text"].fragment.split()) == len(words(sentence))
    assert str(by_kind["rubric text"]).startswith(f"copy, cell {text_cell}: rubric text from ")


def test_a_planted_reference_body_and_rubric_sentence_are_found_in_the_handout():
    handout = handout_text("week6.md")
    assert not find_leaks(handout, "copy")
    origin, body = next((o, b) for o, b in reference_bodies().items() if o.endswith("losses.py: clm_loss"))
    reference = "\n".join([line for line in body.splitlines() if "#" not in line][:3])
    sentence = _rubric_sentence("part_b_bert_gpt", "b_nsp_dropped")
    planted = handout.replace("## Theory exercises\n",
                              f"## Theory exercises\n\n```python\n{reference}\n```\n\n{sentence}\n", 1)
    leaks = {leak.kind: leak for leak in find_leaks(planted, "copy")}
    assert sorted(leaks) == ["rubric text", "solution code"], [str(leak) for leak in leaks.values()]
    assert leaks["solution code"].origin == f"the reference implementation {origin}"
    assert leaks["solution code"].cell is None and "(b_nsp_dropped)" in leaks["rubric text"].origin
    page = page_text(f"<html><style>p {{}}</style><body><p>{html.escape(sentence)}</p></body></html>")
    assert [leak.kind for leak in find_leaks(page, "copy")] == ["rubric text"]


def test_shared_idioms_are_not_leaks():
    ordinary = """\
import torch
import torch.nn.functional as F
probs = logits.softmax(dim=-1)
mask = torch.ones(n, n, dtype=torch.bool)
loss = F.cross_entropy(logits, labels)
with torch.no_grad():
    out = model(**batch)
"""
    assert find_leaks(ordinary, "idioms", is_code=True) == []
    question = "Why does fine-tuning use a small learning rate? Quote the numbers your notebook printed."
    assert find_leaks(question, "question") == []


# ------------------------------------------------------------------------------- formulas in the stubs
# An operator between spaces, so hyphenated words ("top-k", "left-to-right") are not arithmetic.
ARITHMETIC = r"\s+(?:\*\*|[-+*/])\s+"


def docstring_formulas(source: str) -> list[tuple[str, str]]:
    """(function, line) for each docstring line of a function in ``source`` that combines one of
    its parameters by arithmetic (``mask_rate * n_tokens``, ``seq_len - 1``, ``1 / mask_rate``).
    A stub states the quantity to compute, its inputs and its edge cases; deriving the formula is
    the student's work, so its docstring never writes it out."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not ast.get_docstring(node):
            continue
        arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        names = "|".join(re.escape(a.arg) for a in arguments if a.arg not in ("self", "cls"))
        if not names:
            continue
        formula = re.compile(rf"\b(?:{names})\b{ARITHMETIC}[\w(.]|[\w).]{ARITHMETIC}\b(?:{names})\b")
        found += [(node.name, line.strip()) for line in ast.get_docstring(node).splitlines() if formula.search(line)]
    return found


# Stubs whose docstring must write out arithmetic, because it is the contract the student
# implements rather than the answer the student derives; each with the reason.
CONTRACT_ARITHMETIC = {
    "linear_warmup_decay": "the schedule the lecture gives; the item is implementing it exactly",
    "training_flops": "the course teaches C = 6ND itself (handout, exercise 4); the item applies it",
    "random_spans_noise_mask": "T5's recipe, fixed to the count so that the hidden tests can check the draws",
    "bert_pair_input": "the length budget of the truncation the contract specifies",
    "subsample_balanced": "how a draw shares n examples among C classes, part of the contract",
    "freeze_layers": "an index range, not a formula",
    "truncate_encoder": "an index range, not a formula",
}


def _stub_formulas(stem: str) -> list[tuple[int, str, str]]:
    path = RELEASE / f"{stem}.ipynb"
    return [(index, *hit) for index, cell in enumerate(_cells(path)) if cell.get("cell_type") == "code"
            for hit in docstring_formulas(_source(cell))]


def test_contract_arithmetic_names_stubs_that_need_it():
    """Each exception above still has arithmetic in its docstring (else it is dropped from the list)."""
    named = {name for stem in RELEASED for _, name, _ in _stub_formulas(stem)}
    assert set(CONTRACT_ARITHMETIC) <= named, sorted(set(CONTRACT_ARITHMETIC) - named)


@pytest.mark.parametrize("stem", RELEASED)
def test_release_stubs_leave_the_formula_to_the_student(stem):
    path = RELEASE / f"{stem}.ipynb"
    found = [hit for hit in _stub_formulas(stem) if hit[1] not in CONTRACT_ARITHMETIC]
    assert not found, f"{_shown(path)}: stub docstrings that write out the formula to derive (say what the " \
                      "quantity is, not how to compute it, in the source notebook, then make regen):\n" + \
                      "\n".join(f"  cell {index}, {name}: {line}" for index, name, line in found)


def test_a_formula_in_a_docstring_is_found():
    stub = '''def mlm_signal(n_tokens: int, mask_rate: float = 0.15) -> dict:
    """Targets per pass.

    - "mlm_predictions": mask_rate * n_tokens, an expected count;
    - "passes": 1 / mask_rate;
    - the top-k of n_tokens - not a formula - the left-to-right model.
    """
    raise NotImplementedError()
'''
    assert [line for _, line in docstring_formulas(stub)] == [
        '- "mlm_predictions": mask_rate * n_tokens, an expected count;', '- "passes": 1 / mask_rate;',
        "- the top-k of n_tokens - not a formula - the left-to-right model."]


# ------------------------------------------------------------------------------- reference tables
SECTION_HEADING = re.compile(r"#{2,3} ")


def _is_written_answer(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "markdown" and bool(meta.get("grade")) and bool(meta.get("solution"))


def _is_heading(cell: dict) -> bool:
    return cell.get("cell_type") == "markdown" and bool(SECTION_HEADING.match(_source(cell)))


def answers_after_a_table(cells: list[dict]) -> list[tuple[int, str]]:
    """(cell, grade_id) of each written answer that stands after a "What you should see" table of its
    section: a student would answer the question from the course's numbers instead of their own run."""
    found, table = [], None
    for index, cell in enumerate(cells):
        if _is_heading(cell):
            table = None
        elif reference_table(cell):
            table = index
        elif table is not None and _is_written_answer(cell):
            found.append((index, _grade_id(cell)))
    return found


@pytest.mark.parametrize("stem", RELEASED)
def test_reference_tables_follow_the_questions_of_their_section(stem):
    path = RELEASE / f"{stem}.ipynb"
    found = answers_after_a_table(_cells(path))
    assert not found, (f"{_shown(path)}: written answers after their section's reference table (move the table "
                       "after the section's last answer cell in the source notebook, then make regen): "
                       + ", ".join(f"cell {index} ({grade_id})" for index, grade_id in found))


def test_an_answer_after_a_table_is_found():
    table = {"cell_type": "markdown", "metadata": {"week6": {"reference_values": "Main run"}}, "source": "| |"}
    answer = {"cell_type": "markdown", "metadata": {"nbgrader": {"grade": True, "solution": True, "grade_id": "q"}},
              "source": "YOUR ANSWER HERE"}
    heading = {"cell_type": "markdown", "metadata": {}, "source": "## Next section"}
    assert answers_after_a_table([table, answer]) == [(1, "q")]
    assert answers_after_a_table([answer, table, heading, answer]) == []


# ------------------------------------------------------------------------------- answer constants
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.]*\d)")
RANGE = re.compile(rf"({NUMBER.pattern})\s*(?:to|-|–|\.\.)\s*({NUMBER.pattern})")


def answer_constants() -> list[tuple[str, str, str, float]]:
    """(notebook, constant, key, value) for every number in a graded answer constant's solution: an
    UPPER_CASE name assigned a dict literal between the solution markers (nested dicts flattened;
    booleans are not numbers here)."""
    found = []

    def walk(stem: str, name: str, value) -> None:
        for key, entry in value.items():
            if isinstance(entry, dict):
                walk(stem, name, entry)
            elif isinstance(key, str) and type(entry) in (int, float):
                found.append((stem, name, key, float(entry)))

    for path in sorted(SOURCE.glob("*.ipynb")):
        for cell in _cells(path):
            if cell["cell_type"] != "code":
                continue
            for region in solution_regions(_source(cell)):
                try:
                    tree = ast.parse(region)
                except SyntaxError:
                    continue
                for node in tree.body:
                    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                            and node.targets[0].id.isupper() and isinstance(node.value, ast.Dict)):
                        try:
                            walk(path.stem, node.targets[0].id, ast.literal_eval(node.value))
                        except ValueError:
                            continue
    return found


def _gives(line: str, value: float) -> bool:
    """The line states ``value`` (the same number, or a range holding it)."""
    for low, high in RANGE.findall(line):
        if float(low) <= value <= float(high):
            return True
    return any(math.isclose(float(number), value, rel_tol=1e-9) for number in NUMBER.findall(line))


def constant_values_in_prose(text: str, constants) -> list[tuple[str, str]]:
    """(constant[key], line) for each line of ``text`` that names a key of a graded answer constant
    (as `key`) and states its solution's value: a table of typical values is the answer itself."""
    found = []
    for line in text.splitlines():
        for _, name, key, value in constants:
            if f"`{key}`" in line and _gives(line.replace(",", ""), value):
                found.append((f"{name}[{key!r}]", line.strip()[:120]))
    return found


def test_what_students_read_does_not_tabulate_an_answer_constants_values():
    constants = answer_constants()
    assert {name for _, name, _, _ in constants} >= {"FINETUNE_CONFIG", "GENERATION_SETTINGS"}
    texts = {name: handout_text(name) for name in HANDOUT_FILES if not name.endswith(".html")}
    for stem in RELEASED:
        texts[f"{stem}.ipynb"] = "\n".join(_source(c) for c in _cells(RELEASE / f"{stem}.ipynb")
                                          if c["cell_type"] == "markdown")
    found = [(where, *hit) for where, text in texts.items() for hit in constant_values_in_prose(text, constants)]
    assert not found, ("what students read states the values of a graded answer constant (pose the choice "
                       "instead, in the source, then make regen):\n"
                       + "\n".join(f"- {where}: {key}: {line}" for where, key, line in found))


def test_a_table_of_an_answer_constants_values_is_found():
    constants = [("part_b_finetuning", "FINETUNE_CONFIG", "learning_rate", 2e-5),
                 ("part_b_finetuning", "FINETUNE_CONFIG", "num_train_epochs", 3.0)]
    table = ("| `learning_rate` (peak) | 2e-5 to 5e-5 | stay close |\n| `num_train_epochs` | 2 to 4 | over-fit |\n"
             "| `learning_rate` | how far each update moves the weights | B3 measures 1e-2 |")
    assert [key for key, _ in constant_values_in_prose(table, constants)] == [
        "FINETUNE_CONFIG['learning_rate']", "FINETUNE_CONFIG['num_train_epochs']"]
