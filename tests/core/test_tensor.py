"""The Tensor type: metadata, conversions, Python protocols, dtypes and devices."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import actorflow as flow

ALL_DTYPES = [flow.float16, flow.bfloat16, flow.float32, flow.float64, flow.int8, flow.uint8,
              flow.int16, flow.int32, flow.int64, flow.bool]
NP_TYPES = {flow.float16: np.float16, flow.bfloat16: ml_dtypes.bfloat16,
            flow.float32: np.float32, flow.float64: np.float64, flow.int8: np.int8,
            flow.uint8: np.uint8, flow.int16: np.int16, flow.int32: np.int32,
            flow.int64: np.int64, flow.bool: np.bool_}


@pytest.fixture
def default_float32():
    yield
    flow.set_default_dtype(flow.float32)


def test_metadata():
    x = flow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3) and isinstance(x.shape, flow.Size)
    assert repr(x.shape) == "actorflow.Size([2, 3])"
    assert x.size() == (2, 3) and x.size(1) == 3 and x.size(-2) == 2
    with pytest.raises(IndexError, match="out of range"):
        x.size(2)
    assert x.dim() == 2 and x.ndim == 2 and x.numel() == 6 and flow.numel(x) == 6
    assert x.dtype is flow.float32 and x.element_size() == 4
    assert x.device == flow.device("cpu") and str(x.device) == "cpu" and not x.is_cuda
    assert not x.requires_grad and x.grad is None and x.grad_fn is None and x.is_leaf
    assert flow.is_tensor(x) and not flow.is_tensor(np.ones(2))
    assert x.type() == "actorflow.FloatTensor"
    s = flow.tensor(7)
    assert s.shape == () and s.dim() == 0 and s.numel() == 1


def test_numpy_shares_memory_and_values():
    x = flow.zeros(3)
    a = x.numpy()
    a[1] = 5.0
    assert x.tolist() == [0.0, 5.0, 0.0]
    w = flow.ones(2, requires_grad=True)
    assert w.numpy().tolist() == [1.0, 1.0]  # allowed, as in OneFlow
    assert np.asarray(x) is a or np.shares_memory(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.add(x, 1).tolist() == [1.0, 6.0, 1.0]


def test_item_tolist_float_int():
    assert flow.tensor([[2.5]]).item() == 2.5
    assert isinstance(flow.tensor(3).item(), int)
    with pytest.raises(RuntimeError, match="2 elements"):
        flow.tensor([1.0, 2.0]).item()
    assert flow.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert flow.tensor(1.5).tolist() == 1.5
    assert float(flow.tensor([2.5])) == 2.5 and int(flow.tensor(2.9)) == 2
    assert f"{flow.tensor(2.5):.2f}" == "2.50"
    assert [0, 1, 2][flow.tensor(1)] == 1
    with pytest.raises(TypeError):
        [0, 1][flow.tensor(1.0)]


def test_repr_oneflow_style():
    assert repr(flow.tensor([1.0, 2.0])) == "tensor([1., 2.], dtype=actorflow.float32)"
    assert repr(flow.tensor([1.5, 2.25])) == "tensor([1.5000, 2.2500], dtype=actorflow.float32)"
    assert repr(flow.tensor(3.5, dtype=flow.float64)) == "tensor(3.5000, dtype=actorflow.float64)"
    assert repr(flow.tensor([1, 2])) == "tensor([1, 2], dtype=actorflow.int64)"
    assert repr(flow.tensor([True, False])) == "tensor([ True, False], dtype=actorflow.bool)"
    assert repr(flow.tensor([[1.0, 2.0], [3.0, 4.0]])) == \
        "tensor([[1., 2.],\n        [3., 4.]], dtype=actorflow.float32)"
    assert repr(flow.zeros(0, 3)) == "tensor([], size=(0, 3), dtype=actorflow.float32)"
    assert repr(flow.tensor([1.25], dtype=flow.bfloat16)) == \
        "tensor([1.2500], dtype=actorflow.bfloat16)"
    w = flow.tensor([1.0], requires_grad=True)
    assert repr(w).endswith("requires_grad=True)")
    assert "grad_fn=<" in repr(w * 2)
    assert str(w) == repr(w)


def test_len_iter_bool():
    x = flow.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and rows[2].tolist() == [5, 6]
    with pytest.raises(TypeError, match="0-d"):
        len(flow.tensor(1))
    with pytest.raises(TypeError, match="0-d"):
        iter(flow.tensor(1)).__next__()
    assert bool(flow.tensor([0.0])) is False and bool(flow.tensor([[3]])) is True
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(flow.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(flow.zeros(0))


def test_detach_clone_contiguous():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    assert np.shares_memory(d.numpy(), x.numpy())
    c = x.clone()
    assert c.requires_grad and c.grad_fn is not None
    assert not np.shares_memory(c.detach().numpy(), x.numpy())
    m = flow.tensor(np.arange(6.0).reshape(2, 3))
    t = m.T
    assert t.shape == (3, 2) and not t.is_contiguous() and m.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3).T)
    assert np.shares_memory(t.numpy(), m.numpy())
    assert t.clone().is_contiguous() and t.contiguous().is_contiguous()


def test_conversions():
    x = flow.tensor([1.7, -2.2])
    assert x.to(flow.int32).tolist() == [1, -2] and x.to(flow.int32).dtype is flow.int32
    assert x.to(flow.float32) is x and x.to("cpu") is x
    assert x.to(flow.float32, copy=True) is not x
    assert x.to(flow.zeros(1, dtype=flow.int8)).dtype is flow.int8
    assert x.to(device="cpu", dtype=flow.float64).dtype is flow.float64
    for method, d in [("float", flow.float32), ("double", flow.float64), ("long", flow.int64),
                      ("int", flow.int32), ("half", flow.float16), ("bfloat16", flow.bfloat16),
                      ("bool", flow.bool), ("byte", flow.uint8), ("char", flow.int8)]:
        assert getattr(x, method)().dtype is d, method
    assert flow.tensor([1, 2]).float().tolist() == [1.0, 2.0]
    assert x.bfloat16().float().tolist() == pytest.approx([1.703125, -2.203125])


def test_tensor_constructor():
    t = flow.Tensor(2, 3)
    assert t.shape == (2, 3) and t.dtype is flow.float32
    assert flow.Tensor((2, 3)).tolist() == [2.0, 3.0]  # a tuple is data, as in PyTorch
    assert flow.Tensor(flow.Size([4])).shape == (4,)
    assert flow.Tensor([1, 2]).dtype is flow.float32
    assert flow.Tensor(np.array([1, 2], np.int64)).tolist() == [1.0, 2.0]
    assert flow.Tensor().shape == (0,)
    assert flow.Tensor(3).shape == (3,)


@pytest.mark.parametrize("d", ALL_DTYPES, ids=lambda d: d.name)
def test_dtype_round_trip(d):
    values = [0, 1, 1, 0] if d is flow.bool else [0, 1, 2, 100]
    a = np.array(values, dtype=NP_TYPES[d])
    t = flow.tensor(a)
    assert t.dtype is d and t.numpy().dtype == a.dtype
    np.testing.assert_array_equal(t.numpy(), a)
    assert flow.tensor(values, dtype=d).dtype is d
    assert flow.from_numpy(a).dtype is d
    assert flow.zeros(2, dtype=d).to(flow.float32).dtype is flow.float32
    assert flow.tensor(a[0]).dtype is d  # a NumPy scalar keeps its dtype
    assert repr(d) == f"actorflow.{d.name}"


def test_dtype_inference_and_aliases():
    assert flow.tensor([1.0]).dtype is flow.float32
    assert flow.tensor([1, 2.5]).dtype is flow.float32
    assert flow.tensor([1]).dtype is flow.int64
    assert flow.tensor([True]).dtype is flow.bool
    assert flow.tensor(np.ones(2)).dtype is flow.float64
    assert flow.tensor([flow.tensor(1.0), flow.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert (flow.half, flow.float, flow.double, flow.long, flow.int, flow.char) == \
        (flow.float16, flow.float32, flow.float64, flow.int64, flow.int32, flow.int8)
    with pytest.raises(TypeError, match="tensor"):
        flow.tensor(["a", "b"])
    with pytest.raises(TypeError):
        flow.tensor([object()])


def test_set_default_dtype(default_float32):
    flow.set_default_dtype(flow.float64)
    assert flow.get_default_dtype() is flow.float64
    assert flow.tensor([1.5]).dtype is flow.float64
    assert flow.zeros(2).dtype is flow.float64 and flow.rand(2).dtype is flow.float64
    assert flow.Tensor(2).dtype is flow.float64
    assert flow.tensor([1]).dtype is flow.int64
    with pytest.raises(TypeError, match="floating"):
        flow.set_default_dtype(flow.int32)
    flow.set_default_dtype(flow.float32)
    assert flow.ones(1).dtype is flow.float32


def test_devices():
    assert flow.device("cpu") == flow.device("cpu:0") == "cpu"
    assert flow.device("cpu").type == "cpu"
    # As PyTorch without a GPU: a cuda device is a value; putting data on it raises.
    cuda0 = flow.device("cuda:0")
    assert (cuda0.type, cuda0.index, str(cuda0)) == ("cuda", 0, "cuda:0")
    assert cuda0 == "cuda" and cuda0 != "cpu" and flow.device(cuda0) == cuda0
    for bad in ("cuda", "cuda:0", cuda0):
        with pytest.raises(RuntimeError, match="not available.*CPU"):
            flow.ones(2, device=bad)
    with pytest.raises(RuntimeError, match="unknown device type 'gpu'"):
        flow.device("gpu")
    with pytest.raises(RuntimeError, match="cuda"):
        flow.nn.Linear(2, 2).to(cuda0)
    with pytest.raises(RuntimeError, match="cuda"):
        flow.Generator(device=cuda0)
    with pytest.raises(RuntimeError, match="cuda"):
        flow.nn.CoinFlip(batch_size=2, device=cuda0)
    with pytest.raises(RuntimeError, match="cuda"):
        flow.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="cuda"):
        flow.zeros(2).to("cuda")
    with pytest.raises(RuntimeError, match="cuda"):
        flow.zeros(2).cuda()
    assert flow.zeros(2, device=flow.device("cpu")).cpu().device == "cpu"


def test_tensors_are_not_pickled():
    import pickle

    with pytest.raises(TypeError, match="actorflow.save"):
        pickle.dumps(flow.zeros(2))


def test_tensor_constructor_refuses_a_device_without_kernels():
    # as flow.tensor / flow.zeros do: no silent CPU tensor for device="cuda"
    for args in ((2, 3), ([1.0, 2.0],)):
        with pytest.raises(RuntimeError, match="device 'cuda' is not available"):
            flow.Tensor(*args, device="cuda")
    assert flow.Tensor(2, 3, device="cpu").device == flow.device("cpu")
    assert flow.Tensor(2, device="meta").is_meta
