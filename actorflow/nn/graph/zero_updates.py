"""ZeRO in the distributed nn.Graph (``graph.config.enable_zero(True, stage=1|2|3)``).

The optimizer emission (``optimizer_emission``) emits each update through the optimizer's own
``_update``; with ZeRO on, ``zero_updates`` reroutes ``_apply_update`` for a broadcast
parameter on a 1-D placement (dim 0 at least one row per rank) so that:

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

Stage 3 also shards the parameters between steps. Before the first trace,
``actorflow.nn.graph.zero.shard_parameters`` re-lays out every eligible parameter of the
graph's optimizers (and its state) as split(0), in
place: the same tensor object - so modules, optimizers and ``state_dict()`` keep it - whose
handle now holds only this rank's rows (``SHARDED`` remembers them). The Job's variable is that
split(0) shard; where the trace first reads it (``LazyInterpreter.variable``) it reaches the
ops of build() as ``config.enable_zero(shard_restore_level=...)`` says
(``dispatch.lazy_global.restore_for_use``; OneFlow's levels):

- 2, hard restore: all-gathered S(0) -> B (reason ``<param> zero-3 gather``), the gather
  recorded for autograd as a boxing, so the gradient of the shard is the broadcast value's
  partial-sum gradient reduce-scattered (P -> S(0)) in backward, per micro-batch;
- 1, soft restore (the default): the same gather with an identity backward (OneFlow's
  ``hierarchical_parallel_cast`` with ``grad_mode="identity"``): the gradient reaches the
  shard as the consumers' backward made it (partial sums for a Linear of a split batch; with
  gradient accumulation they accumulate over the micro-batches) and ``zero_updates`` boxes it
  to S(0) where the update reads it (reason ``<param> zero-3 grad``, once per call);
- 0, no restore: nothing is gathered; the ops read the split(0) shard and their signature
  choice (``choose_signature``, as for any split tensor) decides - a Linear may keep the
  weight split and split its output's features, an Embedding or LayerNorm gathers it for
  itself - and their backward gives the gradient whatever sbp it computes in; ``zero_updates``
  boxes it to S(0) for the update as at level 1 (none when it is S(0) already).

Levels 1 and 2 keep the gathered value for the backward pass (one gather per step, not two;
the memory plan frees it after its last reader). The update then runs on the shard in place
(an elementwise update's split signature, as for any split parameter) with no gather after
it. Between calls ``param.numpy()``, ``state_dict()`` values and eager use see the full
logical values (a global tensor's values are gathered when read) while each rank holds 1/n
of the bytes; ``param.sbp`` shows split(0). Ineligible parameters behave as stage 2. (At
stages 1 and 2 the parameter is broadcast between steps, so the restore level has nothing
to restore.)
"""
from __future__ import annotations

import contextlib
import weakref

from actorflow.dispatch.global_tensor import GlobalBlob, wrap
from actorflow.framework.sbp_parallel import nd_attrs, shard_range, split
from actorflow.process.world import world
from actorflow.tensor import DeviceMetaBlob, Tensor, meta_tensor

_B, _S0 = (("B",),), (("S", 0),)

# id -> parameter re-laid out split(0) by stage 3 (``zero.shard_parameters``, any graph's;
# weak: a model may go away)
SHARDED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def is_stage3_shard(p: Tensor) -> bool:
    """Whether parameter ``p`` is one that ZeRO stage 3 re-laid out as split(0)."""
    return SHARDED.get(id(p)) is p


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


def split_state(t: Tensor) -> Tensor:
    """Eager broadcast state ``t`` as split(0): this rank keeps its rows of the full value."""
    h = t._h
    pl = h.placement
    ranks = list(pl.flat_ranks)
    start, stop = shard_range(t._shape[0], len(ranks), ranks.index(world().rank))
    if type(h.local._h) is DeviceMetaBlob:  # no values (simulate_rank, a meta placement)
        local = meta_tensor((stop - start,) + tuple(t._shape[1:]), t.dtype)
    else:
        local = Tensor._wrap(h.local.numpy()[start:stop].copy(), t.dtype)
    return wrap(local, pl, (split(0),), tuple(t._shape), t.dtype)


def shard_states(opt, param: Tensor, states: list) -> list:
    """``states`` with each broadcast tensor of ``param``'s shape made split(0), in place in
    ``opt.state[param]`` too."""
    entry = opt.state.get(param, {})
    out = []
    for s in states:
        h = s._h
        if (type(h) is GlobalBlob and nd_attrs(h.sbp) == _B
                and tuple(s._shape) == tuple(param._shape)):
            new = split_state(s)
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
        if stage == 3 and is_stage3_shard(param):
            return plain(op, [param, _shard_grad(op, param, inputs[1]), *inputs[2:]], attrs)
        if not op.elementwise or not zero_eligible(param, min_size):
            # (an update reading the whole parameter, as LAMB's trust ratio, stays broadcast)
            return plain(op, inputs, attrs)
        name = interp._var_name(param)
        states = shard_states(opt, param, list(inputs[3:]))
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
        # a GradScaler's skipped step leaves the shard as read, so this write-back is then the
        # identity: the scaler's gate (optimizer_emission._gate) may let it run
        b.job.ops[-1].tags["zero_write_back"] = True

    def _shard_grad(op, param: Tensor, grad: Tensor) -> Tensor:
        # a stage-3 shard's gradient as split(0): at shard_restore_level 2 it already is (the
        # gather's backward), at 0 and 1 it is boxed here, once per step
        g = interp.as_global(op, grad, param._h.placement)
        if nd_attrs(g._h.sbp) == _S0:
            return g
        return interp.box_to(g, _S0, f"{interp._var_name(param)} zero-3 grad")

    opt._apply_update = apply_update
    try:
        yield
    finally:
        del opt._apply_update


def update_is_elementwise(opt, j: int, p: Tensor, lr: Tensor) -> bool:
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
