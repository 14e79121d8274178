"""The grader's end of the worker's pipes: frames with a deadline.

Blocking reads and writes would let a hung or hostile worker hang the grader, so
both directions wait in ``select`` slices and give up at the deadline. Between
slices the channel asks whether the worker process is still alive: a process the
student forked can keep the pipe open after the worker died, and the grader must
not wait for an end of file that never comes.
"""
from __future__ import annotations

import os
import select
import time
from collections.abc import Callable

from .errors import ProtocolError
from .protocol import HEADER, frame_header, parse_header

POLL_SECONDS = 0.1


class ChannelClosed(EOFError):
    """The worker closed its end, or exited without answering."""


class FrameChannel:
    """Deadline-aware frame I/O over two raw pipe descriptors of a child process."""

    def __init__(self, read_fd: int, write_fd: int, alive: Callable[[], bool]):
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._alive = alive
        os.set_blocking(write_fd, False)

    def send(self, payload: bytes, deadline: float) -> None:
        """Write one frame; ``TimeoutError`` at the deadline, ``ChannelClosed`` if the worker is gone."""
        view = memoryview(frame_header(len(payload)) + payload)
        while view:
            if not self._wait(self._write_fd, deadline, writing=True):
                continue
            try:
                written = os.write(self._write_fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise ChannelClosed("the worker closed its input") from None
            view = view[written:]

    def recv(self, deadline: float) -> bytes:
        """Read one frame; ``TimeoutError``, ``ChannelClosed`` or ``ProtocolError``."""
        length = parse_header(self._read_exactly(HEADER.size, deadline, in_frame=False))
        return self._read_exactly(length, deadline, in_frame=True)

    def _read_exactly(self, size: int, deadline: float, *, in_frame: bool) -> bytes:
        chunks, missing = [], size
        while missing:
            if not self._wait(self._read_fd, deadline, writing=False):
                continue
            chunk = os.read(self._read_fd, min(missing, 1 << 20))
            if not chunk:
                if in_frame or missing != size:
                    raise ProtocolError("the worker's output ended inside a frame")
                raise ChannelClosed("the worker closed its output")
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def _wait(self, fd: int, deadline: float, *, writing: bool) -> bool:
        """True once ``fd`` is ready; False after an idle slice (the caller loops)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        alive = self._alive()
        # Once the worker has exited, only data already in the pipe counts.
        timeout = min(remaining, POLL_SECONDS) if alive else 0
        poller = select.poll()  # not select.select: descriptors may exceed FD_SETSIZE
        poller.register(fd, select.POLLOUT if writing else select.POLLIN)
        if poller.poll(timeout * 1000):
            return True  # ready, or hung up / in error: the read or write says which
        if not alive:
            raise ChannelClosed("the worker exited")
        return False
