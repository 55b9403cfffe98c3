"""Run under ``mpiexec -n 2``: ``Tensor.new`` and ``Tensor.type_as`` with global tensors,
as OneFlow's: ``new`` of a global tensor is global on its placement and sbp; ``type_as`` a
global tensor makes the result global like it (a local input as this rank's shard), and
``type_as`` a local one gives a global input's local shard; ``unfold`` of a global
tensor works. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
S0, B = flow.sbp.split(0), flow.sbp.broadcast
A = np.arange(8.0)

for sbp in (S0, B):
    x = flow.tensor(A, placement=PL, sbp=sbp, dtype=flow.float32)
    for y, shape in [(x.new(), (0,)), (x.new(2, 3), (2, 3)), (x.new(flow.Size([4])), (4,)),
                     (x.new([1, 2, 3]), (3,))]:
        assert y.is_global and y.placement == PL and y.sbp == (sbp,), (sbp, y)
        assert y.dtype == flow.float32 and tuple(y.shape) == shape, (y.dtype, y.shape)
    np.testing.assert_array_equal(x.new([1, 2, 3]).numpy(), [1, 2, 3])
    try:
        x.new(x)
        raise AssertionError("new(global tensor) must raise")
    except TypeError:
        pass

    g = flow.tensor(A, placement=PL, sbp=sbp, dtype=flow.int32)
    y = x.type_as(g)  # global to global: cast, layout of g
    assert y.dtype == flow.int32 and y.sbp == (sbp,), (y.dtype, y.sbp)
    np.testing.assert_array_equal(y.numpy(), A.astype(np.int32))
    local = flow.tensor(A[:4] + 10 * r)
    y = local.type_as(g)  # local to global: this rank's shard
    assert y.is_global and y.placement == PL and y.sbp == (sbp,) and y.dtype == flow.int32
    shard = A[:4] + 10 * (r if sbp == S0 else 0)  # (broadcast: as to_global, rank 0's)
    np.testing.assert_array_equal(y.to_local().numpy(), shard.astype(np.int32))
    y = x.type_as(flow.tensor([1], dtype=flow.float64))  # global to local: the shard
    assert not y.is_global and y.dtype == flow.float64
    np.testing.assert_array_equal(y.numpy(), x.to_local().numpy())
# Tensor.unfold of a global tensor: the window index is global too
M = np.arange(24.0).reshape(4, 6)
for sbp in (S0, flow.sbp.split(1), B):
    y = flow.tensor(M, placement=PL, sbp=sbp).unfold(1, 3, 2)
    np.testing.assert_array_equal(y.numpy(), np.lib.stride_tricks.sliding_window_view(
        M, 3, axis=1)[:, ::2])
    x = flow.tensor(M, placement=PL, sbp=sbp, requires_grad=True)
    x.unfold(0, 2, 1).sum().backward()  # its gradient: index_add into global zeros
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat([[1.0], [2], [2], [1]], 6, 1))

# zeros_like / ones_like with placement and sbp
for fn, v in ((flow.zeros_like, 0), (flow.ones_like, 1)):
    y = fn(flow.tensor(M), dtype=flow.int32, placement=PL, sbp=S0)
    assert y.sbp == (S0,) and y.dtype == flow.int32, (y.sbp, y.dtype)
    np.testing.assert_array_equal(y.numpy(), np.full((4, 6), v))
print(f"OK rank {r}", flush=True)
