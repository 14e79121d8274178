"""Command line of the grader: ``python -m autograder grade|check ...``."""
from autograder.cli import main

raise SystemExit(main())
