"""``scatter_nd`` and ``in_top_k`` (ops in ``actorflow/ops/index_extra.py``), with the Tensor
methods ``in_top_k`` and ``nms`` (OneFlow's: ``boxes.nms(scores, iou_threshold)``)."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.decode import nms
from actorflow.functional.index import _index_tensor
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

__all__ = ["scatter_nd", "in_top_k"]

_SCATTER_ND = registry.get("scatter_nd")
_IN_TOP_K = registry.get("in_top_k")


def scatter_nd(index: Tensor, update: Tensor, shape) -> Tensor:
    """A zero tensor of ``shape`` with ``update`` added at ``index``: ``index[..., :k]`` names
    an element (or a slice, when k < len(shape)) for each entry of ``update``, of shape
    ``index.shape[:-1] + shape[k:]``; repeated indices add up."""
    index = _index_tensor(index)
    return apply(_SCATTER_ND, [index, update], {"shape": tuple(int(s) for s in shape)})[0]


def in_top_k(targets: Tensor, predictions: Tensor, k: int) -> Tensor:
    """For each row i, whether ``predictions[i, targets[i]]`` is among the ``k`` largest
    values of the row (ties count in its favour); (N,) bool."""
    if predictions.dtype is not dt.float32 and predictions.dtype.is_floating_point:
        predictions = predictions.to(dt.float32)  # OneFlow compares float32 predictions
    return apply(_IN_TOP_K, [targets, predictions], {"k": int(k)})[0]


def _nms_method(self: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """``flow.nms(self, scores, iou_threshold)``: the kept box indices, by falling score."""
    return nms(self, scores, iou_threshold)


register_tensor_methods({"in_top_k": in_top_k, "nms": _nms_method})
