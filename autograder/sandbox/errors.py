"""Exceptions raised on the grader's side of the sandbox.

Two families, because a grader reacts to them differently:

* ``SandboxError`` and its subclasses: the machinery failed or gave up (the worker
  hung, died, went over a limit, or spoke garbage). The student's state in the worker is lost; the
  caller decides whether to ``restart()``.
* ``StudentError``: the worker is fine, but the student's code raised, or handed
  back something that may not leave the sandbox. The worker keeps its state.
"""
from __future__ import annotations


class SandboxError(Exception):
    """The sandbox could not complete a request."""


class WorkerTimeout(SandboxError):
    """A request ran past its wall-clock limit; the worker's process tree was killed."""


class WorkerCrashed(SandboxError):
    """The worker exited, closed its pipes, or broke the protocol; it was killed."""


class LimitExceeded(WorkerCrashed):
    """The submission's processes together went over a whole-tree limit (see
    ``tree_limits``); the worker was killed.

    ``limit`` names it ("memory", "processes", "cpu" or "scratch") and ``value`` is
    its value (bytes, a count, or CPU seconds). A ``WorkerCrashed``, so callers that
    restart crashed workers need no new case; ``restart()`` gives a fresh budget.
    """

    def __init__(self, message: str, *, limit: str, value: float):
        super().__init__(message)
        self.limit = limit
        self.value = value


class ProtocolError(SandboxError):
    """A frame or payload that does not follow the wire format."""


class RequestError(SandboxError):
    """The grader asked for something the worker does not know (an op, fixture or probe)."""


class VocabularyError(ValueError):
    """A value outside what may cross the process boundary (see ``protocol``)."""


class StudentError(Exception):
    """Student code raised inside the worker.

    ``type_name``, ``message`` and ``traceback`` are plain strings written by the
    worker (the exception object itself never crosses); ``traceback`` holds only the
    frames of the student's cells and ends with the ``Type: message`` line.
    """

    def __init__(self, type_name: str, message: str, traceback: str = ""):
        super().__init__(type_name, message, traceback)
        self.type_name = type_name
        self.message = message
        self.traceback = traceback

    def __str__(self) -> str:
        if self.traceback:
            return self.traceback.rstrip()
        return f"{self.type_name}: {self.message}" if self.message else self.type_name


class ValueRejected(StudentError):
    """Student code returned a value that is not in the protocol's vocabulary."""
