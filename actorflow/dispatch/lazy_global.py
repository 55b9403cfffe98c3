"""The lazy-global interpreter: op calls on global tensors while ``nn.Graph`` traces ``build``.

A *global lazy tensor* has the logical shape and dtype of a global tensor, its placement and
sbp, and a handle (``LazyGlobalBlob``) naming the blob of the Job that holds this rank's shard:
each rank traces its own physical Job. ``dispatch.apply`` hands a call to this interpreter when
an input is global (an eager global tensor - a parameter - or a global lazy one) and a Graph is
tracing. Per call it

* chooses the SBP signature with the eager-global interpreter's function
  (``global_tensor.choose_signature``, over ``nd_sbp.select_signature``: the op's ``@op.sbp``
  rule plus all-broadcast, the one that moves the fewest bytes; a mutated input keeps its
  sbp), so a ``to_global(sbp=...)`` in build and the parameters' sbp steer it as in eager mode;
* appends the boxing ops the inputs need (``boxing.box_shard`` given the tracer as its
  interpreter: the registered boxing ops, as explicit OpConfs tagged ``boxing`` with their
  bytes and reason);
* appends the op itself on the shards (shapes of this rank's shards, the signature's local
  attrs and post-processing, ``nd_sbp.run_levels``) and tags it ``global``: placement, sbp of
  every input and output, logical output shapes (``global_tags``);
* returns global lazy tensors. Autograd records on them, so gradient rules run through this
  interpreter too (a boxing's gradient boxes back), and an optimizer update on a broadcast
  parameter forces its partial-sum gradient to be all-reduced: data parallelism needs no DDP.

Local tensors meeting global ones in a graph (learning rates, constants) count as broadcast.
Placements may be n-d (``[[0, 1], [2, 3]]``: one sbp per hierarchy axis, tags such as
``"(S(0), B)"``). An op whose placement leaves out this rank is another pipeline stage's: it
is not traced here (its outputs have no blob on this rank), and moves between placements
become send/recv ops, or local copies on ranks of both (``actorflow.dispatch.lazy_move``).
In-place calls run out of place and rebind the written tensor, keeping its sbp
(``LazyGlobalInterpreter._write_in_place``).
The boxing ops of one traced Job use their own communicators (attr ``group``, made on the
tracing thread when the Job first needs them; on an n-d placement one per hierarchy axis, of
the ranks along it), so a graph's collectives never interleave with eager collectives or
another graph's.
"""
from __future__ import annotations

import ast
import itertools

import numpy as np

from actorflow import scope
from actorflow.autograd import grad_mode
from actorflow.dispatch import global_tensor as gt
from actorflow.dispatch import lazy_views
from actorflow.dispatch.common import check_inplace, infer
from actorflow.dispatch.lazy import LazyBlob
from actorflow.dispatch.boxing import box_shard
from actorflow.dispatch.nd_sbp import run_levels
from actorflow.process import groups
from actorflow.process.world import world
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import (SbpParallel, as_sbp_tuple, coords_of, group_ranks,
                                              nd_attrs, nd_sbp_attr, nd_sbp_str, nd_shard_shape,
                                              nd_value)
from actorflow.job.job import BlobDesc, OpConf, split_blob
from actorflow.job.system_ops import is_system_op
from actorflow.ops import registry
from actorflow.ops.boxing import B
from actorflow.tensor import Tensor

_group_ids = itertools.count()


def group_numbering(start: int | None = None) -> int:
    """The number the next distributed graph's communicators get (``graph3``), read without
    using it up; with ``start``, the next one gets ``start`` (see ``graph_numbering``)."""
    global _group_ids
    n = next(_group_ids) if start is None else start
    _group_ids = itertools.count(n)
    return n


class LazyGlobalBlob(LazyBlob):
    """Handle of a global lazy tensor: blob ``name`` (this rank's shard) of the Job ``tracer``
    traces, with the tensor's placement and sbp."""

    __slots__ = ("placement", "sbp")
    is_global = True

    def __init__(self, tracer, name: str, placement_: placement, sbp: tuple):
        super().__init__(tracer, name)
        self.placement, self.sbp = placement_, sbp

    def describe(self) -> str:
        return f"lazy global blob {self.name!r} on {self.placement}, sbp={self.sbp}"


def is_lazy_global(t) -> bool:
    """Whether ``t`` is a global lazy tensor."""
    return type(getattr(t, "_h", None)) is LazyGlobalBlob


def physical(t):
    """What runs on this rank for tensor ``t``: a global tensor's shard, else ``t``."""
    h = getattr(t, "_h", None)
    if type(h) is not gt.GlobalBlob:
        return t
    if h.local is None:  # an input of a stage on other ranks: its input op reads nothing
        return Tensor._wrap(np.empty((0,), t.dtype.np), t.dtype)
    return h.local


# ---- the Job's record of placement and sbp ------------------------------------------------------

def placement_str(pl: placement) -> str:
    """``"cpu:0,1"`` for a 1-D placement, ``"cpu:[[0, 1], [2, 3]]"`` for an n-d one."""
    if len(pl.hierarchy) == 1:
        return f"{pl.type}:{','.join(str(r) for r in pl.flat_ranks)}"
    return f"{pl.type}:{pl.ranks.tolist()}"


def global_tags(pl: placement, ins: tuple, outs: tuple, logical: list) -> dict:
    """The ``global`` tag of an OpConf: placement, n-d sbp per input and output (given as
    tuples of attr tuples, shown as ``nd_sbp_str``), logical shapes."""
    return {"placement": placement_str(pl),
            "in": tuple(nd_sbp_str(s) for s in ins), "out": tuple(nd_sbp_str(s) for s in outs),
            "logical": tuple(tuple(int(d) for d in s) for s in logical)}


def placement_of_tag(text: str) -> placement:
    """The placement a ``global`` tag names (``"cpu:0,1"``, ``"cpu:[[0, 1], [2, 3]]"``)."""
    kind, ranks = text.split(":", 1)
    if ranks.startswith("["):
        return placement(kind, ast.literal_eval(ranks))
    return placement(kind, [int(r) for r in ranks.split(",")])


def output_global(conf, i: int = 0):
    """``(placement, n-d sbp attrs, logical shape)`` of output ``i`` of ``conf``, or None for a
    local op."""
    g = conf.tags.get("global")
    if g is None:
        return None
    return placement_of_tag(g["placement"]), nd_sbp_attr(g["out"][i]), tuple(g["logical"][i])


def global_lazy(tracer, blob: str, pl: placement, sbp: tuple, logical: tuple,
                dtype) -> Tensor:
    """A global lazy tensor of ``tracer`` over shard ``blob``, laid out as n-d ``sbp`` (attr
    tuples)."""
    h = LazyGlobalBlob(tracer, blob, pl, tuple(SbpParallel.from_attr(a) for a in sbp))
    return Tensor._from_handle(h, tuple(logical), dtype)


# ---- entry points of the tracer (``actorflow.dispatch.lazy``) ------------------------------------

def trace_variable(tracer, t: Tensor, conf) -> Tensor:
    """Global eager ``t`` as a variable op: ``conf`` (made by the tracer) gets this rank's shard
    shape and the ``global`` tag; returns the global lazy tensor standing for ``t``."""
    h = t._h
    what = conf.attrs.get("name") or conf.attrs.get("path")
    if h.local is None:
        if conf.op_type != "input":
            raise ValueError(f"nn.Graph: {conf.op_type} {what} is placed on {h.placement}, "
                             f"which leaves out rank {world().rank}")
        # an input of another rank's stage: the op reads an empty placeholder, the tensor
        # has no shard here
        conf.outputs[0] = BlobDesc((0,), t.dtype)
        conf.tags["global"] = global_tags(h.placement, (), (nd_attrs(h.sbp),), [t._shape])
        return Tensor._from_handle(LazyGlobalBlob(tracer, None, h.placement, h.sbp),
                                   tuple(t._shape), t.dtype)
    local = h.local
    conf.outputs[0] = BlobDesc(tuple(local._shape), local.dtype)
    conf.tags["global"] = global_tags(h.placement, (), (nd_attrs(h.sbp),), [t._shape])
    return global_lazy(tracer, conf.out(0), h.placement, nd_attrs(h.sbp), t._shape, t.dtype)


def tensor_of_blob(tracer, blob: str, producer) -> Tensor | None:
    """The global lazy tensor of ``blob`` when its producer is tagged global, else None."""
    g = output_global(producer, split_blob(blob)[1])
    if g is None:
        return None
    return global_lazy(tracer, blob, g[0], g[1], g[2], tracer.builder.desc(blob).dtype)


def absent_output(tracer, index: int, path: str, name: str, t: Tensor):
    """The output op of global lazy ``t`` that has no shard on this rank: it returns an empty
    placeholder, and the call's output is a global tensor with no shard here."""
    holder = tracer.variable(Tensor._wrap(np.empty((0,), t.dtype.np), t.dtype))
    blob = holder._h.name
    tags = {"phase": "output", "global": global_tags(t._h.placement, (), (nd_attrs(t._h.sbp),),
                                                     [t._shape])}
    # what the tensor is (another stage's parameter, or computed per micro-batch there: then
    # gradient accumulation packs it, ``passes/grad_acc``)
    params = tracer.__dict__.get("_absent", {}).values()
    tags["absent"] = "parameter" if any(v[1] is t for v in params) else "activation"
    return tracer.builder.add_op(OpConf(name, "output", [blob], {"index": index, "path": path},
                                        [tracer.builder.desc(blob)], tags=tags))


def micro_batch_input(tracer, whole: Tensor, micro: tuple, n: int) -> Tensor:
    """The micro-batch (logical shape ``micro``) of global lazy input ``whole`` under ``n``
    accumulation steps: an unpack of this rank's shard (split along dim 0, laid out as the
    input), or no blob on a rank outside the input's placement (another stage's input)."""
    h = whole._h
    if h.name is None:
        lazy = Tensor._from_handle(LazyGlobalBlob(tracer, None, h.placement, h.sbp), micro,
                                   whole.dtype)
    else:
        sbp = nd_attrs(h.sbp)
        if sbp[0] != B and sbp[0] != ("S", 0):
            raise NotImplementedError(f"nn.Graph: gradient accumulation of a global input "
                                      f"laid out as {h.sbp} (broadcast or split(0) only)")
        local = tracer.builder.desc(h.name)
        if local.shape[0] % n:
            raise ValueError(f"nn.Graph: gradient accumulation splits this rank's shard of "
                             f"shape {tuple(local.shape)} into {n} micro-batches along dim 0")
        desc = BlobDesc((local.shape[0] // n,) + tuple(local.shape[1:]), whole.dtype)
        conf = OpConf(tracer.builder.unique_name(f"{split_blob(h.name)[0]}-unpack"),
                      "micro_unpack", [h.name], {"n": n}, [desc],
                      tags={"phase": "forward", "stage": "micro",
                            "global": global_tags(h.placement, (sbp,), (sbp,), [micro])})
        tracer.builder.add_op(conf)
        lazy = global_lazy(tracer, conf.out(0), h.placement, sbp, micro, whole.dtype)
    lazy.requires_grad = whole.requires_grad
    return lazy


def _shard(tracer, blob: str) -> Tensor:
    """A local lazy tensor over shard ``blob`` (what the op runs on)."""
    return tracer.lazy_tensor(blob, tracer.builder.desc(blob))


def interpreter_for(tracer) -> "LazyGlobalInterpreter":
    """The lazy-global interpreter of ``tracer`` (one per tracer)."""
    interp = tracer.__dict__.get("_global_interp")
    if interp is None:
        interp = tracer.__dict__["_global_interp"] = LazyGlobalInterpreter(tracer)
        tracer._global = True
    return interp


def restore_for_use(tracer, leaf: Tensor, name: str, level: int) -> Tensor:
    """ZeRO stage 3: what the ops of build() read for the split(0) variable ``leaf`` of
    parameter ``name`` under OneFlow's ``shard_restore_level``: 0, ``leaf`` itself (each op's
    signature choice boxes it as it needs, and its backward gives the gradient's sbp); 1,
    ``leaf`` all-gathered S(0) -> B (reason ``<name> zero-3 gather``) with an identity
    backward (the gradient reaches ``leaf`` in the sbp the consumers' backward made, e.g.
    partial sum); 2, the same gather recorded as a boxing (the gradient goes back P -> S(0)
    there, a reduce-scatter)."""
    if level == 0:
        return leaf
    if level not in (1, 2):
        raise ValueError(f"nn.Graph: ZeRO shard_restore_level of {name} must be 0, 1 or 2, "
                         f"got {level!r}")
    s0, b = (("S", 0),), (("B",),)
    out = interpreter_for(tracer).box_to(leaf, b, f"{name} zero-3 gather")
    gt.record_boxing(leaf, out, s0, b, grad_mode="identity" if level == 1 else "restore")
    return out


def box(t: Tensor, sbp) -> Tensor:
    """Global lazy ``t`` re-laid out as ``sbp`` (``to_global`` inside build; differentiable)."""
    h = t._h
    sbp = as_sbp_tuple(sbp, "to_global")
    hier = h.placement.hierarchy
    if len(sbp) != len(hier):
        raise ValueError(f"nn.Graph: to_global with {len(sbp)} sbp on placement "
                         f"{h.placement} of hierarchy {hier}: give one sbp per hierarchy axis")
    src, dst = nd_attrs(h.sbp), nd_attrs(sbp)
    if src == dst:
        return t
    interp = interpreter_for(h.tracer)
    reason = f"to_global in {scope.current_path() or 'build'}"
    out = interp.box_to(t, dst, reason)
    gt.record_boxing(t, out, src, dst)
    return out


# ---- the interpreter -----------------------------------------------------------------------------

class LazyGlobalInterpreter:
    """Traces op calls on global tensors into ``tracer``'s Job (see the module docstring)."""

    def __init__(self, tracer):
        self.tracer = tracer

    def group_key(self) -> str:
        """The key of this Job's communicators (chosen on first use; every rank traces the
        same graphs in the same order)."""
        train = self.tracer.job.train
        key = train.get("comm_group")
        if key is None:
            key = train["comm_group"] = f"graph{next(_group_ids)}"
        return key

    def group(self, pl: placement) -> str:
        """The communicator key of this Job's boxing ops on ``pl`` (made on first use, on the
        tracing thread: every rank traces the same graphs in the same order). On an n-d
        placement the boxing ops of axis k run on the group along k (the ranks sharing every
        other coordinate): this rank makes its group of each axis, axis 0 first, so every rank
        creates its groups in the same order and each creation involves only that group."""
        key = self.group_key()
        if len(pl.hierarchy) == 1:
            groups.make_group(pl.flat_ranks, key)
            return key
        coords = coords_of(pl, world().rank)
        for axis, n in enumerate(pl.hierarchy):
            if n > 1:  # (box_axis never boxes over a group of one)
                groups.make_group(group_ranks(pl, coords, axis), key)
        return key

    def as_global(self, op, t: Tensor, pl: placement) -> Tensor:
        """``t`` as a global lazy tensor of this trace (local tensors count as broadcast)."""
        h = t._h
        if type(h) is LazyGlobalBlob:
            return self.tracer.lazy_of(t)
        if type(h) is gt.GlobalBlob:
            if h.local is None:  # a parameter of a stage on other ranks: no variable here
                return self.absent(t)
            return self.tracer.variable(t)
        if t.requires_grad and grad_mode._state.enabled:
            raise ValueError(f"{op.name}: mixes a local tensor that requires grad (shape "
                             f"{tuple(t._shape)}) with global tensors placed on {pl} in "
                             f"nn.Graph build(); make it global (a global parameter or input)")
        lazy = self.tracer.lazy_of(t)
        return global_lazy(self.tracer, lazy._h.name, pl, (B,) * len(pl.hierarchy), t._shape,
                           t.dtype)

    def absent(self, t: Tensor) -> Tensor:
        """Eager global ``t`` that has no shard on this rank as a global lazy tensor with no
        blob (one per tensor, requiring grad as ``t`` does: the other ranks' stages still
        differentiate through it, and so must this rank's trace, to send gradients back)."""
        cache = self.tracer.__dict__.setdefault("_absent", {})
        hit = cache.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        h = t._h
        lazy = Tensor._from_handle(LazyGlobalBlob(self.tracer, None, h.placement, h.sbp),
                                   tuple(t._shape), t.dtype)
        lazy.requires_grad = t.requires_grad and t.dtype.is_differentiable
        cache[id(t)] = (t, lazy)
        return lazy

    def box_to(self, t: Tensor, dst: tuple, reason: str) -> Tensor:
        """Append the boxing ops taking global lazy ``t`` to n-d ``dst``; the boxed tensor."""
        h = t._h
        pl, src = h.placement, nd_attrs(h.sbp)
        tr = self.tracer
        start = len(tr.job.ops)
        local = _shard(tr, h.name)
        boxed = box_shard(local, src, dst, t._shape, pl, coords_of(pl, world().rank),
                          interp=tr, extra={"group": self.group(pl)})
        if boxed._h.name == h.name:
            # only axes of one rank changed (n-d): same values, but the blob's producer must
            # record the new sbp (outputs and later reads of the blob take it from there)
            boxed = tr.apply(registry.get("reshape"), [local], {"shape": tuple(local._shape)},
                             None, False)[0][0]
        nbytes = t.numel() * t.dtype.itemsize
        for conf in tr.job.ops[start:]:
            conf.tags["global"] = global_tags(pl, (src,), (dst,), [t._shape])
            if conf.op_type.startswith("boxing_"):
                conf.tags["boxing"] = {"from": nd_sbp_str(src), "to": nd_sbp_str(dst),
                                       "bytes": nbytes, "reason": reason}
        return global_lazy(tr, boxed._h.name, pl, dst, t._shape, t.dtype)

    def _reason(self, op, gins: list, i: int) -> str:
        var = self.tracer.eager_of(gins[i])
        path = scope.current_path()
        where = f"{path}: " if path else ""
        if op.optimizer_update and i == 1:
            param = self.tracer.eager_of(gins[0])
            name = self._var_name(param) if param is not None else "parameter"
            return f"{name} grad"
        if var is not None:
            return f"{where}{op.name} input {i} ({self._var_name(var)})"
        return f"{where}{op.name} input {i}"

    def _var_name(self, eager: Tensor) -> str:
        blob = self.tracer._var_blob.get(id(eager))
        return split_blob(blob)[0] if blob else "a variable"

    def apply(self, op, inputs: list, attrs: dict, out: list | None, record_: bool):
        """``(results, node inputs, node outputs, then)``: see ``actorflow.dispatch.apply``;
        views are made again and written back as in a one-process trace (``lazy_views``)."""
        tr = self.tracer
        lazy_views.refresh_all(tr, inputs, out)
        if out is not None:
            results, saved, written = self._write_in_place(op, inputs, attrs, out, record_)
            return results, saved, written, lazy_views.after_step(tr, op, inputs, attrs, out,
                                                                  results)
        pl = self._placement(op, inputs)
        gins = [self.as_global(op, t, pl) for t in inputs]
        results = self._run(op, gins, attrs, pl, None)
        return results, gins, results, lazy_views.after_step(tr, op, inputs, attrs, out, results)

    def _placement(self, op, tensors: list) -> placement:
        pl = None
        for t in tensors:
            p = getattr(t._h, "placement", None) if getattr(t._h, "is_global", False) else None
            if p is None:
                continue
            if pl is None:
                pl = p
            elif p != pl:
                raise NotImplementedError(
                    f"nn.Graph: {op.name}: inputs are on different placements, {pl} and {p}: "
                    f"move one with to_global(placement=..., sbp=...) first")
        return pl

    def _run(self, op, gins: list, attrs: dict, pl: placement, keep: list | None) -> list:
        """The op on global lazy ``gins`` out of place: boxing, the op on this rank's shards;
        the global lazy results. ``keep``: the written tensors of an in-place call, whose sbp
        a signature keeps if one can (else the caller boxes the results back)."""
        metas = infer(op, gins, attrs)
        sig = None
        if keep is not None:
            try:
                sig = gt.choose_signature(op, gins, attrs, keep, metas, pl)
            except ValueError:
                sig = None
        if sig is None:
            sig = gt.choose_signature(op, gins, attrs, None, metas, pl)
        coords = coords_of(pl, world().rank)
        tr = self.tracer
        if coords is None:  # another stage's op: not in this rank's Job (lazy_move.py)
            return [Tensor._from_handle(LazyGlobalBlob(tr, None, pl, tuple(
                SbpParallel.from_attr(a) for a in sig.outs[k])), tuple(m[0]), m[1])
                for k, m in enumerate(metas)]
        shards = []
        for i, (t, s) in enumerate(zip(gins, sig.ins)):
            if nd_attrs(t.sbp) != s:
                t = self.box_to(t, s, self._reason(op, gins, i))
            shards.append(_shard(tr, t._h.name))
        local_attrs, post = run_levels(sig.levels(coords), attrs, coords, pl.hierarchy)
        start = len(tr.job.ops)
        locals_ = post(tr.apply(op, shards, local_attrs, None, False)[0])
        tags = global_tags(pl, sig.ins, sig.outs, [m[0] for m in metas])
        for conf in tr.job.ops[start:]:
            conf.tags["global"] = tags
        results = []
        for k, m in enumerate(metas):
            want = nd_shard_shape(m[0], sig.outs[k], pl.hierarchy, coords)
            if tuple(locals_[k]._shape) != want:
                raise registry.OpError(
                    f"{op.name}: SBP signature {sig.ins} -> {sig.outs} gave a shard of shape "
                    f"{tuple(locals_[k]._shape)} for a logical output of shape {tuple(m[0])}")
            results.append(global_lazy(tr, locals_[k]._h.name, pl, sig.outs[k], m[0], m[1]))
        return results

    # -- in-place calls -------------------------------------------------------------------------
    # As in a one-process trace (``LazyInterpreter._write_in_place``), an in-place call
    # (``x += y``, ``nn.ReLU(inplace=True)``, ``t[idx] = v``, a buffer's ``add_``...) becomes
    # the op out of place and the written tensor is rebound to its result; eager state (a
    # parameter or buffer, or the variable a proxy hands out for it) is also written back with
    # an ``assign`` op. The op runs with a signature that keeps the written tensor's sbp if the
    # op's rule has one; if none does, the result is boxed back to it, so an in-place op never
    # changes a tensor's layout (as eagerly and in OneFlow). Autograd records the op on the
    # written tensors' pre-op identities, as the eager-global interpreter does.

    def _write_in_place(self, op, inputs: list, attrs: dict, out: list, record_: bool):
        """``(results, node inputs, node outputs)`` of an in-place call on global tensors."""
        tr = self.tracer
        pl = self._placement(op, list(inputs) + list(out))
        gins = [self.as_global(op, t, pl) for t in inputs]
        gout = [self.as_global(op, t, pl) for t in out]
        check_inplace(op, inputs, out, infer(op, gins, attrs), record_)
        saved = gins
        if record_:
            saved = [tr.old_identity(g) if any(g is o for o in gout) else g for g in gins]
        results = self._run(op, gins, attrs, pl, gout)
        # (eager state used directly: a local one counts as broadcast)
        written = [tr.rebind(t, self._to_layout(r, g, op.name), self._assign_state)
                   for t, g, r in zip(out, gout, results)]
        return list(out), saved, written

    def _to_layout(self, r: Tensor, t: Tensor, op_name: str) -> Tensor:
        """Result ``r`` as ``t`` is laid out and typed (the value ``t`` takes)."""
        from actorflow.dispatch import apply  # late: dispatch.apply imports this module

        want = nd_attrs(t.sbp)
        if r._h.name is None:  # another stage's op: no blob here either way
            h = LazyGlobalBlob(self.tracer, None, r._h.placement, nd_value(want))
            return Tensor._from_handle(h, tuple(t._shape), t.dtype)
        if r.dtype is not t.dtype:
            with grad_mode.no_grad():
                r = apply(registry.get("cast"), [r], {"dtype": t.dtype})[0]
        if nd_attrs(r._h.sbp) != want:
            r = self.box_to(r, want, f"{op_name}_ keeps the sbp of the tensor it writes")
        return r

    def _assign_state(self, eager: Tensor, value: Tensor) -> Tensor:
        """Write global lazy ``value`` into eager state ``eager`` at run time (global, laid out
        as ``value``; or local, e.g. a GradScaler's scale: ``value`` is then broadcast); the
        lazy tensor later reads of ``eager`` in this trace see."""
        tr = self.tracer
        var = tr.variable(eager)
        if var._h.name is None:  # another stage's state: nothing to write on this rank
            cache = tr.__dict__.setdefault("_absent", {})
            fresh = Tensor._from_handle(value._h, tuple(eager._shape), eager.dtype)
            fresh.requires_grad = value.requires_grad
            cache[id(eager)] = (eager, fresh)
            return fresh
        start = len(tr.job.ops)
        tr._assign(eager, value)
        sbp = nd_attrs(value._h.sbp)
        for conf in tr.job.ops[start:]:
            conf.tags["global"] = global_tags(value._h.placement, (sbp, sbp), (), [])
        return tr.lazy_of(eager)


# ---- what a Job's boxing costs ------------------------------------------------------------------

def _mib(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.3g} KiB"
    return f"{n} B"


def _verb(op_type: str) -> str:
    """What a boxing op does, in a few words (the head of its doc: "all-reduce")."""
    doc = registry.get(op_type).doc
    text = doc.split(": ", 1)[-1]
    for stop in (" (", ",", "."):
        text = text.split(stop, 1)[0]
    return text


def boxing_report(job) -> list:
    """One line per boxing op of ``job``: op, what it does, logical bytes, why (and one per
    send or receive between pipeline stages)."""
    lines = []
    for o in job.ops:
        x = o.tags.get("transfer")
        if x is not None:  # a pipeline stage's send or receive (dispatch/lazy_move.py)
            what = f"send to rank {x['to']}" if "to" in x else f"receive from rank {x['from']}"
            lines.append(f"{x['reason']}: {what}, {_mib(int(x['bytes']))} ({o.name})")
            continue
        b = o.tags.get("boxing")
        if b is not None and not is_system_op(o.op_type):  # (constant folding makes literals)
            lines.append(f"{b['reason']}: {b['from']} -> {b['to']} {_verb(o.op_type)}, "
                         f"{_mib(int(b['bytes']))} ({o.name})")
    return lines


__all__ = ["LazyGlobalBlob", "LazyGlobalInterpreter", "is_lazy_global", "physical", "box",
           "interpreter_for", "global_tags", "output_global", "boxing_report",
           "placement_of_tag", "placement_str"]
