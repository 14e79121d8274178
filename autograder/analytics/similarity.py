"""Pairs of students whose answers to the same graded function are unusually alike.

Only answer cells are compared: each notebook's solution cells, taken by ``grade_id``
as the grader takes them (``plan.plan_grading``), never the experiments around them.
Each answer is reduced to what a copy keeps when it is disguised:

1. **Normalised**: parsed with ``ast``; docstrings dropped; printed back with
   ``ast.unparse``, so comments, blank lines, spacing, quotes and line breaks are gone.
   Independent statements are put in one canonical order (:func:`canonical_order`):
   swapping two lines that do not depend on each other changes nothing.
2. **Fingerprinted** with copydetect (a maintained implementation of winnowing, the
   algorithm of MOSS): its tokenizer (pygments) replaces every variable, attribute and
   function name by one letter, so renamed identifiers change nothing either; k-grams
   of the filtered text are hashed and winnowed. Only the k-gram hash is ours: copydetect
   uses Python's ``hash()``, which is salted per process, and the report must not
   change from one run to the next.
3. **Stripped** of what is not evidence: the fingerprints of the release's starter code
   for that cell (the signature, the stub), and those found in more than
   :data:`COMMON_ANSWERS` answers of the class (what many students write is an idiom,
   not a copy; MOSS's ``-m`` option). An answer left with fewer than
   :data:`MIN_FINGERPRINTS` fingerprints is too short to tell copying from the one
   obvious way to write it, and is not compared.

A pair's **score** is the Dice coefficient of the two fingerprint sets, 2|A∩B| / (|A| +
|B|): 1.0 when every fingerprint of each answer is in the other. Every pair of answers
to an item is scored at once by a sparse matrix product (scipy), so the quadratic part
costs little next to fingerprinting, which is linear in the number of answers.

**Threshold 0.75.** Measured on this course's graded functions that have correct
alternatives (``test_threshold_separates_copies_from_independent_solutions``): a copy of
Alice's solution with every identifier renamed, comments added, the code reformatted and
two independent statements swapped scores 1.0 against the original, for each of the 36
long enough to compare; the correct alternatives that the hidden suites are tested with
(``tests/grading/variants``: 118 pairs among them and Alice's) score at most 0.65, and
that pair is ``train_epoch``, whose contract dictates every line of the loop; no pair of
any other function scores above 0.57. 0.75 leaves a margin of 0.1 above the closest independent pair
and 0.25 below a disguised copy: a pair at or above it shares three quarters of its
distinctive fingerprints, more than any two independent solutions of this course do.
Pairs from the CSV floor (0.5) up are listed in ``similarity.csv`` for a closer look.
"""
from __future__ import annotations

import ast
import csv
import functools
import heapq
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..course import Course, load_course
from ..notebook import UnreadableNotebook, read_notebook
from ..plan import plan_grading
from ..report import clip, spreadsheet_cell

K = 10                    # characters of filtered code per k-gram (a name is one character after filtering)
WINDOW = 5                # winnowing: a fingerprint in every 5 k-grams, so any shared run of K + 4 characters shows
THRESHOLD = 0.75          # pairs at or above it are shown in the class report (see the module docstring)
CSV_FLOOR = 0.5           # pairs at or above it are listed in similarity.csv
COMMON_ANSWERS = 10       # a fingerprint in more answers of an item than this is an idiom
MIN_FINGERPRINTS = 8      # fewer left after stripping: not compared
MAX_ANSWER_CHARS = 20_000  # of one answer cell; a longer one is cut (bounded cost whatever is submitted)
ROWS_PER_PRODUCT = 1024   # answers per block of the pairwise product (bounds its memory)
CSV_COLUMNS = ("student_a", "student_b", "notebook", "item", "score")
# Methods that change the object they are called on: a statement calling one is not
# moved past statements that use that object. PyTorch's in-place methods end in "_".
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "add",
                      "discard", "setdefault", "popitem", "step", "zero_grad", "backward", "manual_seed"})
_BARRIERS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Return, ast.Raise,
             ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Delete, ast.Match, ast.Assert,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd: the polynomial k-gram hash modulo 2**64


# --------------------------------------------------------------------- normalising
def canonical_order(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with each run of simple statements in one order that keeps their dependencies.

    Compound statements and jumps (if, for, with, try, return, raise, ...) stay where
    they are and bound the runs; their own bodies are ordered the same way. Within a
    run, a statement must stay after one that writes a name it reads or writes, or that
    reads a name it writes; among those free to go first, the one with the smallest
    shape (:func:`_shape`, blind to names) goes first."""
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for stmt in body:
        for name in ("body", "orelse", "finalbody"):
            if isinstance(getattr(stmt, name, None), list):
                setattr(stmt, name, canonical_order(getattr(stmt, name)))
        for handler in getattr(stmt, "handlers", []):
            handler.body = canonical_order(handler.body)
        for case in getattr(stmt, "cases", []):
            case.body = canonical_order(case.body)
        if isinstance(stmt, _BARRIERS):
            out += _ordered(run) + [stmt]
            run = []
        else:
            run.append(stmt)
    return out + _ordered(run)


def _names(node: ast.AST, context: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}


def _effects(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """(names read, names written) by a simple statement; a definition reads only what it evaluates now."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        now = [*stmt.decorator_list, *getattr(stmt, "bases", []), *getattr(stmt, "keywords", [])]
        if hasattr(stmt, "args"):
            now += [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
        return set().union(*(_names(n, ast.Load) for n in now)), {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return set(), {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}
    reads, writes = _names(stmt, ast.Load), _names(stmt, ast.Store)
    for node in ast.walk(stmt):
        method = node.func if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        if method and isinstance(method.value, ast.Name) and (method.attr.endswith("_") or method.attr in MUTATORS):
            writes.add(method.value.id)
        if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            writes |= _names(node.value, ast.Load)  # x[i] = ... and x.a = ... change x
    return reads, writes


def _shape(stmt: ast.stmt) -> str:
    """A statement's structure without its names: what decides the canonical order among free statements."""
    return " ".join(type(n).__name__ + (repr(n.value) if isinstance(n, ast.Constant) else "")
                    + (n.attr if isinstance(n, ast.Attribute) else "") for n in ast.walk(stmt))


def _ordered(run: list[ast.stmt]) -> list[ast.stmt]:
    if len(run) < 2:
        return run
    effects = [_effects(s) for s in run]
    later: list[list[int]] = [[] for _ in run]
    waiting = [0] * len(run)
    for j, (reads_j, writes_j) in enumerate(effects):
        for i in range(j):
            reads_i, writes_i = effects[i]
            if writes_i & (reads_j | writes_j) or reads_i & writes_j:
                later[i].append(j)
                waiting[j] += 1
    ready = [(_shape(run[i]), i) for i in range(len(run)) if waiting[i] == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, i = heapq.heappop(ready)
        ordered.append(run[i])
        for j in later[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (_shape(run[j]), j))
    return ordered


class _Docstrings(ast.NodeTransformer):
    """Drops docstrings; names ``self`` and ``cls`` like any parameter (pygments keeps those two words as they
    are, so a copy that renamed them would otherwise differ)."""

    def visit_Name(self, node):
        if node.id in ("self", "cls"):
            node.id = "this"
        return node

    def visit_arg(self, node):
        if node.arg in ("self", "cls"):
            node.arg = "this"
        return self.generic_visit(node)

    def _drop(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _drop


def normalize(source: str) -> str:
    """The answer as compared: no docstrings, comments or layout, independent statements in canonical order.

    A cell that does not parse is compared as written (copydetect's tokenizer still drops
    its comments and spacing)."""
    source = clip(source, MAX_ANSWER_CHARS)
    try:
        tree = _Docstrings().visit(ast.parse(source))
        tree.body = canonical_order(tree.body)
        return ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source


# --------------------------------------------------------------------- fingerprints
@dataclass
class Fingerprint:
    """copydetect's ``CodeFingerprint``, built with a stable hash (``copydetect.compare_files`` reads it)."""

    filtered_code: str
    offsets: np.ndarray
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    k: int = K

    @property
    def token_coverage(self) -> float:
        """Characters of the filtered code under a kept fingerprint (copydetect's ``compare_files`` reads it)."""
        from copydetect.utils import get_token_coverage

        return float(get_token_coverage(self.hash_idx, self.k, len(self.filtered_code)))

    def without(self, dropped: set[int]) -> Fingerprint:
        kept = {h: where for h, where in self.hash_idx.items() if h not in dropped}
        return Fingerprint(self.filtered_code, self.offsets, set(kept), kept, self.k)


def dice(a: Fingerprint, b: Fingerprint) -> float:
    """The score of one pair: 2|A∩B| / (|A| + |B|) of their fingerprint sets (0.0 for two empty ones)."""
    total = len(a.hashes) + len(b.hashes)
    return round(2 * len(a.hashes & b.hashes) / total, 3) if total else 0.0


def _kgram_hashes(text: str) -> np.ndarray:
    """A polynomial hash of every K-character window of ``text`` (the same in every process)."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    count = len(codes) - K + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    hashes = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64 is the point
        for j in range(K):
            hashes = hashes * _BASE + codes[j:j + count]
    return hashes.view(np.int64)


def fingerprint(code: str, boilerplate: set[int] = frozenset()) -> Fingerprint:
    """Tokenized and filtered by copydetect, winnowed by copydetect, less the ``boilerplate`` hashes."""
    from copydetect.utils import filter_code, winnow

    filtered, offsets = filter_code(code, "answer.py", language="python")
    hashes, where = winnow(_kgram_hashes(filtered), WINDOW, remove_duplicates=False)
    index: dict[int, list[int]] = {}
    for value, position in zip(hashes.tolist(), where.tolist()):
        if value not in boilerplate:
            index.setdefault(value, []).append(position)
    return Fingerprint(filtered, offsets, set(index), index, K)


# --------------------------------------------------------------------- answers and pairs
@dataclass
class Answer:
    student: str
    notebook: str      # the notebook's stem
    item: str          # the solution cell's grade_id
    source: str        # the cell as the student wrote it (clipped)
    code: str          # what was compared (normalize)
    fingerprint: Fingerprint = field(repr=False)


@dataclass(frozen=True)
class Pair:
    a: Answer
    b: Answer
    score: float

    @property
    def notebook(self) -> str:
        return self.a.notebook

    @property
    def item(self) -> str:
        return self.a.item


@dataclass
class Similarity:
    """What the check found: pairs at or above ``floor``, highest first, and what it looked at."""

    pairs: list[Pair]
    threshold: float
    floor: float
    answers: int = 0
    compared: int = 0          # pairs scored
    too_short: int = 0         # answers left out (fewer than MIN_FINGERPRINTS distinctive fingerprints)
    items: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds_reading: float = 0.0   # reading the notebooks, normalising and fingerprinting their answers
    seconds_pairs: float = 0.0     # scoring every pair

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.score >= self.threshold]


def starter_fingerprints(stem: str, release: Path | None = None) -> dict[str, set[int]]:
    """solution grade_id -> the fingerprints of its starter code in the release notebook."""
    from ..notebook import _nbgrader, cell_source
    from ..paths import RELEASE

    path = (release or RELEASE) / f"{stem}.ipynb"
    found: dict[str, set[int]] = {}
    for cell in read_notebook(path).cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id and cell.get("cell_type") == "code":
            found[str(grade_id)] = fingerprint(normalize(cell_source(cell))).hashes
    return found


def answers_of(student: str, stem: str, path: Path, course: Course) -> tuple[list[Answer], list[str]]:
    """The answer cells of one submitted notebook, taken by grade_id as the grader takes them."""
    try:
        plan = plan_grading(read_notebook(path), stem, course)
    except UnreadableNotebook as err:
        return [], [f"{student}/{stem}.ipynb: {err}"]
    answers = []
    for cell in plan.cells:
        if cell.kind == "solution":
            code = normalize(cell.source)
            answers.append(Answer(student, stem, cell.grade_id, clip(cell.source, MAX_ANSWER_CHARS), code,
                                  fingerprint(code)))
    return answers, []


def _answers_job(job: tuple[str, str, Path, Path, Path | None]) -> tuple[list[Answer], list[str]]:
    """One notebook's answers, less their starter code (run in a worker process with ``jobs`` > 1)."""
    student, stem, path, source_dir, release = job
    answers, warnings = answers_of(student, stem, path, load_course(source_dir))
    starters = _starters(stem, release)
    for answer in answers:
        answer.fingerprint = answer.fingerprint.without(starters.get(answer.item, set()))
    return answers, warnings


@functools.lru_cache(maxsize=None)
def _starters(stem: str, release: Path | None) -> dict[str, set[int]]:
    return starter_fingerprints(stem, release)


def find_similar(notebooks: dict[tuple[str, str], Path], course: Course | None = None, *,
                 threshold: float = THRESHOLD, floor: float = CSV_FLOOR, release: Path | None = None,
                 jobs: int = 1) -> Similarity:
    """Score every pair of answers to the same item in ``notebooks`` ((student, stem) -> file).

    Reading and fingerprinting, linear in the class and most of the cost, runs in ``jobs``
    processes; the pairs are scored in this one."""
    course = course or load_course()
    result = Similarity([], threshold, min(floor, threshold))
    started = time.perf_counter()
    todo = [(student, stem, path, course.source_dir, release) for (student, stem), path in sorted(notebooks.items())]
    if jobs > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(_answers_job, todo, chunksize=max(1, len(todo) // (8 * jobs))))
    else:
        done = [_answers_job(job) for job in todo]
    by_item: dict[tuple[str, str], list[Answer]] = {}
    for answers, warnings in done:
        result.warnings += warnings
        for answer in answers:
            by_item.setdefault((answer.notebook, answer.item), []).append(answer)
    result.seconds_reading = time.perf_counter() - started
    for key in sorted(by_item):
        answers = by_item[key]
        result.answers += len(answers)
        result.items += 1
        result.pairs += _item_pairs(answers, result)
    result.pairs.sort(key=lambda p: (-p.score, p.a.notebook, p.a.item, p.a.student, p.b.student))
    result.seconds_pairs = time.perf_counter() - started - result.seconds_reading
    return result


def _item_pairs(answers: list[Answer], result: Similarity) -> list[Pair]:
    """The pairs of one item's answers at or above ``result.floor``."""
    from scipy import sparse

    holders: dict[int, int] = {}
    for answer in answers:
        for value in answer.fingerprint.hashes:
            holders[value] = holders.get(value, 0) + 1
    common = {value for value, count in holders.items() if count > COMMON_ANSWERS}
    kept = []
    for answer in answers:
        if common:
            answer.fingerprint = answer.fingerprint.without(common)
        if len(answer.fingerprint.hashes) >= MIN_FINGERPRINTS:
            kept.append(answer)
    result.too_short += len(answers) - len(kept)
    if len(kept) < 2:
        return []
    columns: dict[int, int] = {}
    rows, cols = [], []
    for row, answer in enumerate(kept):
        for value in answer.fingerprint.hashes:
            rows.append(row)
            cols.append(columns.setdefault(value, len(columns)))
    matrix = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(kept), len(columns)))
    sizes = np.asarray(matrix.sum(axis=1)).ravel()
    pairs = []
    result.compared += len(kept) * (len(kept) - 1) // 2
    for start in range(0, len(kept), ROWS_PER_PRODUCT):
        shared = (matrix[start:start + ROWS_PER_PRODUCT] @ matrix.T).toarray()
        dice = 2 * shared / (sizes[start:start + ROWS_PER_PRODUCT, None] + sizes[None, :])
        for i, j in zip(*np.nonzero(dice >= result.floor)):
            if start + i < j:
                pairs.append(Pair(kept[start + i], kept[j], round(float(dice[i, j]), 3)))
    return pairs


# --------------------------------------------------------------------- showing a pair
def highlighted(pair: Pair) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Each answer's compared code cut into (text, shared with the other) pieces, by copydetect."""
    from copydetect import compare_files

    _, _, (slices_a, slices_b) = compare_files(pair.a.fingerprint, pair.b.fingerprint)
    return _pieces(pair.a.code, slices_a), _pieces(pair.b.code, slices_b)


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _pieces(code: str, slices) -> list[tuple[str, bool]]:
    """``code`` cut at copydetect's shared slices, each widened to whole words (its offsets can fall
    inside a name, which reads badly)."""
    spans = sorted(zip(np.asarray(slices[0], dtype=int).tolist(), np.asarray(slices[1], dtype=int).tolist())) \
        if len(slices) and len(slices[0]) else []
    pieces, at = [], 0
    for start, end in spans:
        start, end = max(start, at), min(end, len(code))
        while at < start < len(code) and _word(code[start - 1]) and _word(code[start]):
            start -= 1
        while 0 < end < len(code) and _word(code[end - 1]) and _word(code[end]):
            end += 1
        if start >= end:
            continue
        if start > at:
            pieces.append((code[at:start], False))
        pieces.append((code[start:end], True))
        at = end
    if at < len(code):
        pieces.append((code[at:], False))
    return pieces


def write_csv(similarity: Similarity, path: Path) -> Path:
    """``similarity.csv``: every pair at or above the floor, highest score first; cells safe in a spreadsheet."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for pair in similarity.pairs:
            writer.writerow([spreadsheet_cell(pair.a.student), spreadsheet_cell(pair.b.student), pair.notebook,
                             pair.item, f"{pair.score:.3f}"])
    return Path(path)
