"""What every interpreter shares: inference with errors that say where, the in-place checks,
and the autograd record made after whichever interpreter ran."""
from __future__ import annotations

import math
import sys

import numpy as np

from actorflow import scope
from actorflow.autograd import grad_mode
from actorflow.autograd.engine import Node
from actorflow.ops.registry import Op, OpError
from actorflow.tensor import EagerBlob, Tensor


def infer(op: Op, inputs: list, attrs: dict) -> list:
    """Run the op's shape/dtype inference, turning failures into errors that name the op,
    the module path and the input shapes."""
    try:
        metas = op.infer_fn(inputs, attrs)
    except OpError as e:
        raise OpError(where(str(e), inputs)) from None
    except (ValueError, TypeError, IndexError) as e:
        raise OpError(where(f"{op.name}: {e}", inputs)) from None
    return metas


def allocate(op_name: str, shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array for an output of ``op_name``; memory the process can't get
    raises a MemoryError naming the op, the shape, the dtype and the bytes asked for."""
    try:
        return np.empty(shape, dtype.np)
    except (MemoryError, ValueError) as e:
        raise allocation_error(op_name, shape, dtype, e) from None


def allocation_error(op_name: str, shape: tuple, dtype, err: Exception) -> Exception:
    """The error for an output array NumPy could not allocate (``err``: NumPy's): a
    MemoryError naming the op and the bytes; any other error unchanged."""
    nbytes = math.prod(shape) * dtype.np.itemsize
    if isinstance(err, MemoryError) or nbytes > sys.maxsize:
        return MemoryError(f"{op_name}: can't allocate {nbytes} bytes "
                           f"({nbytes / 2 ** 30:.1f} GiB) for an output of shape "
                           f"{tuple(shape)} and dtype {dtype}")
    return err


def where(msg: str, inputs: list) -> str:
    """``msg`` with the current module path and the input shapes appended."""
    path = scope.current_path()
    if path:
        msg += f" [in module {path}]"
    if "shapes:" not in msg and inputs:
        msg += " (input shapes: " + ", ".join(
            str(tuple(t._shape)) if isinstance(t, Tensor) else repr(t) for t in inputs) + ")"
    return msg


def check_inplace(op: Op, inputs: list, out: list, metas: list, record: bool) -> None:
    """Raise if ``op``'s results (``metas``) can't be written into the tensors ``out`` (shape,
    a dtype they can't be cast to, or - while grad mode is on, as in PyTorch - a leaf that
    requires grad or a view of one). Every interpreter checks in-place calls with it."""
    for t, m in zip(out, metas):
        if tuple(m[0]) != tuple(t._shape):
            raise OpError(where(f"{op.name}_: output of shape {tuple(m[0])} can't be written in "
                                f"place into a tensor of shape {tuple(t._shape)}", inputs))
        if m[1] is not t.dtype and m[1]._category > t.dtype._category:
            raise OpError(where(f"{op.name}_: result type {m[1]} can't be cast to the "
                                f"in-place output's dtype {t.dtype}", inputs))
    for t in out:
        if getattr(t, "_copied_view", False):
            raise RuntimeError(where(
                f"{op.name}_: in-place write into a view of a global tensor whose shards are "
                f"a copy (the view needed the tensor laid out with another sbp), so the write "
                f"would not reach the tensor it views; write into that tensor, or clone the "
                f"view first", inputs))
    if not grad_mode._state.enabled:  # (``record`` implies it; no_grad() allows any write)
        return
    for t in out:
        root = getattr(t, "_no_grad_root", None)
        if root is not None and (record or root.requires_grad):
            # PyTorch refuses too: the write's history can't be joined to a view that has none
            raise RuntimeError(where(
                f"{op.name}_: a view (shape {tuple(t._shape)}) of a tensor of shape "
                f"{tuple(root._shape)} was made under no_grad() and is being written in place "
                f"with grad mode on; make the view and write into it both under no_grad() (not "
                f"tracked) or both outside it (tracked)", inputs))
    for t in out:
        what = None
        if t.grad_fn is None and t.requires_grad:
            # OneFlow lets an op none of whose inputs needs grad write into a leaf
            # (``model.weight.copy_(array)`` outside no_grad()); PyTorch refuses
            what = "a leaf tensor" if record else None
        else:
            # the tensor whose memory t views: eager views share their base's storage record
            # (a reshape that had to copy does not); lazy ones are followed through the view
            # ops autograd recorded
            root = t._base
            if root is not None and not getattr(t._h, "is_global", False):
                # (a global view's base is set only where its shards view the base's)
                rh = root._h
                if getattr(rh, "is_global", False):  # to_local(): an alias of a global shard
                    rh = None if rh.local is None else rh.local._h
                if type(t._h) is not EagerBlob or type(rh) is not EagerBlob \
                        or t._h.storage is not rh.storage:
                    root = None
            else:
                node = t.grad_fn
                while node is not None and getattr(node.op, "view_fn", None) is not None \
                        and node._inputs:
                    root, node = node._inputs[0], node._inputs[0].grad_fn
            if root is not None and root.grad_fn is None and root.requires_grad:
                what = "a view of a leaf tensor"
        if what is not None:
            raise RuntimeError(where(f"{op.name}_: {what} that requires grad is being used "
                                     f"in an in-place operation (use it under no_grad(), or "
                                     f"clone it first)", inputs))


def note_view_mode(base: Tensor, root: Tensor, views: list) -> None:
    """Mark ``views`` of ``base`` made under no_grad() (and views of such views, whatever the
    mode): ``check_inplace`` refuses to write them with grad mode on where the write or
    ``root`` (the tensor they view) needs grad. Every interpreter calls it on the views it
    makes that alias their base."""
    mark = getattr(base, "_no_grad_root", None)
    if mark is None:
        if grad_mode._state.enabled:
            return
        mark = root
    for t in views:
        t._no_grad_root = mark


def record(op: Op, inputs: list, outputs: list, attrs: dict) -> None:
    """Record an autograd node for one op call: its floating-point outputs require grad and
    point to the node."""
    node = Node(op, attrs, inputs, outputs, scope.current_path())
    for i, r in enumerate(outputs):
        if r.dtype.is_differentiable:
            r.requires_grad = True
            r.grad_fn = node
            r._out_idx = i
