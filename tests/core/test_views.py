"""The view contract (PyTorch's): ``view`` always shares memory with its input and raises when
the input's strides don't allow the new shape; ``reshape`` copies then. Every view op aliases
where PyTorch's does (writes through the result reach the base and the other way round)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.shape import view_strides
from tests.helpers import FnGraph, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
A = np.arange(24, dtype=np.float64).reshape(2, 3, 4)

BASES = {
    "contiguous": lambda lib: lib.tensor(A.copy()),
    "transposed": lambda lib: lib.tensor(A.copy()).transpose(0, 1),
    "permuted": lambda lib: lib.tensor(A.copy()).permute(2, 0, 1),
    "sliced": lambda lib: lib.tensor(A.copy())[:, 1:, ::2],
    "expanded": lambda lib: lib.tensor(A[:, :1].copy()).expand(2, 3, 4),
    "unsqueezed_t": lambda lib: lib.tensor(A[0].copy()).t().unsqueeze(1),
}


def _targets(shape):
    """Every way to write the elements of ``shape`` as 1, 2 or 3 dims (and a -1 form)."""
    n = int(np.prod(shape))
    out = [(-1,), (n,)]
    for a in range(1, n + 1):
        if n % a == 0:
            out.append((a, n // a))
            out.append((a, -1))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    out.append((a, b, n // a // b))
    return out


@needs_torch
@pytest.mark.parametrize("base", sorted(BASES))
def test_view_raises_or_aliases_exactly_as_pytorch(base):
    x, tx = BASES[base](flow), BASES[base](torch)
    assert x.stride() == tx.stride()
    for shape in _targets(tuple(tx.shape)):
        try:
            want = tx.view(shape)
        except RuntimeError:
            with pytest.raises(RuntimeError, match=r"view: .*use \.reshape"):
                x.view(shape)
            copied = x.reshape(shape)  # reshape copies instead
            np.testing.assert_array_equal(copied.numpy(), tx.reshape(shape).numpy())
            continue
        got = x.view(shape)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        sized = [i for i, n in enumerate(want.shape) if n > 1]  # size-1 strides are free
        assert [got.stride()[i] for i in sized] == [want.stride()[i] for i in sized], shape
        assert got.data_ptr() == x.data_ptr()


@pytest.mark.parametrize("make", [
    lambda x: x.view(2, 2, 3, 2),          # splits a dim of a transposed tensor
    lambda x: x.view(4, 6),                # merges the two dims still contiguous together
    lambda x: x.view_as(flow.zeros(4, 6)),
    lambda x: x.view(4, 1, 6),
], ids=["split", "merge", "view_as", "merge_unsqueeze"])
def test_legal_views_of_a_permuted_tensor_write_through_both_ways(make):
    base = flow.tensor(A.copy())
    x = base.permute(2, 0, 1)  # (4, 2, 3): dims 1 and 2 are still contiguous together
    v = make(x)
    assert v.data_ptr() == base.data_ptr()
    v.mul_(-1)  # through the view into the base
    np.testing.assert_array_equal(base.numpy(), -A)
    base.add_(100)  # through the base into the view
    np.testing.assert_array_equal(v.numpy(), (100 - A).transpose(2, 0, 1).reshape(v.shape))


def test_illegal_view_raises_and_leaves_reshape_copying():
    base = flow.tensor(A.copy())
    t = base.transpose(1, 2)
    with pytest.raises(RuntimeError, match=r"view: shape \(24,\) is not compatible.*"
                                           r"strides \(12, 1, 4\).*reshape"):
        t.view(-1)
    with pytest.raises(RuntimeError, match="view"):
        t.view_as(flow.zeros(2, 12))
    r = t.reshape(-1)
    r.fill_(0)  # a copy: the base keeps its values
    np.testing.assert_array_equal(base.numpy(), A)
    np.testing.assert_array_equal(t.contiguous().view(-1).numpy(), A.transpose(0, 2, 1).ravel())


def test_view_gradients_flow_through_legal_views_of_non_contiguous_tensors():
    x = flow.tensor(A.copy(), requires_grad=True)
    y = x.permute(2, 0, 1).view(4, 6)
    (y * flow.arange(24.0, dtype=flow.float64).view(4, 6)).sum().backward()
    want = np.arange(24.0).reshape(4, 2, 3).transpose(1, 2, 0)
    np.testing.assert_array_equal(x.grad.numpy(), want)


@needs_torch
@pytest.mark.parametrize("base", ["contiguous", "transposed", "permuted", "sliced"])
def test_every_view_op_aliases_where_pytorch_does(base):
    ops = {
        "view_split": lambda x: x.view(1, *x.shape),
        "unflatten": lambda x: x.unflatten(0, (1, -1)),
        "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
        "unsqueeze": lambda x: x.unsqueeze(1),
        "transpose": lambda x: x.transpose(0, 2),
        "swapaxes": lambda x: x.swapaxes(0, 1),
        "permute": lambda x: x.permute(1, 2, 0),
        "movedim": lambda x: x.movedim(0, 2),
        "t": lambda x: x[0].t(),
        "T": lambda x: x[0].T,
        "narrow": lambda x: x.narrow(2, 1, 1),
        "basic_index": lambda x: x[1, :, 1:],
        "none_index": lambda x: x[None, ..., None],
        "split": lambda x: x.split(1, 0)[1],
        "chunk": lambda x: x.chunk(2, 2)[0],
        "unbind": lambda x: x.unbind(0)[1],
        "detach": lambda x: x.detach(),
        "flatten_inner": lambda x: x.flatten(1) if x.stride(1) == x.stride(2) * x.shape[2]
        else x.flatten(0, 0),
        "expand": lambda x: x[:, :1].expand(-1, 3, -1),
    }
    for name, op in ops.items():
        x, tx = BASES[base](flow), BASES[base](torch)
        y, ty = op(x), op(tx)
        x.mul_(-1)
        tx.mul_(-1)
        assert ty.data_ptr() >= tx.untyped_storage().data_ptr()  # torch aliases them all
        np.testing.assert_array_equal(y.numpy(), ty.numpy(), err_msg=name)
        if name != "expand":  # an expanded tensor is written through its base only
            y.add_(1000)
            ty.add_(1000)
            np.testing.assert_array_equal(x.numpy(), tx.numpy(), err_msg=name)


def test_reshape_and_flatten_copy_only_when_they_must():
    base = flow.tensor(A.copy())
    aliasing = [base.reshape(6, 4), base.flatten(), base.permute(0, 2, 1).flatten(0, 0),
                base[:, :, 1:].reshape(6, 3)]
    copying = [base.transpose(0, 1).reshape(-1), base.permute(2, 0, 1).flatten()]
    base.fill_(-1)
    for t in aliasing:
        assert (t.numpy() == -1).all()
    for t in copying:
        assert not (t.numpy() == -1).any()


def test_view_inside_graph_matches_eager():
    def f(x):
        return (x.view(4, 6) * 2).view(-1), x.view_as(flow.zeros(24)).sum()

    x = flow.tensor(A.reshape(4, 6).copy())
    eager = f(x)
    lazy = FnGraph(f)(x)
    for e, g in zip(eager, lazy):
        np.testing.assert_array_equal(g.numpy(), e.numpy())


@needs_torch
def test_view_strides_match_pytorch_on_strided_layouts():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(1, 4, rng.integers(1, 5)))
        t = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
        t = t.permute(*rng.permutation(len(shape)).tolist())
        if rng.random() < 0.4 and t.shape[-1] > 1:
            t = t[..., 1:]
        if rng.random() < 0.3:
            t = t.unsqueeze(0).expand(2, *t.shape)
        n = t.numel()
        for new in itertools.islice(_targets(tuple(t.shape)), 12):
            new = tuple(n // int(np.prod([s for s in new if s != -1])) if s == -1 else s
                        for s in new)
            try:
                want = t.view(new).stride()
            except RuntimeError:
                want = None
            got = view_strides(tuple(t.shape), t.stride(), new)
            assert (got is None) == (want is None), (tuple(t.shape), t.stride(), new)
            if got is not None:
                assert all(g == w for g, w, s in zip(got, want, new) if s > 1)
            checked += 1
    assert checked > 1000
    assert view_strides((0, 3), (3, 1), (3, 0)) is not None  # empty tensors view as anything
    assert view_strides((), (), (1, 1)) == (1, 1)


def test_view_size_and_permute_dims_keywords():
    x = flow.tensor(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(x.view(size=(4, 6)).numpy(), np.arange(24.0).reshape(4, 6))
    np.testing.assert_array_equal(x.permute(dims=[2, 0, 1]).numpy(),
                                  np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1))
    np.testing.assert_array_equal(flow.permute(x, dims=(1, 0, 2)).numpy(),
                                  np.arange(24.0).reshape(2, 3, 4).transpose(1, 0, 2))
    with pytest.raises(TypeError, match="both positionally and as size="):
        x.view(4, 6, size=(4, 6))
    with pytest.raises(TypeError, match="unexpected keyword argument 'perm'"):
        x.permute(perm=(0, 1, 2))
