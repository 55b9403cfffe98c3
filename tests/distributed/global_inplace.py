"""Run under ``mpiexec -n N`` (or alone): in-place writes into views of global tensors follow
eager-local tensors: refused into a view of a leaf that requires grad (a view of a view,
``to_local()`` and views of it) and, with grad mode on, into views made under no_grad();
written through into a view of a non-leaf; refused on every rank into a view whose shards are a
copy (its input had to be boxed); values and gradients against the same calls on local tensors.
Prints ``OK rank R``."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement("cpu", list(range(n)))
S0, B = flow.sbp.split(0), flow.sbp.broadcast
full = np.arange(6.0 * n).reshape(2 * n, 3)
LEAF = "a view of a leaf tensor that requires grad"
COPY = "view of a global tensor whose shards are a copy"
NO_GRAD = "was made under no_grad() and is being written in place with grad mode on"


def refused(what, fn, words):
    try:
        fn()
    except RuntimeError as e:
        assert words in str(e), f"rank {r}: {what}: {e}"
        return
    raise AssertionError(f"rank {r}: {what}: the in-place write was not refused")


def pair():
    return (flow.tensor(full, placement=PL, sbp=S0, requires_grad=True),
            flow.tensor(full, requires_grad=True))


x, xl = pair()
with flow.no_grad():
    views = [x[:, 0], x.transpose(0, 1), x[:, 1:][:, 0]]
    views_l = [xl[:, 0], xl.transpose(0, 1), xl[:, 1:][:, 0]]
for k, (v, vl) in enumerate(zip(views, views_l)):
    refused(f"local view {k}", lambda vl=vl: vl.add_(1), NO_GRAD)  # what eager-local does
    refused(f"global view {k}", lambda v=v: v.add_(1), NO_GRAD)
refused("x[:, 0] under grad", lambda: x[:, 0].mul_(2), LEAF)
refused("to_local()", lambda: x.to_local().add_(1), LEAF)
refused("a view of to_local()", lambda: x.to_local()[0].add_(1), LEAF)
refused("x[0] (boxed)", lambda: x[0].add_(1), COPY)
with flow.no_grad():  # writes into views of a leaf are fine without grad mode...
    x[:, 0].add_(100)
    xl[:, 0].add_(100)
    x.to_local()[:, 1].add_(10)  # each rank's own rows
    xl[:, 1].add_(10)
    refused("x[0] (boxed) under no_grad", lambda: x[0].add_(1), COPY)  # ...not lost ones
np.testing.assert_array_equal(x.numpy(), xl.numpy())

# into a view of a non-leaf: written through, gradients as eager-local
x, xl = pair()
ys = []
for t in (x, xl):
    y = t * 2
    c = y[:, 1]
    c.mul_(t[:, 2])
    ys.append(y)
np.testing.assert_allclose(ys[0].numpy(), ys[1].numpy())
w = np.random.default_rng(0).standard_normal(full.shape)
(ys[0] * flow.tensor(w, placement=PL, sbp=B)).sum().backward()
(ys[1] * flow.tensor(w)).sum().backward()
np.testing.assert_allclose(x.grad.numpy(), xl.grad.numpy())

# a chain of views written from a tensor that requires grad, the view used again after the
# write: eager-local rebases the base's history as PyTorch (dispatch/copy_slices.py)
x, xl = pair()
wg = flow.tensor(w[:, 0], placement=PL, sbp=B, requires_grad=True)
wl = flow.tensor(w[:, 0], requires_grad=True)
losses = []
for t, s in ((x, wg), (xl, wl)):
    y = t * 3
    c = y.t()[1:]
    c[0].copy_(s * 2)
    c.mul_(0.5)
    losses.append((y * y).sum() + (c * c).sum())
losses[0].backward()
losses[1].backward()
np.testing.assert_allclose(losses[0].numpy(), losses[1].numpy())
np.testing.assert_allclose(x.grad.numpy(), xl.grad.numpy())
np.testing.assert_allclose(wg.grad.numpy(), wl.grad.numpy())
print(f"OK rank {r}", flush=True)
