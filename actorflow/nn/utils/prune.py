"""``actorflow.nn.utils.prune``: prune (mask out) entries of a module's parameters.

Pruning ``module.<name>`` reparametrises it: the original parameter moves to
``<name>_orig`` (the same Parameter object, so optimizers keep working), the mask is the
buffer ``<name>_mask``, and a forward pre-hook (the pruning method itself) recomputes
``module.<name> = <name>_orig * <name>_mask`` before every forward, so gradients reach
``<name>_orig`` only through unmasked entries. Pruning the same tensor again combines the
new mask with the old one (a :class:`PruningContainer` remembers the history);
:func:`remove` makes the pruning permanent. Semantics follow PyTorch's / OneFlow's module.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Iterable

from actorflow import functional as flow
from actorflow import linalg
from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of computing a pruning mask; an instance is also the module's forward pre-hook
    that re-applies the mask before each forward."""

    PRUNING_TYPE: str = "unstructured"
    _tensor_name: str

    def __call__(self, module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask for ``t``, given the mask already in place (``default_mask``)."""

    def apply_mask(self, module) -> Tensor:
        """``<name>_orig * <name>_mask`` of ``module`` (the pruned tensor)."""
        name = self._tensor_name
        orig = getattr(module, name + "_orig")
        mask = getattr(module, name + "_mask")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores: Tensor | None = None,
              **kwargs) -> "BasePruningMethod":
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)``, combined with any
        pruning already applied to it; returns the hook now installed."""
        old_key, old = _find_hook(module, name)
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                method = old
            else:
                container = PruningContainer(old)
                container.add_pruning_method(method)
                method = container
        orig = getattr(module, name)
        scores = orig if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(orig.shape):
            raise ValueError(f"prune: importance_scores of shape {tuple(scores.shape)} must "
                             f"have the shape of parameter '{name}' {tuple(orig.shape)}")
        if old is None:
            # the same Parameter object keeps living as <name>_orig
            del module._parameters[name]
            module.register_parameter(name + "_orig", orig)
            default_mask = flow.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            if old_key is not None:
                del module._forward_pre_hooks[old_key]
            module.register_forward_pre_hook(method)
        except Exception:
            if old is None:  # undo the reparametrisation
                orig = module._parameters.pop(name + "_orig")
                module._buffers.pop(name + "_mask", None)
                module.__dict__.pop(name, None)
                module.register_parameter(name, orig)
            elif isinstance(method, PruningContainer) and method is old:
                old._pruning_methods = old._pruning_methods[:-1]
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask this method computes (from ``importance_scores`` if given)."""
        scores = t if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(t.shape):
            raise ValueError(f"prune: importance_scores of shape {tuple(scores.shape)} must "
                             f"have the shape of the tensor {tuple(t.shape)}")
        default = flow.ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(scores, default_mask=default).to(dtype=t.dtype)

    def remove(self, module) -> None:
        """Make the pruning of ``module.<name>`` permanent: the parameter ``<name>`` holds
        the pruned values again; ``<name>_orig`` and ``<name>_mask`` go away."""
        name = self._tensor_name
        if name + "_orig" not in module._parameters:
            raise ValueError(f"prune.remove: parameter '{name}' of {type(module).__name__} "
                             f"has no '{name}_orig'; was it pruned?")
        weight = self.apply_mask(module)
        module.__dict__.pop(name, None)
        orig = module._parameters.pop(name + "_orig")
        orig.data = weight.detach()
        module._buffers.pop(name + "_mask", None)
        module._non_persistent_buffers_set.discard(name + "_mask")
        module.register_parameter(name, orig)


class PruningContainer(BasePruningMethod):
    """The sequence of pruning methods applied to one tensor; its mask is the last method's
    mask computed on the entries (or channels) the earlier ones left."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1 and isinstance(args[0], BasePruningMethod):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1 and isinstance(args[0], Iterable):
            for method in args[0]:
                self.add_pruning_method(method)
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        """Append ``method``; it must prune the same tensor as the container."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"PruningContainer.add_pruning_method: {type(method).__name__} is "
                            f"not a BasePruningMethod")
        if method is None:
            return
        if not hasattr(self, "_tensor_name"):
            self._tensor_name = method._tensor_name
        if self._tensor_name != method._tensor_name:
            raise ValueError(f"PruningContainer for '{self._tensor_name}' cannot take a method "
                             f"pruning '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Apply the newest method to what ``default_mask`` has not pruned yet."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.clone()
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            keep = default_mask == 1
            partial = method.compute_mask(t[keep], default_mask=default_mask[keep])
            new_mask[keep] = partial.to(dtype=new_mask.dtype)
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("a structured pruning method needs a 'dim' attribute")
            dim = method.dim + t.dim() if method.dim < 0 else method.dim
            others = [d for d in range(t.dim()) if d != dim]
            alive = flow.sum(default_mask, dim=others) != 0 if others else default_mask != 0
            idx = flow.nonzero(alive).view(-1)
            partial = method.compute_mask(t.index_select(dim, idx),
                                          default_mask=default_mask.index_select(dim, idx))
            slc = [slice(None)] * t.dim()
            slc[dim] = idx
            new_mask[tuple(slc)] = partial.to(dtype=new_mask.dtype)
        elif kind == "global":
            new_mask = method.compute_mask(t, default_mask=default_mask).to(
                dtype=new_mask.dtype)
        else:
            raise ValueError(f"unrecognized PRUNING_TYPE {kind!r}")
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask stays as it is."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The default mask, unchanged."""
        return default_mask

    @classmethod
    def apply(cls, module, name: str) -> "Identity":
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` (a count, or a fraction in [0, 1]) entries chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with ``amount`` random entries set to zero."""
        n = t.nelement()
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        mask = default_mask.clone()
        if k != 0:
            _zero_flat(mask, flow.topk(flow.rand_like(t.to(dt.float32)).view(-1), k=k).indices)
        return mask

    @classmethod
    def apply(cls, module, name: str, amount) -> "RandomUnstructured":
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the ``amount`` smallest ``|t|`` entries set to zero."""
        n = t.nelement()
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        mask = default_mask.clone()
        if k != 0:
            _zero_flat(mask, flow.topk(flow.abs(t).view(-1), k=k, largest=False).indices)
        return mask

    @classmethod
    def apply(cls, module, name: str, amount, importance_scores=None) -> "L1Unstructured":
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with ``amount`` random channels along ``dim`` zeroed."""
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        n = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        if k == 0:
            return default_mask
        order = flow.topk(flow.rand(n), k=n - k).indices
        return default_mask * _channel_mask(t, self.dim, order).to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, amount, dim: int = -1) -> "RandomStructured":
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest L``n`` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the lowest-norm channels along ``dim`` zeroed."""
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if k == 0:
            return default_mask
        norm = _compute_norm(t, self.n, self.dim)
        kept = flow.topk(norm, k=size - k, largest=True).indices
        return default_mask * _channel_mask(t, self.dim, kept).to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, amount, n, dim: int,
              importance_scores=None) -> "LnStructured":
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a mask the user gives."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask * mask``."""
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"CustomFromMask: mask of shape {tuple(self.mask.shape)} does not "
                             f"match the tensor's mask {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, mask: Tensor) -> "CustomFromMask":
        return super().apply(module, name, mask=mask)


# -- the functional interface ------------------------------------------------------------------

def identity(module, name: str):
    """Reparametrise ``module.<name>`` with a mask of ones (prunes nothing)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount):
    """Prune ``amount`` random entries of ``module.<name>``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount, importance_scores: Tensor | None = None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest absolute value (of
    ``importance_scores`` when given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount, dim: int):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount, n, dim: int,
                  importance_scores: Tensor | None = None):
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest L``n``
    norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores: dict | None = None,
                        **kwargs) -> None:
    """Prune the ``(module, name)`` pairs of ``parameters`` together: the unstructured
    ``pruning_method`` chooses among all their entries at once."""
    parameters = list(parameters)
    if not parameters:
        raise TypeError("global_unstructured: parameters must be a non-empty iterable of "
                        "(module, name) pairs")
    importance_scores = importance_scores or {}
    scores = flow.cat([importance_scores.get((m, n), getattr(m, n)).reshape(-1)
                       for m, n in parameters])
    default_mask = flow.cat([(m._buffers[n + "_mask"] if n + "_mask" in m._buffers
                              else flow.ones_like(getattr(m, n))).reshape(-1)
                             for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f"global_unstructured: {type(method).__name__} is "
                        f"{method.PRUNING_TYPE!r}, an unstructured method is required")
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)
    start = 0
    for m, n in parameters:
        p = getattr(m, n)
        size = p.nelement()
        custom_from_mask(m, n, mask=final[start:start + size].view(*p.shape))
        start += size


def custom_from_mask(module, name: str, mask: Tensor):
    """Prune ``module.<name>`` with ``mask`` (combined with any earlier mask)."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name: str):
    """Make the pruning of ``module.<name>`` permanent and drop the reparametrisation."""
    key, hook = _find_hook(module, name)
    if hook is None:
        raise ValueError(f"prune.remove: parameter '{name}' of module "
                         f"{type(module).__name__} has to be pruned before pruning can be "
                         f"removed")
    hook.remove(module)
    del module._forward_pre_hooks[key]
    return module


def is_pruned(module) -> bool:
    """Whether any submodule of ``module`` has a pruning hook."""
    return any(isinstance(h, BasePruningMethod)
               for m in module.modules() for h in m._forward_pre_hooks.values())


# -- helpers (names as in OneFlow/PyTorch, whose tests call them) ------------------------------

def _find_hook(module, name: str):
    found = [(k, h) for k, h in module._forward_pre_hooks.items()
             if isinstance(h, BasePruningMethod) and h._tensor_name == name]
    if len(found) > 1:
        raise RuntimeError(f"prune: more than one pruning hook on parameter '{name}'")
    return found[0] if found else (None, None)


def _zero_flat(mask: Tensor, indices: Tensor) -> None:
    flat = mask.view(-1)
    flat[indices] = 0


def _channel_mask(t: Tensor, dim: int, kept: Tensor) -> Tensor:
    """Ones in the channels ``kept`` along ``dim``, zeros elsewhere, of ``t``'s shape."""
    dim = dim + t.dim() if dim < 0 else dim
    channels = flow.zeros(t.shape[dim])
    channels[kept] = 1
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return channels.view(*shape).expand(*t.shape)


def _validate_pruning_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"prune: invalid type for amount: {amount!r}; must be int or float")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"prune: amount={amount} should be a float in [0, 1] or a "
                         f"non-negative int")


def _validate_pruning_amount(amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"prune: amount={amount} is larger than the number of units to prune "
                         f"({tensor_size})")


def _validate_structured_pruning(t: Tensor) -> None:
    if len(t.shape) <= 1:
        raise ValueError(f"structured pruning needs a tensor of at least 2 dims, got shape "
                         f"{tuple(t.shape)}")


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim() or dim < -t.dim():
        raise IndexError(f"prune: dim {dim} is out of range for a tensor of shape "
                         f"{tuple(t.shape)}")


def _compute_nparams_toprune(amount, tensor_size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)


def _compute_norm(t: Tensor, n, dim: int) -> Tensor:
    """The L``n`` norm of each channel of ``t`` along ``dim``."""
    dim = dim + t.dim() if dim < 0 else dim
    others = tuple(d for d in range(t.dim()) if d != dim)
    return linalg.vector_norm(t.to(dt.float32) if not t.is_floating_point() else t,
                                   ord=n, dim=others)
