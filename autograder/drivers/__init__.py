"""The Week 6 drivers: the trusted code of the hidden suites that runs inside the worker.

``models`` builds the seeded models a test hands to student code (fixtures);
``probes`` drives stateful student code (a training loop, a LoRA layer) next to it.
Both return only plain data, and both are imported on the two sides of the
boundary: by the worker, to run them beside the student's namespace, and by the
grader, where the hidden tests run the very same builders and ``drive_*`` steps
with the reference implementation.

Why this package is exposed inside the sandbox: the worker must import it, so the
grading session binds its folder read-only into the sandbox, the one folder of the
grader besides the generic ``autograder.sandbox``. It therefore holds nothing a
student may not read: no reference implementation, no answer and no hidden test
(``autograder.reference`` and ``autograder.hidden`` stay hidden; nothing here
imports them, and ``tests/grading/test_drivers.py`` checks it).

:data:`WORKER_MODULES` is the one list of what a grading worker imports before the
first student cell: these modules, and the generic watch of the forbidden-shortcut
check (``autograder.sandbox.watch``), which must bind what it relies on before any
student code can replace it.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent

WORKER_MODULES = (
    "autograder.drivers.models",
    "autograder.drivers.probes",
    "autograder.sandbox.watch",
)
