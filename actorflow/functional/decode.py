"""Decoding functions: ``nms`` (non-maximum suppression, as ``flow.nms`` /
torchvision's) and ``ctc_greedy_decoder`` (``flow.nn.functional``); the ops are in
``actorflow/ops/decode.py``."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.index import index_select, nonzero
from actorflow.functional.sort import argsort
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["nms", "ctc_greedy_decoder"]

_NMS = registry.get("nms")
_CTC_GREEDY = registry.get("ctc_greedy_decoder")


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, keep_n: int = -1) -> Tensor:
    """Indices (int64) of the boxes non-maximum suppression keeps, by falling score: a box
    goes when its IoU with a higher-scoring kept box exceeds ``iou_threshold``. ``boxes`` is
    (N, 4) as (x1, y1, x2, y2), ``scores`` (N,). The result's length depends on the values,
    so this reads them (it cannot be traced into a Graph)."""
    if len(scores._shape) != 1 or scores._shape[0] != boxes._shape[0]:
        raise ValueError(f"nms: scores must be (N,) for boxes (N, 4), got shapes "
                         f"{tuple(boxes._shape)} and {tuple(scores._shape)}")
    order = argsort(scores, dim=0, descending=True)
    keep = apply(_NMS, [index_select(boxes, 0, order)],
                 {"iou_threshold": float(iou_threshold), "keep_n": int(keep_n)})[0]
    return index_select(order, 0, nonzero(keep).reshape(-1))


def ctc_greedy_decoder(log_probs: Tensor, input_lengths: Tensor,
                       merge_repeated: bool = True) -> tuple:
    """Best-path CTC decoding of ``log_probs`` (T, N, C), blank = C - 1: ``(decoded (N, T)
    int64 zero-padded, neg_sum_logits (N, 1))``."""
    if input_lengths.dtype != dt.int64:
        input_lengths = input_lengths.to(dt.int64)
    return tuple(apply(_CTC_GREEDY, [log_probs, input_lengths],
                       {"merge_repeated": bool(merge_repeated)}))
