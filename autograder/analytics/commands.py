"""The ``report`` and ``export`` subcommands of ``python -m autograder`` (added by ``cli.build_parser``).

    python -m autograder report GRADES_DIR [--submissions PATH ...] [--no-similarity] [--threshold X] [--jobs N]
                                [--nbgrader [--course-root DIR]]
    python -m autograder export GRADES_DIR --format canvas|moodle --map MAPPING.csv [--out FILE]
                                [--columns both|notebooks|total] [--nbgrader [--course-root DIR]]

``report`` writes ``GRADES_DIR/class-report.html`` and ``GRADES_DIR/similarity.csv``;
``export`` writes ``GRADES_DIR/<format>-grades.csv`` (or ``--out``). With ``--nbgrader``
both read nbgrader's gradebook in the course root (the working directory, or
``--course-root``) instead of the reports, and GRADES_DIR is only where they write.
Exit status: 0 done; 3 a mistake in the command or its files (nothing written).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..paths import LMS_EXPORTS, SIMILARITY_CSV
from .lms_export import COLUMN_CHOICES, FORMATS


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a score in (0, 1], not {text!r}")
    return value


def _source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("grades", type=Path, metavar="GRADES_DIR",
                        help="the --out folder of `grade` (with --nbgrader: where to write)")
    parser.add_argument("--nbgrader", action="store_true",
                        help="read nbgrader's gradebook.db and autograded notebooks instead of the reports")
    parser.add_argument("--course-root", type=Path, default=Path("."),
                        help="with --nbgrader: the course root holding gradebook.db (default: the working directory)")


def add_commands(commands) -> None:
    report = commands.add_parser("report", help="the class report: scores, items, tests, problems, similar answers")
    _source_options(report)
    report.add_argument("--submissions", type=Path, nargs="+", metavar="PATH",
                        help="where the submissions are, for the similarity check (default: where `grade` found them)")
    report.add_argument("--no-similarity", dest="similarity", action="store_false",
                        help="skip the similarity check of answer cells")
    report.add_argument("--threshold", type=_threshold, help="show pairs scoring at least this (default 0.75)")
    report.add_argument("--jobs", type=int, default=1,
                        help="processes reading and fingerprinting the answers for the similarity check (default 1)")
    report.set_defaults(run=run_report)
    export = commands.add_parser("export", help="grades as Canvas's or Moodle's gradebook import CSV")
    _source_options(export)
    export.add_argument("--format", choices=FORMATS, required=True)
    export.add_argument("--map", type=Path, required=True, metavar="MAPPING.csv",
                        help="CSV: student (the submission folder) and the LMS's ids (see the README)")
    export.add_argument("--out", type=Path, help="the file to write (default: GRADES_DIR/<format>-grades.csv)")
    export.add_argument("--columns", choices=COLUMN_CHOICES, default="both",
                        help="a column per notebook, the total, or both (default)")
    export.set_defaults(run=run_export)


def run_report(args: argparse.Namespace) -> int:
    from .class_report import build

    started = time.perf_counter()
    page, results, extras = build(args.grades, nbgrader_root=args.course_root if args.nbgrader else None,
                                  submissions=args.submissions, similarity=args.similarity, threshold=args.threshold,
                                  jobs=max(1, args.jobs))
    found = extras.similarity
    print(f"{len(results.students)} students, {len(results.notebook_reports())} notebook reports")
    if found is not None:
        print(f"similarity: {found.answers} answers read and fingerprinted in {found.seconds_reading:.1f} s, "
              f"{found.compared} pairs scored in {found.seconds_pairs:.1f} s; {len(found.flagged)} at or above "
              f"{found.threshold}; every pair from {found.floor}: {Path(args.grades) / SIMILARITY_CSV}")
    elif extras.similarity_note:
        print(f"similarity: {extras.similarity_note}")
    for warning in extras.warnings + results.warnings:
        print(f"warning: {warning}")
    print(f"class report: {page} ({time.perf_counter() - started:.1f} s)")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from .lms_export import export
    from .nbgrader_results import load_gradebook
    from .results import load_grades

    results = load_gradebook(args.course_root) if args.nbgrader else load_grades(args.grades)
    out = args.out or Path(args.grades) / LMS_EXPORTS[args.format]
    _, notes = export(results, args.map, args.format, out, args.columns)
    for note in notes:
        print(note)
    return 0
