"""``make regen``: bring every generated file of the repository up to date, in order.

    python -m autograder.build.regen                  # regenerate what is out of date
    python -m autograder.build.regen --check          # write nothing; exit 1 listing what is out of date
    python -m autograder.build.regen --only handout   # one step (repeatable): tables, release, handout, samples, readme, checksums

The steps, in the order in which they depend on each other:

1. ``tables``: the "What you should see" cells of ``solutions/week6`` from
   ``benchmarks/results/reference_values.json`` (``autograder/build/reference_tables.py``);
2. ``release``: ``assignments/week6`` from ``solutions/week6`` with nbgrader
   (``autograder/build/release.py``), which is why the tables come first;
3. ``handout``: ``handouts/week6.html``, ``handouts/grading_map.md`` and the item
   lines of the "Where in the notebooks" boxes of ``handouts/week6.md``
   (``handouts/build.py``);
4. ``samples``: ``data/sample_submissions/`` from the release notebooks and the
   sample students' files (``autograder/build/samples.py``), which is why the release
   comes first;
5. ``readme``: the points columns of the README's table of notebooks, from the
   course model (``autograder/build/readme_points.py``), and its table of run times, from the
   reference runs (``autograder/build/reference_tables.py``);
6. ``checksums``: every ``data/**/SHA256SUMS`` against the files it lists. The data
   sets, tokenizer and checkpoints are rebuilt from upstream downloads or by
   training (``data/*/build.py``, ``python -m week6_pretraining...``), not here: a
   mismatch is reported in both modes and never "fixed" by rewriting the list.

Steps 1-5 hand every file to one check-or-write helper
(:func:`autograder.build.generated.update`); ``--check`` therefore writes nothing, and
reports each file that differs, is missing, or should no longer exist. All steps
run even when one finds something, so one run lists everything.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import DATA, REPO
from .generated import Files, shown, update_all


def _handout_build():
    """``handouts/build.py`` as a module (the handout is not part of the installed package)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("handouts.build")


# ------------------------------------------------------------------------------ steps
@dataclass
class Found:
    """What a step found: files out of date (rewritten unless checking), and what it cannot fix."""

    stale: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _updated(outputs: Callable[[], Files], failure: type[Exception] | tuple[type[Exception], ...], where: str,
             check: bool) -> Found:
    """The files ``outputs()`` computes, each handed to ``generated.update``; a ``failure`` it raises
    (a source the build cannot follow) is an error, reported under ``where``, and touches nothing."""
    try:
        files = outputs()
    except failure as err:
        return Found(errors=[f"{where}{err}"])
    return Found(stale=[shown(path) for path in update_all(files, check=check)])


def tables(check: bool) -> Found:
    from . import reference_tables

    return _updated(reference_tables.notebook_outputs, reference_tables.TablesError, "solutions/week6/", check)


def release(check: bool) -> Found:
    from . import release as release_module

    try:
        return Found(stale=[shown(path) for path in release_module.regenerate(check=check)])
    except RuntimeError as err:  # nbgrader generate_assignment failed
        return Found(errors=[f"autograder/build/release.py: {err}"])


def handout(check: bool) -> Found:
    build = _handout_build()
    return _updated(build.outputs, build.BuildError, "handouts/build.py: ", check)


def samples(check: bool) -> Found:
    from . import samples as sample_build  # the step shares its name

    return _updated(sample_build.outputs, sample_build.SampleError, "data/sample_submissions/", check)


def readme(check: bool) -> Found:
    from . import readme_points, reference_tables, speed_table

    def outputs() -> Files:  # the README with its points, run times and grading-speed table filled in
        speed = speed_table.load_results()
        return {path: speed_table.with_speed_table(reference_tables.with_run_times(text.decode("utf-8")),
                                                   speed).encode("utf-8")
                for path, text in readme_points.outputs().items()}

    return _updated(outputs, (readme_points.ReadmeError, speed_table.SpeedTableError), "README.md: ", check)


def checksums(check: bool, root: Path = DATA) -> Found:
    """Every file listed by a ``SHA256SUMS`` below ``root`` exists and has that digest
    (``sha256sum -c``); the same in both modes, since rewriting a list fixes nothing."""
    errors = []
    for listing in sorted(Path(root).rglob("SHA256SUMS")):
        for number, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            digest, separator, name = line.partition("  ")
            path = listing.parent / name
            if not separator or len(digest) != 64:
                errors.append(f"{shown(listing)}:{number}: not a sha256sum line: {line!r}")
            elif not path.is_file():
                errors.append(f"{shown(path)}: listed in {shown(listing)} but missing")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                errors.append(f"{shown(path)}: does not match {shown(listing)}")
    return Found(errors=errors)


STEPS: dict[str, Callable[[bool], Found]] = {
    "tables": tables,
    "release": release,
    "handout": handout,
    "samples": samples,
    "readme": readme,
    "checksums": checksums,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.build.regen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 listing what is out of date")
    parser.add_argument("--only", action="append", choices=list(STEPS), metavar="STEP",
                        help=f"run only this step (repeatable): {', '.join(STEPS)}")
    args = parser.parse_args(argv)
    stale: list[str] = []
    errors: list[str] = []
    for name, step in STEPS.items():
        if args.only and name not in args.only:
            continue
        print(f"== {name}", flush=True)
        found = step(args.check)
        for error in found.errors:
            print(f"error: {error}")
        stale += found.stale
        errors += found.errors
        sys.stdout.flush()
    if args.check and stale:
        print(f"\n{len(stale)} file(s) out of date (run `make regen`):")
        print("\n".join(f"  {path}" for path in stale))
    if errors:
        print(f"\n{len(errors)} problem(s) that regenerating does not fix:")
        print("\n".join(f"  {error}" for error in errors))
    if errors or (args.check and stale):
        return 1
    if args.check:
        print("\nAll generated files are up to date.")
    else:
        print(f"\nAll generated files are up to date ({len(stale)} written or removed).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
