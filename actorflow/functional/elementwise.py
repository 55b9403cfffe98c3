"""Elementwise functional API (``flow.add``, ``flow.relu``, ...) and the matching Tensor methods."""
from __future__ import annotations

import numpy as np

from actorflow.autograd.grad_mode import is_grad_enabled
from actorflow.framework import dtype as dt
from actorflow.dispatch import apply, lazy_views
from actorflow.dispatch.lazy import current_tracer
from actorflow.functional._base import as_tensor_like, is_scalar
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_NO_ATTRS: dict = {}


def binary_fn(name: str, commutative: bool = False):
    """Build ``fn(x, y)`` for a binary op: picks the tensor-tensor or the scalar form."""
    op, sop = registry.get(name), registry.get("scalar_" + name)

    def fn(x, y):
        if isinstance(x, Tensor):
            if isinstance(y, Tensor):
                return apply(op, [x, y], _NO_ATTRS)[0]
            if is_scalar(y):
                return apply(sop, [x], {"scalar": y})[0]
            return apply(op, [x, as_tensor_like(y, x)], _NO_ATTRS)[0]
        if isinstance(y, Tensor):
            if is_scalar(x):
                return apply(sop, [y], {"scalar": x} if commutative else
                             {"scalar": x, "reverse": True})[0]
            return apply(op, [as_tensor_like(x, y), y], _NO_ATTRS)[0]
        raise TypeError(f"{name}: expected at least one Tensor, got {type(x).__name__} and "
                        f"{type(y).__name__}")

    def inplace(self, y):
        if isinstance(y, Tensor):
            return apply(op, [self, y], _NO_ATTRS, out=[self])[0]
        if is_scalar(y):
            return apply(sop, [self], {"scalar": y}, out=[self])[0]
        return apply(op, [self, as_tensor_like(y, self)], _NO_ATTRS, out=[self])[0]

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of two tensors (or a tensor and a number), broadcasting."
    inplace.__name__ = name + "_"
    return fn, inplace


def reverse_fn(fn):
    """``r<name>(x, y) = name(y, x)``: used by Tensor.__rsub__ and friends."""
    def r(x, y):
        return fn(y, x)
    return r


def unary_fn(name: str):
    op = registry.get(name)

    def fn(x):
        return apply(op, [x], _NO_ATTRS)[0]

    def inplace(self):
        return apply(op, [self], _NO_ATTRS, out=[self])[0]

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}``."
    inplace.__name__ = name + "_"
    return fn, inplace


_add, _add_ = binary_fn("add", commutative=True)
_sub, _sub_ = binary_fn("sub")
_mul, mul_ = binary_fn("mul", commutative=True)
div, div_ = binary_fn("div")
neg, neg_ = unary_fn("neg")
exp, exp_ = unary_fn("exp")
relu, relu_ = unary_fn("relu")
mul = _mul
multiply = mul
true_divide = div
divide = div
negative = neg


def _times_alpha(y, alpha):
    if alpha == 1:
        return y
    return _mul(y, alpha) if isinstance(y, Tensor) else y * alpha


def add(x, y, alpha=1, out=None):
    """``x + alpha * y`` (broadcasting; ``y`` may be a number)."""
    r = _add(x, _times_alpha(y, alpha))
    if out is not None:
        out.copy_(r)
        return out
    return r


def sub(x, y, alpha=1, out=None):
    """``x - alpha * y`` (broadcasting; ``y`` may be a number)."""
    r = _sub(x, _times_alpha(y, alpha))
    if out is not None:
        out.copy_(r)
        return out
    return r


def add_(self: Tensor, y, alpha=1) -> Tensor:
    """In place: ``self += alpha * y``."""
    return _add_(self, _times_alpha(y, alpha))


def sub_(self: Tensor, y, alpha=1) -> Tensor:
    """In place: ``self -= alpha * y``."""
    return _sub_(self, _times_alpha(y, alpha))


subtract = sub


_sum_to = registry.get("sum_to_shape")
_expand = registry.get("expand")
_cast = registry.get("cast")
_copy = registry.get("copy")


def sum_to(x: Tensor, shape) -> Tensor:
    """Sum a broadcast tensor back to ``shape`` (identity when shapes agree)."""
    shape = tuple(shape)
    if tuple(x._shape) == shape:
        return x
    return apply(_sum_to, [x], {"shape": shape})[0]


def expand(x: Tensor, *shape) -> Tensor:
    """Broadcast ``x`` to ``shape`` (-1 keeps a dimension); a view in eager mode."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    shape = tuple(int(s) for s in shape)
    if shape == tuple(x._shape):
        return x
    return apply(_expand, [x], {"shape": shape})[0]


def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, tuple(other._shape))


def cast(x: Tensor, dtype) -> Tensor:
    """``x`` converted to ``dtype``."""
    d = dt.as_dtype(dtype)
    if d is x.dtype:
        return x
    return apply(_cast, [x], {"dtype": d})[0]


def clone(x: Tensor) -> Tensor:
    """A copy of ``x`` with its own storage (gradients flow back to ``x``)."""
    return apply(_copy, [x], _NO_ATTRS)[0]


def detach(x: Tensor) -> Tensor:
    """A tensor sharing ``x``'s storage, outside autograd."""
    t = Tensor._from_handle(x._h, x._shape, x.dtype)
    t._vc = x._vc
    tracer = current_tracer()
    if tracer is not None:  # nn.Graph traces: writes into either must reach the other
        lazy_views.note_alias(tracer, x, t)
    return t


def copy_(self: Tensor, src) -> Tensor:
    """Copy ``src`` (broadcast, cast) into ``self`` in place."""
    src = as_tensor_like(src, self)
    if tuple(src._shape) != tuple(self._shape):
        src = expand(src, tuple(self._shape))
    if src.dtype is not self.dtype:
        src = cast(src, self.dtype)
    return apply(_copy, [src], _NO_ATTRS, out=[self])[0]


register_tensor_methods({
    "add": add, "add_": add_, "sub": sub, "sub_": sub_, "rsub": reverse_fn(sub),
    "mul": mul, "mul_": mul_, "div": div, "div_": div_, "rdiv": reverse_fn(div),
    "neg": neg, "neg_": neg_, "exp": exp, "exp_": exp_, "relu": relu, "relu_": relu_,
    "expand": expand, "expand_as": expand_as, "broadcast_to": broadcast_to,
    "cast": cast, "clone": clone, "detach": detach, "copy_": copy_,
    "multiply": mul, "subtract": sub, "true_divide": div, "divide": div, "negative": neg,
})

__all__ = ["add", "sub", "mul", "div", "neg", "exp", "relu", "sum_to", "expand", "broadcast_to",
           "expand_as", "cast", "clone", "detach", "multiply", "subtract",
           "true_divide", "divide", "negative", "binary_fn", "unary_fn", "reverse_fn"]


# ---- more binary ops ----------------------------------------------------------------------------

floor_divide, floor_divide_ = binary_fn("floor_divide")
remainder, remainder_ = binary_fn("remainder")
fmod, fmod_ = binary_fn("fmod")
pow, pow_ = binary_fn("pow")  # noqa: A001  (flow.pow, as in PyTorch)
maximum, _ = binary_fn("maximum", commutative=True)
minimum, _ = binary_fn("minimum", commutative=True)
atan2, atan2_ = binary_fn("atan2")
eq, _ = binary_fn("eq", commutative=True)
ne, _ = binary_fn("ne", commutative=True)
lt, _ = binary_fn("lt")
le, _ = binary_fn("le")
gt, _ = binary_fn("gt")
ge, _ = binary_fn("ge")
logical_and, logical_and_ = binary_fn("logical_and", commutative=True)
logical_or, logical_or_ = binary_fn("logical_or", commutative=True)
logical_xor, logical_xor_ = binary_fn("logical_xor", commutative=True)
bitwise_and, bitwise_and_ = binary_fn("bitwise_and", commutative=True)
bitwise_or, bitwise_or_ = binary_fn("bitwise_or", commutative=True)
bitwise_xor, bitwise_xor_ = binary_fn("bitwise_xor", commutative=True)
rsub = reverse_fn(sub)
rsub.__doc__ = "``rsub(x, y) = y - x`` (as torch.rsub)."
rpow = reverse_fn(pow)
rpow.__doc__ = "``rpow(x, y) = y ** x``: a number raised to a tensor's elements."
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
true_divide_ = div_
_plain_div = div


def _is_float(v) -> bool:
    return v.dtype.is_floating_point if isinstance(v, Tensor) else isinstance(v, float)


def div(x, y, *, rounding_mode: str | None = None) -> Tensor:
    """``x / y`` (broadcasting); ``rounding_mode`` "trunc" or "floor" rounds the quotient."""
    if rounding_mode is None:
        return _plain_div(x, y)
    if rounding_mode == "floor":
        return floor_divide(x, y)
    if rounding_mode == "trunc":
        if _is_float(x) or _is_float(y):
            return apply(_trunc, [_plain_div(x, y)], _NO_ATTRS)[0]
        return floor_divide(sub(x, fmod(x, y)), y)  # exact for integers of any size
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


def _div_inplace(self: Tensor, y, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return div_(self, y)
    return copy_(self, div(self, y, rounding_mode=rounding_mode))


divide = div


def _cmp_method(fn):
    """A Tensor comparison method: ``t == None`` (or another object that is no number, array or
    tensor) falls back to Python's default instead of raising."""
    def method(self, other):
        if other is None or isinstance(other, (str, bytes, dict, set)):
            return NotImplemented
        return fn(self, other)
    method.__name__ = fn.__name__
    return method


_trunc = registry.get("trunc")
_isclose = registry.get("isclose")
_where = registry.get("where")
_clamp = registry.get("clamp")
_clamp_tensor = registry.get("clamp_tensor")
_masked_fill = registry.get("masked_fill")
_fill = registry.get("fill")


def isclose(x: Tensor, y, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|x - y| <= atol + rtol * |y|`` (a bool tensor; infinities equal themselves)."""
    return apply(_isclose, [x, as_tensor_like(y, x)],
                 {"rtol": float(rtol), "atol": float(atol), "equal_nan": bool(equal_nan)})[0]


def allclose(x: Tensor, y, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """True when every element of ``x`` and ``y`` is close (see ``isclose``)."""
    return bool(np.all(isclose(x, y, rtol, atol, equal_nan).numpy()))


def equal(x: Tensor, y: Tensor) -> bool:
    """True when ``x`` and ``y`` have the same shape and the same values."""
    if tuple(x._shape) != tuple(y._shape):
        return False
    return bool(np.all(eq(x, y).numpy()))


# ---- where, clamp, masked_fill, fill ------------------------------------------------------------

def where(condition: Tensor, input=None, other=None) -> Tensor:
    """Elementwise ``input if condition else other`` (broadcasting; either may be a number).

    ``where(condition)`` alone is ``nonzero(condition, as_tuple=True)``.
    """
    if input is None and other is None:
        import actorflow.functional as functional
        return functional.nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: expected both input and other, or neither")
    condition = as_tensor_like(condition)
    if isinstance(input, Tensor):
        other = as_tensor_like(other, input, "where")
    elif isinstance(other, Tensor):
        input = as_tensor_like(input, other, "where")
    else:
        input, other = as_tensor_like(input, None, "where"), as_tensor_like(other, None, "where")
    return apply(_where, [condition, input, other], _NO_ATTRS)[0]


def _where_method(self: Tensor, condition: Tensor, other) -> Tensor:
    """PyTorch's ``input.where(condition, other)``. A non-bool ``condition`` on a bool or
    integer tensor (an error in PyTorch) is OneFlow's ``condition.where(x, y)``: ``self`` is
    the condition, the arguments the values."""
    if (isinstance(condition, Tensor) and condition.dtype != dt.bool_
            and self.dtype._category in (0, 1)):
        return where(self, condition, other)
    return where(condition, self, other)


def _clamp_call(x: Tensor, lo, hi, out) -> Tensor:
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        inputs = [x] + [as_tensor_like(b, x, "clamp") for b in (lo, hi) if b is not None]
        attrs = {"has_min": lo is not None, "has_max": hi is not None}
        return apply(_clamp_tensor, inputs, attrs, out=out)[0]
    return apply(_clamp, [x], {"min": lo, "max": hi}, out=out)[0]


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """Clamp every element into ``[min, max]``; each bound may be None, a number or a tensor."""
    return _clamp_call(x, min, max, None)


def clamp_(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """In-place ``clamp``."""
    return _clamp_call(x, min, max, [x])


def clamp_min(x: Tensor, min) -> Tensor:  # noqa: A002
    """``clamp(x, min=min)``."""
    return _clamp_call(x, min, None, None)


def clamp_max(x: Tensor, max) -> Tensor:  # noqa: A002
    """``clamp(x, max=max)``."""
    return _clamp_call(x, None, max, None)


clip, clip_ = clamp, clamp_


def _scalar_or_grad_tensor(value, op_name: str):
    """A number from a number or a 0-dim tensor; the tensor itself when it needs a gradient."""
    if not isinstance(value, Tensor):
        return value
    if value._shape:
        raise RuntimeError(f"{op_name}: only a 0-dimensional value tensor is supported, got "
                           f"shape {tuple(value._shape)}")
    if value.requires_grad and is_grad_enabled():
        return value
    return value.item()


def masked_fill(x: Tensor, mask, value) -> Tensor:
    """``x`` with ``value`` (a number or 0-dim tensor) where ``mask`` is true (broadcasting)."""
    value = _scalar_or_grad_tensor(value, "masked_fill")
    if isinstance(value, Tensor):
        return where(mask, cast(value, x.dtype), x)
    return apply(_masked_fill, [x, as_tensor_like(mask)], {"value": value})[0]


def masked_fill_(self: Tensor, mask, value) -> Tensor:
    """In-place ``masked_fill``."""
    value = _scalar_or_grad_tensor(value, "masked_fill_")
    if isinstance(value, Tensor):
        return copy_(self, where(mask, cast(value, self.dtype), clone(self)))
    return apply(_masked_fill, [self, as_tensor_like(mask)], {"value": value}, out=[self])[0]


def fill_(self: Tensor, value) -> Tensor:
    """Fill ``self`` with ``value`` (a number or a 0-dim tensor) in place."""
    value = _scalar_or_grad_tensor(value, "fill_")
    if isinstance(value, Tensor):
        return copy_(self, value)
    return apply(_fill, [self], {"value": value}, out=[self])[0]


def zero_(self: Tensor) -> Tensor:
    """Fill ``self`` with zeros in place."""
    return fill_(self, 0)


def type_as(x: Tensor, other: Tensor) -> Tensor:
    """``x`` converted to ``other``'s dtype, and to its kind as OneFlow's: a global ``other``
    gives ``x`` on its placement and sbp (a local ``x`` is this rank's shard, as
    ``to_global``), a local one gives a global ``x``'s local shard."""
    if other.is_global:
        return cast(x, other.dtype).to_global(placement=other.placement, sbp=other.sbp)
    if x.is_global:
        x = x.to_local()
    return cast(x, other.dtype)


def is_floating_point(x: Tensor) -> bool:
    """True when ``x`` has a floating dtype."""
    return x.dtype.is_floating_point


def is_nonzero(x: Tensor) -> bool:
    """The truth value of a one-element tensor."""
    n = x.numel()
    if n != 1:
        raise RuntimeError(f"is_nonzero: a tensor with {n} elements has no single truth value "
                           f"(shape {tuple(x._shape)})")
    return bool(x.item() != 0)


register_tensor_methods({
    "div": div, "divide": div, "div_": _div_inplace, "divide_": _div_inplace,
    "true_divide_": true_divide_, "rsub": rsub,
    "floor_divide": floor_divide, "floor_divide_": floor_divide_,
    "rfloor_divide": reverse_fn(floor_divide), "remainder": remainder, "remainder_": remainder_,
    "rremainder": reverse_fn(remainder), "fmod": fmod, "fmod_": fmod_, "rfmod": reverse_fn(fmod),
    "pow": pow, "pow_": pow_, "rpow": rpow, "maximum": maximum, "minimum": minimum,
    "atan2": atan2, "atan2_": atan2_,
    "eq": _cmp_method(eq), "ne": _cmp_method(ne), "lt": lt, "le": le, "gt": gt, "ge": ge,
    "greater": gt, "greater_equal": ge, "less": lt, "less_equal": le, "not_equal": ne,
    "logical_and": logical_and, "logical_and_": logical_and_, "logical_or": logical_or,
    "logical_or_": logical_or_, "logical_xor": logical_xor, "logical_xor_": logical_xor_,
    "bitwise_and": bitwise_and, "bitwise_and_": bitwise_and_, "bitwise_or": bitwise_or,
    "bitwise_or_": bitwise_or_, "bitwise_xor": bitwise_xor, "bitwise_xor_": bitwise_xor_,
    "isclose": isclose, "allclose": allclose, "equal": equal, "where": _where_method,
    "clamp": clamp, "clamp_": clamp_, "clip": clip, "clip_": clip_, "clamp_min": clamp_min,
    "clamp_max": clamp_max, "clamp_min_": lambda self, min: clamp_(self, min, None),
    "clamp_max_": lambda self, max: clamp_(self, None, max),
    "masked_fill": masked_fill, "masked_fill_": masked_fill_, "fill_": fill_, "zero_": zero_,
    "type_as": type_as, "is_nonzero": is_nonzero,
})

__all__ += [
    "rsub", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum", "atan2", "eq",
    "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "isclose", "allclose", "equal", "where", "clamp", "clamp_min", "clamp_max", "clip",
    "masked_fill", "type_as", "is_floating_point", "is_nonzero",
]
