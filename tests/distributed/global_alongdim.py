"""Run under ``mpiexec -n 2``: the SBP rules, as OneFlow's, of ops along a dim or over
independent rows (cumsum/cumprod, max/min/median/kthvalue/mode with a dim, flip, roll, inv,
group_norm, unfold/fold): a split the op doesn't run along is kept with nothing moved, a split
it runs along is moved (the cheapest layout the op takes); values and gradients agree with
PyTorch. Then second derivatives (relu, nll_loss) of split tensors. Prints ``OK rank R``."""
import numpy as np
import torch

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement("cpu", ranks=[0, 1])
S0, S1, S2, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2), flow.sbp.broadcast
LOCAL = {"boxing_b_to_s", "boxing_b_to_p"}
rng = np.random.default_rng(0)
A = rng.random((4, 6, 8)) + 0.5
SQ = rng.random((4, 3, 3)) + 3 * np.eye(3)
IMG = rng.random((2, 4, 4, 6))  # 4 channels: an even split over 2 ranks


def check(name, fn, tfn, a, sbp, want_sbp, gathers):
    x = flow.tensor(a, placement=PL, sbp=sbp, requires_grad=True)
    with flow.profiler.profile() as prof:
        y = fn(x)
        flow.synchronize()
    moved = {e["name"] for e in prof.instructions() if e["name"].startswith("boxing")
             and e["name"] not in LOCAL}
    assert want_sbp is None or y.sbp == (want_sbp,), (name, sbp, y.sbp)
    assert bool(moved) == gathers, (name, sbp, moved)
    tx = torch.tensor(a, requires_grad=True)
    ty = tfn(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, err_msg=name)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12,
                               err_msg=name)


CASES = [  # name, actorflow, torch, input, (sbp in, sbp out, gathers)...
    ("cumsum", lambda x: x.cumsum(1), lambda x: x.cumsum(1), A,
     [(S0, S0, False), (S2, S2, False), (S1, None, True)]),
    ("cumprod", lambda x: x.cumprod(2), lambda x: x.cumprod(2), A,
     [(S1, S1, False), (S2, None, True)]),
    ("max dim", lambda x: x.max(1)[0], lambda x: x.max(1)[0], A,
     [(S0, S0, False), (S2, S1, False), (S1, None, True)]),
    ("min dim keepdim", lambda x: x.min(1, keepdim=True)[0],
     lambda x: x.min(1, keepdim=True)[0], A, [(S2, S2, False)]),
    ("median dim", lambda x: x.median(2)[0], lambda x: x.median(2)[0], A,
     [(S1, S1, False), (S0, S0, False)]),
    ("kthvalue", lambda x: x.kthvalue(2, 0)[0], lambda x: x.kthvalue(2, 0)[0], A,
     [(S1, S0, False)]),
    ("flip", lambda x: x.flip([1]), lambda x: x.flip([1]), A,
     [(S0, S0, False), (S2, S2, False), (S1, None, True)]),
    ("roll", lambda x: x.roll(1, 2), lambda x: x.roll(1, 2), A,
     [(S0, S0, False), (S2, None, True)]),
    ("inv", flow.linalg.inv, torch.linalg.inv, SQ, [(S0, S0, False), (S1, None, True)]),
    ("group_norm", lambda x: flow.nn.functional.group_norm(x, 2),
     lambda x: torch.nn.functional.group_norm(x, 2), A, [(S0, S0, False), (S1, None, True)]),
    ("unfold", lambda x: flow.nn.functional.unfold(x, 2),
     lambda x: torch.nn.functional.unfold(x, 2), IMG, [(S0, S0, False), (S1, S1, False)]),
]
for name, fn, tfn, a, sigs in CASES:
    for sbp, want, gathers in sigs:
        check(name, fn, tfn, a, sbp, want, gathers)

# fold splits the batch; unfold of 3 channels (uneven over 2 ranks) moves a channel split
tu = torch.nn.functional.unfold(torch.tensor(IMG), 2)
f = flow.nn.functional.fold(flow.tensor(tu.numpy(), placement=PL, sbp=S0), (4, 6), 2)
assert f.sbp == (S0,), f.sbp
np.testing.assert_allclose(f.numpy(), torch.nn.functional.fold(tu, (4, 6), 2).numpy())
check("unfold of 3 channels", lambda x: flow.nn.functional.unfold(x, 2),
      lambda x: torch.nn.functional.unfold(x, 2), IMG[:, :3], S1, None, True)

# group_norm's affine parameters: their gradients are partial sums over the split batch
w = flow.tensor(rng.random(6), placement=PL, sbp=B, requires_grad=True)
x = flow.tensor(A, placement=PL, sbp=S0, requires_grad=True)
flow.nn.functional.group_norm(x, 3, w, w * 0.5).pow(2).sum().backward()
tw, tx = torch.tensor(w.numpy(), requires_grad=True), torch.tensor(A, requires_grad=True)
torch.nn.functional.group_norm(tx, 3, tw, tw * 0.5).pow(2).sum().backward()
np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-8)
np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)

# second derivatives on split tensors: relu (zeros reach its input) and nll_loss (linear)
X, T = rng.random((8, 5)) - 0.5, rng.integers(0, 5, 8)
for sbp in (S0, S1, B):
    x = flow.tensor(X, placement=PL, sbp=sbp, requires_grad=True)
    gy = flow.tensor(X * 2, placement=PL, sbp=sbp, requires_grad=True)
    (dx,) = flow.autograd.grad(flow.relu(x), x, gy, create_graph=True)
    ddx, ddy = flow.autograd.grad(dx, [x, gy], flow.ones_like(gy))
    np.testing.assert_array_equal(ddx.numpy(), np.zeros_like(X))
    np.testing.assert_array_equal(ddy.numpy(), (X > 0).astype(float))
    t = flow.tensor(T, placement=PL, sbp=sbp if sbp != S1 else B)
    loss = flow.nn.functional.nll_loss(x, t, reduction="sum")
    (dx,) = flow.autograd.grad(loss, x, create_graph=True)
    (ddx,) = flow.autograd.grad((dx * dx).sum(), x, allow_unused=True)
    np.testing.assert_array_equal(ddx.numpy(), np.zeros_like(X))
print(f"OK rank {r}", flush=True)
