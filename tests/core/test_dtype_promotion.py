"""Result dtypes of elementwise ops vs PyTorch's promotion rules: pairs of dtypes, zero-dim
tensors, Python scalars, and integer inputs to floating functions."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch not installed")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
         "float64"]
PAIRS = list(itertools.product(NAMES, NAMES))


def _flow_dtype(name):
    return getattr(flow, "bool" if name == "bool" else name)


def _torch_dtype(name):
    return getattr(torch, name)


def _pair(name, shape=(2,)):
    """The same small values as an actorflow and a torch tensor of dtype ``name``."""
    values = np.ones(shape) * 2 if shape else np.array(2.0)
    return (flow.tensor(values, dtype=_flow_dtype(name)),
            torch.tensor(values, dtype=_torch_dtype(name)))


def _same(flow_dtype, torch_dtype):
    return flow_dtype.name == str(torch_dtype).replace("torch.", "")


def test_promote_types_matches_torch():
    for a, b in PAIRS:
        got = flow.promote_types(_flow_dtype(a), _flow_dtype(b))
        assert _same(got, torch.promote_types(_torch_dtype(a), _torch_dtype(b))), (a, b)


BINARY_OPS = ["add", "mul", "div", "maximum", "minimum", "eq", "lt", "atan2", "remainder",
              "floor_divide", "pow", "sub"]


def _torch_result(op, ta, tb):
    try:
        return getattr(torch, op)(ta, tb).dtype
    except (RuntimeError, TypeError, NotImplementedError):
        return None  # PyTorch refuses this combination (e.g. bool - bool)


@pytest.mark.parametrize("op", BINARY_OPS)
def test_tensor_tensor_result_dtype(op):
    for a, b in PAIRS:
        (fa, ta), (fb, tb) = _pair(a), _pair(b)
        want = _torch_result(op, ta, tb)
        if want is None:
            continue
        got = getattr(flow, op)(fa, fb)
        assert _same(got.dtype, want), (op, a, b, got.dtype, want)


@pytest.mark.parametrize("op", ["add", "mul", "div", "maximum", "eq", "pow"])
def test_zero_dim_tensor_result_dtype(op):
    # a zero-dim tensor only raises the category (bool < int < float) of a dimensioned one
    for a, b in PAIRS:
        (fa, ta), (fb, tb) = _pair(a), _pair(b, shape=())
        for x, y, tx, ty in ((fa, fb, ta, tb), (fb, fa, tb, ta)):
            want = _torch_result(op, tx, ty)
            if want is None:
                continue
            assert _same(getattr(flow, op)(x, y).dtype, want), (op, a, b)


SCALARS = [True, 3, 2.5]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "remainder", "floor_divide",
                                "eq", "gt"])
def test_tensor_scalar_result_dtype(op):
    for name, s in itertools.product(NAMES, SCALARS):
        fa, ta = _pair(name)
        for reverse in (False, True):
            args = (s, ta) if reverse else (ta, s)
            try:
                want = getattr(torch, op)(*args).dtype
            except (RuntimeError, TypeError, NotImplementedError):
                continue  # PyTorch refuses it (bool ** bool)
            got = getattr(flow, op)(*((s, fa) if reverse else (fa, s)))
            assert _same(got.dtype, want), (op, name, s, reverse, got.dtype, want)


def test_scalar_promotion_follows_default_dtype():
    i = flow.tensor([1, 2])
    assert (i + 2.5).dtype is flow.float32
    flow.set_default_dtype(flow.float64)
    try:
        assert (i + 2.5).dtype is flow.float64
        assert (i / 2).dtype is flow.float64
        assert flow.sqrt(i).dtype is flow.float64
        assert (flow.tensor([1.0], dtype=flow.float32) * 2.5).dtype is flow.float32
    finally:
        flow.set_default_dtype(flow.float32)


def test_maximum_with_scalar_matches_result_type():
    for name, s in itertools.product(NAMES, SCALARS):
        fa, ta = _pair(name)
        want = torch.result_type(ta, s)
        assert _same(flow.maximum(fa, s).dtype, want), (name, s)
        assert _same(flow.clamp(fa, min=s).dtype, want), (name, s)


def test_where_result_dtype():
    cond_f, cond_t = flow.tensor([True, False]), torch.tensor([True, False])
    for a, b in PAIRS:
        (fa, ta), (fb, tb) = _pair(a), _pair(b)
        assert _same(flow.where(cond_f, fa, fb).dtype, torch.where(cond_t, ta, tb).dtype), (a, b)
    for name, s in itertools.product(NAMES, SCALARS):
        fa, ta = _pair(name)
        assert _same(flow.where(cond_f, fa, s).dtype, torch.where(cond_t, ta, s).dtype)
        assert _same(flow.where(cond_f, s, fa).dtype, torch.where(cond_t, s, ta).dtype)
    for s, t in itertools.product(SCALARS, SCALARS):
        assert _same(flow.where(cond_f, s, t).dtype, torch.where(cond_t, s, t).dtype), (s, t)


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf",
                                "reciprocal", "rsqrt", "expm1"])
def test_float_functions_of_integers_and_bools(fn):
    for name in ["bool", "uint8", "int8", "int32", "int64"]:
        fa, ta = _pair(name)
        assert _same(getattr(flow, fn)(fa).dtype, getattr(torch, fn)(ta).dtype), (fn, name)


def test_mixed_dtype_values_are_computed_in_the_result_type():
    u = flow.tensor(np.array([200, 100], dtype=np.uint8))
    i = flow.tensor(np.array([-100, 100], dtype=np.int8))
    s = u + i
    assert s.dtype is flow.int16 and s.tolist() == [100, 200]
    h = flow.tensor([1.0, 2.0], dtype=flow.float16)
    b = flow.tensor([1.0, 2.0], dtype=flow.bfloat16)
    assert (h + b).dtype is flow.float32 and (h + b).tolist() == [2.0, 4.0]
    f = flow.tensor([0.1], dtype=flow.float32)
    d0 = flow.tensor(0.2, dtype=flow.float64)
    assert (f + d0).dtype is flow.float32
    np.testing.assert_allclose((f + d0).numpy(), np.float32(0.1) + np.float32(0.2))
