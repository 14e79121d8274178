"""Wire format between the grader and a sandboxed worker.

A message is one *frame* on a pipe::

    b"AGSB" | payload length (8 bytes, big endian) | payload

and the payload is a value from a small vocabulary in this module's own format::

    skeleton length (4 bytes, big endian) | skeleton | tensor data

The *skeleton* is UTF-8 JSON in which every container is an array led by a tag:
``["l", item, ...]`` a list, ``["t", item, ...]`` a tuple, ``["d", key, value, ...]``
a dict, ``["T", dtype, [sizes], device]`` a tensor whose bytes come next in the data
section (tensors in the order the skeleton names them, each one's elements in row-major
order, nothing between or after them); scalars are JSON's own. Decoding is
``json.loads`` (the standard library's C parser, which builds only strings, numbers,
lists and dicts) and a walk that rebuilds the containers and cuts every tensor from the
data: nothing from the other side is ever unpickled or gets to run code, and every
decoded tensor is a fresh, contiguous copy that owns exactly its bytes. A walk over the
decoded value then rejects what the vocabulary does not admit.

The format replaced ``torch.save`` with ``torch.load(weights_only=True)``: a zip archive
and a pure-Python unpickler cost about half a millisecond a message each way, a fifth
of what the hidden suites' tests cost; JSON and byte slices cost about a twentieth of it.

The vocabulary, within the limits below:

* ``torch.Tensor``, exactly that type, strided layout (no subclass, no Parameter), on
  the CPU or a CUDA device, of one of the dtypes of ``DTYPES``, without autograd
  (``requires_grad`` off); the sender sends a contiguous copy of its own;
* ``None``, ``bool``, ``int`` (at most ``MAX_INT_BITS`` bits), ``float``, ``str``,
  exactly those types;
* ``list``, ``tuple``, and ``dict`` with ``str`` keys, of the above.

Limits
------

``decode`` is bounded by what it *unpacks*, not only by what it receives: a
hostile worker controls every byte of its replies (it can replace this module's
encoder), and a small frame must not become a large or slow value in the grader.
The skeleton's length is read before anything is parsed; a tensor's bytes must have
arrived before it is built; and the vocabulary walk charges every value to a
per-message budget. The sender runs the same walk in ``to_wire``, so an honest worker
refuses an oversized value itself, with a message for the student
(``ValueRejected``); only a tampered worker meets the receiver's refusal, and the
grader then kills it.

* ``MAX_FRAME_BYTES`` = 256 MiB: bytes received in one frame. A reply is a test's
  worth of tensors, not a checkpoint.
* ``MAX_SKELETON_BYTES`` = 1 MiB: the skeleton, everything but the tensors' data.
  It bounds the parse (``json.loads`` reads about 100 MB/s) and, through the walk's
  budget, the work and memory of what it holds: the walk charges each value an upper
  bound of the bytes it takes in the skeleton.
* ``MAX_ITEMS`` = 524,288 values: every value takes at least two bytes of the
  skeleton (itself and a comma), so the skeleton cap admits no more; bounds the walk.
* ``MAX_TENSORS`` = 1,024 tensors.
* ``MAX_TENSOR_BYTES`` = 256 MiB: ``numel * element_size`` summed over a message's
  tensors, counting a tensor each time it appears; no more than a frame carries,
  and every byte of it must have arrived: a tensor's size is checked against the
  data left before it is allocated.
* ``MAX_DEPTH`` = 32 levels of nesting (cycles, recursion); ``MAX_DIMS`` = 64
  dimensions a tensor (torch's own limit).

``decode(..., deadline=...)`` raises ``TimeoutError`` when decoding ends after the
request's deadline; the caps above are what keep the time in between short.
"""
from __future__ import annotations

import json
import re
import struct
import time
from typing import Any, BinaryIO

import torch

from .errors import ProtocolError, VocabularyError

MAGIC = b"AGSB"
HEADER = struct.Struct(">4sQ")
# A reply is a test's worth of tensors, not a checkpoint; the cap keeps a hostile
# worker from making the grader allocate whatever length it announces.
MAX_FRAME_BYTES = 256 * 2**20
# Values, containers and records: see "Limits" in the module docstring for the reasons
# and the measurements behind each value.
MAX_DEPTH = 32
MAX_SKELETON_BYTES = 2**20  # honest messages: at most about 10 KB; about 50,000 floats of full precision
MAX_ITEMS = MAX_SKELETON_BYTES // 2  # every item takes at least two bytes of the skeleton
MAX_TENSORS = 1024
MAX_TENSOR_BYTES = MAX_FRAME_BYTES
MAX_DIMS = 64  # torch's own limit on a tensor's dimensions
MAX_INT_BITS = 8192  # about 2,466 digits, within Python's 4,300-digit limit on parsing ints

SKELETON_LENGTH = struct.Struct(">I")
# The dtypes a tensor may have on the wire, by name: every dtype whose elements are
# plain bytes (no quantized or packed sub-byte types).
DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex128, torch.complex64,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.bool, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_DEVICE = re.compile(r"cpu|cuda(:[0-9]{1,2})?")
# Bound once, here: a student cell that patches ``json.dumps`` or ``json.loads`` for its
# own use must not break the worker's replies.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_JSON_DECODER = json.JSONDecoder()

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
    """Raise ``VocabularyError`` unless ``value`` is made only of vocabulary types,
    within the limits of one message.

    Only exact ``type()`` checks are used: ``isinstance`` and ``__class__`` can be
    made to lie by the objects being checked.
    """
    _walk(value, where, depth=0, budget=_Budget(), convert=False)


def to_wire(value: Any, where: str = "value") -> Any:
    """Check ``value`` and return a copy that is safe and compact to serialise.

    Tensors are detached and cloned: that drops autograd history, hooks and Python
    attributes, resolves lazy conjugate/negative views, and leaves a contiguous tensor
    of its own, whose bytes are the ones sent. ``torch.Size`` becomes a tuple,
    the one lossless conversion made on the sender's behalf. The copy is checked
    against the same limits as a received value, so what passes here also decodes
    on the other side.
    """
    return _walk(value, where, depth=0, budget=_Budget(reserve_envelope=True), convert=True)


# What to_wire keeps free for the envelope the worker wraps around a checked value
# ({"id": ..., "ok": True, "value": ...}, about 40 bytes of skeleton and 3 items), so
# that the receiver, which checks the whole message, accepts it too.
ENVELOPE_ITEMS = 16
ENVELOPE_SKELETON_BYTES = 1024


class _Budget:
    """What one message may still hold; the walk charges every value it visits."""

    def __init__(self, *, reserve_envelope: bool = False) -> None:
        self.items = MAX_ITEMS - (ENVELOPE_ITEMS if reserve_envelope else 0)
        self.skeleton_bytes = MAX_SKELETON_BYTES - (ENVELOPE_SKELETON_BYTES if reserve_envelope else 0)
        self.tensors = MAX_TENSORS
        self.tensor_bytes = MAX_TENSOR_BYTES
        self.storages: set[tuple[torch.device, int]] = set()

    def charge(self, value: Any, where: str) -> None:
        self.items -= 1
        if self.items < 0:
            raise VocabularyError(f"{where}: more than {MAX_ITEMS} items in one message")
        self.charge_skeleton(value, where)

    def charge_skeleton(self, value: Any, where: str) -> None:
        self.skeleton_bytes -= _skeleton_size_bound(value)
        if self.skeleton_bytes < 0:
            raise VocabularyError(f"{where}: the message is too long to send (more than {MAX_SKELETON_BYTES} "
                                  "bytes besides its tensors' data); return long sequences as tensors")

    def charge_tensor(self, tensor: torch.Tensor, where: str) -> None:
        self.tensors -= 1
        if self.tensors < 0:
            raise VocabularyError(f"{where}: more than {MAX_TENSORS} tensors in one message; "
                                  "stack them into fewer tensors")
        self.tensor_bytes -= tensor.numel() * tensor.element_size()
        if self.tensor_bytes < 0:
            raise VocabularyError(f"{where}: the message's tensors hold more than "
                                  f"{MAX_TENSOR_BYTES / 2**20:.0f} MiB")

    def claim_storage(self, tensor: torch.Tensor, where: str) -> None:
        storage = tensor.untyped_storage()
        if storage.nbytes():
            key = (storage.device, storage.data_ptr())
            if key in self.storages:
                raise VocabularyError(f"{where}: a tensor shares its storage with another tensor "
                                      "of the message")
            self.storages.add(key)


def _walk(value: Any, where: str, depth: int, budget: _Budget, convert: bool) -> Any:
    if depth > MAX_DEPTH:
        raise VocabularyError(f"{where}: nested deeper than {MAX_DEPTH} levels (a cycle?)")
    kind = type(value)
    if kind is torch.Tensor:
        if value.layout is not torch.strided:
            raise VocabularyError(f"{where}: a {value.layout} tensor is not allowed; "
                                  "return a dense tensor (x.to_dense())")
        if value.dtype not in _DTYPE_NAMES:
            raise VocabularyError(f"{where}: a tensor of dtype {value.dtype} cannot cross the sandbox boundary; "
                                  "convert it (x.float(), x.long())")
        if value.device.type not in ("cpu", "cuda"):
            raise VocabularyError(f"{where}: a tensor on {value.device} cannot cross the sandbox boundary; "
                                  "move it to the CPU (x.cpu())")
        budget.charge(value, where)
        budget.charge_tensor(value, where)  # before the copy, which could be the large part
        tensor = _plain_tensor(value) if convert else value
        if tensor.requires_grad:  # to_wire detaches; only a tampered worker sends one
            raise VocabularyError(f"{where}: a tensor that requires grad is not allowed")
        _check_storage(tensor, where)
        budget.claim_storage(tensor, where)
        return tensor
    if convert and kind is torch.Size:
        return _walk(tuple(int(n) for n in value), where, depth, budget, convert)
    budget.charge(value, where)
    if kind in SCALAR_TYPES:
        if kind is int and value.bit_length() > MAX_INT_BITS:
            raise VocabularyError(f"{where}: an int of more than {MAX_INT_BITS} bits is not allowed; "
                                  "send it as a str")
        return value
    if kind is list or kind is tuple:
        if not convert:
            for i, item in enumerate(value):
                _walk(item, f"{where}[{i}]", depth + 1, budget, convert)
            return value
        return kind([_walk(item, f"{where}[{i}]", depth + 1, budget, convert) for i, item in enumerate(value)])
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise VocabularyError(f"{where}: dict key {_describe(key)} is not a str")
            budget.charge_skeleton(key, where)
            out[key] = _walk(item, f"{where}[{key!r}]", depth + 1, budget, convert)
        return out if convert else value
    raise VocabularyError(f"{where}: {_describe(value)} cannot cross the sandbox boundary; "
                          f"{_hint(value)}")


def _check_storage(tensor: torch.Tensor, where: str) -> None:
    """Raise unless the storage behind ``tensor`` holds exactly its elements, in order.

    What crosses is a tensor's elements, never its strides or its storage: ``to_wire``
    sends a copy of its own and ``decode`` builds each tensor from its own bytes, so
    both always pass. The check keeps that true of every value the walk accepts: a
    stride-0 or overlapping view would be a few bytes posing as a huge tensor, and a
    view into a larger storage would keep the rest alive unseen.
    """
    if not tensor.is_contiguous():
        raise VocabularyError(f"{where}: a non-contiguous tensor (shape {tuple(tensor.shape)}, strides "
                              f"{tuple(tensor.stride())}: a stride-0 or overlapping view?) is not allowed")
    if tensor.storage_offset() != 0:
        raise VocabularyError(f"{where}: a tensor that starts at offset {tensor.storage_offset()} "
                              "of its storage is not allowed")
    data_bytes = tensor.numel() * tensor.element_size()
    storage_bytes = tensor.untyped_storage().nbytes()
    if storage_bytes != data_bytes:
        raise VocabularyError(f"{where}: a tensor of {data_bytes} bytes on a storage of {storage_bytes} "
                              "bytes is not allowed")


# Upper bounds on the bytes one value takes in the skeleton (compact JSON, UTF-8),
# its comma included, not counting its items and the tensors' data. A container
# opens with a tag (``["l",``) and closes; a tensor is its tag, dtype, sizes and
# device; a float is its repr; an int of b bits has at most floor(0.30103 b) + 1 digits, and a sign.
_CONTAINER_BYTES = 8
_TENSOR_BYTES = 48  # ["T","float8_e4m3fnuz",[],"cuda:15"],
_TENSOR_BYTES_PER_DIM = 21  # a size of up to 20 digits, and a comma
_INFINITIES = (float("inf"), float("-inf"))
_JSON_STRING = json.encoder.encode_basestring  # a str as JSON writes it (ensure_ascii off), quotes included


def _skeleton_size_bound(value: Any) -> int:
    kind = type(value)
    if kind is float:  # JSON writes repr, but NaN, Infinity and -Infinity for nan, inf and -inf
        return len(float.__repr__(value)) + (6 if value in _INFINITIES else 1)
    if kind is int:
        return 3 + value.bit_length() * 30103 // 100000  # sign, digits, comma
    if kind is str:
        # exactly what JSON writes (escapes included), and a comma
        return 1 + len(_JSON_STRING(value).encode("utf-8", "surrogatepass"))
    if kind is list or kind is tuple or kind is dict:
        return _CONTAINER_BYTES
    if kind is torch.Tensor:
        return _TENSOR_BYTES + _TENSOR_BYTES_PER_DIM * value.dim()
    return 6  # null, true, false


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
    tensors: list[torch.Tensor] = []
    skeleton = _JSON_ENCODER.encode(_skeleton(value, tensors)).encode("utf-8", "surrogatepass")
    data = [tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes() for tensor in tensors]
    return b"".join([SKELETON_LENGTH.pack(len(skeleton)), skeleton, *data])


def _skeleton(value: Any, tensors: list[torch.Tensor]) -> Any:
    kind = type(value)
    if kind is torch.Tensor:
        tensors.append(value)
        device = value.device
        return ["T", _DTYPE_NAMES[value.dtype], list(value.shape),
                "cpu" if device.type == "cpu" else f"cuda:{device.index or 0}"]
    if kind is list:
        return ["l", *[_skeleton(item, tensors) for item in value]]
    if kind is tuple:
        return ["t", *[_skeleton(item, tensors) for item in value]]
    if kind is dict:
        out = ["d"]
        for key, item in value.items():
            out += (key, _skeleton(item, tensors))
        return out
    if kind in SCALAR_TYPES:
        return value
    raise VocabularyError(f"{_describe(value)} cannot be encoded; send it through to_wire first")


def decode(payload: bytes, *, deadline: float | None = None) -> Any:
    """Rebuild a value from bytes sent by the other side, trusting nothing in them.

    Raises ``ProtocolError`` when the bytes are not a payload of this format within
    the limits, ``VocabularyError`` when they are but hold a value outside the
    vocabulary or its limits, and ``TimeoutError`` when ``deadline`` (a
    ``time.monotonic()`` value) has passed by the time the value is decoded.
    """
    if len(payload) < SKELETON_LENGTH.size:
        raise ProtocolError(f"a payload of {len(payload)} bytes is too short to hold a skeleton length")
    (length,) = SKELETON_LENGTH.unpack_from(payload)
    if length > MAX_SKELETON_BYTES:
        raise ProtocolError(f"the skeleton takes {length} bytes, over the limit of {MAX_SKELETON_BYTES}")
    data_at = SKELETON_LENGTH.size + length
    if data_at > len(payload):
        raise ProtocolError(f"the skeleton of {length} bytes runs past the end of a {len(payload)}-byte payload")
    try:
        skeleton = _JSON_DECODER.decode(payload[SKELETON_LENGTH.size:data_at].decode("utf-8", "surrogatepass"))
    except Exception as exc:  # UnicodeDecodeError, JSONDecodeError, RecursionError, ValueError (long ints)
        raise ProtocolError(f"undecodable skeleton ({type(exc).__name__}: {str(exc)[:300]})") from None
    data = _Data(memoryview(payload), data_at)
    value = _rebuild(skeleton, "value", 0, data)
    if data.at != len(payload):
        raise ProtocolError(f"{len(payload) - data.at} bytes follow the last tensor's data")
    check_vocabulary(value)
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError("decoding the payload ended after the deadline")
    return value


class _Data:
    """The data section of a payload, cut into tensors in order."""

    def __init__(self, view: memoryview, at: int) -> None:
        self.view, self.at = view, at
        self.tensor_bytes = MAX_TENSOR_BYTES

    def take(self, nbytes: int, where: str) -> memoryview:
        self.tensor_bytes -= nbytes
        if self.tensor_bytes < 0:
            raise VocabularyError(f"{where}: the message's tensors hold more than "
                                  f"{MAX_TENSOR_BYTES / 2**20:.0f} MiB")
        if self.at + nbytes > len(self.view):
            raise ProtocolError(f"{where}: a tensor of {nbytes} bytes, but only {len(self.view) - self.at} "
                                "bytes of data are left")
        chunk = self.view[self.at:self.at + nbytes]
        self.at += nbytes
        return chunk


def _rebuild(node: Any, where: str, depth: int, data: _Data) -> Any:
    """The value a skeleton node stands for (``check_vocabulary`` checks it after)."""
    if depth > MAX_DEPTH:
        raise VocabularyError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    kind = type(node)
    if kind is not list:
        if kind is dict:
            raise ProtocolError(f"{where}: a JSON object stands for no value (a dict is [\"d\", ...])")
        return node  # None, bool, int, float, str: what json.loads builds
    tag = node[0] if node else None
    if tag == "l":
        return [_rebuild(item, f"{where}[{i}]", depth + 1, data) for i, item in enumerate(node[1:])]
    if tag == "t":
        return tuple(_rebuild(item, f"{where}[{i}]", depth + 1, data) for i, item in enumerate(node[1:]))
    if tag == "d":
        if len(node) % 2 != 1:
            raise ProtocolError(f"{where}: a dict with a key but no value")
        out = {}
        for at in range(1, len(node), 2):
            key = node[at]
            if type(key) is not str:
                raise VocabularyError(f"{where}: dict key {_describe(key)} is not a str")
            out[key] = _rebuild(node[at + 1], f"{where}[{key!r}]", depth + 1, data)
        return out
    if tag == "T":
        return _rebuild_tensor(node, where, data)
    raise ProtocolError(f"{where}: a JSON array without a known tag (l, t, d or T) stands for no value")


def _rebuild_tensor(node: list, where: str, data: _Data) -> torch.Tensor:
    if len(node) != 4 or type(node[1]) is not str or type(node[2]) is not list or type(node[3]) is not str:
        raise ProtocolError(f"{where}: a tensor is [\"T\", dtype, [sizes], device]")
    _, dtype_name, sizes, device = node
    dtype = DTYPES.get(dtype_name)
    if dtype is None:
        raise VocabularyError(f"{where}: a tensor of dtype {dtype_name[:40]!r} cannot cross the sandbox boundary")
    if len(sizes) > MAX_DIMS or any(type(size) is not int or size < 0 for size in sizes):
        raise ProtocolError(f"{where}: a tensor's sizes must be at most {MAX_DIMS} ints, none negative")
    if not _DEVICE.fullmatch(device):
        raise ProtocolError(f"{where}: a tensor on {device[:40]!r}; only cpu and cuda[:N] are known")
    nbytes = 0 if 0 in sizes else dtype.itemsize
    for size in sizes:  # checked as it grows: a product of 64 sizes need not be computed whole
        nbytes *= size
        if nbytes > MAX_TENSOR_BYTES:
            break
    chunk = data.take(nbytes, where)
    if nbytes == 0:
        tensor = torch.empty(sizes, dtype=dtype)
    else:
        raw = torch.frombuffer(bytearray(chunk), dtype=torch.uint8)  # a copy the tensor owns
        # A bool is one byte that must be 0 or 1; any other byte becomes True.
        tensor = (raw != 0) if dtype is torch.bool else raw.view(dtype)
        tensor = tensor.reshape(sizes)
    if device != "cpu":
        try:
            tensor = tensor.to(device)
        except Exception as exc:  # no CUDA here, or no such device
            raise ProtocolError(f"{where}: a tensor on {device} cannot be placed here "
                                f"({type(exc).__name__}: {str(exc)[:200]})") from None
    return tensor


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
