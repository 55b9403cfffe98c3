"""``weight_norm`` / ``remove_weight_norm``: reparametrise a weight by magnitude and direction
(Salimans & Kingma, 2016), PyTorch's and OneFlow's ``nn.utils`` API.

``weight_norm(module, name, dim)`` replaces the parameter ``name`` by ``name_g`` (its norm over
every dim but ``dim``) and ``name_v`` (its direction, the old values), and a forward pre-hook
recomputes ``name = name_v * (name_g / ||name_v||)`` before each forward, so gradients reach
``name_g`` and ``name_v``. ``dim=None`` (or -1, as in PyTorch) takes one norm over the whole
tensor. ``remove_weight_norm`` folds it back into a plain parameter.
"""
from __future__ import annotations

from actorflow import functional as flow
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim`` (kept as size 1); all of ``v`` for -1."""
    if dim == -1:
        return flow.sqrt((v * v).sum())
    dims = tuple(d for d in range(v.dim()) if d != dim)
    if not dims:
        return flow.abs(v)
    return flow.sqrt((v * v).sum(dims, keepdim=True))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    def __init__(self, name: str, dim: int):
        self.name, self.dim = name, dim

    def compute_weight(self, module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module, name: str, dim: int | None) -> "WeightNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"weight_norm: cannot register two weight_norm hooks on the "
                                   f"same parameter {name!r}")
        weight = module._parameters.get(name)
        if not isinstance(weight, Tensor):
            raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
        if dim is None:
            dim = -1
        if dim != -1:
            if not -weight.dim() <= dim < weight.dim():
                raise IndexError(f"weight_norm: dim {dim} is out of range for parameter "
                                 f"{name!r} of shape {tuple(weight.shape)}")
            dim %= weight.dim()
        fn = WeightNorm(name, dim)
        del module._parameters[name]
        data = weight.detach()
        module.register_parameter(name + "_g", Parameter(_norm_except_dim(data, dim).clone()))
        module.register_parameter(name + "_v", Parameter(data.clone()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """Apply weight normalisation to ``module.<name>`` (see the module docstring); returns
    ``module``."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo ``weight_norm`` on ``module.<name>``: a plain parameter holding the current
    weight; returns ``module``."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of {name!r} not found in {type(module).__name__}")
