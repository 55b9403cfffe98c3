"""``histc``: a histogram of a tensor's values in ``bins`` equal-width bins over ``[min, max]``.

As PyTorch: ``min == max`` (the default 0, 0) takes the data's minimum and maximum (widened by
1 on each side when they are equal too); values outside the range are not counted; the last
bin includes ``max``; the result has the input's (floating) dtype. Not differentiable (as in
PyTorch). With an explicit range, histograms of the shards add up: a split input gives a
partial-sum result.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import HALF_DTYPES
from actorflow.ops.boxing import P, S, Sig
from actorflow.ops.registry import Meta, fail, register

histc = register("histc", doc="Histogram of the values in attr bins bins over [attr min, attr "
                              "max] (min == max: the data's range).")


@histc.infer
def _(inputs, attrs):
    x = inputs[0]
    bins, lo, hi = attrs["bins"], attrs["min"], attrs["max"]
    if not isinstance(bins, int) or bins <= 0:
        fail("histc", f"bins must be a positive int, got {bins!r}", x._shape)
    if lo > hi:
        fail("histc", f"max must be larger than min, got min={lo}, max={hi}", x._shape)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        fail("histc", f"range of [{lo}, {hi}] is not finite", x._shape)
    if not x.dtype.is_floating_point:
        fail("histc", f"expects a floating point input, got {x.dtype}", x._shape)
    return [Meta((bins,), x.dtype)]


@histc.sbp
def _(inputs, attrs):
    if attrs["min"] != attrs["max"]:  # the range does not depend on the data
        for d in range(len(inputs[0]._shape)):
            yield Sig((S(d),), (P,))


@histc.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    x = x.astype(np.float32) if x.dtype in HALF_DTYPES else x
    x = x.reshape(-1)
    lo, hi = float(attrs["min"]), float(attrs["max"])
    if lo == hi and x.size:
        finite = x[np.isfinite(x)]
        if finite.size != x.size:
            raise ValueError(f"histc: range of [{x.min()}, {x.max()}] is not finite")
        lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    bins = attrs["bins"]
    inside = x[(x >= lo) & (x <= hi)]
    # the bin of v is floor((v - lo) * bins / (hi - lo)), the last bin taking v == hi
    pos = ((inside.astype(np.float64) - lo) * bins / (hi - lo)).astype(np.int64)
    np.minimum(pos, bins - 1, out=pos)
    np.copyto(outs[0], np.bincount(pos, minlength=bins), casting="unsafe")
