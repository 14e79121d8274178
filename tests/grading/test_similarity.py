"""The similarity check of answer cells: disguised copies stand out, independent solutions do not.

The copies and the independent solutions are real: Alice's sample notebook, a copy of
her ``mask_tokens`` disguised by hand, and the correct alternatives that the hidden
suites are tested with (``tests/grading/variants``), written independently of the
reference. ``test_threshold_separates_copies_from_independent_solutions`` measures, on
every graded function that has alternatives, what the threshold in
``autograder/analytics/similarity.py`` claims.
"""
from __future__ import annotations

import ast
import builtins
import csv
import inspect
import json
import os
import subprocess
import sys
import textwrap

import nbformat

from autograder.analytics import similarity
from autograder.analytics.similarity import (
    THRESHOLD,
    Answer,
    Pair,
    Similarity,
    find_similar,
    fingerprint,
    highlighted,
    normalize,
    starter_fingerprints,
    write_csv,
)
from autograder.course import load_course
from autograder.paths import REPO

from .variants import of as variants_of

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_b_bert_gpt"

# Alice's mask_tokens, as a student who copied it might hand it in: every local name
# changed, other comments, other layout, and the independent statements in another order.
DISGUISED_MASK_TOKENS = '''
def mask_tokens(input_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int,
                special_token_ids: Iterable[int], mlm_probability: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    # my implementation of BERT masking
    targets = torch.full_like(input_ids, IGNORE_INDEX)      # -100 = ignored by the loss
    corrupted = input_ids.clone()
    dims, dev = input_ids.shape, input_ids.device
    specials_t = torch.tensor(list(special_token_ids), dtype = input_ids.dtype, device = dev)
    skip = torch.isin(input_ids, specials_t)
    p_sel = torch.full(dims, float(mlm_probability), device = dev); p_sel[skip] = 0.0
    chosen = torch.bernoulli(p_sel, generator = generator).bool()
    m80 = torch.bernoulli(torch.full(dims, 0.8, device = dev),
                          generator = generator).bool()
    to_mask = chosen & m80
    r50 = torch.bernoulli(torch.full(dims, 0.5, device = dev),
                          generator = generator).bool()
    to_rand = chosen & ~to_mask & r50
    rand_tok = torch.randint(vocab_size, dims, generator = generator, device = dev, dtype = input_ids.dtype)
    targets[chosen] = input_ids[chosen]
    corrupted[to_mask] = mask_token_id
    corrupted[to_rand] = rand_tok[to_rand]
    return corrupted, targets
'''


def cell_of(notebook, grade_id: str):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def alternatives(stem: str, grade_id: str) -> list[str]:
    """The correct alternatives of a graded function, as source cells named like it."""
    module = variants_of(stem)
    functions = {id(f): f for round_ in getattr(module, "ALTERNATIVES", []) for name, f in round_.items()
                 if name == grade_id and inspect.isfunction(f)}
    sources = []
    for function in functions.values():
        source = textwrap.dedent(inspect.getsource(function))
        sources.append(source.replace(f"def {function.__name__}(", f"def {grade_id}(", 1))
    return sorted(set(sources))


def class_with_mask_tokens(tmp_path, answers: dict[str, str]) -> dict[tuple[str, str], object]:
    """A class of copies of Alice's notebook, each student's mask_tokens cell replaced by theirs."""
    notebooks = {}
    for student, source in answers.items():
        notebook = nbformat.read(SAMPLES / "alice_full_solution" / "week6" / f"{STEM}.ipynb", as_version=4)
        if source is not None:
            cell_of(notebook, "mask_tokens").source = source
        path = tmp_path / student / "week6" / f"{STEM}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(notebook, path)
        notebooks[(student, STEM)] = path
    return notebooks


def mask_tokens_scores(result: Similarity) -> dict[frozenset, float]:
    return {frozenset((p.a.student, p.b.student)): p.score for p in result.pairs if p.item == "mask_tokens"}


def test_a_disguised_copy_ranks_first_and_independent_solutions_stay_below(tmp_path):
    first, second = alternatives(STEM, "mask_tokens")[:2]
    notebooks = class_with_mask_tokens(tmp_path, {"alice": None, "mallory": DISGUISED_MASK_TOKENS,
                                                  "ivy": first, "jon": second})
    result = find_similar(notebooks, floor=0.0)
    scores = mask_tokens_scores(result)
    ranked = [p for p in result.pairs if p.item == "mask_tokens"]
    assert {ranked[0].a.student, ranked[0].b.student} == {"alice", "mallory"}
    assert scores[frozenset(("alice", "mallory"))] >= THRESHOLD
    for pair in (("alice", "ivy"), ("alice", "jon"), ("ivy", "jon"), ("mallory", "ivy"), ("mallory", "jon")):
        assert scores[frozenset(pair)] < THRESHOLD, (pair, scores)
    flagged = {frozenset((p.a.student, p.b.student)) for p in result.flagged if p.item == "mask_tokens"}
    assert flagged == {frozenset(("alice", "mallory"))}


def test_worker_processes_find_the_same_pairs(tmp_path):
    first = alternatives(STEM, "mask_tokens")[0]
    notebooks = class_with_mask_tokens(tmp_path, {"alice": None, "mallory": DISGUISED_MASK_TOKENS, "ivy": first})
    one, two = find_similar(notebooks, floor=0.0), find_similar(notebooks, floor=0.0, jobs=2)
    assert [(p.a.student, p.b.student, p.item, p.score) for p in two.pairs] == [
        (p.a.student, p.b.student, p.item, p.score) for p in one.pairs]
    assert (two.answers, two.compared, two.too_short) == (one.answers, one.compared, one.too_short)


def test_the_shown_pair_highlights_what_the_two_share(tmp_path):
    notebooks = class_with_mask_tokens(tmp_path, {"alice": None, "mallory": DISGUISED_MASK_TOKENS})
    pair = next(p for p in find_similar(notebooks).flagged if p.item == "mask_tokens")
    left, right = highlighted(pair)
    assert "".join(text for text, _ in left) == pair.a.code
    assert "".join(text for text, _ in right) == pair.b.code
    shared = sum(len(text) for text, hit in left if hit)
    assert shared > 0.8 * len(pair.a.code.split(":", 1)[1]), "most of the body is shown as shared"
    assert "docstring" not in pair.a.code and "Corrupt a batch" not in pair.a.code, "docstrings are not compared"


# --------------------------------------------------------------------- what normalising ignores
def test_comments_layout_and_docstrings_change_nothing():
    plain = "def f(x):\n    y = x + 1\n    return y * 2\n"
    noisy = 'def f(x):\n    """Doubles."""\n    # add one\n    y = (x+1)   # here\n\n\n    return (y*2)\n'
    assert normalize(plain) == normalize(noisy)


def test_renamed_identifiers_change_no_fingerprint():
    first = normalize("def f(x, *, scale):\n    total = x.sum() * scale\n    return total\n")
    second = normalize("def f(values, *, factor):\n    acc = values.sum() * factor\n    return acc\n")
    assert first != second
    assert fingerprint(first).hashes == fingerprint(second).hashes
    # pygments keeps `self` as a word of its own: a copy that renames it must not differ either.
    method = "class A:\n    def f(self, x):\n        self.total = x\n        return self.total\n"
    assert fingerprint(normalize(method)).hashes == fingerprint(normalize(method.replace("self", "me"))).hashes


def test_independent_statements_are_put_in_one_order_and_dependent_ones_are_not():
    swapped = ["a = x.float()\nb = y.long()\nreturn a + b", "b = y.long()\na = x.float()\nreturn a + b"]
    body = [normalize(f"def f(x, y):\n{textwrap.indent(s, '    ')}\n") for s in swapped]
    assert body[0] == body[1]
    # x[i] = ... changes x; gen.manual_seed(0) changes gen: neither moves past a use of its object.
    kept = normalize("def f(x, gen):\n    x[0] = 1\n    y = x + 1\n    gen.manual_seed(0)\n    z = gen.seed()\n"
                     "    return y, z\n")
    assert kept.index("x[0] = 1") < kept.index("y = x + 1")
    assert kept.index("gen.manual_seed(0)") < kept.index("z = gen.seed()")


def test_a_cell_that_does_not_parse_is_compared_as_written():
    broken = "def f(x):\n    return x +\n"
    assert normalize(broken) == broken
    assert fingerprint(normalize(broken)).filtered_code  # copydetect still tokenizes it


def test_fingerprints_are_the_same_in_every_process():
    """copydetect hashes k-grams with Python's salted hash(); the check must not depend on the salt."""
    code = normalize(DISGUISED_MASK_TOKENS)
    here = sorted(fingerprint(code).hashes)
    script = ("import json, sys; from autograder.analytics.similarity import fingerprint; "
              "print(json.dumps(sorted(fingerprint(sys.stdin.read()).hashes)))")
    for seed in ("1", "2"):
        other = subprocess.run([sys.executable, "-c", script], input=code, capture_output=True, text=True,
                               cwd=REPO, env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert json.loads(other.stdout) == here


# --------------------------------------------------------------------- what is not evidence
def test_the_untouched_starter_code_is_not_compared(tmp_path):
    stub = cell_of(nbformat.read(REPO / "assignments" / "week6" / f"{STEM}.ipynb", as_version=4), "mask_tokens")
    notebooks = class_with_mask_tokens(tmp_path, {"bob": stub.source, "ben": stub.source, "alice": None})
    result = find_similar(notebooks, floor=0.0)
    assert mask_tokens_scores(result) == {}, "two untouched stubs are not a copy"
    assert result.too_short >= 2


def test_what_many_students_write_is_an_idiom_not_a_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(similarity, "COMMON_ANSWERS", 2)
    notebooks = class_with_mask_tokens(tmp_path, {"a1": None, "a2": None, "a3": None})
    assert mask_tokens_scores(find_similar(notebooks, floor=0.0)) == {}
    monkeypatch.setattr(similarity, "COMMON_ANSWERS", 10)
    assert set(mask_tokens_scores(find_similar(notebooks, floor=0.0)).values()) == {1.0}


def test_starter_fingerprints_cover_every_solution_cell():
    course = load_course()
    for notebook in course.notebooks:
        starters = starter_fingerprints(notebook.stem)
        assert {item.grade_id for item in notebook.solutions} <= set(starters), notebook.stem


# --------------------------------------------------------------------- the threshold, measured
def disguise(source: str) -> str:
    """A copy as a student would disguise it: locals renamed, comments added, independent statements swapped."""
    tree = ast.parse(source)
    function = tree.body[0]
    kept = set(dir(builtins)) | {function.name}
    local = {n.arg for n in ast.walk(function) if isinstance(n, ast.arg)} | {
        n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed = {name: f"my_{index}" for index, name in enumerate(sorted(local - kept))}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in renamed:
            node.id = renamed[node.id]
        if isinstance(node, ast.arg) and node.arg in renamed:
            node.arg = renamed[node.arg]
    for node in ast.walk(function):  # swap the first pair of adjacent assignments that do not interact
        body = getattr(node, "body", None)
        for i in range(len(body) - 1 if isinstance(body, list) else 0):
            a, b = body[i], body[i + 1]
            if isinstance(a, ast.Assign) and isinstance(b, ast.Assign):
                names = [{n.id for n in ast.walk(s) if isinstance(n, ast.Name)} for s in (a, b)]
                if not names[0] & names[1]:
                    body[i], body[i + 1] = b, a
                    break
    lines = ast.unparse(tree).splitlines()
    return "# my solution\n" + "\n".join(line + ("  # step" if i % 2 else "") for i, line in enumerate(lines))


def graded_functions_with_alternatives() -> list[tuple[str, str]]:
    return [(notebook.stem, item.grade_id) for notebook in load_course().notebooks for item in notebook.solutions
            if variants_of(notebook.stem) is not None and len(alternatives(notebook.stem, item.grade_id)) >= 1]


def test_threshold_separates_copies_from_independent_solutions():
    """Every graded function with alternatives: its disguised copy scores at least the threshold against
    Alice's solution, and no two independent solutions (hers and the alternatives) reach it."""
    copies, independent = {}, {}
    for stem, grade_id in graded_functions_with_alternatives():
        alice = cell_of(nbformat.read(SAMPLES / "alice_full_solution" / "week6" / f"{stem}.ipynb", as_version=4),
                        grade_id).source
        starter = starter_fingerprints(stem)[grade_id]
        versions = [alice, *alternatives(stem, grade_id)]
        prints = [fingerprint(normalize(v)).without(starter) for v in versions]
        copy = fingerprint(normalize(disguise(alice))).without(starter)
        if len(prints[0].hashes) >= similarity.MIN_FINGERPRINTS:
            copies[grade_id] = similarity.dice(prints[0], copy)
        for i in range(len(prints)):
            for j in range(i + 1, len(prints)):
                if min(len(prints[i].hashes), len(prints[j].hashes)) >= similarity.MIN_FINGERPRINTS:
                    independent[(grade_id, i, j)] = similarity.dice(prints[i], prints[j])
    assert len(copies) >= 30 and len(independent) >= 40, "the measurement covers the course"
    assert min(copies.values()) >= THRESHOLD + 0.2, sorted(copies.items(), key=lambda kv: kv[1])[:3]
    assert max(independent.values()) <= THRESHOLD - 0.05, sorted(independent.items(), key=lambda kv: -kv[1])[:3]


# --------------------------------------------------------------------- the CSV
def test_the_csv_is_sorted_by_score_and_safe_in_a_spreadsheet(tmp_path):
    def answer(student):
        return Answer(student, STEM, "mask_tokens", "", "", fingerprint("x = 1"))

    pairs = [Pair(answer("b"), answer("c"), 0.8), Pair(answer("=HYPERLINK(\"http://x\")"), answer("a"), 0.95)]
    result = Similarity(sorted(pairs, key=lambda p: -p.score), THRESHOLD, 0.5)
    with write_csv(result, tmp_path / "similarity.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["student_a", "student_b", "notebook", "item", "score"]
    assert [row[4] for row in rows[1:]] == ["0.950", "0.800"]
    assert rows[1][0].startswith("'=")
