"""The student's namespace inside the worker, and the loop that serves requests on it.

Requests (dicts with ``op`` and ``id``):

* ``exec_cell {cell_id, source}``: run a cell in the student namespace, a fresh
  module ``__student__``. A failing cell leaves the namespace as far as it got and
  later cells still run.
* ``call {name, args, kwargs}``: call a top-level callable of the namespace; fixture
  references among the arguments are built first (see ``fixtures``).
* ``probe {name, params}``: run a registered trusted probe (see ``probes``).
* ``reset``: a fresh student namespace, and torch's and ``random``'s global state
  (random generators, default dtype, grad mode) as they were when the worker
  started: the next notebook of the same submission starts where a new worker would.
* ``ping``: liveness and identity (pid, uid, versions).
* ``shutdown``: reply, then end the loop.

Replies are ``{id, ok: True, value}`` or ``{id, ok: False, error: {kind, type,
message, traceback}}`` where ``kind`` is ``student`` (student code raised),
``rejected`` (it returned something outside the vocabulary) or ``request`` (the
grader asked for something that does not exist). Every exception raised while
handling a request, ``KeyboardInterrupt`` and ``SystemExit`` included, becomes an
error reply; only ``os._exit`` or a signal ends the worker, and the grader sees the
end of the stream.
"""
from __future__ import annotations

import builtins
import contextlib
import linecache
import os
import random
import sys
import traceback
import types
from typing import Any, BinaryIO

import torch

from . import protocol
from .errors import ProtocolError, RequestError, VocabularyError
from .fixtures import resolve_fixtures
from .probes import get_probe, student_definition

CELL_PREFIX = "<cell "  # filename of a cell's code object: "<cell ID>"
MAX_MESSAGE_CHARS = 2_000
MAX_TRACEBACK_CHARS = 8_000


class BadRequest(Exception):
    """The request itself is wrong (grader side): unknown op, fixture or probe, bad fields."""


def serve(session: Session, requests: BinaryIO, replies: BinaryIO) -> int:
    """Answer requests until the grader closes the channel or asks to shut down."""
    while True:
        try:
            payload = protocol.read_frame(requests)
        except ProtocolError as exc:
            print(f"worker: {exc}", file=sys.stderr)
            return 2
        if payload is None:
            return 0
        try:
            request = protocol.decode(payload)
            if type(request) is not dict:
                raise BadRequest("a request must be a dict")
        except Exception as exc:
            reply = _failure(None, "request", exc)
        else:
            if request.get("op") == "shutdown":
                protocol.write_frame(replies, protocol.encode({"id": request.get("id"), "ok": True, "value": None}))
                return 0
            reply = session.handle(request)
        protocol.write_frame(replies, _encode_reply(reply))


def _encode_reply(reply: dict[str, Any]) -> bytes:
    payload = protocol.encode_prepared(reply)
    if len(payload) > protocol.MAX_FRAME_BYTES:
        too_big = ValueError(f"the value is {len(payload) / 2**20:.0f} MiB, over the "
                             f"{protocol.MAX_FRAME_BYTES / 2**20:.0f} MiB a reply may carry")
        payload = protocol.encode_prepared(_failure(reply.get("id"), "rejected", too_big))
    return payload


class Session:
    """The student's namespace and the request handlers that work on it."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = _fresh_namespace()
        self._start_state = _GlobalState.capture()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        handlers = {"exec_cell": self.exec_cell, "call": self.call, "probe": self.probe, "ping": self.ping,
                    "reset": self.reset}
        request_id = request.get("id")
        handler = handlers.get(request.get("op"))
        if handler is None:
            return _failure(request_id, "request", BadRequest(f"unknown op {request.get('op')!r}"))
        try:
            value = handler(request)
            return {"id": request_id, "ok": True, "value": protocol.to_wire(value, where="return value")}
        except (BadRequest, RequestError) as exc:
            return _failure(request_id, "request", exc)
        except VocabularyError as exc:
            return _failure(request_id, "rejected", exc)
        except BaseException as exc:  # KeyboardInterrupt and SystemExit from student code too
            return _failure(request_id, "student", exc)
        finally:
            _repair_stdio()

    def exec_cell(self, request: dict[str, Any]) -> None:
        source, cell_id = request.get("source"), request.get("cell_id")
        if type(source) is not str or type(cell_id) is not str:
            raise BadRequest("exec_cell needs str fields 'source' and 'cell_id'")
        filename = f"{CELL_PREFIX}{cell_id}>"
        # Registered so that tracebacks (and inspect.getsource) can show the cell's lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec", dont_inherit=True)
        exec(code, self.namespace)

    def call(self, request: dict[str, Any]) -> Any:
        name = request.get("name")
        if type(name) is not str or not name.isidentifier():
            raise BadRequest(f"call needs the name of a top-level function, got {name!r}")
        function = student_definition(self.namespace, name)
        if not callable(function):
            raise TypeError(f"{name!r} is a {type(function).__name__}, not something callable")
        args = self._build_fixtures(request.get("args", []), list)
        kwargs = self._build_fixtures(request.get("kwargs", {}), dict)
        return function(*args, **kwargs)

    def probe(self, request: dict[str, Any]) -> Any:
        name = request.get("name")
        if type(name) is not str:
            raise BadRequest(f"probe needs a probe name, got {name!r}")
        probe = get_probe(name)
        params = self._build_fixtures(request.get("params", {}), dict)
        return probe(self.namespace, params)

    def reset(self, request: dict[str, Any]) -> None:
        self._start_state.restore()
        self.namespace = _fresh_namespace()
        linecache.clearcache()

    def ping(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"pid": os.getpid(), "uid": os.getuid(), "gid": os.getgid(),
                "python": sys.version.split()[0], "torch": str(torch.__version__),
                "threads": torch.get_num_threads()}

    @staticmethod
    def _build_fixtures(value: Any, expected: type) -> Any:
        allowed = (list, tuple) if expected is list else (dict,)
        if type(value) not in allowed:
            raise BadRequest(f"expected a {expected.__name__}, got {type(value).__name__}")
        try:
            return resolve_fixtures(value)
        except Exception as exc:
            # A builder is instructor code: its failure is the grader's, not the student's.
            raise BadRequest(f"building a fixture failed: {type(exc).__name__}: {exc}") from exc


def _fresh_namespace() -> dict[str, Any]:
    # A real module registered in sys.modules: dataclasses, pickle and inspect look
    # classes up by their __module__, and a bare dict would break them.
    module = types.ModuleType("__student__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__student__"] = module
    return module.__dict__


class _GlobalState:
    """The process-wide settings a notebook may change in passing (seeding, a default
    dtype, ``torch.no_grad`` left on), so ``reset`` can put them back for the next
    notebook. Fairness, not security: what a student breaks on purpose here only
    affects their own later notebooks, which they could break from any cell."""

    def __init__(self, torch_rng: torch.Tensor, python_rng: object, numpy_rng: object | None,
                 dtype: torch.dtype, grad: bool):
        self.torch_rng, self.python_rng, self.numpy_rng = torch_rng, python_rng, numpy_rng
        self.dtype, self.grad = dtype, grad

    @classmethod
    def capture(cls) -> _GlobalState:
        numpy = sys.modules.get("numpy")  # torch imports it; no import here if it did not
        return cls(torch.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy else None,
                   torch.get_default_dtype(), torch.is_grad_enabled())

    def restore(self) -> None:
        torch.set_rng_state(self.torch_rng)
        random.setstate(self.python_rng)
        if self.numpy_rng is not None:
            sys.modules["numpy"].random.set_state(self.numpy_rng)
        torch.set_default_dtype(self.dtype)
        torch.set_grad_enabled(self.grad)


def _repair_stdio() -> None:
    """Reopen standard streams that student code closed (the ``exit()`` builtin closes
    ``sys.stdin``), so that one cell cannot break ``print`` or ``input`` for the next.
    A closed file descriptor underneath cannot be repaired; then printing fails in
    the student's own code, never in the loop."""
    with contextlib.suppress(OSError):
        if sys.stdin is None or sys.stdin.closed:
            sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            if stream is None or stream.closed:
                setattr(sys, name, open(fd, "w", closefd=False, line_buffering=True))  # noqa: SIM115


def _failure(request_id: Any, kind: str, exc: BaseException) -> dict[str, Any]:
    type_name = type(exc).__name__ if kind != "request" else "RequestError"
    return {"id": request_id, "ok": False,
            "error": {"kind": kind, "type": type_name,
                      "message": _clip(_safe_str(exc), MAX_MESSAGE_CHARS),
                      "traceback": _clip(_student_traceback(exc), MAX_TRACEBACK_CHARS) if kind == "student" else ""}}


def _student_traceback(exc: BaseException) -> str:
    """A conventional traceback that keeps only frames of student cells: library and
    worker frames say nothing to a student, and hidden-test internals must not leak."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__)
              if frame.filename.startswith(CELL_PREFIX)]
    try:
        tail = "".join(traceback.format_exception_only(type(exc), exc))
    except BaseException:  # a student exception whose __str__ raises
        tail = f"{type(exc).__name__}: <unprintable>\n"
    head = "Traceback (student frames only):\n" + "".join(traceback.format_list(frames)) if frames else ""
    return head + tail


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:  # whatever a student's __str__ raises
        return "<unprintable>"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]

