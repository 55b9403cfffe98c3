"""Which view ops of a Job run as aliases in the Plan (issue #17).

An op with a ``view`` function (reshape, transpose, expand, narrow, split, basic getitem,
diagonal) runs in the reference executor as a copying kernel. On the actor runtime it may
instead publish a strided NumPy view of its input register (a ``view`` task, see
``runtime/actors.ViewActor``): no kernel, no memory of its own. That gives the same values only
when no in-place write can tell the two apart, which this module proves from the Job:

* the view's outputs are never written in place (a write through an alias would reach its
  base, which a copy keeps unchanged), and it is deterministic and single-input;
* a reshape must be expressible as a view of its input's strides (followed from the contiguous
  register at the root of the alias chain); otherwise it stays a copy, as in eager mode;
* for every op W that writes the root blob of an alias chain in place (an optimizer update of a
  parameter, an ``assign``), the chain's first view ("head", which would have copied the
  root's values when it ran) is either an ancestor of W - then every task reading through the
  chain must be ordered before W: it gets a control edge to W, unless it already depends on W
  or is W (then the chain stays a copy) - or a descendant of W (it reads the written values in
  both). A head unordered with W stays a copy.

``alias_views(job, order)`` returns the names of the ops to alias and the extra control edges
``(reader op, writer op)`` the compiler adds to the Plan. ``foldable_views`` picks the aliased
views that need no task at all: every reader is a kernel task (or another folded view), no op
waits for them through a control edge and they wait for none, so each reader applies the view
steps to the base register it consumes directly (``TaskProto.input_views``) - one act and two
messages fewer per view, and the base register is acked only once the reader has run.
"""
from __future__ import annotations

import numpy as np

from actorflow.job.job import Job, split_blob
from actorflow.job.system_ops import is_system_op, system_op
from actorflow.ops import registry


def _op(conf):
    return None if is_system_op(conf.op_type) else registry.get(conf.op_type)


def stride_probe(shape: tuple) -> np.ndarray:
    """A C-contiguous array of ``shape`` with 1-byte items over a 1-byte buffer: only its
    strides are looked at (never its values), so view functions can be tried on it for free."""
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(int(s), 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), tuple(shape),
                                           tuple(reversed(strides)), writeable=False)


def aliasing_views(op, arrays: list, attrs: dict) -> list | None:
    """The strided arrays view op ``op`` makes of ``arrays[0]`` (its ``view`` function; the
    other arrays are its further inputs), or None where eager mode makes a copy instead: a
    reshape ``arrays[0]``'s strides can't express. The one answer to "view or copy" for eager
    views, their global positions, a trace's views and the Plan's aliases (tried on a
    ``stride_probe`` where only the layout is known)."""
    a = arrays[0]
    try:
        views = op.view_fn(arrays, attrs)
    except Exception:  # noqa: BLE001 - not expressible as a view (or any surprise): a copy
        return None
    if a.size and not a.flags.c_contiguous and \
            not all(v.size == 0 or np.may_share_memory(v, a) for v in views):
        return None  # (a view function that copied: NumPy < 2.1's reshape)
    return list(views)


def _ancestors(order: list) -> dict:
    """op name -> bit set of the positions (in ``order``) of its transitive producers, data and
    control."""
    pos = {o.name: i for i, o in enumerate(order)}
    anc: dict = {}
    for o in order:
        bits = 0
        for b in o.inputs:
            p = split_blob(b)[0]
            bits |= anc[p] | (1 << pos[p])
        for p in o.ctrl_inputs:
            bits |= anc[p] | (1 << pos[p])
        anc[o.name] = bits
    return anc


def alias_views(job: Job, order: list) -> tuple:
    """``(names of view ops that alias their input, [(reader, writer)] control edges)``; see the
    module docstring. ``order`` is the Job's topological order."""
    pos = {o.name: i for i, o in enumerate(order)}
    written: dict = {}   # blob -> ops writing it in place
    readers: dict = {}   # blob -> ops reading it
    for o in order:
        op = _op(o)
        for b in o.inputs:
            readers.setdefault(b, []).append(o)
        if op is not None:
            for i in op.mutated_inputs(len(o.inputs), o.attrs):
                if i < len(o.inputs):
                    written.setdefault(o.inputs[i], []).append(o)
    # candidates, with their probes (strides follow the chain from a contiguous root)
    probes: dict = {}
    by_name = {o.name: o for o in order}
    descs = {o.out(i): d for o in order for i, d in enumerate(o.outputs)}
    head: dict = {}      # aliased op name -> (root blob, head op name)
    chosen: dict = {}
    for o in order:
        op = _op(o)
        if (op is None or op.view_fn is None or op.random or len(o.inputs) != 1
                or op.mutated_inputs(1, o.attrs) or any(o.out(i) in written
                                                        for i in range(len(o.outputs)))):
            continue
        src = o.inputs[0]
        probe = probes.get(src)
        if probe is None:
            probe = stride_probe(tuple(descs[src].shape))
        views = aliasing_views(op, [probe], o.attrs)
        if views is None:
            continue
        for i, v in enumerate(views):
            probes[o.out(i)] = v
        chosen[o.name] = o
    _rehead(chosen, head, by_name)
    anc = _ancestors(order)
    ctrl: set = set()
    changed = True
    while changed:  # dropping a chain head re-roots its chain: check again
        changed = False
        ctrl = set()
        by_head: dict = {}
        for name in chosen:
            by_head.setdefault(head[name], []).append(name)
        for (root, h), members in by_head.items():
            edges = _check_chain(root, h, members, chosen, readers, written, anc, pos)
            if edges is None:
                del chosen[h]  # a copy: its chain's other members now start at its output
                _rehead(chosen, head, by_name)
                changed = True
                break
            ctrl |= edges
    return set(chosen), sorted(ctrl)


def _check_chain(root, h, members, chosen, readers, written, anc, pos):
    """The control edges the chain headed by ``h`` needs, or None when it must copy."""
    writers = written.get(root, ())
    if not writers:
        return set()
    users = set()
    for name in members:
        users.add(name)
        for i in range(len(chosen[name].outputs)):
            for r in readers.get(chosen[name].out(i), ()):
                users.add(r.name)
    edges = set()
    for w in writers:
        wbits = anc[w.name]
        if (wbits >> pos[h]) & 1:          # the head acts before the write
            for u in users:
                if u == w.name or (anc[u] >> pos[w.name]) & 1:
                    return None            # a reader after the write would see new values
                if not (wbits >> pos[u]) & 1:
                    edges.add((u, w.name))
        elif not (anc[h] >> pos[w.name]) & 1:
            return None                    # unordered with the write
    return edges


def _rehead(chosen: dict, head: dict, by_name: dict) -> None:
    """Per aliased op, (root blob, head op) of its chain. The root is the memory it reads
    through: the input of the chain's first view, followed through the system ops whose output
    aliases their input (gradient accumulation's repeat/unpack of a variable)."""
    head.clear()
    for name, o in chosen.items():  # insertion order is topological
        src = o.inputs[0]
        src_op = split_blob(src)[0]
        if src_op in chosen:
            head[name] = head[src_op]
            continue
        conf = by_name[src_op]
        row = system_op(conf.op_type)
        while row is not None and row.memory == "alias" and conf.inputs:
            src = conf.inputs[0]
            conf = by_name[split_blob(src)[0]]
            row = system_op(conf.op_type)
        head[name] = (src, name)


def foldable_views(order: list, aliased: set) -> set:
    """The aliased view ops to fold into their readers (see the module docstring)."""
    readers: dict = {}
    waited: set = set()
    for o in order:
        for b in o.inputs:
            readers.setdefault(split_blob(b)[0], []).append(o)
        waited.update(o.ctrl_inputs)
    folded: set = set()
    for o in reversed(order):
        # a view that waits for ops (control inputs) keeps its task: folded, the wait would
        # be lost; one that others wait for keeps it too (they need a task to wait for)
        if o.name not in aliased or o.name in waited or o.ctrl_inputs:
            continue
        rs = readers.get(o.name, ())
        if rs and all(r.name in folded or (r.name not in aliased and not is_system_op(r.op_type))
                      for r in rs):
            folded.add(o.name)
    return folded


__all__ = ["alias_views", "foldable_views", "aliasing_views", "stride_probe"]
