"""Submissions in; (student, notebook file) pairs out, and every input problem as a report.

A submitted tree is data written by students, so nothing in it is believed:

* **Who.** The student is the first folder under the class root the TA names
  (``submitted/<student>/...``), or the name the TA gives with ``--student``.
  Folders deeper down never name anyone: ``submitted/mallet/week6/alice/x.ipynb``
  is Mallet's misplaced file, reported to Mallet, and Alice's grade is untouched.
  Two sources that give the same student (``grade a/ b/`` with Alice in both, or
  ``Alice`` beside ``alice``) are refused, never merged or overwritten.
* **What.** Only regular files are read: a symbolic link, device, FIFO or socket
  is reported, never followed or opened, and a file is opened with
  ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat`` after opening, so a
  file swapped for a link in between is refused too. Its size is capped before
  anything is read, and its structure (cells, JSON values, nesting) before it is
  parsed (:func:`structure_problem`), on both paths: ``nbgrader autograde`` reads
  submissions through ``nbgrader/intake.py`` with the same reader.
* **Names.** Folder and file names are read as bytes. A name that is not UTF-8,
  holds control characters or could be mistaken for something else (a leading
  ``.``, ``-``, ``=``: hidden files, options, spreadsheet formulas) is reported
  for that student, with the name escaped; it never stops the class. A student id
  holds only letters, digits and ``. _ @ + -`` (:data:`STUDENT_ID_RULE`), on both
  paths: a folder that breaks the rule is refused with the rule and the fix.

Every problem becomes a :class:`Submission` with ``problem`` set, which the CLI
turns into that student's report (score 0, the reason as a warning) without
starting a sandbox.
"""
from __future__ import annotations

import hashlib
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError
from .files import MAX_NOTEBOOK_BYTES, stat_problem
from .paths import ASSIGNMENT, OUTPUT_NAMES, SOURCE_DIR
from .report import TABLE_NAME, clip

# A student folder is walked (without following links) only to report misplaced
# notebooks; a folder of a million files costs a bounded walk, not the class run.
MAX_ENTRIES_PER_STUDENT = 10_000
MAX_NAME_CHARS = 128
MAX_SHOWN_CHARS = 300  # of a file's path, as reports and the class table show it
# Problem reports for one student; beyond, one report counts the rest.
MAX_PROBLEMS_PER_STUDENT = 50
CHECKPOINTS = b".ipynb_checkpoints"


@dataclass(frozen=True)
class Submission:
    """One notebook of one student, or one problem with what a student handed in.

    ``name`` is what reports and the class table show (the file's path below the
    student's folder, escaped where needed); ``key`` names the report file, unique
    per student; ``problem`` is set when the file is not graded.
    """

    student: str
    path: Path | None
    name: str
    key: str
    problem: str | None = None


# ------------------------------------------------------------------------ names
def display(name: bytes) -> str:
    """A printable form of a file name: itself when it is clean UTF-8, else escaped;
    clipped to ``MAX_SHOWN_CHARS`` (a path may be thousands of characters long)."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return clip(ascii(name)[2:-1], MAX_SHOWN_CHARS)
    if any(unicodedata.category(ch).startswith("C") for ch in text):
        text = ascii(text)[1:-1]
    return clip(text, MAX_SHOWN_CHARS)


def name_problem(name: bytes, what: str) -> str | None:
    """Why ``name`` cannot be used as a student id or notebook name, or None."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return f"the {what} name '{display(name)}' is not valid UTF-8"
    if len(text) > MAX_NAME_CHARS:
        return f"the {what} name '{display(name)[:40]}...' is longer than {MAX_NAME_CHARS} characters"
    if any(unicodedata.category(ch).startswith("C") for ch in text):
        return f"the {what} name '{display(name)}' contains control characters"
    if not (text[:1].isalnum() or text[:1] == "_"):
        return f"the {what} name '{text}' must start with a letter, a digit or '_'"
    if any(not (ch.isalnum() or ch in "._@+-") for ch in text.removesuffix(".ipynb")):
        return f"the {what} name '{text}' may only hold letters, digits and . _ @ + -"
    return None


def student_problem(student: str) -> str | None:
    """Why a student id the TA gave cannot be used, or None."""
    return student_folder_problem(os.fsencode(student))


# A student id names a folder of the output, a row of nbgrader's gradebook, a page of the
# formgrader and a cell of the class table: nothing in it may be markup, a shell or
# spreadsheet metacharacter, a path or a control character (docs/threat-model.md).
STUDENT_ID_RULE = (f"a student id holds only letters, digits and . _ @ + -, starts with a letter, a digit "
                   f"or _, and has at most {MAX_NAME_CHARS} characters")


def student_folder_problem(name: bytes) -> str | None:
    """Why a folder name cannot be a student id (which names a folder of the output), or None."""
    if name.lower() == TABLE_NAME.encode():
        return f"the student name '{TABLE_NAME}' is the class table's file name"
    if name.lower() in {output.encode() for output in OUTPUT_NAMES}:
        return f"the student name '{display(name)}' is the name of a file the class report or export writes"
    if why := name_problem(name, "student"):
        return f"{why} ({STUDENT_ID_RULE})"
    return None


def student_folder_refusal(name: bytes) -> str | None:
    """Why the student folder ``name`` under the class root is not graded, with the fix, or None
    (``python -m autograder grade`` and ``nbgrader autograde`` both refuse it so)."""
    if why := student_folder_problem(name):
        return f"{why}; rename the folder to the student's id and grade it again"
    return None


def fallback_id(name: bytes) -> str:
    """A report folder for a student whose folder name cannot be used as an id."""
    return "unusable-name-" + hashlib.sha256(name).hexdigest()[:12]


# ------------------------------------------------------------------------ trees
def _file_problem(path: bytes, limit: int) -> str | None:
    """Why the file at ``path`` would not be read (checked without opening it)."""
    try:
        return stat_problem(os.lstat(path), limit)
    except OSError as err:
        return f"cannot read it: {err.strerror}"


def assignment_stems(source_dir: Path = SOURCE_DIR) -> set[str]:
    return {p.stem for p in (source_dir / ASSIGNMENT).glob("*.ipynb")}


def collect(paths: list[Path], *, student: str | None = None, limit: int = MAX_NOTEBOOK_BYTES,
            stems: set[str] | None = None) -> list[Submission]:
    """Everything to grade or report under ``paths``, in a stable order.

    Each path is one of: a notebook file; a folder holding one student's notebooks
    (directly, or in a ``week6/`` folder); or a class root whose sub-folders are the
    students (nbgrader's ``submitted/``). ``student`` names the student of a notebook
    or single-student folder; without it, the student is that folder's name (the
    folder above ``week6/``). Raises ``ConfigurationError`` only for mistakes in the
    command itself (a missing path, ``--student`` with a class root, an unusable
    ``--student``).
    """
    stems = assignment_stems() if stems is None else stems
    if student is not None and (why := student_problem(student)):
        raise ConfigurationError(f"--student: {why}")
    sources: list[tuple[str, bytes, Path, list[tuple[bytes, bytes]]]] = []  # (id, raw, origin, files)
    rejected: list[Submission] = []
    for path in paths:
        if not os.path.lexists(path):
            raise ConfigurationError(f"{path} does not exist (give a notebook, a folder or a submitted/ tree)")
        given = Path(os.path.abspath(path))
        if not given.is_dir() or given.is_symlink():
            owner = _single_owner(student or _owner_of_notebook(given), path)
            sources.append((owner, os.fsencode(owner), given.parent, [(os.fsencode(given.name), b"")]))
        elif _is_student_folder(given):
            owner = _single_owner(student or (given.parent.name if given.name == ASSIGNMENT else given.name), path)
            sources.append((owner, os.fsencode(owner), given, _notebooks_of(os.fsencode(given))))
        else:
            if student is not None:
                raise ConfigurationError(f"{path} is a class root (one folder per student); --student "
                                         "applies to one notebook or one student's folder")
            for raw, files, problem in _students_of(os.fsencode(given)):
                if problem:
                    rejected.append(Submission(fallback_id(raw), None, display(raw), "folder", problem))
                else:
                    sources.append((raw.decode(), raw, given / raw.decode(), files))
    return _unique_keys(rejected + _submissions(sources, limit, stems))


def _unique_keys(submissions: list[Submission]) -> list[Submission]:
    """Give every (student, report) pair its own file name, however names collide:
    two reports never overwrite each other."""
    seen: set[tuple[str, str]] = set()
    out = []
    for sub in submissions:
        key = sub.key
        if (sub.student.casefold(), key.casefold()) in seen:
            key = f"{key}-{_digest(os.fsencode(sub.name))}"
        seen.add((sub.student.casefold(), key.casefold()))
        out.append(Submission(sub.student, sub.path, sub.name, key, sub.problem))
    return out


def _single_owner(owner: str, path: Path) -> str:
    if why := student_problem(owner):
        raise ConfigurationError(f"{path}: {why}; name the student with --student NAME")
    return owner


def _owner_of_notebook(path: Path) -> str:
    folder = path.parent
    return folder.parent.name if folder.name == ASSIGNMENT else folder.name


def _is_student_folder(folder: Path) -> bool:
    """One student's folder: it is ``week6/``, holds ``week6/``, or holds notebooks."""
    if folder.name == ASSIGNMENT:
        return True
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name == ASSIGNMENT and entry.is_dir(follow_symlinks=False):
                    return True
                if entry.name.endswith(".ipynb"):
                    return True
    except OSError:
        return False
    return False


def _students_of(root: bytes) -> list[tuple[bytes, list[tuple[bytes, bytes]], str | None]]:
    """(folder name, its notebook files, problem) for every student folder of a class root."""
    found = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as err:
        raise ConfigurationError(f"cannot list {os.fsdecode(root)}: {err.strerror}") from None
    for entry in entries:
        if entry.name.startswith(b"."):
            continue  # .ipynb_checkpoints, .DS_Store, editor files
        if entry.is_symlink():
            found.append((entry.name, [], f"the student folder '{display(entry.name)}' is a symbolic link; "
                                         "links are not followed"))
        elif entry.is_dir(follow_symlinks=False):
            found.append((entry.name, _notebooks_of(entry.path), student_folder_refusal(entry.name)))
        # Regular files beside the student folders belong to nobody: not graded.
    return found


def _notebooks_of(folder: bytes) -> list[tuple[bytes, bytes]]:
    """(path below ``folder``, absolute path) of every ``*.ipynb`` entry and every
    symbolic link of one student.

    Walks without following links and stops after ``MAX_ENTRIES_PER_STUDENT``
    entries; checkpoint folders are skipped.
    """
    found, seen, stack = [], 0, [(folder, b"")]
    while stack and seen < MAX_ENTRIES_PER_STUDENT:
        current, relative = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES_PER_STUDENT:
                break
            below = relative + b"/" + entry.name if relative else entry.name
            if entry.name == CHECKPOINTS:
                continue
            if entry.name.endswith(b".ipynb") or entry.is_symlink():
                found.append((below, entry.path))  # a linked folder is reported, not walked
            elif entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, below))
    return sorted(found)


def _submissions(sources, limit: int, stems: set[str]) -> list[Submission]:
    by_student: dict[str, list[tuple[bytes, Path, list[tuple[bytes, bytes]]]]] = {}
    for owner, raw, origin, files in sources:
        by_student.setdefault(owner.casefold(), []).append((raw, origin, files))
    out: list[Submission] = []
    for folded in sorted(by_student):
        group = by_student[folded]
        owner = group[0][0].decode()
        if len(group) > 1:
            origins = ", ".join(str(origin) for _, origin, _ in group)
            for raw, origin, _ in group:
                out.append(Submission(display(raw), None, str(origin), "duplicate-" + _digest(os.fsencode(str(origin))),
                                      f"the student '{display(raw)}' comes from more than one place ({origins}); "
                                      "nothing was graded for this student. Grade each place separately, "
                                      "or remove the duplicate."))
            continue
        _, origin, files = group[0]
        out.extend(_one_student(owner, origin, files, limit, stems))
    return out


def _one_student(student: str, origin: Path, files: list[tuple[bytes, bytes]], limit: int,
                 stems: set[str]) -> list[Submission]:
    """The notebooks of one student: graded ones at the top of their folder or of
    ``week6/``, everything else reported."""
    placed: dict[str, list[tuple[bytes, bytes]]] = {}
    out: list[Submission] = []
    for below, path in files:
        if not path:  # a single notebook named on the command line
            path = os.fsencode(origin / below.decode(errors="surrogateescape"))
        folder, _, name = below.rpartition(b"/")
        shown = display(below)
        if not name.endswith(b".ipynb") and os.path.islink(path):  # a notebook link is reported below
            out.append(Submission(student, None, shown, "link-" + _digest(below),
                                  f"{shown} is a symbolic link; links are not followed, so nothing in it "
                                  "was graded. Submit the files themselves."))
            continue
        if folder not in (b"", ASSIGNMENT.encode()):
            out.append(Submission(student, None, shown, misplaced_key(below),
                                  f"{shown} is in a sub-folder and was not graded: notebooks are graded only "
                                  f"directly in the student's {ASSIGNMENT}/ folder"))
            continue
        if not name.endswith(b".ipynb"):
            out.append(Submission(student, None, shown, "rejected-" + _digest(below),
                                  f"{shown} is not a notebook (.ipynb) file"))
            continue
        if why := name_problem(name, "notebook file"):
            out.append(Submission(student, None, shown, "rejected-" + _digest(below),
                                  f"{why}; rename it to the notebook's original name"))
            continue
        stem = name.decode().removesuffix(".ipynb")
        placed.setdefault(stem, []).append((below, path))
    for stem in sorted(placed):
        copies = placed[stem]
        shown = f"{stem}.ipynb"
        if len(copies) > 1:
            listed = ", ".join(display(below) for below, _ in copies)
            out.append(Submission(student, None, shown, stem,
                                  f"{stem}.ipynb was submitted more than once ({listed}); none was graded. "
                                  "Keep one copy."))
        elif stem not in stems:
            out.append(Submission(student, None, shown, stem,
                                  f"no assignment notebook is called '{stem}.ipynb' (known: "
                                  f"{', '.join(sorted(stems))}); submit the notebook under its original name"))
        elif why := _file_problem(copies[0][1], limit):
            out.append(Submission(student, None, shown, stem, f"{shown} was not graded: {why}"))
        else:
            out.append(Submission(student, Path(os.fsdecode(copies[0][1])), shown, stem))
    return _capped(student, out)


def _capped(student: str, submissions: list[Submission]) -> list[Submission]:
    """At most ``MAX_PROBLEMS_PER_STUDENT`` problem reports for one student, the last
    of them counting the rest: ten thousand junk files would otherwise cost the class
    run ten thousand report files."""
    problems = [s for s in submissions if s.problem is not None]
    if len(problems) <= MAX_PROBLEMS_PER_STUDENT:
        return submissions
    kept = {id(s) for s in problems[:MAX_PROBLEMS_PER_STUDENT - 1]}
    rest = len(problems) - len(kept)
    return [s for s in submissions if s.problem is None or id(s) in kept] + [
        Submission(student, None, f"{rest} more files", "more-problems",
                   f"{rest} more files of this student were not graded either (misplaced, unusable names, "
                   "links or copies); only the first ones have reports of their own")]


def misplaced_key(below: bytes) -> str:
    """The report name of a notebook found in a sub-folder (``below``: its path in the student's folder)."""
    return "misplaced-" + _digest(below)


def _digest(name: bytes) -> str:
    return hashlib.sha256(name).hexdigest()[:12]
