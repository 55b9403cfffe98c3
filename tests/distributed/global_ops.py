"""Run under ``mpiexec -n N``: each op family with SBP rules on global tensors against the same
ops on the full (local) tensors, values and gradients, checking the SBP the rule picks; ops
without rules run broadcast. Prints ``OK rank R`` at the end."""
import os
import warnings

import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PL = flow.placement("cpu", list(range(n)))
S0, S1, S2 = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.split(2)
B, PS = flow.sbp.broadcast, flow.sbp.partial_sum
rng = np.random.default_rng(1)


def check(got, want, what, tol=1e-9):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, err_msg=f"rank {r}: {what}")


def compare(what, fn, fulls, sbps, want_sbp=None):
    """fn on global tensors laid out as ``sbps`` == fn on the full tensors, values and
    gradients of every floating input."""
    glo = [flow.tensor(f, placement=PL, sbp=s, requires_grad=f.dtype.kind == "f")
           for f, s in zip(fulls, sbps)]
    loc = [flow.tensor(f, requires_grad=f.dtype.kind == "f") for f in fulls]
    yg, yl = fn(*glo), fn(*loc)
    if want_sbp is not None:
        assert yg.sbp == (want_sbp,), f"rank {r}: {what}: sbp {yg.sbp}, want {want_sbp}"
    check(yg.numpy(), yl.numpy(), f"{what} values")
    w = rng.standard_normal(tuple(yl.shape))
    (yg * flow.tensor(w, placement=PL, sbp=B)).sum().backward()
    (yl * flow.tensor(w)).sum().backward()
    for k, (a, b) in enumerate(zip(glo, loc)):
        if b.grad is not None:
            assert a.grad.is_global and a.grad.shape == b.grad.shape
            check(a.grad.numpy(), b.grad.numpy(), f"{what} gradient of input {k}")


def rnd(*shape):
    return rng.standard_normal(shape)


U = 2 * n + 1  # an uneven size
# elementwise, unary and binary (broadcasting), linear ops keep partial sums
for s in (S0, S1, B):
    compare(f"relu {s}", flow.relu, [rnd(U, 5)], [s], s)
    compare(f"exp {s}", flow.exp, [rnd(U, 5)], [s], s)
    compare(f"mul {s}", flow.mul, [rnd(U, 5), rnd(U, 5)], [s, s], s)
compare("gelu S(1)", nnf.gelu, [rnd(3, U)], [S1], S1)
compare("gelu tanh S(0)", lambda x: nnf.gelu(x, approximate="tanh"), [rnd(U, 3)], [S0], S0)
compare("clamp S(0)", lambda x: flow.clamp(x, -0.5, 0.5), [rnd(U, 3)], [S0], S0)
compare("clamp tensor S(1)", lambda x, lo: flow.clamp(x, min=lo), [rnd(3, U), rnd(3, 1)],
        [S1, B], S1)
compare("where S(0)", lambda c, x, y: flow.where(c > 0, x, y), [rnd(U, 3), rnd(U, 3), rnd(1, 3)],
        [S0, S0, B], S0)
compare("masked_fill S(1)", lambda x, m: x.masked_fill(m > 0, 2.0), [rnd(3, U), rnd(3, U)],
        [S1, S1], S1)
compare("polygamma S(0)", lambda x: flow.polygamma(1, x), [rnd(U, 3) ** 2 + 1.0], [S0], S0)
keep = rng.random((U, 3)) > 0.5
compare("dropout_grad S(0)", lambda g, m: flow.functional.dropout_grad(g, m, 2.0),
        [rnd(U, 3), keep], [S0, S0], S0)
compare("dropout_grad P", lambda g, m: flow.functional.dropout_grad(g, m, 2.0),
        [rnd(U, 3), keep], [PS, B], PS)
compare("neg P", flow.neg, [rnd(U, 3)], [PS], PS)
compare("add P P", flow.add, [rnd(U, 3), rnd(U, 3)], [PS, PS], PS)
compare("sub P P", flow.sub, [rnd(U, 3), rnd(U, 3)], [PS, PS], PS)
compare("scalar mul P", lambda x: x * 3.0, [rnd(U, 3)], [PS], PS)
compare("scalar div P", lambda x: x / 4.0, [rnd(U, 3)], [PS], PS)
compare("scalar rdiv P", lambda x: 2.0 / (x * x + 1.0), [rnd(U, 3)], [PS])
compare("add broadcast S(1) + S(0)", flow.add, [rnd(4, U), rnd(U)], [S1, S0], S1)
compare("mul broadcast S(0) * B row", flow.mul, [rnd(U, 3), rnd(1, 3)], [S0, B], S0)
compare("mul S(0) * S(1) -> boxed", flow.mul, [rnd(U, 4), rnd(U, 4)], [S0, S1])
compare("div S(1) / B", flow.div, [rnd(3, U), rnd(3, U) + 5.0], [S1, B], S1)
compare("mixed B + P", flow.add, [rnd(U, 3), rnd(U, 3)], [B, PS])
# reductions: over the split dim -> partial sums; other dims keep the split
compare("sum dim 0 of S(0)", lambda x: x.sum(dim=0), [rnd(U, 4)], [S0], PS)
compare("sum dim 1 of S(0)", lambda x: x.sum(dim=1), [rnd(U, 4)], [S0], S0)
compare("sum dim 0 of S(1)", lambda x: x.sum(dim=0), [rnd(U, 4, 3)], [S1], S0)
compare("sum keepdim of S(1)", lambda x: x.sum(dim=0, keepdim=True), [rnd(U, 4)], [S1], S1)
compare("sum all of S(1)", lambda x: x.sum(), [rnd(3, U)], [S1], PS)
compare("sum of P", lambda x: x.sum(dim=1), [rnd(3, U)], [PS], PS)
compare("mean dim 0 of S(0) uneven", lambda x: x.mean(dim=0), [rnd(U, 4)], [S0], PS)
compare("mean all of S(1)", lambda x: x.mean(), [rnd(3, U)], [S1], PS)
compare("mean dim 1 of S(0)", lambda x: x.mean(dim=1), [rnd(U, 4)], [S0], S0)
# matmul and linear
compare("matmul S(0) x B", flow.matmul, [rnd(U, 4), rnd(4, 3)], [S0, B], S0)
compare("matmul B x S(1)", flow.matmul, [rnd(3, 4), rnd(4, U)], [B, S1], S1)
compare("matmul S(1) x S(0)", flow.matmul, [rnd(3, U), rnd(U, 2)], [S1, S0], PS)
compare("matmul B x B", flow.matmul, [rnd(3, 4), rnd(4, 2)], [B, B], B)
compare("matmul P x B", flow.matmul, [rnd(3, 4), rnd(4, 2)], [PS, B], PS)
compare("batched matmul S(0) x S(0)", flow.matmul, [rnd(U, 3, 4), rnd(U, 4, 2)], [S0, S0], S0)
compare("matmul x.T S(0)", lambda a, b: flow.matmul(a.t(), b), [rnd(U, 3), rnd(U, 2)],
        [S0, S0], PS)
compare("linear S(0)", nnf.linear, [rnd(U, 4), rnd(3, 4), rnd(3)], [S0, B, B], S0)
compare("linear weight S(0)", nnf.linear, [rnd(5, 4), rnd(U, 4), rnd(U)], [B, S0, S0], S1)
compare("linear inner split", nnf.linear, [rnd(5, U), rnd(3, U), rnd(3)], [S1, S1, B], PS)
compare("linear no bias 3-d S(1)", nnf.linear, [rnd(2, U, 4), rnd(3, 4)], [S1, B], S1)
# softmax family along a dim that is not split
compare("softmax dim 1 of S(0)", lambda x: nnf.softmax(x, dim=1), [rnd(U, 5)], [S0], S0)
compare("log_softmax dim -1 of S(0)", lambda x: nnf.log_softmax(x, dim=-1), [rnd(U, 5)], [S0],
        S0)
compare("softmax along the split dim", lambda x: nnf.softmax(x, dim=0), [rnd(U, 5)], [S0])
labels = rng.integers(0, 5, size=U)
for red, want in (("none", S0), ("sum", PS), ("mean", None)):
    compare(f"cross_entropy {red}", lambda x, y, red=red: nnf.cross_entropy(x, y, reduction=red),
            [rnd(U, 5), labels], [S0, S0], want)
# layer norm over dims that are not split; its gradient's weight and bias parts partial
compare("layer_norm S(0)", lambda x, w, b: nnf.layer_norm(x, (5,), w, b),
        [rnd(U, 5), rnd(5), rnd(5)], [S0, B, B], S0)
compare("layer_norm 2 dims S(1)", lambda x: nnf.layer_norm(x, (3, 4)), [rnd(2, U, 3, 4)], [S1],
        S1)
compare("layer_norm along the split dim", lambda x: nnf.layer_norm(x, (U,)), [rnd(3, U)], [S1])
# embedding: indices split -> rows split; the weight gradient a partial sum
ids = rng.integers(0, 7, size=(U, 3))
compare("embedding S(0)", lambda i, w: nnf.embedding(i, w), [ids, rnd(7, 4)], [S0, B], S0)
compare("embedding S(1) padding_idx", lambda i, w: nnf.embedding(i, w, padding_idx=2),
        [ids.T.copy(), rnd(7, 4)], [S1, B], S1)
compare("embedding scale_grad_by_freq", lambda i, w: nnf.embedding(i, w, scale_grad_by_freq=True),
        [ids, rnd(7, 4)], [S0, B], S0)
# attention split on a batch or head dim; a mask split there too or broadcast
sdpa = nnf.scaled_dot_product_attention
compare("sdpa S(0)", sdpa, [rnd(U, 2, 3, 4), rnd(U, 2, 5, 4), rnd(U, 2, 5, 2)], [S0] * 3, S0)
compare("sdpa causal S(1)", lambda q, k, v: sdpa(q, k, v, is_causal=True),
        [rnd(2, U, 3, 4), rnd(2, U, 3, 4), rnd(2, U, 3, 2)], [S1] * 3, S1)
compare("sdpa additive mask S(1)", sdpa,
        [rnd(2, U, 3, 4), rnd(2, U, 5, 4), rnd(2, U, 5, 2), rnd(U, 3, 5)], [S1] * 3 + [S0], S1)
compare("sdpa broadcast mask", sdpa, [rnd(U, 3, 4), rnd(U, 5, 4), rnd(U, 5, 2), rnd(3, 5)],
        [S0] * 3 + [B], S0)
compare("sdpa bool mask", lambda q, k, v, m: sdpa(q, k, v, m > 0),
        [rnd(U, 3, 4), rnd(U, 5, 4), rnd(U, 5, 2), rnd(U, 1, 5)], [S0] * 4, S0)
compare("sdpa split along L", sdpa, [rnd(3, U, 4), rnd(3, 5, 4), rnd(3, 5, 2)], [S1, B, B])
# cat / split / narrow / basic indexing along dims that are not split
compare("cat dim 1 of S(0)", lambda a, b: flow.cat([a, b], dim=1), [rnd(U, 2), rnd(U, 3)],
        [S0, S0], S0)
compare("cat dim 0 of S(1) and B", lambda a, b: flow.cat([a, b]), [rnd(2, U), rnd(3, U)],
        [S1, B], S1)
compare("cat P", lambda a, b: flow.cat([a, b], dim=-1), [rnd(3, 2), rnd(3, 1)], [PS, PS], PS)
compare("cat along the split dim", lambda a, b: flow.cat([a, b]), [rnd(U, 2), rnd(U, 2)],
        [S0, S0])
compare("narrow dim 1 of S(0)", lambda x: x.narrow(1, 1, 2), [rnd(U, 4)], [S0], S0)
compare("split dim 1 of S(0)", lambda x: flow.split(x, [1, 3], dim=1)[1] * 2.0, [rnd(U, 4)],
        [S0], S0)
compare("getitem x[:, 1:3] of S(0)", lambda x: x[:, 1:3], [rnd(U, 4)], [S0], S0)
# (exp's gradient is laid out as its input: getitem_backward then gets a split dout)
compare("getitem of S(0), gradient split", lambda x: flow.exp(x[:, 1:3]), [rnd(U, 4)], [S0], S0)
compare("getitem x[1, None, ..., ::2] of S(1)", lambda x: flow.exp(x[1, None, ..., ::2]),
        [rnd(3, U, 4)], [S1], S1)
compare("getitem x[..., 0] of S(1)", lambda x: x[..., 0], [rnd(3, U, 4)], [S1], S1)
compare("getitem x[:, 2] of S(2)", lambda x: flow.exp(x[:, 2]), [rnd(3, 4, U)], [S2], S1)
compare("getitem P", lambda x: x[1:], [rnd(3, 4)], [PS], PS)
compare("getitem on the split dim", lambda x: x[1:], [rnd(U, 4)], [S0])
# convolution and pooling split on the batch (pooling also on channels); exp makes the
# gradients arrive split, so the gradient ops run split too
ex = flow.exp
compare("conv2d S(0)", lambda x, w, b: ex(nnf.conv2d(x, w, b, padding=1) / 4),
        [rnd(U, 2, 4, 4), rnd(3, 2, 3, 3), rnd(3)], [S0, B, B], S0)
compare("conv1d S(0) stride 2", lambda x, w: ex(nnf.conv1d(x, w, stride=2) / 4),
        [rnd(U, 2, 7), rnd(3, 2, 3)], [S0, B], S0)
compare("max_pool2d S(0)", lambda x: ex(nnf.max_pool2d(x, 2)), [rnd(U, 2, 4, 4)], [S0], S0)
compare("max_pool1d S(1)", lambda x: ex(nnf.max_pool1d(x, 3, 2, 1)), [rnd(2, U, 7)], [S1], S1)
compare("avg_pool2d S(1)", lambda x: ex(nnf.avg_pool2d(x, 2, padding=1)), [rnd(2, U, 5, 5)],
        [S1], S1)
compare("adaptive_avg_pool2d S(0)", lambda x: ex(nnf.adaptive_avg_pool2d(x, (2, 3))),
        [rnd(U, 2, 5, 5)], [S0], S0)
compare("adaptive_max_pool1d S(1)", lambda x: ex(nnf.adaptive_max_pool1d(x, 3)),
        [rnd(2, U, 7)], [S1], S1)
# the fused attention gradient with a gradient at probs only (its zero dout is made global)
qkv = [rnd(U, 3, 4), rnd(U, 5, 4), rnd(U, 5, 2), rnd(U, 3, 5), rnd(U, 3, 2), rnd(U, 3, 5)]
want = flow.functional.scaled_dot_product_attention_grad(
    None, *[flow.tensor(a) for a in qkv[:5]], 0.5, dprobs=flow.tensor(qkv[5]))
got = flow.functional.scaled_dot_product_attention_grad(
    None, *[flow.tensor(a, placement=PL, sbp=S0) for a in qkv[:5]], 0.5,
    dprobs=flow.tensor(qkv[5], placement=PL, sbp=S0))
for k in range(3):
    assert got[k].sbp == (S0,), f"rank {r}: sdpa grad sbp {got[k].sbp}"
    check(got[k].numpy(), want[k].numpy(), f"sdpa grad from dprobs, output {k}")
# reshape / view keep a split dim; transpose and permute move it
compare("reshape keeps dim 0", lambda x: x.reshape(U, 2, 3), [rnd(U, 6)], [S0], S0)
compare("view keeps dim 1", lambda x: x.view(2, 3, U), [rnd(6, U)], [S1], S2)
compare("reshape merging the split dim", lambda x: x.reshape(-1), [rnd(U, 3)], [S0])
compare("reshape P", lambda x: x.reshape(3, -1), [rnd(U, 3)], [PS], PS)
compare("transpose S(0)", lambda x: x.t(), [rnd(U, 3)], [S0], S1)
compare("permute S(2)", lambda x: x.permute(2, 0, 1), [rnd(2, 3, U)], [S2], S0)
# ops without rules run broadcast; ACTORFLOW_SBP_DEBUG=1 says so once per op
compare("median (no rule)", lambda x: flow.median(x), [rnd(U, 3)], [S0], B)
os.environ["ACTORFLOW_SBP_DEBUG"] = "1"
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    xg = flow.tensor(rnd(U, 3), placement=PL, sbp=S0)
    flow.median(xg), flow.median(xg + 1), flow.relu(xg)
del os.environ["ACTORFLOW_SBP_DEBUG"]
said = [str(w.message) for w in caught if "no SBP rule" in str(w.message)]
assert len(said) == 1 and said[0].startswith("median:"), f"rank {r}: {said}"
compare("a chain", lambda x, w: flow.relu(x @ w).sum(dim=1).mean(), [rnd(U, 4), rnd(4, 3)],
        [S0, B])
# a random op on a global tensor: the same values as in one process with the same seed
flow.manual_seed(11)
dg = nnf.dropout(flow.ones(U, 4, placement=PL, sbp=S0), p=0.5).numpy()
flow.manual_seed(11)
check(dg, nnf.dropout(flow.ones(U, 4), p=0.5).numpy(), "dropout")
# gradients accumulate into a global leaf's grad whatever the sbps meeting there
for s in (B, S0, PS):
    x = flow.tensor(np.arange(5.0), placement=PL, sbp=s, requires_grad=True)
    (x * 2).sum().backward()
    (x.to_global(sbp=S0) * x.to_global(sbp=B)).sum().backward()
    check(x.grad.numpy(), 2 + 2 * np.arange(5.0), f"accumulated gradient of a {s} leaf")
# in place on global tensors
a = flow.tensor(rnd(U, 3), placement=PL, sbp=S0)
full = a.numpy()
a.mul_(2.0)
a += flow.ones(U, 3, placement=PL, sbp=B)
check(a.numpy(), full * 2 + 1, "in place")
assert a.sbp == (S0,)
flow.synchronize()
print(f"OK rank {r}", flush=True)
