"""``flow.utils.global_view`` (OneFlow's): ``to_global`` and ``to_local`` of every tensor in a
nested structure (a tensor, or lists, tuples and dicts of them: a state dict, a batch), and
``global_mode`` / ``current_global_mode`` (creation ops making global tensors).

Containers are walked as ``oneflow_compat.args_tree.ArgsTree`` sees them (exact tuple, list,
dict, OrderedDict); every tensor leaf is converted with ``Tensor.to_global`` /
``Tensor.to_local``; None stays None; any other leaf stays as it is, with a warning unless
``warn_on_non_tensor_leaf=False``.

As in OneFlow, local input made global on a placement that leaves some ranks out takes its
structure from the placement's first rank: that rank sends it (its tensors as empty
stand-ins) to every rank, and the ranks outside the placement use it whatever they passed
(None, say, on ranks that hold no checkpoint file); each of their tensors is then a global
tensor with an empty shard, whose shape and values the placement's ranks give.
"""
from __future__ import annotations

import types
import warnings

import numpy as np

from actorflow import scope
from actorflow.framework.placement import placement as Placement
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.functional.creation import empty
from actorflow.process import groups, world
from actorflow.tensor import Tensor

_NESTED = (Tensor, dict, tuple, list)


def _map(input, fn):
    # ArgsTree lives in the OneFlow compatibility layer (utils' own layer), loaded on first use
    from actorflow.oneflow_compat.args_tree import ArgsTree
    return ArgsTree(input).map_leaf(fn)


def _keep(leaf, warn: bool):
    if warn and leaf is not None:
        warnings.warn(f"global_view: a leaf of type {type(leaf).__name__} is not a tensor; it "
                      f"stays as it is", stacklevel=3)
    return leaf


def to_global(input, placement=None, sbp=None, warn_on_non_tensor_leaf: bool = True,
              **kwargs):
    """``input`` with every tensor made global on ``placement`` laid out as ``sbp`` (see
    ``Tensor.to_global``; ``kwargs`` go to it). ``sbp`` may be a function
    ``sbp(input, tensor)`` choosing each tensor's sbp (a state dict whose tensors can't all
    be split along one dim)."""
    if placement is not None and _is_local(input) and not _on_all_ranks(placement):
        input = _structure_from(input, int(placement.ranks.flat[0]), placement,
                                warn_on_non_tensor_leaf)
    if not isinstance(input, _NESTED):
        return _keep(input, warn_on_non_tensor_leaf)
    pick = sbp if isinstance(sbp, types.FunctionType) else None

    def leaf(node):
        if isinstance(node, Tensor):
            return node.to_global(placement, pick(input, node) if pick else sbp, **kwargs)
        return _keep(node, warn_on_non_tensor_leaf)

    return _map(input, leaf)


def _tensors(input) -> list:
    if isinstance(input, Tensor):
        return [input]
    if not isinstance(input, _NESTED):
        return []
    from actorflow.oneflow_compat.args_tree import ArgsTree  # late: see _map
    return [n for n in ArgsTree(input).iter_nodes() if isinstance(n, Tensor)]


def _is_local(input) -> bool:
    """Whether ``input``'s tensors are local (None and tensor-free input count as local);
    mixed local and global tensors raise, as in OneFlow."""
    kinds = {t.is_global for t in _tensors(input)}
    if len(kinds) > 1:
        raise ValueError("global_view.to_global: the tensors of the input must be all local or "
                         "all global")
    return kinds != {True}


def _on_all_ranks(pl) -> bool:
    every = Placement.all(pl.type).ranks
    return every.shape == pl.ranks.shape and bool(np.all(every == pl.ranks))


class _Stand:
    """What a tensor leaf travels as from the placement's first rank: nothing of its data."""


def _structure_from(input, src: int, pl, warn: bool):
    """``input`` as rank ``src`` has it, on the ranks outside ``pl`` (tensor leaves become
    empty local stand-ins, which ``to_global`` then makes empty shards of); ``input`` itself
    on ``pl``'s ranks. Every rank takes part (a collective over the control communicator)."""
    me = world.get_rank()
    sent = None
    if me == src:
        sent = _map(input, lambda n: _Stand() if isinstance(n, Tensor) else n) \
            if isinstance(input, _NESTED) else input
        if isinstance(input, Tensor):
            sent = _Stand()
    got = groups.bcast_object(sent, src, "global_view.to_global (structure)")
    if pl.index(me) is not None:
        return input
    def fill(n):
        return empty(0, 1) if isinstance(n, _Stand) else _keep(n, warn)
    if isinstance(got, _Stand):
        return empty(0, 1)
    return _map(got, fill) if isinstance(got, _NESTED) else got


def to_local(input, warn_on_non_tensor_leaf: bool = True, **kwargs):
    """``input`` with every global tensor replaced by this rank's shard (``Tensor.to_local``;
    ``kwargs`` go to it); local tensors stay as they are, with a warning."""
    if not isinstance(input, _NESTED):
        return _keep(input, warn_on_non_tensor_leaf)

    def leaf(node):
        if isinstance(node, Tensor):
            if node.is_local:
                if warn_on_non_tensor_leaf:
                    warnings.warn("global_view.to_local: a tensor is local already; it stays "
                                  "as it is", stacklevel=3)
                return node
            return node.to_local(**kwargs)
        return _keep(node, warn_on_non_tensor_leaf)

    return _map(input, leaf)


class global_mode:
    """Context manager: inside ``with global_mode(True, placement=P, sbp=S)`` on this thread,
    every creation op given no placement and sbp of its own (``flow.tensor``, ``ones``,
    ``zeros``, ``empty``, ``full``, ``arange``, ``linspace``, ``eye``, ``rand``, ``randn``,
    ``randint``, ``randperm``, ``hann_window``, the ``*_like`` and ``new_*`` of local tensors)
    makes a global tensor on ``P`` laid out as ``S``: its logical value is what the local op
    would make, random ops drawing one agreed seed on every rank (so a broadcast tensor holds
    the same values everywhere). Eagerly and inside ``nn.Graph.build`` alike.
    ``global_mode(False)`` turns the mode off inside (placement and sbp are then ignored). The
    previous mode is restored on exit. Tensors made before keep their placement and sbp; a
    global tensor's ``device`` and ``to(device)`` work inside the mode and out (on a CPU
    there is one device type).
    """

    def __init__(self, enabled: bool, placement=None, sbp=None) -> None:
        self.enabled = bool(enabled)
        self.placement, self.sbp = None, None
        if self.enabled:
            if placement is None or sbp is None:
                raise ValueError("global_mode(True, ...): both placement and sbp are required")
            if not isinstance(placement, Placement):
                raise TypeError(f"global_mode: placement must be a flow.placement, got "
                                f"{type(placement).__name__}")
            sbps = tuple(sbp) if isinstance(sbp, (list, tuple)) else (sbp,)
            if not sbps or not all(isinstance(s, SbpParallel) for s in sbps):
                raise TypeError(f"global_mode: sbp must be a flow.sbp value or a list/tuple of "
                                f"them, got {sbp!r}")
            if len(sbps) != len(placement.hierarchy):
                raise ValueError(f"global_mode: {len(sbps)} sbp value(s) for a placement of "
                                 f"{len(placement.hierarchy)} dimension(s)")
            self.placement, self.sbp = placement, sbps
        self._saved = None

    def __enter__(self):
        self._saved = scope.state.global_mode
        scope.state.global_mode = (self.placement, self.sbp) if self.enabled else None
        return self

    def __exit__(self, *exc):
        scope.state.global_mode = self._saved
        return False


class current_global_mode:
    """The global mode on this thread at construction: ``is_enabled``, ``placement`` and
    ``sbp`` (a tuple of sbp values; None and ``()`` when the mode is off)."""

    def __init__(self) -> None:
        mode = scope.global_mode()
        self._placement, self._sbp = mode if mode is not None else (None, ())

    @property
    def is_enabled(self) -> bool:
        return self._placement is not None

    @property
    def placement(self):
        return self._placement

    @property
    def sbp(self) -> tuple:
        return self._sbp


__all__ = ["to_global", "to_local", "global_mode", "current_global_mode"]
