"""Run under ``mpiexec -n N`` (or alone, on one rank): cross_entropy and nll_loss on a batch
split over the ranks against the same losses on the full tensors, values and gradients, for
every reduction, with class weights, ignored targets, class probabilities, label smoothing and
extra dims. A summed or averaged loss comes out partial_sum without gathering the logits (the
loss ops run on split shards); each rank's share of a mean is its summed loss over the global
denominator, as OneFlow's ``test_cross_entropy_loss_or_nll_loss`` expects. Prints
``OK rank R`` at the end."""
import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement("cpu", list(range(n)))
S0, B, PS = flow.sbp.split(0), flow.sbp.broadcast, flow.sbp.partial_sum
rng = np.random.default_rng(3)
C = 5


def check(got, want, what, tol=1e-10):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def compare(what, fn, x, y, w=None, want_sbp=PS):
    """fn(x, y, w) on a split batch == fn on the full tensors: the loss, its sbp, each rank's
    share of it, and the input's (and a probability target's) gradient."""
    yf = y.dtype.kind == "f"
    xg = flow.tensor(x, placement=PL, sbp=S0, requires_grad=True)
    yg = flow.tensor(y, placement=PL, sbp=S0, requires_grad=yf)
    xl, yl = flow.tensor(x, requires_grad=True), flow.tensor(y, requires_grad=yf)
    wg = None if w is None else flow.tensor(w, placement=PL, sbp=B)
    wl = None if w is None else flow.tensor(w)
    lg, ll = fn(xg, yg, wg), fn(xl, yl, wl)
    # (on one rank every signature costs nothing: the sbp is the interpreter's pick)
    assert n == 1 or lg.sbp == (want_sbp,), f"rank {r}: {what}: sbp {lg.sbp}, want {want_sbp}"
    check(lg.numpy(), ll.numpy(), f"{what} value")
    if want_sbp == PS:
        # the local share: this rank's loss over the whole batch's denominator
        mine = np.array_split(np.arange(len(x)), n)[r]
        part = fn(flow.tensor(x[mine]), flow.tensor(y[mine]), wl, "sum").numpy()
        denom = fn(flow.tensor(x), flow.tensor(y), wl, "sum").numpy() / ll.numpy() \
            if "mean" in what else 1.0
        check(lg.to_local().numpy(), part / denom, f"{what} local share")
    lg.sum().backward()
    ll.sum().backward()
    assert n == 1 or xg.grad.sbp == (S0,), f"rank {r}: {what}: gradient sbp {xg.grad.sbp}"
    check(xg.grad.numpy(), xl.grad.numpy(), f"{what} gradient")
    if yf:
        check(yg.grad.numpy(), yl.grad.numpy(), f"{what} target gradient")


def ce(**kw):
    def f(x, y, w, red=None):
        return nnf.cross_entropy(x, y, w, **dict(kw, reduction=red or kw["reduction"]))
    return f


def nll(**kw):
    def f(x, y, w, red=None):
        return nnf.nll_loss(nnf.log_softmax(x, dim=1), y, w,
                            **dict(kw, reduction=red or kw["reduction"]))
    return f


U = 2 * n + 3  # an uneven batch
labels = rng.integers(0, C, size=U)
labels[1] = -100  # ignored
labels_4d = rng.integers(0, C, size=(U, 3, 2))
weight = rng.uniform(0.5, 2.0, size=C)
probs = rng.dirichlet(np.ones(C), size=U)
for red in ("mean", "sum"):
    for name, mk in (("cross_entropy", ce), ("nll_loss", nll)):
        compare(f"{name} {red}", mk(reduction=red), rng.standard_normal((U, C)), labels)
        compare(f"{name} {red} weighted", mk(reduction=red), rng.standard_normal((U, C)),
                labels, weight)
        compare(f"{name} {red} 4-d", mk(reduction=red), rng.standard_normal((U, C, 3, 2)),
                labels_4d)
        compare(f"{name} {red} ignore_index 2", mk(reduction=red, ignore_index=2),
                rng.standard_normal((U, C)), labels_4d[:, 0, 0], weight)
    compare(f"cross_entropy {red} smoothed", ce(reduction=red, label_smoothing=0.2),
            rng.standard_normal((U, C)), labels, weight)
    compare(f"cross_entropy {red} probabilities", ce(reduction=red),
            rng.standard_normal((U, C)), probs)
compare("cross_entropy none", ce(reduction="none"), rng.standard_normal((U, C)), labels,
        want_sbp=S0)
compare("nll_loss none", nll(reduction="none"), rng.standard_normal((U, C)), labels,
        want_sbp=S0)

# the loss and its gradient run on the shards: no all-gather of the logits
x = flow.tensor(rng.standard_normal((U, C)), placement=PL, sbp=S0, requires_grad=True)
y = flow.tensor(labels, placement=PL, sbp=S0)
with flow.profiler.profile() as prof:
    nnf.cross_entropy(x, y).backward()
    flow.synchronize()
ran = {e["name"] for e in prof.instructions()}
# the only data moved: the count of targets, all-reduced
assert {a for a in ran if a.startswith("boxing")} == {"boxing_p_to_b"}, sorted(ran)
# a batch of one sample per rank less than the ranks: empty shards still give the mean
few = max(n - 1, 1)
compare("cross_entropy mean, empty shards", ce(reduction="mean"),
        rng.standard_normal((few, C)), rng.integers(0, C, size=few))
print(f"OK rank {r}", flush=True)
