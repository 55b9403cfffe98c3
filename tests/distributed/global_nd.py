"""Run under ``mpiexec -n N`` (N = 2 or 4): 2-D SBP. Every boxing between 2-D SBPs against
NumPy's nested layout (axis 0 splits first, axis 1 splits each part), values and gradients,
for even and uneven shapes; to_global from local tensors and creation ops; ops through the
eager-global interpreter against one process, with the signature they should pick. Prints
``OK rank R`` at the end."""
import itertools

import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n in (2, 4), "run me under mpiexec -n 2 or 4"
S0, S1, B, PS = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
# hierarchies (1, 2) and (2, 1) on 2 ranks (OneFlow's own tests use (1, 2)); (2, 2) on 4 ranks,
# in a scrambled order, and (1, 2) on a part of the world
PLS = ([flow.placement("cpu", [[0, 1]]), flow.placement("cpu", [[1], [0]])] if n == 2 else
       [flow.placement("cpu", [[0, 1], [2, 3]]), flow.placement("cpu", [[3, 1], [0, 2]]),
        flow.placement("cpu", [[2, 1]])])
rng = np.random.default_rng(0)


def check(got, want, what, tol=1e-9):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def coords(pl):
    if r not in pl.flat_ranks:
        return None
    return np.unravel_index(pl.flat_ranks.index(r), pl.hierarchy)


def local_of(full, sbp, pl, grad=False):
    """This rank's shard of ``full`` in the nested layout; a partial sum gives group member c
    the share (c + 1) / (1 + ... + m) of its part. ``grad``: the gradient a local tensor gets
    through to_global (broadcast: the group's first member; partial sum: the whole part)."""
    part = full
    for s, m, c in zip(sbp, pl.hierarchy, coords(pl)):
        if s.is_split:
            part = np.array_split(part, m, axis=s.dim)[c]
        elif s.is_partial_sum and not grad:
            part = part * (c + 1) / (m * (m + 1) / 2)
        elif s.is_broadcast and grad and c != 0:
            part = np.zeros_like(part)
    return part


SBPS = [S0, S1, B, PS]
ND = list(itertools.product(SBPS, SBPS))
for pl in PLS:
    inside = coords(pl) is not None
    for shape in [(4, 6), (5, 3)]:  # even; uneven, both axes split dim 0 unevenly
        full, dout = rng.standard_normal(shape), rng.standard_normal(shape)
        for src in ND:
            x = flow.tensor(local_of(full, src, pl) if inside else np.zeros(0),
                            requires_grad=True)
            g = x.to_global(pl, src)
            assert g.sbp == src and g.shape == shape, (g.sbp, g.shape)
            for dst in ND:
                y = g.to_global(sbp=dst)
                assert y.sbp == dst and y.shape == shape
                what = f"{pl.ranks} {src}->{dst} {shape}"
                check(y.numpy(), full, f"values {what}")
                if inside and PS not in dst:
                    check(y.to_local().numpy(), local_of(full, dst, pl), f"shard {what}")
            # gradient through one boxing of each kind and to_global(local)
            dst = ND[(ND.index(src) * 7 + 3) % len(ND)]
            w = flow.tensor(dout, placement=pl, sbp=(B, B))
            (g.to_global(sbp=dst) * w).sum().backward()
            if inside:
                check(x.grad.numpy(), local_of(dout, src, pl, grad=True),
                      f"gradient {pl.ranks} {src}->{dst} {shape}")
    # creation ops: the values of one process, whatever the layout
    for sbp in ND:
        check(flow.ones(3, 5, placement=pl, sbp=sbp).numpy(), np.ones((3, 5)), f"ones {sbp}")
        check(flow.arange(7, placement=pl, sbp=tuple(S0 if s == S1 else s for s in sbp))
              .numpy(), np.arange(7), f"arange {sbp}")
        flow.manual_seed(5)
        a = flow.randn(5, 6, placement=pl, sbp=sbp).numpy()
        flow.manual_seed(5)
        check(a, flow.randn(5, 6).numpy(), f"randn {sbp}")
        if inside and PS not in sbp:
            z = flow.tensor(np.arange(30.0).reshape(5, 6), placement=pl, sbp=sbp)
            check(z.to_local().numpy(), local_of(np.arange(30.0).reshape(5, 6), sbp, pl),
                  f"tensor shard {sbp}")


def compare(pl, what, fn, fulls, sbps, want_sbp=None):
    """fn on global tensors laid out as ``sbps`` == fn on the full tensors, values and
    gradients of every floating input."""
    glo = [flow.tensor(f, placement=pl, sbp=s, requires_grad=f.dtype.kind == "f")
           for f, s in zip(fulls, sbps)]
    loc = [flow.tensor(f, requires_grad=f.dtype.kind == "f") for f in fulls]
    yg, yl = fn(*glo), fn(*loc)
    if want_sbp is not None:
        assert yg.sbp == want_sbp, f"rank {r}: {what}: sbp {yg.sbp}, want {want_sbp}"
    check(yg.numpy(), yl.numpy(), f"{what} values")
    w = rng.standard_normal(tuple(yl.shape))
    (yg * flow.tensor(w, placement=pl, sbp=(B, B))).sum().backward()
    (yl * flow.tensor(w)).sum().backward()
    for k, (a, b) in enumerate(zip(glo, loc)):
        if b.grad is not None:
            assert a.grad.is_global and a.grad.shape == b.grad.shape
            check(a.grad.numpy(), b.grad.numpy(), f"{what} gradient of input {k}")


def rnd(*shape):
    return rng.standard_normal(shape)


for pl in PLS:
    U = 5  # uneven over 2
    compare(pl, "relu (S0, S1)", flow.relu, [rnd(U, 7)], [(S0, S1)], (S0, S1))
    compare(pl, "exp (S0, S0)", flow.exp, [rnd(U, 3)], [(S0, S0)], (S0, S0))
    compare(pl, "add (S1, P) + (S1, P)", flow.add, [rnd(3, U), rnd(3, U)], [(S1, PS)] * 2,
            (S1, PS))
    compare(pl, "mul (S0, B) * B row", flow.mul, [rnd(U, 3), rnd(1, 3)], [(S0, B), (B, B)],
            (S0, B))
    compare(pl, "mul (S0, S1) * (S1, S0) boxed", flow.mul, [rnd(4, 4), rnd(4, 4)],
            [(S0, S1), (S1, S0)])
    compare(pl, "sum over dim 0 of (S0, S0)", lambda x: x.sum(dim=0), [rnd(U, 3)],
            [(S0, S0)], (PS, PS))
    compare(pl, "sum over dim 1 of (S0, S1)", lambda x: x.sum(dim=1), [rnd(U, 3)],
            [(S0, S1)], (S0, PS))
    compare(pl, "mean over dim 0 of (S0, S0), uneven", lambda x: x.mean(dim=0), [rnd(7, 3)],
            [(S0, S0)], (PS, PS))
    compare(pl, "mean of all of (S1, S0)", lambda x: x.mean(), [rnd(U, 3)], [(S1, S0)],
            (PS, PS))
    # matmul: data parallel on axis 0, model parallel on axis 1
    compare(pl, "matmul (S0, B) x (B, S1)", flow.matmul, [rnd(U, 4), rnd(4, 3)],
            [(S0, B), (B, S1)], (S0, S1))
    compare(pl, "matmul (S0, S1) x (B, S0) -> (S0, P)", flow.matmul, [rnd(U, 4), rnd(4, 3)],
            [(S0, S1), (B, S0)], (S0, PS))
    compare(pl, "linear (S0, B), weight (B, S0)",
            lambda x, wt, b: nnf.linear(x, wt, b), [rnd(U, 4), rnd(6, 4), rnd(6)],
            [(S0, B), (B, S0), (B, S0)], (S0, S1))
    compare(pl, "softmax (S0, S0) along dim 1", lambda x: flow.softmax(x, dim=1),
            [rnd(U, 4)], [(S0, S0)], (S0, S0))
    compare(pl, "reshape (S0, S0), uneven", lambda x: x.reshape(x.shape[0], 2, 3), [rnd(U, 6)],
            [(S0, S0)], (S0, S0))
    compare(pl, "transpose (S0, S1)", lambda x: x.t(), [rnd(U, 4)], [(S0, S1)], (S1, S0))
    compare(pl, "median (no rule) (S0, B)", lambda x: flow.median(x), [rnd(U, 3)],
            [(S0, B)], (B, B))

# a small model: batch split over axis 0, the hidden layer split over axis 1
pl = PLS[0]
X, Y = rnd(8, 5), rnd(8, 2)
W1, W2 = rnd(5, 6) * 0.3, rnd(6, 2) * 0.3
w1l, w2l = flow.tensor(W1, requires_grad=True), flow.tensor(W2, requires_grad=True)
w1g = flow.tensor(W1, placement=pl, sbp=(B, S1), requires_grad=True)
w2g = flow.tensor(W2, placement=pl, sbp=(B, S0), requires_grad=True)
for _ in range(3):
    for w1, w2, x, y in ((w1l, w2l, flow.tensor(X), flow.tensor(Y)),
                         (w1g, w2g, flow.tensor(X, placement=pl, sbp=(S0, B)),
                          flow.tensor(Y, placement=pl, sbp=(S0, B)))):
        loss = ((flow.tanh(x @ w1) @ w2 - y) ** 2).mean()
        loss.backward()
        with flow.no_grad():
            for w in (w1, w2):
                w.sub_(w.grad * 0.1)
                w.grad.zero_()
check(w1g.numpy(), w1l.numpy(), "2-D model parallel training, w1")
check(w2g.numpy(), w2l.numpy(), "2-D model parallel training, w2")
assert w1g.sbp == (B, S1) and w2g.sbp == (B, S0)

# errors
try:
    flow.tensor(np.ones((r + 1, 2))).to_global(PLS[0], (S0, S0))
    raise AssertionError("shards that are no layout should raise")
except ValueError as e:
    assert "not the shards of one tensor" in str(e), e
try:
    flow.ones(2, placement=PLS[0], sbp=B)
    raise AssertionError("one sbp for two axes should raise")
except ValueError as e:
    assert "one per placement dim" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
