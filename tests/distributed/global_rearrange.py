"""Run under ``mpiexec -n 2``: the SBP signatures of roll, tril/triu, pad (and its
gradient), var/std, sort/topk, searchsorted, scatter and basic indexing, as OneFlow's rules
give them: each op on a tensor split along a dim it leaves alone keeps the split and moves
nothing (a slice of a split dim gives partial sums); values and gradients agree with
PyTorch. Prints ``OK rank R``."""
import numpy as np
import torch

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
S0, S1, S2, B, P = (flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2),
                    flow.sbp.broadcast, flow.sbp.partial_sum)
rng = np.random.default_rng(0)
A3 = rng.random((4, 6, 8))
A4 = rng.random((2, 4, 6, 8))
LOCAL = {"boxing_b_to_s", "boxing_b_to_p"}  # re-layouts of a broadcast tensor move nothing
W = rng.random((4, 6, 8))


def moved_by(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``'s result and the names of the boxing ops that moved data
    while it ran."""
    with flow.profiler.profile() as prof:
        y = fn(*args, **kwargs)
        flow.synchronize()
    return y, {e["name"] for e in prof.instructions()
               if e["name"].startswith("boxing") and e["name"] not in LOCAL}


CASES = [  # (name, actorflow op, torch op, input, input sbp, output sbp)
    ("roll along 1 keeps S(0)", lambda x: flow.roll(x, 2, 1), lambda x: torch.roll(x, 2, 1),
     A3, S0, S0),
    ("roll along 0 and 2 keeps S(1)", lambda x: flow.roll(x, (1, -3), (0, 2)),
     lambda x: torch.roll(x, (1, -3), (0, 2)), A3, S1, S1),
    ("tril keeps a batch split", lambda x: flow.tril(x, 1), lambda x: torch.tril(x, 1),
     A3, S0, S0),
    ("triu keeps a batch split", lambda x: flow.triu(x, -1), lambda x: torch.triu(x, -1),
     A4, S1, S1),
    ("constant pad of the last dims keeps S(0)",
     lambda x: flow.nn.functional.pad(x, (1, 2, 0, 1), value=0.5),
     lambda x: torch.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), A3, S0, S0),
    ("replicate pad keeps S(1)",
     lambda x: flow.nn.functional.pad(x, (2, 1), mode="replicate"),
     lambda x: torch.nn.functional.pad(x, (2, 1), mode="replicate"), A3, S1, S1),
    ("reflect pad of dims 2, 3 keeps S(0)",
     lambda x: flow.nn.functional.pad(x, (2, 1, 1, 2), mode="reflect"),
     lambda x: torch.nn.functional.pad(x, (2, 1, 1, 2), mode="reflect"), A4, S0, S0),
    ("var over 2 keeps S(0)", lambda x: x.var(2), lambda x: x.var(2), A3, S0, S0),
    ("std over 0 keepdim keeps S(2)", lambda x: x.std(0, keepdim=True),
     lambda x: x.std(0, keepdim=True), A3, S2, S2),
    ("var over 0 lands S(2) on 1", lambda x: x.var(0), lambda x: x.var(0), A3, S2, S1),
    ("sort along 2 keeps S(0)", lambda x: flow.sort(x, dim=2)[0],
     lambda x: torch.sort(x, dim=2)[0], A3, S0, S0),
    ("topk along 1 keeps S(2)", lambda x: flow.topk(x, 3, dim=1)[0],
     lambda x: torch.topk(x, 3, dim=1)[0], A3, S2, S2),
]

for name, fn, tfn, a, sbp, want in CASES:
    x = flow.tensor(a, placement=PL, sbp=sbp, requires_grad=True)
    y, moved = moved_by(fn, x)
    assert y.sbp == (want,), (name, y.sbp)
    assert moved == set(), (name, moved)
    tx = torch.tensor(a, requires_grad=True)
    ty = tfn(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-9,
                               err_msg=name)
    wy = rng.random(ty.shape)
    (y * flow.tensor(wy, placement=PL, sbp=B)).sum().backward()
    (ty * torch.tensor(wy)).sum().backward()
    assert x.grad.sbp == (sbp,), (name, x.grad.sbp)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-9,
                               err_msg=name)

# sort's indices share the split; the flattened roll and a padded split dim gather first
v, i = flow.sort(flow.tensor(A3, placement=PL, sbp=S1), dim=0, descending=True)
assert v.sbp == i.sbp == (S1,), (v.sbp, i.sbp)
np.testing.assert_array_equal(i.numpy(), np.argsort(-A3, axis=0, kind="stable"))
y = flow.roll(flow.tensor(A3, placement=PL, sbp=S0), 5)
np.testing.assert_array_equal(y.numpy(), np.roll(A3, 5))
y = flow.nn.functional.pad(flow.tensor(A3, placement=PL, sbp=S2), (1, 1))
np.testing.assert_array_equal(y.numpy(), np.pad(A3, ((0, 0), (0, 0), (1, 1))))

# searchsorted splits the rows searched
SEQ = np.sort(rng.random((4, 7)), axis=1)
VAL = rng.random((4, 5))
y, moved = moved_by(flow.searchsorted, flow.tensor(SEQ, placement=PL, sbp=S0),
                    flow.tensor(VAL, placement=PL, sbp=S0), right=True)
assert y.sbp == (S0,) and moved == set(), (y.sbp, moved)
np.testing.assert_array_equal(y.numpy(), torch.searchsorted(torch.tensor(SEQ),
                                                            torch.tensor(VAL), right=True))

# a slice of a split dim: each rank's part of it, zeros elsewhere - partial sums (OneFlow's
# slice); a dim taken whole keeps its split; also inside nn.Graph, and written back
A2 = rng.random((8, 16))
for sbp, idx, want in [(S1, (slice(None), slice(None, 8)), P), (S0, (slice(1, 7, 2),), P),
                       (S1, (Ellipsis, slice(3, 16, 5)), P), (S0, (slice(5, 5),), P),
                       (S1, (slice(2, 3),), S1), (S1, (None, slice(0, 5, 3)), S2)]:
    x = flow.tensor(A2, placement=PL, sbp=sbp, requires_grad=True)
    y, moved = moved_by(x.__getitem__, idx)
    assert y.sbp == (want,) and moved == set(), (idx, y.sbp, moved)
    np.testing.assert_array_equal(y.numpy(), A2[idx])
    y.sum().backward()
    g = np.zeros_like(A2)
    g[idx] = 1
    np.testing.assert_array_equal(x.grad.numpy(), g)


class Sliced(flow.nn.Graph):
    def build(self, x):
        return x[:, :8]


y = Sliced()(flow.tensor(A2, placement=PL, sbp=S1))
assert y.sbp == (P,), y.sbp
np.testing.assert_array_equal(y.numpy(), A2[:, :8])
x = flow.tensor(A2, placement=PL, sbp=S1)
x[:, 2:9] = 0.0  # a write into the sliced region still reaches every shard
want = A2.copy()
want[:, 2:9] = 0.0
np.testing.assert_array_equal(x.numpy(), want)

# reshape_like reads only the like tensor's shape, whatever its layout
y = flow._C.reshape_like(flow.tensor(A3, placement=PL, sbp=S0),
                         flow.tensor(np.zeros((6, 32)), placement=PL, sbp=S1))
np.testing.assert_array_equal(y.numpy(), A3.reshape(6, 32))

# partial sums stay partial through the linear ones (roll, tril/triu)
for name, fn, ref in [("roll", lambda x: flow.roll(x, 1, 0), lambda a: np.roll(a, 1, 0)),
                      ("tril", flow.tril, np.tril), ("triu", flow.triu, np.triu)]:
    xp = flow.tensor(A3, placement=PL, sbp=B).to_global(sbp=P)
    y, moved = moved_by(fn, xp)
    assert y.sbp == (P,) and moved == set(), (name, y.sbp, moved)
    np.testing.assert_allclose(y.numpy(), ref(A3), rtol=1e-12, err_msg=name)
# scatter along dim 1 keeps a split on dim 0 where x, index and src have one size
IDX = np.stack([rng.permutation(6) for _ in range(4)])
SRC = rng.random((4, 6))
X2 = rng.random((4, 6))
for reduce in (None, "add"):
    x = flow.tensor(X2, placement=PL, sbp=S0, requires_grad=True)
    src = flow.tensor(SRC, placement=PL, sbp=S0, requires_grad=True)
    idx = flow.tensor(IDX, placement=PL, sbp=S0)
    y, moved = moved_by(flow.scatter, x, 1, idx, src, reduce=reduce)
    assert y.sbp == (S0,) and moved == set(), (reduce, y.sbp, moved)
    tx, tsrc = torch.tensor(X2, requires_grad=True), torch.tensor(SRC, requires_grad=True)
    ty = (torch.scatter_add(tx, 1, torch.tensor(IDX), tsrc) if reduce else
          torch.scatter(tx, 1, torch.tensor(IDX), tsrc))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    wy = rng.random((4, 6))
    (y * flow.tensor(wy, placement=PL, sbp=B)).sum().backward()
    (ty * torch.tensor(wy)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(src.grad.numpy(), tsrc.grad.numpy(), rtol=1e-12)
print(f"OK rank {r}", flush=True)
