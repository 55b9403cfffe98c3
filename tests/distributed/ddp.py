"""Run under ``mpiexec -n N``: DistributedDataParallel trains like one process on the full
global batch and like the global-tensor data-parallel model; no_sync accumulates; rank 0's
parameters and buffers are broadcast; an unused parameter is reported. Prints ``OK rank R``."""
import gc
import os

import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf
from actorflow.nn.parallel import DistributedDataParallel as DDP

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(5)
PER, D, H, C = 3, 6, 8, 4
N = PER * n  # equal shards: the mean of the ranks' mean losses is the full-batch mean
X = rng.standard_normal((4, N, D)).astype(np.float32)  # 4 steps of a global batch
Y = rng.integers(0, C, size=(4, N))


def model(seed):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(D, H), flow.nn.Tanh(), flow.nn.Linear(H, C))


def run(net, xs, ys, make_opt, fwd=None):
    opt = make_opt(net.parameters())
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nnf.cross_entropy((fwd or net)(x), y).backward()
        opt.step()
    return [p.numpy() for p in net.parameters()]


sampler = flow.utils.data.DistributedSampler(range(N), shuffle=False)
mine = list(sampler)
assert mine == list(range(r, N, n)), mine
OPTS = [lambda ps: flow.optim.SGD(ps, lr=0.2, momentum=0.9),
        lambda ps: flow.optim.Adam(ps, lr=0.02)]
for k, make_opt in enumerate(OPTS):
    for bucket in (1, 3, 10):
        net = model(100 + r)  # different on every rank: DDP broadcasts rank 0's
        ddp = DDP(net, bucket_size=bucket)
        ref = model(100)
        for a, b in zip(net.parameters(), ref.parameters()):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        got = run(net, [flow.tensor(x[mine]) for x in X], [flow.tensor(y[mine]) for y in Y],
                  make_opt, ddp)
        want = run(ref, [flow.tensor(x) for x in X], [flow.tensor(y) for y in Y], make_opt)
        for i, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                       err_msg=f"rank {r}: opt {k} bucket {bucket} param {i}")
    # the global-tensor data-parallel model of the same init reaches the same parameters
    glob = model(100)
    for p in glob.parameters():
        p.data = p.detach().to_global(placement=PL, sbp=B)
    gx = [flow.tensor(x, placement=PL, sbp=S0) for x in X]
    gy = [flow.tensor(y, placement=PL, sbp=S0) for y in Y]
    for i, (a, b) in enumerate(zip(run(glob, gx, gy, make_opt), got)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                                   err_msg=f"rank {r}: opt {k} global vs DDP param {i}")

# after backward the gradients are the full-batch ones, identical on every rank
net, ref = model(7), model(7)
ddp = DDP(net, bucket_size=2)
nnf.cross_entropy(ddp(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
nnf.cross_entropy(ref(flow.tensor(X[0])), flow.tensor(Y[0])).backward()
for a, b in zip(net.parameters(), ref.parameters()):
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)

# no_sync: the first micro-batch accumulates locally, the second backward averages the sum
net, ref = model(8), model(8)
ddp = DDP(net, bucket_size=3)
with ddp.no_sync():
    nnf.cross_entropy(ddp(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
local = [p.grad.numpy().copy() for p in net.parameters()]
nnf.cross_entropy(ddp(flow.tensor(X[1][mine])), flow.tensor(Y[1][mine])).backward()
(nnf.cross_entropy(ref(flow.tensor(X[0])), flow.tensor(Y[0]))
 + nnf.cross_entropy(ref(flow.tensor(X[1])), flow.tensor(Y[1]))).backward()
for a, b in zip(net.parameters(), ref.parameters()):
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
# inside no_sync the gradient was this rank's own (it differs from the full-batch one)
solo = model(8)
nnf.cross_entropy(solo(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
for a, b in zip(local, solo.parameters()):
    np.testing.assert_allclose(a, b.grad.numpy(), rtol=1e-6, atol=1e-7)

# a dropped wrapper stops averaging: the module's gradients are this rank's own again
net, solo = model(8), model(8)
ddp = DDP(net)
del ddp
gc.collect()
nnf.cross_entropy(net(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
nnf.cross_entropy(solo(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
for a, b in zip(net.parameters(), solo.parameters()):
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())

# buffers: rank 0's are broadcast at construction and before each forward
bn = flow.nn.BatchNorm1d(D)
with flow.no_grad():
    bn.running_mean.fill_(float(r))
ddp = DDP(bn)
np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(D, np.float32))
with flow.no_grad():
    bn.running_mean.fill_(float(r + 1))
ddp.eval()
ddp(flow.tensor(X[0][mine]))
np.testing.assert_array_equal(bn.running_mean.numpy(), np.ones(D, np.float32))

# broadcast_buffers=False: the buffers stay each rank's own (not broadcast at construction
# either, as OneFlow's DDP)
bn = flow.nn.BatchNorm1d(D)
with flow.no_grad():
    bn.running_mean.fill_(float(r))
DDP(bn, broadcast_buffers=False).eval()(flow.tensor(X[0][mine]))
np.testing.assert_array_equal(bn.running_mean.numpy(), np.full(D, float(r), np.float32))

# parameters that get no gradient on a rank take part with zeros (OneFlow's DDP): one used
# on rank 0 only is averaged with the others' zeros, one used nowhere gets zeros; also when
# backward runs through part of the module only
class Partly(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = flow.nn.Parameter(flow.tensor([1.0]))
        self.only0 = flow.nn.Parameter(flow.tensor([2.0]))
        self.unused = flow.nn.Parameter(flow.tensor([3.0]))

    def forward(self, x):
        x = x * self.w
        return x * self.only0 if r == 0 else x


for bucket in (1, 2, 10):
    m = Partly()
    ddp = DDP(m, bucket_size=bucket)
    ddp(flow.tensor([float(r + 1)])).sum().backward()
    xs = np.arange(1.0, n + 1)
    np.testing.assert_allclose(m.w.grad.numpy(), [(2.0 + xs[1:].sum()) / n])
    np.testing.assert_allclose(m.only0.grad.numpy(), [1.0 / n])
    np.testing.assert_array_equal(m.unused.grad.numpy(), [0.0])
    ddp(flow.tensor([1.0]))  # nothing left half-way
net = model(9)
ddp = DDP(net, bucket_size=2)
xh = flow.tensor(np.full((2, H), float(r + 1), np.float32))
net[2](xh).sum().backward()
np.testing.assert_allclose(net[2].weight.grad.numpy(), np.full((C, H), n + 1.0))  # 2 rows
for p in net[0].parameters():
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(tuple(p.shape)))
# a backward that raised half-way (after some buckets were reduced) leaves no stale state:
# the next backward averages every gradient again
net, ref = model(11), model(11)
ddp = DDP(net, bucket_size=1)
mid = net[0](flow.tensor(X[0][mine]))  # the hook raises once the last layer's are reduced
mid.register_hook(lambda g: (_ for _ in ()).throw(ValueError("stop")))
try:
    nnf.cross_entropy(net[2](net[1](mid)), flow.tensor(Y[0][mine])).backward()
    raise AssertionError("the hook should have raised")
except ValueError:
    pass
net.zero_grad()
nnf.cross_entropy(ddp(flow.tensor(X[0][mine])), flow.tensor(Y[0][mine])).backward()
nnf.cross_entropy(ref(flow.tensor(X[0])), flow.tensor(Y[0])).backward()
for a, b in zip(net.parameters(), ref.parameters()):
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)

# ranks whose backward makes the buckets ready in different orders still reduce them in one
# order (each rank multiplies by the parameters in its own order; one parameter per bucket)
class Chain(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = flow.nn.ParameterList([flow.nn.Parameter(flow.tensor([float(k + 1)] * 2))
                                        for k in range(4)])

    def forward(self, x):
        for k in (range(4) if r % 2 == 0 else reversed(range(4))):
            x = x * self.w[k]
        return x


for bucket in (1, 3):
    chain = Chain()
    ddp = DDP(chain, bucket_size=bucket)
    ddp(flow.tensor([float(r + 1)] * 2)).sum().backward()
    mean_x = sum(k + 1 for k in range(n)) / n
    for k in range(4):
        others = np.prod([j + 1.0 for j in range(4) if j != k])
        np.testing.assert_allclose(chain.w[k].grad.numpy(), [mean_x * others] * 2,
                                   err_msg=f"rank {r} bucket {bucket} w{k}")

# overlap (async VM only): the first bucket (the last layer's gradients, final early in
# backward) is copied into its flat buffer on the communication worker while worker 0 still
# computes the rest;
# also when backward accumulates into existing .grad (the add is issued inside the walk)
if os.environ.get("ACTORFLOW_EAGER_BLOCKING") != "1":
    flow.manual_seed(0)
    big = flow.nn.Sequential(*[flow.nn.Linear(512, 512) for _ in range(6)])
    ddp = DDP(big, bucket_size=2)
    xb = flow.randn(256, 512)
    for step in range(3):
        if step < 2:
            big.zero_grad()
        with flow.profiler.profile() as prof:
            ddp(xb).square().mean().backward()
            flow.synchronize()
        ins = prof.instructions()
        # per bucket of 2: 2 copies into the flat buffer, 2 back into the gradients
        copies = [e["start"] for e in ins
                  if e["thread"].endswith("comm") and e["name"] == "copy"]
        compute = [e["start"] for e in ins if e["thread"].endswith("worker-0")]
        if step > 0:
            assert len(copies) == 24 and min(copies) < max(compute), \
                (step, copies, max(compute))
flow.synchronize()
print(f"OK rank {r}", flush=True)
