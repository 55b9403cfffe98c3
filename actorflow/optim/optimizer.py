"""The Optimizer base class: parameter groups, per-parameter state, state dicts.

An optimizer's update math is a registered op (``actorflow/ops/optim_ops.py``) that writes the
parameter and its state in place. ``step()`` calls, for every parameter with a gradient,
``self._update(param, grad, lr, attrs, group)``, where ``lr`` is a 0-d float64 tensor made by
``_lr_tensor(group)`` and ``attrs`` comes from ``_attrs(group)``; ``nn.Graph`` can call the same
two methods with lazy tensors to emit the update ops into a Job.

``_update`` issues its op through ``_apply_update``. Eager ``step()`` collects a group's calls
and issues each run of calls with the same op and attrs as one ``multi_tensor_update`` op (the
same op the graph's fuse_model_update pass makes), as PyTorch's foreach optimizers do: one
dispatch and one VM instruction per group instead of one per parameter.

Gradient clipping follows OneFlow: a param group may carry ``clip_grad_max_norm`` and
``clip_grad_norm_type``; eager code applies them with ``optimizer.clip_grad()`` before ``step()``
(``step()`` itself does not clip, so the two never clip twice). A group's ``lr_scale`` is
OneFlow's graph-only key: ``nn.Graph`` multiplies the group's lr by it, eager ``step()`` does
not (and warns).
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

from actorflow.autograd.grad_mode import enable_grad, no_grad
from actorflow.dispatch import apply
from actorflow.dispatch.global_tensor import from_full, is_global, wrap
from actorflow.framework import dtype as dt
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.ops import registry
from actorflow.optim.clip_grad import clip_grad_norm_
from actorflow.tensor import EagerBlob, Tensor, bump_state_generation

_MULTI = registry.get("multi_tensor_update")

_CLIP_KEYS = ("clip_grad_max_norm", "clip_grad_norm_type")


class _Required:
    """Marks a hyperparameter every param group must give (there is no default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


def zeros_state(param: Tensor, fill: float = 0.0) -> Tensor:
    """A new state tensor shaped and typed like ``param`` (only its metadata is read, so a lazy
    parameter works too); for a global parameter, a global tensor with its placement and sbp
    (each rank fills its own shard, nothing moves)."""
    if is_global(param):
        h = param._h
        local = None
        if h.local is not None:
            local = Tensor._wrap(np.full(tuple(h.local._shape), fill, dtype=param.dtype.np),
                                 param.dtype)
        return wrap(local, h.placement, h.sbp, param._shape, param.dtype)
    return Tensor._wrap(np.full(tuple(param._shape), fill, dtype=param.dtype.np), param.dtype)


def step_state(param: Tensor | None = None) -> Tensor:
    """A new 0-d int64 step counter (the update ops increment it); broadcast on the placement
    of a global ``param``."""
    step = Tensor._wrap(np.zeros((), dtype=np.int64), dt.int64)
    return _like_placement(step, param)


def _like_placement(t: Tensor, param: Tensor | None) -> Tensor:
    """Local ``t`` (the same value on every rank) as a broadcast tensor on the placement of a
    global ``param``; ``t`` itself otherwise."""
    if param is None or not is_global(param):
        return t
    pl = param._h.placement
    return from_full(t, pl, (SbpParallel.from_attr(("B",)),) * len(pl.hierarchy))


class ContiguousParams:
    """The parameters of one group laid out in flat buffers, one per dtype (``contiguous_params``).

    Each parameter's storage becomes a view into its buffer, so one update op call per buffer
    updates them all. Gradients stay per parameter; ``gather()`` copies them into a flat gradient
    buffer before the update (a parameter without a gradient contributes zeros). Parameters that
    do not require grad are left out, as in OneFlow.
    """

    def __init__(self, params: list):
        by_dtype: dict = {}
        for p in params:
            if is_global(p):
                raise ValueError("contiguous_params: global parameters can't share a flat "
                                 "buffer; use contiguous_params=False")
            if p.requires_grad:
                by_dtype.setdefault(p.dtype, []).append(p)
        self.buffers = []  # (buffer, grad buffer, [(param, flat view of the grad buffer)])
        for d, ps in by_dtype.items():
            total = sum(p.numel() for p in ps)
            flat = np.empty(total, dtype=d.np)
            buf = Tensor._wrap(flat, d)
            gbuf = Tensor._wrap(np.zeros(total, dtype=d.np), d)
            layout, off = [], 0
            for p in ps:
                n = p.numel()
                view = flat[off:off + n].reshape(tuple(p._shape))
                np.copyto(view, p._array())
                # shares the buffer's version counter and VM storage record
                p.data = Tensor._wrap(view, d, buf._vc, buf._h.storage)
                gview = Tensor._wrap(gbuf._h.raw[off:off + n].reshape(tuple(p._shape)), d,
                                     gbuf._vc, gbuf._h.storage)
                layout.append((p, gview))
                off += n
            self.buffers.append((buf, gbuf, layout))

    @property
    def tensors(self) -> list:
        """The flat parameter buffers (what the optimizer updates and keeps state for)."""
        return [b for b, _, _ in self.buffers]

    def gather(self) -> list:
        """``(buffer, flat gradient)`` for each buffer holding at least one gradient."""
        pairs = []
        for buf, gbuf, layout in self.buffers:
            if all(p.grad is None for p, _ in layout):
                continue
            for p, gview in layout:
                gview.copy_(p.grad if p.grad is not None else 0.0)
            pairs.append((buf, gbuf))
        return pairs


class Optimizer:
    """Base class of optimizers (``actorflow.optim.Optimizer``).

    ``params`` is an iterable of tensors, or of dicts each holding ``"params"`` and per-group
    options that override ``defaults``.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = defaultdict(dict)
        self.param_groups: list = []
        self._contiguous: list = []  # per group: ContiguousParams or None
        self._batch: list | None = None  # update calls step() is collecting
        if isinstance(params, Tensor) or isinstance(params, dict):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}")
        from_iterator = isinstance(params, Iterator)
        params = list(params)
        if not params and not from_iterator:
            raise ValueError("optimizer got an empty parameter list")
        # an empty iterator (``module.parameters()`` of a parameterless module) makes one empty
        # group, as in OneFlow
        if params and not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params or [{"params": []}]:
            self.add_param_group(group)

    # -- groups ----------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with ``"params"`` and optional group options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"add_param_group: expected a dict, got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("add_param_group: the param group has no 'params' entry")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs; "
                            "use a list instead")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if group.get("fused"):
            warnings.warn("fused update kernels exist only for CUDA parameters; this group "
                          "uses the CPU kernels (fused=False)", stacklevel=3)
            group["fused"] = False
        group["params"] = params
        self.param_groups.append(group)
        self._contiguous.append(ContiguousParams(params) if group.get("contiguous_params")
                                else None)

    def _targets(self, index: int) -> list:
        """The tensors group ``index`` updates (its parameters, or its contiguous buffers)."""
        buffers = self._contiguous[index]
        if buffers is not None:
            return buffers.tensors
        return self.param_groups[index]["params"]

    def _grads(self, index: int) -> list:
        """``(tensor, gradient)`` pairs to update in group ``index``."""
        buffers = self._contiguous[index]
        if buffers is not None:
            return buffers.gather()
        return [(p, p.grad) for p in self.param_groups[index]["params"] if p.grad is not None]

    # -- the update ------------------------------------------------------------------------------
    def _lr_tensor(self, group: dict) -> Tensor:
        """The group's learning rate as a 0-d float64 tensor. A group's ``lr_scale`` is read by
        ``nn.Graph`` only (it goes into OneFlow's optimizer conf); eager ``step()`` ignores it,
        as OneFlow's does, and warns once per optimizer that it does."""
        if float(group.get("lr_scale", 1.0)) != 1.0 and not self.__dict__.get("_lr_scale_said"):
            self.__dict__["_lr_scale_said"] = True
            warnings.warn(f"{type(self).__name__}.step(): a param group's lr_scale "
                          f"({group['lr_scale']}) is applied by nn.Graph only; an eager step "
                          f"uses lr alone, as in OneFlow (scale lr itself to get it here)",
                          UserWarning, stacklevel=3)
        return Tensor._wrap(np.array(float(group["lr"]), dtype=np.float64), dt.float64)

    def _attrs(self, group: dict) -> dict:
        """The update op's attrs for ``group`` (its hyperparameters other than lr)."""
        raise NotImplementedError

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        """Apply the update op to one parameter (creating its state on first use)."""
        raise NotImplementedError

    def _apply_update(self, op, inputs: list, attrs: dict) -> None:
        """Issue update ``op`` on ``inputs`` (param, grad, lr, state...), or collect it while
        ``step()`` batches a group's updates. A parameter with an ``_own_update`` method
        (``flow.one_embedding``'s shadow) turns the call into its own update op first."""
        own = getattr(inputs[0], "_own_update", None)
        if own is not None:
            op, inputs, attrs = own(op, inputs, attrs)
        batch = self._batch
        if is_global(inputs[0]) and not is_global(inputs[2]):
            # the group's lr, broadcast on the parameter's placement
            inputs = inputs[:2] + [_like_placement(inputs[2], inputs[0])] + inputs[3:]
        if batch is None:
            apply(op, inputs, attrs)
        else:
            batch.append((op, inputs, attrs))

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for i, group in enumerate(self.param_groups):
                pairs = self._grads(i)
                if not pairs:
                    continue
                lr, attrs = self._lr_tensor(group), self._attrs(group)
                self._batch = []
                try:
                    for p, g in pairs:
                        self._update(p, g, lr, attrs, group)
                    batch = self._batch
                finally:
                    self._batch = None
                _issue_batched(batch)
        return loss

    # -- gradients -------------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: set them to None (default) or fill them with zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if g.grad_fn is not None or g.requires_grad:
                    g = g.detach()
                if isinstance(g._h, EagerBlob) and not g._h.raw.flags.writeable:
                    g = g.clone()
                with no_grad():
                    g.zero_()
                p.grad = g

    def clip_grad(self, error_if_nonfinite: bool = False) -> None:
        """Clip each group's gradients by its ``clip_grad_max_norm`` / ``clip_grad_norm_type``
        (OneFlow): the group's gradients are scaled so their total norm is at most the max."""
        for group in self.param_groups:
            if all(k in group for k in _CLIP_KEYS):
                clip_grad_norm_(group["params"], group["clip_grad_max_norm"],
                                group["clip_grad_norm_type"],
                                error_if_nonfinite=error_if_nonfinite)
            else:
                warnings.warn("clip_grad: to clip gradients, give the param group "
                              "'clip_grad_max_norm' and 'clip_grad_norm_type'", stacklevel=2)

    # -- state dicts -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {name: tensor}}, "param_groups": [options + "params": [index]]}``;
        parameters are numbered in group order, as in PyTorch."""
        index: dict = {}
        groups = []
        for i, group in enumerate(self.param_groups):
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for t in self._targets(i):
                ids.append(index.setdefault(id(t), len(index)))
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(t)]: dict(s) for t, s in self.state.items()
                 if isinstance(t, Tensor) and id(t) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a ``state_dict()``: group options and per-parameter state (copied and cast to
        each parameter's dtype). Groups must match the optimizer's in number and size."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"load_state_dict: the state dict has {len(saved_groups)} parameter "
                             f"groups, but the optimizer has {len(self.param_groups)}")
        id_map = {}
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if bool(group.get("contiguous_params")) != bool(saved.get("contiguous_params")):
                raise ValueError(f"load_state_dict: parameter group {i} has contiguous_params="
                                 f"{bool(group.get('contiguous_params'))}, but the state dict's "
                                 f"group has {bool(saved.get('contiguous_params'))}")
            targets = self._targets(i)
            if len(targets) != len(saved["params"]):
                raise ValueError(f"load_state_dict: parameter group {i} holds {len(targets)} "
                                 f"tensors, but the state dict's group {i} holds "
                                 f"{len(saved['params'])}")
            id_map.update(zip(saved["params"], targets))
        state: dict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            target = id_map.get(int(key)) if _is_int(key) else None
            if target is None:
                state[key] = value
            else:
                state[target] = {name: _load_state_value(target, name, v)
                                 for name, v in value.items()}
        self.state = state
        bump_state_generation()  # a graph that bound the old state tensors binds these
        for group, saved in zip(self.param_groups, saved_groups):
            for k, v in saved.items():
                if k != "params":
                    group[k] = v

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)


def _is_int(key) -> bool:
    try:
        int(key)
    except (TypeError, ValueError):
        return False
    return True


def _load_state_value(target: Tensor, name: str, value):
    """A copy of a saved state value for ``target``: float tensors take its dtype and must have
    its shape (0-d entries such as ``step`` excepted); numbers named ``step`` become tensors.
    For a global ``target`` the (logical) value is laid out like it: state of its shape with
    its sbp, 0-d entries broadcast, on its placement."""
    if name == "step" and not isinstance(value, Tensor):
        out = Tensor._wrap(np.array(int(value), dtype=np.int64), dt.int64)
        return _like_placement(out, target)
    if not isinstance(value, Tensor):
        return value
    arr = value._array()
    if value.dtype.is_floating_point and arr.ndim:
        if tuple(arr.shape) != tuple(target._shape):
            raise ValueError(f"load_state_dict: state {name!r} has shape {tuple(arr.shape)}, but "
                             f"its parameter has shape {tuple(target._shape)}")
        out = Tensor._wrap(np.array(arr, dtype=target.dtype.np, copy=True), target.dtype)
        if is_global(target):
            return from_full(out, target._h.placement, target._h.sbp)
        return out
    return _like_placement(Tensor._wrap(np.array(arr, copy=True), value.dtype), target)



def _issue_batched(calls: list) -> None:
    """Issue collected update calls: each run of calls with the same op, lr tensor, attrs and
    input count as one ``multi_tensor_update``; a run of one as the op itself. Updates of global
    parameters are issued one by one (each with its own SBP signature)."""
    i = 0
    while i < len(calls):
        op, inputs, attrs = calls[i]
        j = i + 1
        while not is_global(inputs[0]) and j < len(calls) and calls[j][0] is op \
                and calls[j][1][2] is inputs[2] and len(calls[j][1]) == len(inputs) \
                and calls[j][2] == attrs:
            j += 1
        if j - i == 1:
            apply(op, inputs, attrs)
        else:
            flat = [inputs[2]]  # lr, then per parameter its inputs without lr
            for _, ins, _ in calls[i:j]:
                flat += ins[:2] + ins[3:]
            apply(_MULTI, flat, {"update": op.name, "update_attrs": attrs,
                                 "arity": len(inputs) - 1})
        i = j



__all__ = ["Optimizer", "required", "zeros_state", "step_state", "ContiguousParams"]
