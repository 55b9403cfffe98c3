"""``actorflow.nn.functional``: the ``torch.nn.functional`` names.

Each op is defined once in ``actorflow.functional`` and re-exported here; the few functions
whose ``nn.functional`` signature differs from the tensor-level one (``relu`` takes
``inplace``) are thin wrappers.
"""
from __future__ import annotations

from actorflow.functional import (  # noqa: F401
    adaptive_avg_pool2d, avg_pool2d, batch_norm, depend, binary_cross_entropy,
    binary_cross_entropy_with_logits, conv1d, conv2d, conv3d, cross_entropy, dropout, elu,
    embedding, gelu, group_norm, kl_div, l1_loss, layer_norm, leaky_relu, linear, log_softmax,
    max_pool1d, max_pool2d, mse_loss, nll_loss, pad, scaled_dot_product_attention, sigmoid, silu,
    smooth_l1_loss, softmax, softplus, tanh,
)
from actorflow.functional import (  # noqa: F401
    adaptive_avg_pool1d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d,
    adaptive_max_pool3d, affine_grid, avg_pool1d, avg_pool3d, conv_transpose1d,
    conv_transpose2d, conv_transpose3d, dropout1d, dropout2d, dropout3d, instance_norm,
    max_pool3d, max_unpool1d, max_unpool2d, max_unpool3d, pixel_shuffle, pixel_unshuffle,
    rms_norm, margin_ranking_loss, triplet_margin_loss,
    sparse_softmax_cross_entropy, gumbel_softmax, grid_sample, huber_loss,
)
from actorflow.functional import relu as _relu
from actorflow.functional.distance import cosine_similarity, pairwise_distance  # noqa: F401
from actorflow.functional.fold import fold, unfold  # noqa: F401
from actorflow.functional.index import one_hot  # noqa: F401
from actorflow.functional.linalg import normalize  # noqa: F401
from actorflow.tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(input, 0)``; with ``inplace`` the result is written into ``input``."""
    return input.relu_() if inplace else _relu(input)


__all__ = [
    "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "leaky_relu", "elu",
    "softplus", "linear", "conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "embedding", "dropout",
    "scaled_dot_product_attention", "pad", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "depend", "one_hot", "normalize", "unfold", "fold", "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "affine_grid",
    "avg_pool1d", "avg_pool3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "dropout1d", "dropout2d", "dropout3d", "instance_norm", "max_pool3d", "max_unpool1d",
    "max_unpool2d", "max_unpool3d", "pixel_shuffle", "pixel_unshuffle", "rms_norm",
    "margin_ranking_loss", "triplet_margin_loss",
    "sparse_softmax_cross_entropy", "gumbel_softmax", "grid_sample",
    "huber_loss",
]

# ---- the activation family (its own block: other families add theirs below) ----------------
from actorflow.functional.activation import (  # noqa: E402,F401
    celu, hardshrink, hardsigmoid, hardswish, hardtanh, logsigmoid, mish, relu6, rrelu, rrelu_,
    selu, softshrink, softsign, threshold,
)
from actorflow.functional.activation import threshold as _threshold  # noqa: E402
from actorflow.functional.special import (  # noqa: E402,F401
    glu, prelu, quick_gelu, square_relu, tanhshrink,
)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``softmax(-input, dim)``."""
    x = input if dtype is None else input.to(dtype)
    return softmax(-x, dim)


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return input.relu_()


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``elu``."""
    return elu(input, alpha, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``celu``."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """In-place ``selu``."""
    return selu(input, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place ``leaky_relu``."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place ``hardtanh``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place ``threshold``."""
    return _threshold(input, threshold, value, inplace=True)


__all__ += [
    "celu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid", "mish", "relu6",
    "selu", "softshrink", "softsign", "threshold", "glu", "prelu", "quick_gelu", "square_relu",
    "tanhshrink", "softmin", "relu_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_",
    "threshold_", "rrelu", "rrelu_",
]
__all__ += ["cosine_similarity", "pairwise_distance"]

# ---- decoding and margin losses (OneFlow's nn.functional extras) ------------------------------
from actorflow.functional.ctc import ctc_loss  # noqa: E402,F401
from actorflow.functional.decode import ctc_greedy_decoder  # noqa: E402,F401
from actorflow.functional.margin_loss import combined_margin_loss  # noqa: E402,F401

__all__ += ["ctc_loss", "ctc_greedy_decoder", "combined_margin_loss"]

# ---- resampling -------------------------------------------------------------------------------
from actorflow.functional.interpolate import interpolate, upsample  # noqa: E402,F401

__all__ += ["interpolate", "upsample"]
from actorflow.functional.deform_conv import deform_conv2d  # noqa: E402,F401

__all__ += ["deform_conv2d"]
