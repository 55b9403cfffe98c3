"""Fused ops: what the fusion passes put in a Job in place of several registered ops.

They add no math of their own (rule 1 of the architecture: one op, one definition). A fused op
runs the CPU kernels of the ops it replaces, in their original order, so a Job computes the same
bits with or without fusion.

* ``fused_elementwise``, ``fused_matmul_bias_act`` and ``fused_add_to_output`` run a *program*
  (attrs below): a list of steps, each a registered single-output op with its attrs, reading the
  fused op's inputs or earlier steps' results. Output 0 is the last step's result; further
  outputs expose intermediate results other ops of the Job still read (e.g. the pre-activation a
  backward op needs). A step whose input is an intermediate read by nobody else writes over that
  input when the op is alias-safe (the registry trait ``alias_safe``), so ``matmul -> add bias
  -> relu`` computes the matmul into the output and adds the bias and applies relu in place.
* ``multi_tensor_update`` applies one optimizer update op (same kind, same attrs, same learning
  rate) to many parameters: inputs ``[lr, p0, g0, state0..., p1, g1, state1..., ...]``. With
  attrs ``grad_scale`` (an op with the registry trait ``grad_scale``: ``clip_grad_by_norm``),
  ``grad_scale_attrs``, ``grad_scale_inputs`` (its inputs after the gradient: the total norm)
  and ``grad_scale_params`` (members), set by the ``fuse_clip_grad`` pass, it also takes that
  op's place on those members' gradients: its other inputs come last, and each of those
  gradients is scaled by that op's own kernel first.

Program attrs: ``ops`` (op names), ``op_attrs`` (their attrs), ``args`` (per step, indices into
``inputs + step results``), ``shapes`` / ``dtypes`` (each step's result), ``exports`` (the steps
that are outputs, in output order; the last step first) and ``parts`` (the names of the ops the
program replaced, for messages).

Fused ops have no gradient rule: the fusion passes run after autograd, and the functional API
does not offer them, so nothing differentiates through them.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.ops.parallel import parallel_for
from actorflow.ops.registry import Meta, OpError, fail, get, register


class _NoValue:
    """Storage handle of the value-less tensors program inference works on."""

    is_lazy = True

    def get(self):
        raise RuntimeError("a fused op's inference asked for a value")

    def describe(self) -> str:
        return "fused-op meta"


def _meta_tensor(shape, dtype):
    from actorflow.tensor import Tensor  # the tensor type sits above the op registry

    return Tensor._from_handle(_NoValue(), tuple(shape), dtype)


def program_attrs(ops: list, op_attrs: list, args: list, shapes: list, dtypes: list,
                  exports: list, parts: list) -> dict:
    """The attrs of a program op (see the module docstring)."""
    return {"ops": list(ops), "op_attrs": [dict(a) for a in op_attrs],
            "args": [list(a) for a in args], "shapes": [tuple(s) for s in shapes],
            "dtypes": list(dtypes), "exports": list(exports), "parts": list(parts)}


def _check_program(name: str, n_in: int, attrs: dict) -> None:
    ops = attrs["ops"]
    k = len(ops)
    if k == 0:
        fail(name, "the program has no steps")
    for key in ("op_attrs", "args", "shapes", "dtypes", "parts"):
        if len(attrs[key]) != k:
            fail(name, f"attr {key!r} has {len(attrs[key])} entries for {k} steps")
    exports = attrs["exports"]
    if not exports or exports[0] != k - 1:
        fail(name, f"exports must start with the last step ({k - 1}), got {exports}")
    if len(set(exports)) != len(exports) or not all(0 <= e < k for e in exports):
        fail(name, f"exports {exports} must be distinct step indices below {k}")
    for s, refs in enumerate(attrs["args"]):
        for r in refs:
            if not 0 <= r < n_in + s:
                fail(name, f"step {s} ({ops[s]}) reads value {r}, but only inputs 0..{n_in - 1} "
                     f"and steps before it exist")


def _program_infer(name: str):
    def infer(inputs, attrs):
        n_in = len(inputs)
        _check_program(name, n_in, attrs)
        vals = list(inputs)
        for s, op_name in enumerate(attrs["ops"]):
            op = get(op_name)
            metas = op.infer_fn([vals[r] for r in attrs["args"][s]], attrs["op_attrs"][s])
            if len(metas) != 1:
                fail(name, f"step {s} ({op_name}) has {len(metas)} outputs; program steps "
                     f"must have one")
            shape, dtype = tuple(metas[0][0]), metas[0][1]
            if shape != tuple(attrs["shapes"][s]) or dtype is not attrs["dtypes"][s]:
                fail(name, f"step {s} ({op_name}, was op {attrs['parts'][s]}) infers "
                     f"{shape}:{dtype.name} but the program records "
                     f"{tuple(attrs['shapes'][s])}:{attrs['dtypes'][s].name}")
            vals.append(_meta_tensor(shape, dtype))
        return [Meta(vals[n_in + e]._shape, vals[n_in + e].dtype) for e in attrs["exports"]]
    return infer


def buffer_plan(n_in: int, attrs: dict) -> list:
    """Which buffer each step writes: ``("o", j)`` output j, or ``("t", s)`` the scratch array
    of step s. A step's result shares the buffer of the step that reads it when that step is its
    only reader, is alias-safe, and the two have the same shape and dtype (then that step runs in
    place); exported steps write their output array."""
    ops, args = attrs["ops"], attrs["args"]
    shapes, dtypes = attrs["shapes"], attrs["dtypes"]
    k = len(ops)
    uses = [0] * k
    for refs in args:
        for r in refs:
            if r >= n_in:
                uses[r - n_in] += 1
    key: list = [None] * k
    for j, e in enumerate(attrs["exports"]):
        key[e] = ("o", j)
    for s in range(k - 1, -1, -1):
        if key[s] is None:
            key[s] = ("t", s)
        if not get(ops[s]).alias_safe:
            continue
        for r in args[s]:
            t = r - n_in
            if (t >= 0 and key[t] is None and uses[t] == 1
                    and tuple(shapes[t]) == tuple(shapes[s]) and dtypes[t] is dtypes[s]):
                key[t] = key[s]
                break
    return key


def _program_kernel(name: str):
    def kernel(ins, outs, attrs):
        n_in = len(ins)
        plan = buffer_plan(n_in, attrs)
        shapes, dtypes = attrs["shapes"], attrs["dtypes"]
        buffers: dict = {}
        vals = list(ins)
        for s, op_name in enumerate(attrs["ops"]):
            where = plan[s]
            buf = buffers.get(where)
            if buf is None:
                if where[0] == "o":
                    buf = outs[where[1]]
                else:
                    buf = np.empty(shapes[s], dtypes[s].np)
                buffers[where] = buf
            try:
                get(op_name).kernel_cpu([vals[r] for r in attrs["args"][s]], [buf],
                                        attrs["op_attrs"][s])
            except Exception as e:
                raise OpError(f"{name}: step {s} ({op_name}, was op {attrs['parts'][s]}) "
                              f"failed: {type(e).__name__}: {e}") from e
            vals.append(buf)
    return kernel


for _name, _doc in (
        ("fused_elementwise", "A chain of elementwise ops run as one op (fuse_elementwise)."),
        ("fused_matmul_bias_act", "matmul / linear, then a bias add and / or an activation, "
                                  "as one op (fuse_matmul_bias_act)."),
        ("fused_add_to_output", "matmul / linear / conv whose result is added to another "
                                "tensor, as one op (fuse_add_to_output).")):
    _op = register(_name, doc=_doc + " attrs: a program (see actorflow.ops.fused).")
    _op.infer(_program_infer(_name))
    _op.kernel("cpu")(_program_kernel(_name))


# ---- multi-tensor optimizer update -------------------------------------------------------------

_LR = 2  # the learning rate's position in an update op's inputs: param, grad, lr, state...


def scale_inputs(attrs: dict) -> int:
    """How many inputs after the parameter blocks a ``multi_tensor_update`` with ``attrs``
    has: those of its ``grad_scale`` op after the gradient (the total norm of a clip), or 0."""
    return int(attrs["grad_scale_inputs"]) if "grad_scale" in attrs else 0


def _multi_mutates(n_inputs: int, attrs: dict) -> tuple:
    arity = attrs["arity"]
    base = get(attrs["update"]).mutated_inputs(arity + 1, attrs["update_attrs"])
    # base layout: 0 param, 1 grad, 2 lr, 3.. state  ->  block layout: param, grad, state...
    local = [0 if j == 0 else j - 1 for j in base if j != 1 and j != _LR]
    n_blocks = n_inputs - scale_inputs(attrs)
    out = [1 + start + j for start in range(0, n_blocks - 1, arity) for j in local]
    # the NumPy kernel scales those gradients in place, as the grad_scale op did
    out += [1 + m * arity + 1 for m in attrs.get("grad_scale_params", ())]
    return tuple(sorted(out))


multi_tensor_update = register(
    "multi_tensor_update", mutates_fn=_multi_mutates,
    doc="One optimizer update op applied to many parameters: inputs [lr, p0, g0, state0..., "
        "p1, g1, state1..., ...]; attrs: update (the update op), update_attrs (its attrs), arity "
        "(inputs per parameter: param, grad, then the update op's inputs after lr). Writes "
        "every parameter and state in place, in order, with the update op's kernel. With "
        "grad_scale (an op with that trait, e.g. clip_grad_by_norm), grad_scale_attrs, "
        "grad_scale_inputs and grad_scale_params (member indices): that op's inputs after the "
        "gradient come last, and those members' gradients are scaled by it first.")


def _blocks(ins: list, attrs: dict) -> list:
    """The update op's own input list for each parameter."""
    arity = attrs["arity"]
    lr = ins[0]
    stop = len(ins) - scale_inputs(attrs)
    return [[ins[i], ins[i + 1], lr] + list(ins[i + 2:i + arity])  # lr at _LR
            for i in range(1, stop, arity)]


def _check_layout(n_inputs: int, attrs: dict) -> None:
    arity = attrs["arity"]
    extra = scale_inputs(attrs)
    n = n_inputs - extra
    if arity < 2 or n < 1 + arity or (n - 1) % arity:
        fail("multi_tensor_update", f"{n_inputs} inputs do not form lr plus blocks of {arity} "
             f"(param, grad, state...) plus {extra} inputs of its grad_scale op")
    members = (n - 1) // arity
    if any(not 0 <= m < members for m in attrs.get("grad_scale_params", ())):
        fail("multi_tensor_update", f"grad_scale_params {attrs['grad_scale_params']} name "
             f"parameters outside the {members} it updates")


def scale_gradients(ins: list, attrs: dict) -> None:
    """Scale the gradients ``attrs["grad_scale_params"]`` names in place with the
    ``grad_scale`` op's own kernel (on each gradient and the op's other inputs, last in
    ``ins``), so the bits are its."""
    kernel = get(attrs["grad_scale"]).kernel_cpu
    extra, arity = scale_inputs(attrs), attrs["arity"]
    rest = list(ins[len(ins) - extra:])
    for m in attrs["grad_scale_params"]:
        kernel([ins[1 + m * arity + 1]] + rest, [], attrs["grad_scale_attrs"])


@multi_tensor_update.infer
def _(inputs, attrs):
    _check_layout(len(inputs), attrs)
    for t in inputs[len(inputs) - scale_inputs(attrs):]:
        if math.prod(t._shape) != 1:
            fail("multi_tensor_update", f"the inputs of its grad_scale op {attrs['grad_scale']} "
                 f"after the gradient must have one element", t._shape)
    base = get(attrs["update"])
    for i, block in enumerate(_blocks(inputs, attrs)):
        try:
            metas = base.infer_fn(block, attrs["update_attrs"])
        except (OpError, ValueError, TypeError) as e:
            raise OpError(f"multi_tensor_update: parameter {i}: {e}") from None
        if metas:
            fail("multi_tensor_update", f"{attrs['update']} has outputs; only update ops that "
                 f"write in place and return nothing can be batched")
    return []


_MERGE_MAX = 1 << 13  # parameters up to this many elements are merged (per-call overhead wins)


@multi_tensor_update.kernel("cpu")
def _(ins, outs, attrs):
    op = get(attrs["update"])
    base_attrs = attrs["update_attrs"]
    if "grad_scale" in attrs:
        scale_gradients(ins, attrs)
    blocks = _blocks(ins, attrs)
    if op.elementwise and not base_attrs.get("skip_if"):  # no norms (LAMB has): merge params
        blocks = _run_merged(op, blocks, base_attrs)
        blocks = _run_sliced(op, blocks, base_attrs)
    for block in blocks:
        op.kernel_cpu(block, [], base_attrs)


_SLICE = 1 << 17  # elements per slice: a slice's param, grad and state stay in a core's L2


def _flat_call(block: list, part) -> list:
    """The update op's inputs for one call on flat pieces of ``block``'s arrays: lr as is, 0-d
    state as a copy (the call advances it; ``_write_scalars`` writes it back), every other
    input ``part(i)``."""
    return [a if i == _LR else np.array(a) if a.ndim == 0 else part(i)
            for i, a in enumerate(block)]


def _write_scalars(call: list, blocks: list, mutated: tuple) -> None:
    """Write the 0-d state ``call`` advanced (the step count) back into each of ``blocks``."""
    for i in mutated:
        if call[i].ndim == 0:
            for b in blocks:
                b[i][...] = call[i]


def _run_sliced(op, blocks: list, attrs: dict) -> list:
    """Run the large parameters of ``blocks`` as slices of ``_SLICE`` elements on the intra-op
    threads; returns the blocks still to run.

    An elementwise update computes each element from the same element of its inputs, so a slice
    gives the bits the whole array gives; slicing keeps the update's several passes (scale the
    buffer, add the gradient, step the parameter) within the cache, and the slices of all
    parameters share the cores. Blocks qualify when every array input is C-contiguous and has
    the parameter's shape, and the parameter and its 0-d state appear once; 0-d state (Adam's
    step count) is advanced on a copy per slice and written back once."""
    slices, rest, firsts = [], [], []
    counts: dict = {}
    for b in blocks:
        counts[id(b[0])] = counts.get(id(b[0]), 0) + 1
    mutated = op.mutated_inputs(len(blocks[0]), attrs) if blocks else ()
    scalars_seen: set = set()
    for b in blocks:
        p = b[0]
        scalar_ids = [id(b[i]) for i in mutated if b[i].ndim == 0]
        if (p.size <= _SLICE or counts[id(p)] > 1 or any(i in scalars_seen for i in scalar_ids)
                or any(a.ndim and (a.shape != p.shape or not a.flags.c_contiguous)
                       for i, a in enumerate(b) if i != _LR)):
            rest.append(b)
            continue
        scalars_seen.update(scalar_ids)
        for start in range(0, p.size, _SLICE):
            slices.append(_flat_call(b, lambda i, b=b, s=start: b[i].reshape(-1)[s:s + _SLICE]))
            if start == 0:
                firsts.append((slices[-1], b))
    if not slices:
        return rest
    if len(slices) == 1:
        op.kernel_cpu(slices[0], [], attrs)
    else:
        parallel_for(len(slices), lambda k: op.kernel_cpu(slices[k], [], attrs))
    for call, b in firsts:
        _write_scalars(call, [b], mutated)
    return rest


def _run_merged(op, blocks: list, attrs: dict) -> list:
    """Run the small parameters of ``blocks`` in groups (same dtypes, same scalar state such as
    the step count) as one flat call each; returns the blocks still to run."""
    groups: dict = {}
    rest = []
    seen: set = set()  # a parameter listed twice is updated twice, one after the other
    for b in blocks:
        if b[0].size > _MERGE_MAX or id(b[0]) in seen:
            rest.append(b)
            continue
        seen.add(id(b[0]))
        key = tuple((a.dtype, a.item() if a.ndim == 0 and i != _LR else None)
                    for i, a in enumerate(b))
        groups.setdefault(key, []).append(b)
    mutated = op.mutated_inputs(len(blocks[0]), attrs) if blocks else ()
    for group in groups.values():
        if len(group) == 1:
            rest.append(group[0])
            continue
        merged = _flat_call(group[0],
                            lambda i, g=group: np.concatenate([b[i].reshape(-1) for b in g]))
        op.kernel_cpu(merged, [], attrs)
        _write_scalars(merged, group, mutated)  # the same for the group (grouped by its value)
        for i in mutated:
            if merged[i].ndim == 0:
                continue
            start = 0
            for b in group:
                n = b[i].size
                np.copyto(b[i], merged[i][start:start + n].reshape(b[i].shape))
                start += n
    return rest


__all__ = ["program_attrs", "buffer_plan", "scale_inputs", "scale_gradients"]
