"""Run under ``mpiexec -n N`` (N = 2 or 4): ``flow.sbp.partial_max``. Boxing to and from it
(1-D, and 2-D on 4 ranks) against NumPy, values and gradients, in several dtypes; amax over a
split dim gives it, values and gradients (ties included) against PyTorch. Prints ``OK rank R``."""
import itertools

import numpy as np
import torch

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n in (2, 4), "run me under mpiexec -n 2 or 4"
S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast
PS, PM = flow.sbp.partial_sum, flow.sbp.partial_max
assert repr(PM) == "actorflow.sbp.partial_max" and PM.is_partial_max and PM != PS
rng = np.random.default_rng(0)


def check(got, want, what, tol=1e-9):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def local_of(full, sbp, pl):
    """This rank's shard of ``full`` in the nested layout: a partial sum gives member c the
    part / m plus random noise that sums to zero over the group; a partial max gives member c
    the part minus random offsets, zero on one member per element (which member varies)."""
    part = full
    c = np.unravel_index(pl.flat_ranks.index(r), pl.hierarchy)
    for k, (s, m) in enumerate(zip(sbp, pl.hierarchy)):
        noise = np.random.default_rng([k, *c[:k]]).standard_normal((m,) + part.shape)
        if s.is_split:
            part = np.array_split(part, m, axis=s.dim)[c[k]]
        elif s.is_partial_sum:
            part = part / m + noise[c[k]] - noise.mean(axis=0)
        elif s.is_partial_max:
            part = part - (noise[c[k]] - noise.min(axis=0))
    return part


PL1 = flow.placement("cpu", list(range(n)))
cases = [(PL1, [(s,) for s in (S0, S1, B, PS, PM)])]
if n == 4:
    cases.append((flow.placement("cpu", [[0, 1], [2, 3]]),
                  list(itertools.product((S0, B, PS, PM), (S0, B, PS, PM)))))
for pl, sbps in cases:
    for shape in [(2 * n, 3), (n + 1, 5)]:
        full, dout = rng.standard_normal(shape), rng.standard_normal(shape)
        for src in sbps:
            x = flow.tensor(local_of(full, src, pl)).to_global(pl, src)
            check(x.numpy(), full, f"to_global {src} {shape}")
            for dst in sbps:
                y = x.to_global(sbp=dst)
                assert y.sbp == dst
                check(y.numpy(), full, f"{pl.ranks} {src}->{dst} {shape}")
            if PM in src:  # gradients of boxing out of and into partial maxima
                g = flow.tensor(full, placement=pl, sbp=src, requires_grad=True)
                for dst in sbps:
                    w = flow.tensor(dout, placement=pl, sbp=(B,) * len(dst))
                    (g.to_global(sbp=dst) * w).sum().backward()
                    check(g.grad.numpy(), dout, f"gradient {src}->{dst}")
                    g.grad = None
                    h = flow.tensor(full, placement=pl, sbp=dst, requires_grad=True)
                    (h.to_global(sbp=src) * w).sum().backward()
                    check(h.grad.numpy(), dout, f"gradient {dst}->{src}")

# other dtypes: integers and half precision exactly, bools as "or"
for dtype in (flow.int64, flow.float16, flow.bfloat16):
    full = (np.arange(12).reshape(4, 3) % 5).astype(np.float64)
    x = flow.tensor(full - (r + np.arange(12).reshape(4, 3)) % n).to(dtype).to_global(PL1, PM)
    check(x.to_global(sbp=B).to(flow.float64).numpy(), full, f"{dtype} partial max", tol=0)
flags = flow.tensor([r == 0, False, r == n - 1]).to_global(PL1, PM)
assert flags.to_global(sbp=S0).numpy().tolist() == [True, False, True]

# amax over a split dim gives partial maxima; gradients shared among ties as PyTorch
for full in (rng.standard_normal((2 * n + 1, 3)), np.tile([[1.0, 2.0, 2.0]], (2 * n, 1))):
    for dim, want_sbp in ((0, PM), (1, S0), (None, PM)):
        x = flow.tensor(full, placement=PL1, sbp=S0, requires_grad=True)
        y = x.amax() if dim is None else x.amax(dim=dim)
        assert y.sbp == (want_sbp,), (dim, y.sbp)
        tx = torch.tensor(full, requires_grad=True)
        ty = tx.amax() if dim is None else tx.amax(dim=dim)
        check(y.numpy(), ty.detach().numpy(), f"amax dim={dim}")
        w = rng.standard_normal(tuple(ty.shape))
        (y * flow.tensor(w, placement=PL1, sbp=B)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        check(x.grad.numpy(), tx.grad.numpy(), f"amax dim={dim} gradient")
        m = flow.tensor(full, placement=PL1, sbp=S0).amax(dim=0).amax()
        assert m.sbp == (PM,) and m.item() == full.max()
# amin/min over a split dim: -amax(-x), so only the partial maxima move (no all-gather)
for full in (rng.standard_normal((2 * n + 1, 3)), np.tile([[1.0, -2.0, -2.0]], (2 * n, 1))):
    for name, dim in (("amin", 0), ("amin", (0, 1)), ("min", None), ("amin", 1)):
        x = flow.tensor(full, placement=PL1, sbp=S0, requires_grad=True)
        tx = torch.tensor(full, requires_grad=True)
        with flow.profiler.profile() as prof:
            y = getattr(x, name)() if dim is None else x.amin(dim=dim)
            flow.synchronize()
        moved = {e["name"] for e in prof.instructions() if e["name"].startswith("boxing")}
        # the partial maxima are all-reduced (b_to_s and b_to_p are local: nothing moves)
        want = {"boxing_pm_to_b"} if dim != 1 else set()  # dim 1 is not split: shard-wise
        assert want <= moved <= want | {"boxing_b_to_s", "boxing_b_to_p"}, (name, dim, moved)
        ty = getattr(tx, name)() if dim is None else tx.amin(dim=dim)
        check(y.numpy(), ty.detach().numpy(), f"{name} dim={dim}")
        w = rng.standard_normal(tuple(ty.shape))
        (y * flow.tensor(w, placement=PL1, sbp=B)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        check(x.grad.numpy(), tx.grad.numpy(), f"{name} dim={dim} gradient")
if n == 4:
    pl = cases[1][0]
    x = flow.tensor(full, placement=pl, sbp=(S0, S0))
    y = x.amax(dim=0)
    assert y.sbp == (PM, PM), y.sbp
    check(y.numpy(), full.max(axis=0), "amax over a dim two axes split")

try:
    flow.tensor(np.ones(2), requires_grad=True).to_global(PL1, PM).sum().backward()
    raise AssertionError("the gradient of to_global(partial_max) of local tensors should raise")
except RuntimeError as e:
    assert "partial_max" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
