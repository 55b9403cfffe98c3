"""The eager-local interpreter: run an op now on local tensors, through the VM.

Inference, output allocation and random seeds happen on the caller's thread; the kernel is
issued to the VM (``actorflow.vm``) and runs on the current worker thread once the memory it
reads and writes is ready. View ops alias their input at once; in-place calls write into the
given tensors.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow import scope, vm
from actorflow.job.views import aliasing_views
from actorflow.autograd import grad_mode
from actorflow.dispatch import copy_slices
from actorflow.dispatch.common import (allocation_error, check_inplace, infer, note_view_mode,
                                       where)
from actorflow.ops.registry import Op
from actorflow.random import default_generator
from actorflow.tensor import EagerBlob, Tensor
from actorflow.vm import scheduler as _scheduler

_state = scope.state
_grad = grad_mode._state


class EagerInterpreter:
    """Runs ops on eager tensors (the default interpreter of every thread)."""

    def apply(self, op: Op, inputs: list, attrs: dict, out: list | None, record: bool):
        """``(results, node inputs, node outputs, then)``: see ``actorflow.dispatch.apply``;
        ``then`` rebases the autograd histories of a written view and its base."""
        metas = infer(op, inputs, attrs)
        if op.random and attrs.get("seed") is None:
            attrs = dict(attrs, seed=default_generator.next_seed())
        if out is not None:
            results, saved, written = _apply_inplace(op, inputs, attrs, out, metas, record)
            return results, saved, written, copy_slices.after_write_step(inputs, out, record)
        if op.view_fn is not None:
            results = _apply_view(op, inputs, attrs, metas)
        else:
            try:
                results = [Tensor._wrap(np.empty(m[0], m[1].np), m[1]) for m in metas]
            except (MemoryError, ValueError) as e:
                raise _allocation_failed(op, metas, e) from None
            _issue_kernel(op, inputs, attrs, [r._h.raw for r in results],
                          [r._h.storage for r in results])
            if op.may_mutate:
                for i in op.mutated_inputs(len(inputs), attrs):
                    inputs[i]._vc[0] += 1  # inputs written in place (optimizer state)
        return results, inputs, results, None

    def old_identity(self, t: Tensor) -> Tensor:
        """A tensor with ``t``'s autograd identity and its current values, for a gradient rule
        that needs the values an in-place op is about to overwrite."""
        return old_identity(t)


def _allocation_failed(op: Op, metas: list, err: Exception) -> Exception:
    """The error of an output NumPy could not allocate (the largest), naming the op and the
    bytes."""
    shape, dtype = max(metas, key=lambda m: math.prod(m[0]) * m[1].np.itemsize)[:2]
    return allocation_error(op.name, shape, dtype, err)


def storage_and_array(t: Tensor):
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
    mutates = op.mutated_inputs(len(inputs), attrs) \
        if op.may_mutate else ()
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
    nbytes = 0
    for o in outs:
        n += o.size
        nbytes += o.nbytes
    vm.issue(op.kernel_cpu, (arrays, outs, attrs), reads=reads, writes=writes, name=op.name,
             fresh=fresh, where=_state.names, shapes=arrays,
             small=n <= _scheduler.INLINE_MAX_ELEMENTS, nbytes=nbytes if fresh else 0)


def _apply_view(op: Op, inputs: list, attrs: dict, metas: list) -> list:
    """View ops alias their input: the view is made now, on memory the VM may still be
    filling; it shares the base's storage record, so it is ordered like the base."""
    base = inputs[0]
    s, a = storage_and_array(base)
    arrays = [a] + [storage_and_array(t)[1] for t in inputs[1:]]
    views = aliasing_views(op, arrays, attrs)
    copied = views is None
    if copied:
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
    if not copied:
        note_view_mode(base, root, results)
    if _grad.enabled and not copied:  # later in-place writes rebase the views' histories
        copy_slices.register(root, results)
    return results


def _apply_inplace(op, inputs, attrs, out, metas, record):
    check_inplace(op, inputs, out, metas, record)
    saved = inputs
    if record:
        # inputs that are also outputs keep their pre-op autograd identity for backward
        saved = [old_identity(t) if any(t is o for o in out) else t for t in inputs]
    outs, out_storages = [], []
    for t in out:
        s, a = storage_and_array(t)
        if t._base is not None and not a.flags.writeable and any(
                st == 0 and n > 1 for n, st in zip(a.shape, a.strides)):  # expand's views
            raise RuntimeError(where(
                f"{op.name}_: unsupported operation: more than one element of the written-to "
                f"tensor refers to a single memory location (an expanded view, shape "
                f"{tuple(t._shape)}); clone() the tensor before writing into it", inputs))
        outs.append(a)
        if s is not None:
            out_storages.append(s)
    if all(m[1] is t.dtype for t, m in zip(out, metas)):
        _issue_kernel(op, inputs, attrs, outs, (), out_storages)
    else:
        _issue_kernel(_CastInto(op, metas), inputs, attrs, outs, (), out_storages)
    for t in out:
        t._vc[0] += 1
    results = list(out)
    return results, saved, results


class _CastInto:
    """Stands in for an op whose in-place result must be cast: the kernel writes temporaries
    of the inferred dtypes, which are then cast into the outputs (on the worker)."""

    __slots__ = ("name", "mutates", "mutates_fn", "may_mutate", "mutated_inputs", "_op",
                 "_metas")

    def __init__(self, op: Op, metas: list):
        self.name, self.mutates, self._op, self._metas = op.name, op.mutates, op, metas
        self.mutates_fn, self.mutated_inputs = op.mutates_fn, op.mutated_inputs
        self.may_mutate = op.may_mutate

    def kernel_cpu(self, arrays, outs, attrs):
        tmp = [np.empty(m[0], m[1].np) for m in self._metas]
        self._op.kernel_cpu(arrays, tmp, attrs)
        for o, r in zip(outs, tmp):
            o[...] = r


def _copy_kernel(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


def old_identity(t: Tensor) -> Tensor:
    """``t``'s pre-op values, copied by an instruction issued before the in-place kernel (the
    kernel overwrites t and gradient rules such as mul_, pow_, sin_ read the old values),
    with ``t``'s autograd identity."""
    s, a = storage_and_array(t)
    a = Tensor._wrap(np.empty(a.shape, a.dtype), t.dtype)
    if s is None:
        np.copyto(a._h.raw, t._array())
    else:
        vm.issue(_copy_kernel, ([t._h.raw], [a._h.raw], None), reads=[s], writes=(), name="copy",
                 fresh=[a._h.storage], where=_state.names, shapes=[t._h.raw])
    a.requires_grad = t.requires_grad
    a.grad_fn = t.grad_fn
    a._out_idx = t._out_idx
    return a
