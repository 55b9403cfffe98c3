"""flow.amp.GradScaler used eagerly, step by step against torch.amp.GradScaler on the CPU: the
scaled loss, the unscaled gradients, the skipped step on a non-finite gradient, the scale's
back-off and growth."""
import numpy as np
import pytest

import actorflow as flow

torch = pytest.importorskip("torch")


def test_eager_grad_scaler_matches_torch():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    xs = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(6)]
    xs[2][0, 0] = np.inf  # step 2's gradient is not finite: skipped, the scale backs off
    fw = flow.nn.Parameter(flow.tensor(w0))
    tw = torch.nn.Parameter(torch.tensor(w0))
    fo, to = flow.optim.SGD([fw], lr=0.1), torch.optim.SGD([tw], lr=0.1)
    fs = flow.amp.GradScaler(init_scale=4.0, growth_interval=2)
    ts = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    for x in xs:
        fo.zero_grad()
        to.zero_grad()
        floss = (flow.tensor(x) @ fw.T).square().mean()
        tloss = (torch.tensor(x) @ tw.T).square().mean()
        scaled = fs.scale(floss)
        np.testing.assert_allclose(scaled.item(), ts.scale(tloss).item(), rtol=1e-6)
        scaled.backward()
        ts.scale(tloss).backward()
        fs.unscale_(fo)
        ts.unscale_(to)
        np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
        fs.step(fo)
        ts.step(to)
        fs.update()
        ts.update()
        assert fs.get_scale() == ts.get_scale()
        np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), rtol=1e-5)
    assert fs.get_scale() != 4.0


def test_grad_scaler_errors_and_state():
    s = flow.amp.GradScaler(init_scale=8.0)
    p = flow.nn.Parameter(flow.ones(2))
    opt = flow.optim.SGD([p], lr=1.0)
    (s.scale(p.sum())).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    s.update()
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
    t = flow.amp.GradScaler()
    t.load_state_dict(s.state_dict())
    assert t.get_scale() == 8.0 and t.state_dict() == s.state_dict()
    with pytest.raises(TypeError, match="GradScaler.scale"):
        s.scale(3.0)
    with pytest.raises(ValueError, match="init_scale"):
        flow.amp.GradScaler(init_scale=0)
