"""Run under ``mpiexec -n N`` with a shared directory as argument: ``flow.save`` of a state
dict holding global tensors gathers them and only ``global_dst_rank`` writes; loading the file
into a module (and an optimizer) with global parameters re-shards it to each parameter's
placement and sbp. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
DIR = sys.argv[1]
PL = flow.placement.all("cpu")
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
rng = np.random.default_rng(3)
X = rng.standard_normal((2 * n + 1, 5)).astype(np.float32)
Y = rng.integers(0, 3, size=2 * n + 1)
LAYOUT = [S0, B, S1, B]  # fc1.weight split by outputs, fc2.weight by inputs


def model(seed):
    flow.manual_seed(seed)
    net = flow.nn.Sequential(flow.nn.Linear(5, 7), flow.nn.ReLU(), flow.nn.Linear(7, 3))
    for p, sbp in zip(net.parameters(), LAYOUT):
        p.data = p.detach().to_global(placement=PL, sbp=B).to_global(sbp=sbp)
    return net


def train(net, opt, steps):
    x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    for _ in range(steps):
        opt.zero_grad()
        nnf.cross_entropy(net(x), y).backward()
        opt.step()


net = model(1)
opt = flow.optim.Adam(net.parameters(), lr=0.05)
train(net, opt, 2)
logical = {k: v.numpy() for k, v in net.state_dict().items()}

# every rank passes its own path: only the destination rank's file may appear
for dst in range(2):
    path = os.path.join(DIR, f"model_dst{dst}_rank{r}.af")
    flow.save(net.state_dict(), path, global_dst_rank=dst)
    flow.save(opt.state_dict(), path + ".opt", global_dst_rank=dst)
    assert os.path.exists(path) == (r == dst), (r, dst)
    assert os.path.exists(path + ".opt") == (r == dst), (r, dst)
flow.comm.barrier()
path = os.path.join(DIR, "model_dst0_rank0.af")  # rank 0's file, read by every rank
loaded = flow.load(path)
assert all(v.is_local for v in loaded.values())
for k, v in loaded.items():
    np.testing.assert_array_equal(v.numpy(), logical[k], err_msg=f"rank {r}: {k}")

# a fresh global model takes the loaded state, each parameter keeping its own sbp
net2 = model(2)
opt2 = flow.optim.Adam(net2.parameters(), lr=0.05)
net2.load_state_dict(loaded)
opt2.load_state_dict(flow.load(path + ".opt"))
for (k, p), sbp in zip(net2.named_parameters(), LAYOUT):
    assert p.is_global and p.sbp == (sbp,) and p.placement == PL, (k, p.sbp)
    np.testing.assert_array_equal(p.numpy(), logical[k], err_msg=f"rank {r}: {k}")
for p in net2.parameters():
    for key, st in opt2.state[p].items():
        assert st.is_global and st.sbp == ((p.sbp[0],) if st.ndim else (B,)), (key, st.sbp)
# both continue alike
train(net, opt, 2)
train(net2, opt2, 2)
for (k, a), b in zip(net.named_parameters(), net2.parameters()):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"rank {r}: {k} after resume")

# a local model of one process loads the same file
local = flow.nn.Sequential(flow.nn.Linear(5, 7), flow.nn.ReLU(), flow.nn.Linear(7, 3))
local.load_state_dict(loaded)
for k, v in local.state_dict().items():
    np.testing.assert_array_equal(v.numpy(), logical[k])

# load(global_src_rank=1): only rank 1 reads (the path exists on rank 1 only), every tensor
# comes back broadcast on all ranks; modules and optimizers take it whatever their layout
mine = os.path.join(DIR, f"model_dst1_rank{r}.af")
g = flow.load(mine, global_src_rank=1)
for k, v in g.items():
    assert v.is_global and v.sbp == (B,) and v.placement == PL, (k, v.sbp)
    np.testing.assert_array_equal(v.numpy(), logical[k], err_msg=f"rank {r}: {k}")
net3 = model(3)
opt3 = flow.optim.Adam(net3.parameters(), lr=0.05)
net3.load_state_dict(g)
opt3.load_state_dict(flow.load(mine + ".opt", global_src_rank=1))
for (k, p), sbp in zip(net3.named_parameters(), LAYOUT):
    assert p.sbp == (sbp,), (k, p.sbp)
local2 = flow.nn.Sequential(flow.nn.Linear(5, 7), flow.nn.ReLU(), flow.nn.Linear(7, 3))
local2.load_state_dict(g)
for k, v in local2.state_dict().items():
    assert v.is_local
    np.testing.assert_array_equal(v.numpy(), logical[k])
net4 = model(4)
opt4 = flow.optim.Adam(net4.parameters(), lr=0.05)
net4.load_state_dict(loaded)
opt4.load_state_dict(flow.load(path + ".opt"))
train(net3, opt3, 2)
train(net4, opt4, 2)
for (k, a), b in zip(net3.named_parameters(), net4.parameters()):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"rank {r}: {k} (src load)")
try:
    flow.load(os.path.join(DIR, "missing.af"), global_src_rank=1)
    raise AssertionError("a missing file on the source rank should raise on every rank")
except OSError as e:
    assert "rank 1 could not read" in str(e), e

try:
    flow.save(net.state_dict(), os.path.join(DIR, f"nodst{r}.af"))
    raise AssertionError("saving global tensors without global_dst_rank should raise")
except ValueError as e:
    assert "global_dst_rank" in str(e), e
try:
    flow.save({}, os.path.join(DIR, f"bad{r}.af"), global_dst_rank=n)
    raise AssertionError("a rank outside the world should raise")
except ValueError as e:
    assert "global_dst_rank" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
