"""The wire format on its own: frames, payloads and the vocabulary (no worker)."""
from __future__ import annotations

import functools
import io
import os
import pickle
import resource
import struct
import time

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
    for payload in (buffer.getvalue(), pickle.dumps(Exploit(marker)), pickle.dumps(Exploit(marker), protocol=0)):
        with pytest.raises(ProtocolError):
            protocol.decode(payload)
    assert not marker.exists()


@pytest.mark.parametrize("skeleton, error, fragment", [
    ('{"x": 1}', ProtocolError, "JSON object stands for no value"),
    ('["l", {"x": 1}]', ProtocolError, "JSON object stands for no value"),
    ('["s", 1, 2]', ProtocolError, "without a known tag"),
    ('[]', ProtocolError, "without a known tag"),
    ('["d", 1, "int key"]', VocabularyError, "not a str"),
    ('["d", "key"]', ProtocolError, "a key but no value"),
    ('["T", "qint8", [1], "cpu"]', VocabularyError, "dtype 'qint8'"),
    ('["T", "float32", [-1], "cpu"]', ProtocolError, "none negative"),
    ('["T", "float32", [1.0], "cpu"]', ProtocolError, "none negative"),
    ('["T", "float32", [true], "cpu"]', ProtocolError, "none negative"),
    ('["T", "float32", [1], "meta"]', ProtocolError, "only cpu and cuda"),
    ('["T", "float32", [1]]', ProtocolError, "dtype, \\[sizes\\], device"),
    ("[1, 2", ProtocolError, "undecodable skeleton"),
    ("\"\\ud800 a lone surrogate is text\"", None, None),
], ids=["object", "nested-object", "unknown-tag", "empty-array", "int-key", "odd-dict", "dtype", "negative",
        "float-size", "bool-size", "device", "short-tensor", "truncated-json", "surrogate"])
def test_decode_rejects_skeletons_outside_the_format(skeleton, error, fragment):
    body = skeleton.encode()
    data = bytes(4) if '"T"' in skeleton else b""
    if error is None:
        assert protocol.decode(payload_of(body, data)) == "\ud800 a lone surrogate is text"
        return
    with pytest.raises(error, match=fragment):
        protocol.decode(payload_of(body, data))


def test_decode_checks_the_payload_against_its_skeleton():
    honest = protocol.encode([torch.ones(2), "x"])
    with pytest.raises(ProtocolError, match="follow the last tensor"):
        protocol.decode(honest + b"trailing bytes")
    with pytest.raises(ProtocolError, match="bytes of data are left"):
        protocol.decode(honest[:-1])
    with pytest.raises(ProtocolError, match="past the end"):
        protocol.decode(honest[:10])
    with pytest.raises(ProtocolError, match="too short"):
        protocol.decode(b"\x00\x00")


def test_decoded_tensors_are_plain_copies_that_own_their_bytes():
    payload = protocol.encode({"a": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3, dtype=torch.int64)})
    back = protocol.decode(payload)
    for tensor in back.values():
        assert type(tensor) is torch.Tensor and tensor.is_contiguous() and not tensor.requires_grad
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    back["a"] += 1  # writable: a copy, not a view of the received bytes
    assert back["a"].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert back["a"].untyped_storage().data_ptr() != back["b"].untyped_storage().data_ptr()


def test_a_bool_tensor_is_true_or_false_whatever_its_bytes():
    body = b'["T","bool",[4],"cpu"]'
    back = protocol.decode(payload_of(body, bytes([0, 1, 2, 255])))
    assert back.dtype == torch.bool and back.tolist() == [False, True, True, True]
    assert back.view(torch.uint8).tolist() == [0, 1, 1, 1]


def test_a_cuda_tensor_where_there_is_no_cuda_is_refused():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ProtocolError, match="cannot be placed here"):
        protocol.decode(payload_of(b'["T","float32",[1],"cuda:0"]', bytes(4)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_cross_on_their_device():
    back = roundtrip({"x": torch.arange(4.0, device="cuda")})
    assert back["x"].device.type == "cuda" and back["x"].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("make, fragment", [
    (lambda: torch.zeros(2, dtype=torch.complex32), "dtype torch.complex32"),
    (lambda: torch.zeros(2, device="meta"), "meta"),
    (lambda: 2**9000, "bits"),
], ids=["complex32", "meta", "long-int"])
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_what_the_format_cannot_carry_is_refused_by_the_sender(make, fragment):
    with pytest.raises(VocabularyError, match=fragment):
        protocol.to_wire(make())


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
# protocol.encode_prepared). They are written byte by byte, never from a real value of
# the size they claim, and need only the standard library:
# test_sandbox_hostile_replies.py sends the source of these functions to a worker as a
# student cell.

def payload_of(skeleton, data=b""):
    """A payload of the wire format: the skeleton's length, the skeleton (bytes), the data."""
    import struct

    return struct.pack(">I", len(skeleton)) + skeleton + data


def list_skeleton(item, count):
    """The skeleton of a list whose ``count`` items are each written as ``item``
    (``b"1"``: the int 1, ``b'["l"]'``: an empty list), without building the list."""
    return b'["l"' + (b"," + item) * count + b"]"


def claimed_tensor_payload(nbytes):
    """A float32 tensor that claims ``nbytes`` of data, followed by 4 bytes of it."""
    skeleton = b'["T","float32",[%d],"cpu"]' % (nbytes // 4)
    return payload_of(skeleton, bytes(4))


def nested_payload(depth):
    """``depth`` lists, one inside the other."""
    return payload_of(b'["l",' * depth + b"1" + b"]" * depth)


# ------------------------------------------------------------- decoding is bounded
DECODE_SECONDS = 2.0  # every hostile payload is refused (or decoded) within this CPU time ...
PARSE_FACTOR = 64  # ... or within 64 honest parses at the cap, on a slower machine
MEMORY_BYTES = 64 * 2**20  # ... and the process's peak memory grows by less than this
ATTEMPTS = 3  # the best of this many tries is compared (see decodes_within_bounds)


def _cpu_seconds(action):
    start = time.process_time()
    action()
    return time.process_time() - start


@functools.cache
def decode_budget():
    """CPU seconds a hostile payload may take: ``DECODE_SECONDS``, or more on a
    machine where parsing JSON is slow. The unit is the time this machine takes to
    parse an honest skeleton of ``MAX_SKELETON_BYTES`` (a list of small ints), the
    best of three parses; the worst payload within the caps costs about 30 of them
    here, and what the limits guard against (allocating what a tensor claims, parsing
    a 60 MB list) more than a thousand."""
    import json

    honest = list_skeleton(b"1", (protocol.MAX_SKELETON_BYTES - 8) // 2)
    unit = min(_cpu_seconds(lambda: json.loads(honest)) for _ in range(3))
    return max(DECODE_SECONDS, PARSE_FACTOR * unit)


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


def test_a_tensor_is_refused_before_what_it_claims_is_allocated():
    payload = claimed_tensor_payload(256 * 2**20)  # 256 MiB announced, 4 bytes sent
    assert len(payload) < 100
    decodes_within_bounds(payload, ProtocolError, "bytes of data are left")
    decodes_within_bounds(claimed_tensor_payload(2**62), VocabularyError, "tensors hold more than")
    many_sizes = payload_of(b'["T","float64",[' + b",".join([b"1000000"] * 64) + b'],"cpu"]', bytes(8))
    decodes_within_bounds(many_sizes, VocabularyError, "tensors hold more than")


def test_honest_payloads_are_a_skeleton_and_the_tensors_bytes():
    import json

    value = {"x": torch.ones(3), "ids": [1, (2, None)], "empty": torch.empty(0), "scalar": torch.tensor(2)}
    payload = protocol.encode(value)
    (length,) = struct.unpack_from(">I", payload)
    skeleton = json.loads(payload[4:4 + length])
    assert skeleton == ["d", "x", ["T", "float32", [3], "cpu"], "ids", ["l", 1, ["t", 2, None]],
                        "empty", ["T", "float32", [0], "cpu"], "scalar", ["T", "int64", [], "cpu"]]
    assert len(payload) == 4 + length + 3 * 4 + 0 + 8  # the tensors' bytes, nothing else


def test_a_thirty_million_item_list_is_refused_before_it_is_parsed():
    payload = payload_of(list_skeleton(b"1", 30_000_000))  # 60 MB of skeleton
    decodes_within_bounds(payload, ProtocolError, "skeleton takes .* over the limit")


def test_the_worst_skeleton_within_the_cap_is_decoded_quickly():
    # One empty list per six bytes: the most containers (and the most decoder work)
    # the cap admits. The walk then refuses it: each list is charged more than its bytes.
    payload = payload_of(list_skeleton(b'["l"]', (protocol.MAX_SKELETON_BYTES - 8) // 6))
    decodes_within_bounds(payload, VocabularyError, "too long to send")


def test_a_long_list_within_the_caps_still_decodes():
    count = protocol.MAX_SKELETON_BYTES // 10  # None is charged six bytes; the list stays under the budget
    payload = payload_of(list_skeleton(b"null", count))
    assert decodes_within_bounds(payload) == [None] * count


def test_a_skeleton_over_the_cap_is_refused_even_when_valid():
    skeleton = list_skeleton(b"0", protocol.MAX_SKELETON_BYTES // 2)
    with pytest.raises(ProtocolError, match="over the limit"):
        protocol.decode(payload_of(skeleton))


def test_too_many_tensors_are_refused():
    empty = b'["T","float32",[0],"cpu"]'
    decodes_within_bounds(payload_of(list_skeleton(empty, protocol.MAX_TENSORS + 1)),
                          VocabularyError, "tensors in one message")


def test_deep_nesting_is_refused_quickly():
    decodes_within_bounds(nested_payload(protocol.MAX_DEPTH + 1), VocabularyError, "deeper than")
    decodes_within_bounds(nested_payload(80_000), ProtocolError, "undecodable skeleton")


@pytest.mark.parametrize("payload", [
    b"",
    b"not a payload",
    pickle.dumps([1, 2, 3], protocol=2),
    b"PK\x03\x04" + bytes(100),
    b'["l",1,2]',
], ids=["empty", "text", "pickle", "zip-magic-only", "json-without-length"])
def test_byte_strings_that_are_not_payloads_are_refused(payload):
    decodes_within_bounds(payload, ProtocolError)


def test_torch_save_payloads_are_refused():
    for zipped in (True, False):
        buffer = io.BytesIO()
        torch.save({"x": [1, 2]}, buffer, _use_new_zipfile_serialization=zipped)
        with pytest.raises(ProtocolError):
            protocol.decode(buffer.getvalue())


def test_tensors_sent_twice_arrive_as_two_copies():
    shared = torch.ones(3)
    back = roundtrip([shared, shared])
    assert len(back) == 2 and back[0].untyped_storage().data_ptr() != back[1].untyped_storage().data_ptr()


def test_empty_and_zero_dim_tensors_cross():
    value = [torch.empty(0), torch.empty(3, 0, 2), torch.tensor(7), torch.tensor(True),
             torch.empty(0, dtype=torch.int8), torch.zeros(1).expand(3, 0),  # stride 0, but nothing to repeat
             torch.empty(2**40, 0)]  # no bytes, whatever the other sizes
    back = roundtrip(value)
    assert [(t.shape, t.dtype) for t in back] == [(t.shape, t.dtype) for t in value]
    assert back[2].item() == 7 and back[3].item() is True


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
        protocol.to_wire([0.5] * (protocol.MAX_SKELETON_BYTES // 4))  # "0.5," each
    with pytest.raises(VocabularyError, match="too long to send"):
        protocol.to_wire("x" * protocol.MAX_SKELETON_BYTES)
    # What just fits for the sender decodes in the worker's reply envelope.
    floats = [0.5] * ((protocol.MAX_SKELETON_BYTES - protocol.ENVELOPE_SKELETON_BYTES - 256) // 4)
    reply = {"id": 2**40, "ok": True, "value": protocol.to_wire(floats)}
    assert protocol.decode(protocol.encode_prepared(reply))["value"] == floats


@pytest.mark.parametrize("value", [
    [torch.zeros(2, dtype=dtype) for dtype in (torch.float32, torch.bfloat16, torch.complex128, torch.bool,
                                               torch.uint8, torch.int64, torch.float8_e4m3fn)],
    [torch.zeros(1)] * 1000,
    torch.zeros((1,) * 8),
    list(range(-60_000, 10_000)) + [2**64, -(2**600)],
    [0.25, -2.2250738585072014e-308, float("nan"), float("-inf"), 1e300, float("inf")] * 8_000,
    {f"key {i} é\"\\\n\x01": [i, None, True, False, (i, 1.5, "x" * i)] for i in range(500)},
    ["\ud800 surrogate", "\U0001f600 astral", "\x00\x1f control"] * 3,
], ids=["dtypes", "tensors", "8-dim", "ints", "floats", "nested", "strings"])
def test_the_walk_charges_at_least_what_the_skeleton_takes(value):
    budget = protocol._Budget()
    wire = protocol._walk(value, "value", 0, budget, convert=True)
    charged = protocol.MAX_SKELETON_BYTES - budget.skeleton_bytes
    payload = protocol.encode_prepared(wire)
    (length,) = struct.unpack_from(">I", payload)
    assert length <= charged
    back = protocol.decode(payload)
    assert protocol.encode_prepared(back) == payload  # and the value comes back as it was


def test_decoding_that_ends_after_the_deadline_raises_timeout():
    payload = protocol.encode({"x": torch.ones(2)})
    with pytest.raises(TimeoutError):
        protocol.decode(payload, deadline=time.monotonic() - 0.01)
    assert protocol.decode(payload, deadline=time.monotonic() + 60)["x"].tolist() == [1.0, 1.0]
