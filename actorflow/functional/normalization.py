"""Normalisation functional API with ``torch.nn.functional`` signatures:
batch_norm, layer_norm, group_norm (and the gradient helpers their rules use)."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.tensor import Tensor

_BN = registry.get("batch_norm")
_BN_BATCH = registry.get("batch_norm_batch_stats")
_BN_GRAD = registry.get("batch_norm_grad")
_LN = registry.get("layer_norm")
_LN_GRAD = registry.get("layer_norm_grad")
_GN = registry.get("group_norm")
_GN_GRAD = registry.get("group_norm_grad")


def _affine_inputs(inputs: list, weight, bias, attrs: dict) -> list:
    attrs["has_weight"] = weight is not None
    attrs["has_bias"] = bias is not None
    if weight is not None:
        inputs.append(weight)
    if bias is not None:
        inputs.append(bias)
    return inputs


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) of ``input``.

    Training: batch statistics; ``running_mean``/``running_var`` (if given) are updated in place
    with ``momentum`` (the variance unbiased). Evaluation: the running statistics are used."""
    if momentum is None:
        raise TypeError("batch_norm: momentum must be a number (the module turns "
                        "momentum=None into a cumulative average factor)")
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: running_mean and running_var must both be given or both "
                         "be None")
    attrs = {"training": bool(training), "momentum": float(momentum), "eps": float(eps)}
    if running_mean is None:
        if not training:
            raise ValueError("batch_norm: running_mean and running_var must be defined in "
                             "evaluation mode (training=False)")
        inputs = _affine_inputs([input], weight, bias, attrs)
        return apply(_BN_BATCH, inputs, attrs)[0]
    inputs = _affine_inputs([input, running_mean, running_var], weight, bias, attrs)
    return apply(_BN, inputs, attrs)[0]


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing dims given by ``normalized_shape``."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = tuple(int(s) for s in normalized_shape)
    attrs = {"normalized_shape": shape, "normalized_ndim": len(shape), "eps": float(eps)}
    inputs = _affine_inputs([input], weight, bias, attrs)
    return apply(_LN, inputs, attrs)[0]


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise (N, C, ...) over groups of ``C // num_groups`` channels (and all other dims)."""
    attrs = {"num_groups": int(num_groups), "eps": float(eps)}
    inputs = _affine_inputs([input], weight, bias, attrs)
    return apply(_GN, inputs, attrs)[0]


def _grad(op, dout, x, mean, invstd, weight, **attrs) -> tuple:
    attrs["has_weight"] = weight is not None
    inputs = [dout, x, mean, invstd] + ([weight] if weight is not None else [])
    return tuple(apply(op, inputs, attrs))


def batch_norm_grad(dout: Tensor, x: Tensor, mean: Tensor, invstd: Tensor,
                    weight: Tensor | None, training: bool) -> tuple:
    """(dx, dweight, dbias) of batch_norm from its saved mean and invstd."""
    return _grad(_BN_GRAD, dout, x, mean, invstd, weight, training=bool(training))


def layer_norm_grad(dout: Tensor, x: Tensor, mean: Tensor, invstd: Tensor,
                    weight: Tensor | None, normalized_ndim: int) -> tuple:
    """(dx, dweight, dbias) of layer_norm over the last ``normalized_ndim`` dims."""
    return _grad(_LN_GRAD, dout, x, mean, invstd, weight, normalized_ndim=int(normalized_ndim))


def group_norm_grad(dout: Tensor, x: Tensor, mean: Tensor, invstd: Tensor,
                    weight: Tensor | None) -> tuple:
    """(dx, dweight, dbias) of group_norm from its saved (N, groups) mean and invstd."""
    return _grad(_GN_GRAD, dout, x, mean, invstd, weight)


__all__ = ["batch_norm", "layer_norm", "group_norm", "batch_norm_grad", "layer_norm_grad",
           "group_norm_grad"]
