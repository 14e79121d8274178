"""A stand-in for ``autograder.sandbox.worker.Worker`` in a grading session's tests.

Tests put a subclass in ``autograder.sandbox.worker.Worker`` (monkeypatched), so the
session builds it instead of starting a process; the subclass records what it is sent.
"""
from __future__ import annotations

from autograder.sandbox.worker import CellResult


class StandInWorker:
    """Keeps the keyword arguments the session built it with, runs every cell without
    an error and answers every call with 1."""

    sandbox = "degraded"
    forked = False  # a cold worker: it imported only the preloads

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def exec_cell(self, source, *, cell_id, timeout):
        return CellResult(cell_id, True)

    def call(self, name, *args, timeout, **kwargs):
        return 1

    def restart(self):
        return []

    def close(self):
        pass
