"""``flow.utils.global_view`` (OneFlow's): ``to_global`` and ``to_local`` of every tensor in a
nested structure (a tensor, or lists, tuples and dicts of them: a state dict, a batch).

Containers are walked as ``oneflow_compat.args_tree.ArgsTree`` sees them (exact tuple, list,
dict, OrderedDict); every tensor leaf is converted with ``Tensor.to_global`` /
``Tensor.to_local``; None stays None; any other leaf stays as it is, with a warning unless
``warn_on_non_tensor_leaf=False``.
"""
from __future__ import annotations

import types
import warnings

from actorflow.tensor import Tensor

_NESTED = (Tensor, dict, tuple, list)


def _map(input, fn):
    # late: ArgsTree lives in the OneFlow compatibility layer, above utils
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
    if not isinstance(input, _NESTED):
        return _keep(input, warn_on_non_tensor_leaf)
    pick = sbp if isinstance(sbp, types.FunctionType) else None

    def leaf(node):
        if isinstance(node, Tensor):
            return node.to_global(placement, pick(input, node) if pick else sbp, **kwargs)
        return _keep(node, warn_on_non_tensor_leaf)

    return _map(input, leaf)


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


__all__ = ["to_global", "to_local"]
