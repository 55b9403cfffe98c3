"""Run under ``mpiexec -n 2``: Module.to_global / to_local keep the Parameter objects, train
globally, and come back to local shards."""
import numpy as np

import actorflow as flow

P = flow.placement("cpu", ranks=[0, 1])
flow.manual_seed(0)
m = flow.nn.Linear(4, 3)
ref_w = m.weight.numpy().copy()
w0 = m.weight
m.to_global(placement=P, sbp=flow.sbp.broadcast)
assert m.weight is w0 and m.weight.is_global and m.weight.placement == P
x = flow.randn(2, 4).to_global(placement=P, sbp=flow.sbp.broadcast)
y = m(x)
y.sum().backward()
assert m.weight.grad.is_global
np.testing.assert_allclose(m.weight.numpy(), ref_w)
m.to_local()
assert not m.weight.is_global and tuple(m.weight.shape) == (3, 4)
print(f"OK rank {flow.env.get_rank()}", flush=True)
