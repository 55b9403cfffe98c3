"""Run under ``mpiexec -n N``: Python numbers (and index or value lists) meeting an eager
global tensor act as values broadcast on its placement, as in OneFlow: ``t[idx] = 0.0``,
``masked_fill_``, ``fill_``, ``clamp_``, ``copy_(number)``, list indices; on split and
broadcast tensors, writes keep the tensor's sbp (setitem has no rule keeping a split of the
indexed dim: it runs broadcast and its result is boxed back). Checked against NumPy; a local
tensor given by the user still raises. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
A = np.random.default_rng(0).random((4, 6))


def np_setitem(idx, v):
    def f(a):
        a[idx] = v
    return f


CASES = {  # name: (actorflow in place on t, the same on a NumPy array)
    "setitem row": (lambda t: t.__setitem__(1, 0.0), np_setitem(1, 0.0)),
    "setitem int": (lambda t: t.__setitem__((slice(None), 0), 5), np_setitem((slice(None), 0), 5)),
    "setitem slice": (lambda t: t.__setitem__(slice(1, 3), -2.5), np_setitem(slice(1, 3), -2.5)),
    "setitem list value": (lambda t: t.__setitem__(0, [1.0, 2, 3, 4, 5, 6]),
                           np_setitem(0, [1.0, 2, 3, 4, 5, 6])),
    "setitem list index": (lambda t: t.__setitem__([0, 2], 1.0), np_setitem([0, 2], 1.0)),
    "setitem bool list": (lambda t: t.__setitem__((slice(None), [True, False] * 3), 9.0),
                          np_setitem((slice(None), [True, False] * 3), 9.0)),
    "masked_fill_": (lambda t: t.masked_fill_(t > 0.5, 0.0), lambda a: a.__setitem__(a > 0.5, 0)),
    "fill_": (lambda t: t.fill_(2.0), lambda a: a.fill(2.0)),
    "clamp_": (lambda t: t.clamp_(0.2, 0.6), lambda a: np.clip(a, 0.2, 0.6, out=a)),
    "clamp_ min": (lambda t: t.clamp_(min=0.3), lambda a: np.maximum(a, 0.3, out=a)),
    "copy_ number": (lambda t: t.copy_(1.5), lambda a: a.fill(1.5)),
    "add_": (lambda t: t.add_(1), lambda a: np.add(a, 1, out=a)),
}

for sbp in (flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast):
    for name, (fn, ref) in CASES.items():
        t = flow.tensor(A, placement=PL, sbp=sbp)
        fn(t)
        want = A.copy()
        ref(want)
        assert t.sbp == (sbp,), (name, sbp, t.sbp)
        np.testing.assert_array_equal(t.numpy(), want, err_msg=f"{name} on {sbp}")
    t = flow.tensor(A, placement=PL, sbp=sbp)
    np.testing.assert_array_equal(t[[0, 3]].numpy(), A[[0, 3]])
    np.testing.assert_array_equal(flow.where(t > 0.5, t, 0.0).numpy(), np.where(A > 0.5, A, 0))

# autograd through a write boxed back: d/dA sum((A * 2) with row 1 set to 0) = 2 off row 1
x = flow.tensor(A, placement=PL, sbp=flow.sbp.split(0), requires_grad=True)
y = x * 2
y[1] = 0.0
y.sum().backward()
g = np.full_like(A, 2.0)
g[1] = 0
np.testing.assert_array_equal(x.grad.numpy(), g)

try:  # a local tensor given by the user is not taken as broadcast
    flow.tensor(A, placement=PL, sbp=flow.sbp.split(0))[0] = flow.tensor(1.0)
except ValueError as e:
    assert "mixes a local tensor" in str(e), e
else:
    raise AssertionError("a local tensor written into a global one did not raise")
print(f"OK rank {r}", flush=True)
