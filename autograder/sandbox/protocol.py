"""Wire format between the grader and a sandboxed worker.

A message is one *frame* on a pipe::

    b"AGSB" | payload length (8 bytes, big endian) | payload

and the payload is the ``torch.save`` serialisation of a value from a small
vocabulary. Both sides decode with ``torch.load(..., weights_only=True)``, which only
rebuilds tensors and builtin containers and scalars, so no pickled object from the
other side ever gets to run code; a walk over the decoded value then rejects what
``weights_only`` still admits but the grader has no use for (``nn.Parameter``,
``torch.dtype``, sets, subclasses of builtins, ...).

The vocabulary, within the limits below:

* ``torch.Tensor``, exactly that type, strided layout (no subclass, no Parameter),
  contiguous and owning its storage: no stride-0 or overlapping view, no view into a
  larger storage, no storage shared with another tensor of the message, no autograd
  (``requires_grad`` off);
* ``None``, ``bool``, ``int``, ``float``, ``str``, exactly those types;
* ``list``, ``tuple``, and ``dict`` with ``str`` keys, of the above.

Limits
------

``decode`` is bounded by what it *unpacks*, not only by what it receives: a
hostile worker controls every byte of its replies (it can replace this module's
encoder), and a small frame must not become a large or slow value in the grader.
Before ``torch.load`` sees a payload, ``check_container`` reads its zip directory
with ``zipfile`` (after checking the end records, so that ``zipfile`` and torch's
own reader see the same directory); after loading, the vocabulary walk charges
every value to a per-message budget. The sender runs the same walk in ``to_wire``,
so an honest worker refuses an oversized value itself, with a message for the
student (``ValueRejected``); only a tampered worker meets the receiver's refusal,
and the grader then kills it. Largest honest message measured (of the 4,345 that
the hidden suites of ``tests/grading`` send both ways): 1.4 MB, 80 zip records (74
tensors), a 9.2 KB pickle, 207 items; a cell's source travels in the pickle too
(largest solution cell: 5.7 KB).

* ``MAX_FRAME_BYTES`` = 256 MiB: bytes received in one frame. A reply is a test's
  worth of tensors, not a checkpoint.
* Stored records only: every zip record ``ZIP_STORED`` (as ``torch.save`` writes
  them), its size equal to its stored size, all records together no larger than
  the payload. What ``torch.load`` allocates is then what arrived; a deflated
  record inflates up to about 1000-fold.
* ``MAX_ZIP_ENTRIES`` = 1,040 records (``MAX_TENSORS`` + 16): ``torch.save`` writes
  6 fixed records and one per tensor. ``MAX_DIRECTORY_BYTES`` = 266,240 (256 bytes
  a record; torch's take about 65). Both bound the directory parse and the
  per-record work of ``torch.load``.
* ``MAX_PICKLE_BYTES`` = 512 KiB: the pickle record, and every other record that
  is not tensor data. The weights-only unpickler is pure Python, about 1 us and
  up to 80 bytes of memory per opcode byte, so this cap is what bounds decoding
  time: the worst case measured on a 2-core machine, empty lists filling the cap,
  decodes (and is refused) in 0.5 s and 40 MB; small ints filling it, 0.2 s. The
  walk charges each value an upper bound of its pickled size to the same cap.
* ``MAX_ITEMS`` = 524,288 values (``MAX_PICKLE_BYTES``): every value is at least
  one opcode byte, so the pickle cap admits no more; this bounds the walk.
* ``MAX_TENSORS`` = 1,024 tensors, one zip record each.
* ``MAX_TENSOR_BYTES`` = 256 MiB: ``numel * element_size`` summed over a message's
  tensors, counting a tensor each time it appears; no more than a frame carries.
  Each tensor must also be contiguous and own exactly its storage (offset 0,
  storage bytes = its bytes, no storage shared): a stride-0 or overlapping view
  would otherwise turn a few received bytes into a huge tensor in the grader.
* ``MAX_DEPTH`` = 32 levels of nesting (cycles, recursion).

``decode(..., deadline=...)`` raises ``TimeoutError`` when decoding ends after the
request's deadline; the caps above are what keep the time in between short.
"""
from __future__ import annotations

import io
import struct
import time
import zipfile
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
MAX_PICKLE_BYTES = 512 * 2**10  # worst case about 2 s to decode on a 2-core machine; honest <= 10 KB
MAX_ITEMS = MAX_PICKLE_BYTES  # every item is at least one opcode byte of the pickle
MAX_TENSORS = 1024
MAX_TENSOR_BYTES = MAX_FRAME_BYTES
# torch.save's zip archive: a few fixed records, then one record per tensor storage.
FIXED_RECORDS = 16  # torch 2.x writes 6 (data.pkl, version, byteorder, ...): room to grow
MAX_ZIP_ENTRIES = MAX_TENSORS + FIXED_RECORDS
MAX_DIRECTORY_BYTES = 256 * MAX_ZIP_ENTRIES

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
    attributes, resolves lazy conjugate/negative views, and keeps ``torch.save`` from
    shipping the whole storage behind a small view. ``torch.Size`` becomes a tuple,
    the one lossless conversion made on the sender's behalf. The copy is checked
    against the same limits as a received value, so what passes here also decodes
    on the other side.
    """
    return _walk(value, where, depth=0, budget=_Budget(reserve_envelope=True), convert=True)


# What to_wire keeps free for the envelope the worker wraps around a checked value
# ({"id": ..., "ok": True, "value": ...}, about 40 bytes of pickle and 3 items), so
# that the receiver, which checks the whole message, accepts it too.
ENVELOPE_ITEMS = 16
ENVELOPE_PICKLE_BYTES = 1024


class _Budget:
    """What one message may still hold; the walk charges every value it visits."""

    def __init__(self, *, reserve_envelope: bool = False) -> None:
        self.items = MAX_ITEMS - (ENVELOPE_ITEMS if reserve_envelope else 0)
        self.pickle_bytes = MAX_PICKLE_BYTES - (ENVELOPE_PICKLE_BYTES if reserve_envelope else 0)
        self.tensors = MAX_TENSORS
        self.tensor_bytes = MAX_TENSOR_BYTES
        self.storages: set[tuple[torch.device, int]] = set()

    def charge(self, value: Any, where: str) -> None:
        self.items -= 1
        if self.items < 0:
            raise VocabularyError(f"{where}: more than {MAX_ITEMS} items in one message")
        self.charge_pickle(value, where)

    def charge_pickle(self, value: Any, where: str) -> None:
        self.pickle_bytes -= _pickled_size_bound(value)
        if self.pickle_bytes < 0:
            raise VocabularyError(f"{where}: the message is too long to send (more than {MAX_PICKLE_BYTES} "
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
            budget.charge_pickle(key, where)
            out[key] = _walk(item, f"{where}[{key!r}]", depth + 1, budget, convert)
        return out if convert else value
    raise VocabularyError(f"{where}: {_describe(value)} cannot cross the sandbox boundary; "
                          f"{_hint(value)}")


def _check_storage(tensor: torch.Tensor, where: str) -> None:
    """Raise unless the storage behind ``tensor`` holds exactly its elements, in order.

    A decoded tensor is built from the sender's strides and storage: a stride-0 or
    overlapping view would turn a few bytes into a huge tensor the moment the grader
    computes with it, and a view into a larger storage would keep the rest alive
    unseen. ``to_wire``'s copies always pass.
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


# Upper bounds on what torch.save's pickle (protocol 2) spends on one value, not
# counting its items and the tensors' data: opcode and argument, plus a memo entry
# (LONG_BINPUT, 5 bytes) for what the pickler memoizes. A tensor is a call of
# torch._utils._rebuild_tensor_v2 with a storage reference (dtype class, key,
# device, size), the offset, the shape, the strides and two flags; the names of
# the globals are written once per message, and the bound includes them.
_TENSOR_PICKLE_BYTES = 256
_TENSOR_PICKLE_BYTES_PER_DIM = 2 * 14  # an int in the shape and one in the strides


def _pickled_size_bound(value: Any) -> int:
    kind = type(value)
    if kind is float:
        return 9  # BINFLOAT
    if kind is int:
        return 6 + value.bit_length() // 8  # BININT*, or LONG1/LONG4 with the bytes
    if kind is str:
        return 10 + len(value.encode("utf-8", "surrogatepass"))  # BINUNICODE, memo
    if kind is list or kind is tuple or kind is dict:
        return 8 + 2 * (len(value) // 1000 + 1)  # start, memo, MARK + APPENDS per 1000
    if kind is torch.Tensor:
        return _TENSOR_PICKLE_BYTES + _TENSOR_PICKLE_BYTES_PER_DIM * value.dim()
    return 1  # None, True, False


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


def decode(payload: bytes, *, map_location: Any = None, deadline: float | None = None) -> Any:
    """Rebuild a value from bytes sent by the other side, trusting nothing in them.

    Raises ``ProtocolError`` when the bytes are not a weights-only ``torch.save``
    payload within the limits, ``VocabularyError`` when they are but hold a value
    outside the vocabulary or its limits, and ``TimeoutError`` when ``deadline`` (a
    ``time.monotonic()`` value) has passed by the time the value is decoded.
    """
    check_container(payload)
    try:
        value = torch.load(io.BytesIO(payload), weights_only=True, map_location=map_location)
    except Exception as exc:  # every failure mode of a corrupt or hostile payload
        raise ProtocolError(f"undecodable payload ({type(exc).__name__}: {str(exc)[:300]})") from None
    check_vocabulary(value)
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError("decoding the payload ended after the deadline")
    return value


# --------------------------------------------------------------------- containers

ZIP_MAGIC = b"PK\x03\x04"  # what torch.load looks for; anything else it unpickles as a legacy file
_END = struct.Struct("<4s4H2LH")  # end of central directory record
_END_MAGIC = b"PK\x05\x06"
_END64_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator
_END64_LOCATOR_MAGIC = b"PK\x06\x07"
_END64 = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record
_END64_MAGIC = b"PK\x06\x06"


def check_container(payload: bytes) -> None:
    """Raise ``ProtocolError`` unless ``payload`` is a zip archive that ``torch.load``
    can unpack within the limits: at most ``MAX_ZIP_ENTRIES`` records, all stored
    uncompressed and no larger together than the payload, and no record but tensor
    data over ``MAX_PICKLE_BYTES``. Nothing in it is unpacked."""
    entries = _check_directory_end(payload)
    records = _read_directory(payload)
    if len(records) != entries:
        raise ProtocolError(f"the zip directory holds {len(records)} records, its end record says {entries}")
    total = 0
    for record in records:
        _check_record(record)
        total += record.file_size
    if total > len(payload):
        raise ProtocolError(f"the zip records add up to {total} bytes in a payload of {len(payload)}")


def _check_directory_end(payload: bytes) -> int:
    """Number of records announced by the end of the archive, once it is shown to be
    the one layout that ``zipfile`` and torch's reader (miniz) read alike: the end
    record last, without a comment, the zip64 records (torch writes them) agreeing
    with it, and the directory right before them. Bounds the directory too, so that
    reading it costs little."""
    if not payload.startswith(ZIP_MAGIC):
        raise ProtocolError("the payload is not a zip archive (torch.save's format)")
    end_at = len(payload) - _END.size
    magic, disk, directory_disk, disk_entries, entries, size, offset, comment = (
        _END.unpack_from(payload, end_at) if end_at >= 0 else (b"",) + (0,) * 7)
    if magic != _END_MAGIC or comment:
        raise ProtocolError("the zip archive does not end with its directory record")
    if disk or directory_disk or disk_entries != entries:
        raise ProtocolError("a zip archive in several parts is not allowed")
    directory_end = end_at
    locator_at = end_at - _END64_LOCATOR.size
    if locator_at >= 0 and payload.startswith(_END64_LOCATOR_MAGIC, locator_at):
        directory_end = _check_zip64_end(payload, locator_at, entries, size, offset)
    if entries > MAX_ZIP_ENTRIES:
        raise ProtocolError(f"the zip archive holds {entries} records, over the limit of {MAX_ZIP_ENTRIES}")
    if size > MAX_DIRECTORY_BYTES:
        raise ProtocolError(f"the zip directory takes {size} bytes, over the limit of {MAX_DIRECTORY_BYTES}")
    if offset + size != directory_end:
        raise ProtocolError("the zip directory is not where the end record says")
    return entries


def _check_zip64_end(payload: bytes, locator_at: int, entries: int, size: int, offset: int) -> int:
    """Where the zip64 end record starts, once it agrees with the plain end record
    (``zipfile`` takes its values from the zip64 record, miniz from the plain one)."""
    _, disk, record_at, disks = _END64_LOCATOR.unpack_from(payload, locator_at)
    expected_at = locator_at - _END64.size  # where zipfile reads it, whatever the locator says
    if disk or disks != 1 or record_at != expected_at or expected_at < 0:
        raise ProtocolError("the zip64 end record is not where its locator says")
    magic, _, _, _, disk, directory_disk, *directory = _END64.unpack_from(payload, record_at)
    if magic != _END64_MAGIC or disk or directory_disk or directory != [entries, entries, size, offset]:
        raise ProtocolError("the zip64 end record disagrees with the end record")
    return record_at


def _read_directory(payload: bytes) -> list[zipfile.ZipInfo]:
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            return archive.infolist()
    except Exception as exc:  # BadZipFile, NotImplementedError, struct.error, UnicodeDecodeError, ...
        raise ProtocolError(f"unreadable zip archive ({type(exc).__name__}: {str(exc)[:200]})") from None


def _check_record(record: zipfile.ZipInfo) -> None:
    name = record.filename[:100]
    if record.compress_type != zipfile.ZIP_STORED:
        raise ProtocolError(f"zip record {name!r} is compressed (method {record.compress_type}); "
                            "torch.save stores every record as is")
    if record.file_size != record.compress_size:
        raise ProtocolError(f"zip record {name!r} claims {record.file_size} bytes but holds "
                            f"{record.compress_size}")
    if record.file_size > MAX_PICKLE_BYTES and not _is_tensor_data(record.filename):
        raise ProtocolError(f"zip record {name!r} holds {record.file_size} bytes, over the limit of "
                            f"{MAX_PICKLE_BYTES} for the pickle and every other record but tensor data")


def _is_tensor_data(name: str) -> bool:
    """``<archive>/data/<key>``, where ``torch.load`` reads storages. Compared without
    case, like torch's reader looks records up."""
    parts = name.lower().split("/")
    return len(parts) == 3 and parts[1] == "data"


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
