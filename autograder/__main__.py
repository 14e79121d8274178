"""Command line of the grader: ``python -m autograder grade|check ...``.

``python -m`` puts the working directory first on ``sys.path``. A TA who grades
from inside a student's folder would then import the student's ``argparse.py``
or ``pytest.py`` into the trusted grading process. So before anything else is
imported, the working directory leaves ``sys.path`` (what ``python -P`` does), and
``PYTHONSAFEPATH`` tells every Python the grader starts (the fork server, the
workers) to do the same. What this cannot stop: a folder named ``autograder`` in
the working directory is imported by ``python -m autograder`` before this file
runs; ``docs/threat-model.md`` says to use ``python -P -m autograder`` there.
"""
import os
import sys

if not sys.flags.safe_path and sys.path and os.path.realpath(sys.path[0] or ".") == os.path.realpath(os.getcwd()):
    del sys.path[0]
os.environ["PYTHONSAFEPATH"] = "1"

from autograder.cli import main  # noqa: E402

raise SystemExit(main())
