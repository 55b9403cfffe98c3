"""Checkpoint edges: unsigned safetensors dtypes widened on load never wrap; saving through a
symlink writes the link's target, as torch.save does."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch


def _write_st(path, arr: np.ndarray, code: str) -> None:
    data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    head = json.dumps({"x": {"dtype": code, "shape": list(arr.shape),
                             "data_offsets": [0, len(data)]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data)


@pytest.mark.parametrize("code, np_dtype, want", [
    ("U16", np.uint16, "int32"), ("U32", np.uint32, "int64"), ("U64", np.uint64, "int64")])
def test_unsigned_values_load_exactly(tmp_path, code, np_dtype, want):
    top = min(np.iinfo(np_dtype).max, 2 ** 63 - 1)
    vals = np.array([[0, 1], [top, top // 3]], np_dtype)
    p = tmp_path / "u.safetensors"
    _write_st(p, vals, code)
    got = flow.load(p)["x"]
    assert got.dtype == getattr(flow, want)
    assert got.numpy().tolist() == vals.astype(object).tolist()


@pytest.mark.parametrize("bad", [2 ** 63, 2 ** 64 - 1, 2 ** 63 + 12345])
def test_u64_beyond_int64_is_refused_not_wrapped(tmp_path, bad):
    p = tmp_path / "u64.safetensors"
    _write_st(p, np.array([3, bad, 5], np.uint64), "U64")
    with pytest.raises(ValueError, match=f"unsigned value {bad}, beyond actorflow.int64"):
        flow.load(p)


def test_save_through_symlink_writes_the_target(tmp_path):
    target, link = tmp_path / "real.af", tmp_path / "link.af"
    target.write_bytes(b"old contents")
    os.symlink(target, link)
    flow.save({"w": flow.arange(4)}, link)
    assert os.path.islink(link) and os.readlink(link) == str(target)
    np.testing.assert_array_equal(flow.load(target)["w"].numpy(), np.arange(4))
    np.testing.assert_array_equal(flow.load(link)["w"].numpy(), np.arange(4))
    if torch is not None:  # torch.save writes through the link the same way
        tt, tl = tmp_path / "t_real.pt", tmp_path / "t_link.pt"
        tt.write_bytes(b"x")
        os.symlink(tt, tl)
        torch.save({"w": torch.arange(4)}, tl)
        assert os.path.islink(tl) and tt.stat().st_size > 1


def test_save_through_chained_and_relative_symlinks(tmp_path):
    sub = tmp_path / "d"
    sub.mkdir()
    target = sub / "ckpt.af"
    os.symlink(os.path.join("d", "ckpt.af"), tmp_path / "rel.af")  # relative, target missing
    os.symlink(tmp_path / "rel.af", tmp_path / "chain.af")
    flow.save([flow.ones(2)], tmp_path / "chain.af")
    assert os.path.islink(tmp_path / "chain.af") and os.path.islink(tmp_path / "rel.af")
    np.testing.assert_array_equal(flow.load(target)[0].numpy(), [1.0, 1.0])
    assert [p for p in os.listdir(sub) if p.endswith(".tmp")] == []
