"""Autograd through eager in-place writes into views: the base's history is rebased.

An eager view (``y[:, 0]``, ``y.view(..)``, ``y.t()``, ``narrow``, ``diagonal``...) shares its
base's memory, so ``y[:, 0].mul_(2)`` changes ``y``. After such a write (grad mode on, the base
or the write needing grad) the base - the tensor owning the storage, ``view._base`` - gets a
new ``grad_fn``, a ``CopySlices`` node: given the base's gradient it passes the part the view
does not cover straight to the base's previous history, and routes the view's region through
the in-place op's backward (its gradient for the view's old value goes back into that region;
its gradients for the other inputs, e.g. a ``copy_`` source, to their histories). The region is
found from the arrays' strides and offsets (the positions of the view's elements in the base),
so every view kind and chains of views are handled alike.

Then every live view of the base made with grad mode on (the written one included) gets a
``grad_fn`` that is a view of the new base (its gradient scattered into a zero base gradient),
so later uses of the views and of the base see one history. A direct write into a base with
live views does the same. Uses recorded before the write keep their histories; a gradient rule
that saved a tensor the write changed raises the version error at backward, as PyTorch does.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from actorflow import scope
from actorflow.autograd import grad_mode
from actorflow.autograd.engine import Node
from actorflow.job.views import aliasing_views, stride_probe
from actorflow.framework import dtype as dt
from actorflow.framework import sbp
from actorflow.ops._common import F
from actorflow.tensor import EagerBlob, Tensor


def register(root: Tensor, views: list) -> None:
    """Remember ``views`` (made with grad mode on) as live views of ``root``; dead entries
    are dropped when the list doubles."""
    reg = root._views
    if reg is None:
        reg = root._views = []
    for v in views:
        reg.append(weakref.ref(v))
        n = len(reg)
        if n >= 64 and (n & (n - 1)) == 0:
            reg[:] = [r for r in reg if r() is not None]


def _node(cls, in_metas: list, out_metas: list, edges: list):
    return cls.from_edges(in_metas, out_metas, edges, scope.current_path())


def _edge(t: Tensor):
    if not t.requires_grad:
        return None
    return (t.grad_fn, t._out_idx) if t.grad_fn is not None else (t, -1)


def _offsets(a: np.ndarray, start: int) -> np.ndarray:
    """Byte offsets of ``a``'s elements from address ``start``."""
    off = np.full(a.shape, a.__array_interface__["data"][0] - start, np.int64)
    for i, (n, s) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[i] = n
        off = off + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return off


def positions(root: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Flat (C-order) indices into ``root`` of the elements of ``view`` (sharing its memory)."""
    start = root.__array_interface__["data"][0]
    voff = _offsets(view, start)
    if root.flags.c_contiguous:
        return voff // root.itemsize
    roff = _offsets(root, start).ravel()
    order = np.argsort(roff, kind="stable")
    return order[np.searchsorted(roff[order], voff)]


class _Geometry:
    """Where a view lies in its base (flat positions), from the arrays' strides and offsets
    (computed at the first backward, then kept): local views' own arrays, global views' stride
    probes (``note_global_view``)."""

    __slots__ = ("root", "view", "_np", "_pos")

    def __init__(self, root: np.ndarray, view: np.ndarray):
        self.root, self.view, self._np, self._pos = root, view, None, None

    def positions(self) -> np.ndarray:
        if self._np is None:
            self._np = np.ascontiguousarray(positions(self.root, self.view).reshape(-1))
            self.root = self.view = None
        return self._np

    def pos(self, like: Tensor) -> Tensor:
        """The positions as an int64 tensor to index ``like`` (global: broadcast on its
        placement)."""
        if getattr(like, "is_global", False):
            return F.tensor(self.positions(), dtype=_int64(), placement=like.placement,
                            sbp=sbp.broadcast)
        if self._pos is None:
            self._pos = Tensor._wrap(self.positions(), _int64())
        return self._pos


def note_global_view(base: Tensor, root: Tensor, op, attrs: dict, views: list) -> None:
    """Remember where the global views ``views`` that ``op`` made of ``base`` lie in ``root``
    (the tensor they view): the view function tried on a stride probe of ``base``'s place in
    ``root`` (``job.views``). A later write into one of them rebases ``root``'s history
    at those positions; a view eager mode would copy gets none (nothing aliases)."""
    if base is root:
        probe = stride_probe(tuple(root._shape))
        src = (probe, probe)
    else:
        src = getattr(base, "_global_probe", None)
        if src is None:
            return
    probes = aliasing_views(op, [src[1]], attrs)
    if probes is not None:
        for t, p in zip(views, probes):
            t._global_probe = (src[0], p)


def _int64():
    return dt.int64


class CopySlices(Node):
    """The base's ``grad_fn`` after an in-place write into a view of it (see the module)."""

    __slots__ = ("inner", "self_pos", "geom", "view_shape", "base_shape")

    def name(self) -> str:
        return "CopySlices"

    def apply(self, douts: list) -> tuple:
        g = douts[0]
        pos = self.geom.pos(g)
        flat = F.reshape(g, (-1,))
        grads = ()
        gself = None
        if self.inner is not None:
            region = F.reshape(F.take(flat, pos), self.view_shape)
            grads = self.inner.apply([region])
            for i in self.self_pos:
                if grads[i] is not None:
                    gself = grads[i] if gself is None else F.add(gself, grads[i])
        if gself is None:
            old = F.scatter(flat, 0, pos, value=0.0)
        else:
            old = F.scatter(flat, 0, pos, F.reshape(gself, (-1,)))
        rest = tuple(g for i, g in enumerate(grads) if i not in self.self_pos) \
            if self.inner is not None else ()
        return (F.reshape(old, self.base_shape),) + rest

    def release(self) -> None:
        super().release()
        if self.inner is not None:
            self.inner.release()


class _ViewOf(Node):
    """A view's ``grad_fn`` regenerated from its base's new history."""

    __slots__ = ("geom", "base_shape")

    def name(self) -> str:
        return "AsStridedBackward"

    def apply(self, douts: list) -> tuple:
        g = douts[0]
        n = int(np.prod(self.base_shape))
        flat = F.reshape(g, (-1,))
        if getattr(g, "is_global", False):
            base = F.zeros((n,), dtype=g.dtype, placement=g.placement, sbp=sbp.broadcast)
        else:
            base = F.zeros((n,), dtype=g.dtype)
        return (F.reshape(F.scatter(base, 0, self.geom.pos(g), flat), self.base_shape),)


class _Overwritten(Node):
    """``grad_fn`` of a tensor overwritten by an op whose inputs need no grad: the previous
    history gets a zero gradient."""

    __slots__ = ()

    def name(self) -> str:
        return "OverwrittenBackward"

    def apply(self, douts: list) -> tuple:
        return (F.zeros_like(douts[0]),)


def _aliases(t: Tensor, root: Tensor) -> bool:
    h, rh = t._h, root._h
    return type(h) is EagerBlob and type(rh) is EagerBlob and h.storage is rh.storage


def _regenerate(root: Tensor, extra: Tensor | None = None, geom=None) -> None:
    """Every live view of ``root`` (and ``extra``, at ``geom``) becomes a view of its new
    history."""
    edge = _edge(root)
    if edge is None:
        return
    views = []
    reg = root._views
    if reg:
        alive = [v for v in (r() for r in reg) if v is not None]
        reg[:] = [weakref.ref(v) for v in alive]
        views = [(v, None) for v in alive if v is not extra and _aliases(v, root)]
    if extra is not None:
        views.append((extra, geom))
    meta = (root._shape, root.dtype)
    base_shape = tuple(root._shape)
    for v, g in views:
        if not v.dtype.is_differentiable:
            continue
        n = _node(_ViewOf, [meta], [(v._shape, v.dtype)], [edge])
        n.geom = g if g is not None else _Geometry(root._h.raw, v._h.raw)
        n.base_shape = base_shape
        v.grad_fn, v._out_idx, v.requires_grad = n, 0, True


def after_write_step(inputs: list, out: list, rec: bool):
    """What an eager (local or global) interpreter hands ``dispatch.apply`` to run once the
    autograd node of in-place call ``out`` is recorded: ``after_write`` when grad mode is on
    and a written tensor is a view, a base with views, or a tensor with a history that values
    needing no grad overwrite; else None."""
    if not grad_mode._state.enabled:
        return None
    for t in out:
        if t._base is not None or t._views is not None or (t.grad_fn and not rec):
            return functools.partial(after_write, inputs, out, rec)
    return None


def after_write(inputs: list, out: list, rec: bool) -> None:
    """Run (through ``after_write_step``) after an eager (local or global) in-place call with
    grad mode on (``rec``: autograd recorded the op, so each written tensor's ``grad_fn`` is
    its node)."""
    for t in out:
        root = t._base
        if root is None:
            if not rec and t.grad_fn is not None:  # overwritten by values needing no grad
                t.grad_fn = _node(_Overwritten, [(t._shape, t.dtype)],
                                  [(t._shape, t.dtype)], [(t.grad_fn, t._out_idx)])
                t._out_idx = 0
            if t._views is not None:
                _regenerate(t)
            continue
        if not (rec or root.requires_grad):
            continue
        inner = t.grad_fn if rec else None
        self_pos = tuple(i for i, x in enumerate(inputs) if x is t) if rec else ()
        if type(t._h) is EagerBlob:
            if not _aliases(t, root):
                continue
            geom = _Geometry(root._h.raw, t._h.raw)
        elif getattr(t._h, "is_global", False) and getattr(root._h, "is_global", False):
            probes = getattr(t, "_global_probe", None)
            if probes is None:  # a reshape that copied: the write does not reach root
                continue
            geom = _Geometry(*probes)
        else:
            continue
        _rebase(t, root, self_pos, inner, geom)


def _rebase(v: Tensor, root: Tensor, self_pos: tuple, inner: Node | None, geom) -> None:
    """``root``'s history after in-place ``inner`` (None: values needing no grad; the
    written view's old value is its inputs ``self_pos``) wrote its view ``v`` at ``geom``."""
    others = [i for i in range(len(inner.next_edges)) if i not in self_pos] if inner else []
    meta = (root._shape, root.dtype)
    edges = [_edge(root)] + [inner.next_edges[i] for i in others]
    metas = [meta] + [inner.input_metas[i] for i in others]
    c = _node(CopySlices, metas, [meta], edges)
    c.inner, c.self_pos, c.geom = inner, self_pos, geom
    c.view_shape, c.base_shape = tuple(v._shape), tuple(root._shape)
    root.grad_fn, root._out_idx, root.requires_grad = c, 0, True
    _regenerate(root, v, geom)


__all__ = ["after_write", "register", "note_global_view", "positions", "CopySlices"]
