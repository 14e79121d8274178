"""The wire format on its own: frames, payloads and the vocabulary (no worker)."""
from __future__ import annotations

import io
import os
import pickle

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
