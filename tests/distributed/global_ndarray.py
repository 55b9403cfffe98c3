"""Run under ``mpiexec -n N``: a NumPy array as the other operand of an eager global tensor's
operator (``+ - * / ** // %``, in place too) is its logical value broadcast on the tensor's
placement, in the tensor's dtype, as OneFlow's tensor operators make it: the result keeps the
tensor's sbp and equals NumPy's. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r = flow.env.get_rank()
A = np.arange(1, 25).reshape(4, 6)
N = np.random.default_rng(0).integers(1, 300, (4, 6))
REF = {"+": A + N, "-": A - N, "*": A * N, "/": A / N, "**": A ** (N % 4), "//": A // N,
       "%": np.fmod(A, N)}

for pl, sbps in ((flow.placement.all("cpu"),
                  [(flow.sbp.split(0),), (flow.sbp.split(1),), (flow.sbp.broadcast,)]),
                 (flow.placement("cpu", [[0, 1]]),
                  [(flow.sbp.broadcast, flow.sbp.split(1)),
                   (flow.sbp.split(0), flow.sbp.split(1))])):
    for sbp in sbps:
        t = flow.tensor(A, placement=pl, sbp=sbp)
        for op, want in REF.items():
            other = N % 4 if op == "**" else N
            z = eval(f"t {op} other")
            assert z.is_global and z.placement == pl and z.sbp == sbp, (op, sbp, z.sbp)
            np.testing.assert_allclose(z.numpy(), want, rtol=1e-6, err_msg=f"{op} on {sbp}")
        u = flow.tensor(A, placement=pl, sbp=sbp)
        u += N
        assert u.sbp == sbp
        np.testing.assert_array_equal(u.numpy(), A + N)

# the array takes the global tensor's dtype (float64 values meet a float32 tensor as float32)
f = flow.tensor(A.astype(np.float32), placement=flow.placement.all("cpu"), sbp=flow.sbp.split(0))
h = f * np.full((4, 6), 0.1)
assert h.dtype == flow.float32, h.dtype
np.testing.assert_array_equal(h.numpy(), A.astype(np.float32) * np.float32(0.1))
# a 0-d array and a broadcastable row
np.testing.assert_array_equal((f + np.array(2.0)).numpy(), A + 2)
np.testing.assert_array_equal((f - np.arange(6)).numpy(), A - np.arange(6))
# a local tensor keeps meeting arrays locally, with NumPy's promotion
loc = flow.tensor(A.astype(np.float32)) + np.ones((4, 6))
assert not loc.is_global and loc.dtype == flow.float64, loc.dtype
print(f"OK rank {r}", flush=True)
