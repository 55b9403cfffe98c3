"""F.deform_conv2d (torchvision / OneFlow semantics): against a direct NumPy transcription of
torchvision's per-sample bilinear formula, against PyTorch's conv2d for zero offsets,
gradients by finite differences in float64, inside nn.Graph, and its errors."""
import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

F = flow.nn.functional
rng = np.random.default_rng(0)


def _bilinear(plane, y, x):
    h, w = plane.shape
    if y <= -1 or y >= h or x <= -1 or x >= w:
        return 0.0
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    ly, lx = y - y0, x - x0
    total = 0.0
    for yy, xx, wt in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                       (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
        if 0 <= yy < h and 0 <= xx < w:
            total += wt * plane[yy, xx]
    return total


def _reference(x, offset, weight, bias, stride, padding, dilation, mask):
    """torchvision's deform_conv2d, one sample at a time (tiny sizes only)."""
    n, c, h, w = x.shape
    cout, cpg, kh, kw = weight.shape
    groups, ogroups = c // cpg, offset.shape[1] // (2 * kh * kw)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hout, wout = offset.shape[2:]
    out = np.zeros((n, cout, hout, wout))
    for b in range(n):
        for co in range(cout):
            g = co // (cout // groups)
            for ho in range(hout):
                for wo in range(wout):
                    acc = 0.0 if bias is None else bias[co]
                    for ci in range(cpg):
                        ch = g * cpg + ci
                        og = ch // (c // ogroups)
                        for i in range(kh):
                            for j in range(kw):
                                k = i * kw + j
                                dy = offset[b, og * 2 * kh * kw + 2 * k, ho, wo]
                                dx = offset[b, og * 2 * kh * kw + 2 * k + 1, ho, wo]
                                v = _bilinear(x[b, ch], ho * sh - ph + i * dh + dy,
                                              wo * sw - pw + j * dw + dx)
                                if mask is not None:
                                    v *= mask[b, og * kh * kw + k, ho, wo]
                                acc += weight[co, ci, i, j] * v
                    out[b, co, ho, wo] = acc
    return out


GEOMETRIES = [
    dict(c=2, cout=3, k=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), og=1),
    dict(c=4, cout=4, k=(2, 3), stride=(2, 1), padding=(0, 1), dilation=(1, 2), og=2,
         groups=2),
]


def _inputs(g, hw=(5, 6), scale=1.5):
    kh, kw = g["k"]
    groups = g.get("groups", 1)
    (sh, sw), (ph, pw), (dh, dw) = g["stride"], g["padding"], g["dilation"]
    hout = (hw[0] + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wout = (hw[1] + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    x = rng.standard_normal((2, g["c"]) + hw)
    off = rng.uniform(-scale, scale, (2, 2 * g["og"] * kh * kw, hout, wout))
    weight = rng.standard_normal((g["cout"], g["c"] // groups, kh, kw))
    bias = rng.standard_normal(g["cout"])
    mask = rng.uniform(0, 1, (2, g["og"] * kh * kw, hout, wout))
    return x, off, weight, bias, mask


@pytest.mark.parametrize("geom", GEOMETRIES)
@pytest.mark.parametrize("use_mask", [False, True])
def test_deform_conv2d_matches_reference(geom, use_mask):
    x, off, weight, bias, mask = _inputs(geom)
    kw = dict(stride=geom["stride"], padding=geom["padding"], dilation=geom["dilation"])
    got = F.deform_conv2d(flow.tensor(x), flow.tensor(off), flow.tensor(weight),
                          flow.tensor(bias), mask=flow.tensor(mask) if use_mask else None, **kw)
    want = _reference(x, off, weight, bias, geom["stride"], geom["padding"], geom["dilation"],
                      mask if use_mask else None)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)


def test_zero_offsets_are_conv2d():
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    weight = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    off = np.zeros((2, 18, 3, 4), np.float32)
    got = F.deform_conv2d(flow.tensor(x), flow.tensor(off), flow.tensor(weight), stride=2,
                          padding=1)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(weight), stride=2,
                                      padding=1, groups=2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_deform_conv2d_gradients():
    g = dict(c=2, cout=2, k=(2, 2), stride=(1, 1), padding=(1, 0), dilation=(1, 1), og=1)
    # offsets away from integers, so the bilinear weights are smooth around them
    x, off, weight, bias, mask = _inputs(g, hw=(3, 3), scale=0.9)
    off = np.round(off) + rng.uniform(0.2, 0.8, off.shape)

    def fn(a, o, wt, b, m):
        return F.deform_conv2d(a, o, wt, b, padding=(1, 0), mask=m)

    gradcheck(fn, x, off, weight, bias, mask, atol=1e-6)


def test_deform_conv2d_in_graph_matches_eager():
    x, off, weight, bias, mask = (a.astype(np.float32) for a in _inputs(GEOMETRIES[0]))
    args = [flow.tensor(a) for a in (x, off, weight, bias, mask)]

    class G(flow.nn.Graph):
        def build(self, a, o, wt, b, m):
            return F.deform_conv2d(a, o, wt, b, padding=1, mask=m)

    np.testing.assert_allclose(G()(*args).numpy(),
                               F.deform_conv2d(*args[:4], padding=1, mask=args[4]).numpy(),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.timeout(60)
def test_deform_conv2d_errors():
    x, w = flow.ones(1, 2, 5, 5), flow.ones(3, 2, 3, 3)
    with pytest.raises(ValueError, match="offset must be \\(N, 18, 3, 3\\)"):
        F.deform_conv2d(x, flow.zeros(1, 18, 4, 4), w)
    with pytest.raises(ValueError, match="positive multiple of 2 \\* kh \\* kw = 18"):
        F.deform_conv2d(x, flow.zeros(1, 10, 3, 3), w)
    with pytest.raises(ValueError, match="mask must be \\(N, 9, 3, 3\\)"):
        F.deform_conv2d(x, flow.zeros(1, 18, 3, 3), w, mask=flow.ones(1, 8, 3, 3))
    with pytest.raises(ValueError, match="input must be 4-d"):
        F.deform_conv2d(flow.ones(2, 5, 5), flow.zeros(1, 18, 3, 3), w)
