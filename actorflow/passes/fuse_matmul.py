"""Fusions around matrix products.

* ``fuse_matmul_bias_act``: a product (registry trait ``bias_act_epilogue``: matmul, linear)
  followed by a bias ``add`` (a 1-d tensor over the last dim; only when the product has no bias
  of its own, see ``bias_input``) and / or an activation (trait ``activation``) becomes one
  ``fused_matmul_bias_act`` op. The product is computed into the output, the bias added and the
  activation applied in place, with the registered kernels, so the numbers are the same bits.
  A pre-activation value another op still reads (gelu's backward reads its input) is an extra
  output.
* ``fuse_add_to_output`` (``config.allow_fuse_add_to_output()``): an ``add`` one of whose
  operands is the result of an op with the trait ``add_to_output`` (matmul, linear,
  convolutions), or of a ``fused_matmul_bias_act`` without activation, read by nothing else
  becomes one ``fused_add_to_output`` op: the product is written to the output and the other
  operand added in place (the add must not broadcast the product to a larger shape).

Both walk the Job once; each candidate looks at a bounded neighbourhood, so cost is linear.
"""
from __future__ import annotations

from actorflow.job.job import Job, OpConf, split_blob
from actorflow.ops import registry
from actorflow.ops.fused import program_attrs
from actorflow.passes.fuse_common import (JobIndex, Namer, build_program, deps_after, plain_op,
                                          rewrite, tags_key)

# the op the patterns below fold in (a bias, a residual) and put into the programs they build
_ADD = "add"


def _next(index: JobIndex, cur, tags: str, taken: set):
    """The ops reading ``cur``'s output that could extend a group (same tags, not taken)."""
    for r in index.readers(cur.out(0)):
        n = index.by_name[r]
        if n.name not in taken and tags_key(n) == tags:
            yield n


def _is_add(conf) -> bool:
    return conf.op_type == _ADD and plain_op(conf) is not None


def _bias_add(index, cur, n) -> bool:
    if not _is_add(n) or n.inputs.count(cur.out(0)) != 1:
        return False
    other = n.inputs[1] if n.inputs[0] == cur.out(0) else n.inputs[0]
    b = index.producer(other).outputs[split_blob(other)[1]]
    out = cur.outputs[0]
    return (len(b.shape) == 1 and len(out.shape) >= 1 and b.shape[0] == out.shape[-1]
            and b.dtype is out.dtype and n.outputs[0] == out)


def _activation(cur, n) -> bool:
    op = plain_op(n)
    return (op is not None and op.activation and n.inputs == [cur.out(0)]
            and n.outputs[0] == cur.outputs[0])


def fuse_matmul_bias_act(job: Job) -> Job:
    """The fuse_matmul_bias_act pass (see the module docstring)."""
    index = JobIndex(job)
    namer = Namer(job)
    taken: set = set()
    replacements = []
    for m in job.ops:
        if m.name in taken:
            continue
        op = plain_op(m)
        if op is None or not op.bias_act_epilogue:
            continue
        tags = tags_key(m)
        members = [m]
        cur = m
        if op.bias_input is None or len(m.inputs) <= op.bias_input:  # no bias of its own
            for n in _next(index, cur, tags, taken):
                if _bias_add(index, cur, n):
                    members.append(n)
                    cur = n
                    break
        for n in _next(index, cur, tags, taken):
            if _activation(cur, n):
                members.append(n)
                break
        while len(members) >= 2 and not deps_after(index, members, index.pos[members[-1].name]):
            members.pop()
        if len(members) < 2:
            continue
        taken.update(x.name for x in members)
        conf, bmap = build_program(index, members, "fused_matmul_bias_act",
                                   namer(members[-1].scope, "fused_matmul_bias_act"))
        replacements.append(([x.name for x in members], conf, bmap))
    return rewrite(job, replacements)


def _takes_add(p) -> bool:
    """``p`` is a product an add can be folded into: a plain op with the ``add_to_output``
    trait, or a fused matmul + bias without activation."""
    op = plain_op(p)
    if op is not None and op.add_to_output:
        return True
    return (p.op_type == "fused_matmul_bias_act"
            and not registry.get(p.attrs["ops"][-1]).activation)


def fuse_add_to_output(job: Job) -> Job:
    """The fuse_add_to_output pass (see the module docstring)."""
    index = JobIndex(job)
    namer = Namer(job)
    taken: set = set()
    replacements = []
    for a in job.ops:
        if a.name in taken or not _is_add(a) or len(a.inputs) != 2:
            continue
        if a.inputs[0] == a.inputs[1]:
            continue
        for i in (0, 1):
            p = index.producer(a.inputs[i])
            if p.name in taken or not _takes_add(p) or tags_key(p) != tags_key(a):
                continue
            if a.inputs[i] != p.out(0) or index.readers(p.out(0)) != [a.name]:
                continue
            if a.outputs[0] != p.outputs[0]:
                continue  # the add broadcasts the product or changes its dtype
            if not deps_after(index, [p, a], index.pos[a.name]):
                continue
            name = namer(a.scope, "fused_add_to_output")
            conf = _extend(index, p, a, i, name) if p.op_type == "fused_matmul_bias_act" \
                else build_program(index, [p, a], "fused_add_to_output", name)[0]
            bmap = {a.out(0): conf.out(0)}
            if p.op_type == "fused_matmul_bias_act":
                bmap.update({p.out(j): conf.out(j) for j in range(1, len(p.outputs))})
            taken.update((p.name, a.name))
            replacements.append(([p.name, a.name], conf, bmap))
            break
    return rewrite(job, replacements)


def _extend(index: JobIndex, p, a, i: int, name: str):
    """A ``fused_add_to_output`` op running ``p``'s program and then ``a`` (which reads p's
    output 0 as operand ``i``); p's extra outputs keep their numbers."""
    at = p.attrs
    inputs = list(p.inputs)
    other = a.inputs[1 - i]
    if other in inputs:
        ref_other = inputs.index(other)
    else:
        inputs.append(other)
        ref_other = len(inputs) - 1
    n_old, n_new = len(p.inputs), len(inputs)
    args = [[r if r < n_old else r + (n_new - n_old) for r in refs] for refs in at["args"]]
    k = len(at["ops"])
    last_ref = n_new + k - 1
    args.append([last_ref, ref_other] if i == 0 else [ref_other, last_ref])
    exports = [k] + list(at["exports"][1:])
    attrs = program_attrs(
        list(at["ops"]) + [_ADD], list(at["op_attrs"]) + [a.attrs], args,
        list(at["shapes"]) + [a.outputs[0].shape], list(at["dtypes"]) + [a.outputs[0].dtype],
        exports, list(at["parts"]) + [a.name])
    return OpConf(name, "fused_add_to_output", inputs, attrs, [a.outputs[0]] + p.outputs[1:],
                  a.scope, [], dict(a.tags))


def make_fuse_matmul_bias_act_pass(ctx):
    """The fuse_matmul_bias_act pass (on unless disabled)."""
    return fuse_matmul_bias_act


def make_fuse_add_to_output_pass(ctx):
    """The fuse_add_to_output pass, when ``config.allow_fuse_add_to_output()`` is on."""
    return fuse_add_to_output if ctx.config.fuse_add_to_output else None
