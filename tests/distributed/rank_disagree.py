"""Run under ``mpiexec -n 2``: global tensors created with different shapes or dtypes on the
ranks, and DistributedDataParallel over modules whose parameters differ, raise on every rank
naming the op or parameter, the ranks and their values; nothing is overwritten and the ranks
stay in step. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
from actorflow.nn.parallel import DistributedDataParallel as DDP
from actorflow.process.agree import RankMismatchError

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n == 2, "run me under mpiexec -n 2"
P = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)


def raises(exc, fn, *parts):
    try:
        fn()
    except exc as e:
        for p in parts:
            assert p in str(e), (p, str(e))
        return
    raise AssertionError(f"rank {r}: expected {exc.__name__} naming {parts}")


raises(RankMismatchError, lambda: flow.tensor(np.zeros((2 + r, 3)), placement=P, sbp=B),
       "flow.tensor", "rank 0: ((2, 3)", "rank 1: ((3, 3)")
raises(RankMismatchError,
       lambda: flow.tensor(np.zeros(4, np.float32 if r else np.float64), placement=P, sbp=S0),
       "flow.tensor", "float64", "float32")
raises(RankMismatchError, lambda: flow.ones(2, 1 + r, placement=P, sbp=S0), "flow.ones",
       "rank 0: ((2, 1)", "rank 1: ((2, 2)")
raises(RankMismatchError, lambda: flow.randn(3 + r, placement=P, sbp=B), "flow.randn")
raises(RankMismatchError, lambda: flow.arange(4 + 2 * r, placement=P, sbp=S0), "flow.arange")
# ranks that agree: created as before (and a signature agreed on costs no exchange again)
for _ in range(2):
    t = flow.tensor(np.arange(4.0), placement=P, sbp=S0)
    assert t.shape == (4,) and np.allclose(t.to_local().numpy(), [2.0 * r, 2.0 * r + 1])

# DDP: a parameter of another shape on rank 1; nothing is broadcast (rank 1 keeps its values)
flow.manual_seed(r)
net = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Linear(4, 2 + r))
before = [p.numpy().copy() for p in net.parameters()]
raises(RuntimeError, lambda: DDP(net), "parameter '1.weight'", "rank 0: 1.weight (2, 4)",
       "rank 1: 1.weight (3, 4)")
for p, b in zip(net.parameters(), before):
    np.testing.assert_array_equal(p.numpy(), b)
# a buffer present on one rank only
bn = flow.nn.BatchNorm1d(3, track_running_stats=(r == 0))
raises(RuntimeError, lambda: DDP(bn), "buffer", "absent")
# the ranks are still in step: a collective and a matching DDP work
x = flow.tensor([float(r + 1)])
flow.comm.all_reduce(x)
assert x.item() == 3.0
flow.manual_seed(r)
same = DDP(flow.nn.Linear(3, 2))
w = same.module.weight.numpy()
flow.manual_seed(0)
np.testing.assert_array_equal(w, flow.nn.Linear(3, 2).weight.numpy())
print(f"OK rank {r}", flush=True)
