"""Loading ``torch.save`` zip files (tensors of every dtype, views, parameters, nested
containers, non-tensor objects; file names, file objects, bytes) without running code from the
file; and ``save_as_external_data`` directories."""
from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_state_dict_and_nested_objects(tmp_path):
    conv = torch.nn.Conv2d(3, 2, 3)
    base = torch.arange(24.0).reshape(4, 6)
    obj = {"weights": conv.state_dict(), "a": 2, "name": "x", "list": [1.5, None, (True, "s")],
           "view": base[1:, ::2].t(), "p": torch.nn.Parameter(torch.ones(2))}
    path = tmp_path / "ckpt.pt"
    torch.save(obj, path)
    got = flow.load(str(path), map_location="cpu")
    assert got["a"] == 2 and got["name"] == "x" and got["list"] == [1.5, None, (True, "s")]
    for k, v in conv.state_dict().items():
        np.testing.assert_array_equal(got["weights"][k].numpy(), v.numpy())
    np.testing.assert_array_equal(got["view"].numpy(), base[1:, ::2].t().numpy())
    assert got["p"].requires_grad and isinstance(got["p"], flow.Tensor)
    m = flow.nn.Conv2d(3, 2, 3)
    m.load_state_dict(got["weights"])
    np.testing.assert_array_equal(m.weight.numpy(), conv.weight.detach().numpy())
    with open(path, "rb") as f:  # a file object, and bytes in memory
        assert flow.load(f)["a"] == 2
    assert flow.load(io.BytesIO(_torch_bytes({"a": 3})))["a"] == 3


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                  "int16", "int8", "uint8", "bool", "complex64", "complex128"])
def test_every_dtype(name):
    t = (torch.arange(6) % 3).reshape(2, 3).to(getattr(torch, name))
    got = flow.load(io.BytesIO(_torch_bytes({"t": t})))["t"]
    assert got.dtype is getattr(flow, name if name != "bool" else "bool")
    want = t.float().numpy() if name == "bfloat16" else t.numpy()
    np.testing.assert_array_equal(np.asarray(got.numpy(), dtype=want.dtype), want)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_other_python_objects_are_refused_not_run():
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"x": _Evil()}, protocol=2))
    with pytest.raises(ValueError, match=r"needs (posix|os|nt)\.system"):
        flow.load(io.BytesIO(data.getvalue()))
    with pytest.raises(ValueError, match="needs torch.nn.modules.linear.Linear"):
        flow.load(io.BytesIO(_torch_bytes(torch.nn.Linear(2, 2))))
    with pytest.raises(ValueError, match="not a valid PyTorch checkpoint|not a PyTorch"):
        flow.load(io.BytesIO(b"PK\x03\x04garbage"))


def test_save_as_external_data_directory(tmp_path):
    sd = {"w": flow.randn(3, 4), "b": flow.arange(3)}
    d = tmp_path / "ckpt"
    flow.save(sd, str(d), save_as_external_data=True)
    (d / "notes.txt").write_text("other files are ignored")
    got = flow.load(str(d))
    for k in sd:
        np.testing.assert_array_equal(got[k].numpy(), sd[k].numpy())
    with pytest.raises(TypeError, match="needs a directory path"):
        flow.save(sd, io.BytesIO(), save_as_external_data=True)
