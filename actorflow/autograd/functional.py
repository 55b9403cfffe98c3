"""``flow.autograd.functional``: derivatives of whole functions, PyTorch's and OneFlow's API.

``vjp`` (vector-Jacobian product), ``jvp`` (Jacobian-vector product), ``jacobian``,
``hessian``, ``vhp`` and ``hvp``. Each calls the user's function on fresh leaves made from
``inputs`` and differentiates with the one autograd engine (``autograd.grad``). There is no
forward-mode AD: a Jacobian-vector product is the derivative, with respect to a dummy
cotangent ``u``, of the vector-Jacobian product ``u^T J`` (the "double-backward trick"), so
every op the function uses needs a differentiable gradient rule, which ops written with
functional gradient rules have.

``inputs`` and ``v`` are a Tensor or a tuple of Tensors; the results take the same form.
``create_graph=True`` keeps the results differentiable (and connected to the caller's graph
through ``inputs``); ``strict=True`` raises when an output does not depend on an input instead
of answering with zeros.
"""
from __future__ import annotations

from typing import Callable

from actorflow.autograd.engine import grad as _grad
from actorflow.autograd.grad_mode import enable_grad
from actorflow.ops._common import F as _late_F
from actorflow.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _F():
    # the functional API sits above autograd: reached through the op layer's late binding
    return _late_F


def _as_tuple(x, arg: str, fn: str) -> tuple[bool, tuple]:
    """``(was_a_tuple, x as a tuple)``; every element must be a Tensor."""
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            where = f"element {i} of {arg}" if is_tuple else arg
            raise TypeError(f"autograd.functional.{fn}: {where} must be a Tensor, got "
                            f"{type(t).__name__}")
    return is_tuple, items


def _outputs(out, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(out, (tuple, list))
    items = tuple(out) if is_tuple else (out,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"autograd.functional.{fn}: the function must return a Tensor or a "
                            f"tuple of Tensors, but output {i} is {type(t).__name__}")
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool, need_graph: bool = True) -> tuple:
    """Fresh differentiable leaves for ``inputs``; with ``create_graph`` a tensor that already
    requires grad stays linked to the caller's graph (through an alias)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(items: tuple, create_graph: bool) -> tuple:
    """Results cut from the graph unless ``create_graph``."""
    return tuple(t if t is None or create_graph else t.detach() for t in items)


def _check_v(v: tuple, refs: tuple, what: str, fn: str) -> None:
    if len(v) != len(refs):
        raise RuntimeError(f"autograd.functional.{fn}: v has {len(v)} tensors but the {what} "
                           f"has {len(refs)}")
    for i, (a, b) in enumerate(zip(v, refs)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"autograd.functional.{fn}: entry {i} of v has shape "
                               f"{tuple(a.shape)} but the matching {what} entry has shape "
                               f"{tuple(b.shape)}")


def _grads(outputs: tuple, inputs: tuple, grad_outputs: tuple, create_graph: bool) -> tuple:
    """``autograd.grad`` over the outputs that require grad; None for unused inputs."""
    keep = [i for i, o in enumerate(outputs) if o.requires_grad]
    if not keep:
        return (None,) * len(inputs)
    return _grad([outputs[i] for i in keep], list(inputs), [grad_outputs[i] for i in keep],
                 retain_graph=True, create_graph=create_graph, allow_unused=True)


def _fill_zeros(grads: tuple, refs: tuple, strict: bool, fn: str, what: str) -> tuple:
    """None gradients (an output independent of an input) become zeros, or raise in strict
    mode."""
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"autograd.functional.{fn}: {what} is independent of input "
                                   f"{i}, which strict=True does not allow")
            g = _F().zeros_like(r)
        out.append(g)
    return tuple(out)


def _check_requires_grad(items: tuple, what: str, fn: str, strict: bool) -> None:
    if not strict:
        return
    for i, t in enumerate(items):
        if t is None or not t.requires_grad:
            raise RuntimeError(f"autograd.functional.{fn}: {what} {i} does not require grad "
                               f"(it does not depend on the inputs), which strict=True does "
                               f"not allow")


def _default_v(outputs: tuple, v, fn: str, what: str) -> tuple:
    if v is not None:
        return v
    if len(outputs) != 1 or outputs[0].numel() != 1:
        raise RuntimeError(f"autograd.functional.{fn}: v can be omitted only when the {what} "
                           f"is a single tensor with one element, got shapes "
                           f"{[tuple(o.shape) for o in outputs]}")
    return (_F().ones_like(outputs[0]),)


def _pack(items: tuple, is_tuple: bool):
    return items if is_tuple else items[0]


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T J)``: the product of ``v`` (shaped as the outputs; may be omitted
    for a one-element output) with the Jacobian of ``func`` at ``inputs``."""
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph)
        out_tuple, outputs = _outputs(func(*inputs), "vjp")
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            _check_v(v, outputs, "output", "vjp")
        v = _default_v(outputs, v, "vjp", "output")
        _check_requires_grad(outputs, "output", "vjp", strict)
        grads = _grads(outputs, inputs, v, create_graph)
        grads = _fill_zeros(grads, inputs, strict, "vjp", "the output")
    return _pack(_finish(outputs, create_graph), out_tuple), _pack(_finish(grads, create_graph),
                                                                   in_tuple)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)``: the product of the Jacobian of ``func`` at ``inputs`` with
    ``v`` (shaped as the inputs; may be omitted for one one-element input)."""
    F = _F()
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            _check_v(v, inputs, "input", "jvp")
        v = _default_v(inputs, v, "jvp", "input")
        out_tuple, outputs = _outputs(func(*inputs), "jvp")
        _check_requires_grad(outputs, "output", "jvp", strict)
        # u^T J is linear in u; its derivative in u along v is J v
        dummies = tuple(F.zeros_like(o).requires_grad_(True) for o in outputs)
        grad_in = _grads(outputs, inputs, dummies, create_graph=True)
        _fill_zeros(grad_in, inputs, strict, "jvp", "the output")
        used = [(g, vi) for g, vi in zip(grad_in, v) if g is not None and g.requires_grad]
        if used:
            back = _grad([g for g, _ in used], list(dummies), [vi for _, vi in used],
                         retain_graph=True, create_graph=create_graph, allow_unused=True)
        else:
            back = (None,) * len(dummies)
        back = _fill_zeros(back, outputs, strict, "jvp", "the gradient")
    return _pack(_finish(outputs, create_graph), out_tuple), _pack(_finish(back, create_graph),
                                                                   out_tuple)


def _jacobian_rows(outputs: tuple, inputs: tuple, create_graph: bool, strict: bool,
                   fn: str) -> list:
    """``rows[i][j]``: d outputs[i] / d inputs[j], shaped out_i.shape + in_j.shape, by one
    backward per output element."""
    F = _F()
    rows = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        per_input = [[] for _ in inputs]
        for k in range(flat.numel()):
            if out.requires_grad:
                gs = _grad([flat[k]], list(inputs), None, retain_graph=True,
                           create_graph=create_graph, allow_unused=True)
            else:
                gs = (None,) * len(inputs)
            for j, (g, inp) in enumerate(zip(gs, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"autograd.functional.{fn}: output {i} is "
                                           f"independent of input {j}, which strict=True does "
                                           f"not allow")
                    g = F.zeros_like(inp)
                per_input[j].append(g)
        row = []
        for j, inp in enumerate(inputs):
            shape = tuple(out.shape) + tuple(inp.shape)
            if per_input[j]:
                row.append(F.stack(per_input[j], 0).reshape(shape))
            else:
                row.append(F.zeros(shape, dtype=inp.dtype))
        rows.append(row)
    return rows


def _jacobian_columns(func, inputs: tuple, strict: bool, fn: str):
    """Forward strategy: one Jacobian-vector product per input element (``jvp``). Returns
    ``(output_was_a_tuple, rows)``."""
    F = _F()
    out_tuple, outputs = _outputs(func(*inputs), fn)  # the shapes (inputs may be empty)
    cols = [[[] for _ in outputs] for _ in inputs]  # cols[j][i]: J_ij e_k for each k
    for j, inp in enumerate(inputs):
        for k in range(inp.numel()):
            basis = [F.zeros_like(t) for t in inputs]
            basis[j] = _basis(inp, k)
            _, prod = jvp(func, inputs, tuple(basis), strict=strict)
            for i, p in enumerate(prod if out_tuple else (prod,)):
                cols[j][i].append(p)
    rows = []
    for i, out in enumerate(outputs):
        row = []
        for j, inp in enumerate(inputs):
            shape = tuple(out.shape) + tuple(inp.shape)
            stacked = F.stack(cols[j][i], -1) if cols[j][i] else F.zeros(shape, dtype=inp.dtype)
            row.append(stacked.reshape(shape))
        rows.append(row)
    return out_tuple, rows


def _basis(like: Tensor, k: int) -> Tensor:
    """The one-hot tensor shaped as ``like`` with a 1 at flat position ``k``."""
    F = _F()
    flat = F.zeros(like.numel(), dtype=like.dtype)
    flat[k] = 1
    return flat.reshape(tuple(like.shape))


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of
    shape ``out_i.shape + in_j.shape`` (nested tuples when either side is a tuple).

    ``strategy="reverse-mode"`` runs one backward per output element; ``"forward-mode"`` one
    Jacobian-vector product per input element (as in PyTorch it requires ``vectorize=True``).
    ``vectorize`` is accepted for PyTorch's signature: actorflow has no vmap, so the rows are
    computed one after another either way (the values are the same)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"autograd.functional.jacobian: strategy must be 'reverse-mode' or "
                         f"'forward-mode', got {strategy!r}")
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("autograd.functional.jacobian: strategy='forward-mode' "
                                      "does not support create_graph=True (as in PyTorch)")
        if not vectorize:
            raise NotImplementedError("autograd.functional.jacobian: strategy='forward-mode' "
                                      "is only implemented with vectorize=True (as in PyTorch)")
    with enable_grad():
        in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        if strategy == "forward-mode":
            out_tuple, rows = _jacobian_columns(func, inputs, strict, "jacobian")
        else:
            inputs = _prepare(inputs, create_graph)
            out_tuple, outputs = _outputs(func(*inputs), "jacobian")
            _check_requires_grad(outputs, "output", "jacobian", strict)
            rows = _jacobian_rows(outputs, inputs, create_graph, strict, "jacobian")
    rows = [_finish(tuple(r), create_graph) for r in rows]
    if out_tuple:
        return tuple(_pack(r, in_tuple) for r in rows)
    return _pack(rows[0], in_tuple)


def _scalar_output(func: Callable, fn: str):
    def f(*inp):
        out_tuple, outs = _outputs(func(*inp), fn)
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"autograd.functional.{fn}: the function must return a single "
                               f"tensor with one element, got shapes "
                               f"{[tuple(o.shape) for o in outs]}")
        return outs[0].reshape(())
    return f


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar function ``func`` at ``inputs``: for inputs ``i``, ``j`` a
    tensor of shape ``in_i.shape + in_j.shape`` (nested tuples for tuple inputs): the Jacobian
    of the gradient."""
    scalar = _scalar_output(func, "hessian")
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*inp):
        g = jacobian(scalar, inp, create_graph=True)
        g = g if isinstance(g, tuple) else (g,)
        _check_requires_grad(g, "gradient", "hessian", strict)
        return g

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return res if in_tuple else res[0][0]


def _first_derivative(func: Callable, inputs, v, create_graph: bool, strict: bool, fn: str):
    """What ``vhp`` and ``hvp`` share: the checked inputs and ``v``, the scalar output and its
    gradient with respect to the inputs (a graph kept for the second derivative; zeros for
    inputs it does not reach, unless ``strict``)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    inputs = _prepare(inputs, create_graph)
    if v is not None:
        _, v = _as_tuple(v, "v", fn)
        _check_v(v, inputs, "input", fn)
    v = _default_v(inputs, v, fn, "input")
    out = _scalar_output(func, fn)(*inputs)
    _check_requires_grad((out,), "output", fn, strict)
    jac = _grads((out,), inputs, (_F().ones_like(out),), create_graph=True)
    _check_requires_grad(tuple(g for g in jac if g is not None), "gradient", fn, strict)
    jac = _fill_zeros(jac, inputs, strict, fn, "the output")
    return in_tuple, inputs, v, out, jac


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T H)`` for a scalar function ``func`` with Hessian ``H``."""
    with enable_grad():
        in_tuple, inputs, v, out, jac = _first_derivative(func, inputs, v, create_graph,
                                                          strict, "vhp")
        used = [(g, vi) for g, vi in zip(jac, v) if g is not None and g.requires_grad]
        if used:
            res = _grad([g for g, _ in used], list(inputs), [vi for _, vi in used],
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(inputs)
        res = _fill_zeros(res, inputs, strict, "vhp", "the gradient")
    return _finish((out,), create_graph)[0], _pack(_finish(res, create_graph), in_tuple)


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H v)`` for a scalar function ``func`` with Hessian ``H`` (through the
    double-backward trick; equal to ``vhp`` for a symmetric Hessian)."""
    F = _F()
    with enable_grad():
        in_tuple, inputs, v, out, jac = _first_derivative(func, inputs, v, create_graph,
                                                          strict, "hvp")
        dummies = tuple(F.zeros_like(t).requires_grad_(True) for t in inputs)
        used = [(g, u) for g, u in zip(jac, dummies) if g.requires_grad]
        if used:
            back = _grad([g for g, _ in used], list(inputs), [u for _, u in used],
                         retain_graph=True, create_graph=True, allow_unused=True)
        else:
            back = (None,) * len(inputs)
        back = _fill_zeros(back, inputs, strict, "hvp", "the gradient")
        keep = [(b, vi) for b, vi in zip(back, v) if b.requires_grad]
        if keep:
            res = _grad([b for b, _ in keep], list(dummies), [vi for _, vi in keep],
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(inputs)
        res = _fill_zeros(res, inputs, strict, "hvp", "the double-backward")
    return _finish((out,), create_graph)[0], _pack(_finish(res, create_graph), in_tuple)
