"""A small reader for R's XDR serialization format and lazy-load databases.

Only what a data package needs is supported: NULL, symbols, pairlists, strings,
logical/integer/double vectors and generic lists, each with attributes.  Other
types (closures, environments, ALTREP, ...) raise NotImplementedError instead of
being misread.  The format is defined by R's src/main/serialize.c; a lazy-load
database (name.rdx + name.rdb) is described in R's src/main/lazyload.c and the
R Internals manual.
"""
import bz2
import lzma
import struct
import zlib

# SEXP type codes (Rinternals.h) and the pseudo-types used only in serialized data.
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP = 255, 254

# Bits of the flags word that precedes every item.
HAS_ATTR, HAS_TAG = 1 << 9, 1 << 10
# CHARSXP encoding bits, stored in the "levels" field (flags >> 12).
LATIN1_MASK, BYTES_MASK = 1 << 2, 1 << 1

NA_INTEGER = -(2**31)  # also NA for logicals


class RVector(list):
    """An R vector (or pairlist) as a Python list, with its attributes alongside."""

    def __init__(self, items=(), attributes=None):
        super().__init__(items)
        self.attributes = attributes or {}

    @property
    def names(self):
        return self.attributes.get("names")

    def as_dict(self):
        """Name -> element, for a named list."""
        if self.names is None:
            raise ValueError("vector has no names attribute")
        return dict(zip(self.names, self, strict=True))


class RPairlist(RVector):
    """A pairlist: like a list, but each element may carry a tag (a name)."""

    def __init__(self, items=(), tags=(), attributes=None):
        super().__init__(items, attributes)
        self.tags = list(tags)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0
        self.refs = []  # symbols (and environments) can be back-referenced by index

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated R serialization")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def length(self) -> int:
        n = self.int()
        if n == -1:  # long vector: the length follows as two 32-bit halves
            upper, lower = self.int(), self.int()
            n = (upper << 32) + lower
        return n

    def header(self) -> None:
        if self.take(2) != b"X\n":
            raise ValueError("not an XDR (binary, big-endian) R serialization")
        version = self.int()
        self.int()  # R version that wrote it
        self.int()  # oldest R version that can read it
        if version == 3:
            self.take(self.int())  # name of the writer's native encoding
        elif version != 2:
            raise NotImplementedError(f"serialization format version {version}")

    def item(self):
        flags = self.int()
        sexptype = flags & 0xFF
        has_attr = bool(flags & HAS_ATTR)

        if sexptype == NILVALUE_SXP:
            return None
        if sexptype == REFSXP:
            index = flags >> 8 or self.int()  # 1-based; 0 means "stored in the next int"
            return self.refs[index - 1]
        if sexptype == SYMSXP:
            symbol = self.item()  # the symbol's name, a CHARSXP
            self.refs.append(symbol)
            return symbol
        if sexptype == LISTSXP:
            return self.pairlist(flags)
        if sexptype == CHARSXP:
            return self.charsxp(flags)

        if sexptype in (LGLSXP, INTSXP):
            n = self.length()
            values = [None if v == NA_INTEGER else v
                      for v in struct.unpack(f">{n}i", self.take(4 * n))]
            if sexptype == LGLSXP:
                values = [None if v is None else bool(v) for v in values]
        elif sexptype == REALSXP:
            n = self.length()
            values = list(struct.unpack(f">{n}d", self.take(8 * n)))  # NA stays a NaN
        elif sexptype in (STRSXP, VECSXP):
            values = [self.item() for _ in range(self.length())]
        else:
            raise NotImplementedError(f"SEXP type {sexptype} is not supported")
        attributes = self.attributes() if has_attr else None
        return RVector(values, attributes)

    def attributes(self) -> dict:
        """Attributes are stored as a tagged pairlist: tag = attribute name."""
        pairs = self.item()
        if not isinstance(pairs, RPairlist):
            raise ValueError("malformed attribute list")
        return dict(zip(pairs.tags, pairs, strict=True))

    def pairlist(self, flags: int) -> RPairlist:
        # A pairlist is a chain of cells (attributes?, tag?, CAR, CDR); the CDR of
        # the last cell is NULL.  Walk it iteratively so long lists cannot
        # exhaust Python's recursion limit.
        values, tags, attributes = [], [], None
        while True:
            if flags & HAS_ATTR:
                cell_attributes = self.attributes()
                attributes = attributes or cell_attributes  # only the head's matter
            tags.append(self.item() if flags & HAS_TAG else None)
            values.append(self.item())
            flags = self.int()
            if flags & 0xFF != LISTSXP:
                self.pos -= 4  # not another cell: let item() read the tail
                tail = self.item()
                if tail is not None:
                    raise NotImplementedError("dotted pairlist")
                break
        return RPairlist(values, tags, attributes)

    def charsxp(self, flags: int):
        n = self.int()
        if n == -1:
            return None  # NA_character_
        raw = self.take(n)
        levels = flags >> 12
        if levels & BYTES_MASK:
            return raw
        return raw.decode("latin-1" if levels & LATIN1_MASK else "utf-8")


def unserialize(data: bytes):
    """Decode one XDR-serialized R object (the payload of an .rds file or an .rdb block)."""
    reader = _Reader(data)
    reader.header()
    obj = reader.item()
    if reader.pos != len(data):
        raise ValueError(f"{len(data) - reader.pos} trailing bytes after the R object")
    return obj


def _inflate_block(block: bytes, compression: int) -> bytes:
    """Undo R's lazy-load block compression (R_decompress1/2/3 in serialize.c)."""
    expected = struct.unpack(">I", block[:4])[0]  # uncompressed size
    if compression == 1:
        out = zlib.decompress(block[4:])
    else:  # types 2 and 3 add a method byte: Z(lib), 2 (bzip2), X (xz), 0 (stored)
        method, payload = block[4:5], block[5:]
        inflate = {b"Z": zlib.decompress, b"2": bz2.decompress,
                   b"X": lzma.decompress, b"0": bytes}.get(method)
        if inflate is None:
            raise ValueError(f"unknown block compression method {method!r}")
        out = inflate(payload)
    if len(out) != expected:
        raise ValueError(f"block inflated to {len(out)} bytes, header says {expected}")
    return out


def read_lazyload(rdx: bytes, rdb: bytes) -> dict:
    """Return {name: R object} for every variable in a lazy-load database.

    The .rdx is a compressed serialized list(variables, references, compressed);
    each variable maps to an integer (offset, length) locating its block in .rdb.
    """
    index = unserialize(zlib.decompress(rdx, wbits=47)).as_dict()  # 47: gzip or zlib header
    compression = index["compressed"][0]
    compression = int(compression) if compression is not None else 0
    if compression == 0:
        raise NotImplementedError("uncompressed lazy-load databases")
    objects = {}
    for name, (offset, length) in index["variables"].as_dict().items():
        block = rdb[offset:offset + length]
        objects[name] = unserialize(_inflate_block(block, compression))
    return objects
