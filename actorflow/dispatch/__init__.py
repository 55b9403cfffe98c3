"""Dispatch: every functional op call comes through ``apply`` and goes to one interpreter.

* eager-local (default): infer output metas, run the op's kernel, record autograd;
* lazy (pushed by ``nn.Graph`` while it traces ``build``): add the op to the Job;
* global tensors get their own interpreter with the distributed work.

The interpreter is chosen per call, so the same functional code (user code, gradient rules,
optimizer updates) runs in every mode.
"""
from __future__ import annotations

import numpy as np

from actorflow import vm
from actorflow.vm import scheduler as _scheduler
from actorflow.autograd import grad_mode
from actorflow.autograd.engine import Node
from actorflow.dispatch import scope
from actorflow.ops.registry import Meta, Op, OpError
from actorflow.random import default_generator
from actorflow.tensor import EagerBlob, Tensor

# interpreters pushed over the eager one (a Graph's tracer); the top one gets every call
_interpreters: list = []


def push_interpreter(interp) -> None:
    _interpreters.append(interp)


def pop_interpreter(interp) -> None:
    if not _interpreters or _interpreters[-1] is not interp:
        raise RuntimeError("pop_interpreter: interpreter stack corrupted")
    _interpreters.pop()


def current_interpreter():
    return _interpreters[-1] if _interpreters else None


def infer(op: Op, inputs: list, attrs: dict) -> list:
    """Run the op's shape/dtype inference, turning failures into errors that name the op,
    the module path and the input shapes."""
    try:
        metas = op.infer_fn(inputs, attrs)
    except OpError as e:
        raise OpError(_where(str(e), op, inputs)) from None
    except (ValueError, TypeError, IndexError) as e:
        raise OpError(_where(f"{op.name}: {e}", op, inputs)) from None
    return metas


def _where(msg: str, op: Op, inputs: list) -> str:
    path = scope.current_path()
    if path:
        msg += f" [in module {path}]"
    if "shapes:" not in msg and inputs:
        msg += " (input shapes: " + ", ".join(
            str(tuple(t._shape)) if isinstance(t, Tensor) else repr(t) for t in inputs) + ")"
    return msg


def run_kernel(op: Op, arrays: list, outs: list, attrs: dict, inputs=None) -> None:
    """Call the op's CPU kernel; an exception comes back naming the op and module."""
    try:
        op.kernel_cpu(arrays, outs, attrs)
    except Exception as e:  # re-raised with the op's name; the original is chained
        shapes = ", ".join(str(a.shape) for a in arrays)
        path = scope.current_path()
        where = f" [in module {path}]" if path else ""
        raise RuntimeError(f"{op.name}: kernel failed{where} (input shapes: {shapes}): "
                           f"{type(e).__name__}: {e}") from e


def apply(op: Op, inputs: list, attrs: dict, out: list | None = None) -> list:
    """Run ``op`` on tensors ``inputs`` with ``attrs``; returns the output tensors.

    ``out`` (in-place ops) names existing tensors to write the outputs into. Eager: inference
    and autograd recording happen here; the kernel is issued to the VM (``actorflow.vm``) and
    runs on the current worker thread once its inputs are ready. The returned tensors are
    complete when that instruction finishes (``Tensor._array()`` waits for it).
    """
    if _interpreters:
        return _interpreters[-1].apply(op, inputs, attrs, out)
    metas = infer(op, inputs, attrs)
    if op.random and attrs.get("seed") is None:
        attrs = dict(attrs, seed=default_generator.next_seed())
    record = grad_mode._state.enabled and op.grad_fn is not None \
        and any(t.requires_grad for t in inputs)
    if out is not None:
        return _apply_inplace(op, inputs, attrs, out, metas, record)
    if op.view_fn is not None:
        results = _apply_view(op, inputs, attrs, metas)
    else:
        results = [Tensor._wrap(np.empty(m[0], m[1].np), m[1]) for m in metas]
        _issue_kernel(op, inputs, attrs, [r._h.raw for r in results],
                      [r._h.storage for r in results])
        mutated = op.mutates if op.mutates_fn is None else \
            op.mutated_inputs(len(inputs), attrs)
        for i in mutated:  # inputs written in place (optimizer state): a new version
            if i < len(inputs):
                inputs[i]._vc[0] += 1
    if record:
        _record(op, inputs, results, attrs)
    return results


def _storage_and_array(t: Tensor):
    """(VM storage or None, array) of an input; a non-eager handle is read synchronously."""
    h = t._h
    if type(h) is EagerBlob:
        return h.storage, h.raw
    return None, t._array()


def _issue_kernel(op: Op, inputs: list, attrs: dict, outs: list, fresh: list,
                  out_storages=()) -> None:
    """Issue ``op``'s kernel writing ``outs`` (new storages ``fresh``, existing storages
    ``out_storages``) as a VM instruction."""
    arrays, reads, writes = [], [], list(out_storages)
    mutates = op.mutates if op.mutates_fn is None else op.mutated_inputs(len(inputs), attrs)
    n = 0
    i = 0
    for t in inputs:
        h = t._h
        if type(h) is EagerBlob:
            a = h.raw
            if mutates and i in mutates:
                writes.append(h.storage)
            else:
                reads.append(h.storage)
        else:
            a = t._array()
        arrays.append(a)
        n += a.size
        i += 1
    for o in outs:
        n += o.size
    vm.issue(op.kernel_cpu, (arrays, outs, attrs), reads, writes, op.name, fresh,
             scope._scope.names, arrays, "compute", False, n <= _scheduler.INLINE_MAX_ELEMENTS)


def _apply_view(op: Op, inputs: list, attrs: dict, metas: list) -> list:
    """View ops alias their input: the view is made now, on memory the VM may still be
    filling; it shares the base's storage record, so it is ordered like the base."""
    base = inputs[0]
    s, a = _storage_and_array(base)
    arrays = [a] + [_storage_and_array(t)[1] for t in inputs[1:]]
    strided = a.size and not a.flags.c_contiguous
    views = None
    if strided and op.name == "reshape":  # the one view op that may copy: ask without copying
        try:
            views = [a.reshape(metas[0][0], copy=False)]
        except ValueError:  # not expressible as a view
            views = ()
        except TypeError:   # NumPy < 2.1 has no copy=: run the view function and check below
            pass
    if views is None:
        views = op.view_fn(arrays, attrs)
    if views == () or (strided and
                       not all(v.size == 0 or np.may_share_memory(v, a) for v in views)):
        # the "view" had to copy (reshape of a strided array): it read values that may not
        # be there yet, so run the op as a kernel instead
        results = [Tensor._wrap(np.empty(m[0], m[1].np), m[1], base._vc) for m in metas]
        _issue_kernel(op, inputs, attrs, [r._h.raw for r in results],
                      [r._h.storage for r in results])
    else:
        if s is not None and s.writer is not None and s.writer.error is not None:
            vm.sync_read(s)  # a view of a failed result: raise its error now
        results = [Tensor._wrap(v, m[1], base._vc, s) for v, m in zip(views, metas)]
    root = base if base._base is None else base._base
    for t in results:
        t._base = root
    return results


def _record(op: Op, inputs: list, results: list, attrs: dict) -> None:
    node = Node(op, attrs, inputs, results, scope.current_path())
    for i, r in enumerate(results):
        if r.dtype.is_floating_point:
            r.requires_grad = True
            r.grad_fn = node
            r._out_idx = i


def check_inplace(op: Op, inputs: list, out: list, metas: list, record: bool) -> None:
    """Raise if ``op``'s results (``metas``) can't be written into the tensors ``out`` (shape,
    a dtype they can't be cast to, or - while grad mode is on, as in PyTorch - a leaf that
    requires grad or a view of one). Eager dispatch and the graph tracer both check in-place
    calls with it."""
    for t, m in zip(out, metas):
        if tuple(m[0]) != tuple(t._shape):
            raise OpError(_where(f"{op.name}_: output of shape {tuple(m[0])} can't be written in "
                                 f"place into a tensor of shape {tuple(t._shape)}", op, inputs))
        if m[1] is not t.dtype and m[1]._category > t.dtype._category:
            raise OpError(_where(f"{op.name}_: result type {m[1]} can't be cast to the "
                                 f"in-place output's dtype {t.dtype}", op, inputs))
    if not grad_mode._state.enabled:  # (``record`` implies it; no_grad() allows any write)
        return
    for t in out:
        what = None
        if t.grad_fn is None and t.requires_grad:
            what = "a leaf tensor"
        else:
            # the tensor whose memory t views: eager views share their base's storage record
            # (a reshape that had to copy does not); lazy ones are followed through the view
            # ops autograd recorded
            root = t._base
            if root is not None:
                if type(t._h) is not EagerBlob or type(root._h) is not EagerBlob \
                        or t._h.storage is not root._h.storage:
                    root = None
            else:
                node = t.grad_fn
                while node is not None and getattr(node.op, "view_fn", None) is not None \
                        and node._inputs:
                    root, node = node._inputs[0], node._inputs[0].grad_fn
            if root is not None and root.grad_fn is None and root.requires_grad:
                what = "a view of a leaf tensor"
        if what is not None:
            raise RuntimeError(_where(f"{op.name}_: {what} that requires grad is being used "
                                      f"in an in-place operation (use it under no_grad(), or "
                                      f"clone it first)", op, inputs))


def _apply_inplace(op, inputs, attrs, out, metas, record):
    check_inplace(op, inputs, out, metas, record)
    saved = inputs
    if record:
        # inputs that are also outputs keep their pre-op autograd identity for backward
        saved = [_old_identity(t) if any(t is o for o in out) else t for t in inputs]
    outs, out_storages = [], []
    for t in out:
        s, a = _storage_and_array(t)
        outs.append(a)
        if s is not None:
            out_storages.append(s)
    if all(m[1] is t.dtype for t, m in zip(out, metas)):
        _issue_kernel(op, inputs, attrs, outs, (), out_storages)
    else:
        _issue_kernel(_CastInto(op, metas), inputs, attrs, outs, (), out_storages)
    for t in out:
        t._vc[0] += 1
    if record:
        _record(op, saved, out, attrs)
    return list(out)


class _CastInto:
    """Stands in for an op whose in-place result must be cast: the kernel writes temporaries
    of the inferred dtypes, which are then cast into the outputs (on the worker)."""

    __slots__ = ("name", "mutates", "mutates_fn", "mutated_inputs", "_op", "_metas")

    def __init__(self, op: Op, metas: list):
        self.name, self.mutates, self._op, self._metas = op.name, op.mutates, op, metas
        self.mutates_fn, self.mutated_inputs = op.mutates_fn, op.mutated_inputs

    def kernel_cpu(self, arrays, outs, attrs):
        tmp = [np.empty(m[0], m[1].np) for m in self._metas]
        self._op.kernel_cpu(arrays, tmp, attrs)
        for o, r in zip(outs, tmp):
            o[...] = r


def _copy_kernel(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


def _old_identity(t: Tensor) -> Tensor:
    # the pre-op values, copied (by an instruction issued before the in-place kernel): the
    # kernel overwrites t and gradient rules (mul_, pow_, sin_, ...) read the old values
    s, a = _storage_and_array(t)
    a = Tensor._wrap(np.empty(a.shape, a.dtype), t.dtype)
    if s is None:
        np.copyto(a._h.raw, t._array())
    else:
        vm.issue(_copy_kernel, ([t._h.raw], [a._h.raw], None), [s], (), "copy",
                 fresh=[a._h.storage], where=scope._scope.names, shapes=[t._h.raw])
    a.requires_grad = t.requires_grad
    a.grad_fn = t.grad_fn
    a._out_idx = t._out_idx
    return a


def eager_tensor(array: np.ndarray, dtype) -> Tensor:
    """Wrap a NumPy array the caller owns as an eager tensor."""
    return Tensor._wrap(array, dtype)


__all__ = ["apply", "infer", "run_kernel", "push_interpreter", "pop_interpreter",
           "current_interpreter", "Meta", "EagerBlob", "eager_tensor"]
