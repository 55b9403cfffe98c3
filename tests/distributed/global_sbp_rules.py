"""Run under ``mpiexec -n 2``: the SBP rules of reductions (argmax, all/any, prod, norm,
logsumexp), gather-like ops (gather, index_select, index_add, one_hot), views (diagonal,
expand, repeat, the complex parts), isclose, the pointwise losses and batch_norm in evaluation.
Each case runs the op on global inputs laid out as one of the rule's signatures and checks:
the output sbp the signature gives, that the forward moves no data (a broadcast tensor
re-laid out locally moves none), the values against the same op on local tensors, and, where
differentiable, the gradients (of a weighted sum of the output) against the local ones, with
the backward's own moves; and losses' second derivatives. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
S0, S1, S2, S3 = (flow.sbp.split(d) for d in range(4))
B, PS = flow.sbp.broadcast, flow.sbp.partial_sum
rng = np.random.default_rng(7)
LOCAL = {"boxing_b_to_s", "boxing_b_to_p"}  # re-layouts of a broadcast tensor move nothing


def moves(prof) -> set:
    return {e["name"] for e in prof.instructions() if e["name"].startswith("boxing")
            and e["name"] not in LOCAL}


def check(name, fn, ins, want_sbp, grad=True, back_moves=frozenset()):
    """``ins``: (array, sbp[, requires_grad]) per input; ``fn(*tensors)`` on global and on
    local tensors must agree, the global result laid out as ``want_sbp`` with nothing moved."""
    specs = [(a, s, (len(t) < 3 or t[2]) and grad and a.dtype.kind in "fc")
             for t in ins for a, s in [t[:2]]]
    gl = [flow.tensor(a, placement=PL, sbp=s, requires_grad=g) for a, s, g in specs]
    lo = [flow.tensor(a, requires_grad=g) for a, s, g in specs]
    with flow.profiler.profile() as prof:
        y = fn(*gl)
        flow.synchronize()
    assert y.sbp == (want_sbp,), (name, y.sbp)
    assert moves(prof) == set(), (name, moves(prof))
    yl = fn(*lo)
    np.testing.assert_allclose(y.numpy(), yl.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    if not yl.requires_grad:  # no differentiable input, or an integer / bool result
        return
    w = rng.random(tuple(yl.shape))
    # the output gradient laid out as the output (split there, else broadcast), as a split
    # model's next op would give it
    ws = want_sbp if want_sbp not in (B, PS) else B
    with flow.profiler.profile() as prof:
        (y * flow.tensor(w, placement=PL, sbp=ws)).sum().backward()
        flow.synchronize()
    assert moves(prof) <= set(back_moves), (name, "backward", moves(prof))
    (yl * flow.tensor(w)).sum().backward()
    for k, (t, u) in enumerate(zip(gl, lo)):
        if u.requires_grad:
            np.testing.assert_allclose(t.grad.numpy(), u.grad.numpy(), rtol=1e-10,
                                       atol=1e-12, err_msg=f"{name}: gradient {k}")


A = rng.random((4, 6, 5)) - 0.5
A4 = rng.random((4, 5, 6)) + 0.5

# ---- reductions -------------------------------------------------------------------------------
check("argmax keeps a split it does not reduce", lambda x: x.argmax(dim=1), [(A, S0)], S0)
check("argmax renumbers the split", lambda x: x.argmax(dim=1), [(A, S2)], S1)
check("argmin keepdim", lambda x: x.argmin(dim=0, keepdim=True), [(A, S1)], S1)
check("all", lambda x: (x > -0.3).all(dim=1), [(A, S0)], S0)
check("any over two dims", lambda x: (x > 0.4).any(dim=(0, 1)), [(A, S2)], S0)
check("amax's gradient (tie weights) on a kept split", lambda x: x.amax(dim=(1, 2)),
      [(np.round(A, 1), S0)], S0)
check("max along a dim: the index mask of its gradient", lambda x: x.max(dim=1)[0],
      [(A, S2)], S1)
check("prod", lambda x: x.prod(dim=1), [(A, S2)], S1)
check("logsumexp", lambda x: x.logsumexp(dim=2), [(A, S1)], S1)
check("norm p=2 on another dim", lambda x: x.norm(p=2, dim=1), [(A, S0)], S0)
check("norm p=1 over the split dim: partial", lambda x: x.norm(p=1, dim=1), [(A, S1)], PS,
      back_moves={"boxing_p_to_b"})  # the gradient factor reads the norm
check("norm p=inf", lambda x: flow.linalg.vector_norm(x, float("inf"), dim=2), [(A, S0)], S0)
check("norm p=3 over the split dim: no partial, kept dim", lambda x: x.norm(p=3, dim=(0, 2)),
      [(A, S1)], S0)

# ---- gather-like ------------------------------------------------------------------------------
IDX = rng.integers(0, 6, (4, 3, 5))
check("gather, x and index split alike", lambda x, i: flow.gather(x, 1, i), [(A, S0), (IDX, S0)],
      S0)
GRAD_OF_B = {"boxing_p_to_b"}  # a broadcast input's partial gradient is all-reduced
check("gather, index split along dim", lambda x, i: flow.gather(x, 1, i), [(A, B), (IDX, S1)],
      S1, back_moves=GRAD_OF_B)
I1 = np.array([5, 0, 2, 2, 1])
check("index_select, x split elsewhere", lambda x, i: flow.index_select(x, 1, i),
      [(A, S0), (I1, B)], S0)
check("index_select, index split", lambda x, i: flow.index_select(x, 1, i),
      [(A, B), (I1, S0)], S1, back_moves=GRAD_OF_B)
SRC = rng.random((4, 5, 5))
check("index_add, x and source split elsewhere",
      lambda x, i, s: flow.index_add(x, 1, i, s, alpha=2.0), [(A, S2), (I1, B), (SRC, S2)], S2)
check("one_hot", lambda i: nnf.one_hot(i, 6), [(IDX, S1)], S1)

# ---- views and elementwise-like ---------------------------------------------------------------
check("diagonal keeps a kept dim", lambda x: flow.diagonal(x, 1, 1, 2), [(A4, S0)], S0)
check("diagonal renumbers", lambda x: flow.diagonal(x, -1, 0, 2), [(A4, S1)], S0)
E = rng.random((3, 1, 5))
check("expand: new leading dims", lambda x: x.expand(2, 3, 4, 5), [(E, S0)], S1)
check("expand: last dim", lambda x: x.expand(3, 4, -1), [(E, S2)], S2)
check("repeat: a dim repeated once", lambda x: x.repeat(2, 1, 1, 3), [(A, S1)], S2,
      back_moves={"boxing_s_to_b"})
check("isclose", lambda a, b: flow.isclose(a, b, rtol=0.1), [(A, S1), (A + 0.05, S1)], S1)
check("isclose, broadcast operand", lambda a, b: flow.isclose(a, b, atol=0.2),
      [(A, S0), (A[0], B)], S0)
Z = rng.random((4, 3)) + 1j * rng.random((4, 3))
check("real", flow.real, [(Z, S1)], S1, grad=False)
check("imag", flow.imag, [(Z, S0)], S0, grad=False)
check("view_as_real", flow.view_as_real, [(Z, S0)], S0, grad=False)
check("view_as_complex", flow.view_as_complex, [(rng.random((4, 3, 2)), S1)], S1)

# ---- partial sums through linear ops (a partial input: rank 0 holds the values) -----------
check("gather of a partial x", lambda x, i: flow.gather(x, 1, i), [(A, PS), (IDX, B)], PS,
      grad=False)
check("index_select of a partial x", lambda x, i: flow.index_select(x, 1, i), [(A, PS), (I1, B)],
      PS, grad=False)
check("index_add, partial x and source", lambda x, i, s: flow.index_add(x, 1, i, s),
      [(A, PS), (I1, B), (SRC, PS)], PS, grad=False)
check("index_add, index and source split along dim",
      lambda x, i, s: flow.index_add(x, 1, i, s, alpha=0.5), [(A, PS), (I1, S0), (SRC, S1)], PS,
      grad=False)
check("diagonal of a partial x", lambda x: flow.diagonal(x, 0, 0, 1), [(A4, PS)], PS, grad=False)
check("expand of a partial x", lambda x: x.expand(2, 3, 4, 5), [(E, PS)], PS, grad=False)
check("repeat of a partial x", lambda x: x.repeat(1, 2, 1), [(A, PS)], PS, grad=False)
check("real of a partial x", flow.real, [(Z, PS)], PS, grad=False)
check("view_as_real of a partial x", flow.view_as_real, [(Z, PS)], PS, grad=False)

# ---- losses -----------------------------------------------------------------------------------
X, T = rng.random((6, 4)), rng.random((6, 4))
W4 = rng.random(4) + 0.5
for red, want in (("none", None), ("sum", PS), ("mean", PS)):
    for d, s in ((0, S0), (1, S1)):
        check(f"mse_loss {red} S({d})", lambda x, t, red=red: nnf.mse_loss(x, t, reduction=red),
              [(X, s), (T, s)], want or s)
check("l1_loss mean", lambda x, t: nnf.l1_loss(x, t), [(X, S1), (T, S1)], PS)
check("smooth_l1_loss sum", lambda x, t: nnf.smooth_l1_loss(x, t, reduction="sum", beta=0.3),
      [(X, S0), (T, S0)], PS)
check("huber_loss none", lambda x, t: nnf.huber_loss(x, t, reduction="none", delta=0.2),
      [(X, S1), (T, S1)], S1)
LP = np.log(rng.dirichlet(np.ones(4), 6))
for d, s in ((0, S0), (1, S1)):
    check(f"kl_div batchmean S({d})", lambda x, t: nnf.kl_div(x, t, reduction="batchmean"),
          [(LP, s), (T, s)], PS)
check("binary_cross_entropy, weight broadcast: partial gradient",
      lambda x, t, w: nnf.binary_cross_entropy(x, t, w), [(X, S0), (T, S0, False), (W4, B)], PS,
      back_moves=GRAD_OF_B)
check("binary_cross_entropy, weight split with the input",
      lambda x, t, w: nnf.binary_cross_entropy(x, t, w, reduction="sum"),
      [(X, S1), (T, S1, False), (W4, S0)], PS)
check("binary_cross_entropy_with_logits, pos_weight",
      lambda x, t, p: nnf.binary_cross_entropy_with_logits(x, t, pos_weight=p),
      [(X - 0.5, S0), (T, S0), (W4, B)], PS, back_moves=GRAD_OF_B)



def second_derivative(name, fn, s):
    """A loss's gradient differentiated again (its backward op's rule on split shards): the
    input and target gradients of ``sum(dx) + sum(dt^2)`` against the local ones."""
    got = []
    for kw in (dict(placement=PL, sbp=s), {}):
        x, t = (flow.tensor(a, requires_grad=True, **kw) for a in (X, T))
        dx, dt = flow.autograd.grad(fn(x, t), [x, t], create_graph=True)
        (dx.sum() + (dt * dt).sum()).backward()
        got.append((dx.numpy(), dt.numpy(), x.grad.numpy(), t.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


second_derivative("kl_div batchmean", lambda x, t: nnf.kl_div(x, t, reduction="batchmean"), S0)
second_derivative("smooth_l1_loss mean", lambda x, t: nnf.smooth_l1_loss(x, t, beta=0.5), S1)
second_derivative("bce_with_logits sum", lambda x, t: nnf.binary_cross_entropy_with_logits(
    x, t, reduction="sum"), S0)

# ---- batch_norm (evaluation) ------------------------------------------------------------------
XB = rng.random((4, 3, 5))
RM, RV, BW, BB = rng.random(3), rng.random(3) + 0.5, rng.random(3), rng.random(3)


def bn(x, m, v, w, b):
    return nnf.batch_norm(x, m, v, w, b, training=False)


check("batch_norm eval, batch split", bn,
      [(XB, S0), (RM, B, False), (RV, B, False), (BW, B), (BB, B)], S0,
      back_moves=GRAD_OF_B)
check("batch_norm eval, spatial split", bn,
      [(XB, S2), (RM, B, False), (RV, B, False), (BW, B), (BB, B)], S2,
      back_moves=GRAD_OF_B)
check("batch_norm eval, channel split", bn,
      [(XB, S1), (RM, S0, False), (RV, S0, False), (BW, S0), (BB, S0)], S1)
print(f"OK rank {r}", flush=True)
