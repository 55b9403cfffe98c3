"""What the fusion passes share: an index of a Job (positions, consumers, dependents), building
a program op from a group of ops, and rewriting a Job with groups replaced by fused ops.

A group of ops becomes one op placed where its *last* member was. That is valid when every
op that depends on a member (reads one of its outputs or has it as a control input) and is not
itself a member comes after that place; ``deps_after`` checks it. Every input of a member is
produced before the member, hence before the fused op. Control inputs of the members move to
the fused op, and control edges on a member move to the fused op.
"""
from __future__ import annotations

import json

from actorflow.job import attrs as attr_codec
from actorflow.job.job import Job, OpConf, split_blob
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.ops.fused import program_attrs


class JobIndex:
    """Positions, consumers and dependents of the ops of a Job (built once, in linear time)."""

    def __init__(self, job: Job):
        self.job = job
        self.ops = job.ops
        self.by_name = {o.name: o for o in job.ops}
        self.pos = {o.name: i for i, o in enumerate(job.ops)}
        self.consumers: dict = {}   # blob -> names of the ops reading it (once per read)
        self.dependents: dict = {}  # op name -> names of ops reading its outputs or ctrl on it
        for o in job.ops:
            for b in o.inputs:
                self.consumers.setdefault(b, []).append(o.name)
                self.dependents.setdefault(split_blob(b)[0], []).append(o.name)
            for c in o.ctrl_inputs:
                self.dependents.setdefault(c, []).append(o.name)

    def producer(self, blob: str) -> OpConf:
        return self.by_name[split_blob(blob)[0]]

    def readers(self, blob: str) -> list:
        return self.consumers.get(blob, [])


def tags_key(conf: OpConf) -> str:
    """Ops fuse only with ops whose tags (phase, stage, checkpointing ...) are equal."""
    return repr(sorted(conf.tags.items()))


def attrs_key(attrs: dict) -> str:
    return json.dumps({k: attr_codec.encode(v) for k, v in sorted(attrs.items())},
                      sort_keys=True)


def plain_op(conf: OpConf) -> registry.Op | None:
    """The registry record of ``conf`` when it is a registered op with one output, no in-place
    writes and no randomness (what a program step may be), else None. The caller asks the
    record for the trait it needs (``elementwise``, ``activation`` ...)."""
    if conf.op_type in SYSTEM_OPS or len(conf.outputs) != 1:
        return None
    op = registry.get(conf.op_type)
    if op.random or op.mutated_inputs(len(conf.inputs), conf.attrs):
        return None
    return op


def deps_after(index: JobIndex, members: list, end: int) -> bool:
    """Every op depending on a member, other than the members, comes after position ``end``."""
    names = {m.name for m in members}
    for m in members:
        for d in index.dependents.get(m.name, ()):
            if d not in names and index.pos[d] <= end:
                return False
    return True


class Namer:
    """Unique op names for new ops of a Job."""

    def __init__(self, job: Job):
        self.used = {o.name for o in job.ops}
        self.count = len(job.ops)

    def __call__(self, scope: str, op_type: str) -> str:
        while True:
            base = f"{scope}-{op_type}-{self.count}" if scope else f"{op_type}-{self.count}"
            self.count += 1
            if base not in self.used:
                self.used.add(base)
                return base


def build_program(index: JobIndex, members: list, op_type: str, name: str) -> tuple:
    """The program op ``name`` of type ``op_type`` computing ``members`` (single-output ops in
    Job order). Returns ``(conf, blob_map)``; ``blob_map`` maps each member output other ops
    still read to the fused op's output that now carries it."""
    step_of = {m.name: s for s, m in enumerate(members)}
    ext: list = []
    ext_index: dict = {}
    raw_args = []
    for m in members:
        refs = []
        for b in m.inputs:
            pname, idx = split_blob(b)
            s = step_of.get(pname)
            if s is not None:
                refs.append(("s", s))
            else:
                if b not in ext_index:
                    ext_index[b] = len(ext)
                    ext.append(b)
                refs.append(("i", ext_index[b]))
        raw_args.append(refs)
    n_in = len(ext)
    args = [[i if kind == "i" else n_in + i for kind, i in refs] for refs in raw_args]
    k = len(members)
    exports = [k - 1]
    for s, m in enumerate(members[:-1]):
        if any(r not in step_of for r in index.readers(m.out(0))):
            exports.append(s)
    attrs = program_attrs(
        [m.op_type for m in members], [m.attrs for m in members], args,
        [m.outputs[0].shape for m in members], [m.outputs[0].dtype for m in members],
        exports, [m.name for m in members])
    last = members[-1]
    conf = OpConf(name, op_type, ext, attrs, [members[e].outputs[0] for e in exports],
                  last.scope, [], dict(last.tags))
    blob_map = {members[e].out(0): conf.out(j) for j, e in enumerate(exports)}
    return conf, blob_map


def rewrite(job: Job, replacements: list) -> Job:
    """``job`` with each ``(members, conf, blob_map)`` of ``replacements`` applied: the member
    ops (names, in Job order) give way to ``conf`` at the place of the last member; reads of
    member outputs follow ``blob_map``; control edges on members point at ``conf``."""
    if not replacements:
        return job
    rename: dict = {}
    at_last: dict = {}
    blob_map: dict = {}
    for members, conf, bmap in replacements:
        for n in members:
            rename[n] = conf.name
        at_last[members[-1]] = (members, conf)
        blob_map.update(bmap)
    by_name = job.op_map()
    out = []
    for o in job.ops:
        if o.name in rename:
            hit = at_last.get(o.name)
            if hit is None:
                continue
            members, conf = hit
            ctrl = list(conf.ctrl_inputs)
            for n in members:
                ctrl.extend(by_name[n].ctrl_inputs)
            conf.ctrl_inputs = ctrl
            o = conf
        o.inputs = [blob_map.get(b, b) for b in o.inputs]
        seen = set()
        ctrl = []
        for c in o.ctrl_inputs:
            c = rename.get(c, c)
            if c != o.name and c not in seen:
                seen.add(c)
                ctrl.append(c)
        o.ctrl_inputs = ctrl
        out.append(o)
    job.ops = out
    remap_train_blobs(job, blob_map)
    return job


def remap_train_blobs(job: Job, blob_map: dict) -> None:
    """Keep ``job.train["grads"]`` naming blobs of ``job``: follow ``blob_map``; drop entries
    whose blob no op produces any more."""
    grads = job.train.get("grads")
    if not grads:
        return
    n_out = {o.name: len(o.outputs) for o in job.ops}
    fixed = {}
    for var, blob in grads.items():
        blob = blob_map.get(blob, blob)
        name, idx = split_blob(blob)
        if idx < n_out.get(name, 0):
            fixed[var] = blob
    job.train["grads"] = fixed
