"""Where a grading run found the submissions, so that the similarity check can read them again.

A report names its student and notebook, not the file it graded. ``grade`` records the
paths it was given (and its ``--student``) in ``<out>/.grading-run.json``: a name that
no student folder can have (``intake`` refuses names that start with a dot), beside the
reports. Shards of one class record the same paths; a run over another tree into the
same folder adds its own. :func:`submitted_notebooks` takes those paths in again through
``intake.collect``, the way ``grade`` did, so each file is matched to its report by the
same (student, report name) and read under the same rules.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..errors import ConfigurationError, IntakeError
from ..files import read_regular_file
from ..intake import collect
from ..report import Report

RUN_FILE = ".grading-run.json"
MAX_RUN_FILE_BYTES = 1024 * 1024


def record(out: Path, paths: list[Path], student: str | None) -> Path:
    """Add ``paths`` (made absolute) and ``student`` to ``out/.grading-run.json``, atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = recorded(out)
    entry = {"paths": [os.path.abspath(p) for p in paths], "student": student}
    if entry not in runs:
        runs.append(entry)
    fd, temporary = tempfile.mkstemp(dir=out, prefix=f"{RUN_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump({"runs": runs}, handle, indent=2)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out / RUN_FILE)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return out / RUN_FILE


def recorded(out: Path) -> list[dict]:
    """The runs recorded in ``out`` ({"paths": [...], "student": ...} each); [] when none or unreadable."""
    try:
        data = json.loads(read_regular_file(Path(out) / RUN_FILE, limit=MAX_RUN_FILE_BYTES))
    except (IntakeError, ValueError):
        return []
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        return []
    return [run for run in runs if isinstance(run, dict) and isinstance(run.get("paths"), list)
            and all(isinstance(p, str) for p in run["paths"]) and isinstance(run.get("student"), (str, type(None)))]


def submitted_notebooks(reports: list[Report], keys: dict[int, str], runs: list[dict]
                        ) -> tuple[dict[tuple[str, str], Path], list[str]]:
    """(student, notebook stem) -> the file graded for that report, and warnings.

    ``keys`` maps ``id(report)`` to its report file's name (``<key>.json``); ``runs`` is
    what :func:`recorded` returns, or the TA's ``--submissions`` as one run. A file whose
    bytes are not the ones its report graded is still compared, with a warning."""
    wanted = {(r.student, keys[id(r)]): r for r in reports if r.outcome == "graded" and id(r) in keys}
    found: dict[tuple[str, str], Path] = {}
    warnings: list[str] = []
    for run in runs:
        try:
            submissions = collect([Path(p) for p in run["paths"]], student=run["student"])
        except ConfigurationError as err:
            warnings.append(f"the submissions at {', '.join(run['paths'])} cannot be read again ({err}); "
                            "give them with --submissions")
            continue
        for sub in submissions:
            report = wanted.get((sub.student, sub.key))
            if sub.path is None or report is None:
                continue
            stem = Path(sub.name).stem
            found.setdefault((sub.student, stem), sub.path)
            try:
                digest = hashlib.sha256(read_regular_file(sub.path)).hexdigest()
            except IntakeError as err:
                warnings.append(f"{sub.student}/{sub.name}: {err}")
                continue
            if report.submission_sha256 and digest != report.submission_sha256:
                warnings.append(f"{sub.student}/{sub.name} changed since it was graded; its current answers "
                                "were compared (grade again to bring the report up to date)")
    return found, warnings
