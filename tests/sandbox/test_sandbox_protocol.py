"""The wire format on its own: frames, payloads and the vocabulary (no worker)."""
from __future__ import annotations

import functools
import io
import os
import pickle
import resource
import struct
import time
import zipfile

import pytest
import torch
from torch import nn

from autograder.sandbox import protocol
from autograder.sandbox.errors import ProtocolError, VocabularyError
from autograder.sandbox.protocol import UnexpectedValue, expect_tensor, expect_type


class Loud(torch.Tensor):
    pass


class Exploit:
    """Unpickling this would run ``os.system``; weights-only loading must refuse."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def roundtrip(value):
    return protocol.decode(protocol.encode(value))


def test_nested_vocabulary_survives_a_roundtrip():
    value = {"logits": torch.randn(2, 3), "ids": [1, 2, (3, None)], "ok": True, "name": "x", "p": 0.5,
             "empty": {}, "bf16": torch.ones(2, dtype=torch.bfloat16)}
    back = roundtrip(value)
    assert back.keys() == value.keys()
    assert torch.equal(back["logits"], value["logits"]) and type(back["logits"]) is torch.Tensor
    assert back["ids"] == [1, 2, (3, None)] and type(back["ids"][2]) is tuple
    assert back["bf16"].dtype == torch.bfloat16


def test_tensors_are_sent_detached_and_compact():
    big = torch.randn(1000, 1000, requires_grad=True)
    view = (big * 2)[:2, :3]
    back = roundtrip(view)
    assert not back.requires_grad and back.grad_fn is None
    assert back.untyped_storage().nbytes() == 6 * 4  # not the million-element storage
    assert roundtrip(torch.Size([2, 3])) == (2, 3)


@pytest.mark.parametrize("value, fragment", [
    (nn.Parameter(torch.ones(2)), "Parameter"),
    (torch.ones(2).as_subclass(Loud), "tensor subclass"),
    ({1, 2}, "set"),
    (torch.float32, "dtype"),
    ({1: "int key"}, "not a str"),
    (lambda: 0, "function"),
    (os, "module"),
    (nn.Linear(2, 2), "nn.Modules cannot leave"),
    (torch.ones(2, 2).to_sparse(), "dense"),
])
def test_values_outside_the_vocabulary_are_rejected_with_a_reason(value, fragment):
    with pytest.raises(VocabularyError, match=fragment):
        protocol.to_wire(value)


def test_subclasses_of_builtins_are_rejected():
    class Sneaky(float):
        pass

    with pytest.raises(VocabularyError, match=r"float\(x\)"):
        protocol.check_vocabulary([Sneaky(1.0)])


def test_cycles_and_depth_are_bounded():
    loop = []
    loop.append(loop)
    with pytest.raises(VocabularyError, match="deeper than"):
        protocol.to_wire(loop)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_decode_refuses_pickles_that_run_code(tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"x": Exploit(marker)}, buffer)
    with pytest.raises(ProtocolError, match="undecodable"):
        protocol.decode(buffer.getvalue())
    with pytest.raises(ProtocolError):
        protocol.decode(pickle.dumps(Exploit(marker)))
    assert not marker.exists()


def test_decode_rejects_weights_only_types_outside_the_vocabulary():
    buffer = io.BytesIO()
    torch.save([nn.Parameter(torch.ones(1))], buffer)  # weights_only loads it; we do not accept it
    with pytest.raises(VocabularyError, match=r"value\[0\].*Parameter"):
        protocol.decode(buffer.getvalue())


def test_frames_roundtrip_and_detect_corruption():
    stream = io.BytesIO()
    protocol.write_frame(stream, b"abc")
    protocol.write_frame(stream, b"")
    stream.seek(0)
    assert protocol.read_frame(stream) == b"abc"
    assert protocol.read_frame(stream) == b""
    assert protocol.read_frame(stream) is None
    with pytest.raises(ProtocolError, match="magic"):
        protocol.read_frame(io.BytesIO(b"hello world, not a frame"))
    with pytest.raises(ProtocolError, match="inside a frame"):
        protocol.read_frame(io.BytesIO(protocol.frame_header(10) + b"abc"))
    huge = protocol.HEADER.pack(protocol.MAGIC, protocol.MAX_FRAME_BYTES + 1)
    with pytest.raises(ProtocolError, match="exceeds"):
        protocol.read_frame(io.BytesIO(huge))


def test_expect_tensor_checks_exact_type_dtype_shape_and_device():
    x = torch.zeros(2, 3)
    assert expect_tensor(x, dtype=torch.float32, shape=(2, None), device="cpu") is x
    with pytest.raises(UnexpectedValue, match="dtype"):
        expect_tensor(x, dtype=torch.int64)
    with pytest.raises(UnexpectedValue, match=r"shape \(3, '\*'\)"):
        expect_tensor(x, shape=(3, None))
    with pytest.raises(UnexpectedValue, match="cuda"):
        expect_tensor(x, device="cuda")
    with pytest.raises(UnexpectedValue, match=r"expected a torch\.Tensor"):
        expect_tensor([0.0])
    with pytest.raises(UnexpectedValue, match="expected int"):
        expect_type(True, int)


# ------------------------------------------------------------------ hostile payloads
# Byte strings a tampered worker can send in place of its replies (it can replace
# protocol.encode_prepared). They are built from pickle opcodes and zipfile records
# directly, never from a real value of the size they claim, and need only the
# standard library and torch: test_sandbox_hostile_replies.py sends the source of
# these functions to a worker as a student cell.

def torch_archive(pickle_bytes, storages=()):
    """A zip archive in ``torch.save``'s layout: ``archive/data.pkl``, the version
    records, and ``archive/data/<key>`` for each ``(key, data)`` of ``storages``;
    ``data`` is bytes (stored), or an int: that many zero bytes, deflated."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        for key, data in storages:
            if type(data) is bytes:
                archive.writestr(f"archive/data/{key}", data)
                continue
            record = zipfile.ZipInfo(f"archive/data/{key}")
            record.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(record, "w") as stream:
                chunk = bytes(2**20)
                for start in range(0, data, len(chunk)):
                    stream.write(chunk[: data - start])
    return buffer.getvalue()


def tensor_pickle(numel, size, stride):
    """The pickle ``torch.save`` writes for a float32 tensor on storage "0" of
    ``numel`` elements, viewed with ``size`` and ``stride``."""
    import struct

    def text(value):
        data = value.encode()
        return b"X" + struct.pack("<I", len(data)) + data

    def integer(value):
        return b"J" + struct.pack("<i", value)

    def ints(values):
        return b"(" + b"".join(integer(v) for v in values) + b"t"

    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n("
            + b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text("0") + text("cpu") + integer(numel) + b"tQ"
            + integer(0) + ints(size) + ints(stride) + b"\x89ccollections\nOrderedDict\n)RtR.")


def list_pickle(opcodes, count):
    """The pickle of a list whose ``count`` items are each written by ``opcodes``
    (``b"K\\x01"``: the int 1, ``b"]"``: an empty list), without building the list."""
    return b"\x80\x02](" + opcodes * count + b"e."


def deflated_tensor_payload(nbytes):
    """A float32 tensor of ``nbytes // 4`` zeros whose storage record is deflated:
    a few hundred KB that torch's reader would inflate to ``nbytes``."""
    numel = nbytes // 4
    return torch_archive(tensor_pickle(numel, (numel,), (1,)), [("0", nbytes)])


def saved_as_is(value):
    """``torch.save`` of ``value`` without ``to_wire``: views keep their strides,
    offsets and whole storages."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


# ------------------------------------------------------------- decoding is bounded
DECODE_SECONDS = 2.0  # every hostile payload is refused (or decoded) within this CPU time ...
UNPICKLER_FACTOR = 16  # ... or within 16 honest pickles at the cap, on a slower machine
MEMORY_BYTES = 64 * 2**20  # ... and the process's peak memory grows by less than this
ATTEMPTS = 3  # the best of this many tries is compared (see decodes_within_bounds)


def _cpu_seconds(action):
    start = time.process_time()
    action()
    return time.process_time() - start


@functools.cache
def decode_budget():
    """CPU seconds a hostile payload may take: ``DECODE_SECONDS``, or more on a
    machine where torch's pure-Python weights-only unpickler is slow. The unit is the
    time this machine takes to load an honest pickle of ``MAX_PICKLE_BYTES`` (a list
    of small ints), the best of three loads; the cap's worst case costs about 4 of
    them here, and what the limits guard against (inflating a deflated record,
    unpickling a 60 MB list) more than a hundred."""
    honest = torch_archive(list_pickle(b"K\x01", (protocol.MAX_PICKLE_BYTES - 8) // 2))
    unit = min(_cpu_seconds(lambda: torch.load(io.BytesIO(honest), weights_only=True)) for _ in range(3))
    return max(DECODE_SECONDS, UNPICKLER_FACTOR * unit)


def _status_bytes(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _peak_memory_growth(action):
    """``(bytes, result)``: how much ``action()`` raises the process's peak resident memory,
    and what it returned. The peak
    is reset first (Linux ``clear_refs``), so earlier tests and the payload built
    before do not hide a growth; without it, ``ru_maxrss`` is compared instead."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        before, peak = _status_bytes("VmRSS"), lambda: _status_bytes("VmHWM")
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # noqa: E731
    result = action()
    return peak() - before, result


def decodes_within_bounds(payload, error=None, match=None):
    """``protocol.decode(payload)``, asserting that it raises ``error`` (matching
    ``match``) when one is given, returns otherwise, raises the peak memory by less
    than ``MEMORY_BYTES`` and takes less than ``decode_budget()`` CPU seconds.

    CPU time rather than wall time, and the best of up to ``ATTEMPTS`` tries: other
    processes on a shared machine, page faults and the collector only ever add to a
    try, while the work a payload asks of the decoder is in every one of them."""
    outcome = {}

    def decode():
        if error is None:
            outcome["value"] = protocol.decode(payload)
        else:
            with pytest.raises(error, match=match):
                protocol.decode(payload)

    budget, tries = decode_budget(), []
    for _ in range(ATTEMPTS):
        grown, seconds = _peak_memory_growth(lambda: _cpu_seconds(decode))
        assert grown < MEMORY_BYTES, f"peak memory grew by {grown / 2**20:.0f} MiB"
        tries.append(seconds)
        if seconds < budget:
            return outcome.get("value")
    raise AssertionError(f"took {min(tries):.2f} CPU s at best of {ATTEMPTS} tries (budget {budget:.2f} s)")


@pytest.fixture(scope="module")
def deflated_payload():
    return deflated_tensor_payload(256 * 2**20)


def test_deflated_records_are_refused_before_they_are_inflated(deflated_payload):
    assert len(deflated_payload) < 2**20  # 256 MiB of zeros in a few hundred KB
    records = {r.filename: r for r in zipfile.ZipFile(io.BytesIO(deflated_payload)).infolist()}
    assert records["archive/data/0"].file_size == 256 * 2**20
    decodes_within_bounds(deflated_payload, ProtocolError, "compressed")


def test_honest_payloads_are_zip_archives_of_stored_records():
    payload = protocol.encode({"x": torch.ones(3), "ids": [1, 2], "empty": torch.empty(0), "scalar": torch.tensor(2)})
    records = zipfile.ZipFile(io.BytesIO(payload)).infolist()
    assert payload.startswith(protocol.ZIP_MAGIC)
    assert all(r.compress_type == zipfile.ZIP_STORED and r.file_size == r.compress_size for r in records)
    assert len(records) == 6 + 3  # torch.save's fixed records, and one per tensor (empty ones too)
    protocol.check_container(payload)


@pytest.mark.parametrize("value, fragment", [
    (torch.zeros(1).expand(4, 5_000_000), "non-contiguous"),  # 4 bytes posing as 80 MB
    (torch.arange(10_000.0).as_strided((5000, 5000), (1, 1)), "non-contiguous"),  # overlapping rows
    (torch.arange(1_000_000.0)[:2], "storage of 4000000 bytes"),  # a small view of a large storage
    (torch.arange(1_000_000.0)[5:7], "offset 5"),
], ids=["stride-0", "overlapping", "oversized-storage", "offset"])
def test_views_saved_as_is_are_rejected(value, fragment):
    payload = saved_as_is({"id": 1, "ok": True, "value": value})
    decodes_within_bounds(payload, VocabularyError, fragment)


def test_a_thirty_million_item_list_is_refused_before_unpickling():
    payload = torch_archive(list_pickle(b"K\x01", 30_000_000))  # 60 MB of pickle
    decodes_within_bounds(payload, ProtocolError, "data.pkl.*over the limit")


def test_the_worst_pickle_within_the_cap_is_decoded_quickly():
    # One empty list per pickle byte: the most objects (and the most unpickler work)
    # the cap admits. The walk then refuses it: each list is charged more than a byte.
    payload = torch_archive(list_pickle(b"]", protocol.MAX_PICKLE_BYTES - 8))
    decodes_within_bounds(payload, VocabularyError, "too long to send")


def test_a_long_list_within_the_caps_still_decodes():
    count = protocol.MAX_PICKLE_BYTES // 10  # None costs one byte; the list stays under the budget
    payload = torch_archive(list_pickle(b"N", count))
    assert decodes_within_bounds(payload) == [None] * count


def test_a_pickle_record_over_the_cap_is_refused_even_when_valid():
    pickle_bytes = list_pickle(b"N", protocol.MAX_PICKLE_BYTES)
    with pytest.raises(ProtocolError, match="over the limit"):
        protocol.decode(torch_archive(pickle_bytes))


def test_too_many_records_are_refused_before_the_directory_is_read():
    storages = [(str(i), b"") for i in range(protocol.MAX_ZIP_ENTRIES)]
    payload = torch_archive(list_pickle(b"N", 1), storages)
    decodes_within_bounds(payload, ProtocolError, "records, over the limit")


@pytest.mark.parametrize("payload", [
    b"",
    b"not a zip archive",
    pickle.dumps([1, 2, 3], protocol=2),
    b"PK\x03\x04" + bytes(100),
], ids=["empty", "text", "pickle", "zip-magic-only"])
def test_payloads_that_are_not_zip_archives_are_refused(payload):
    decodes_within_bounds(payload, ProtocolError)


def test_the_legacy_torch_save_format_is_refused():
    # torch.load unpickles a non-zip payload as the pre-1.6 format, outside every check here.
    buffer = io.BytesIO()
    torch.save({"x": [1, 2]}, buffer, _use_new_zipfile_serialization=False)
    with pytest.raises(ProtocolError, match="not a zip archive"):
        protocol.decode(buffer.getvalue())


def _with_directory_offset(payload, delta):
    """``payload`` with the directory offset of both end records moved by ``delta``."""
    data = bytearray(payload)
    end = len(data) - protocol._END.size
    struct.pack_into("<L", data, end + 16, struct.unpack_from("<L", data, end + 16)[0] + delta)
    record = end - protocol._END64_LOCATOR.size - protocol._END64.size
    struct.pack_into("<Q", data, record + 48, struct.unpack_from("<Q", data, record + 48)[0] + delta)
    return bytes(data)


@pytest.mark.parametrize("tamper, fragment", [
    (lambda p: p + b"trailing bytes", "does not end with its directory record"),
    (lambda p: p[:-2] + b"\x03\x00abc", "does not end with its directory record"),  # a comment
    (lambda p: _with_directory_offset(p, -64), "not where the end record says"),  # zipfile: "a prefix"
    (lambda p: p[:-22 - 20 - 56 + 32] + struct.pack("<Q", 99) + p[-22 - 20 - 56 + 40:], "disagrees"),
], ids=["trailing", "comment", "moved-directory", "zip64-count"])
def test_archives_that_zipfile_and_torch_could_read_differently_are_refused(tamper, fragment):
    payload = tamper(protocol.encode([torch.ones(2), "x"]))
    with pytest.raises(ProtocolError, match=fragment):
        protocol.decode(payload)


def test_tensors_must_not_share_a_storage():
    shared = torch.ones(3)
    with pytest.raises(VocabularyError, match="shares its storage"):
        protocol.decode(saved_as_is([shared, shared]))
    assert len(roundtrip([shared, shared])) == 2  # to_wire sends two copies


def test_empty_and_zero_dim_tensors_cross():
    value = [torch.empty(0), torch.empty(3, 0, 2), torch.tensor(7), torch.tensor(True),
             torch.empty(0, dtype=torch.int8), torch.zeros(1).expand(3, 0)]  # stride 0, but nothing to repeat
    back = roundtrip(value)
    assert [(t.shape, t.dtype) for t in back] == [(t.shape, t.dtype) for t in value]
    assert back[2].item() == 7


def test_tensor_count_and_bytes_are_budgeted(monkeypatch):
    assert len(roundtrip([torch.zeros(1)] * protocol.MAX_TENSORS)) == protocol.MAX_TENSORS
    with pytest.raises(VocabularyError, match="tensors in one message"):
        protocol.to_wire([torch.zeros(1)] * (protocol.MAX_TENSORS + 1))
    payload = protocol.encode([torch.zeros(1000), torch.zeros(1000)])
    monkeypatch.setattr(protocol, "MAX_TENSOR_BYTES", 6000)
    with pytest.raises(VocabularyError, match="tensors hold more than"):
        protocol.decode(payload)
    with pytest.raises(VocabularyError, match="tensors hold more than"):
        protocol.to_wire([torch.zeros(1000), torch.zeros(1000)])


def test_the_sender_refuses_what_the_receiver_would_refuse():
    with pytest.raises(VocabularyError, match="too long to send"):
        protocol.to_wire([0.5] * (protocol.MAX_PICKLE_BYTES // 9))
    with pytest.raises(VocabularyError, match="too long to send"):
        protocol.to_wire("x" * protocol.MAX_PICKLE_BYTES)
    # What just fits for the sender decodes in the worker's reply envelope.
    floats = [0.5] * ((protocol.MAX_PICKLE_BYTES - protocol.ENVELOPE_PICKLE_BYTES - 256) // 9)
    reply = {"id": 2**40, "ok": True, "value": protocol.to_wire(floats)}
    assert protocol.decode(protocol.encode_prepared(reply))["value"] == floats


@pytest.mark.parametrize("value", [
    [torch.zeros(2, dtype=dtype) for dtype in (torch.float32, torch.bfloat16, torch.complex128, torch.bool,
                                               torch.uint8, torch.int64, torch.float8_e4m3fn)],
    [torch.zeros(1)] * 1000,
    torch.zeros((1,) * 8),
    list(range(-60_000, 10_000)) + [2**64, -(2**600)],
    [0.25] * 50_000,
    {f"key {i} é": [i, None, True, (i, 1.5, "x" * i)] for i in range(500)},
    ["\ud800 surrogate"] * 3,
], ids=["dtypes", "tensors", "8-dim", "ints", "floats", "nested", "surrogates"])
def test_the_walk_charges_at_least_what_torch_save_writes(value):
    budget = protocol._Budget()
    wire = protocol._walk(value, "value", 0, budget, convert=True)
    charged = protocol.MAX_PICKLE_BYTES - budget.pickle_bytes
    archive = zipfile.ZipFile(io.BytesIO(protocol.encode_prepared(wire)))
    assert archive.getinfo("archive/data.pkl").file_size <= charged


def test_decoding_that_ends_after_the_deadline_raises_timeout():
    payload = protocol.encode({"x": torch.ones(2)})
    with pytest.raises(TimeoutError):
        protocol.decode(payload, deadline=time.monotonic() - 0.01)
    assert protocol.decode(payload, deadline=time.monotonic() + 60)["x"].tolist() == [1.0, 1.0]


def test_decode_rejects_a_tensor_that_requires_grad():
    """Only a tampered worker sends one (``to_wire`` detaches); the grader never computes through it."""
    buffer = io.BytesIO()
    torch.save(torch.ones(3, requires_grad=True), buffer)
    with pytest.raises(VocabularyError, match="requires grad"):
        protocol.decode(buffer.getvalue())
