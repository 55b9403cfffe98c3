"""flow.save / flow.load: the safetensors layout, containers, atomic writes, corrupt files."""
from __future__ import annotations

import collections
import io
import json
import math
import os
import struct

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import REPO_ROOT
import actorflow.serialization as ser

DTYPES = [flow.float16, flow.bfloat16, flow.float32, flow.float64, flow.int8, flow.uint8,
          flow.int16, flow.int32, flow.int64, flow.bool]


def _values(d, shape=(2, 3)):
    rng = np.random.default_rng(0)
    if d is flow.bool:
        return rng.random(shape) > 0.5
    if d.is_floating_point:
        return rng.standard_normal(shape).astype(d.np)
    return rng.integers(0, 100, shape).astype(d.np)


def _header(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), n, data


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_roundtrip_every_dtype(tmp_path, d):
    a = _values(d)
    p = tmp_path / "t.safetensors"
    flow.save(flow.tensor(a, dtype=d), p)
    t = flow.load(p)
    assert isinstance(t, flow.Tensor) and t.dtype is d and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a)


def test_layout_is_safetensors(tmp_path):
    p = tmp_path / "sd.st"
    sd = collections.OrderedDict(w=flow.ones(2, 3), b=flow.arange(4),
                                 h=flow.zeros(3, dtype=flow.bfloat16))
    flow.save(sd, p)
    header, n, data = _header(p)
    assert (8 + n) % 8 == 0, "the data section starts 8-byte aligned"
    assert header["w"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    assert header["b"] == {"dtype": "I64", "shape": [4], "data_offsets": [24, 56]}
    assert header["h"] == {"dtype": "BF16", "shape": [3], "data_offsets": [56, 62]}
    assert all(isinstance(v, str) for v in header["__metadata__"].values())
    assert len(data) == 8 + n + 62
    body = data[8 + n:]
    np.testing.assert_array_equal(np.frombuffer(body[24:56], "<i8"), [0, 1, 2, 3])


def test_state_dict_and_nested_containers(tmp_path):
    w = flow.randn(3, 2)
    sd = collections.OrderedDict([("layer.weight", w), ("layer.bias", flow.zeros(2)),
                                  ("steps", flow.tensor(7))])
    obj = {"model": sd, "epoch": 3, "lr": 1e-3, "best": None, "done": False, "name": "run-1",
           "hist": [1.5, float("inf"), float("-inf"), float("nan")], "shape": (2, (3, "x")),
           "by_int": {0: {"momentum": w}, 1: []}, "big": 2 ** 70, "tied": w}
    p = tmp_path / "ckpt"
    flow.save(obj, p)
    out = flow.load(p)
    assert isinstance(out["model"], collections.OrderedDict) and type(out) is dict
    assert list(out["model"]) == ["layer.weight", "layer.bias", "steps"]
    np.testing.assert_array_equal(out["model"]["layer.weight"].numpy(), w.numpy())
    assert out["model"]["steps"].dtype == flow.int64 and out["model"]["steps"].shape == ()
    assert out["epoch"] == 3 and out["lr"] == 1e-3 and out["best"] is None
    assert out["done"] is False and out["name"] == "run-1" and out["big"] == 2 ** 70
    assert out["hist"][:3] == [1.5, math.inf, -math.inf] and math.isnan(out["hist"][3])
    assert out["shape"] == (2, (3, "x"))
    assert list(out["by_int"]) == [0, 1] and out["by_int"][1] == []
    # one tensor saved once: its places share it after loading
    assert out["tied"] is out["model"]["layer.weight"] is out["by_int"][0]["momentum"]
    header, _, _ = _header(p)
    assert set(header) == {"__metadata__", "model.layer.weight", "model.layer.bias",
                           "model.steps"}


def test_flat_state_dict_keeps_names(tmp_path):
    p = tmp_path / "flat"
    flow.save({"a.weight": flow.ones(1), "__metadata__": flow.zeros(1)}, p)
    header, _, _ = _header(p)
    assert "a.weight" in header and "__metadata__#1" in header
    out = flow.load(p)
    assert list(out) == ["a.weight", "__metadata__"]


def test_special_tensors(tmp_path):
    p = tmp_path / "x"
    base = flow.tensor(np.arange(12.0).reshape(3, 4))
    flow.save([base.T, flow.zeros(0, 5), flow.tensor(2.5)], p)
    t, empty, scalar = flow.load(p)
    np.testing.assert_array_equal(t.numpy(), np.arange(12.0).reshape(3, 4).T)
    assert empty.shape == (0, 5) and scalar.shape == () and scalar.item() == 2.5
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    flow.save({"x": x, "y": x.detach()}, p)
    out = flow.load(p)
    assert out["x"].requires_grad and out["x"].is_leaf
    assert not out["y"].requires_grad
    loaded = flow.load(p)["x"]
    loaded.numpy()[0] = 5.0  # loaded tensors own writable memory
    assert x.detach().numpy()[0] == 1.0


def test_parameter_loads_as_tensor(tmp_path):
    nn = getattr(flow, "nn", None)
    if nn is None or not hasattr(nn, "Parameter"):
        pytest.skip("actorflow.nn.Parameter is not available")
    p = tmp_path / "param"
    flow.save(collections.OrderedDict(w=nn.Parameter(flow.ones(2))), p)
    w = flow.load(p)["w"]
    assert type(w) is flow.Tensor and not w.requires_grad


def test_file_objects():
    buf = io.BytesIO()
    flow.save({"a": flow.arange(3)}, buf)
    buf.seek(0)
    assert flow.load(buf)["a"].tolist() == [0, 1, 2]


def test_unsupported_objects_write_nothing(tmp_path):
    p = tmp_path / "bad"
    with pytest.raises(TypeError, match=r"set at model\.extra"):
        flow.save({"model": {"extra": {1, 2}}}, p)
    with pytest.raises(TypeError, match="object"):
        flow.save([object()], p)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "ckpt"
    flow.save({"v": flow.ones(3)}, p)
    before = p.read_bytes()

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(ser.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        flow.save({"v": flow.zeros(1000)}, p)
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert [f.name for f in tmp_path.iterdir()] == ["ckpt"], "temporary file left behind"
    flow.save({"v": flow.zeros(2)}, p)
    assert flow.load(p)["v"].tolist() == [0.0, 0.0]
    assert [f.name for f in tmp_path.iterdir()] == ["ckpt"]


def _raw(header: dict, body: bytes = b"", n=None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if n is None else n) + text + body


@pytest.mark.parametrize("blob, message", [
    (b"\x01\x02", "too short"),
    (_raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, n=10 ** 6),
     "header length 1000000 is beyond the file size"),
    (struct.pack("<Q", 5) + b"{nope", "not valid JSON"),
    (_raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),
     "out of range"),
    (_raw({"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
     "unknown dtype 'Q4'"),  # (C64 / C128 are complex64 / complex128 now)
    (_raw({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
     "needs 12"),
    (_raw({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
     "invalid shape"),
    (_raw([1, 2]), "not a JSON object"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": "tensor", "name": "zz"}'}}),
     "does not contain"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": "tensor"'}}), "not valid JSON"),
])
def test_corrupt_files_raise_clear_errors(tmp_path, blob, message):
    p = tmp_path / "broken.bin"
    p.write_bytes(blob)
    with pytest.raises(ValueError, match=message) as err:
        flow.load(p)
    assert "broken.bin" in str(err.value)


def test_truncated_checkpoint(tmp_path):
    p = tmp_path / "full"
    flow.save({"w": flow.ones(64, 64)}, p)
    data = p.read_bytes()
    p.write_bytes(data[:len(data) - 100])
    with pytest.raises(ValueError, match="out of range"):
        flow.load(p)
    p.write_bytes(data[:20])
    with pytest.raises(ValueError, match="beyond the file size"):
        flow.load(p)


def test_plain_safetensors_file_loads_as_ordered_dict(tmp_path):
    p = tmp_path / "plain"
    body = np.array([1.0, 2.0], "<f4").tobytes() + np.array([7], "<u2").tobytes()
    p.write_bytes(_raw({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                        "n": {"dtype": "U16", "shape": [1], "data_offsets": [8, 10]}}, body))
    out = flow.load(p)
    assert isinstance(out, collections.OrderedDict) and list(out) == ["x", "n"]
    assert out["x"].tolist() == [1.0, 2.0] and out["n"].tolist() == [7]


def test_readable_by_safetensors_library(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    p = tmp_path / "model.safetensors"
    sd = collections.OrderedDict((d.name, flow.tensor(_values(d), dtype=d)) for d in DTYPES
                                 if d is not flow.bfloat16)
    flow.save(sd, p)
    loaded = st.load_file(str(p))
    assert list(loaded) == list(sd) or set(loaded) == set(sd)
    for k, t in sd.items():
        np.testing.assert_array_equal(loaded[k], t.numpy())
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    flow.save({"h": flow.tensor([1.5, -2.0], dtype=flow.bfloat16)}, p)
    assert st_torch.load_file(str(p))["h"].dtype == torch.bfloat16
    st_torch.save_file({"a": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)}, str(p))
    a = flow.load(p)["a"]
    assert a.dtype is flow.bfloat16 and a.float().tolist() == [[0, 1, 2], [3, 4, 5]]


# ---- malformed files: always the documented ValueError naming the file -------------------------

def _entry(dtype="F32", shape=(1,), offsets=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize("blob, message", [
    # nesting far beyond what save writes: in the header, in the structure metadata
    (struct.pack("<Q", 200_000) + b"[" * 100_000 + b"]" * 100_000, "header is nested too deeply"),
    (_raw({"__metadata__": {"actorflow.structure": "[" * 50_000 + "]" * 50_000}}),
     "nested too deeply"),
    (_raw({"__metadata__": {"actorflow.structure": json.dumps(
        json.loads("[" * 150 + "]" * 150))}}), "deeper than 100 levels"),
    # shapes NumPy would refuse, and malformed ones
    (_raw({"a": _entry(shape=(0, 10 ** 30), offsets=(0, 0))}), "too large"),
    (_raw({"a": _entry(shape=(0, 2 ** 40, 2 ** 40), offsets=(0, 0))}), "too large"),
    (_raw({"a": _entry(shape=(1,) * 70)}, b"\0" * 4), "invalid shape"),
    (_raw({"a": _entry(shape=(1.0,))}, b"\0" * 4), "invalid shape"),
    (_raw({"a": _entry(shape=(True,))}, b"\0" * 4), "invalid shape"),
    (_raw({"a": _entry(shape=("1",))}, b"\0" * 4), "invalid shape"),
    (_raw({"a": _entry(shape=(-3,))}, b"\0" * 4), "invalid shape"),
    (_raw({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}}, b"\0" * 4),
     "invalid shape"),
    # dtype names
    (_raw({"a": _entry(dtype=["F32"])}, b"\0" * 4), "unknown dtype"),
    (_raw({"a": _entry(dtype=None)}, b"\0" * 4), "unknown dtype"),
    (_raw({"a": _entry(dtype="f32")}, b"\0" * 4), "unknown dtype"),
    # offsets
    (_raw({"a": _entry(offsets=(-4, 0))}, b"\0" * 4), "out of range"),
    (_raw({"a": _entry(offsets=(0, 4.0))}, b"\0" * 4), "invalid data_offsets"),
    (_raw({"a": _entry(offsets=(0, 4, 8))}, b"\0" * 8), "invalid data_offsets"),
    (_raw({"a": _entry(offsets=(8, 4))}, b"\0" * 8), "out of range"),
    (_raw({"a": _entry(offsets=(0, 2 ** 70))}, b"\0" * 4), "out of range"),
    # data overlapping, not covered, short
    (_raw({"a": _entry(shape=(2,), offsets=(0, 8)), "b": _entry(offsets=(4, 8))}, b"\0" * 8),
     "overlap"),
    (_raw({"a": _entry(offsets=(4, 8))}, b"\0" * 8), "belong to no tensor"),
    (_raw({"a": _entry()}, b"\0" * 12), "its tensors end at byte 4"),
    (_raw({"a": _entry(shape=(2,), offsets=(0, 8))}, b"\0" * 6), "out of range"),
    # header length and JSON
    (struct.pack("<Q", 2 ** 64 - 1) + b"{}", "beyond the file size"),
    (_raw({}, n=2 ** 40), "beyond the file size"),
    (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid JSON"),
    (struct.pack("<Q", 5020) + b'{"a": {"shape": [' + b"9" * 5000 + b"]}}", "not valid JSON"),
    (_raw({"__metadata__": [1]}), "__metadata__ is not a JSON object"),
    (_raw({"a": [1]}), "not a JSON object"),
    # structure metadata
    (_raw({"__metadata__": {"actorflow.structure": 5}}), "not a string"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": "tensor", "name": [1]}'}}),
     "does not contain"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": "float", "value": [1]}'}}),
     "invalid float"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": "dict", "items": [[[1], 2]]}'}}),
     "unhashable"),
    (_raw({"__metadata__": {"actorflow.structure": '{"@": ["x"], "items": []}'}}),
     "unknown entry kind"),
], ids=lambda v: v if isinstance(v, str) else "file")
def test_malformed_headers_raise_value_errors_naming_the_file(tmp_path, blob, message):
    p = tmp_path / "malformed.bin"
    p.write_bytes(blob)
    with pytest.raises(ValueError, match=message) as err:
        flow.load(p)
    assert type(err.value) is ValueError and "malformed.bin" in str(err.value)


def test_nesting_save_can_write_loads_and_deeper_is_refused(tmp_path):
    p = tmp_path / "deep"
    obj = flow.ones(2)
    for i in range(ser.MAX_DEPTH):
        obj = [obj] if i % 3 == 0 else ({"k": obj} if i % 3 == 1 else (obj,))
    flow.save(obj, p)
    out = flow.load(p)
    for _ in range(ser.MAX_DEPTH):
        out = out[0] if isinstance(out, (list, tuple)) else out["k"]
    assert out.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="nested deeper than 100"):
        flow.save([obj], tmp_path / "deeper")
    loop: list = [flow.ones(1)]
    loop.append(loop)
    with pytest.raises(ValueError, match="contain themselves"):
        flow.save({"x": loop}, tmp_path / "loop")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["deep"]


def _fuzz_source(tmp_path):
    src = tmp_path / "valid.ckpt"
    flow.save({"model": collections.OrderedDict(w=flow.randn(4, 3), b=flow.arange(5)),
               "opt": {"state": {0: {"m": flow.zeros(2, dtype=flow.float16)}}, "lr": 0.1},
               "steps": (1, 2, [3.5, float("inf"), None, "s"])}, src)
    data = src.read_bytes()
    return data, 8 + int.from_bytes(data[:8], "little")


def _load_fuzzed(path, blob: bytes, outcomes) -> None:
    """Load ``blob`` from ``path``: it loads, or raises ValueError naming the file."""
    path.write_bytes(blob)
    try:
        flow.load(path)
    except ValueError as e:
        assert type(e) is ValueError and path.name in str(e), e
        outcomes["ValueError"] += 1
    else:
        outcomes["loaded"] += 1


@pytest.mark.timeout(120)
def test_fuzzed_bytes_load_or_raise_value_error_naming_the_file(tmp_path):
    """Random byte changes (most in the header) and truncations of a valid checkpoint either
    still load (a change in tensor data) or raise ValueError naming the file; nothing else,
    and nothing hangs."""
    import random
    data, head = _fuzz_source(tmp_path)
    rng = random.Random(0)
    outcomes: collections.Counter = collections.Counter()
    for i in range(600):
        b = bytearray(data)
        if i % 3 == 2:
            b = b[:rng.randrange(len(b))]
        else:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(head) if rng.random() < 0.85 else rng.randrange(len(b))
                b[pos] = rng.randrange(256) if i % 3 == 0 else rng.choice(b'[]{}",:0-9e. ')
        _load_fuzzed(tmp_path / "fuzzed.ckpt", bytes(b), outcomes)
    assert outcomes["ValueError"] > 400 and outcomes["loaded"] > 0, outcomes


def _odd_json(rng, depth: int = 0):
    """A random JSON value of a random type (what a corrupted but parseable header holds)."""
    k = rng.randrange(8)
    if k == 0:
        return rng.choice([-1, 0, 1, 7, 2 ** 70, -(2 ** 70), 10 ** 30])
    if k == 1:
        return rng.choice([0.5, -1.0, 1e300, True, None])
    if k == 2:
        return rng.choice(["", "F32", "x", "tensor", "dict", "@", "float"])
    if k == 3 and depth < 3:
        return [_odd_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    if k == 4 and depth < 3:
        return {rng.choice(["@", "items", "name", "value", "dtype"]): _odd_json(rng, depth + 1)}
    if k == 5:
        return "[" * 3000 + "]" * 3000
    return [[[[]]]]


def _json_paths(node, prefix=()) -> list:
    out = [prefix]
    items = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, list) else ())
    for k, v in items:
        out += _json_paths(v, prefix + (k,))
    return out


@pytest.mark.timeout(120)
def test_fuzzed_header_values_load_or_raise_value_error_naming_the_file(tmp_path):
    """Parseable corruption: one value anywhere in the header or in the structure metadata
    replaced by a random JSON value of any type."""
    import random
    data, head = _fuzz_source(tmp_path)
    header = json.loads(data[8:head])
    rng = random.Random(1)
    outcomes: collections.Counter = collections.Counter()
    for _ in range(600):
        h = json.loads(json.dumps(header))
        in_structure = rng.random() < 0.5
        root = {"r": json.loads(h["__metadata__"][ser._STRUCT_KEY]) if in_structure else h}
        *parents, key = ("r",) + rng.choice(_json_paths(root["r"]))
        node = root
        for k in parents:
            node = node[k]
        node[key] = _odd_json(rng)
        if in_structure:
            h["__metadata__"][ser._STRUCT_KEY] = json.dumps(root["r"])
        text = json.dumps(h if in_structure else root["r"]).encode()
        _load_fuzzed(tmp_path / "fuzzed.ckpt", struct.pack("<Q", len(text)) + text
                     + data[head:], outcomes)
    assert outcomes["ValueError"] > 300 and outcomes["loaded"] > 0, outcomes


# ---- temporary files and modes of save ------------------------------------------------------

_STALLING_SAVE = """
import os, sys, time
import actorflow as flow
def stall(fd):  # the file is written in full; hold the rename back until killed
    print("written", flush=True)
    time.sleep(120)
os.fsync = stall
flow.save({"w": flow.ones(1 << 20)}, sys.argv[1])
"""


def _stalled_writer(target):
    """A child process saving 4 MiB to ``target``, stopped just before the rename."""
    import subprocess
    import sys
    root = REPO_ROOT
    child = subprocess.Popen([sys.executable, "-c", _STALLING_SAVE, str(target)], cwd=root,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "written"
    return child


def _temps(directory, name="ckpt"):
    return sorted(f.name for f in directory.iterdir() if f.name.startswith(f".{name}."))


def _dead_pid() -> int:
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.skipif(os.name != "posix", reason="POSIX process liveness checks")
@pytest.mark.timeout(120)
def test_a_writer_killed_mid_save_leaves_a_temp_file_the_next_save_removes(tmp_path):
    import signal
    p = tmp_path / "ckpt"
    flow.save({"w": flow.zeros(3)}, p)
    child = _stalled_writer(p)
    temps = _temps(tmp_path)
    assert len(temps) == 1 and f".{child.pid}." in temps[0] and temps[0].endswith(".tmp")
    assert (tmp_path / temps[0]).stat().st_size > 4 << 20  # full size
    # a live writer's file survives another save of the same target
    flow.save({"w": flow.ones(3)}, p)
    assert _temps(tmp_path) == temps
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert _temps(tmp_path) == temps  # the dead writer's file is still there...
    assert flow.load(p)["w"].tolist() == [1.0, 1.0, 1.0]  # the target is intact
    flow.save({"w": flow.full((3,), 2.0)}, p)  # ...until the next save of this target
    assert _temps(tmp_path) == []
    assert flow.load(p)["w"].tolist() == [2.0, 2.0, 2.0]
    assert [f.name for f in tmp_path.iterdir()] == ["ckpt"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX process liveness checks")
def test_only_this_targets_temp_files_of_dead_writers_on_this_host_are_removed(tmp_path):
    dead = _dead_pid()
    host = ser._host()
    token = "0123456789abcdef"
    keep = [f".ckpt.1.{host}.{dead}.{token}.tmp",         # another target (ckpt.1)
            f".ckpt.otherhost.{dead}.{token}.tmp",          # another machine
            f".ckpt.{host}.{os.getpid()}.{token}.tmp",      # this (live) process
            ".ckpt.x8y2_k3a.tmp",                           # no pid: can't tell
            f"ckpt.{host}.{dead}.{token}.tmp"]              # not hidden: not ours
    gone = [f".ckpt.{host}.{dead}.{token}.tmp", f".ckpt.{host}.{dead}.{token[::-1]}.tmp"]
    for name in keep + gone:
        (tmp_path / name).write_bytes(b"partial")
    flow.save({"w": flow.ones(1)}, tmp_path / "ckpt")
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(keep + ["ckpt"])
    long_name = "m" * 200
    stem = ser._temp_stem(long_name)
    (tmp_path / f"{stem}.{host}.{dead}.{token}.tmp").write_bytes(b"partial")
    flow.save({"w": flow.ones(1)}, tmp_path / long_name)  # long names: a shortened stem
    assert not (tmp_path / f"{stem}.{host}.{dead}.{token}.tmp").exists()
    assert flow.load(tmp_path / long_name)["w"].tolist() == [1.0]


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_files_get_the_umask_mode(tmp_path, umask):
    import stat
    p = tmp_path / "ckpt"
    old = os.umask(umask)
    try:
        flow.save({"w": flow.ones(2)}, p)
        first = stat.S_IMODE(p.stat().st_mode)
        flow.save({"w": flow.zeros(2)}, p)  # replacing a file: the same rule
        second = stat.S_IMODE(p.stat().st_mode)
        with open(tmp_path / "plain", "wb"):  # what open() gives, for comparison
            pass
        plain = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
    finally:
        os.umask(old)
    assert first == second == plain == 0o666 & ~umask
    assert flow.load(p)["w"].tolist() == [0.0, 0.0]
