"""Command line of the grader.

    python -m autograder grade [PATH ...] [--out DIR] [--jobs N] [--device auto|cpu|cuda] [--student NAME]
                               [--shard I/N | --shards N --shard-from-env VAR] [--force] [--format gradescope]
                               [--timeout-notebook S] [--timeout-cell S] [--timeout-call S]
                               [--timeout-hung-call S] [--timeout-worker-start S] [--no-zygote]
    python -m autograder merge DIR ... [--out DIR] [--nbgrader [--course-root DIR]]
    python -m autograder check NOTEBOOK
    python -m autograder report GRADES_DIR ...  /  export GRADES_DIR --format canvas|moodle ...  (analytics/commands.py)

``grade`` writes ``DIR/<student>/<notebook stem>.json`` per submission, each
atomically as soon as it is graded, and ``DIR/grades.csv`` for the class, and
prints a table. What was handed in is taken in by ``autograder.intake``: the
student is the first folder under a class root (or ``--student``), only regular
files are read, and every problem with a file becomes that student's report.

A run skips every notebook whose report is up to date (same grader version, same
hidden suites and references, same notebook bytes, same device; ``--force``
grades it again), so a run that was killed finishes the class when started
again. ``--shard I/N`` grades only shard I (from 0) of N, the I-th of N contiguous
blocks of the stable order of (student, notebook), for job arrays; shards may share an output folder, write no
class table, and ``merge`` builds it from their reports. ``--format gradescope``
also writes each report as Gradescope's ``results.json``, in
``DIR/<student>/gradescope/<notebook stem>.json``. The device, the timeouts and the
paths become one ``GradingConfig`` (``autograder.config``), built here once per run.
Under bubblewrap the run keeps up to ``--jobs`` zygotes (``autograder.sandbox.zygote``),
preloaded once, from which every notebook's sandboxed worker is forked;
``--no-zygote`` starts each worker cold instead.

Exit status (``grade``): 0 every submission assigned to this run has a report,
whatever the scores; 2 some could not be graded because of the grader or the
machine (a crashed or timed-out grading process: run again to retry them); 3 a
mistake in the command (nothing was graded; do not retry). ``check`` is the
student's self-check: the notebook's visible tests, run in the same sandboxed
worker.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .analytics.commands import add_commands as add_analytics_commands
from .analytics.sources import record as record_sources
from .config import SETTINGS, TIMEOUTS, ZYGOTE, GradingConfig
from .device import DEVICES, DeviceUnavailable
from .draws import describe
from .errors import ConfigurationError, IntakeError
from .files import read_regular_file
from .grade_history import write_report
from .intake import Submission, collect
from .paths import SAMPLES
from .progress import Progress as _Progress
from .report import Report, print_table, read_report, write_gradescope, write_table
from .runner import grade_submission, start_fork_server
from .session import zygote_pool
from .version import SCHEMA_VERSION, __version__, suite_hash, up_to_date_report

EXIT_OK, EXIT_RETRY, EXIT_CONFIGURATION = 0, 2, 3


def submissions(todo: list[tuple[Submission, str]], jobs: int) -> list[list[tuple[Submission, str]]]:
    """``todo`` (in the stable order) cut into one batch per student, each graded by one
    process and one sandboxed worker; while there are fewer batches than ``jobs``, the
    largest is halved, so that a class of one still keeps every job busy."""
    batches: list[list[tuple[Submission, str]]] = []
    for item in todo:
        if batches and batches[-1][0][0].student == item[0].student:
            batches[-1].append(item)
        else:
            batches.append([item])
    while 0 < len(batches) < jobs:
        largest = max(range(len(batches)), key=lambda i: len(batches[i]))
        batch = batches[largest]
        if len(batch) < 2:
            break
        batches[largest: largest + 1] = [batch[: len(batch) // 2], batch[len(batch) // 2:]]
    return batches


def grade(paths: list[Path], config: GradingConfig, jobs: int = 1, student: str | None = None, *,
          shard: tuple[int, int] = (0, 1), force: bool = False, formats: tuple[str, ...] = ()) -> int:
    """Grade ``paths`` (default: the samples) as ``config`` says, into ``config.out``.

    ``config.hidden_paths`` must cover ``paths`` and ``config.out`` (``grading_config``
    does): no student reads another's notebook or report."""
    if config.out is None:
        raise ConfigurationError("grading from the command line needs an output folder (GradingConfig.out)")
    mine = _select(paths or [SAMPLES], student, shard, config.out)
    if not mine:
        index, count = shard
        print("No notebooks found to grade" + (f" in shard {index}/{count}." if count > 1 else "."), file=sys.stderr)
        return EXIT_OK
    recorder = _Recorder(config, formats)
    reports, todo = recorder.triage(mine, force)
    _announce(config, jobs, shard, mine, todo)
    started = time.perf_counter()
    return _summarise([*reports, *_grade_all(todo, config, jobs, recorder)], config.out, shard, started)


def _select(paths: list[Path], student: str | None, shard: tuple[int, int], out: Path) -> list[Submission]:
    """This shard's submissions: contiguous blocks of the stable order, so that a student's
    notebooks stay together (one grading process for them all) except where a block
    boundary cuts through them."""
    index, count = shard
    everything = sorted(collect(paths, student=student), key=lambda s: (s.student, s.key))
    record_sources(out, paths, student)  # where the similarity check reads the answers again
    return everything[len(everything) * index // count: len(everything) * (index + 1) // count]


class _Recorder:
    """Names each report after the intake's student and file, stamps what graded it, and
    writes it at once (a crash never loses a finished grade)."""

    def __init__(self, config: GradingConfig, formats: tuple[str, ...]):
        self.out, self.device, self.formats = config.out, config.device, formats
        self.stamp = {"schema_version": SCHEMA_VERSION, "grader_version": __version__,
                      "suite_hash": suite_hash(config.secret), "device": config.device}

    def record(self, sub: Submission, report: Report, digest: str | None) -> Report:
        report = dataclasses.replace(report, **self.stamp, student=sub.student, notebook=sub.name,
                                     submission_sha256=digest)
        write_report(self.out, sub.student, sub.key, report)
        if "gradescope" in self.formats:
            write_gradescope(self.out, sub.student, sub.key, report)
        return report

    def triage(self, mine: list[Submission], force: bool) -> tuple[list[Report], list[tuple[Submission, str]]]:
        """The reports already settled (problems of the intake, files that changed since it,
        reports up to date unless ``force``) and what is left to grade, with its digest."""
        reports, todo = [], []
        for sub in mine:
            if sub.problem is not None:
                reports.append(self.record(sub, Report.problem(sub.student, sub.name, sub.problem,
                                                               device=self.device), None))
                continue
            try:
                digest = hashlib.sha256(read_regular_file(sub.path)).hexdigest()
            except IntakeError as err:  # changed since intake looked at it
                reports.append(self.record(sub, Report.problem(sub.student, sub.name, str(err), device=self.device),
                                           None))
                continue
            done = None if force else up_to_date_report(self.out / sub.student / f"{sub.key}.json", digest,
                                                        **self.stamp)
            if done is not None:
                reports.append(done)
            else:
                todo.append((sub, digest))
        return reports, todo


def _announce(config: GradingConfig, jobs: int, shard: tuple[int, int], mine: list[Submission],
              todo: list[tuple[Submission, str]]) -> None:
    index, count = shard
    skipped = sum(1 for s in mine if s.problem is None) - len(todo)
    print(describe(config.secret), file=sys.stderr)
    print(f"Grading {len(todo)} notebook(s) with {jobs} job(s) on device '{config.device}'"
          + (f", shard {index}/{count}" if count > 1 else "")
          + (f"; {skipped} already graded (--force grades them again)" if skipped else "")
          + (f"; {sum(1 for s in mine if s.problem)} file(s) not graded, see their reports"
             if any(s.problem for s in mine) else "") + "...", flush=True)


def _grade_all(todo: list[tuple[Submission, str]], config: GradingConfig, jobs: int,
               recorder: _Recorder) -> list[Report]:
    """Grade ``todo`` in ``jobs`` parallel processes, one per student's batch; the reports,
    each recorded (written to disk) as it comes, so a crash loses no finished grade."""
    batches = submissions(todo, jobs)
    reports: list[Report] = []
    with contextlib.ExitStack() as stack:
        if todo:
            workers = min(max(1, jobs), len(batches))
            config = stack.enter_context(zygote_pool(config, workers, prestart=workers))
            start_fork_server()
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=max(1, jobs)))
        progress = stack.enter_context(_Progress(len(todo)))
        lock = threading.Lock()

        def graded(batch: list[tuple[Submission, str]], index: int, report: Report) -> None:
            sub, digest = batch[index]
            with lock:  # from the pool's threads: one report and one progress line at a time
                reports.append(recorder.record(sub, report, digest))
                progress.done(sub, report)

        futures = [pool.submit(grade_submission, [sub.path for sub, _ in batch], student=batch[0][0].student,
                               config=config, on_report=functools.partial(graded, batch))
                   for batch in batches]
        for future in as_completed(futures):
            future.result()
    return reports


def _summarise(reports: list[Report], out: Path, shard: tuple[int, int], started: float) -> int:
    """The class table (one shard: how to merge), warnings, and the exit status."""
    index, count = shard
    if count == 1:
        table = write_table(reports, out)
        print()
        print_table(reports)
        where = f"class table {table}"
    else:
        where = f"shard {index}/{count}; build the class table with: python -m autograder merge {out}"
    if any(r.sandbox == "degraded" for r in reports):
        print("warning: bubblewrap is unavailable; student code ran with process isolation and limits only "
              "(install the Debian package 'bubblewrap' for the full sandbox)", file=sys.stderr)
    failed = [r for r in reports if r.outcome == "failed"]
    print(f"\n{len(reports)} report(s) in {out}/, {where} ({time.perf_counter() - started:.1f} s)")
    if failed:
        print(f"{len(failed)} notebook(s) could not be graded because of the grader or the machine; "
              "run the same command again to retry them.", file=sys.stderr)
        return EXIT_RETRY
    return EXIT_OK


def merge(folders: list[Path], out: Path | None = None, nbgrader: bool = False,
          course_root: Path | None = None) -> int:
    """``grades.csv`` from the reports of several (sharded) runs; a report found twice counts once.

    ``nbgrader``: then run ``nbgrader autograde`` in the working directory (the course
    root, with this repository's ``nbgrader_config.py``) taking the scores from these
    reports, so that the gradebook, formgrader, feedback and export work as after
    ``nbgrader autograde`` itself; a notebook without an up-to-date report is graded.
    ``course_root`` names another course root (and its ``gradebook.db``) for nbgrader."""
    if nbgrader and len(folders) != 1:
        raise ConfigurationError("--nbgrader takes the one folder that the shards wrote their reports into")
    reports: dict[tuple[str, str], Report] = {}
    for folder in folders:
        if not folder.is_dir():
            raise ConfigurationError(f"{folder} is not a folder of reports")
        for path in sorted(folder.glob("*/*.json")):
            key = (path.parent.name, path.stem)
            try:
                report = read_report(path)
            except (IntakeError, ValueError) as err:
                print(f"warning: skipped {path}: {err}", file=sys.stderr)
                continue
            if key in reports:
                print(f"warning: {path} is a second report of {key[0]}/{key[1]}; the first one was kept",
                      file=sys.stderr)
                continue
            reports[key] = report
    target = out or folders[0]
    target.mkdir(parents=True, exist_ok=True)
    table = write_table(reports.values(), target)
    print_table(reports.values())
    print(f"\n{len(reports)} report(s) from {len(folders)} folder(s), class table {table}")
    if nbgrader and _import_into_nbgrader(folders[0], course_root) != 0:
        return EXIT_RETRY
    return EXIT_RETRY if any(r.outcome == "failed" for r in reports.values()) else EXIT_OK


def _import_into_nbgrader(folder: Path, course_root: Path | None) -> int:
    import subprocess

    from .paths import ASSIGNMENT, venv_env

    command = [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--create", "--force",
               f"--SandboxedGrading.reports={folder.resolve()}"]
    if course_root is not None:
        root = course_root.resolve()
        command += [f"--CourseDirectory.root={root}", f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"]
    print("Importing the scores into nbgrader's gradebook: " + " ".join(command[2:]), flush=True)
    return subprocess.run(command, env=venv_env()).returncode


def check(notebooks: list[Path]) -> int:
    # One self-check for everyone: the one students run from the course package.
    from week6_helpers.check import main as student_check

    return student_check([str(p) for p in notebooks])


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        index, count = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N (for example 0/3), not {text!r}") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"shard {text}: I must be at least 0 and below N")
    return index, count


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on the configuration exit status (3, not 2: 2 means retry)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_CONFIGURATION, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m autograder", description="Week 6 sandboxed autograder")
    commands = parser.add_subparsers(dest="command", required=True)
    grade_parser = commands.add_parser("grade", help="grade notebooks in a sandbox, out of the student's kernel")
    grade_parser.add_argument("paths", nargs="*", type=Path,
                              help="notebooks, one student's folder, or an nbgrader submitted/ tree "
                                   "(default: the bundled sample submissions)")
    grade_parser.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades/)")
    grade_parser.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade_parser.add_argument("--device", choices=DEVICES, default="auto",
                              help="where reference and student tensors live (default: cuda if available)")
    grade_parser.add_argument("--student", help="the student of a single notebook or folder "
                                                "(default: the folder's name, or the one above week6/)")
    grade_parser.add_argument("--shard", type=_shard, help="grade only shard I (from 0) of N, e.g. 0/3")
    grade_parser.add_argument("--shards", type=int, help="with --shard-from-env: the number of shards N")
    grade_parser.add_argument("--shard-from-env", metavar="VAR",
                              help="read the shard I from this variable (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX)")
    grade_parser.add_argument("--force", action="store_true", help="grade again notebooks whose report is up to date")
    grade_parser.add_argument("--format", action="append", choices=("gradescope",), default=[],
                              help="also write each report in this format")
    # The run's settings (config.SETTINGS), each with its GradingConfig field as dest and default.
    grade_parser.add_argument(ZYGOTE.option, dest=ZYGOTE.field, action="store_false",
                              help=f"start every sandboxed worker cold (default: {ZYGOTE.help})")
    timeouts = grade_parser.add_argument_group("timeouts (seconds)")
    for setting in TIMEOUTS:
        timeouts.add_argument(setting.option, dest=setting.field, type=float, metavar="S",
                              default=getattr(GradingConfig, setting.field),
                              help=f"{setting.help} (default %(default)g)")
    merge_parser = commands.add_parser("merge", help="build grades.csv from the reports of sharded runs")
    merge_parser.add_argument("folders", nargs="+", type=Path)
    merge_parser.add_argument("--out", type=Path, help="where grades.csv goes (default: the first folder)")
    merge_parser.add_argument("--nbgrader", action="store_true",
                              help="also import the scores into nbgrader (run from the course root)")
    merge_parser.add_argument("--course-root", type=Path,
                              help="with --nbgrader: the course root, if not the one of ./nbgrader_config.py")
    check_parser = commands.add_parser(
        "check", help="a student's self-check: run notebooks in a fresh kernel, report stubs and visible tests")
    check_parser.add_argument("notebook", type=Path, nargs="+")
    add_analytics_commands(commands)  # report, export
    return parser


def _shard_of(args: argparse.Namespace) -> tuple[int, int]:
    if args.shard_from_env is None:
        if args.shards is not None:
            raise ConfigurationError("--shards goes with --shard-from-env VAR (or give --shard I/N)")
        return args.shard or (0, 1)
    if args.shard is not None or args.shards is None:
        raise ConfigurationError("--shard-from-env VAR needs --shards N, and no --shard")
    value = os.environ.get(args.shard_from_env)
    if value is None or not value.isdigit():
        raise ConfigurationError(f"--shard-from-env: ${args.shard_from_env} is {value!r}, not a shard number")
    try:
        return _shard(f"{value}/{args.shards}")
    except argparse.ArgumentTypeError as err:
        raise ConfigurationError(str(err)) from None


def grading_config(args: argparse.Namespace) -> GradingConfig:
    """The run's config from ``grade``'s options; the device is resolved here, once:
    every job grades on it and each report records it. The sandbox hides every
    submission path given and the output folder, on top of the repository."""
    return GradingConfig.build(
        device=args.device, out=args.out, **{setting.field: getattr(args, setting.field) for setting in SETTINGS},
        hidden_paths=(*GradingConfig.hidden_paths, *(str(p.resolve()) for p in args.paths),
                      str(args.out.resolve())),
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "grade":
            return grade(args.paths, grading_config(args), args.jobs, args.student,
                         shard=_shard_of(args), force=args.force, formats=tuple(args.format))
        if args.command == "merge":
            return merge(args.folders, args.out, args.nbgrader, args.course_root)
        if args.command in ("report", "export"):
            return args.run(args)
    except (ConfigurationError, DeviceUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return check(args.notebook)
