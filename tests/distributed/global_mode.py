"""Run under ``mpiexec -n 2``: ``flow.utils.global_view.global_mode`` makes the creation ops
build global tensors of its placement and sbp (eagerly and in a Graph's trace), random ones
with the same logical values on every rank; ``current_global_mode`` reports it; nesting and
``global_mode(False)`` restore. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
from actorflow.utils import global_view

r = flow.env.get_rank()
P = flow.placement("cpu", ranks=[0, 1])
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)

assert not global_view.current_global_mode().is_enabled
with global_view.global_mode(True, placement=P, sbp=B):
    mode = global_view.current_global_mode()
    assert mode.is_enabled and mode.placement == P and mode.sbp[0] == B
    made = {"randn": flow.randn(2, 2), "rand": flow.rand((2, 2)),
            "randint": flow.randint(-100, 100, (2, 2)), "randperm": flow.randperm(5),
            "arange": flow.arange(10), "empty": flow.empty((1, 2)), "ones": flow.ones(3),
            "tensor": flow.tensor([[1, 2, 4, 5], [4, 3, 2, 9]], dtype=flow.int),
            "hann_window": flow.hann_window(8, dtype=flow.float)}
    explicit = flow.zeros(4, placement=P, sbp=S0)  # its own placement and sbp win
    with global_view.global_mode(True, placement=P, sbp=S0):
        split = flow.arange(6)
        assert global_view.current_global_mode().sbp == (S0,)
    with global_view.global_mode(False, placement=P, sbp=B):
        assert not global_view.current_global_mode().is_enabled
        local = flow.ones(2)
    assert global_view.current_global_mode().sbp == (B,)
    dev = made["randn"].device
    moved = made["randn"].to(dev)
assert not global_view.current_global_mode().is_enabled
assert flow.ones(2).is_local and local.is_local
for k, v in made.items():
    assert v.is_global and v.placement == P and v.sbp == (B,), k
assert moved.is_global and moved.placement == P
assert explicit.sbp == (S0,) and tuple(explicit.to_local().shape) == (2,)
assert split.sbp == (S0,) and split.to_local().numpy().tolist() == [[0, 1, 2], [3, 4, 5]][r]
np.testing.assert_array_equal(made["arange"].to_local().numpy(), np.arange(10))
np.testing.assert_array_equal(made["tensor"].to_local().numpy(), [[1, 2, 4, 5], [4, 3, 2, 9]])
# random values agree among the ranks (one agreed seed): rank 1 compares with rank 0's
for k in ("randn", "rand", "randint", "randperm"):
    theirs = made[k].to_local().clone()
    flow.comm.broadcast(theirs, 0)
    np.testing.assert_array_equal(made[k].to_local().numpy(), theirs.numpy(), err_msg=k)


class G(flow.nn.Graph):
    def build(self, x):
        with global_view.global_mode(True, placement=P, sbp=B):
            noise = flow.randn(2, 3)
            assert global_view.current_global_mode().is_enabled
            y = x + flow.ones(2, 3) + noise - noise
        assert not global_view.current_global_mode().is_enabled
        return y


x = flow.zeros(2, 3).to_global(P, B)
y = G()(x)
assert y.is_global and y.placement == P, y
np.testing.assert_allclose(y.to_local().numpy(), np.ones((2, 3)), atol=1e-6)
try:
    global_view.global_mode(True, placement=P)
except ValueError as e:
    assert "sbp" in str(e)
else:
    raise AssertionError("global_mode(True) without sbp must raise")
print(f"OK rank {r}", flush=True)
