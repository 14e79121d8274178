"""Command line of the grader (``python -m autograder``)."""
from __future__ import annotations

import argparse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "sample_submissions"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade notebooks in a sandbox, out of the student's kernel")
    grade.add_argument("paths", nargs="*", type=Path,
                       help="notebooks, folders of notebooks, or an nbgrader submitted/ tree "
                            "(default: the bundled sample submissions)")
    grade.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades/)")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel")
    grade.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    check = commands.add_parser("check", help="run the visible tests of one notebook (student self-check)")
    check.add_argument("notebook", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paths = args.paths if args.command == "grade" else [args.notebook]
    print(f"autograder {args.command}: {', '.join(map(str, paths)) or SAMPLES}")
    print("The sandboxed grader is not implemented yet; nothing was graded.")
    return 0
