"""``combined_margin_loss``: the additive/multiplicative angular margins of face recognition
(SphereFace m1, ArcFace m2, CosFace m3) applied to each row's target logit, as OneFlow's
``flow._C.combined_margin_loss``. A composite of gather, arccos, cos and one_hot, so its
gradient comes from those ops."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.functional.activation import acos, cos
from actorflow.functional.elementwise import add, mul, sub
from actorflow.functional.index import gather, one_hot
from actorflow.tensor import Tensor

__all__ = ["combined_margin_loss"]


def combined_margin_loss(x: Tensor, label: Tensor, m1: float = 1.0, m2: float = 0.0,
                         m3: float = 0.0) -> Tensor:
    """``x`` (N, C) of cosines with each row's target ``x[i, label[i]] = cos t`` replaced by
    ``cos(m1 * t + m2) - m3`` (only ``- m3`` when m1 = 1 and m2 = 0)."""
    if len(x._shape) != 2 or tuple(label._shape) != (x._shape[0],):
        raise ValueError(f"combined_margin_loss: expects x (N, C) and label (N,), got shapes "
                         f"{tuple(x._shape)} and {tuple(label._shape)}")
    if m1 == 1.0 and m2 == 0.0 and m3 == 0.0:
        return x
    label = label.to(dt.int64)
    hot = one_hot(label, x._shape[1]).to(x.dtype)
    if m1 == 1.0 and m2 == 0.0:
        return sub(x, mul(hot, m3))
    z = gather(x, 1, label.reshape(-1, 1))
    t = acos(z)
    if m1 != 1.0:
        t = mul(t, m1)
    if m2 != 0.0:
        t = add(t, m2)
    target = cos(t)
    if m3 != 0.0:
        target = sub(target, m3)
    return add(x, mul(hot, sub(target, z)))
