"""ZeRO in the distributed nn.Graph (``graph.config.enable_zero(True, stage=1|2|3)``).

The optimizer pass emits each update through the optimizer's own ``_update``; with ZeRO on,
``zero_updates`` reroutes ``_apply_update`` for a broadcast parameter on a 1-D placement
(dim 0 at least one row per rank) so that:

- its optimizer state of the parameter's shape is split(0) (each rank keeps its rows: the
  eager state tensor in ``optimizer.state`` is replaced by its split(0) version, so the state
  variables of the Job, and the memory plan's ``state_bytes``, shrink by the rank count);
- the update runs on the shard: the parameter B -> S(0) (a local slice), the gradient
  P -> B -> S(0) (stage 1: all-reduce, then slice) or P -> S(0) (stage 2: reduce-scatter);
- the updated shard is all-gathered (S(0) -> B) and copied into the broadcast parameter.

Every boxing is the ordinary one (``LazyGlobalInterpreter.box_to``) and the update op's
signature is chosen by ``choose_signature`` as for any op: its inputs arrive split, so it
stays split. Other parameters (split, n-d, 0-d, shards under ``shard_min_size`` elements) and
updates that are not elementwise (LAMB's trust ratio reads the whole parameter) update as
without ZeRO.

Stage 3 also shards the parameters between steps. Before the first trace, ``shard_parameters``
re-lays out every eligible parameter of the graph's optimizers (and its state) as split(0), in
place: the same tensor object - so modules, optimizers and ``state_dict()`` keep it - whose
handle now holds only this rank's rows. The Job's variable is that split(0) shard; where the
trace first reads it (``LazyInterpreter.variable``) it is all-gathered S(0) -> B
(``dispatch.lazy_global.gather_for_use``, reason ``<param> zero-3 gather``) and that gathered
value serves the forward pass and the backward pass (it is kept, not gathered twice; the memory
plan frees it after its last reader). The gather is recorded for autograd, so the gradient of
the shard is the broadcast value's partial-sum gradient reduce-scattered (P -> S(0)); the
update then runs on the shard in place (an elementwise update's split signature, as for any
split parameter) with no gather after it. Between calls ``param.numpy()``, ``state_dict()``
values and eager use see the full logical values (a global tensor's values are gathered when
read) while each rank holds 1/n of the bytes; ``param.sbp`` shows split(0). Ineligible
parameters behave as stage 2.
"""
from __future__ import annotations

import contextlib
import weakref

from actorflow.dispatch.global_tensor import GlobalBlob, wrap
from actorflow.framework.sbp_parallel import nd_attrs, shard_range
from actorflow.job.job import split_blob
from actorflow.tensor import DeviceMetaBlob, Tensor, meta_tensor

_B, _S0 = (("B",),), (("S", 0),)


def zero_eligible(p: Tensor, min_size: int = 1) -> bool:
    """Whether ZeRO shards parameter ``p``'s update: an eager broadcast parameter on a 1-D
    placement of several ranks with at least one row per rank, and shards of at least
    ``min_size`` elements."""
    h = p._h
    if type(h) is not GlobalBlob or h.local is None:
        return False
    n = len(h.placement.flat_ranks)
    return (len(h.placement.hierarchy) == 1 and n > 1 and nd_attrs(h.sbp) == _B
            and len(p._shape) >= 1 and p._shape[0] >= n and p.numel() // n >= min_size)


def _split_state(t: Tensor) -> Tensor:
    """Eager broadcast state ``t`` as split(0): this rank keeps its rows of the full value."""
    h = t._h
    pl = h.placement
    ranks = list(pl.flat_ranks)
    from actorflow.process.world import world

    start, stop = shard_range(t._shape[0], len(ranks), ranks.index(world().rank))
    from actorflow.framework.sbp_parallel import SbpParallel

    if type(h.local._h) is DeviceMetaBlob:  # no values (simulate_rank, a meta placement)
        local = meta_tensor((stop - start,) + tuple(t._shape[1:]), t.dtype)
    else:
        local = Tensor._wrap(h.local.numpy()[start:stop].copy(), t.dtype)
    return wrap(local, pl, (SbpParallel.from_attr(("S", 0)),),
                tuple(t._shape), t.dtype)


def _shard_states(opt, param: Tensor, states: list) -> list:
    """``states`` with each broadcast tensor of ``param``'s shape made split(0), in place in
    ``opt.state[param]`` too."""
    entry = opt.state.get(param, {})
    out = []
    for s in states:
        h = s._h
        if (type(h) is GlobalBlob and nd_attrs(h.sbp) == _B
                and tuple(s._shape) == tuple(param._shape)):
            new = _split_state(s)
            for k, v in list(entry.items()):
                if v is s:
                    entry[k] = new
            s = new
        out.append(s)
    return out


@contextlib.contextmanager
def zero_updates(b, opt, stage: int, min_size: int = 1):
    """While active, ``opt._apply_update`` on an eligible parameter runs the ZeRO update
    (see the module docstring) through tracer ``b``."""
    from actorflow.dispatch import apply
    from actorflow.dispatch.lazy_global import interpreter_for
    from actorflow.ops import registry

    interp = interpreter_for(b)
    assign = registry.get("assign")
    plain = opt._apply_update

    def apply_update(op, inputs: list, attrs: dict) -> None:
        param = inputs[0]
        if not op.elementwise or not zero_eligible(param, min_size):
            # (an update reading the whole parameter, as LAMB's trust ratio, stays broadcast)
            return plain(op, inputs, attrs)
        name = interp._var_name(param)
        states = _shard_states(opt, param, list(inputs[3:]))
        p_full = b.variable(param)
        p_s = interp.box_to(p_full, _S0, f"{name} zero shard")
        # (a gradient traced without a global producer counts as broadcast, as in apply)
        g = interp.as_global(op, inputs[1], param._h.placement)
        if stage == 1:
            g = interp.box_to(g, _B, f"{name} grad")
        g = interp.box_to(g, _S0, f"{name} grad")
        apply(op, [p_s, g, inputs[2], *states], attrs)
        gathered = interp.box_to(p_s, _B, f"{name} zero gather")
        apply(assign, [param, gathered], {})

    opt._apply_update = apply_update
    try:
        yield
    finally:
        del opt._apply_update


def _update_is_elementwise(opt, j: int, p: Tensor, lr: Tensor) -> bool:
    """Whether ``opt``'s update of ``p`` in param group ``j`` issues only elementwise ops (a
    dry run of ``_update`` that records the ops instead of issuing them; it makes the state)."""
    seen = []
    group = opt.param_groups[j]
    opt._apply_update = lambda op, inputs, attrs: seen.append(op)
    try:
        opt._update(p, p, lr, opt._attrs(group), group)
    finally:
        del opt._apply_update
    return bool(seen) and all(op.elementwise for op in seen)


# id -> parameter re-laid out split(0) by stage 3 (any graph's; weak: a model may go away)
_SHARDED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


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
                if _SHARDED.get(id(p)) is p:
                    done[id(p)] = p
                    continue
                if (names.get(id(p), (None, None, None))[2] is not p or not p.requires_grad
                        or not zero_eligible(p, min_size)
                        or not _update_is_elementwise(opt, j, p, entry.lr_tensors[j])):
                    continue
                _shard_states(opt, p, list(opt.state.get(p, {}).values()))
                p._h = _split_state(p)._h
                p._vc[0] += 1
                done[id(p)] = _SHARDED[id(p)] = p
    return done


def label_gradients(tracer, grads: dict) -> None:
    """Stage 3: name the boxing that makes each sharded parameter's gradient (the gather's
    backward, a P -> S(0) reduce-scatter) after the parameter in its ``boxing`` tag
    (``<param> zero-3 grad``), for ``graph.debug(1)``'s report."""
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
