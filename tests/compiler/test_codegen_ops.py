"""Every op with a C form (``c_expr``) against its NumPy kernel: random inputs with NaN, inf
and signed zeros, broadcasting, strided views, empty and 0-d tensors, float32 / float64 /
float16 / bfloat16 / bool. Arithmetic, comparisons and selections must give the same bits;
libm functions (exp, tanh, ...) may differ from NumPy's own implementations by a few ulps.
Row forms (``c_row``) are checked in test_codegen_rows / _row_reductions / _row_loss; a test
here makes sure each one is."""
from __future__ import annotations

import numpy as np
import pytest

from actorflow.compiler import codegen
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.ops.fused import _meta_tensor

pytestmark = pytest.mark.timeout(300)

C_OPS = sorted(n for n, o in registry.all_ops().items() if o.c_expr is not None)
# ops whose C form is the same IEEE operations as the NumPy kernel: bit-identical results
EXACT = {"add", "sub", "mul", "div", "neg", "relu", "cast", "eq", "ne",
         "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "where", "maximum",
         "minimum", "abs", "square", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
         "logical_not", "dropout_grad", "sqrt", "reciprocal", "leaky_relu_grad", "hardtanh_grad",
         "threshold_grad", "shrink_grad", "hardsigmoid_grad"}
# backward ops (dy, x) of the piecewise activations (ops/activation_grad.py) and their attrs
ACT_GRADS = {"leaky_relu_grad": {"negative_slope": 0.1},
             "hardtanh_grad": {"min_val": -1.0, "max_val": 2.0},
             "threshold_grad": {"threshold": 0.5}, "shrink_grad": {"lambd": 0.5},
             "hardsigmoid_grad": {}}
FLOATS = (dt.float32, dt.float64, dt.float16, dt.bfloat16)


def _base(op_name: str) -> str:
    return op_name[len("scalar_"):] if op_name.startswith("scalar_") else op_name


def _arity(name: str) -> int:
    if name.startswith("scalar_"):
        return 1
    if name == "where":
        return 3
    if name == "dropout_grad" or name in ACT_GRADS:
        return 2
    return 2 if "scalar_" + name in registry.all_ops() else 1


def _attrs(name: str, rng) -> list:
    if name.startswith("scalar_"):
        return [{"scalar": 0.5, "reverse": False}, {"scalar": -2, "reverse": True}]
    if name == "dropout_grad":
        return [{"scale": 1 / 0.9}]
    if name in ACT_GRADS:
        return [ACT_GRADS[name]]
    if name == "cast":
        return [{"dtype": d} for d in (dt.float32, dt.float64, dt.float16, dt.bfloat16,
                                       dt.bool_)]
    return [{}]


def _values(rng, shape, dtype) -> np.ndarray:
    if dtype is dt.bool_:
        return rng.random(shape) < 0.5
    a = rng.standard_normal(shape) * 3
    flat = a.reshape(-1)
    if flat.size >= 8:
        specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]
        idx = rng.choice(flat.size, size=min(len(specials), flat.size), replace=False)
        flat[idx] = specials[:len(idx)]
    return a.astype(dtype.np)


def _strided(rng, shape, dtype) -> np.ndarray:
    """A non-contiguous view of ``shape`` (every other column of a wider array)."""
    if len(shape) < 1 or shape[-1] == 0:
        return _values(rng, shape, dtype)
    wide = _values(rng, shape[:-1] + (2 * shape[-1],), dtype)
    return wide[..., ::2]


CASES = [  # (output shape, per-input shapes or None: all the output shape, strided)
    ((6, 33), None, False),
    ((6, 33), [(33,), (6, 1), (1, 33)], False),
    ((4, 5, 7), [(5, 1), (4, 1, 7), (7,)], False),
    ((5, 9), None, True),
    ((0, 3), None, False),
    ((), None, False),
]


def _in_dtypes(name, arity, d):
    if name == "where":
        return [dt.bool_, d, d]
    if name in ("logical_and", "logical_or", "logical_xor", "logical_not"):
        return [d] * arity
    return [d] * arity


def _program(name, attrs, ins, in_dtypes):
    op = registry.get(name)
    metas = [(a.shape, d) for a, d in zip(ins, in_dtypes)]
    inferred = op.infer_fn([_meta_tensor(s, d) for s, d in metas], attrs)
    (shape, out_dtype), = [(tuple(m[0]), m[1]) for m in inferred]
    prog = {"ops": [name], "op_attrs": [attrs], "args": [list(range(len(ins)))],
            "shapes": [shape], "dtypes": [out_dtype], "exports": [0], "parts": [name]}
    return prog, metas


def _compare(name, attrs, ins, prog, kernel):
    where = f"{name}{attrs} on {[(a.shape, a.dtype.name) for a in ins]}"
    assert kernel is not None, f"{where}: no generated kernel"
    op = registry.get(name)
    shape, out_dtype = prog["shapes"][0], prog["dtypes"][0]
    want = np.empty(shape, out_dtype.np)
    got = np.full(shape, 7, out_dtype.np)
    op.kernel_cpu(list(ins), [want], attrs)
    kernel(list(ins), [got], attrs)
    assert kernel.calls == (1 if want.size else 0), f"{where}: fell back to NumPy"
    w, g = want.astype(np.float64), got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(w), np.isnan(g), err_msg=where)
    if _base(name) in EXACT or out_dtype is dt.bool_:
        np.testing.assert_array_equal(w[~np.isnan(w)], g[~np.isnan(w)], err_msg=where)
        # signed zeros too, but NumPy's float16 loop of maximum keeps relu(-0) = -0 where its
        # float32 / float64 loops (and the C form) give +0: that one bit is not compared
        if out_dtype.is_floating_point and not (name == "relu" and out_dtype.itemsize == 2):
            np.testing.assert_array_equal(np.signbit(w[w == 0]), np.signbit(g[w == 0]),
                                          err_msg=where)
        return
    eps = {"float32": 2 ** -23, "float64": 2 ** -52, "float16": 2 ** -10,
           "bfloat16": 2 ** -7}[out_dtype.name]
    np.testing.assert_allclose(g, w, rtol=8 * eps, atol=8 * eps, equal_nan=True, err_msg=where)


def _cases(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    arity = _arity(name)
    for d in FLOATS:
        in_dtypes = _in_dtypes(name, arity, d)
        for attrs in _attrs(name, rng):
            # broadcasting gives kernels of their own: float32 only (compile time)
            for out_shape, in_shapes, strided in (CASES if d is dt.float32 else
                                                  [c for c in CASES if c[1] is None]):
                shapes = in_shapes[:arity] if in_shapes else [out_shape] * arity
                if len(shapes) < arity:
                    shapes = shapes + [out_shape] * (arity - len(shapes))
                if name == "dropout_grad" or name in ACT_GRADS:
                    # same-shape operands
                    shapes = [out_shape] * 2
                make = _strided if strided else _values
                ins = [np.asarray(make(rng, s, t)) for s, t in zip(shapes, in_dtypes)]
                yield attrs, ins, in_dtypes


@pytest.fixture(scope="module")
def built():
    """Every case of every op, built as one library (one compiler run for the module)."""
    cases = [(name, attrs, ins, *_program(name, attrs, ins, in_dtypes))
             for name in C_OPS for attrs, ins, in_dtypes in _cases(name)]
    kernels = codegen.kernels_for([(prog, metas) for *_, prog, metas in cases])
    by_op: dict = {}
    for (name, attrs, ins, prog, _), k in zip(cases, kernels):
        by_op.setdefault(name, []).append((attrs, ins, prog, k))
    return by_op


@pytest.mark.parametrize("name", C_OPS)
def test_c_form_matches_numpy_kernel(name, built):
    for attrs, ins, prog, kernel in built[name]:
        _compare(name, attrs, ins, prog, kernel)


def _check(name, attrs, ins, in_dtypes):
    prog, metas = _program(name, attrs, ins, in_dtypes)
    (kernel,) = codegen.kernels_for([(prog, metas)])
    _compare(name, attrs, ins, prog, kernel)


def test_every_row_form_is_checked_against_its_numpy_kernel():
    """Ops with a row form (c_row) are checked in the row test modules, each naming its ops."""
    from tests.compiler import (test_codegen_attention, test_codegen_row_loss,
                                test_codegen_row_reductions, test_codegen_rows)
    checked = set()
    for module in (test_codegen_rows, test_codegen_row_reductions, test_codegen_row_loss,
                   test_codegen_attention):
        checked.update(module.ROW_OPS)
    with_form = {n for n, o in registry.all_ops().items() if o.c_row is not None}
    assert with_form <= checked, f"row forms no test checks: {sorted(with_form - checked)}"
    assert checked <= with_form, f"checked ops without a row form: {sorted(checked - with_form)}"


def test_every_elementwise_op_of_the_training_steps_has_a_c_form():
    for name in ("add", "sub", "mul", "div", "scalar_add", "scalar_mul", "scalar_div", "neg",
                 "exp", "log", "tanh", "sigmoid", "where", "lt", "gt", "eq", "cast"):
        assert registry.get(name).c_expr is not None, name


def test_mixed_dtypes_promote_as_numpy():
    rng = np.random.default_rng(1)
    a = _values(rng, (4, 8), dt.float32)
    b = _values(rng, (8,), dt.float64)
    m = rng.random((4, 8)) < 0.5
    h = _values(rng, (4, 8), dt.float16)
    cases = [("add", [a, b], [dt.float32, dt.float64]), ("lt", [a, b], [dt.float32, dt.float64]),
             ("mul", [a, m], [dt.float32, dt.bool_]), ("add", [a, h], [dt.float32, dt.float16])]
    progs = [_program(n, {}, ins, ds) for n, ins, ds in cases]
    kernels = codegen.kernels_for(progs)
    for (n, ins, _), (prog, _), k in zip(cases, progs, kernels):
        _compare(n, {}, ins, prog, k)


def test_scalar_comparison_of_a_bool_tensor_with_a_number():
    # the number is not rounded to bool: True < 1.5 holds, as in NumPy
    b = np.array([[True, False, True], [False, False, True]])
    cases = [("scalar_lt", {"scalar": 1.5, "reverse": False}),
             ("scalar_ge", {"scalar": 0.5, "reverse": True}),
             ("scalar_eq", {"scalar": 2, "reverse": False})]
    progs = [_program(n, a, [b], [dt.bool_]) for n, a in cases]
    kernels = codegen.kernels_for(progs)
    for (n, a), (prog, _), k in zip(cases, progs, kernels):
        _compare(n, a, [b], prog, k)
