"""Integer edge cases behave as in PyTorch: integral clamp bounds, ``full``/``full_like``/
``tensor`` values and ``where`` scalars must be representable in an integer dtype (unsigned
dtypes also take ints down to -max, which wrap); integer ``pow`` rejects a negative scalar
exponent and gives 1, +-1 or 0 for negative tensor exponents. Errors come from inference (or
the functional call), name the op, the value and the dtype, and also surface while an
nn.Graph traces. The plain-value tests run without torch; ``*_match_torch`` compare with it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import FnGraph

U8, I8 = flow.uint8, flow.int8
NEG_POW = "Integers to negative integer powers are not allowed"


def _u8(v):
    return flow.tensor(v, dtype=U8)


def _same(t, values, dtype):
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(values, dtype=t.numpy().dtype))


# ---- clamp --------------------------------------------------------------------------------------

def test_clamp_integral_bounds_out_of_range_raise():
    x = _u8([250, 3])
    cases = [(lambda: x.clamp(max=300), "300", "uint8"),
             (lambda: flow.clamp(x, min=-256), "-256", "uint8"),
             (lambda: x.clamp_(max=300), "300", "uint8"),
             (lambda: x.clamp_min(300), "300", "uint8"),
             (lambda: x.clamp_max(256), "256", "uint8"),
             (lambda: x.clamp_max_(256), "256", "uint8"),
             (lambda: x.clamp(max=2**63), "9223372036854775808", "uint8"),
             (lambda: flow.tensor([-100, 5], dtype=I8).clamp(min=-1000), "-1000", "int8"),
             (lambda: flow.tensor([1], dtype=I8).clamp(min=np.int64(1000)), "1000", "int8"),
             (lambda: flow.tensor([1], dtype=flow.int32).clamp(max=2**40), str(2**40),
              "int32"),
             (lambda: flow.tensor([1]).clamp(max=2**63), str(2**63), "int64")]
    for call, value, dtype in cases:
        with pytest.raises(OverflowError, match=f"clamp: the value {value} cannot be converted "
                                                f"to actorflow.{dtype} without overflow"):
            call()
    with pytest.raises(OverflowError, match="clamp: the integer scalar .* does not fit in 64"):
        flow.tensor([1]).clamp(max=2**64)
    _same(x, [250, 3], U8)  # the failed clamp_ left x alone


def test_clamp_integral_bounds_wrap_or_promote():
    x = _u8([250, 3])
    _same(x.clamp(min=-1), [255, 255], U8)           # -1 wraps to 255, as in PyTorch
    _same(x.clamp(max=-1), [250, 3], U8)
    _same(x.clamp(min=-255), [250, 3], U8)           # -255 wraps to 1
    _same(x.clamp(min=-1, max=0), [0, 0], U8)
    _same(x.clone().clamp_min_(-5), [251, 251], U8)
    _same(x.clamp(max=True), [1, 1], U8)
    _same(x.clamp(max=300.0), [250.0, 3.0], flow.float32)  # a float bound promotes
    _same(x.clamp(min=-1000, max=3.0), [3.0, 3.0], flow.float32)
    _same(flow.tensor([True, False]).clamp(max=2), [1, 0], flow.int64)
    _same(flow.tensor([-100, 5], dtype=I8).clamp(min=-128, max=127), [-100, 5], I8)
    _same(x.clamp(max=flow.tensor(300)), [44, 3], U8)   # tensor bounds are cast (wrap)


# ---- full, full_like, tensor ----------------------------------------------------------------

def test_full_and_full_like_values_must_fit():
    for v in (300, -256, 255.5, -0.5, math.inf, math.nan):
        with pytest.raises(OverflowError, match=f"full: the value {v!r} cannot be converted to "
                                                f"actorflow.uint8 without overflow"):
            flow.full((2,), v, dtype=U8)
    with pytest.raises(OverflowError, match="full: the value 9223372036854775808 cannot be "
                                            "converted to actorflow.int64"):
        flow.full((2,), 2**63)
    with pytest.raises(OverflowError, match="full: the value 300 cannot be converted"):
        flow.full((2,), flow.tensor(300), dtype=U8)
    with pytest.raises(OverflowError, match="full_like: the value -1000 cannot be converted to "
                                            "actorflow.int8"):
        flow.full_like(flow.zeros(1, dtype=I8), -1000)
    with pytest.raises(OverflowError, match="full_like: the value 300 cannot be converted to "
                                            "actorflow.uint8"):
        flow.full_like(flow.zeros(1), 300, dtype=U8)
    _same(flow.full((2,), -1, dtype=U8), [255, 255], U8)
    _same(flow.full((1,), -255, dtype=U8), [1], U8)
    _same(flow.full((2,), 2.7, dtype=I8), [2, 2], I8)
    _same(flow.full((1,), -2**63), [-2**63], flow.int64)
    _same(flow.full((2,), 300, dtype=flow.bool), [True, True], flow.bool)
    _same(flow.full_like(_u8([1, 2]), -1), [255, 255], U8)
    _same(flow.full((1,), 300, dtype=flow.float16), [300.0], flow.float16)


def test_tensor_from_python_numbers_must_fit():
    for data, value, dtype in (([300], "300", "uint8"), (300, "300", "uint8"),
                               ([[1, 300], [2, 3]], "300", "uint8"), ([-256], "-256", "uint8"),
                               ([128], "128", "int8"), ([300.0], "300.0", "uint8"),
                               ([255.5], "255.5", "uint8"), ([2.7, -1.5], "-1.5", "uint8"),
                               ([float("nan")], "nan", "int32"), ([2**31], "2147483648", "int32"),
                               ([True, 300], "300", "uint8"), ([np.int64(300)], "300", "uint8"),
                               (np.float64(300.0), "300.0", "uint8"),
                               ([flow.tensor(300), 1], "300", "uint8"),
                               ([2**63], "9223372036854775808", "uint8")):
        with pytest.raises(OverflowError, match=f"tensor: the value {value} cannot be converted "
                                                f"to actorflow.{dtype} without overflow"):
            flow.tensor(data, dtype=getattr(flow, dtype))
    with pytest.raises(OverflowError, match="tensor: the value 9223372036854775808 cannot be "
                                            "converted to actorflow.int64"):
        flow.tensor([2**63])
    for data in ([2**64], [-2**63 - 1]):
        with pytest.raises(OverflowError, match="tensor: the integer scalar .* does not fit in "
                                                "64 bits"):
            flow.tensor(data)
    with pytest.raises(OverflowError, match="tensor: the value 300 cannot be converted"):
        flow.as_tensor([300], dtype=U8)


def test_tensor_wraps_negative_ints_and_casts_arrays():
    _same(flow.tensor([-1], dtype=U8), [255], U8)
    _same(flow.tensor([-255, 255], dtype=U8), [1, 255], U8)
    _same(flow.tensor([[True], [-1]], dtype=U8), [[1], [255]], U8)
    _same(flow.tensor([-1, 2.5], dtype=U8), [255, 2], U8)  # ints and floats keep their rules
    _same(flow.tensor([2.7, -1.5], dtype=I8), [2, -1], I8)
    _same(flow.tensor(np.int8(-3), dtype=U8), 253, U8)
    _same(flow.tensor([300], dtype=flow.int16), [300], flow.int16)
    _same(flow.tensor([300], dtype=flow.bool), [True], flow.bool)
    _same(flow.tensor([-2**63, 2**63 - 1]), [-2**63, 2**63 - 1], flow.int64)
    _same(flow.tensor([], dtype=I8), np.zeros(0, np.int8), I8)
    # arrays and tensors are cast as data (wrapping), as in PyTorch
    _same(flow.tensor(np.array([300]), dtype=U8), [44], U8)
    _same(flow.tensor(np.array([300.0]), dtype=U8), [44], U8)
    _same(flow.tensor(flow.tensor([300]), dtype=U8), [44], U8)
    data = [1, 2]
    t = flow.tensor(data, dtype=flow.int32)
    data[0] = 9
    _same(t, [1, 2], flow.int32)


# ---- where --------------------------------------------------------------------------------------

def test_where_integral_scalar_must_fit_the_tensor_dtype():
    c = flow.tensor([True, False])
    x = _u8([1, 2])
    for call, value, dtype in ((lambda: flow.where(c, x, 300), "300", "uint8"),
                               (lambda: flow.where(c, 300, x), "300", "uint8"),
                               (lambda: x.where(c, 300), "300", "uint8"),
                               (lambda: flow.where(c, x, -256), "-256", "uint8"),
                               (lambda: flow.where(c, x, np.int64(300)), "300", "uint8"),
                               (lambda: flow.where(c, flow.tensor([1, 2], dtype=I8), 1000),
                                "1000", "int8"),
                               (lambda: flow.where(c, flow.tensor([1, 2]), 2**63),
                                "9223372036854775808", "int64")):
        with pytest.raises(OverflowError, match=f"where: the value {value} cannot be converted "
                                                f"to actorflow.{dtype} without overflow"):
            call()
    _same(flow.where(c, x, -1), [1, 255], U8)
    _same(flow.where(c, x, -255), [1, 1], U8)
    _same(flow.where(c, x, True), [1, 1], U8)
    _same(flow.where(c, x, 300.0), [1.0, 300.0], flow.float32)
    _same(flow.where(c, 1, 300), [1, 300], flow.int64)
    _same(flow.where(c, flow.tensor([True, True]), 300), [1, 300], flow.int64)
    _same(flow.where(c, flow.tensor([1, 2]), -2**63), [1, -2**63], flow.int64)


# ---- pow ----------------------------------------------------------------------------------------

def test_integer_pow_negative_scalar_exponent_raises():
    t = flow.tensor([2, 3])
    for call, dtype, e in ((lambda: t ** -1, "int64", -1), (lambda: t.pow(-2), "int64", -2),
                           (lambda: flow.pow(t, np.int64(-1)), "int64", -1),
                           (lambda: t.clone().pow_(-1), "int64", -1),
                           (lambda: _u8([2, 3]) ** -1, "uint8", -1),
                           (lambda: _u8([2, 3]) ** -300, "uint8", -300),
                           (lambda: flow.tensor([True]) ** -1, "bool", -1)):
        with pytest.raises(RuntimeError, match=f"scalar_pow: {NEG_POW} \\(actorflow.{dtype} "
                                               f"tensor, exponent {e}\\)"):
            call()
    _same(t ** -1.0, [0.5, 1 / 3], flow.float32)
    _same(t ** 0, [1, 1], flow.int64)
    _same(flow.tensor([2.0]) ** -1, [0.5], flow.float32)


def test_integer_pow_negative_tensor_exponents():
    base = flow.tensor([2, 3, 1, -1, -1, 0, 0, -2])
    exp = flow.tensor([-1, -2, -1, -3, -4, -1, 0, -2])
    _same(flow.pow(base, exp), [0, 0, 1, -1, 1, 0, 1, 0], flow.int64)
    _same(flow.pow(flow.tensor([2, 1, -1, 0], dtype=flow.int32),
                   flow.tensor([-1, -5, -3, -1], dtype=flow.int32)), [0, 1, -1, 0], flow.int32)
    _same(flow.pow(_u8([2, 1, 0]), flow.tensor([-1, -1, -1], dtype=I8)), [0, 1, 0], flow.int16)
    _same(flow.pow(flow.tensor([True, False, False]), flow.tensor([-1, -1, 0])), [1, 0, 1],
          flow.int64)
    _same(flow.tensor([2, 3]) ** flow.tensor(-1), [0, 0], flow.int64)  # 0-dim exponent
    _same(flow.tensor(2) ** flow.tensor(-1), 0, flow.int64)
    _same(flow.pow(flow.tensor([[2], [-1]]), flow.tensor([-1, 2, -3])),  # broadcasting
          [[0, 4, 0], [-1, 1, -1]], flow.int64)
    # a scalar base: s ** -n follows the same rule
    _same(2 ** flow.tensor([-1]), [0], flow.int64)
    _same(2 ** flow.tensor([-1, -2, 3]), [0, 0, 8], flow.int64)
    _same((-1) ** flow.tensor([-1, -2, 3]), [-1, 1, -1], flow.int64)
    _same(1 ** flow.tensor([-1, -2]), [1, 1], flow.int64)
    _same(0 ** flow.tensor([-1, 0]), [0, 1], flow.int64)
    _same(True ** flow.tensor([-1, 2]), [1, 1], flow.int64)
    _same(flow.pow(2, flow.tensor([-1], dtype=I8)), [0], I8)
    _same((-1) ** flow.tensor([1, 2, -1, -2], dtype=I8), [-1, 1, -1, 1], I8)
    _same(2 ** flow.tensor([-1.0]), [0.5], flow.float32)
    # in place (the output is the base, or also the exponent)
    x = flow.tensor([2, -1, 1, 3])
    x.pow_(flow.tensor([-1, -1, -3, 2]))
    _same(x, [0, -1, 1, 9], flow.int64)
    x = flow.tensor([-1, 2, 1, -2])
    x.pow_(x)
    _same(x, [-1, 4, 1, 0], flow.int64)
    # large exponents keep NumPy's (and PyTorch's) wrapping
    _same(flow.pow(flow.tensor([3, 2, -1, 1]), flow.tensor([40, 70, 2**62 + 1, -2**62])),
          [np.int64(3) ** np.int64(40), 0, -1, 1], flow.int64)


def test_integer_pow_float_paths_unchanged():
    x = flow.tensor([2.0, 0.5], dtype=flow.float64, requires_grad=True)
    y = flow.pow(x, flow.tensor([-1.0, -2.0], dtype=flow.float64))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-0.25, -16.0])


# ---- nn.Graph -----------------------------------------------------------------------------------

def test_errors_surface_while_tracing_and_graph_values_match():
    x = _u8([250, 3])
    with pytest.raises(OverflowError, match="clamp: the value 300 cannot be converted to "
                                            "actorflow.uint8"):
        FnGraph(lambda t: t.clamp(max=300))(x)
    with pytest.raises(RuntimeError, match=f"scalar_pow: {NEG_POW}"):
        FnGraph(lambda t: t ** -1)(flow.tensor([2, 3]))
    with pytest.raises(OverflowError, match="where: the value 300 cannot be converted"):
        FnGraph(lambda t: flow.where(t > 5, t, 300))(x)
    with pytest.raises(OverflowError, match="full: the value 300 cannot be converted"):
        FnGraph(lambda t: t + flow.full((2,), 300, dtype=U8))(x)

    def fn(t, b, e):
        return (t.clamp(min=-252, max=254), flow.where(t > 5, t, -1), flow.pow(b, e),
                flow.full((2,), -1, dtype=U8) + t)

    args = (x, flow.tensor([2, -1, 1, 0]), flow.tensor([-1, -3, -2, -1]))
    got = FnGraph(fn)(*args)
    want = fn(*args)
    for g, w, values in zip(got, want, ([250, 4], [250, 255], [0, -1, 1, 0], [249, 2])):
        _same(g, values, w.dtype)
        _same(w, values, w.dtype)


# ---- against torch ------------------------------------------------------------------------------

def _outcome(mod, fn):
    try:
        r = fn(mod)
    except (RuntimeError, OverflowError, ValueError):
        return "raises"
    return np.asarray(r.tolist()).tolist(), str(r.dtype).split(".")[-1]


CASES = {
    "clamp u8 max=300": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp(max=300),
    "clamp u8 min=-1": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp(min=-1),
    "clamp u8 min=-255": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp(min=-255),
    "clamp u8 min=-256": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp(min=-256),
    "clamp_max_ u8 256": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp_max_(256),
    "clamp_min_ u8 -5": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp_min_(-5),
    "clamp i8 min=-1000": lambda m: m.tensor([-100, 5], dtype=m.int8).clamp(min=-1000),
    "clamp i8 max=127": lambda m: m.tensor([-100, 5], dtype=m.int8).clamp(max=127),
    "clamp i64 max=2**63": lambda m: m.tensor([1]).clamp(max=2**63),
    "clamp u8 max=300.0": lambda m: m.tensor([250, 3], dtype=m.uint8).clamp(max=300.0),
    "clamp bool max=2": lambda m: m.tensor([True, False]).clamp(max=2),
    "full u8 300": lambda m: m.full((2,), 300, dtype=m.uint8),
    "full u8 -1": lambda m: m.full((2,), -1, dtype=m.uint8),
    "full u8 -255": lambda m: m.full((2,), -255, dtype=m.uint8),
    "full i8 2.7": lambda m: m.full((2,), 2.7, dtype=m.int8),
    "full i8 nan": lambda m: m.full((2,), float("nan"), dtype=m.int8),
    "full 2**63": lambda m: m.full((2,), 2**63),
    "full_like u8 300": lambda m: m.full_like(m.tensor([1], dtype=m.uint8), 300),
    "full_like u8 -1": lambda m: m.full_like(m.tensor([1], dtype=m.uint8), -1),
    "tensor [300] u8": lambda m: m.tensor([300], dtype=m.uint8),
    "tensor [-1] u8": lambda m: m.tensor([-1], dtype=m.uint8),
    "tensor [-1, 2.5] u8": lambda m: m.tensor([-1, 2.5], dtype=m.uint8),
    "tensor [255.5] u8": lambda m: m.tensor([255.5], dtype=m.uint8),
    "tensor [2.7, -1.5] i8": lambda m: m.tensor([2.7, -1.5], dtype=m.int8),
    "tensor [2**63]": lambda m: m.tensor([2**63]),
    "tensor array [300] u8": lambda m: m.tensor(np.array([300]), dtype=m.uint8),
    "where u8 300": lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2], dtype=m.uint8),
                                      300),
    "where u8 -1": lambda m: m.where(m.tensor([True, False]), m.tensor([1, 2], dtype=m.uint8),
                                     -1),
    "where 300 u8": lambda m: m.where(m.tensor([True, False]), 300,
                                      m.tensor([1, 2], dtype=m.uint8)),
    "where u8 300.0": lambda m: m.where(m.tensor([True, False]),
                                        m.tensor([1, 2], dtype=m.uint8), 300.0),
    "pow int ** -1": lambda m: m.tensor([2, 3]) ** -1,
    "pow u8 ** -1": lambda m: m.tensor([2, 3], dtype=m.uint8) ** -1,
    "pow bool ** -1": lambda m: m.tensor([True]) ** -1,
    "pow int ** -1.0": lambda m: m.tensor([2, 3]) ** -1.0,
    "pow tensor exps": lambda m: m.pow(m.tensor([2, 3, 1, -1, 0, 0, -2]),
                                       m.tensor([-1, -2, -1, -3, -1, 0, -2])),
    "pow u8, i8 exps": lambda m: m.pow(m.tensor([2, 1, 0], dtype=m.uint8),
                                       m.tensor([-1, -1, -1], dtype=m.int8)),
    "pow i16 exps": lambda m: m.pow(m.tensor([1, -1, -1, 7], dtype=m.int16),
                                    m.tensor([-32768, -32767, -2, -1], dtype=m.int16)),
    "pow_ in place": lambda m: m.tensor([2, -1, 1, 3]).pow_(m.tensor([-1, -1, -3, 2])),
    "pow_ self": lambda m: (lambda x: x.pow_(x))(m.tensor([-1, 2, 1, -2])),
    "rpow 2 ** [-1,-2,3]": lambda m: 2 ** m.tensor([-1, -2, 3]),
    "rpow -1 ** i8": lambda m: (-1) ** m.tensor([1, 2, -1, -2], dtype=m.int8),
    "rpow 300 ** u8": lambda m: 300 ** m.tensor([1, 2], dtype=m.uint8),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_int_edges_match_torch(name):
    torch = pytest.importorskip("torch")
    assert _outcome(flow, CASES[name]) == _outcome(torch, CASES[name])
