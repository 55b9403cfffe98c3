"""fuse_elementwise: chains of elementwise ops become one ``fused_elementwise`` op.

Walking the Job in order, an elementwise op (registry trait ``elementwise``; one output, not
random, no in-place write) joins the group of the op producing one of its inputs when both
have the same tags and no op outside the group that depends on the group comes before it;
otherwise it starts a group. A group of two or more ops becomes one program op at the place of
its last member; a member result other ops still read is an extra output (the forward values a
backward op needs stay available). The fused op runs the members' own kernels in order, so the
numbers are the same bits.

Cost: one walk over the Job with a heap per group, O(n log n) in the number of ops and edges.
"""
from __future__ import annotations

import heapq

from actorflow.job.job import Job, split_blob
from actorflow.passes.fuse_common import JobIndex, Namer, build_program, plain_op, rewrite, tags_key


class _Group:
    __slots__ = ("members", "tags", "deps", "names")

    def __init__(self, conf, tags, deps):
        self.members = [conf]
        self.names = {conf.name}
        self.tags = tags
        self.deps = deps  # min-heap: positions of ops outside the group depending on it


def fuse_elementwise(job: Job, max_steps: int = 0) -> Job:
    """The pass (see the module docstring); ``max_steps`` > 0 caps the ops per fused op."""
    index = JobIndex(job)
    group_of: dict = {}
    groups = []
    for q, o in enumerate(job.ops):
        op = plain_op(o)
        if op is None or not op.elementwise:
            continue
        tags = tags_key(o)
        chosen = None
        for b in o.inputs:
            g = group_of.get(split_blob(b)[0])
            if g is None or g.tags != tags or g is chosen:
                continue
            if max_steps and len(g.members) >= max_steps:
                continue
            heap = g.deps
            while heap and heap[0] == q:  # this op itself depends on the group
                heapq.heappop(heap)
            if not heap or heap[0] > q:
                chosen = g
                break
        own = [index.pos[d] for d in index.dependents.get(o.name, ())]
        if chosen is None:
            heapq.heapify(own)
            g = _Group(o, tags, own)
            groups.append(g)
        else:
            g = chosen
            g.members.append(o)
            g.names.add(o.name)
            for p in own:
                heapq.heappush(g.deps, p)
        group_of[o.name] = g
    namer = Namer(job)
    replacements = []
    for g in groups:
        if len(g.members) < 2:
            continue
        last = g.members[-1]
        conf, bmap = build_program(index, g.members, "fused_elementwise",
                                   namer(last.scope, "fused_elementwise"))
        replacements.append(([m.name for m in g.members], conf, bmap))
    return rewrite(job, replacements)


def make_fuse_elementwise_pass(ctx):
    """The fuse_elementwise pass (on unless ``config.disable_pass("fuse_elementwise")``)."""
    return fuse_elementwise
