"""Wire format between the grader and a sandboxed worker.

A message is one *frame* on a pipe::

    b"AGSB" | payload length (8 bytes, big endian) | payload

and the payload is the ``torch.save`` serialisation of a value from a small
vocabulary. Both sides decode with ``torch.load(..., weights_only=True)``, which only
rebuilds tensors and builtin containers and scalars, so no pickled object from the
other side ever gets to run code; a walk over the decoded value then rejects what
``weights_only`` still admits but the grader has no use for (``nn.Parameter``,
``torch.dtype``, sets, subclasses of builtins, ...).

The vocabulary, nested at most ``MAX_DEPTH`` levels and ``MAX_ITEMS`` entries:

* ``torch.Tensor``, exactly that type, strided layout (no subclass, no Parameter);
* ``None``, ``bool``, ``int``, ``float``, ``str``, exactly those types;
* ``list``, ``tuple``, and ``dict`` with ``str`` keys, of the above.
"""
from __future__ import annotations

import io
import struct
from typing import Any, BinaryIO

import torch

from .errors import ProtocolError, VocabularyError

MAGIC = b"AGSB"
HEADER = struct.Struct(">4sQ")
# A reply is a test's worth of tensors, not a checkpoint; the cap keeps a hostile
# worker from making the grader allocate whatever length it announces.
MAX_FRAME_BYTES = 256 * 2**20
MAX_DEPTH = 32
MAX_ITEMS = 1_000_000

SCALAR_TYPES = (type(None), bool, int, float, str)
_HINTS = {
    "Parameter": "return p.detach() instead of the nn.Parameter",
    "Size": "convert with tuple(x.shape)",
    "ndarray": "convert with torch.from_numpy(x) or x.tolist()",
    "function": "return what the function computes instead",
    "module": "Python modules cannot leave the sandbox",
}


# --------------------------------------------------------------------- vocabulary

def check_vocabulary(value: Any, where: str = "value") -> None:
    """Raise ``VocabularyError`` unless ``value`` is made only of vocabulary types.

    Only exact ``type()`` checks are used: ``isinstance`` and ``__class__`` can be
    made to lie by the objects being checked.
    """
    _walk(value, where, depth=0, budget=[MAX_ITEMS], convert=False)


def to_wire(value: Any, where: str = "value") -> Any:
    """Check ``value`` and return a copy that is safe and compact to serialise.

    Tensors are detached and cloned: that drops autograd history, hooks and Python
    attributes, resolves lazy conjugate/negative views, and keeps ``torch.save`` from
    shipping the whole storage behind a small view. ``torch.Size`` becomes a tuple,
    the one lossless conversion made on the sender's behalf.
    """
    return _walk(value, where, depth=0, budget=[MAX_ITEMS], convert=True)


def _walk(value: Any, where: str, depth: int, budget: list[int], convert: bool) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise VocabularyError(f"{where}: more than {MAX_ITEMS} items in one message")
    if depth > MAX_DEPTH:
        raise VocabularyError(f"{where}: nested deeper than {MAX_DEPTH} levels (a cycle?)")
    kind = type(value)
    if kind in SCALAR_TYPES:
        return value
    if kind is torch.Tensor:
        if value.layout is not torch.strided:
            raise VocabularyError(f"{where}: a {value.layout} tensor is not allowed; "
                                  "return a dense tensor (x.to_dense())")
        return _plain_tensor(value) if convert else value
    if convert and kind is torch.Size:
        return tuple(int(n) for n in value)
    if kind is list or kind is tuple:
        items = [_walk(item, f"{where}[{i}]", depth + 1, budget, convert)
                 for i, item in enumerate(value)]
        return kind(items) if convert else value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise VocabularyError(f"{where}: dict key {_describe(key)} is not a str")
            out[key] = _walk(item, f"{where}[{key!r}]", depth + 1, budget, convert)
        return out if convert else value
    raise VocabularyError(f"{where}: {_describe(value)} cannot cross the sandbox boundary; "
                          f"{_hint(value)}")


def _plain_tensor(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    if tensor.is_conj():
        tensor = tensor.resolve_conj()
    if tensor.is_neg():
        tensor = tensor.resolve_neg()
    return tensor.clone(memory_format=torch.contiguous_format)


def _describe(value: Any) -> str:
    # Never call the value's own __repr__: it is student code and may lie or hang.
    kind = type(value)
    module = getattr(kind, "__module__", None)
    qualname = getattr(kind, "__qualname__", kind.__name__)
    name = qualname if module in (None, "builtins") else f"{module}.{qualname}"
    if isinstance(value, torch.Tensor) and kind is not torch.Tensor:
        return f"a tensor subclass ({name})"
    return f"an object of type {name}"


def _hint(value: Any) -> str:
    kind = type(value)
    if kind.__name__ in _HINTS:
        return _HINTS[kind.__name__]
    if isinstance(value, torch.Tensor):
        return "return a plain torch.Tensor (x.as_subclass(torch.Tensor))"
    if isinstance(value, torch.nn.Module):
        return "nn.Modules cannot leave the sandbox; return the tensors the test needs"
    builtin = next((t for t in kind.__mro__ if t in SCALAR_TYPES), None)
    if builtin is not None:
        return f"convert to the builtin type with {builtin.__name__}(x)"
    if callable(value):
        return "return what it computes instead"
    return ("allowed are plain torch.Tensor, None, bool, int, float, str, "
            "and list/tuple/dict (str keys) of these")


# ----------------------------------------------------------------------- payloads

def encode(value: Any) -> bytes:
    """Serialise a vocabulary value (checked and copied by ``to_wire``) into bytes."""
    return encode_prepared(to_wire(value))


def encode_prepared(value: Any) -> bytes:
    """Serialise a value that already went through ``to_wire`` (saves a second copy)."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def decode(payload: bytes, *, map_location: Any = None) -> Any:
    """Rebuild a value from bytes sent by the other side, trusting nothing in them.

    Raises ``ProtocolError`` when the bytes are not a weights-only ``torch.save``
    payload and ``VocabularyError`` when they are but hold a type outside the
    vocabulary.
    """
    try:
        value = torch.load(io.BytesIO(payload), weights_only=True, map_location=map_location)
    except Exception as exc:  # every failure mode of a corrupt or hostile payload
        raise ProtocolError(f"undecodable payload ({type(exc).__name__}: {str(exc)[:300]})") from None
    check_vocabulary(value)
    return value


# ------------------------------------------------------------------------- frames

def frame_header(length: int) -> bytes:
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return HEADER.pack(MAGIC, length)


def parse_header(header: bytes) -> int:
    """Length of the payload announced by a header; ``ProtocolError`` if it is not one."""
    magic, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame magic {magic!r}: the channel is out of sync")
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return length


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    """Blocking write of one frame (the worker's side; the grader uses ``channel``)."""
    stream.write(frame_header(len(payload)) + payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    """Blocking read of one frame; ``None`` on a clean end of stream between frames."""
    header = _read_exactly(stream, HEADER.size, allow_eof=True)
    if header is None:
        return None
    payload = _read_exactly(stream, parse_header(header), allow_eof=False)
    assert payload is not None
    return payload


def _read_exactly(stream: BinaryIO, size: int, *, allow_eof: bool) -> bytes | None:
    chunks, missing = [], size
    while missing:
        chunk = stream.read(missing)
        if not chunk:
            if allow_eof and missing == size:
                return None
            raise ProtocolError(f"stream ended inside a frame ({size - missing}/{size} bytes)")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


# ------------------------------------------------------------ grader-side checks

class UnexpectedValue(AssertionError):
    """A value decoded from the worker is not what the test asked for.

    An ``AssertionError``, so a hidden test that calls these helpers fails (rather
    than errors) on a wrong type, like a failing ``assert``.
    """


def expect_tensor(value: Any, *, dtype: torch.dtype | None = None,
                  shape: tuple[int | None, ...] | None = None,
                  device: str | torch.device | None = None,
                  name: str = "result") -> torch.Tensor:
    """Return ``value`` if it is a plain tensor with the given dtype, shape and device.

    ``shape`` entries may be ``None`` to accept any size along that dimension; a
    ``device`` without an index (``"cuda"``) accepts any index.
    """
    if type(value) is not torch.Tensor:
        raise UnexpectedValue(f"{name}: expected a torch.Tensor, got {_describe(value)}")
    if dtype is not None and value.dtype != dtype:
        raise UnexpectedValue(f"{name}: expected dtype {dtype}, got {value.dtype}")
    if shape is not None:
        actual = tuple(value.shape)
        if len(actual) != len(shape) or any(want is not None and want != got
                                            for want, got in zip(shape, actual, strict=True)):
            wanted = tuple("*" if s is None else s for s in shape)
            raise UnexpectedValue(f"{name}: expected shape {wanted}, got {actual}")
    if device is not None:
        want = torch.device(device)
        if value.device.type != want.type or (want.index is not None and value.device.index != want.index):
            raise UnexpectedValue(f"{name}: expected a tensor on {want}, got one on {value.device}")
    return value


def expect_type(value: Any, *types: type, name: str = "result") -> Any:
    """Return ``value`` if its exact type is one of ``types`` (``bool`` is not an ``int``)."""
    if type(value) not in types:
        wanted = " or ".join(t.__name__ for t in types)
        raise UnexpectedValue(f"{name}: expected {wanted}, got {_describe(value)}")
    return value
