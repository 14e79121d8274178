"""Files the grader did not write, read within bounds; files it writes, written atomically.

Everything a student or a past run left on disk (a notebook, a report, a history entry) is
read here: only a regular file, never through a link, of bounded size, and for a notebook
of bounded structure before any parser builds it. What the grader writes (reports, their
history) is written so that a crash leaves the old file or the new one, never half of one.
"""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path

from .errors import IntakeError

MiB = 2**20
# A notebook with its outputs (plots, progress bars) is a few MB; 32 MiB leaves room
# for any honest one and keeps a /dev/zero-like file from being read into memory.
MAX_NOTEBOOK_BYTES = 32 * MiB
# What reading a notebook costs grows with its cells and JSON values, not only its bytes
# (nbgrader spent 48 s of CPU on 50,000 empty cells, 5 MB of JSON). The course's notebooks
# have at most 93 cells; run in fast mode, part_b_finetuning (93 cells, 45 outputs) holds
# 6,356 JSON values (objects, lists and strings, keys included) nested 8 deep. The
# limits leave a student room for cells and outputs of their own.
MAX_CELLS = 2_000
MAX_JSON_VALUES = 100_000
MAX_JSON_DEPTH = 64


def read_regular_file(path: Path | str, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    Raises :class:`IntakeError` for a symbolic link, anything that is not a regular
    file, or a file over ``limit``: nothing is read from those. ``O_NONBLOCK`` keeps
    a FIFO from blocking the open; ``fstat`` on the open descriptor checks the file
    actually opened, not the name looked at before.
    """
    shown = Path(path).name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if os.path.islink(path):
            raise IntakeError(f"{shown} is a symbolic link; only regular files are graded. "
                              "Submit the notebook file itself.") from None
        raise IntakeError(f"cannot open {shown}: {err.strerror}") from None
    try:
        if why := stat_problem(os.fstat(fd), limit):
            raise IntakeError(f"{shown}: {why}.")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew after fstat
            raise IntakeError(f"{shown} is over the {limit / MiB:.0f} MiB a notebook may have.")
        return data
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def stat_problem(info: os.stat_result, limit: int) -> str | None:
    """Why a file with this status is not read: not a regular file, or too large."""
    if not stat.S_ISREG(info.st_mode):
        return f"it is {_kind(info.st_mode)}, not a regular file; only notebook files are graded"
    if info.st_size > limit:
        return (f"it is {info.st_size / MiB:.1f} MiB, over the {limit / MiB:.0f} MiB a notebook may have; "
                "clear its outputs (Edit > Clear Outputs of All Cells) and submit it again")
    return None


# A JSON string once its escaped backslashes and quotes are gone: what the structure
# check skips (a bracket in a string, such as a printed tensor, is text, not structure).
_JSON_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENING = frozenset(b"[{")
# Below this many values a document is parsed before its values are judged, so that a
# notebook of many cells is told about its cells; above it, nothing is parsed (json builds
# 10 million empty lists, 28 MiB, in 6 s and 1.2 GB).
_PARSED_AT_MOST = 10 * MAX_JSON_VALUES
_FIX_CELLS = ("delete the cells you added, or copy your answers into a fresh copy of the released "
              "notebook, and submit it again")


def structure_problem(data: bytes) -> str | None:
    """Why the notebook JSON ``data`` (at most ``MAX_NOTEBOOK_BYTES``) is over a limit on
    its structure, or None; the reason names the limit and the fix.

    The strings, objects, lists and nesting are counted on the quotes and brackets outside
    strings, before any parser builds them; the cells once that bounded document is parsed.
    Invalid JSON is left to the notebook reader, which says what is wrong with it. Measured
    on the project's 2-core machine: 3 ms for a course notebook, under 2 s for 32 MiB built
    to be slow.
    """
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    values = unescaped.count(b'"') // 2
    if values <= _PARSED_AT_MOST:  # else nothing more is worth counting
        brackets = _JSON_STRING.sub(b"", unescaped).translate(None, _NOT_BRACKETS)
        values += len(brackets) // 2
    if values > _PARSED_AT_MOST:
        return _values_problem(values)
    depth = 0
    for bracket in brackets:
        depth += 1 if bracket in _OPENING else -1
        if depth > MAX_JSON_DEPTH:
            return (f"its JSON is nested more than {MAX_JSON_DEPTH} levels deep, which no notebook saved by "
                    "Jupyter is; download the notebook again from JupyterLab (File > Save and Export Notebook "
                    "As > Notebook), clear its outputs and submit it again")
    try:
        cells = json.loads(data).get("cells")
    except (ValueError, AttributeError, RecursionError):
        return None
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        return f"it has {len(cells):,} cells, over the {MAX_CELLS:,} cells a notebook may have; {_FIX_CELLS}"
    return _values_problem(values) if values > MAX_JSON_VALUES else None


def _values_problem(values: int) -> str:
    return (f"it holds about {values:,} JSON values (objects, lists and strings: cells, lines, outputs, "
            f"metadata), over the {MAX_JSON_VALUES:,} a notebook may have; clear its outputs (Edit > Clear "
            f"Outputs of All Cells), {_FIX_CELLS}")


def write_json_atomically(folder: Path, name: str, data: dict) -> Path:
    """Write ``data`` as ``folder/<name>.json`` so that a crash leaves the old file or the new one."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.json"
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(data, indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # as an ordinary file: mkstemp's are private
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
