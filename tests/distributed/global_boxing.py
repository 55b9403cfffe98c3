"""Run under ``mpiexec -n N``: every boxing between 1-D SBPs against NumPy, for even and uneven
splits, values and gradients; to_global from local tensors; creation ops; the error messages.
Prints ``OK rank R`` at the end."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
P = flow.placement("cpu", list(range(n)))
S0, S1, B, PS = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum


def check(got, want, what, tol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def local_of(full, sbp):
    """This rank's shard of ``full`` laid out as ``sbp`` (numpy.array_split for splits)."""
    if sbp == B:
        return full
    if sbp == PS:  # any split of the sum: rank k holds (k + 1) / total of it
        return full * (r + 1) / (n * (n + 1) / 2)
    return np.array_split(full, n, axis=sbp.dim)[r]


assert str(P) == f'actorflow.placement(type="cpu", ranks={list(range(n))})'
assert P == flow.placement.all("cpu") == flow.env.all_device_placement("cpu")
assert hash(P) == hash(flow.placement(type="cpu", ranks=list(range(n))))
assert repr(S1) == "actorflow.sbp.split(dim=1)" and S0 != S1 and B == flow.sbp.broadcast
P2 = flow.placement("cpu", [[0], [1]])
assert P2.hierarchy == (2, 1) and P2 != flow.placement("cpu", [0, 1])

rng = np.random.default_rng(0)
sbps = [S0, S1, B, PS]
for shape in [(2 * n, 3 * n), (2 * n + 1, n + 1), (n - 1, 3)]:  # even, uneven, fewer rows
    full = rng.standard_normal(shape)
    dout = rng.standard_normal(shape)
    for src in sbps:
        for dst in sbps:
            x = flow.tensor(local_of(full, src), requires_grad=True)
            g = x.to_global(P, src)
            assert g.is_global and not g.is_local and g.shape == shape and g.sbp == (src,)
            y = g.to_global(sbp=dst)
            assert y.sbp == (dst,) and y.shape == shape
            check(y.numpy(), full, f"{src}->{dst} values {shape}")
            if dst != PS:
                check(y.to_local().numpy(), local_of(full, dst), f"{src}->{dst} shard {shape}")
            else:
                total = flow.tensor(y.to_local().numpy())
                flow.comm.all_reduce(total)
                check(total.numpy(), full, f"{src}->{dst} partial sums {shape}")
            # gradient: d(sum(y * dout)) / dx, through the boxing and to_global(local)
            w = flow.tensor(dout).to_global(P, B)
            (y * w).sum().backward()
            gx = x.grad.numpy()
            if src == B:   # the first rank's values were used
                want = dout if r == 0 else np.zeros(shape)
            elif src == PS:
                want = dout
            else:
                want = local_of(dout, src)
            check(gx, want, f"{src}->{dst} gradient {shape}")

# other dtypes: half precision sums in float32, integers exactly, bools as "or"
for dtype in (flow.float16, flow.bfloat16, flow.int64):
    full = np.arange(3 * (n + 1)).reshape(n + 1, 3) % 7
    for src, dst in ((S0, B), (PS, B), (PS, S1), (S1, S0), (B, PS)):
        # partial sums of small integers: exact in every dtype
        mine = (full - (n - 1) if r == 0 else np.ones_like(full)) if src == PS else \
            local_of(full, src)
        x = flow.tensor(mine.astype(np.float64)).to(dtype).to_global(P, src)
        got = x.to_global(sbp=dst).to(flow.float64).numpy()
        check(got, full, f"{dtype} {src}->{dst}", tol=0)
flags = flow.tensor([r == 0, False, r == n - 1]).to_global(P, PS)
assert flags.to_global(sbp=B).numpy().tolist() == [True, False, True]

# to_global from local tensors of uneven (balanced, as numpy.array_split) sizes along the split
# dim; sizes that are not balanced are refused (see global_meta.py)
sizes = [len(c) for c in np.array_split(np.arange(2 * n + 1), n)]
rows = sizes[r]
x = flow.tensor(np.full((rows, 2), float(r)), requires_grad=True)
g = x.to_global(P, S0)
want = np.concatenate([np.full((sizes[k], 2), float(k)) for k in range(n)])
assert g.shape == want.shape
check(g.numpy(), want, "uneven local shards")
(g * flow.tensor(np.arange(want.size, dtype=np.float64).reshape(want.shape)).to_global(P, B)) \
    .sum().backward()
start = sum(sizes[:r])
check(x.grad.numpy(), np.arange(want.size).reshape(want.shape)[start:start + rows],
      "uneven local shards gradient")

# creation ops: the same logical values whatever the sbp
for sbp in sbps:
    check(flow.ones(3, 5, placement=P, sbp=sbp).numpy(), np.ones((3, 5)), f"ones {sbp}")
    check(flow.zeros(3, 5, placement=P, sbp=sbp).numpy(), np.zeros((3, 5)), f"zeros {sbp}")
    check(flow.full((2, 3), 7.0, placement=P, sbp=sbp).numpy(), np.full((2, 3), 7.0), "full")
    check(flow.arange(7, placement=P, sbp=sbp if sbp != S1 else S0).numpy(), np.arange(7),
          "arange")
    check(flow.tensor([[1.0, 2.0], [3.0, 4.0]], placement=P, sbp=sbp).numpy(),
          [[1.0, 2.0], [3.0, 4.0]], "tensor")
    flow.manual_seed(5)
    a = flow.randn(4, 6, placement=P, sbp=sbp).numpy()
    flow.manual_seed(5)
    check(a, flow.randn(4, 6).numpy(), f"randn {sbp} as in one process")
flow.manual_seed(3)
u = flow.rand(5, 2, placement=P, sbp=S0).numpy()
flow.manual_seed(3)
check(u, flow.rand(5, 2).numpy(), "rand as in one process")
g = flow.ones(2, 2, placement=P, sbp=S0, requires_grad=True)
assert g.requires_grad and g.is_leaf
assert "placement=" in repr(g) and "sbp=(actorflow.sbp.split(dim=0),)" in repr(g)
assert flow.ones(2, placement=P, sbp=B).sum().item() == 2.0

# a placement of some ranks, given out of order (sorted, as OneFlow does): the others hold no
# shard (OneFlow's shape: as many dims, all 0) but see the values
if n > 2:
    Q = flow.placement("cpu", [2, 0])
    assert Q == flow.placement("cpu", [0, 2]) and Q.ranks.tolist() == [0, 2], Q
    full = np.arange(12.0).reshape(6, 2)
    x = flow.tensor(full, placement=Q, sbp=S0, requires_grad=True)
    y = (x * 2).sum(dim=0)
    assert y.sbp == (PS,)
    check(y.numpy(), (full * 2).sum(axis=0), "sum on a sub-placement")
    want_rows = {0: full[:3], 2: full[3:]}.get(r)
    if want_rows is None:
        assert tuple(x.to_local().shape) == (0, 0), x.to_local().shape
    else:
        check(x.to_local().numpy(), want_rows, "shard of a sub-placement")
    y.sum().backward()
    check(x.grad.numpy(), np.full((6, 2), 2.0), "gradient on a sub-placement")
    z = flow.tensor(np.full((1, 2), float(r))).to_global(Q, S0)
    check(z.numpy(), [[0.0, 0.0], [2.0, 2.0]], "to_global onto a sub-placement")

# errors
try:
    flow.ones(2, placement=P, sbp=B) + flow.ones(2)
    raise AssertionError("mixing local and global should raise")
except ValueError as e:
    assert "add" in str(e) and "local tensor" in str(e) and "placement" in str(e), e
if n > 2:
    Q = flow.placement("cpu", [0, 1])
    try:
        flow.ones(2, placement=P, sbp=B) + flow.ones(2, placement=Q, sbp=B)
        raise AssertionError("different placements should raise")
    except ValueError as e:
        assert "add" in str(e) and str(P) in str(e) and str(Q) in str(e), e
try:
    flow.placement("cpu", [0, n])
    raise AssertionError("a rank outside the world should raise")
except ValueError as e:
    assert f"rank {n} is not in" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
