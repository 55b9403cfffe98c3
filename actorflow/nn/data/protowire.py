"""The protobuf wire format of OneFlow's ``OFRecord`` message, read and written by hand (no
protobuf dependency).

The schema (OneFlow's ``record.proto``, proto2)::

    message BytesList  { repeated bytes  value = 1; }
    message FloatList  { repeated float  value = 1 [packed = true]; }
    message DoubleList { repeated double value = 1 [packed = true]; }
    message Int32List  { repeated int32  value = 1 [packed = true]; }
    message Int64List  { repeated int64  value = 1 [packed = true]; }
    message Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   DoubleList double_list = 3; Int32List int32_list = 4;
                                   Int64List int64_list = 5; } }
    message OFRecord { map<string, Feature> feature = 1; }

A map field is a repeated entry message ``{string key = 1; Feature value = 2;}``. The decoder
accepts what any conforming writer may produce: packed and unpacked repeated scalars, fields in
any order, unknown fields (skipped), a later ``kind`` replacing an earlier one.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Feature", "encode_record", "decode_record", "KINDS"]

# field number of each Feature kind, and the NumPy type of its values (None: bytes)
KINDS = {"bytes_list": (1, None), "float_list": (2, np.dtype("<f4")),
         "double_list": (3, np.dtype("<f8")), "int32_list": (4, np.dtype("<i4")),
         "int64_list": (5, np.dtype("<i8"))}
_KIND_OF_FIELD = {num: name for name, (num, _) in KINDS.items()}
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class Feature(NamedTuple):
    """One feature of a record: ``kind`` (a key of ``KINDS``) and ``value``, a list of
    ``bytes`` for ``bytes_list``, else a 1-D NumPy array of the kind's type."""

    kind: str
    value: object

    @staticmethod
    def of(value) -> "Feature":
        """The feature holding ``value``: ``bytes`` / ``str`` (one bytes value), a list of
        them, or numbers (a NumPy array or sequence: float32 -> float_list, float64 ->
        double_list, int32 -> int32_list, other integers and bools -> int64_list)."""
        if isinstance(value, Feature):
            return value
        if isinstance(value, (bytes, bytearray, str)):
            value = [value]
        if isinstance(value, (list, tuple)) and value and all(
                isinstance(v, (bytes, bytearray, str)) for v in value):
            return Feature("bytes_list", [v.encode() if isinstance(v, str) else bytes(v)
                                          for v in value])
        arr = np.asarray(value)
        if arr.dtype == np.float32:
            kind = "float_list"
        elif arr.dtype.kind == "f":
            kind = "double_list"
        elif arr.dtype == np.int32:
            kind = "int32_list"
        elif arr.dtype.kind in "iub":
            kind = "int64_list"
        else:
            raise TypeError(f"OFRecord Feature: cannot store values of dtype {arr.dtype} "
                            f"(bytes, float32, float64, int32 or int64)")
        return Feature(kind, arr.reshape(-1).astype(KINDS[kind][1]))


# ---- writing ---------------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    """Base-128 varint of a non-negative int below 2**64."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _len_field(field: int, payload: bytes) -> bytes:
    return _tag(field, _LEN) + _varint(len(payload)) + payload


def _encode_varints(values: np.ndarray) -> bytes:
    # int32 and int64 are varints of the two's complement 64-bit value
    return b"".join(_varint(int(v) & 0xFFFFFFFFFFFFFFFF) for v in values.astype(np.int64))


def _encode_feature(f: Feature) -> bytes:
    if f.kind not in KINDS:
        raise ValueError(f"OFRecord Feature: unknown kind {f.kind!r}; one of {sorted(KINDS)}")
    num, np_type = KINDS[f.kind]
    if np_type is None:
        body = b"".join(_len_field(1, bytes(v)) for v in f.value)
    else:
        values = np.asarray(f.value).reshape(-1)
        if len(values) == 0:
            body = b""
        elif f.kind in ("float_list", "double_list"):
            body = _len_field(1, values.astype(np_type).tobytes())
        else:
            body = _len_field(1, _encode_varints(values.astype(np_type)))
    return _len_field(num, body)


def encode_record(features: dict) -> bytes:
    """The serialized ``OFRecord`` of ``features`` (name -> ``Feature`` or a value
    ``Feature.of`` accepts), entries in the dict's order."""
    out = []
    for name, value in features.items():
        entry = _len_field(1, str(name).encode()) + _len_field(2, _encode_feature(
            Feature.of(value)))
        out.append(_len_field(1, entry))
    return b"".join(out)


# ---- reading ---------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int = 0, end: int | None = None):
        self.buf, self.pos, self.end = buf, pos, len(buf) if end is None else end

    def varint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= self.end:
                raise ValueError("OFRecord: truncated varint")
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 63:
                raise ValueError("OFRecord: varint longer than 10 bytes")

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > self.end:
            raise ValueError(f"OFRecord: field of {n} bytes runs past the message's end")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def fields(self):
        """(field number, wire type, value) per field: an int for varints, a memoryview of the
        bytes for the other wire types."""
        while self.pos < self.end:
            key = self.varint()
            field, wire = key >> 3, key & 7
            if wire == _VARINT:
                yield field, wire, self.varint()
            elif wire == _I64:
                yield field, wire, self.take(8)
            elif wire == _LEN:
                yield field, wire, self.take(self.varint())
            elif wire == _I32:
                yield field, wire, self.take(4)
            else:
                raise ValueError(f"OFRecord: unsupported wire type {wire} (field {field})")


def _signed(n: int, bits: int) -> int:
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _decode_list(kind: str, body: memoryview):
    np_type = KINDS[kind][1]
    if np_type is None:
        return [bytes(v) for f, w, v in _Reader(body).fields() if f == 1 and w == _LEN]
    parts = []
    for f, w, v in _Reader(body).fields():
        if f != 1:
            continue
        if kind in ("float_list", "double_list"):
            if w in (_I32, _I64):          # one unpacked value
                parts.append(np.frombuffer(v, np_type))
            elif w == _LEN:               # packed
                if len(v) % np_type.itemsize:
                    raise ValueError(f"OFRecord: packed {kind} of {len(v)} bytes")
                parts.append(np.frombuffer(v, np_type))
        else:
            bits = 32 if kind == "int32_list" else 64
            if w == _VARINT:
                parts.append(np.array([_signed(v, bits)], np_type))
            elif w == _LEN:
                r = _Reader(v)
                vals = []
                while r.pos < r.end:
                    vals.append(_signed(r.varint(), bits))
                parts.append(np.array(vals, np_type))
    if not parts:
        return np.zeros(0, np_type)
    return np.concatenate(parts).astype(np_type.newbyteorder("="))


def _decode_feature(body: memoryview) -> Feature:
    feature = None
    for f, w, v in _Reader(body).fields():
        kind = _KIND_OF_FIELD.get(f)
        if kind is not None and w == _LEN:
            feature = Feature(kind, _decode_list(kind, v))  # oneof: the last one wins
    if feature is None:
        raise ValueError("OFRecord: a Feature with no kind set")
    return feature


def decode_record(data) -> dict:
    """The features (name -> ``Feature``) of one serialized ``OFRecord``; for a key repeated
    in the map, the last entry wins (protobuf's rule)."""
    buf = memoryview(bytes(data) if not isinstance(data, (bytes, memoryview)) else data)
    out = {}
    for f, w, v in _Reader(buf).fields():
        if f != 1 or w != _LEN:
            continue
        key, value = "", None
        for ef, ew, ev in _Reader(v).fields():
            if ef == 1 and ew == _LEN:
                key = bytes(ev).decode()
            elif ef == 2 and ew == _LEN:
                value = _decode_feature(ev)
        if value is None:
            raise ValueError(f"OFRecord: the map entry {key!r} has no Feature")
        out[key] = value
    return out
