"""nms and ctc_greedy_decoder against plain-Python references."""
import numpy as np
import pytest

import actorflow as flow


def _iou(a, b):
    w = max(min(a[2], b[2]) - max(a[0], b[0]), 0)
    h = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _nms_ref(boxes, scores, thr):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept = []
    for i in order:
        if all(_iou(boxes[i], boxes[k]) <= thr for k in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
@pytest.mark.parametrize("thr", [0.1, 0.5, 0.9])
def test_nms(dtype, thr):
    rng = np.random.default_rng(0)
    boxes = rng.random((60, 4)) * 50
    boxes[:, 2:] += boxes[:, :2] + 1
    scores = rng.permutation(60).astype(np.float64)
    keep = flow.nms(flow.tensor(boxes, dtype=dtype), flow.tensor(scores, dtype=dtype), thr)
    assert keep.dtype == flow.int64
    assert keep.numpy().tolist() == _nms_ref(boxes, scores, thr)
    assert len(flow.nms(flow.tensor(boxes), flow.tensor(scores), thr, keep_n=3)) == 3
    with pytest.raises(ValueError, match="nms: scores must be"):
        flow.nms(flow.tensor(boxes), flow.tensor(scores[:5]), thr)


def _ctc_ref(lp, lengths, merge):
    t_max, n, c = lp.shape
    decoded, neg = np.zeros((n, t_max), np.int64), np.zeros((n, 1))
    for b in range(n):
        prev, out = -1, []
        for t in range(lengths[b]):
            k = int(np.argmax(lp[t, b]))
            neg[b, 0] -= lp[t, b, k]
            if k != c - 1 and not (merge and k == prev):
                out.append(k)
            prev = k
        decoded[b, :len(out)] = out
    return decoded, neg


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_greedy_decoder(merge):
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((12, 5, 4)) * 2
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lengths = np.array([12, 7, 0, 3, 10])
    decoded, neg = flow.nn.functional.ctc_greedy_decoder(
        flow.tensor(lp), flow.tensor(lengths), merge)
    want_d, want_n = _ctc_ref(lp, lengths, merge)
    np.testing.assert_array_equal(decoded.numpy(), want_d)
    np.testing.assert_allclose(neg.numpy(), want_n, rtol=1e-12)
    with pytest.raises(Exception, match="ctc_greedy_decoder: input_lengths"):
        flow.nn.functional.ctc_greedy_decoder(flow.tensor(lp), flow.tensor([13, 1, 1, 1, 1]))
        flow.synchronize()


def test_in_a_graph_ctc_traces_and_nms_refuses():
    lp = np.log(np.random.default_rng(2).dirichlet(np.ones(4), size=(6, 2)))
    lengths = np.array([6, 4])

    class Ctc(flow.nn.Graph):
        def build(self, a, n):
            return flow.nn.functional.ctc_greedy_decoder(a, n)

    got = Ctc()(flow.tensor(lp), flow.tensor(lengths))
    want = flow.nn.functional.ctc_greedy_decoder(flow.tensor(lp), flow.tensor(lengths))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())

    class Nms(flow.nn.Graph):
        def build(self, b, s):
            return flow.nms(b, s, 0.5)

    boxes = flow.tensor([[0.0, 0, 2, 2], [0, 0, 2, 2.1], [5, 5, 6, 6]])
    with pytest.raises(Exception, match="nonzero"):
        Nms()(boxes, flow.tensor([0.9, 0.8, 0.7]))
