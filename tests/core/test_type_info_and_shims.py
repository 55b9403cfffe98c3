"""flow.finfo / flow.iinfo against PyTorch; flow.cuda, flow.jit and flow._utils (flatten and
unflatten dense tensors); nn.CoinFlip; ml_dtypes loaded on first use of bfloat16."""
import subprocess
import sys

import numpy as np
import pytest

import actorflow as flow
from actorflow._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from tests.helpers import REPO_ROOT, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


@needs_torch
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", None])
def test_finfo_like_torch(name):
    f = flow.finfo(getattr(flow, name)) if name else flow.finfo()
    t = torch.finfo(getattr(torch, name)) if name else torch.finfo()
    for key in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(f, key) == getattr(t, key), key


@needs_torch
@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_like_torch(name):
    f, t = flow.iinfo(getattr(flow, name)), torch.iinfo(getattr(torch, name))
    assert (f.bits, f.max, f.min) == (t.bits, t.max, t.min)


def test_info_rejects_the_other_kind():
    with pytest.raises(TypeError, match="finfo"):
        flow.finfo(flow.int32)
    with pytest.raises(TypeError, match="iinfo"):
        flow.iinfo(flow.float32)


def test_cuda_and_jit_shims():
    assert flow.cuda.is_available() is False and flow.cuda.device_count() == 0

    def f(x):
        return x + 1

    assert flow.jit.script(f) is f and flow.jit.ignore(f) is f
    assert flow.jit.ignore(drop=True)(f) is f and not flow.jit.is_scripting()


def test_flatten_and_unflatten_dense_tensors():
    parts = [np.arange(6.0).reshape(2, 3), np.array([7.0]), np.ones((2, 2))]
    flat = _flatten_dense_tensors([flow.tensor(p) for p in parts])
    np.testing.assert_array_equal(flat.numpy(), np.concatenate([p.ravel() for p in parts]))
    back = _unflatten_dense_tensors(flat, [flow.tensor(p) for p in parts])
    for b, p in zip(back, parts):
        np.testing.assert_array_equal(b.numpy(), p)
    with pytest.raises(ValueError, match="flat has 11 elements"):
        _unflatten_dense_tensors(flat, [flow.tensor(parts[0])])


def test_coin_flip():
    m = flow.nn.CoinFlip(4000, random_seed=-3, probability=0.25)
    x = m()
    assert x.dtype == flow.int8 and tuple(x.shape) == (4000,)
    assert set(np.unique(x.numpy())) <= {0, 1} and abs(x.numpy().mean() - 0.25) < 0.03
    again = flow.nn.CoinFlip(4000, random_seed=-3, probability=0.25)()
    np.testing.assert_array_equal(x.numpy(), again.numpy())
    assert flow.nn.CoinFlip(5, probability=1.0)().numpy().tolist() == [1] * 5
    with pytest.raises(ValueError, match="probability"):
        flow.nn.CoinFlip(2, probability=1.5)


def test_importing_actorflow_leaves_ml_dtypes_unloaded_until_bfloat16_is_used():
    # ml_dtypes' import registers its ufunc loops (1.3 s with ml_dtypes 0.7): actorflow loads it
    # on first use of bfloat16, or when a bfloat16 array from ml_dtypes reaches it
    code = ("import sys, numpy as np, actorflow as flow\n"
            "assert 'ml_dtypes' not in sys.modules\n"
            "x = flow.tensor([1.0, 3.0]).to(flow.bfloat16)\n"
            "assert 'ml_dtypes' in sys.modules and x.sum().item() == 4.0\n"
            "print('ok')\n")
    late = ("import sys, numpy as np, actorflow as flow\n"
            "import ml_dtypes\n"
            "t = flow.tensor(np.array([1.0, 2.0, 4.0], ml_dtypes.bfloat16))\n"
            "assert t.dtype is flow.bfloat16 and t.sum().dtype is flow.bfloat16\n"
            "assert t.mean().item() == np.float32(7 / 3).astype(ml_dtypes.bfloat16)\n"
            "assert flow.finfo(flow.bfloat16).eps == 2.0 ** -7\n"
            "print('ok')\n")
    for src in (code, late):
        p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                           timeout=120, cwd=REPO_ROOT)
        assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
