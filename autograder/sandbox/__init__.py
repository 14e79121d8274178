"""Run student code in a separate, sandboxed process; exchange only plain data with it.

Stock nbgrader runs the tests inside the student's kernel, where student code can
rewrite them. Here the grader keeps the tests and sends requests to a *worker*
process that holds the student's namespace:

* ``worker``: ``Worker``, the grader's handle (timeouts, kill, restart);
* ``worker_main``: the entry point inside the sandbox (limits, standard streams);
* ``session``: the student namespace and the request loop;
* ``protocol``: frames, payloads (a JSON skeleton and raw tensor bytes), the vocabulary;
* ``channel``: the grader's deadline-aware pipe I/O;
* ``isolation``: the bubblewrap command line and the scrubbed environment;
* ``limits``: the rlimits the worker puts on itself, and the whole-tree limits;
* ``tree_limits``: those limits enforced on the worker's process tree (cgroup or watchdog);
* ``process_tree``: killing a worker and everything it started;
* ``fixtures``, ``probes``: trusted builders and drivers that run in the worker.

The names below are loaded on first use, not at import: the worker imports this
package before it has applied its resource limits, and must not pull in torch
until it has.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Worker": "worker", "CellResult": "worker",
    "ResourceLimits": "limits",
    "fixture": "fixtures", "build_fixture": "fixtures", "register_fixture": "fixtures",
    "register_probe": "probes",
    "expect_tensor": "protocol", "expect_type": "protocol", "UnexpectedValue": "protocol",
    "bwrap_works": "isolation",
    "SandboxError": "errors", "WorkerTimeout": "errors", "WorkerCrashed": "errors", "LimitExceeded": "errors",
    "ProtocolError": "errors", "RequestError": "errors", "VocabularyError": "errors",
    "StudentError": "errors", "ValueRejected": "errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
