"""Elementwise ops: binary arithmetic (tensor-tensor and tensor-scalar forms), unary math,
casts, copies and the two broadcasting helpers every gradient rule uses (``expand`` and
``sum_to_shape``).

Binary ops come in two registered forms: ``add`` (two tensors, broadcasting) and
``scalar_add`` (one tensor and the attr ``scalar``; ``reverse=True`` computes ``scalar op x``).
The other binary math ops (pow, remainder, maximum, atan2...) are in ``ops/binary_math.py``;
comparisons, logical and bitwise ops, ``where``, ``masked_fill`` and ``fill`` in
``ops/compare.py``; the other unary functions, ``clamp`` and the activations in
``ops/activation.py``. The helpers below (``binary``, ``unary``, ``_quiet``...) serve them all.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import (
    F, HALF_DTYPES, blas_sum, broadcast_shapes, copy_reshaped, in_float32, promote,
)
from actorflow.ops.int_scalars import check_int_scalar, int_scalar
from actorflow.ops.boxing import B, P, S, Sig, elementwise_rule, linear_rule, shard_shape
from actorflow.ops.registry import Meta, fail, register

# ---- broadcasting helpers ---------------------------------------------------------------------

sum_to_shape = register("sum_to_shape", doc="Sum a broadcast result back to a shape.", amp="deny")


@sum_to_shape.infer
def _(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), inputs[0].dtype)]


@sum_to_shape.kernel("cpu")
def _(ins, outs, attrs):
    x, out, shape = ins[0], outs[0], tuple(attrs["shape"])
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and x.shape[lead + i] != 1)
    if not axes:
        copy_reshaped(x, out)
        return
    if out.dtype in HALF_DTYPES:
        in_float32(_sum_to_into, x, out, axes)
    else:
        _sum_to_into(x, out, axes)


def _sum_to_into(x: np.ndarray, out: np.ndarray, axes: tuple) -> None:
    if not blas_sum(x, axes, out):
        np.sum(x, axis=axes, keepdims=True, out=out.reshape((1,) * (x.ndim - out.ndim)
                                                          + out.shape))


@sum_to_shape.sbp
def _(inputs, attrs):
    """A split dim the sum keeps stays split (the target shape is the shard's); a split dim
    it sums over gives partial sums; partial stays partial (linear)."""
    xs, ts = tuple(inputs[0]._shape), tuple(attrs["shape"])
    lead = len(xs) - len(ts)
    for d in range(len(xs)):
        k = d - lead
        if k < 0 or (ts[k] == 1 and xs[d] != 1):
            yield Sig((S(d),), (P,))
        elif xs[d] != 1:
            yield Sig((S(d),), (S(k),), None,
                      lambda a, index, n, k=k: dict(a, shape=shard_shape(a["shape"], S(k), n,
                                                                         index)))
    yield Sig((P,), (P,))


@sum_to_shape.grad
def _(ctx, dout):
    return F.expand(dout, ctx.input_metas[0][0])


expand = register("expand", is_identity=lambda attrs: True,
                  doc="Broadcast a tensor to a larger shape (a view in eager mode).")


@expand.infer
def _(inputs, attrs):
    x = inputs[0]
    shape = list(attrs["shape"])
    lead = len(shape) - len(x._shape)
    if lead < 0:
        raise ValueError(f"the number of sizes given ({len(shape)}) must be >= the number of "
                         f"dims of the tensor ({len(x._shape)})")
    for i, d in enumerate(x._shape):
        want = shape[lead + i]
        if want == -1:
            shape[lead + i] = d
        elif d != 1 and d != want:
            raise ValueError(f"can't expand size {d} to {want} at dim {lead + i} "
                             f"(shape {tuple(x._shape)} to {tuple(attrs['shape'])})")
    if any(s < 0 for s in shape[:lead]):
        raise ValueError("-1 is not allowed for new leading dims")
    return [Meta(tuple(shape), x.dtype)]


@expand.sbp
def _(inputs, attrs):
    """OneFlow's expand: a split dim that is not expanded stays split (renumbered after the new
    leading dims; the shard keeps its size: -1 in the target shape); partial stays partial."""
    xs = tuple(inputs[0]._shape)
    lead = len(attrs["shape"]) - len(xs)
    for d in range(len(xs)):
        if xs[d] != 1 and attrs["shape"][lead + d] in (-1, xs[d]):
            yield Sig((S(d),), (S(lead + d),), None, lambda a, index, n, j=lead + d: dict(
                a, shape=tuple(-1 if i == j else s for i, s in enumerate(a["shape"]))))
    yield Sig((P,), (P,))


@expand.view
def _(ins, attrs):
    shape = tuple(s if s != -1 else ins[0].shape[i - (len(attrs["shape"]) - ins[0].ndim)]
                  for i, s in enumerate(attrs["shape"]))
    return [_expanded_view(ins[0], shape)]


def _expanded_view(x: np.ndarray, shape: tuple) -> np.ndarray:
    """A read-only view of ``x`` broadcast to ``shape`` with PyTorch's strides: expanded dims
    get stride 0, kept dims keep theirs, new size-1 dims the stride of a contiguous layout
    (0 below a 0-d input)."""
    strides = [0] * len(shape)
    lead = len(shape) - x.ndim
    for i in range(len(shape) - 1, -1, -1):
        j = i - lead
        if j >= 0:
            stride = x.strides[j]
            if x.shape[j] != shape[i]:
                stride = 0
        else:
            stride = shape[i + 1] * strides[i + 1] if i + 1 < len(shape) else 0
            if shape[i] != 1:
                stride = 0
        strides[i] = stride
    return np.lib.stride_tricks.as_strided(x, shape, tuple(strides), writeable=False)


@expand.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.broadcast_to(ins[0], outs[0].shape)


@expand.grad
def _(ctx, dout):
    return F.sum_to(dout, ctx.input_metas[0][0])


cast = register("cast", elementwise=True, alias_safe=True, is_identity=lambda attrs: True,
                doc="Convert to another dtype.", c_expr="{0}")


cast.sbp(elementwise_rule)


@cast.infer
def _(inputs, attrs):
    return [Meta(inputs[0]._shape, attrs["dtype"])]


@cast.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    if x.dtype.kind == "c" and outs[0].dtype.kind != "c":  # complex to real: the real part
        x = x.real
    np.copyto(outs[0], x, casting="unsafe")


@cast.grad
def _(ctx, dout):
    return F.cast(dout, ctx.input_metas[0][1])


copy = register("copy", doc="A copy with its own storage (clone).")


@copy.infer
def _(inputs, attrs):
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


@copy.kernel("cpu")
def _(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


copy.sbp(linear_rule)  # shard by shard (copy_ into a split tensor, clone keeps the layout)


@copy.grad
def _(ctx, dout):
    return dout


assign = register("assign", mutates=(0,), amp="deny",
                  doc="Write value (input 1, broadcast and cast) into ref (input 0) in place; no "
                      "outputs. nn.Graph uses it for in-place writes to state inside build.")


@assign.infer
def _(inputs, attrs):
    ref, value = inputs
    target = broadcast_shapes("assign", ref._shape, value._shape)
    if tuple(target) != tuple(ref._shape):
        fail("assign", "value does not broadcast to the ref's shape", value._shape, ref._shape)
    return []


@assign.kernel("cpu")
def _(ins, outs, attrs):
    np.copyto(ins[0], ins[1], casting="unsafe")


# ---- binary arithmetic ------------------------------------------------------------------------

def no_complex(name: str, d: dt.dtype, *shapes) -> None:
    """Inference check of an op without complex support: a complex dtype is an error naming
    the op (rather than a result computed on the real parts)."""
    if d.is_complex:
        fail(name, f"complex tensors are not supported (got {d})", *shapes)


def _binary_infer(name: str, kind: str, complex_ok: bool):
    def infer(inputs, attrs):
        x, y = inputs
        shape = x._shape if x._shape == y._shape else broadcast_shapes(name, x._shape, y._shape)
        d = x.dtype if x.dtype is y.dtype else promote(inputs)
        if not complex_ok:
            no_complex(name, d, x._shape, y._shape)
        if kind == "float" and not d.is_differentiable:
            d = dt.get_default_dtype()
        elif kind == "bool":
            d = dt.bool_
        return [Meta(shape, d)]
    return infer


def _scalar_infer(name: str, kind: str, exact: bool = False, complex_ok: bool = False):
    def infer(inputs, attrs):
        x = inputs[0]
        s = attrs["scalar"]
        d = dt.result_type([x.dtype], (), (s,))
        if not complex_ok:
            no_complex(name, d, x._shape)
        if type(s) is not float and kind != "float":
            check_int_scalar(name, s, d, exact=exact and not attrs.get("reverse"))
        if kind == "float" and not d.is_differentiable:
            d = dt.get_default_dtype()
        elif kind == "bool":
            d = dt.bool_
        return [Meta(x._shape, d)]
    return infer


def bf16_safe(ufunc):
    """``ufunc(a, b, out=, dtype=, casting=)`` that also works when bfloat16 meets another
    type (ml_dtypes' bfloat16 loops refuse such operands): then it computes in float32."""
    def call(a, b, out, dtype, casting):
        try:
            ufunc(a, b, out=out, dtype=dtype, casting=casting)
        except TypeError:
            bf16 = dt.bfloat16.np
            if bf16 not in (out.dtype, np.asarray(a).dtype, np.asarray(b).dtype):
                raise
            tmp = np.empty(out.shape, np.float32) if out.dtype == bf16 else out
            ufunc(np.asarray(a, np.float32), np.asarray(b, np.float32), out=tmp,
                  dtype=tmp.dtype, casting="unsafe")
            if tmp is not out:
                np.copyto(out, tmp, casting="unsafe")
    return call


def _elementwise_traits(traits: dict) -> dict:
    """The traits of an op the ``unary`` / ``binary`` helpers register: elementwise and
    alias-safe (one ufunc call) unless ``traits`` says otherwise."""
    traits.setdefault("elementwise", True)
    traits.setdefault("alias_safe", traits["elementwise"])
    return traits


def binary(name: str, ufunc, *, kind: str = "arith", grad=None, scalar_grad=None,
           grad_uses_outputs: bool = False, exact_scalar: bool = False,
           complex_ok: bool = False, grad_reads_inputs: bool = True, **traits):
    """Register ``name`` (tensor op tensor) and ``scalar_<name>`` (tensor op scalar).

    ``kind``: "arith" (promoted dtype), "float" (integers promote to the default float),
    "bool" (comparisons). ``grad(ctx, dout, x, y)`` returns (dx, dy) before summing to the
    input shapes; ``scalar_grad(ctx, dout, x, scalar, reverse)`` returns dx. Integral scalars
    wrap to an integer tensor's dtype (``int_scalar``); ``exact_scalar``: instead an
    unrepresentable right-hand scalar is an error (pow's exponent, as in PyTorch).
    ``complex_ok``: complex inputs are supported (else inference rejects them).
    ``grad_reads_inputs=False``: ``grad`` gets ``x = y = None`` and reads no saved tensor, so
    a second backward through a released node still works (as PyTorch's add).
    ``traits``: registry traits of both ops (default: elementwise and alias-safe).
    """
    traits = _elementwise_traits(traits)
    op = register(name, grad_uses_outputs=grad_uses_outputs,
                  doc=f"{name}(x, y) elementwise, broadcasting x and y.", **traits)
    op.infer(_binary_infer(name, kind, complex_ok))
    op.sbp(elementwise_rule)
    ufunc = bf16_safe(ufunc)

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        out = outs[0]
        ufunc(ins[0], ins[1], out=out, dtype=out.dtype, casting="unsafe")

    if grad is not None:
        @op.grad
        def _(ctx, dout):
            x, y = ctx.inputs if grad_reads_inputs else (None, None)
            dx, dy = grad(ctx, dout, x, y)
            (sx, _), (sy, _) = ctx.input_metas
            return (F.sum_to(dx, sx) if dx is not None else None,
                    F.sum_to(dy, sy) if dy is not None else None)

    sop = register("scalar_" + name, grad_uses_outputs=grad_uses_outputs,
                   doc=f"{name}(x, scalar) elementwise; attr scalar (a Python number), attr "
                       f"reverse: {name}(scalar, x).", **traits)
    sop.infer(_scalar_infer(sop.name, kind, exact_scalar, complex_ok))
    sop.sbp(elementwise_rule)
    wraps = kind != "float"  # "float" ops compute in floating point: the scalar stays exact

    @sop.kernel("cpu")
    def _(ins, outs, attrs):
        out = outs[0]
        s = attrs["scalar"]
        if wraps and type(s) is not float:  # comparisons compute in the input's dtype
            s = int_scalar(s, out.dtype if kind == "arith" else ins[0].dtype)
        if attrs.get("reverse"):
            ufunc(s, ins[0], out=out, dtype=out.dtype, casting="unsafe")
        else:
            ufunc(ins[0], s, out=out, dtype=out.dtype, casting="unsafe")

    if scalar_grad is not None:
        @sop.grad
        def _(ctx, dout):
            return scalar_grad(ctx, dout, ctx.attrs["scalar"], ctx.attrs.get("reverse", False))
    return op, sop


def c_scalar(forward: str, reverse: str | None = None):
    """The ``c_expr`` of a ``scalar_<op>``: ``forward`` for ``x op scalar``, ``reverse`` (by
    default ``forward`` with the operands swapped) for ``reverse=True``."""
    if reverse is None:
        reverse = forward.replace("{0}", "{_x}").replace("{scalar}", "{0}").replace(
            "{_x}", "{scalar}")

    def form(attrs: dict) -> str | None:
        if isinstance(attrs.get("scalar"), complex):
            return None
        return reverse if attrs.get("reverse") else forward
    return form


def _conj_scalar(s):
    """The conjugate of a complex Python scalar (other numbers unchanged)."""
    return s.conjugate() if isinstance(s, complex) else s


add, scalar_add = binary(
    "add", np.add, complex_ok=True,
    grad=lambda ctx, g, x, y: (g if ctx.needs_input_grad[0] else None,
                               g if ctx.needs_input_grad[1] else None),
    scalar_grad=lambda ctx, g, s, rev: g, grad_reads_inputs=False)

sub, scalar_sub = binary(
    "sub", np.subtract, complex_ok=True,
    grad=lambda ctx, g, x, y: (g if ctx.needs_input_grad[0] else None,
                               F.neg(g) if ctx.needs_input_grad[1] else None),
    scalar_grad=lambda ctx, g, s, rev: F.neg(g) if rev else g, grad_reads_inputs=False)

mul, scalar_mul = binary(
    "mul", np.multiply, complex_ok=True,
    grad=lambda ctx, g, x, y: (F.mul(g, F.conj(y)) if ctx.needs_input_grad[0] else None,
                               F.mul(g, F.conj(x)) if ctx.needs_input_grad[1] else None),
    scalar_grad=lambda ctx, g, s, rev: F.mul(g, _conj_scalar(s)))


def _div_grad(ctx, g, x, y):  # complex inputs: the conjugate derivatives, as in PyTorch
    yc = F.conj(y)
    dx = F.div(g, yc) if ctx.needs_input_grad[0] else None
    dy = F.neg(F.div(F.mul(g, F.conj(x)), F.mul(yc, yc))) if ctx.needs_input_grad[1] else None
    return dx, dy


def _scalar_div_grad(ctx, g, s, rev):
    if not rev:
        return F.div(g, _conj_scalar(s))
    x = F.conj(ctx.inputs[0])  # d(s/x)/dx = -s/x^2
    return F.mul(F.div(g, F.mul(x, x)), -_conj_scalar(s))


div, scalar_div = binary("div", np.true_divide, kind="float", grad=_div_grad, complex_ok=True,
                         scalar_grad=_scalar_div_grad)
add.c_expr, scalar_add.c_expr = "({0} + {1})", c_scalar("({0} + {scalar})")
sub.c_expr, scalar_sub.c_expr = "({0} - {1})", c_scalar("({0} - {scalar})")
mul.c_expr, scalar_mul.c_expr = "({0} * {1})", c_scalar("({0} * {scalar})")
div.c_expr, scalar_div.c_expr = "({0} / {1})", c_scalar("({0} / {scalar})")
for _op in (add, sub, scalar_mul, scalar_div):  # linear: partial sums stay partial
    _op.sbp_fn = None  # replaces binary()'s elementwise rule (a second @sbp would raise)
    _op.sbp(linear_rule)


def _mul_rule(inputs, attrs):
    """mul is linear in each input: a partial sum times a broadcast tensor stays a partial sum
    (as scalar_mul; only an infinite factor meeting a zero part differs from one process:
    NaN). div has no such rule: the parts of a partial sum are often zeros, and x/0 would
    give NaN where one process gives inf."""
    yield from elementwise_rule(inputs, attrs)
    yield Sig((P, B), (P,))
    yield Sig((B, P), (P,))


mul.sbp_fn = None  # replaces binary()'s elementwise rule
mul.sbp(_mul_rule)


# ---- unary math -------------------------------------------------------------------------------

def unary(name: str, fn, *, grad=None, float_only: bool = True, out_dtype=None,
          grad_uses_outputs: bool = False, complex_ok: bool = False, **traits):
    """Register a one-input elementwise op computing ``fn(x, out=out)``.

    ``float_only``: integer inputs produce the default float dtype (exp, sin...).
    ``grad(ctx, dout)`` returns dx. ``complex_ok``: complex inputs are supported (else
    inference rejects them). ``traits``: registry traits (default: elementwise and alias-safe).
    """
    op = register(name, grad_uses_outputs=grad_uses_outputs, doc=f"{name}(x) elementwise.",
                  **_elementwise_traits(traits))
    op.sbp(elementwise_rule)

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        if not complex_ok:
            no_complex(name, x.dtype, x._shape)
        d = out_dtype or x.dtype
        if float_only and not d.is_differentiable:
            d = dt.get_default_dtype()
        return [Meta(x._shape, d)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        fn(ins[0], outs[0], attrs)

    if grad is not None:
        op.grad(grad)
    return op


def _ufunc(u):
    return lambda x, out, attrs: u(x, out=out, dtype=out.dtype, casting="unsafe")


neg = unary("neg", _ufunc(np.negative), float_only=False, grad=lambda ctx, g: F.neg(g),
            complex_ok=True)
neg.sbp_fn = None  # replaces unary()'s elementwise rule
neg.sbp(linear_rule)
neg.c_expr = "(-{0})"
exp = unary("exp", _ufunc(np.exp), grad_uses_outputs=True, complex_ok=True,
            grad=lambda ctx, g: F.mul(g, F.conj(ctx.outputs[0])), amp="deny", c_expr="exp({0})")


def _relu_kernel(x, out, attrs):
    np.maximum(x, 0, out=out, dtype=out.dtype, casting="unsafe")


relu = unary("relu", _relu_kernel, float_only=False, grad_uses_outputs=True,
             grad=lambda ctx, g: F.threshold_grad(g, ctx.outputs[0], 0.0), activation=True)

# one element in generated C (ops/registry.py: c_expr). relu: NaN stays NaN and -0 gives +0, as
# np.maximum(x, 0) does in float32/float64 (NumPy's float16 loop keeps -0: the one bit that
# differs). Its gradient is threshold_grad(dy, y, 0) (ops/activation_grad.py): a select, so a
# NaN dy where y <= 0 gives 0, as PyTorch's threshold_backward.
relu.c_expr = "(({0} > 0 || {0} != {0}) ? {0} : ({T})0)"


# ---- helpers of the binary ops in binary_math.py, compare.py and special.py -------------------

def _quiet(ufunc, int_divisor: bool = False):
    """``ufunc`` without NumPy's floating-point warnings (inf/nan are valid results, as in
    PyTorch); ``int_divisor``: an integer division by zero raises ZeroDivisionError."""
    def f(a, b, out, dtype, casting):
        if int_divisor and out.dtype.kind in "iu" and not np.all(b):
            raise ZeroDivisionError("integer division by zero")
        with np.errstate(all="ignore"):
            ufunc(a, b, out=out, dtype=dtype, casting=casting)
    return f


def refuse_bool(*ops, any_operand: bool = False) -> None:
    """Make the ops' inference refuse bool operands where PyTorch does, instead of a kernel
    failing later: ``any_operand`` (subtraction, negation) refuses a bool tensor or scalar
    anywhere; otherwise only operands whose result dtype is bool (``fmod`` of two bools)."""
    for op in ops:
        def infer(inputs, attrs, base=op.infer_fn, name=op.name):
            metas = base(inputs, attrs)
            if any_operand:
                if any(t.dtype is dt.bool_ for t in inputs) or type(attrs.get("scalar")) is bool:
                    hint = "; to invert a mask use ~ or logical_not()" if name.endswith("neg") \
                        else "; use ^ or logical_xor() for bools"
                    fail(name, f"bool tensors are not supported{hint}")
            elif metas[0].dtype is dt.bool_:
                fail(name, "bool tensors are not supported (convert them to an integer or "
                           "floating dtype first)")
            return metas
        op.infer(infer)


def _integral_only(*ops):
    """Make the ops' inference reject floating inputs (bitwise ops)."""
    for op in ops:
        def infer(inputs, attrs, base=op.infer_fn, name=op.name):
            for t in inputs:
                if t.dtype.is_floating_point:
                    raise TypeError(f"{name}: only integer and bool tensors are supported, got "
                                    f"{t.dtype}")
            if isinstance(attrs.get("scalar"), float):
                raise TypeError(f"{name}: only integer and bool scalars are supported, got "
                                f"{attrs['scalar']!r}")
            return base(inputs, attrs)
        op.infer(infer)


def _needs(ctx, i):
    return ctx.needs_input_grad[i]


refuse_bool(sub, scalar_sub, neg, any_operand=True)
refuse_bool(relu)  # as PyTorch: "Boolean inputs not supported for relu"
