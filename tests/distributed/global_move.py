"""Run under ``mpiexec -n N`` (N = 2 or 4): moving global tensors between placements whose rank
sets are disjoint, overlap, or contain one another (and between 1-D and 2-D placements),
against NumPy, values and gradients (the gradient moves back). Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n in (2, 4), "run me under mpiexec -n 2 or 4"
S0, S1, B, PS = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum


def pl(ranks):
    return flow.placement("cpu", ranks)


MOVES = ([([0], [1]), ([0, 1], [1]), ([1], [0, 1]), ([0, 1], [1, 0]), ([0, 1], [[0, 1]]),
          ([[1], [0]], [0])] if n == 2 else
         [([0, 1], [2, 3]), ([0, 1, 2], [1, 2, 3]), ([1, 2], [0, 1, 2, 3]),
          ([0, 1, 2, 3], [3, 1]), ([[0, 1], [2, 3]], [1, 2]), ([3], [[2, 0], [1, 3]])])
rng = np.random.default_rng(0)


def check(got, want, what, tol=1e-9):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def sbps_for(p):
    one = [S0, S1, B, PS]
    return [(s,) for s in one] if len(p.hierarchy) == 1 else [(S0, S1), (B, S0), (PS, B)]


def shard(full, sbp, p):
    """This rank's shard of ``full`` laid out as ``sbp`` (no partial sums) on ``p``."""
    c = np.unravel_index(p.flat_ranks.index(r), p.hierarchy)
    for s, m, k in zip(sbp, p.hierarchy, c):
        if s.is_split:
            full = np.array_split(full, m, axis=s.dim)[k]
    return full


for src_r, dst_r in MOVES:
    src, dst = pl(src_r), pl(dst_r)
    for shape in [(4, 6), (5, 3)]:
        full, dout = rng.standard_normal(shape), rng.standard_normal(shape)
        for a in sbps_for(src):
            for b in sbps_for(dst):
                what = f"{src_r} {a} -> {dst_r} {b} {shape}"
                x = flow.tensor(full, placement=src, sbp=a, requires_grad=True)
                y = x.to_global(placement=dst, sbp=b)
                assert y.placement == dst and y.sbp == b and y.shape == shape, what
                check(y.numpy(), full, f"values {what}")
                if r not in dst.flat_ranks:
                    assert y.to_local().numel() == 0, what
                elif PS not in b:
                    check(y.to_local().numpy(), shard(full, b, dst), f"shard {what}")
                w = flow.tensor(dout, placement=dst, sbp=(B,) * len(b))
                (y * w).sum().backward()
                assert x.grad.placement == src and x.grad.sbp == a, (what, x.grad.sbp)
                check(x.grad.numpy(), dout, f"gradient {what}")

# the sbp is kept when none is given; ops then run on the new placement
src, dst = pl(MOVES[0][0]), pl(MOVES[0][1])
x = flow.tensor(np.arange(6.0).reshape(3, 2), placement=src, sbp=S0)
y = x.to_global(placement=dst)
assert y.sbp == (S0,) and y.placement == dst
check((y * 2).sum(dim=0).numpy(), [12.0, 18.0], "an op after a move")
try:
    x + y
    raise AssertionError("two placements in one op should raise")
except ValueError as e:
    assert "different placements" in str(e) and "to_global(placement=" in str(e), e
try:
    x.to_global(placement=pl([[0, 1]]) if n == 2 else pl([[0, 1], [2, 3]]))
    raise AssertionError("a move to another hierarchy without sbp should raise")
except ValueError as e:
    assert "needs sbp" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
