"""Entry point of the sandboxed worker process: limits, standard streams, request loop.

Started by ``Worker`` (``worker.py``) as ``python -m autograder.sandbox.worker_main --limits JSON
--threads N [--preload MODULE ...]``, inside bubblewrap or as a plain process.
Requests and replies are frames (see ``protocol``) on the stdin/stdout the worker
was started with; student code gets ``/dev/null`` as stdin and the worker's stderr
as stdout, so neither ``print`` nor ``input`` can touch the channel.

The request loop itself is in ``session``.

This module imports nothing heavy at the top: the resource limits are applied
first, so that they already bound ``import torch``.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import os
import sys
from typing import BinaryIO

from .limits import ResourceLimits

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.sandbox.worker_main")
    parser.add_argument("--limits", default=ResourceLimits().to_json(), help="ResourceLimits as JSON")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--preload", action="append", default=[], metavar="MODULE",
                        help="module to import before serving, e.g. one that registers probes")
    args = parser.parse_args(argv)

    ResourceLimits.from_json(args.limits).apply()
    _become_subreaper()
    requests, replies = _claim_stdio()

    # Only now, under the limits: torch, and everything that registers probes and
    # fixtures, imported as it is on disk before any student code can patch it.
    import torch

    from .session import Session, serve

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    for module in args.preload:
        importlib.import_module(module)
    status = serve(Session(), requests, replies)
    # os._exit, not return: a thread the student left running must not keep us alive.
    os._exit(status)


def _become_subreaper() -> None:
    """Adopt orphaned descendants, so a double-forked student process stays in our
    tree where ``Worker`` can find and kill it (see ``process_tree``)."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the group kill still applies
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Keep private duplicates of stdin/stdout for the protocol; give the student
    ``/dev/null`` as fd 0 and stderr as fd 1.

    Done at the file descriptor level, so output written by C code, ``os.write(1, ...)``
    and subprocesses goes to stderr too. The duplicates are close-on-exec, so programs
    the student runs do not inherit the channel.
    """
    sys.stdout.flush()
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout.reconfigure(line_buffering=True)
    return requests, replies


if __name__ == "__main__":
    main()
