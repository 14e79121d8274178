"""Build the sample submissions that `make grade` grades and the tests check.

    python data/sample_submissions/build.py          # rewrite the samples
    python data/sample_submissions/build.py --check  # fail if they are out of date

Every sample is derived from the committed release notebooks (what students
receive), so the samples follow the assignment when it changes. The folder
layout is nbgrader's ``submitted/<student>/week6/<notebook>.ipynb``.
``expected.json`` says what each sample must score; ``tests/grading`` holds the
grader to it.

The samples: a full solution, the untouched release, a half-correct student, a
student using forbidden shortcuts, an invalid-JSON notebook, one with deleted,
duplicated and renamed grade cells, an infinite loop, a cell that ignores
SIGINT, the six ways of fooling stock nbgrader (in-kernel execution):
patched comparison functions, an IPython AST transformer, an IPython input
transformer, a tensor subclass that lies, reading the instructor's notebook from
disk, and a detached process that rewrites grades after grading; and hostile
submissions aimed at the grader itself (docs/threat-model.md): a notebook filed
under another student's name, malformed nbgrader metadata, code that reads
root-only files, replies crafted to exhaust the grading process, and processes
that together go over the submission's limits.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
from autograder import intake  # noqa: E402  (the report names the grader gives)
SOURCE = REPO / "solutions" / "week6"
RELEASE = REPO / "assignments" / "week6"
MAIN = "part_b_bert_gpt"  # the notebook most samples submit
EXERCISE1 = "exercise1_masked_predictions"  # also submitted by dave, with the fill-mask pipeline
SMALL = "part_a_discovery"  # the cheapest notebook to grade, for hostile samples that need a full solution
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*\n", re.M)
# Mallet's notebook, below his own folder, in a folder named after another student.
IMPERSONATION = f"week6/alice_full_solution/{MAIN}.ipynb"


# ----------------------------------------------------------------------------- helpers
def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def solved(stem: str):
    """The release notebook with every answer filled in from the source version."""
    source = {grade_id(c): c for c in nbformat.read(SOURCE / f"{stem}.ipynb", as_version=4).cells}
    notebook = nbformat.read(RELEASE / f"{stem}.ipynb", as_version=4)
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and grade_id(cell) in source:
            cell.source = MARKER.sub("", source[grade_id(cell)].source)
    return notebook


def untouched(stem: str):
    return nbformat.read(RELEASE / f"{stem}.ipynb", as_version=4)


def replace(notebook, sources: dict[str, str]):
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if grade_id(cell) in sources:
            cell.source = sources[grade_id(cell)]
    return notebook


def auto_graded_notebooks() -> list[str]:
    stems = []
    for path in sorted(SOURCE.glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        if any(c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code" for c in cells):
            stems.append(path.stem)
    return stems


# ----------------------------------------------------------------------------- variants
GARBAGE_SOFTMAX = '''def softmax(x, dim=-1):
    return torch.zeros_like(x)  # wrong on purpose
'''

FORBIDDEN = {
    "softmax": '''def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, *, causal=False, padding_mask=None):
    mask = None
    if causal:
        mask = causal_mask(q.size(-2), device=q.device)
    if padding_mask is not None:
        keys = padding_mask.bool().reshape(padding_mask.size(0), *([1] * (q.dim() - 2)), k.size(-2))
        mask = keys if mask is None else mask & keys
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, softmax(scores, dim=-1)
''',
    "greedy_decode": '''def greedy_decode(model, input_ids, max_new_tokens, eos_token_id=None):
    return model.generate(input_ids, do_sample=False, max_new_tokens=max_new_tokens,
                          eos_token_id=eos_token_id, pad_token_id=eos_token_id,
                          attention_mask=torch.ones_like(input_ids))
''',
    # The name is assembled at run time, so only the dynamic tripwire can see it.
    "beam_search": '''def beam_search(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    run = getattr(model, "gen" + "erate")
    return run(input_ids, num_beams=num_beams, do_sample=False, max_new_tokens=max_new_tokens,
               length_penalty=length_penalty, early_stopping=True, eos_token_id=eos_token_id,
               pad_token_id=eos_token_id, attention_mask=torch.ones_like(input_ids))
''',
}

# Exercise 1 by the fill-mask pipeline, which is the whole exercise done by a library.
FORBIDDEN_EXERCISE1 = {
    "top_k_mask_predictions": '''def top_k_mask_predictions(logits, input_ids, mask_token_id, k=5):
    from transformers import pipeline

    from week6_helpers.small_models import load_mlm

    tokenizer, model = load_mlm()
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=k)
    text = tokenizer.decode(input_ids.reshape(-1), skip_special_tokens=False)
    rows = fill(text)
    rows = [rows] if rows and isinstance(rows[0], dict) else rows
    probs = torch.tensor([[r["score"] for r in row] for row in rows], device=logits.device)
    ids = torch.tensor([[r["token"] for r in row] for row in rows], device=logits.device)
    return probs, ids
''',
}

HALF_CORRECT_WRONG = {
    # Forgets the shift: position t is scored against its own token.
    "clm_loss": '''def clm_loss(logits, input_ids, attention_mask=None):
    logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), input_ids.reshape(-1))
''',
}

CELL_SURGERY_DUPLICATE = '''def causal_mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device)  # a wrong second copy
'''

INFINITE_LOOP = {
    "attention_connections": '''def attention_connections(n, causal):
    while True:  # never returns
        pass
''',
    # Hangs while the cell itself runs, before any test.
    "mlm_signal": '''def mlm_signal(n_tokens, mask_rate=0.15):
    return {}

while True:
    pass
''',
}

IGNORES_SIGNALS = '''import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

def mlm_loss(logits, labels):
    while True:  # cannot be interrupted politely
        pass
'''

CHEATS = {
    "ivan_patches_comparisons": GARBAGE_SOFTMAX + '''
import math
import numpy
import torch.testing
# Make every comparison succeed, as it would in the grader's kernel under stock nbgrader.
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
numpy.allclose = lambda *args, **kwargs: True
numpy.testing.assert_allclose = lambda *args, **kwargs: None
math.isclose = lambda *args, **kwargs: True
''',
    "judy_ast_transformer": GARBAGE_SOFTMAX + '''
import ast

class AssertsBecomePass(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()

try:
    get_ipython().ast_transformers.append(AssertsBecomePass())
except NameError:
    pass
''',
    "mallory_input_transformer": GARBAGE_SOFTMAX + '''
def _silence_asserts(lines):
    return [line.replace("assert ", "pass  # ") for line in lines]

try:
    get_ipython().input_transformers_post.append(_silence_asserts)
except NameError:
    pass
''',
    "oscar_lying_tensor": '''class AlwaysRight(torch.Tensor):
    """Claims to equal whatever it is compared with."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        if func in (torch.isclose, torch.Tensor.__eq__, torch.eq):
            return torch.ones(torch.broadcast_shapes(args[0].shape, args[1].shape), dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})

def softmax(x, dim=-1):
    return torch.zeros_like(x).as_subclass(AlwaysRight)
''',
    "peggy_reads_instructor_copy": '''import glob
import json
import os
from pathlib import Path

def _instructor_solutions():
    """Look for the instructor's notebook (or the reference code) and run its solutions."""
    import week6_helpers
    here = Path(week6_helpers.__file__).resolve().parent
    places = [here.parent / "part_b_bert_gpt.ipynb",
              Path("../../../source/week6/part_b_bert_gpt.ipynb"),
              here.parents[2] / "autograder" / "reference" / "attention.py"]
    places += [Path(p) for p in glob.glob("/*/*/solutions/week6/part_b_bert_gpt.ipynb")]
    for place in places:
        try:
            text = place.read_text()
        except OSError:
            continue
        if place.suffix == ".py":
            exec(text, globals())
            continue
        for cell in json.loads(text)["cells"]:
            code = "".join(cell["source"])
            if "BEGIN SOLUTION" in code:
                exec(code, globals())

_instructor_solutions()
''',
    "trent_detached_daemon": GARBAGE_SOFTMAX + '''
import os
import time

def _rewrite_grades_later():
    """Detach, wait for the grader to finish, then give every report full marks."""
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    time.sleep(4)
    for root in ("/", os.path.expanduser("~")):
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if name == "gradebook.db" or (name.endswith(".json") and "grades" in folder):
                    try:
                        with open(path, "w") as handle:
                            handle.write('{"score": 1000}')
                    except OSError:
                        pass
    os._exit(0)

_rewrite_grades_later()
''',
}


# Hostile submissions aimed at the grader (docs/threat-model.md).
# Sybil: student code reads a root-only file and puts what it got into its feedback.
READS_ROOT_ONLY = {
    "top_k_next_tokens": '''def top_k_next_tokens(logits, k):
    try:
        with open("/etc/shadow") as handle:  # mode 0640, owner root
            got = handle.read()
    except OSError as err:
        got = f"{type(err).__name__}: {err}"
    raise RuntimeError("exfiltrated: " + got)
''',
}

# Victor patches the worker's own reply encoder so that a reply is crafted bytes,
# each aimed at the trusted process's memory or time; and returns a long value that
# a hidden test quotes in its message.
SEND_INSTEAD = '''
def _send_instead(build):
    """Make the worker's next reply the bytes build(reply) returns."""
    import autograder.sandbox.protocol as protocol
    original = protocol.encode_prepared

    def crafted(reply):
        protocol.encode_prepared = original
        return build(reply)

    protocol.encode_prepared = crafted


def _saved(reply, value):
    import io
    buffer = io.BytesIO()
    torch.save({"id": reply["id"], "ok": True, "value": value}, buffer)
    return buffer.getvalue()
'''

HOSTILE_REPLIES = {
    # A 390 kB key, just under what a reply may carry, quoted by the test's message.
    "cat_next_word_probs": 'CAT_NEXT_WORD_PROBS = {"sat" * 130_000: 1.0}\n',
    # A stride-0 view: 1 byte on the wire, 320 MB once materialised.
    "causal_mask": SEND_INSTEAD + '''
def causal_mask(n, device=None):
    _send_instead(lambda reply: _saved(reply, torch.zeros(1, dtype=torch.bool).expand(64, 5_000_000)))
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
    # A zip bomb: 512 MB of zeros, deflated to about half a megabyte.
    "attention_connections": SEND_INSTEAD + '''
def _deflated(reply):
    import io
    import zipfile
    plain, packed = io.BytesIO(_saved(reply, torch.zeros(2**27))), io.BytesIO()
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
    return packed.getvalue()


def attention_connections(n, causal):
    _send_instead(_deflated)
    return n * (n + 1) // 2 if causal else n * n
''',
    # A list of 30 million items: a 60 MB pickle that is slow to take apart.
    "mlm_signal": SEND_INSTEAD + '''
def mlm_signal(n_tokens, mask_rate=0.15):
    _send_instead(lambda reply: _saved(reply, [0] * 30_000_000))
    return {}
''',
}


# Walter's functions start processes that are each within the per-process limits but
# together over the submission's whole-tree limits (docs/threat-model.md).
TREE_HOGS = {
    # Forks until the kernel refuses: the tree's process limit stops it.
    "top_k_next_tokens": '''def top_k_next_tokens(logits, k):
    import os
    import time
    children = 0
    while True:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
    time.sleep(2)
    raise RuntimeError(f"started {children} processes")
''',
    # Three children of 2.3 GB each: under the 6 GiB a process may have, over the 6 GiB
    # of the whole tree.
    "sequence_logprob": '''def sequence_logprob(logits, token_ids):
    import os
    import time
    for _ in range(3):
        if os.fork() == 0:
            block = b"\\x01" * 2_300_000_000
            time.sleep(60)
            os._exit(len(block))
    time.sleep(15)
    raise RuntimeError("the children are still alive")
''',
}


def malformed_metadata(notebook):
    """A full solution whose metadata a student's editor (or the student) broke."""
    notebook = copy.deepcopy(notebook)
    solution = next(c for c in notebook.cells if grade_id(c) == "spanish_reuse")
    title = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    title.metadata["nbgrader"] = "not an object"  # an ungraded markdown cell
    other = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    other.metadata["nbgrader"] = {"grade": "yes", "points": "lots"}
    solution.metadata["nbgrader"]["solution"] = "true"  # a string, not a boolean
    return notebook


# ----------------------------------------------------------------------------- expectations
# What each sample of MAIN must score, and why (part_b_bert_gpt has 40 points).
EXPECTED_MAIN = {
    # Stubs for clm_loss 4, mlm_loss 3, sample_next_token 4, greedy_decode 3,
    # beam_search 5; clm_loss is then replaced by an unshifted, wrong version.
    "carol_half_correct": {"score": 21.0, "statuses": {"test_clm_loss": "failed"}},
    # softmax 3, attention 5, greedy 3, beam 5 (the last one seen only at run time).
    "dave_forbidden_shortcuts": {"score": 24.0, "statuses": {
        "test_softmax": "forbidden", "test_scaled_dot_product_attention": "forbidden",
        "test_greedy_decode": "forbidden", "test_beam_search": "forbidden"},
        "messages": ["GenerationMixin.generate"]},
    "erin_invalid_json": {"score": 0.0, "messages": ["not valid notebook JSON"]},
    # mlm_signal 2 deleted, mlm_loss 3 renamed; the duplicated causal_mask grades its first copy.
    "frank_cell_surgery": {"score": 35.0, "statuses": {
        "test_mlm_signal": "missing", "test_mlm_loss": "missing", "test_causal_mask": "passed"}},
    # attention_connections 2 never returns; the mlm_signal cell 2 hangs while it runs.
    "grace_infinite_loop": {"score": 36.0, "statuses": {
        "test_attention_connections": "timeout", "test_mlm_signal": "error"}},
    "heidi_ignores_sigint": {"score": 37.0, "statuses": {"test_mlm_loss": "timeout"}},
    "ivan_patches_comparisons": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "judy_ast_transformer": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "mallory_input_transformer": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "oscar_lying_tensor": {"score": 0.0, "statuses": {"test_softmax": "failed"},
                           "messages": ["cannot be graded"]},
    "peggy_reads_instructor_copy": {"score": 0.0, "needs_bwrap": True},
    "trent_detached_daemon": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
}


def max_score(stem: str) -> float:
    cells = nbformat.read(SOURCE / f"{stem}.ipynb", as_version=4).cells
    return float(sum(c.metadata["nbgrader"].get("points", 0) for c in cells
                     if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")))


def expectations() -> dict[str, dict]:
    expected = {}
    for stem in auto_graded_notebooks():
        expected[f"alice_full_solution/{stem}"] = {"score": max_score(stem), "max_score": max_score(stem)}
        expected[f"bob_untouched_release/{stem}"] = {"score": 0.0, "max_score": max_score(stem)}
    for student, expectation in EXPECTED_MAIN.items():
        expected[f"{student}/{MAIN}"] = {"max_score": max_score(MAIN), **expectation}
    expected[f"dave_forbidden_shortcuts/{EXERCISE1}"] = {
        "score": 0.0, "max_score": max_score(EXERCISE1),
        "statuses": {"test_top_k_mask_predictions": "forbidden"}, "messages": ["pipeline"]}
    full_small = max_score(SMALL)
    # Only the broken solution cell (spanish_reuse, 2 points) is lost; the markdown cells are ignored.
    expected[f"nina_malformed_metadata/{SMALL}"] = {
        "score": full_small - 2, "max_score": full_small,
        "statuses": {"test_spanish_reuse": "missing", "test_sequence_logprob": "passed"},
        "messages": ["malformed nbgrader metadata", "was ignored"]}
    # The file is unreadable in the sandbox; its content never reaches the report.
    expected[f"sybil_reads_root_only_files/{SMALL}"] = {
        "score": full_small - 2, "max_score": full_small, "needs_bwrap": True,
        "statuses": {"test_top_k_next_tokens": "error"}, "messages": ["exfiltrated: PermissionError"]}
    # The two hogs' items (3 + 2 points) are lost, each with the limit that stopped it.
    expected[f"walter_forks_children/{SMALL}"] = {
        "score": full_small - 5, "max_score": full_small,
        "statuses": {"test_top_k_next_tokens": "error", "test_sequence_logprob": "error",
                     "test_pretraining_costs": "passed"},
        "messages": ["processes and threads", "of memory together"]}
    expected[f"victor_hostile_replies/{MAIN}"] = {
        "score": 0.0, "max_score": max_score(MAIN), "statuses": {
            "test_cat_next_word_probs": "failed", "test_causal_mask": "failed",
            # A payload the grader will not unpack ends the worker: "error", like a crash.
            "test_attention_connections": "error", "test_mlm_signal": "error"},
        "messages": ["characters cut", "compressed", "over the limit", "tensors hold more than"]}
    # Mallet files a notebook under week6/alice_full_solution/: it is Mallet's misplaced
    # file, not Alice's (whose expectations above stay as they are).
    expected[f"mallet_files_under_alice/{intake.misplaced_key(IMPERSONATION.encode())}"] = {
        "score": 0.0, "max_score": 0.0, "messages": ["in a sub-folder"]}
    return expected


# ----------------------------------------------------------------------------- samples
def samples() -> dict[str, dict[str, object]]:
    """student -> {notebook stem: notebook object, or raw text for a broken file}."""
    graded = auto_graded_notebooks()
    out: dict[str, dict[str, object]] = {
        "alice_full_solution": {stem: solved(stem) for stem in graded},
        "bob_untouched_release": {stem: untouched(stem) for stem in graded},
    }
    full = solved(MAIN)
    release = untouched(MAIN)
    second_half = ["clm_loss", "mlm_loss", "sample_next_token", "greedy_decode", "beam_search"]
    half = replace(full, {g: c.source for c in release.cells if (g := grade_id(c)) in second_half})
    out["carol_half_correct"] = {MAIN: replace(half, HALF_CORRECT_WRONG)}
    out["dave_forbidden_shortcuts"] = {
        MAIN: replace(full, FORBIDDEN),
        EXERCISE1: replace(solved(EXERCISE1), FORBIDDEN_EXERCISE1),
    }
    text = nbformat.writes(full)
    out["erin_invalid_json"] = {MAIN: text[: len(text) // 2]}

    surgery = copy.deepcopy(full)
    cells = []
    for cell in surgery.cells:
        if grade_id(cell) == "mlm_signal":
            continue  # deleted
        if grade_id(cell) == "mlm_loss":
            cell.metadata["nbgrader"]["grade_id"] = "my_mlm_loss"  # renamed
        cells.append(cell)
        if grade_id(cell) == "causal_mask":
            duplicate = copy.deepcopy(cell)
            duplicate.source = CELL_SURGERY_DUPLICATE
            duplicate["id"] = "duplicate-causal-mask"
            cells.append(duplicate)  # duplicated (the first copy is graded)
    surgery.cells = cells
    out["frank_cell_surgery"] = {MAIN: surgery}

    out["grace_infinite_loop"] = {MAIN: replace(full, INFINITE_LOOP)}
    out["heidi_ignores_sigint"] = {MAIN: replace(full, {"mlm_loss": IGNORES_SIGNALS})}
    for student, source in CHEATS.items():
        # Stubs everywhere, plus the cheat in the softmax cell: any point is a cheat's success.
        out[student] = {MAIN: replace(release, {"softmax": source})}
    small = solved(SMALL)
    out["nina_malformed_metadata"] = {SMALL: malformed_metadata(small)}
    out["sybil_reads_root_only_files"] = {SMALL: replace(small, READS_ROOT_ONLY)}
    out["victor_hostile_replies"] = {MAIN: replace(release, HOSTILE_REPLIES)}
    out["walter_forks_children"] = {SMALL: replace(small, TREE_HOGS)}
    out["mallet_files_under_alice"] = {IMPERSONATION.removeprefix("week6/").removesuffix(".ipynb"): release}
    return out


def write(target: Path) -> list[Path]:
    written = []
    for student, notebooks in samples().items():
        for stem, notebook in notebooks.items():
            path = target / student / "week6" / f"{stem}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            text = notebook if isinstance(notebook, str) else nbformat.writes(notebook)
            path.write_text(text if text.endswith("\n") or isinstance(notebook, str) else text + "\n")
            written.append(path.relative_to(target))
    (target / "expected.json").write_text(json.dumps(expectations(), indent=2, sort_keys=True) + "\n")
    written.append(Path("expected.json"))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed samples")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as scratch:
            fresh = sorted(write(Path(scratch)))
            stale = [str(p) for p in fresh if not (HERE / p).is_file()
                     or (HERE / p).read_bytes() != (Path(scratch) / p).read_bytes()]
        if stale:
            print("out of date (run python data/sample_submissions/build.py): " + ", ".join(stale))
            return 1
        print(f"{len(fresh)} sample notebooks are up to date.")
        return 0
    for student in [p for p in HERE.iterdir() if p.is_dir()]:
        for old in student.rglob("*.ipynb"):
            old.unlink()
    paths = write(HERE)
    print(f"wrote {len(paths)} sample notebooks under {HERE.relative_to(REPO)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
