"""Run under ``mpiexec -n 2``: ``*_like`` creation with OneFlow's placement/sbp arguments (a
local input made global, one of placement/sbp taken from a global input, device making it
local) eagerly and in nn.Graph, and max_unpool of a global input (its zero output is global on
the input's placement). Prints ``OK rank R``."""
import numpy as np
import torch

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement("cpu", ranks=[0, 1])
PL0 = flow.placement("cpu", ranks=[0])
S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast

loc = flow.randn(8, 6)
for fn, val in ((flow.zeros_like, 0.0), (flow.ones_like, 1.0),
                (lambda x, **kw: flow.full_like(x, 2.5, **kw), 2.5)):
    y = fn(loc, placement=PL, sbp=S1)
    assert (y.placement, y.sbp, tuple(y.shape)) == (PL, (S1,), (8, 6)), y
    assert tuple(y.to_local().shape) == (8, 3)
    np.testing.assert_array_equal(y.numpy(), np.full((8, 6), val, np.float32))
    g = fn(y, sbp=B)  # the placement comes from the global input
    assert (g.placement, g.sbp) == (PL, (B,))
    g = fn(y, placement=PL0)  # the sbp comes from it
    assert (g.placement, g.sbp) == (PL0, (S1,))
    assert fn(y, device="cpu").is_local
    assert fn(y).sbp == (S1,)
e = flow.empty_like(flow.full_like(loc, 1.0, placement=PL, sbp=S0))
assert (e.placement, e.sbp) == (PL, (S0,))
try:
    flow.zeros_like(loc, sbp=B)
    raise AssertionError("a local input with sbp alone must be refused")
except ValueError as err:
    assert "zeros_like" in str(err)


class Like(flow.nn.Graph):
    def build(self):
        return flow.full_like(flow.randn(8, 8), 1.0, placement=PL, sbp=S0)


y = Like()()
assert (y.placement, y.sbp) == (PL, (S0,)), y.sbp
np.testing.assert_array_equal(y.numpy(), np.ones((8, 8), np.float32))

# max_unpool2d of a split global input against PyTorch
a = np.random.default_rng(1).random((4, 4, 6, 6))
for sbp in (S0, S1, B):
    x = flow.tensor(a, placement=PL, sbp=sbp)
    v, i = flow.nn.functional.max_pool2d(x, 2, return_indices=True)
    z = flow.nn.functional.max_unpool2d(v, i, 2)
    assert z.is_global and z.placement == PL
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(a), 2, return_indices=True)
    np.testing.assert_allclose(z.numpy(), torch.nn.functional.max_unpool2d(tv, ti, 2).numpy())
print(f"OK rank {r}", flush=True)
