"""Decoding ops of detection and sequence models (OneFlow's): ``nms`` (which of a list of
boxes, sorted by falling score, non-maximum suppression keeps) and ``ctc_greedy_decoder``
(best path of CTC log-probabilities). Neither has a gradient."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.registry import Meta, fail, register

nms = register(
    "nms",
    doc="Non-maximum suppression over boxes (N, 4) as (x1, y1, x2, y2), sorted by falling "
        "score: out[i] = 1 when box i is kept, else 0 (int8, shape (N,)); a box is dropped "
        "when its IoU with a kept earlier box exceeds iou_threshold. keep_n > 0 keeps at most "
        "that many.")


@nms.infer
def _(inputs, attrs):
    boxes = inputs[0]
    if len(boxes._shape) != 2 or boxes._shape[1] != 4:
        fail("nms", "boxes must have shape (N, 4)", boxes._shape)
    if not boxes.dtype.is_floating_point:
        fail("nms", f"boxes must be floating point, got {boxes.dtype}", boxes._shape)
    return [Meta((boxes._shape[0],), dt.int8)]


@nms.kernel("cpu")
def _(ins, outs, attrs):
    b = ins[0]
    keep = outs[0]
    n = b.shape[0]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    alive = np.ones(n, dtype=bool)
    limit = attrs["keep_n"] if 0 < attrs["keep_n"] <= n else n
    kept = 0
    thr = attrs["iou_threshold"]
    for i in range(n):
        if not alive[i]:
            continue
        if kept == limit:
            alive[i:] = False
            break
        kept += 1
        rest = b[i + 1:]
        w = np.maximum(np.minimum(b[i, 2], rest[:, 2]) - np.maximum(b[i, 0], rest[:, 0]), 0)
        h = np.maximum(np.minimum(b[i, 3], rest[:, 3]) - np.maximum(b[i, 1], rest[:, 1]), 0)
        inter = w * h
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (area[i] + area[i + 1:] - inter)
        alive[i + 1:] &= ~(iou > thr)
    keep[...] = alive


ctc_greedy_decoder = register(
    "ctc_greedy_decoder",
    doc="Greedy (best path) CTC decoding: inputs log_probs (T, N, C) and input_lengths (N,) "
        "int64; the blank is class C - 1. Outputs decoded (N, T) int64 (each row's labels, "
        "blanks dropped and, with merge_repeated, repeats merged; zero-padded) and "
        "neg_sum_logits (N, 1): minus the sum of the chosen log-probabilities.")


@ctc_greedy_decoder.infer
def _(inputs, attrs):
    lp, lengths = inputs
    if len(lp._shape) != 3:
        fail("ctc_greedy_decoder", "log_probs must be (T, N, C)", lp._shape)
    if not lp.dtype.is_floating_point:
        fail("ctc_greedy_decoder", f"log_probs must be floating point, got {lp.dtype}")
    if tuple(lengths._shape) != (lp._shape[1],) or lengths.dtype._category != 1:
        fail("ctc_greedy_decoder", "input_lengths must be integers of shape (N,)", lp._shape,
             lengths._shape)
    t, n, _ = lp._shape
    return [Meta((n, t), dt.int64), Meta((n, 1), lp.dtype)]


@ctc_greedy_decoder.kernel("cpu")
def _(ins, outs, attrs):
    lp, lengths = ins
    decoded, neg = outs
    t_max, _, c = lp.shape
    if np.any(lengths > t_max) or np.any(lengths < 0):
        raise ValueError(f"ctc_greedy_decoder: input_lengths must be in [0, {t_max}], got "
                         f"{lengths.tolist()}")
    best = lp.argmax(axis=2)  # (T, N)
    decoded[...] = 0
    for b, length in enumerate(lengths.tolist()):
        path = best[:length, b]
        neg[b, 0] = -lp[np.arange(length), b, path].sum(dtype=np.float64)
        keep = path != c - 1
        if attrs["merge_repeated"] and length > 1:
            keep[1:] &= path[1:] != path[:-1]
        labels = path[keep]
        decoded[b, :len(labels)] = labels
