"""Run under ``mpiexec -n N``: to_global's check_meta (the ranks agree on dtype, shape,
placement and sbp, or every rank raises a RuntimeError naming them), check_meta=False,
grad_sbp and copy, to_local(copy=True), new_* of global tensors, flow.utils.global_view.
Prints ``OK rank R``."""
import warnings

import numpy as np

import actorflow as flow
from actorflow.process import groups

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
P = flow.placement.all("cpu")
B, S0, S1, PS = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1), flow.sbp.partial_sum


def raises(fn, *parts):
    """fn() raises a RuntimeError whose message holds every part, on this rank."""
    try:
        fn()
    except RuntimeError as e:
        for p in parts:
            assert p in str(e), (p, str(e))
        return str(e)
    raise AssertionError(f"rank {r}: expected a RuntimeError naming {parts}")


# OneFlow's test_local_to_global_with_invalid_size: rank 0 holds (2, 4), the others (4, 4)
x = flow.zeros(2, 4) if r == 0 else flow.zeros(4, 4)
raises(lambda: x.to_global(placement=P, sbp=S0),
       "Sizes of tensors in dimension 0 must be same or match balanced split distribution",
       "rank 0: (2, 4)", "rank 1: (4, 4)")
raises(lambda: x.to_global(placement=P, sbp=S1),
       "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 4 "
       "for tensor on rank 1!")
raises(lambda: x.to_global(placement=P, sbp=B), "to_global", "needs local tensors of one shape",
       "rank 0: (2, 4)")
raises(lambda: x.to_global(placement=P, sbp=PS), "needs local tensors of one shape")
# dtypes, ranks of dims, sbp and placement the ranks passed
y = flow.zeros(3, dtype=flow.float64 if r == 1 else flow.float32)
raises(lambda: y.to_global(P, B), "different local tensor dtypes", "rank 0: actorflow.float32",
       "rank 1: actorflow.float64")
z = flow.zeros(2, 2) if r == 0 else flow.zeros(2, 2, 1)
raises(lambda: z.to_global(P, S0), "different numbers of dims")
raises(lambda: flow.zeros(2, 2).to_global(P, B if r == 0 else S0), "different sbps",
       "rank 0: (('B',),)")
# ranks given in another order name the same placement (OneFlow sorts them): no mismatch
rev = flow.placement("cpu", list(reversed(range(n))))
assert rev == P and flow.zeros(2).to_global(rev, B).placement == P
# OneFlow's test_inconsistent_placement: the other ranks pass a placement without themselves
pl = P if r == 0 else flow.placement("cpu", [0])
raises(lambda: flow.randn(2, 3).to_global(pl, S1), "Inconsistent parallel description",
       f"rank 0: ranks {tuple(range(n))}", "rank 1: ranks (0,)")
# ... and on global tensors with check_meta=True (default False there)
g = flow.ones(4, 2, placement=P, sbp=B)
raises(lambda: g.to_global(sbp=B if r == 0 else S0, check_meta=True), "different sbps")
# after each error the ranks are still in step: a collective works
t = flow.tensor([float(r)])
flow.comm.all_reduce(t)
assert t.item() == n * (n - 1) / 2

# balanced uneven sizes pass the check; values as NumPy
sizes = [len(c) for c in np.array_split(np.arange(5 * n - 1), n)]
full = np.arange((5 * n - 1) * 3, dtype=np.float64).reshape(-1, 3)
mine = np.array_split(full, n)[r]
np.testing.assert_array_equal(flow.tensor(mine).to_global(P, S0).numpy(), full)

# check_meta=False: no exchange; each rank's tensor taken to be of its own shape
calls = []
orig = groups.allgather_object
groups.allgather_object = lambda *a: calls.append(a[1]) or orig(*a)
try:
    loc = flow.tensor(np.full((2, 3), float(r)))
    gs = loc.to_global(P, S0, check_meta=False)
    assert calls == [], calls
    gb = loc.to_global(P, B, check_meta=False)
    assert calls == [], calls
    loc.to_global(P, S0)
    assert calls == ["to_global metadata check"], calls
finally:
    groups.allgather_object = orig
assert gs.shape == (2 * n, 3)
np.testing.assert_array_equal(gs.numpy(), np.repeat(np.arange(n, dtype=np.float64), 2)[:, None]
                              * np.ones((1, 3)))
np.testing.assert_array_equal(gb.numpy(), np.zeros((2, 3)))

# grad_sbp: the gradient of the input is boxed to grad_sbp, not to the input's sbp; a leaf's
# accumulated grad then takes the leaf's sbp (OneFlow's AccGrad4LeafTensor)
w = np.arange(2 * n * 3, dtype=np.float64).reshape(2 * n, 3)
x = flow.tensor(w, placement=P, sbp=S0, requires_grad=True)
x0 = x * 1.0
x0.retain_grad()
y = x0.to_global(sbp=B, grad_sbp=B)
assert y.sbp == (B,)
(y * flow.tensor(w, placement=P, sbp=B)).sum().backward()
assert x0.grad.sbp == (B,) and x.grad.sbp == (S0,), (x0.grad.sbp, x.grad.sbp)
np.testing.assert_array_equal(x.grad.numpy(), w)
x = flow.tensor(w, placement=P, sbp=S0, requires_grad=True)
(x.to_global(sbp=B) * 2.0).sum().backward()
assert x.grad.sbp == (S0,), x.grad.sbp  # default: the input's sbp
# the same sbp with another grad_sbp still records a node (OneFlow's test_global_expand)
x = flow.tensor(w, placement=P, sbp=B, requires_grad=True)
y = x.to_global(sbp=B, grad_sbp=S1)
assert y is not x and y.grad_fn is not None
(y * 3.0).sum().backward()
assert x.grad.sbp == (B,), x.grad.sbp  # the leaf's sbp
np.testing.assert_array_equal(x.grad.numpy(), np.full(w.shape, 3.0))

# copy: a new tensor (own storage) even when nothing moves; without it, the tensor itself
g = flow.tensor(w, placement=P, sbp=S0)
assert g.to_global(sbp=S0) is g
c = g.to_global(sbp=S0, copy=True)
assert c is not g and c.sbp == (S0,)
c.to_local().fill_(-1.0)
np.testing.assert_array_equal(g.numpy(), w)
loc = flow.tensor(np.full((2,), float(r)))
lc = loc.to_global(P, S0, copy=True)
lc.to_local().fill_(7.0)
np.testing.assert_array_equal(loc.numpy(), np.full((2,), float(r)))
la = loc.to_global(P, S0)
la.to_local().fill_(5.0)  # without copy the shard is the local tensor itself (OneFlow's)
np.testing.assert_array_equal(loc.numpy(), np.full((2,), 5.0))
sh = g.to_local(copy=True)
sh.fill_(9.0)
np.testing.assert_array_equal(g.numpy(), w)
np.testing.assert_array_equal(g.to_local().numpy(), np.array_split(w, n)[r])
# to_local(copy=True) is differentiable
x = flow.tensor(w, placement=P, sbp=S0, requires_grad=True)
(x.to_local(copy=True) * 2.0).sum().backward()
np.testing.assert_array_equal(x.grad.numpy(), np.full(w.shape, 2.0))
# a rank outside the placement takes the placement's shape and dtype (OneFlow's
# test_to_global_broadcast_shape_dtype)
x = flow.ones(4, 4, dtype=flow.int32) if r == 0 else flow.zeros(1)
y = x.to_global(flow.placement("cpu", [0]), B)
assert (y.shape, y.dtype) == ((4, 4), flow.int32), (y.shape, y.dtype)
np.testing.assert_array_equal(y.numpy(), np.ones((4, 4), np.int32))

# new_* of a global tensor keep its placement and sbp (a split dim the new shape lacks:
# broadcast; partial_sum: broadcast), as OneFlow's
g = flow.randn(4, 4, placement=P, sbp=S0)
for t, want in [(g.new_tensor([[1, 2], [3, 4]]), [[1, 2], [3, 4]]), (g.new_zeros(2, 3), 0),
                (g.new_ones(4), 1), (g.new_full((2, 2), 5.0), 5)]:
    assert t.placement == P and t.sbp == (S0,) and t.dtype == g.dtype, (t.placement, t.sbp)
    np.testing.assert_array_equal(t.numpy(), np.broadcast_to(np.asarray(want, np.float32),
                                                             t.shape))
assert g.new_ones(()).sbp == (B,)
assert g.to_global(sbp=PS).new_zeros(3).sbp == (B,)
t = g.new_tensor([[1, 2], [3, 4]], placement=P, sbp=B, requires_grad=True)
assert t.sbp == (B,) and t.requires_grad and t.is_leaf
assert flow.zeros(2).new_tensor([1.0]).is_local

# flow.utils.global_view: to_global / to_local of nested structures
gv = flow.utils.global_view
a, b = flow.tensor(np.full((2, 3), float(r))), flow.zeros(4)
nested = {"a": a, "rest": [b, None, "text", (flow.ones(2),)]}
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    g = gv.to_global(nested, placement=P, sbp=S0)
assert any("str is not a tensor" in str(w.message) for w in seen), [str(w.message) for w in seen]
assert g["rest"][1] is None and g["rest"][2] == "text" and isinstance(g["rest"][3], tuple)
for t in (g["a"], g["rest"][0], g["rest"][3][0]):
    assert t.is_global and t.placement == P and t.sbp == (S0,)
np.testing.assert_array_equal(g["a"].numpy(), np.repeat(np.arange(n, dtype=np.float64), 2)[:, None]
                              * np.ones((1, 3)))
back = gv.to_local(g, warn_on_non_tensor_leaf=False)
np.testing.assert_array_equal(back["a"].numpy(), a.numpy())
assert back["rest"][0].is_local and back["rest"][2] == "text"
# a function picks each tensor's sbp; a global input is boxed
pick = gv.to_global([flow.ones(1, 2), flow.ones(4)], placement=P,
                    sbp=lambda whole, t: S1 if t.shape == (1, 2) else B)
assert [t.sbp for t in pick] == [(S1,), (B,)], [t.sbp for t in pick]
assert gv.to_global(pick[1], sbp=S0).sbp == (S0,)
assert gv.to_global(7, placement=P, sbp=B, warn_on_non_tensor_leaf=False) == 7
try:
    gv.to_global(flow.ones(2), placement=None, sbp=None)
    raise AssertionError("a local tensor without placement and sbp should raise")
except ValueError:
    pass
try:
    gv.to_global(flow.ones(2), placement=P, sbp=(B, 0))
    raise AssertionError("a bad sbp should raise")
except TypeError:
    pass

# global_id(): the same id for the same tensor on every rank, kept through in-place writes
ga = flow.ones(4, placement=P, sbp=S0)
gb = ga.to_global(sbp=B)
ids = [ga.global_id(), gb.global_id()]
ga.add_(1)
assert ga.global_id() == ids[0] and gb.global_id() != ids[0], ids
seen = flow.tensor([ids]).to_global(placement=P, sbp=S0).numpy()  # every rank's ids, stacked
assert (seen == np.array(ids)).all(), seen

flow.synchronize()
print(f"OK rank {r}", flush=True)
