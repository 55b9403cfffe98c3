"""Run under ``mpiexec -n N``: every optimizer of ``flow.optim`` updates global parameters
(broadcast ones with a split(0) batch, and split(0) ones for the elementwise updates) to the
parameters one process reaches on the full batch. Prints ``OK rank R`` at the end."""
import numpy as np

import actorflow as flow
import actorflow.nn.functional as nnf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n > 1, "run me under mpiexec"
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(11)
N, D, H, C = 4 * n + 3, 6, 8, 4   # an uneven batch
X = rng.standard_normal((N, D)).astype(np.float32)
Y = rng.integers(0, C, size=N)
init = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((H, D), (H,), (C, H), (C,))]

OPTIMS = [
    ("sgd-momentum", lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3)),
    ("sgd-nesterov", lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)),
    ("sgd", lambda ps: flow.optim.SGD(ps, lr=0.2)),
    ("adam", lambda ps: flow.optim.Adam(ps, lr=0.05)),
    ("adam-amsgrad", lambda ps: flow.optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.01)),
    ("adamw", lambda ps: flow.optim.AdamW(ps, lr=0.05, weight_decay=0.1)),
    ("lamb", lambda ps: flow.optim.LAMB(ps, lr=0.05)),
    ("rmsprop", lambda ps: flow.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True)),
    ("adagrad", lambda ps: flow.optim.Adagrad(ps, lr=0.1, lr_decay=0.01)),
    ("adadelta", lambda ps: flow.optim.Adadelta(ps, lr=1.0)),
]


def train(make_opt, params, x, y, steps=6):
    opt = make_opt(params)
    for _ in range(steps):
        w1, b1, w2, b2 = params
        h = flow.relu(nnf.linear(x, w1, b1))
        loss = nnf.cross_entropy(nnf.linear(h, w2, b2), y, reduction="sum") / N
        opt.zero_grad()
        loss.backward()
        opt.step()
    return params, opt


gx, gy = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
lx, ly = flow.tensor(X), flow.tensor(Y)
for name, make_opt in OPTIMS:
    glob, gopt = train(make_opt, [flow.tensor(a, placement=PL, sbp=B, requires_grad=True)
                                  for a in init], gx, gy)
    loc, _ = train(make_opt, [flow.tensor(a, requires_grad=True) for a in init], lx, ly)
    for k, (g, lo) in enumerate(zip(glob, loc)):
        assert g.is_global and g.sbp == (B,), (name, k, g.sbp)
        np.testing.assert_allclose(g.numpy(), lo.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=f"rank {r}: {name}: parameter {k}")
        np.testing.assert_array_equal(g.to_local().numpy(), g.numpy(), err_msg=f"{name} {k}")
        for key, st in gopt.state[g].items():  # state lives where the parameter lives
            assert st.is_global and st.placement == PL, (name, key)
    assert not np.allclose(glob[0].numpy(), init[0]), name  # it moved

# split(0) parameters (an elementwise objective): the update runs on the shards
T = rng.standard_normal((N, D)).astype(np.float32)
for name, make_opt in OPTIMS:
    if name == "lamb":
        continue  # LAMB's trust ratio needs the whole parameter's norm
    results = []
    for glob_ in (True, False):
        kw = dict(placement=PL, sbp=S0) if glob_ else {}
        p = flow.tensor(init[0].repeat(3, 0)[:N], requires_grad=True, **kw)
        t = flow.tensor(T, **kw)
        opt = make_opt([p])
        for _ in range(5):
            opt.zero_grad()
            ((p - t) ** 2).sum().backward()
            opt.step()
        if glob_:
            assert p.sbp == (S0,) and p.grad.sbp == (S0,), (name, p.sbp, p.grad.sbp)
            for key, st in opt.state[p].items():
                want = (B,) if st.ndim == 0 else (S0,)
                assert st.sbp == want, (name, key, st.sbp)
        results.append(p.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6,
                               err_msg=f"rank {r}: {name} on split(0)")

# LBFGS (tensor ops on the flattened parameters), gradient clipping and zero_grad in place
A = rng.standard_normal((N, 3)).astype(np.float32)
results = []
for glob_ in (True, False):
    pkw = dict(placement=PL, sbp=B) if glob_ else {}
    dkw = dict(placement=PL, sbp=S0) if glob_ else {}
    w = flow.tensor(np.full(3, 0.1, np.float32), requires_grad=True, **pkw)
    a, t = flow.tensor(A, **dkw), flow.tensor(T[:, 0], **dkw)
    opt = flow.optim.LBFGS([w], lr=0.5, max_iter=2)  # short of the flat optimum

    def closure(opt=opt, a=a, w=w, t=t):
        opt.zero_grad(set_to_none=False)
        loss = ((a @ w - t) ** 2).sum() / N
        loss.backward()
        flow.nn.utils.clip_grad_norm_([w], 0.5)  # clips the first steps
        return loss
    for _ in range(2):
        opt.step(closure)
    assert w.is_global == glob_
    results.append(w.numpy())
np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-5,
                           err_msg=f"rank {r}: LBFGS")

# LAMB on a split parameter says why it can't
p = flow.tensor(init[0], placement=PL, sbp=S0, requires_grad=True)
opt = flow.optim.LAMB([p], lr=0.1)
(p * p).sum().backward()
try:
    opt.step()
    raise AssertionError("LAMB on split(0) should raise")
except ValueError as e:
    assert "lamb_update" in str(e), e
flow.synchronize()
print(f"OK rank {r}", flush=True)
