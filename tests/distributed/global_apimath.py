"""Run under ``mpiexec -n N``: the SBP rules of the linalg solves/decompositions (batch
split), the scans (split along another dim), index_fill and histc (split input ->
partial-sum histogram) on global tensors against the same ops on the full tensors, values
and gradients. Prints ``OK rank R`` at the end."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PL = flow.placement("cpu", list(range(n)))
S0, S1, B, PS = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum
rng = np.random.default_rng(4)
U = 2 * n + 1


def check(got, want, what):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-9, atol=1e-9, err_msg=f"rank {r}: {what}")


def compare(what, fn, fulls, sbps, want_sbp):
    glo = [flow.tensor(f, placement=PL, sbp=s, requires_grad=f.dtype.kind == "f")
           for f, s in zip(fulls, sbps)]
    loc = [flow.tensor(f, requires_grad=f.dtype.kind == "f") for f in fulls]
    yg, yl = fn(*glo), fn(*loc)
    assert yg.sbp == (want_sbp,), f"rank {r}: {what}: sbp {yg.sbp}, want {want_sbp}"
    check(yg.numpy(), yl.numpy(), f"{what} values")
    if not yl.requires_grad:
        return
    w = rng.standard_normal(tuple(yl.shape))
    (yg * flow.tensor(w, placement=PL, sbp=B)).sum().backward()
    (yl * flow.tensor(w)).sum().backward()
    for k, (a, b) in enumerate(zip(glo, loc)):
        if b.grad is not None:
            check(a.grad.numpy(), b.grad.numpy(), f"{what} gradient of input {k}")


m = rng.standard_normal((U, 3, 3))
spd = m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3)
compare("solve", flow.linalg.solve, [spd, rng.standard_normal((U, 3, 2))], [S0, S0], S0)
compare("cholesky", flow.linalg.cholesky, [spd], [S0], S0)
compare("qr R", lambda a: flow.linalg.qr(a)[1], [rng.standard_normal((U, 4, 3))], [S0], S0)
compare("slogdet", lambda a: flow.linalg.slogdet(a)[1], [spd], [S0], S0)
compare("logcumsumexp", lambda x: flow.logcumsumexp(x, 1), [rng.standard_normal((U, 4))],
        [S0], S0)
compare("cummax", lambda x: flow.cummax(x, 0).values, [rng.standard_normal((4, U))], [S1], S1)
compare("index_fill", lambda x, i: flow.index_fill(x, 1, i, 0.5),
        [rng.standard_normal((U, 4)), np.array([0, 2])], [S0, B], S0)
h = flow.histc(flow.tensor(rng.standard_normal((U, 4)), placement=PL, sbp=S0), 5, -1, 1)
assert h.sbp == (PS,), f"rank {r}: histc sbp {h.sbp}"
full = flow.tensor(h.numpy())
check(h.to_global(sbp=B).to_local().numpy(), full.numpy(), "histc")
flow.synchronize()
print(f"OK rank {r}", flush=True)
