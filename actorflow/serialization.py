"""``save`` / ``load``: checkpoints in the safetensors file layout, with no pickle anywhere.

File layout (the safetensors format): 8 bytes little-endian ``N``, then ``N`` bytes of JSON
header, then the tensors' raw little-endian bytes. The header maps each tensor name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the data section) and holds
string metadata under ``"__metadata__"``. actorflow stores the saved object's structure (dicts,
lists, tuples, numbers, strings, None, references to tensors) as JSON in the metadata entry
``"actorflow.structure"``; loading only parses JSON and copies bytes, so it can't run code.
A flat dict of tensors keeps its keys as tensor names, so other safetensors readers see a plain
state dict; files written by other tools load as an ``OrderedDict`` of tensors.
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import re
import secrets
import socket

import numpy as np

from actorflow.dispatch.global_tensor import from_full
from actorflow.process import groups
from actorflow.process.world import world
from actorflow.framework import dtype as dt
from actorflow.framework.device import as_device
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.serialization_torch import ZIP_MAGIC, load_torch_zip
from actorflow.tensor import Tensor

_STRUCT_KEY = "actorflow.structure"
DIR_FILE = "checkpoint.safetensors"  # the file a save_as_external_data directory holds
_FORMAT_VERSION = "1"
MAX_DEPTH = 100   # containers nested in a saved object (save refuses deeper, load rejects it)
_MAX_NDIM = 64    # dimensions of a stored tensor (NumPy's own limit may be lower)
_MAX_BYTES = 2 ** 63 - 1

_TO_ST = {dt.float16: "F16", dt.bfloat16: "BF16", dt.float32: "F32", dt.float64: "F64",
          dt.int8: "I8", dt.uint8: "U8", dt.int16: "I16", dt.int32: "I32", dt.int64: "I64",
          dt.bool_: "BOOL"}
# complex dtypes: safetensors names complex64 "C64"; complex128 takes the same pattern ("C128")
_TO_ST.update({dt.complex64: "C64", dt.complex128: "C128"})
_FROM_ST = {v: k for k, v in _TO_ST.items()}
# safetensors dtypes without an actorflow dtype of their own load widened to one
_WIDENED = {"U16": (np.dtype("<u2"), dt.int32), "U32": (np.dtype("<u4"), dt.int64),
            "U64": (np.dtype("<u8"), dt.int64)}


# ---- saving -----------------------------------------------------------------------------------

class _Writer:
    """Collects tensors (each stored once, however often it appears) and encodes structure."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.tensors: list[tuple[str, Tensor]] = []
        self.used: set[str] = set()

    def tensor_name(self, t: Tensor, hint: str) -> str:
        name = self.names.get(id(t))
        if name is not None:
            return name
        name = hint or "tensor"
        if name == "__metadata__" or name in self.used:
            k = 1
            while f"{name}#{k}" in self.used:
                k += 1
            name = f"{name}#{k}"
        self.used.add(name)
        self.names[id(t)] = name
        self.tensors.append((name, t))
        return name

    def encode(self, obj, path: str, depth: int = 0):
        """JSON-able form of ``obj``; tensors become references to tensor names."""
        if depth >= MAX_DEPTH and isinstance(obj, (dict, list, tuple)):
            raise ValueError(f"save: the containers at {path or '<root>'} are nested deeper than "
                             f"{MAX_DEPTH} levels (or contain themselves)")
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, Tensor):
            ref = {"@": "tensor", "name": self.tensor_name(obj, path)}
            if obj.requires_grad and obj.is_leaf and type(obj) is Tensor:
                ref["requires_grad"] = True
            return ref
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            v = float(obj)
            return v if math.isfinite(v) else {"@": "float", "value": repr(v)}
        if isinstance(obj, (np.bool_,)):
            return bool(obj)
        if isinstance(obj, dict):
            items = [[self.encode_key(k, path, depth + 1),
                      self.encode(v, _join(path, k), depth + 1)] for k, v in obj.items()]
            return {"@": "ordered_dict" if isinstance(obj, collections.OrderedDict) else "dict",
                    "items": items}
        if isinstance(obj, list):
            return [self.encode(v, _join(path, i), depth + 1) for i, v in enumerate(obj)]
        if isinstance(obj, tuple):
            return {"@": "tuple", "items": [self.encode(v, _join(path, i), depth + 1)
                                            for i, v in enumerate(obj)]}
        raise TypeError(f"save: can't save an object of type {type(obj).__name__} at "
                        f"{path or '<root>'}; supported: tensors, dict/list/tuple containers, "
                        f"numbers, strings, bools and None")

    def encode_key(self, key, path: str, depth: int):
        if isinstance(key, Tensor) or isinstance(key, (dict, list)):
            raise TypeError(f"save: dict key of type {type(key).__name__} at "
                            f"{path or '<root>'} can't be saved")
        return self.encode(key, path, depth)


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _little_endian_bytes(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.reshape(-1).view(np.uint8)


def _serialize(obj) -> tuple[bytes, list[np.ndarray]]:
    """The header bytes (length prefix included) and the data chunks, in file order."""
    w = _Writer()
    structure = w.encode(obj, "")
    header: dict = {"__metadata__": {"format": "pt", "actorflow.version": _FORMAT_VERSION,
                                     _STRUCT_KEY: json.dumps(structure, separators=(",", ":"),
                                                             allow_nan=False)}}
    chunks = []
    offset = 0
    for name, t in w.tensors:
        if t.dtype not in _TO_ST:
            raise TypeError(f"save: tensor {name!r} has dtype {t.dtype}, which can't be saved")
        data = _little_endian_bytes(t._array())
        header[name] = {"dtype": _TO_ST[t.dtype], "shape": list(t._shape),
                        "data_offsets": [offset, offset + data.size]}
        chunks.append(data)
        offset += data.size
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    return len(text).to_bytes(8, "little") + text, chunks


def save(obj, path, global_dst_rank: int | None = None,
         save_as_external_data: bool = False) -> None:
    """Save tensors, state dicts and nested dict/list/tuple containers of tensors, numbers,
    strings, bools and None to ``path`` (a file name or a writable binary file object).

    Global tensors need ``global_dst_rank``: every rank calls ``save``, each global tensor's
    logical values are gathered, and only that rank writes the file (as plain tensors of the
    logical values; ``path`` is ignored on the other ranks).

    Writing to a path is atomic: a temporary file ``.<name>.<host>.<pid>.<random>.tmp`` in the
    same directory is written, flushed to disk and renamed over ``path``. A writer killed
    before the rename leaves its temporary file behind; the next save to the same ``path``
    removes those of writers that are no longer running (never a live writer's). The file gets
    the mode new files get under the process's umask (``0o666 & ~umask``), like ``open``.
    Parameters are stored as their values; a leaf tensor that requires grad keeps that flag.
    ``save_as_external_data``: ``path`` is a directory (made if missing) and the checkpoint is
    its file ``checkpoint.safetensors``; ``load`` of the directory reads that file.
    """
    if save_as_external_data:
        if hasattr(path, "write"):
            raise TypeError("save: save_as_external_data needs a directory path, not a file")
        os.makedirs(os.fspath(path), exist_ok=True)
        path = os.path.join(os.fspath(path), DIR_FILE)
    if global_dst_rank is not None:
        obj = _gathered(obj, _check_rank("save", "global_dst_rank", global_dst_rank), {})
        if world().rank != global_dst_rank:
            return
    elif _holds_global(obj, 0):
        raise ValueError("save: the object holds global tensors; give global_dst_rank (the "
                         "rank that writes the file) and call save on every rank")
    head, chunks = _serialize(obj)
    if hasattr(path, "write"):
        path.write(head)
        for c in chunks:
            path.write(c)
        return
    # through a symlink, write its target (as torch.save, which opens the path): the rename
    # of the temporary file would otherwise replace the link itself
    path = os.path.realpath(os.fspath(path))
    directory = os.path.dirname(path)
    stem = _temp_stem(path)
    _remove_stale_temps(directory, stem)
    fd, tmp = _create_temp(directory, stem)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _check_rank(fn: str, name: str, rank) -> int:
    n = world().size
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < n:
        raise ValueError(f"{fn}: {name} must be a rank in [0, {n - 1}], got {rank!r}")
    return int(rank)


def _holds_global(obj, depth: int) -> bool:
    if isinstance(obj, Tensor):
        return obj.is_global
    if depth < MAX_DEPTH and isinstance(obj, (dict, list, tuple)):
        values = obj.values() if isinstance(obj, dict) else obj
        return any(_holds_global(v, depth + 1) for v in values)
    return False


def _gathered(obj, dst: int, memo: dict, depth: int = 0):
    """``obj`` with every global tensor replaced by a local tensor of its logical values
    (a collective over each tensor's placement: every rank walks the same structure)."""
    if isinstance(obj, Tensor):
        if not obj.is_global:
            return obj
        if id(obj) not in memo:
            arr = np.array(obj._array())
            t = Tensor._wrap(arr, obj.dtype)
            if obj.requires_grad and obj.is_leaf and type(obj) is Tensor:
                t.requires_grad = True
            memo[id(obj)] = t
        return memo[id(obj)]
    if depth >= MAX_DEPTH:
        return obj  # encode reports the nesting
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, collections.OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _gathered(v, dst, memo, depth + 1)
        return out
    if isinstance(obj, list):
        return [_gathered(v, dst, memo, depth + 1) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_gathered(v, dst, memo, depth + 1) for v in obj)
    return obj


# ---- temporary files of save ------------------------------------------------------------------

_FIELD = re.compile(r"[^A-Za-z0-9_-]")
_TEMP_TAIL = r"\.([A-Za-z0-9_-]{1,32})\.(\d{1,10})\.[0-9a-f]{16}\.tmp"  # host, pid, random


def _host() -> str:
    """This machine's name as one temp-name field: a writer on another machine sharing the
    directory can't be checked for life, so its files are never removed."""
    return _FIELD.sub("_", socket.gethostname())[:32] or "host"


def _temp_stem(path: str) -> str:
    """``.<name>``: the part of a temporary file's name that names its target (long names are
    shortened with a hash, so temporary names stay within the file-name limit)."""
    base = os.path.basename(path)
    if len(base) > 100:
        digest = hashlib.sha1(base.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        base = f"{base[:80]}~{digest}"
    return f".{base}"


def _create_temp(directory: str, stem: str) -> tuple[int, str]:
    """Create ``<stem>.<host>.<pid>.<random>.tmp`` exclusively, mode ``0o666 & ~umask``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = f"{stem}.{_host()}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        tmp = os.path.join(directory, name)
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"save: could not create a temporary file for {stem[1:]!r} in "
                          f"{directory!r}")


def _writer_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie, or one we may not signal, counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True
    return True


def _remove_stale_temps(directory: str, stem: str) -> None:
    """Remove the temporary files for this target that writers on this machine left when
    they died before renaming them (killed mid-save). Files of live writers (this process
    included), of other machines and of other targets stay."""
    if os.name != "posix":  # os.kill(pid, 0) is only a liveness probe on POSIX
        return
    pattern = re.compile(re.escape(stem) + _TEMP_TAIL)
    host, me = _host(), os.getpid()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or m.group(1) != host:
            continue
        pid = int(m.group(2))
        if pid == me or pid <= 0 or _writer_alive(pid):
            continue
        try:
            os.unlink(entry.path)
        except OSError:  # removed by another saver meanwhile, or not ours to remove
            pass


def _fsync_dir(directory: str) -> None:
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- loading ----------------------------------------------------------------------------------
# Every way a file can be malformed raises ValueError naming the file: the header and the
# structure are checked field by field, and whatever a check missed (a TypeError, an
# OverflowError, NumPy refusing a shape...) is turned into that ValueError too.

def _invalid(where: str, msg: str) -> ValueError:
    return ValueError(f"load: {where} is not a valid actorflow/safetensors file: {msg}")


def _json(text, what: str, where: str):
    try:
        return json.loads(text)
    except RecursionError:
        raise _invalid(where, f"{what} is nested too deeply") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError, UnicodeDecodeError, digit limits
        raise _invalid(where, f"{what} is not valid JSON ({e})") from None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_entry(name: str, info, size: int, where: str):
    """Validate one tensor entry of the header: (stored dtype, actorflow dtype, shape, begin,
    end)."""
    if not isinstance(info, dict):
        raise _invalid(where, f"entry {name!r} is not a JSON object")
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if isinstance(code, str) and code in _FROM_ST:
        d = _FROM_ST[code]
        stored = d.np.newbyteorder("<") if d.np.itemsize > 1 else d.np
    elif isinstance(code, str) and code in _WIDENED:
        stored, d = _WIDENED[code]
    else:
        raise _invalid(where, f"tensor {name!r} has unknown dtype {str(code)[:40]!r}")
    if not (isinstance(shape, list) and len(shape) <= _MAX_NDIM
            and all(_is_int(s) and s >= 0 for s in shape)):
        raise _invalid(where, f"tensor {name!r} has an invalid shape {str(shape)[:80]} (a list "
                              f"of at most {_MAX_NDIM} non-negative integers)")
    if math.prod(s for s in shape if s) * stored.itemsize > _MAX_BYTES:
        raise _invalid(where, f"tensor {name!r} has a shape {str(shape)[:80]} too large for "
                              f"any array")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))):
        raise _invalid(where, f"tensor {name!r} has invalid data_offsets "
                              f"{str(offsets)[:80]}")
    begin, end = offsets
    if not 0 <= begin <= end <= size:
        raise _invalid(where, f"tensor {name!r} has data_offsets {offsets} out of range for a "
                              f"data section of {size} bytes")
    need = math.prod(shape) * stored.itemsize
    if end - begin != need:
        raise _invalid(where, f"tensor {name!r}: data_offsets {offsets} hold {end - begin} "
                              f"bytes but shape {shape} of {code} needs {need}")
    return stored, d, shape, begin, end


def _check_layout(spans: list, size: int, where: str) -> None:
    """The tensors' byte ranges tile the data section exactly, as the format requires: no two
    overlap, no byte belongs to none."""
    pos, prev = 0, None
    for begin, end, name in sorted(spans):
        if begin < pos:
            raise _invalid(where, f"the data of tensors {prev!r} and {name!r} overlap")
        if begin > pos:
            raise _invalid(where, f"bytes {pos}..{begin} of the data section belong to no "
                                  f"tensor")
        pos, prev = end, name
    if pos != size:
        raise _invalid(where, f"the data section is {size} bytes but its tensors end at byte "
                              f"{pos}; the file was truncated, appended to or corrupted")


def _parse(data: bytes, where: str) -> tuple[dict, dict]:
    """Validate the file and return (tensors by name, metadata)."""
    if len(data) < 8:
        raise _invalid(where, f"the file is {len(data)} bytes long, too short for the 8-byte "
                              f"header length")
    n = int.from_bytes(data[:8], "little")
    if 8 + n > len(data):
        raise _invalid(where, f"header length {n} is beyond the file size ({len(data)} bytes); "
                              f"the file is truncated or corrupted")
    header = _json(data[8:8 + n], "the header", where)
    if not isinstance(header, dict):
        raise _invalid(where, "the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise _invalid(where, "__metadata__ is not a JSON object")
    buf = memoryview(data)[8 + n:]
    entries = {name: _check_entry(name, info, len(buf), where) for name, info in header.items()}
    _check_layout([(e[3], e[4], name) for name, e in entries.items()], len(buf), where)
    tensors = {}
    for name, (stored, d, shape, begin, _) in entries.items():
        try:
            arr = np.frombuffer(buf, dtype=stored, count=math.prod(shape), offset=begin)
            arr = arr.reshape(shape).astype(d.np, copy=True)  # native order, owns its memory
        except (ValueError, OverflowError, TypeError) as e:  # what NumPy refuses
            raise _invalid(where, f"tensor {name!r} of shape {shape}: {e}") from None
        _check_widened(name, stored, arr, d, where)
        tensors[name] = Tensor._wrap(arr, d)
    return tensors, meta


def _check_widened(name: str, stored: np.dtype, arr: np.ndarray, d: dt.dtype,
                   where: str) -> None:
    """An unsigned stored dtype loads widened to ``d`` (``arr``: the values as loaded); refuse
    a value ``d`` can't hold: a U64 above 2**63 - 1 would have wrapped to a negative int64."""
    if stored.kind != "u" or stored.itemsize < d.np.itemsize or arr.size == 0:
        return
    if int(arr.min()) < 0:
        raw = np.frombuffer(arr.tobytes(), dtype=stored.newbyteorder("="))
        top = int(raw.max())
        raise ValueError(f"load: {where}: tensor {name!r} holds the unsigned value {top}, "
                         f"beyond {d}'s largest value {np.iinfo(d.np).max} (it loads as {d}; "
                         f"actorflow has no {stored.itemsize * 8}-bit unsigned dtype)")


def _decode(node, tensors: dict, where: str, depth: int = 0):
    def bad(msg):
        return ValueError(f"load: {where}: bad structure metadata: {msg}")

    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if depth >= MAX_DEPTH and (isinstance(node, list) or (
            isinstance(node, dict) and node.get("@") not in ("tensor", "float"))):
        raise bad(f"containers nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, list):
        return [_decode(v, tensors, where, depth + 1) for v in node]
    if not isinstance(node, dict) or "@" not in node:
        raise bad(f"unexpected entry {str(node)[:80]}")
    kind = node["@"]
    if kind == "tensor":
        name = node.get("name")
        if not isinstance(name, str) or name not in tensors:
            raise bad(f"it refers to a tensor {str(name)[:80]!r} the file does not contain")
        t = tensors[name]
        if node.get("requires_grad") is True and t.dtype.is_floating_point:
            t.requires_grad = True
        return t
    if kind == "float":
        value = node.get("value")
        if not isinstance(value, str):
            raise bad(f"invalid float {str(node)[:80]}")
        try:
            return float(value)
        except ValueError:
            raise bad(f"invalid float {str(node)[:80]}") from None
    items = node.get("items")
    if not isinstance(items, list):
        raise bad(f"{str(kind)[:40]} without a list of items")
    if kind == "tuple":
        return tuple(_decode(v, tensors, where, depth + 1) for v in items)
    if kind in ("dict", "ordered_dict"):
        out = collections.OrderedDict() if kind == "ordered_dict" else {}
        for pair in items:
            if not isinstance(pair, list) or len(pair) != 2:
                raise bad(f"a {kind} item is not a [key, value] pair")
            key = _decode(pair[0], tensors, where, depth + 1)
            value = _decode(pair[1], tensors, where, depth + 1)
            try:
                out[key] = value
            except TypeError:
                raise bad(f"unhashable dict key {str(key)[:80]}") from None
        return out
    raise bad(f"unknown entry kind {str(kind)[:40]!r}")


def load(path, map_location=None, global_src_rank: int | None = None):
    """Load what ``save`` wrote to ``path`` (a file name or a readable binary file object).

    Any safetensors file loads, and so do ``torch.save`` zip files (their tensors, numbers,
    strings and containers; ``serialization_torch``); a directory written with
    ``save_as_external_data`` loads its checkpoint file. A safetensors file without
    actorflow's structure metadata comes back as an
    ``OrderedDict`` of tensors. A truncated, corrupted or malformed file (bad header JSON or
    nesting, unknown dtypes, invalid shapes, data offsets out of range, overlapping or not
    covering the data, bad structure metadata) raises ``ValueError`` naming the file and the
    problem. Tensors come back as plain tensors (not Parameters).
    ``map_location`` may name the CPU (the only device).

    With ``global_src_rank`` (every rank calls ``load``): only that rank reads ``path``, its
    bytes are broadcast, and every tensor comes back global, broadcast on all ranks (OneFlow's
    way to load a checkpoint that only one rank can read).
    """
    if map_location is not None:
        as_device(map_location)
    if global_src_rank is None:
        return _load_bytes(*_read(path))
    src = _check_rank("load", "global_src_rank", global_src_rank)
    got = None
    if world().rank == src:
        try:
            got = ("ok", *_read(path))
        except (OSError, TypeError) as e:  # every rank raises, none waits
            got = ("error", f"load: rank {src} could not read {path!r}: {e}", None)
    kind, data, where = groups.bcast_object(got, src, "load (global_src_rank)")
    if kind == "error":
        raise OSError(data)
    return _globalized(_load_bytes(data, where), placement.all("cpu"), {})


def _read(path) -> tuple[bytes, str]:
    if hasattr(path, "read"):
        data = path.read()
        where = repr(getattr(path, "name", type(path).__name__))
    else:
        path = os.fspath(path)
        where = repr(path)
        if os.path.isdir(path):
            path = os.path.join(path, DIR_FILE)
        with open(path, "rb") as f:
            data = f.read()
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    if not isinstance(data, bytes):
        raise TypeError(f"load: {where} gave {type(data).__name__}, not bytes; open the file "
                        f"in binary mode")
    return data, where


def _load_bytes(data: bytes, where: str):
    if data[:4] == ZIP_MAGIC:
        return load_torch_zip(data, where)
    try:
        tensors, meta = _parse(data, where)
        text = meta.get(_STRUCT_KEY)
        if text is None:
            return collections.OrderedDict(tensors)
        if not isinstance(text, str):
            raise _invalid(where, "the structure metadata is not a string")
        structure = _json(text, "the structure metadata", where)
        return _decode(structure, tensors, where)
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError,
            RecursionError) as e:  # a malformation no check above names
        raise _invalid(where, f"{type(e).__name__}: {e}") from e


def _globalized(obj, pl: placement, memo: dict):
    """``obj`` with every tensor made global, broadcast on ``pl`` (each rank holds the same
    values already: nothing moves)."""
    if isinstance(obj, Tensor):
        if id(obj) not in memo:
            g = from_full(obj, pl, (SbpParallel.from_attr(("B",)),) * len(pl.hierarchy))
            if obj.requires_grad:
                g.requires_grad = True
            memo[id(obj)] = g
        return memo[id(obj)]
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, collections.OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _globalized(v, pl, memo)
        return out
    if isinstance(obj, list):
        return [_globalized(v, pl, memo) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_globalized(v, pl, memo) for v in obj)
    return obj


__all__ = ["save", "load"]
