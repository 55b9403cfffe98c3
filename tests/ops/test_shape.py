"""Shape ops: forward vs NumPy, gradients vs finite differences, PyTorch comparisons, view
semantics, hypothesis round trips and error messages."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, to_torch, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
rng = np.random.default_rng(1)
A = rng.standard_normal((2, 3, 4))
FEW = settings(max_examples=25, deadline=None)


def t(a):
    return flow.tensor(a)


# ---- forward vs NumPy ----------------------------------------------------------------------------

@pytest.mark.parametrize("fn,ref", [
    (lambda x: x.flatten(), lambda a: a.reshape(-1)),
    (lambda x: flow.flatten(x, 1), lambda a: a.reshape(2, 12)),
    (lambda x: x.flatten(0, 1), lambda a: a.reshape(6, 4)),
    (lambda x: x.flatten(-2, -1), lambda a: a.reshape(2, 12)),
    (lambda x: x.unflatten(2, (2, -1)), lambda a: a.reshape(2, 3, 2, 2)),
    (lambda x: x.unsqueeze(0), lambda a: a[None]),
    (lambda x: flow.unsqueeze(x, -1), lambda a: a[..., None]),
    (lambda x: x.unsqueeze(2).squeeze(2), lambda a: a),
    (lambda x: x.reshape(1, 2, 1, 12).squeeze(), lambda a: a.reshape(2, 12)),
    (lambda x: x.reshape(1, 2, 1, 12).squeeze((0, 2)), lambda a: a.reshape(2, 12)),
    (lambda x: x.reshape(1, 2, 1, 12).squeeze(1), lambda a: a.reshape(1, 2, 1, 12)),
    (lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    (lambda x: x.permute(-1, 0, 1), lambda a: a.transpose(2, 0, 1)),
    (lambda x: x.swapaxes(0, 2), lambda a: a.swapaxes(0, 2)),
    (lambda x: flow.swapdims(x, -1, 1), lambda a: a.swapaxes(2, 1)),
    (lambda x: x.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    (lambda x: flow.movedim(x, (0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0))),
    (lambda x: x[0].t(), lambda a: a[0].T),
    (lambda x: x.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
    (lambda x: flow.narrow(x, -2, -2, 2), lambda a: a[:, 1:3]),
    (lambda x: x.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3))),
    (lambda x: x.repeat(2, 1, 1, 2), lambda a: np.tile(a, (2, 1, 1, 2))),
    (lambda x: x.tile((2,)), lambda a: np.tile(a, (1, 1, 2))),
    (lambda x: flow.tile(x, (2, 1, 1, 1)), lambda a: np.tile(a, (2, 1, 1, 1))),
    (lambda x: x.flip(0, 2), lambda a: a[::-1, :, ::-1]),
    (lambda x: flow.flip(x, [-1]), lambda a: a[..., ::-1]),
    (lambda x: flow.fliplr(x), lambda a: np.fliplr(a)),
    (lambda x: flow.flipud(x), lambda a: np.flipud(a)),
    (lambda x: flow.roll(x, 1), lambda a: np.roll(a, 1)),
    (lambda x: x.roll((1, -2), (0, 2)), lambda a: np.roll(a, (1, -2), (0, 2))),
    (lambda x: flow.roll(x, 5, -1), lambda a: np.roll(a, 5, -1)),
    (lambda x: flow.tril(x), lambda a: np.tril(a)),
    (lambda x: x.triu(1), lambda a: np.triu(a, 1)),
    (lambda x: x.tril(-1), lambda a: np.tril(a, -1)),
    (lambda x: flow.cat([x, x[:, :1]], 1), lambda a: np.concatenate([a, a[:, :1]], 1)),
    (lambda x: flow.concat([x, x], -1), lambda a: np.concatenate([a, a], -1)),
    (lambda x: flow.stack([x, x + 1], 1), lambda a: np.stack([a, a + 1], 1)),
    (lambda x: flow.stack([x, x], -1), lambda a: np.stack([a, a], -1)),
    (lambda x: x.view_as(flow.zeros(6, 4)), lambda a: a.reshape(6, 4)),
    (lambda x: x.reshape_as(flow.zeros(4, 6)), lambda a: a.reshape(4, 6)),
    (lambda x: flow._C.reshape_like(x, flow.zeros(3, 8)), lambda a: a.reshape(3, 8)),
])
def test_forward_matches_numpy(fn, ref):
    out = fn(t(A))
    want = ref(A)
    assert tuple(out.shape) == want.shape
    np.testing.assert_array_equal(out.numpy(), want)


def test_split_chunk_unbind():
    x = t(A)
    assert [p.shape[2] for p in x.split(3, 2)] == [3, 1]
    assert [p.shape[2] for p in flow.split(x, [1, 0, 3], dim=-1)] == [1, 0, 3]
    for p, w in zip(x.split([1, 3], 2), np.split(A, [1], 2)):
        np.testing.assert_array_equal(p.numpy(), w)
    assert [p.shape[1] for p in x.chunk(2, 1)] == [2, 1]
    assert [p.shape[2] for p in flow.chunk(x, 3, 2)] == [2, 2]  # fewer than asked, as torch
    assert len(flow.chunk(flow.zeros(0, 2), 3)) == 3
    parts = x.unbind(1)
    assert isinstance(parts, tuple) and len(parts) == 3
    for i, p in enumerate(parts):
        np.testing.assert_array_equal(p.numpy(), A[:, i])
    assert flow.unbind(x)[1].shape == (3, 4)


def test_cat_promotes_dtypes():
    i = flow.tensor([[1, 2]], dtype=flow.int32)
    f = flow.tensor([[0.5, 1.5]], dtype=flow.float32)
    out = flow.cat([i, f])
    assert out.dtype is flow.float32
    np.testing.assert_array_equal(out.numpy(), [[1, 2], [0.5, 1.5]])
    assert flow.cat([i, flow.tensor([[3, 4]], dtype=flow.int64)], 1).dtype is flow.int64
    assert flow.cat([flow.tensor([True]), flow.tensor([2], dtype=flow.uint8)]).dtype is flow.uint8
    single = flow.cat([f])
    assert single is not f and single.tolist() == f.tolist()


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(1, 2), (2, 0, 1, 1), (1, 1, 0, 2, 1, 0)])
def test_pad_matches_numpy(mode, pad):
    a = rng.standard_normal((2, 3, 4, 5))
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    widths = [(0, 0)] * 4
    for i in range(len(pad) // 2):
        widths[3 - i] = (pad[2 * i], pad[2 * i + 1])
    kwargs = {"constant_values": 0.5} if mode == "constant" else {}
    out = flow.pad(t(a), pad, mode=mode, value=0.5 if mode == "constant" else None)
    np.testing.assert_array_equal(out.numpy(), np.pad(a, widths, np_mode, **kwargs))


def test_pad_negative_crops():
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(flow.pad(t(a), (-1, 2)).numpy(),
                                  np.pad(a[:, 1:], [(0, 0), (0, 2)]))
    np.testing.assert_array_equal(flow.pad(t(a), (0, 0, -1, -1)).numpy(), a[1:2])


def test_contiguous():
    x = t(A)
    assert x.contiguous() is x
    y = x.transpose(0, 2)
    assert not y.is_contiguous()
    c = y.contiguous()
    assert c.is_contiguous() and c is not y
    np.testing.assert_array_equal(c.numpy(), A.transpose(2, 1, 0))


def test_zero_dim_and_one_dim_edge_cases():
    s = flow.tensor(3.0)
    assert s.flatten().shape == (1,) and s.unsqueeze(0).shape == (1,)
    assert s.squeeze().shape == () and s.squeeze(0).shape == ()
    assert s.t() is s and flow.tensor([1.0, 2.0]).t().shape == (2,)
    assert flow.stack([s, s]).tolist() == [3.0, 3.0]
    assert flow.repeat(s, 2, 3).shape == (2, 3)


# ---- views ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda b: b.reshape(1, 2, 1, 12).squeeze(), lambda b: b.unsqueeze(1), lambda b: b.flatten(),
    lambda b: b.narrow(1, 1, 2), lambda b: b.split(2, 2)[1], lambda b: b.chunk(3, 1)[2],
    lambda b: b.unbind(0)[1], lambda b: b.transpose(0, 1).unsqueeze(0), lambda b: b.view(6, 4),
    lambda b: b.transpose(1, 2).squeeze(0),
])
def test_views_share_memory_with_base(make):
    base = t(A.copy())
    v = make(base)
    before = base._version
    v.add_(1.0)
    assert (base.numpy() != A).sum() == v.numel()
    assert base._version > before  # the base sees the in-place write


def test_copies_do_not_share_memory():
    base = t(A.copy())
    for out in (base.flip(0), base.roll(1), flow.cat([base, base]), base.repeat(1, 1, 1),
                base.tril(), flow.pad(base, (1, 1))):
        out.add_(1.0)
    np.testing.assert_array_equal(base.numpy(), A)


# ---- gradients -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: x.flatten(1), lambda x: x.unflatten(-1, (2, 2)), lambda x: x.unsqueeze(1) * 2,
    lambda x: x.reshape(2, 1, 12).squeeze(1), lambda x: x.permute(1, 2, 0),
    lambda x: x.movedim(2, 0), lambda x: x.narrow(1, 1, 2), lambda x: x.narrow(-1, 0, 1),
    lambda x: x.repeat(2, 1, 2), lambda x: x.repeat(3, 1, 1, 1), lambda x: x.tile((2,)),
    lambda x: x.flip(0, -1), lambda x: x.roll(2), lambda x: x.roll((1, -1), (0, 2)),
    lambda x: x.tril(), lambda x: x.triu(-1), lambda x: x[0].t(),
    lambda x: x.split([1, 3], 2), lambda x: x.split(2, 1)[0], lambda x: x.chunk(2, 2)[1],
    lambda x: x.unbind(1), lambda x: x.transpose(0, 1).contiguous(),
    lambda x: flow.stack([x, x * 2], 1), lambda x: flow.expand(x[:, :1], (2, 3, 4)),
    lambda x: x.unsqueeze(0).expand(3, 2, 3, 4),
])
def test_gradients(fn):
    gradcheck(fn, A)


def test_cat_gradients_with_promotion():
    b = rng.standard_normal((2, 1, 4))
    gradcheck(lambda x, y: flow.cat([x, y, x], 1), A, b)
    gradcheck(lambda x: flow.cat([x, flow.ones(2, 3, 4, dtype=flow.float32)], 0), A)
    x = flow.tensor(A.astype(np.float32), requires_grad=True)
    y = flow.tensor(A, requires_grad=True)
    flow.cat([x, y]).sum().backward()
    assert x.grad.dtype is flow.float32 and y.grad.dtype is flow.float64


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(1, 2), (2, 1, 1, 2), (1, 0, 0, 1, 1, 1)])
def test_pad_gradients(mode, pad):
    a = rng.standard_normal((1, 3, 3, 4))
    gradcheck(lambda x: flow.pad(x, pad, mode=mode), a)


def test_pad_negative_and_double_backward():
    gradcheck(lambda x: flow.pad(x, (-1, 2, 1, -1)), A)
    # second order through pad_backward (its gradient is pad again): with P the reflect pad,
    # f = sum(w * P(x)^2) has g = P^T(2 w P(x)), and d/dx sum(g * v) = P^T(2 w P(v))
    w, v = rng.standard_normal((2, 3, 7)), rng.standard_normal((2, 3, 4))
    x = flow.tensor(A, requires_grad=True)
    px = flow.pad(x, (2, 1), mode="reflect")
    (g,) = flow.autograd.grad((px * px * flow.tensor(w)).sum(), x, create_graph=True)
    (g * flow.tensor(v)).sum().backward()
    y = flow.tensor(np.zeros_like(A), requires_grad=True)
    (flow.pad(y, (2, 1), mode="reflect") * flow.pad(flow.tensor(v), (2, 1), mode="reflect")
     * flow.tensor(2 * w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)


# ---- PyTorch comparisons -------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("name,args", [
    ("repeat", (2, 1, 1, 3)), ("tile", ((2, 2),)), ("roll", ((1, 2), (0, 2))), ("flip", ((0, 1),)),
    ("tril", (1,)), ("triu", (-1,)), ("narrow", (2, 1, 3)), ("movedim", ((0, 2), (1, 0))),
    ("unflatten", (2, (2, 2))), ("flatten", (0, 1)),
])
def test_methods_against_torch(name, args):
    x, tx = flow.tensor(A, requires_grad=True), to_torch(A, requires_grad=True)
    out, tout = getattr(x, name)(*args), getattr(tx, name)(*args)
    np.testing.assert_array_equal(out.detach().numpy(), tout.detach().numpy())
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_against_torch(mode):
    a = rng.standard_normal((2, 2, 4, 5))
    x, tx = flow.tensor(a, requires_grad=True), to_torch(a, requires_grad=True)
    pad = (2, 1, 3, 0)
    out = flow.pad(x, pad, mode=mode)
    tout = torch.nn.functional.pad(tx, pad, mode=mode)
    np.testing.assert_array_equal(out.detach().numpy(), tout.detach().numpy())
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@needs_torch
def test_split_chunk_against_torch():
    tx = to_torch(A)
    for args in ((3, 2), ([1, 2], 1), (1, 0)):
        mine = [p.shape for p in t(A).split(*args)]
        assert mine == [tuple(p.shape) for p in tx.split(*args)]
    for n in (1, 2, 3, 4, 5):
        mine = [p.shape for p in t(A).chunk(n, -1)]
        assert mine == [tuple(p.shape) for p in tx.chunk(n, -1)]


# ---- properties ----------------------------------------------------------------------------------

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@FEW
@given(shapes, st.data())
def test_reshape_round_trip(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    target = data.draw(st.permutations(list(shape)))
    x = t(a)
    y = x.reshape(*target)
    np.testing.assert_array_equal(y.numpy(), a.reshape(target))
    np.testing.assert_array_equal(y.reshape(shape).numpy(), a)
    np.testing.assert_array_equal(x.reshape(-1).numpy(), a.ravel())


@FEW
@given(shapes, st.data())
def test_permute_inverse_round_trip(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    perm = data.draw(st.permutations(list(range(len(shape)))))
    inv = list(np.argsort(perm))
    y = t(a).permute(*perm)
    np.testing.assert_array_equal(y.numpy(), a.transpose(perm))
    np.testing.assert_array_equal(y.permute(inv).numpy(), a)


@FEW
@given(shapes, st.data())
def test_cat_split_round_trip(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    arrays = []
    for s in sizes:
        sh = list(shape)
        sh[dim] = s
        arrays.append(rng.standard_normal(sh))
    joined = flow.cat([t(a) for a in arrays], dim)
    np.testing.assert_array_equal(joined.numpy(), np.concatenate(arrays, dim))
    for piece, a in zip(joined.split(sizes, dim), arrays):
        np.testing.assert_array_equal(piece.numpy(), a)


@FEW
@given(shapes, st.data())
def test_expand_broadcasts_like_numpy(shape, data):
    small = [data.draw(st.sampled_from([1, s])) for s in shape]
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    a = rng.standard_normal(small)
    target = tuple(lead) + tuple(shape)
    x = flow.tensor(a, requires_grad=True)
    y = x.expand(*target)
    np.testing.assert_array_equal(y.detach().numpy(), np.broadcast_to(a, target))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(small, np.prod(target) / a.size))


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,words", [
    (lambda x: flow.cat([x, flow.zeros(2, 4, 4)], 2), ["cat", "(2, 3, 4)", "(2, 4, 4)"]),
    (lambda x: flow.cat([x, flow.zeros(2, 3)]), ["cat", "(2, 3)"]),
    (lambda x: flow.cat([x, x], 3), ["cat", "dim 3"]),
    (lambda x: flow.stack([x, flow.zeros(2, 3)]), ["stack", "equal size", "(2, 3)"]),
    (lambda x: x.split([1, 1], 2), ["split", "sum to", "(2, 3, 4)"]),
    (lambda x: x.split(0, 1), ["split", "positive"]),
    (lambda x: x.narrow(2, 3, 2), ["narrow", "exceeds", "(2, 3, 4)"]),
    (lambda x: x.squeeze(3), ["squeeze", "out of range"]),
    (lambda x: x.unsqueeze(4), ["unsqueeze", "out of range"]),
    (lambda x: x.flatten(2, 0), ["flatten", "end_dim"]),
    (lambda x: x.permute(0, 1), ["permute", "(2, 3, 4)"]),
    (lambda x: x.permute(0, 1, 1), ["transpose", "permutation"]),
    (lambda x: x.reshape(5, -1), ["reshape", "invalid", "(2, 3, 4)"]),
    (lambda x: x.repeat(2, 2), ["repeat", "smaller", "(2, 3, 4)"]),
    (lambda x: flow.pad(x, (1, 2, 3)), ["pad", "even"]),
    (lambda x: flow.pad(x, (4, 0), mode="reflect"), ["pad", "too large", "size 4"]),
    (lambda x: flow.pad(x, (1, 1), mode="wrap"), ["pad", "mode"]),
    (lambda x: flow.pad(x, (0, 0, -2, -2)), ["pad", "negative"]),
    (lambda x: x.roll((1, 2), 0), ["roll", "same length"]),
    (lambda x: x.flip(0, 0), ["flip", "multiple times"]),
    (lambda x: flow.tril(x[0, 0]), ["tril", "at least 2"]),
    (lambda x: x.t(), ["t", "<= 2"]),
    (lambda x: x.movedim((0, 1), 2), ["movedim", "same number"]),
    (lambda x: x.chunk(0), ["chunk", "positive"]),
])
def test_errors_name_op_and_shapes(call, words):
    with pytest.raises(OpError) as err:
        call(t(A))
    for w in words:
        assert w in str(err.value)


def test_type_errors():
    with pytest.raises(TypeError, match="cat: expected a sequence of tensors"):
        flow.cat(t(A))
    with pytest.raises(TypeError, match="stack"):
        flow.stack([t(A), A])
    with pytest.raises(ValueError, match="value"):
        flow.pad(t(A), (1, 1), mode="reflect", value=2.0)


def test_reshape_kernel_copies_a_strided_input_once_into_any_output():
    """The kernel (what Jobs and copies of non-viewable reshapes run) writes x's C-order
    elements into the output, contiguous or not."""
    from actorflow.ops.registry import get
    kernel = get("reshape").kernel_cpu
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)
    want = x.reshape(2, 12)
    out = np.empty((2, 12), np.float32)
    kernel([x], [out], {"shape": (2, 12)})
    np.testing.assert_array_equal(out, want)
    strided = np.empty((12, 2), np.float32).T  # a non-contiguous output
    kernel([x], [strided], {"shape": (2, 12)})
    np.testing.assert_array_equal(strided, want)
