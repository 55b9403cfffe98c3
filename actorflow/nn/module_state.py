"""``state_dict`` and ``load_state_dict`` of ``nn.Module`` (the base class mixes them in).

``state_dict`` holds the parameters and persistent buffers by dotted name, the tensors
themselves as in OneFlow; ``load_state_dict`` copies values into them in place, module by
module (``_load_from_state_dict``, which layers may extend), a logical value into a global
tensor's layout, a global value of another placement moved onto the target's, and a global
value's logical values into a local tensor.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple

from actorflow.autograd import no_grad
from actorflow.dispatch.global_tensor import from_full
from actorflow.functional.creation import tensor as _tensor
from actorflow.tensor import Tensor

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class ModuleStateDict:
    """The state-dict methods of ``nn.Module`` (they use its ``_parameters``, ``_buffers``,
    ``_modules``, ``named_modules`` and ``get_submodule``)."""

    # entries other than parameters and buffers that a class's _save_to_state_dict writes and
    # its _load_from_state_dict reads (one_embedding's snapshot name)
    _state_dict_extra_keys: tuple = ()

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # the tensors themselves, as OneFlow (PyTorch detaches unless keep_vars)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b

    def state_dict(self, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name: the tensors themselves, as in
        OneFlow (``keep_vars`` is accepted for PyTorch code and changes nothing)."""
        if destination is None:
            destination = OrderedDict()
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination, prefix + name + ".", keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, missing_keys: list,
                              error_msgs: list) -> None:
        """Copy this module's own entries (not its children's) from ``state_dict``."""
        local = itertools.chain(self._parameters.items(),
                                ((k, v) for k, v in self._buffers.items()
                                 if k not in self._non_persistent_buffers_set))
        for name, target in local:
            if target is None:
                continue
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                try:
                    value = _tensor(value)
                except (TypeError, ValueError):
                    error_msgs.append(f'While copying the parameter named "{key}", expected a '
                                      f'tensor, got {type(value).__name__}.')
                    continue
            if tuple(value._shape) != tuple(target._shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(value._shape)} from checkpoint, the shape in current "
                                  f"model is {tuple(target._shape)}.")
                continue
            if target.is_global and value.is_local:
                # a logical (loaded) value: each rank keeps its shard of the target's layout
                value = _global_like(value, target)
            elif target.is_local and value.is_global:  # its logical values (a collective)
                value = Tensor._wrap(value.numpy(), value.dtype)
            elif target.is_global and value.placement != target.placement:
                # another placement's value (a file read on one rank, made global there, as
                # OneFlow's tests load): moved onto the target's ranks and layout
                value = value.to_global(placement=target.placement, sbp=target.sbp)
            with no_grad():
                target.copy_(value)

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` into this module (in place).

        With ``strict`` a missing or unexpected key is an error; a shape mismatch always is.
        Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        errors: list = []
        for prefix, mod in self.named_modules(remove_duplicate=False):
            mod._load_from_state_dict(state_dict, prefix + "." if prefix else "", missing,
                                      errors)
        unexpected = [k for k in state_dict if not self._owns_key(k)]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" +
                               "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    def _owns_key(self, key: str) -> bool:
        mod_path, _, name = key.rpartition(".")
        try:
            mod = self.get_submodule(mod_path)
        except AttributeError:
            return False
        return name in mod._parameters or (name in mod._buffers and
                                           name not in mod._non_persistent_buffers_set) \
            or name in type(mod)._state_dict_extra_keys


def _global_like(value: Tensor, target: Tensor) -> Tensor:
    """Local ``value`` (the logical tensor, the same on every rank) laid out like global
    ``target``: its placement and sbp; no transfer."""
    return from_full(value.to(target.dtype), target.placement, target.sbp)
