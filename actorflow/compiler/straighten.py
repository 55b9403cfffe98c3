"""Straightening: control edges that make backward leaves act early, so the memory plan can
reuse the bytes they read.

A backward leaf is a backward op none of whose data consumers is a backward op (a
weight-gradient matmul or a bias-gradient sum, read only by the update or an accumulation).
By the dependency graph alone it may act as late as the end of the backward pass, so every
register it reads lives that long and the memory plan (``compiler/memory.py``) can give their
bytes to no later register. Straightening gives each leaf a control edge to the next backward
op after it in the Job's topological order that is not a leaf, of the same stage and
placement and not a view op (a view folded into its readers has no task to wait): that op
now waits for the leaf, so the leaf's inputs die early.

Chaining (``chain``, with one compute lane): the memory plan may put register B over A only
when the dependency graph proves A's readers act before B's producer; ops on independent
branches (attention's gradient beside a weight gradient) are unordered by it, so their
registers may not share bytes even though one compute thread runs them one after another
anyway. ``chain`` gives each kernel op of a stage and placement a control edge from the one
before it in the Job's topological order, where the dependencies don't already order the two:
the kernels then act in that order and the memory plan knows it. View ops are left out (a
folded view has no task to order). With two compute lanes there is no chain (it would take
away the overlap lanes exist for).

Every edge goes forward in one topological order of the Job, which every rank computes alike,
so no edge closes a cycle, on one rank or across ranks; it is an ordinary dependency of the
actor runtime (the consumer waits for the other's register, which it only holds, never
reads). System, collective and transfer ops are never ends of an edge.
On by default (``CompileOptions.straighten``; ``ACTORFLOW_GRAPH_STRAIGHTEN=0`` turns it off);
a graph's ``config.enable_straighten_algorithm(mode)`` chooses for that graph whatever the
default (``job.train["straighten"]``, read by ``compile_job``).
On the GPT of ``benchmarks/graph_memory.py`` (4 layers, d128, T64, b16) the register memory
with generation goes from 0.95x of the memory without to 0.81x with the leaf edges and 0.69x
(35.2 against 51.2 MiB) with the chain too: 33 leaf edges and 35 chain edges; step times
measured alike with and without (docs/benchmarks.md).
"""
from __future__ import annotations

from actorflow.compiler import collective, transfer
from actorflow.job.job import Job, split_blob
from actorflow.job.schedule import stage_of
from actorflow.job.system_ops import system_op
from actorflow.ops import registry


def _plain(conf) -> bool:
    return (system_op(conf.op_type) is None and not collective.is_collective(conf.op_type)
            and not transfer.transfer_kind(conf.op_type))


def _where(conf, stages: dict):
    g = conf.tags.get("global")
    return (stages.get(conf.name, "micro"), None if g is None else str(g.get("placement")))


def _reaches(order: list, after: list = ()) -> dict:
    """op name -> bit set of the positions (in ``order``) of its ancestors, data and control
    (and the ``(earlier, later)`` pairs of ``after``)."""
    pos = {c.name: i for i, c in enumerate(order)}
    extra: dict = {}
    for earlier, later in after:
        extra.setdefault(later, []).append(earlier)
    anc: dict = {}
    for c in order:
        bits = 0
        for src in ([split_blob(b)[0] for b in c.inputs] + list(c.ctrl_inputs)
                    + extra.get(c.name, [])):
            j = pos.get(src)
            if j is not None:
                bits |= anc[src] | (1 << j)
        anc[c.name] = bits
    return anc


def chain(job: Job, after: list = ()) -> int:
    """Order every kernel op of one stage and placement in ``job`` as its topological order
    does (see the module docstring), adding a control edge from each to the next where the
    dependencies do not already order them; returns how many edges were added. ``after``:
    ``(earlier, later)`` op pairs the order must also respect (the compiler's edges from a
    view's readers to writes of its base, ``job/views.py``), so no edge contradicts them."""
    by_name = {c.name: c for c in job.ops}
    if after:  # the order of a copy holding those edges too
        ordered = job.copy()
        named = {c.name: c for c in ordered.ops}
        for earlier, later in after:
            if earlier not in named[later].ctrl_inputs:
                named[later].ctrl_inputs.append(earlier)
        order = [by_name[c.name] for c in ordered.topological_order()]
    else:
        order = job.topological_order()
    stages = stage_of(job) if int(job.train.get("accumulation_steps", 1)) > 1 else {}
    pos = {c.name: i for i, c in enumerate(order)}
    anc = _reaches(order, after)
    last: dict = {}
    added = 0
    for conf in order:
        if not _plain(conf) or not conf.inputs or registry.get(conf.op_type).view_fn:
            continue
        where = _where(conf, stages)
        prev = last.get(where)
        last[where] = conf.name
        if prev is None or anc[conf.name] >> pos[prev] & 1:
            continue
        by_name[conf.name].ctrl_inputs.append(prev)
        added += 1
        # conf now also follows prev's ancestors; later ops reach them through conf
        anc[conf.name] |= anc[prev] | (1 << pos[prev])
        for later in order[pos[conf.name] + 1:]:
            if anc[later.name] >> pos[conf.name] & 1:
                anc[later.name] |= anc[conf.name]
    return added


def straighten(job: Job) -> int:
    """Add the control edges of the module docstring to ``job`` in place; returns how many."""
    order = job.topological_order()
    stages = stage_of(job) if int(job.train.get("accumulation_steps", 1)) > 1 else {}
    consumers: dict = {}
    for conf in order:
        for blob in conf.inputs:
            consumers.setdefault(split_blob(blob)[0], []).append(conf)
    by_name = {c.name: c for c in order}

    def backward(conf) -> bool:
        return conf.tags.get("phase") == "backward" and _plain(conf) and bool(conf.inputs)

    leaf = {c.name for c in order if backward(c)
            and not any(backward(u) for u in consumers.get(c.name, ()))}
    added = 0
    for i, conf in enumerate(order):
        if conf.name not in leaf:
            continue
        where = _where(conf, stages)
        for nxt in order[i + 1:]:
            # not a view: a folded view has no task, and its control inputs would be lost
            if (backward(nxt) and nxt.name not in leaf and _where(nxt, stages) == where
                    and not registry.get(nxt.op_type).view_fn):
                if conf.name not in nxt.ctrl_inputs and not any(
                        split_blob(b)[0] == conf.name for b in nxt.inputs):
                    by_name[nxt.name].ctrl_inputs.append(conf.name)
                    added += 1
                break
    return added


__all__ = ["straighten", "chain"]
