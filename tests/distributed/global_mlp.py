"""Run under ``mpiexec -n N``: a small MLP written with global tensors (parameters broadcast,
the batch split along dim 0) trains to the same parameters as one process on the full batch.
Prints ``OK rank R`` at the end."""
import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(7)
N, D, H, C = 4 * n + 3, 6, 8, 4   # an uneven batch
X = rng.standard_normal((N, D)).astype(np.float32)
Y = rng.integers(0, C, size=N)
init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((H, D), (H,), (C, H), (C,))]


def train(make, x, y, steps=15, lr=0.2):
    params = [make(p) for p in init]
    for _ in range(steps):
        w1, b1, w2, b2 = params
        h = flow.relu(nnf.linear(x, w1, b1))
        loss = nnf.cross_entropy(nnf.linear(h, w2, b2), y, reduction="sum") / N
        loss.backward()
        with flow.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
    return params, loss


glob, gloss = train(lambda a: flow.tensor(a, placement=PL, sbp=B, requires_grad=True),
                    flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0))
loc, lloss = train(lambda a: flow.tensor(a, requires_grad=True), flow.tensor(X), flow.tensor(Y))
for k, (g, l) in enumerate(zip(glob, loc)):
    assert g.is_global and g.sbp == (B,), (k, g.sbp)
    np.testing.assert_allclose(g.numpy(), l.numpy(), rtol=2e-5, atol=2e-6,
                               err_msg=f"rank {r}: parameter {k}")
    # every rank holds the same broadcast parameter
    np.testing.assert_array_equal(g.to_local().numpy(), g.numpy(), err_msg=f"rank {r}: {k}")
np.testing.assert_allclose(gloss.item(), lloss.item(), rtol=2e-5)
assert gloss.item() < 1.0, gloss.item()  # it learned something
flow.synchronize()
print(f"OK rank {r}", flush=True)
