"""Hostile replies through a real worker, in both sandbox kinds.

A student cell replaces the worker's own encoder
(``autograder.sandbox.protocol.encode_prepared``), so that the reply to
``attack(name)`` is crafted bytes (the payloads of ``test_sandbox_protocol``,
whose source the cell carries, and torch's and pickle's formats). The grader must refuse each reply quickly, with
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
    claimed_tensor_payload,
    list_skeleton,
    nested_payload,
    payload_of,
)

# Crafting in the worker, sending, refusing and (for a crash) killing: seconds, where
# decoding unbounded payloads would take minutes or hundreds of MB.
CALL_SECONDS = 10.0

ATTACKER = "\n\n".join(inspect.getsource(f) for f in (
    payload_of, list_skeleton, claimed_tensor_payload, nested_payload)) + '''

import io
import pickle

import torch

import autograder.sandbox.protocol as _protocol


def _torch_save(value, zipped):
    buffer = io.BytesIO()
    torch.save(value, buffer, _use_new_zipfile_serialization=zipped)
    return buffer.getvalue()


ATTACKS = {
    "claimed-tensor": lambda reply: claimed_tensor_payload(256 * 2**20),
    "long-list": lambda reply: payload_of(list_skeleton(b"1", 30_000_000)),
    "worst-skeleton": lambda reply: payload_of(list_skeleton(b'["l"]', (_protocol.MAX_SKELETON_BYTES - 8) // 6)),
    "many-tensors": lambda reply: payload_of(list_skeleton(b'["T","float32",[0],"cpu"]', _protocol.MAX_TENSORS + 1)),
    "deep": lambda reply: nested_payload(80_000),
    "torch-save": lambda reply: _torch_save(reply, True),
    "legacy-format": lambda reply: _torch_save(reply, False),
    "pickle": lambda reply: pickle.dumps(reply),
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
    ("claimed-tensor", WorkerCrashed, "bytes of data are left"),
    ("long-list", WorkerCrashed, "skeleton takes .* over the limit"),
    ("worst-skeleton", ValueRejected, "too long to send"),
    ("many-tensors", ValueRejected, "tensors in one message"),
    ("deep", WorkerCrashed, "undecodable skeleton"),
    ("torch-save", WorkerCrashed, "over the limit|too short|past the end"),
    ("legacy-format", WorkerCrashed, "over the limit|too short|past the end"),
    ("pickle", WorkerCrashed, "over the limit|too short|past the end"),
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
