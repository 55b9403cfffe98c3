"""ZeRO's side in ``nn.Graph``'s tracing (``graph.config.enable_zero(True, stage=...)``; the
design is in ``actorflow.nn.graph.zero_updates``, whose ``zero_updates`` reroutes the optimizer
emission's updates): stage 3's sharding of a graph's parameters before its first trace
(``shard_parameters``), the names of their gradients' boxing (``label_gradients``), and this
rank's bytes of parameters and optimizer state in the latest Plan."""
from __future__ import annotations

from actorflow.job.job import split_blob
from actorflow.nn.graph.zero_updates import (SHARDED, shard_states, split_state,
                                             update_is_elementwise, zero_eligible)
from actorflow.tensor import Tensor


def shard_parameters(graph) -> dict:
    """Stage 3: make every eligible parameter of ``graph``'s optimizers split(0) in place (its
    handle keeps this rank's rows; see the module docstring), and its optimizer state of its
    shape too. Returns ``{id(param): param}`` of its sharded parameters (those an earlier call,
    of this graph or another stage-3 graph over the same model, sharded included)."""
    done = {}
    names = graph._state_names()
    min_size = graph.config.zero_shard_min_size
    for entry in graph._optimizers:
        opt = entry.optimizer
        for j, group in enumerate(opt.param_groups):
            for p in group["params"]:
                if SHARDED.get(id(p)) is p:
                    done[id(p)] = p
                    continue
                if (names.get(id(p), (None, None, None))[2] is not p or not p.requires_grad
                        or not zero_eligible(p, min_size)
                        or not update_is_elementwise(opt, j, p, entry.lr_tensors[j])):
                    continue
                shard_states(opt, p, list(opt.state.get(p, {}).values()))
                shard = split_state(p)._h
                shard.global_id = p._h.global_id  # the same tensor, re-laid out
                p._h = shard
                p._vc[0] += 1
                done[id(p)] = SHARDED[id(p)] = p
    return done


def label_gradients(tracer, grads: dict) -> None:
    """Stage 3 at ``shard_restore_level`` 2: name the boxing that makes each sharded
    parameter's gradient (the gather's backward, a P -> S(0) reduce-scatter) after the
    parameter in its ``boxing`` tag (``<param> zero-3 grad``), for ``graph.debug(1)``'s
    report. (At levels 0 and 1 the gradient is boxed where the update reads it, under that
    name: ``zero_updates``.)"""
    if tracer.shard_restore_level != 2:
        return
    for eager in tracer.sharded_params.values():
        blob = tracer._var_blob.get(id(eager))
        grad = grads.get(split_blob(blob)[0]) if blob is not None else None
        if grad is None:
            continue
        tag = tracer.builder.producer(grad).tags.get("boxing")
        if tag is not None:
            tag["reason"] = f"{split_blob(blob)[0]} zero-3 grad"


def parameter_bytes(graph) -> int:
    """This rank's bytes of the graph's parameters in the Plan of its latest compiled call: the
    registers of the variable tasks bound to a parameter of its modules (with ZeRO stage 3 the
    eligible ones are split(0): the figure shrinks by about the rank count)."""
    ids = {id(t) for _name, kind, t in graph._state_names().values() if kind == "parameter"}
    return _variable_bytes(graph, ids, "parameter_bytes")


def _variable_bytes(graph, ids: set, what: str) -> int:
    if not graph._cache:
        raise RuntimeError(f"{what}: the graph has not been called yet")
    compiled = next(reversed(graph._cache.values()))
    plan = compiled.plan
    total = 0
    for task in plan.tasks:
        bound = compiled.bindings.get(task.op_name)
        if task.op_type == "variable" and bound is not None and id(bound) in ids:
            total += sum(plan.regst_descs[i].nbytes() for i in task.produced_regsts.values())
    return total


def optimizer_state_bytes(graph) -> int:
    """This rank's bytes of optimizer state in the Plan of ``graph``'s latest compiled call:
    the registers of the variable tasks bound to a tensor in one of its optimizers' ``state``
    (with ZeRO those of broadcast parameters are split(0): the figure shrinks by the rank
    count)."""
    ids = set()
    for entry in graph._optimizers:
        for st in entry.optimizer.state.values():
            ids.update(id(v) for v in st.values() if isinstance(v, Tensor))
    return _variable_bytes(graph, ids, "optimizer_state_bytes")
