"""Hostile replies through a real worker, in both sandbox kinds.

A student cell replaces the worker's own encoder
(``autograder.sandbox.protocol.encode_prepared``), so that the reply to
``attack(name)`` is crafted bytes (the payloads of ``test_sandbox_protocol``,
whose source the cell carries). The grader must refuse each reply quickly, with
``ValueRejected`` for a whole frame holding a bad value and ``WorkerCrashed`` for
a payload it will not unpack (the worker is killed), and stay usable afterwards.
One worker per sandbox kind serves the module; a test that kills it restarts it,
which replays the attacker's cell.
"""
from __future__ import annotations

import inspect
import time

import pytest

from autograder.sandbox import protocol
from autograder.sandbox.errors import ValueRejected, WorkerCrashed, WorkerTimeout
from autograder.sandbox.worker import Worker
from tests.sandbox.test_sandbox_protocol import (
    deflated_tensor_payload,
    list_pickle,
    saved_as_is,
    tensor_pickle,
    torch_archive,
)

# Crafting in the worker, sending, refusing and (for a crash) killing: seconds, where
# decoding the unbounded payloads took minutes or hundreds of MB.
CALL_SECONDS = 10.0

ATTACKER = "\n\n".join(inspect.getsource(f) for f in (
    torch_archive, tensor_pickle, list_pickle, deflated_tensor_payload, saved_as_is)) + '''

import io

import torch

import autograder.sandbox.protocol as _protocol


def _legacy_format(value):
    buffer = io.BytesIO()
    torch.save(value, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


ATTACKS = {
    "deflated": lambda reply: deflated_tensor_payload(256 * 2**20),
    "stride-0": lambda reply: saved_as_is({**reply, "value": torch.zeros(1).expand(4, 5_000_000)}),
    "overlapping": lambda reply: saved_as_is(
        {**reply, "value": torch.arange(10_000.0).as_strided((5000, 5000), (1, 1))}),
    "oversized-storage": lambda reply: saved_as_is({**reply, "value": torch.arange(1_000_000.0)[:2]}),
    "long-list": lambda reply: torch_archive(list_pickle(b"K\\x01", 30_000_000)),
    "worst-pickle": lambda reply: torch_archive(list_pickle(b"]", _protocol.MAX_PICKLE_BYTES - 8)),
    "many-records": lambda reply: torch_archive(
        list_pickle(b"N", 1), [(str(i), b"") for i in range(_protocol.MAX_ZIP_ENTRIES)]),
    "legacy-format": _legacy_format,
}
_honest_encode = _protocol.encode_prepared


def _hostile_encode(reply):
    value = reply.get("value") if type(reply) is dict else None
    if type(value) is str and value in ATTACKS:
        return ATTACKS[value](reply)
    return _honest_encode(reply)


_protocol.encode_prepared = _hostile_encode


def attack(name):
    return name


def echo(value):
    return value
'''


@pytest.fixture(scope="module")
def hostile_worker(sandbox):
    with Worker(isolation=sandbox, timeout=30) as worker:
        worker.exec_cell(ATTACKER, cell_id="attacker").raise_for_error()
        yield worker


@pytest.fixture
def attacker(hostile_worker):
    """The shared worker, alive (an earlier test that failed may have left it dead)."""
    if not hostile_worker.alive:
        hostile_worker.restart()
    return hostile_worker


@pytest.mark.parametrize("name, outcome, fragment", [
    ("deflated", WorkerCrashed, "compressed"),
    ("stride-0", ValueRejected, "non-contiguous"),
    ("overlapping", ValueRejected, "non-contiguous"),
    ("oversized-storage", ValueRejected, "storage of 4000000 bytes"),
    ("long-list", WorkerCrashed, "data.pkl.*over the limit"),
    ("worst-pickle", ValueRejected, "too long to send"),
    ("many-records", WorkerCrashed, "records, over the limit"),
    ("legacy-format", WorkerCrashed, "not a zip archive"),
])
def test_a_hostile_reply_is_refused_quickly_and_the_grader_stays_usable(attacker, name, outcome, fragment):
    start = time.perf_counter()
    with pytest.raises(outcome, match=fragment):
        attacker.call("attack", name)
    assert time.perf_counter() - start < CALL_SECONDS
    if outcome is WorkerCrashed:
        assert not attacker.alive
        assert all(result.ok for result in attacker.restart())  # the attacker's cell, replayed
    assert attacker.call("echo", [1, 2.5, "x"]) == [1, 2.5, "x"]
    assert attacker.ping()["pid"]


def test_decoding_counts_against_the_request_deadline(attacker, monkeypatch):
    honest_decode = protocol.decode
    seen = {}

    def slow_decode(payload, **options):  # decoding that outlasts the time left
        seen.update(options)
        time.sleep(1.5)
        return honest_decode(payload, **options)

    monkeypatch.setattr(protocol, "decode", slow_decode)
    start = time.perf_counter()
    with pytest.raises(WorkerTimeout):
        attacker.call("echo", 1, timeout=1.0)
    assert time.perf_counter() - start < CALL_SECONDS
    assert seen.get("deadline") is not None
    monkeypatch.undo()
    attacker.restart()
    assert attacker.call("echo", 2) == 2
