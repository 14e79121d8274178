"""The ``guarded_call`` and ``guarded_probe`` probes: run student code and watch what executes.

This is the run-time half of the forbidden-shortcut check (the static half reads
the cell's syntax tree, see ``autograder.forbidden``). A shortcut is recognised by
the work that runs, not by the name it was reached through, so an alias, a
``getattr`` with an assembled name, a reference captured when the cell ran, a
``functools.partial``, ``exec`` or ``importlib`` all count:

* **Tensor operators** (``aten_ops``, name prefixes such as ``aten._softmax``): a
  ``TorchDispatchMode`` sees every operator that reaches torch's dispatcher below
  autograd, whichever Python route led there: ``torch.softmax``, ``Tensor.softmax``,
  ``nn.Softmax()``, ``torch.special.softmax``, ``F.softmin`` and
  ``torch.ops.aten._softmax`` all arrive as ``aten._softmax``. The student's own
  arithmetic arrives as ``aten.exp``, ``aten.amax``, ``aten.sum`` and is not a
  shortcut. Every operator costs a Python call while the mode is on, so only rules
  that name operators switch it on; those are the items whose calls run nothing but
  the student's code (a decoding item's model uses softmax and attention legitimately).
* **Library functions** (``entry_points``, ``module:Qual.name``): a profile hook
  (``sys.setprofile``, and ``threading.setprofile`` for threads started during the
  call) sees every Python frame that starts. A frame whose code has the function's
  qualified name and was compiled from the function's module file is a hit, however
  the function was reached: a bound method captured before the call, a subclass's
  ``super()`` call, a decorated function's inner code (``GenerationMixin.generate``
  under ``torch.no_grad``). The code is recognised by name and file rather than by
  object, so nothing is imported to resolve it (``transformers.trainer`` alone costs
  half a second) and a module the student imports during the call is watched too.
* **Tampering**: when the call returns or raises, the mode must still be where it
  was put on torch's dispatch-mode stack, the profile hooks must still be ours (and
  ``sys.setprofile`` not have been called meanwhile), and this module's names,
  functions and classes must be the ones it had when it was imported. Otherwise
  the result lists what changed, and the grading session scores the item as
  forbidden ("the grading instrumentation was modified").

Everything the watcher calls is bound when the module is imported, which the worker
does before the first student cell (``autograder.drivers.WORKER_MODULES``): a cell
that replaces ``sys.setprofile`` or a torch function does not reach it.

It runs in the student's process, so a determined student can defeat it: switch it
off and on again around the shortcut (torch's ``_disable_current_modes``, which
printing a tensor uses too, so it cannot count as tampering), do the work in a
thread that existed before the call or in another process, or rewrite the worker's
reply. Each is deliberate work against the grader that a reader of the cell sees.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .probes import get_probe, register_probe, student_definition

_setprofile, _getprofile = sys.setprofile, sys.getprofile
_thread_setprofile, _thread_getprofile = threading.setprofile, threading.getprofile
_stack_len = torch._C._len_torch_dispatch_stack
_stack_at = torch._C._get_dispatch_stack_at
_stack_pop = torch._C._pop_torch_dispatch_stack
_stack_push = torch._C._push_on_torch_dispatch_stack
_mode_init, _mode_enter, _mode_exit = (TorchDispatchMode.__init__, TorchDispatchMode.__enter__,
                                       TorchDispatchMode.__exit__)


class _OperatorWatch(TorchDispatchMode):
    """Records the operators whose qualified names (``aten::_softmax``) start with a prefix."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else the first operator would import torch._dynamo: seconds, in a timed call

    def __init__(self, prefixes: dict[str, str], hits: list[str]):
        _mode_init(self)
        self.prefixes, self.starts, self.hits = prefixes, tuple(prefixes), hits

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "_name", "")
        if name.startswith(self.starts):
            self.hits.extend(label for start, label in self.prefixes.items() if name.startswith(start))
        return func(*args, **(kwargs or {}))


def _operator_prefixes(aten_ops: list[str]) -> dict[str, str]:
    """``{"aten::_softmax": "aten._softmax"}``: the dispatcher's spelling, and the rule's."""
    return {op.replace(".", "::", 1): op for op in aten_ops}


def _entry_point_table(entry_points: list[str]) -> dict[str, list[tuple[str, str]]]:
    """``{qualname: [(file suffix, label)]}`` for ``module:qualname`` names.

    A module is a ``.py`` file or a package's ``__init__.py``; both suffixes are kept
    rather than asking the import system, which would look at the disk on every call."""
    table: dict[str, list[tuple[str, str]]] = {}
    for entry in entry_points:
        module, _, qualname = entry.partition(":")
        path = os.sep + os.sep.join(module.split("."))
        label = f"{module.partition('.')[0]}.{qualname}"  # transformers.GenerationMixin.generate
        table.setdefault(qualname, []).extend([(path + ".py", label),
                                               (path + os.sep + "__init__.py", label)])
    return table


def _profile_hook(table: dict[str, list[tuple[str, str]]], hits: list[str], tampered: list[str],
                  closing: list[bool]) -> Callable:
    setprofile = _setprofile

    def hook(frame, event, arg):
        # Called for every Python and C call and return of the thread: keep the common path short.
        if event == "call":
            code = frame.f_code
            watched = table.get(code.co_qualname)
            if watched is not None:
                hits.extend(label for suffix, label in watched if code.co_filename.endswith(suffix))
        elif event == "c_call" and arg is setprofile and not closing:
            tampered.append("sys.setprofile was called during the call")
    return hook


def _thread_start(prefixes: dict[str, str], hits: list[str], hook: Callable | None) -> Callable:
    """The first profile event of a thread started during the call watches that thread as well:
    torch's dispatch-mode stack and ``sys.setprofile`` are per thread."""
    def start(frame, event, arg):
        _setprofile(hook)
        if prefixes:
            _mode_enter(_OperatorWatch(prefixes, hits))  # never left: it ends with its thread
        if hook is not None:
            hook(frame, event, arg)
    return start


def _leave_mode(mode: _OperatorWatch, depth: int, tampered: list[str]) -> None:
    """Take ``mode`` off the dispatch-mode stack, where ``depth`` modes were below it.

    The stack is left as the call found it, so the next call starts from the same
    one: what the call left above the mode (a mode it pushed and never exited) is
    removed, and a mode the call popped is put back first, so that leaving it
    restores torch's flags. Either means the instrumentation was modified."""
    if not (_stack_len() == depth + 1 and _stack_at(depth) is mode):
        tampered.append("torch's dispatch-mode stack was changed (the operator watch was popped "
                        "or a mode was left on it)")
    while _stack_len() > depth and _stack_at(_stack_len() - 1) is not mode:
        _stack_pop(None)
    if _stack_len() <= depth:
        _stack_push(mode)
    try:
        _mode_exit(mode, None, None, None)
    except IndexError:  # the call ran the mode's own __exit__, which took torch's flags with it
        _stack_pop(None)


def _watch(run: Callable[[], Any], params: dict[str, Any], unchanged: Callable[[], bool]) -> dict[str, Any]:
    """``run()`` with the operators and functions of ``params`` watched.

    Returns ``{"value", "tripped": [labels hit], "tampered": [what was modified]}``.
    A call that raises is re-raised unless it tripped or tampered: then the shortcut,
    not the error, decides the item."""
    prefixes = _operator_prefixes(list(params.get("aten_ops", [])))
    table = _entry_point_table(list(params.get("entry_points", [])))
    hits: list[str] = []
    tampered: list[str] = []
    closing: list[bool] = []
    mode = _OperatorWatch(prefixes, hits) if prefixes else None
    hook = _profile_hook(table, hits, tampered, closing) if table else None
    start = _thread_start(prefixes, hits, hook) if (mode is not None or hook is not None) else None
    depth = _stack_len()
    if mode is not None:
        with contextlib.suppress(Exception):  # a cell that broke torch's mode machinery: checked next
            _mode_enter(mode)
        if not (_stack_len() == depth + 1 and _stack_at(depth) is mode):
            tampered.append("the operator watch could not be put on torch's dispatch-mode stack")
    thread_profile = _thread_getprofile()
    if start is not None:
        _thread_setprofile(start)
    profile = _getprofile()
    if hook is not None:
        _setprofile(hook)

    def finish() -> list[str]:
        closing.append(True)

        def profile_hook() -> None:
            if _getprofile() is not hook:
                tampered.append("the profile hook was replaced")
            _setprofile(profile)

        def thread_hook() -> None:
            if _thread_getprofile() is not start:
                tampered.append("the profile hook of new threads was replaced")
            _thread_setprofile(thread_profile)

        steps = [(hook, profile_hook), (start, thread_hook), (mode, lambda: _leave_mode(mode, depth, tampered))]
        for needed, step in steps:
            if needed is None:
                continue
            try:
                step()
            except Exception as exc:  # only a student who replaced what a step uses gets here
                tampered.append(f"the watcher failed: {type(exc).__name__}: {exc}")
        if not unchanged():
            tampered.append("the watcher's own names, functions or classes were replaced")
        return tampered

    try:
        value = run()
    except BaseException:
        if not finish() and not hits:
            raise
        value = None
    else:
        finish()
    return {"value": value, "tripped": sorted(set(hits)), "tampered": list(dict.fromkeys(tampered))}


def _integrity_check(namespace: dict[str, Any]) -> Callable[[], bool]:
    """A function that says whether ``namespace`` (this module's) still holds what it holds now:
    the same objects under the same names, and for its functions and classes the same
    code, defaults, closures and class attributes. Self-contained, so that rebinding a
    module name cannot change how it checks."""
    function_type = types.FunctionType

    def fingerprint() -> dict[str, tuple]:
        def parts(value: Any) -> tuple:
            if isinstance(value, (classmethod, staticmethod)):
                return (value, *parts(value.__func__))
            if isinstance(value, function_type):
                cells = []
                for cell in value.__closure__ or ():
                    with contextlib.suppress(ValueError):  # an empty cell
                        cells.append(cell.cell_contents)
                kwdefaults = tuple((value.__kwdefaults__ or {}).items())
                return (value, value.__code__, value.__defaults__, *kwdefaults, *cells)
            if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
                return (value, *(x for name, attribute in vars(value).items()
                                 for x in (name, *parts(attribute))))
            return (value,)
        # warnings.warn may add its registry to the module of any frame it blames: not ours to judge.
        return {name: parts(value) for name, value in list(namespace.items()) if name != "__warningregistry__"}

    expected = fingerprint()

    def unchanged() -> bool:
        found = fingerprint()
        return found.keys() == expected.keys() and all(
            len(found[name]) == len(parts) and all(a is b for a, b in zip(found[name], parts))
            for name, parts in expected.items())
    return unchanged


def _register(watch: Callable, unchanged: Callable[[], bool]) -> None:
    """Register the two probes, holding ``watch`` and ``unchanged`` privately: a student cell
    that rebinds this module's names is then found out rather than obeyed."""

    @register_probe("guarded_call")
    def guarded_call(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """Call ``params["name"](*args, **kwargs)`` watching ``params["aten_ops"]`` and
        ``params["entry_points"]``; returns ``{"value", "tripped", "tampered"}``."""
        function = student_definition(namespace, params["name"])
        args, kwargs = params.get("args", []), params.get("kwargs", {})
        return watch(lambda: function(*args, **kwargs), params, unchanged)

    @register_probe("guarded_probe")
    def guarded_probe(namespace: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """Run the probe ``params["probe"]`` with ``params["params"]``, watched as ``guarded_call``."""
        probe = get_probe(params["probe"])
        return watch(lambda: probe(namespace, params.get("params", {})), params, unchanged)


_register(_watch, _integrity_check(globals()))
