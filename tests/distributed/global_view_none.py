"""Run under ``mpiexec -n 2``: ``flow.utils.global_view.to_global`` of a state dict that only
rank 0 holds (rank 1 passes None, as a rank without the checkpoint file does) onto a
placement of rank 0 alone: rank 1 gets the same structure of global tensors (empty shards),
and moving them onto both ranks gives every rank rank 0's values, as in OneFlow. Prints
``OK rank R``."""
import numpy as np

import actorflow as flow

r = flow.env.get_rank()
P0 = flow.placement("cpu", ranks=[0])
ALL = flow.placement.all("cpu")
W = np.arange(6.0).reshape(2, 3)
state = {"w": flow.tensor(W), "step": 7, "sub": [flow.tensor([1.0, 2.0])]} if r == 0 else None

g = flow.utils.global_view.to_global(state, placement=P0, sbp=flow.sbp.broadcast,
                                     warn_on_non_tensor_leaf=False)
assert isinstance(g, dict) and set(g) == {"w", "step", "sub"}, g
assert g["step"] == 7
assert g["w"].is_global and g["w"].placement == P0 and tuple(g["w"].shape) == (2, 3)
assert tuple(g["sub"][0].shape) == (2,)
if r != 0:
    assert g["w"].to_local().numel() == 0  # an empty shard outside the placement
b = flow.utils.global_view.to_global(g, placement=ALL, sbp=flow.sbp.broadcast,
                                     warn_on_non_tensor_leaf=False)
np.testing.assert_array_equal(b["w"].to_local().numpy(), W)
np.testing.assert_array_equal(b["sub"][0].to_local().numpy(), [1.0, 2.0])
# a single tensor, and split: rank 1's part comes from rank 0
t = flow.utils.global_view.to_global(flow.tensor(W) if r == 0 else None, placement=P0,
                                     sbp=flow.sbp.split(0))
np.testing.assert_array_equal(t.to_global(ALL, flow.sbp.broadcast).numpy(), W)
# on every rank nothing is sent: each rank's own local tensors are taken (OneFlow's)
mine = flow.utils.global_view.to_global({"x": flow.tensor([float(r)])}, placement=ALL,
                                        sbp=flow.sbp.split(0))
np.testing.assert_array_equal(mine["x"].numpy(), [0.0, 1.0])
print(f"OK rank {r}", flush=True)
