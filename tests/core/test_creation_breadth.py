"""Creation and random breadth (functional/creation.py, random.py, Tensor.type): compared with
PyTorch where it defines the numbers."""
import numpy as np
import pytest
import torch

import actorflow as flow


@pytest.mark.parametrize("args,kw", [((0, 2, 5), {}), ((-1, 1, 4), {"base": 2.0}),
                                     ((0, 3, 4), {"dtype": "int64"}), ((1, 1, 1), {}),
                                     ((0, 1, 0), {})])
def test_logspace_matches_torch(args, kw):
    f_kw = dict(kw, dtype=getattr(flow, kw["dtype"])) if "dtype" in kw else kw
    t_kw = dict(kw, dtype=getattr(torch, kw["dtype"])) if "dtype" in kw else kw
    got, want = flow.logspace(*args, **f_kw), torch.logspace(*args, **t_kw)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_hann_window_matches_torch(n, periodic):
    got = flow.hann_window(n, periodic, dtype=flow.float64)
    np.testing.assert_allclose(got.numpy(), torch.hann_window(n, periodic,
                                                              dtype=torch.float64).numpy(),
                               atol=1e-12)
    assert flow.hann_window(n, periodic).dtype is flow.float32
    with pytest.raises(TypeError, match="hann_window"):
        flow.hann_window(4, dtype=flow.int32)


def test_rand_forms_and_dtype_errors():
    flow.manual_seed(3)
    a = flow.rand(size=(2, 3))
    flow.manual_seed(3)
    b = flow.rand(2, 3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert flow.randn(size=flow.Size([4])).shape == (4,)
    with pytest.raises(TypeError, match="both"):
        flow.rand(2, size=(2,))
    with pytest.raises(NotImplementedError, match="floating"):
        flow.rand(2, dtype=flow.int32)


def test_like_functions_take_device_and_requires_grad():
    x = flow.zeros(2, 3)
    y = flow.randn_like(x, device="cpu", requires_grad=True)
    assert y.shape == (2, 3) and y.requires_grad
    r = flow.randint_like(x, 5, device=flow.device("cpu"))
    assert r.dtype is flow.float32 and r.numpy().min() >= 0 and r.numpy().max() < 5
    r = flow.randint_like(x, 2, 4, dtype=flow.int64)
    assert r.dtype is flow.int64 and set(np.unique(r.numpy())) <= {2, 3}
    assert flow.rand_like(x, device="cpu").shape == (2, 3)


def test_bernoulli_dtype():
    p = flow.tensor([0.0, 1.0, 0.0, 1.0])
    out = flow.bernoulli(p, dtype=flow.int32)
    assert out.dtype is flow.int32
    np.testing.assert_array_equal(out.numpy(), [0, 1, 0, 1])
    assert flow.bernoulli(p, p=1.0).numpy().tolist() == [1.0] * 4


def test_new_methods():
    x = flow.zeros(2, dtype=flow.float64)
    for name, args in (("new_ones", ((2, 3),)), ("new_zeros", (2, 3)), ("new_empty", (2, 3))):
        t = getattr(x, name)(*args)
        assert t.shape == (2, 3) and t.dtype is flow.float64
    assert x.new_ones(3).numpy().tolist() == [1.0] * 3
    f = x.new_full((2,), 7, dtype=flow.int32, requires_grad=False)
    assert f.dtype is flow.int32 and f.tolist() == [7, 7]
    assert x.new_full([], 2).shape == ()
    n = x.new_tensor([[1, 2], [3, 4]])
    assert n.dtype is flow.float64 and n.tolist() == [[1, 2], [3, 4]]
    assert x.new_tensor([1], dtype=flow.int64).dtype is flow.int64
    assert x.new_zeros(2, requires_grad=True).requires_grad


def test_generator_devices():
    assert flow.Generator(device="auto").initial_seed() == flow.Generator("cpu").initial_seed()
    assert flow.Generator(7).initial_seed() == 7
    flow.Generator(device="cpu:3")
    with pytest.raises(RuntimeError):
        flow.Generator(device="invalid")
    with pytest.raises(RuntimeError):
        flow.Generator(device="cuda")


def test_tensor_type_conversions():
    x = flow.tensor([1.5, 2.5])
    assert x.type() == "actorflow.FloatTensor"
    assert x.type(flow.LongTensor).dtype is flow.int64
    assert x.type("oneflow.CharTensor").dtype is flow.int8
    assert x.type("actorflow.DoubleTensor").dtype is flow.float64
    assert x.type(flow.int16).type() == "actorflow.ShortTensor"
    assert flow.short is flow.int16
    with pytest.raises(ValueError, match="type"):
        x.type("actorflow.NoSuchTensor")
    with pytest.raises(RuntimeError):
        x.type("actorflow.cuda.FloatTensor")


def test_rng_state_is_a_byte_tensor():
    g = flow.Generator(11)
    flow.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype is flow.uint8 and state.shape == (53,)
    a = flow.rand(4, generator=g).numpy()
    assert not np.array_equal(g.get_state().numpy(), state.numpy())
    g.set_state(state)
    np.testing.assert_array_equal(flow.rand(4, generator=g).numpy(), a)
    assert g.initial_seed() == 11
    h = flow.Generator()
    h.set_state(state.numpy())  # an array of the bytes works too
    assert h.initial_seed() == 11
    with pytest.raises(ValueError, match="53 bytes"):
        g.set_state(flow.zeros(3, dtype=flow.uint8))
    flow.manual_seed(0)
    np.testing.assert_array_equal(flow.get_rng_state().numpy(),
                                  flow.default_generator.get_state().numpy())


def test_more_creation_functions_take_placement_and_sbp():
    pl, b = flow.placement("cpu", ranks=[0]), flow.sbp.broadcast
    made = {
        "linspace": (lambda **g: flow.linspace(0, 10, 5, **g), np.linspace(0, 10, 5)),
        "logspace": (lambda **g: flow.logspace(0, 2, 3, **g), np.logspace(0, 2, 3)),
        "eye": (lambda **g: flow.eye(3, 2, **g), np.eye(3, 2)),
        "hann_window": (lambda **g: flow.hann_window(6, **g), None),
    }
    for name, (fn, want) in made.items():
        x = fn(placement=pl, sbp=(b,))
        assert x.is_global and x.placement == pl and x.sbp == (b,), name
        ref = fn().numpy() if want is None else want
        np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6, err_msg=name)
    for dtype in (flow.uint8, flow.int32, flow.float64):
        x = flow.randperm(10, placement=pl, sbp=b, dtype=dtype)
        assert x.dtype is dtype and x.sbp == (b,)
        assert sorted(x.numpy().tolist()) == list(range(10))
    flow.manual_seed(3)
    g = flow.randint(0, 50, (4, 3), placement=pl, sbp=b)
    flow.manual_seed(3)
    np.testing.assert_array_equal(g.numpy(), flow.randint(0, 50, (4, 3)).numpy())
    like = flow.randn_like(g.to(flow.float32))  # a global input: a global result
    assert like.is_global and like.placement == pl and like.sbp == (b,)
    assert flow.randint_like(flow.ones(2), 5, placement=pl, sbp=b).is_global
    assert not flow.rand_like(flow.ones(2)).is_global
