"""Run under ``mpiexec -n 2``: ``x[index] = value`` where the global ``value`` lies on another
placement than ``x`` (another hierarchy of the same ranks, or fewer ranks): the value is
replicated onto ``x``'s placement first, as OneFlow's setitem does; a local value into a
global ``x`` is refused. Values against NumPy. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n == 2, "run me under mpiexec -n 2"
P1, P2, P0 = (flow.placement("cpu", [0, 1]), flow.placement("cpu", [[0, 1]]),
              flow.placement("cpu", [0]))
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
full = np.arange(64.0, dtype=np.float32).reshape(8, 8)
cases = [
    ((slice(None), 2), np.arange(8.0) * -1, P1, [S0]),            # a column, value S(0) 1-D
    (([0, 2, 4],), np.full((3, 8), 5.0), P1, [B]),                 # advanced index rows
    ((1, 0), np.array(7.5), P0, [B]),                              # a scalar from rank 0 only
    ((slice(0, 4), slice(2, 6)), np.ones((4, 4)) * 3, P0, [B]),    # a block from rank 0 only
]
for x_sbp in ([S0, S1], [B, S0], [S1, B]):
    for index, value, vpl, vsbp in cases:
        x = flow.tensor(full, placement=P2, sbp=x_sbp)
        v = flow.tensor(value.astype(np.float32), placement=vpl, sbp=vsbp)
        x[index] = v
        want = full.copy()
        want[index] = value
        assert x.placement == P2 and x.sbp == tuple(x_sbp), (x.placement, x.sbp)
        np.testing.assert_array_equal(x.numpy(), want, err_msg=f"rank {r}: {x_sbp} {index}")
    # a bool mask over the whole tensor with a 1-element value on the 1-D placement
    x = flow.tensor(full, placement=P2, sbp=x_sbp)
    mask = flow.tensor(full > 40, placement=P2, sbp=[B, B])
    x[mask] = flow.tensor([-1.0], placement=P1, sbp=[B])
    np.testing.assert_array_equal(x.numpy(), np.where(full > 40, -1.0, full))

x = flow.tensor(full, placement=P2, sbp=[S0, S1])
try:
    x[0] = flow.ones(8)
except ValueError as e:
    assert "local tensor" in str(e), e
else:
    raise AssertionError("a local value into a global tensor was not refused")
print(f"OK rank {r}", flush=True)
