"""Shared test helpers: finite-difference gradient checks and PyTorch comparisons."""
from __future__ import annotations

import os

import threading
import time

import numpy as np

import actorflow as flow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:  # PyTorch is an optional reference
    import torch
except ImportError:  # pragma: no cover - the suite passes without it
    torch = None


def gradcheck(fn, *arrays, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-4,
              seed: int = 0, wrt=None):
    """Compare autograd gradients of ``fn(*tensors)`` with central finite differences (float64).

    ``arrays`` are NumPy arrays (made float64 tensors requiring grad) or other values passed
    through unchanged. The output (or each output of a tuple) is projected on a fixed random
    tensor so any output shape works. ``wrt`` limits the check to those argument indices.
    """
    rng = np.random.default_rng(seed)
    args = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            args.append(flow.tensor(a.astype(np.float64), requires_grad=True))
        else:
            args.append(a)
    check = [i for i, a in enumerate(args) if isinstance(a, flow.Tensor) and a.requires_grad]
    if wrt is not None:
        check = [i for i in check if i in wrt]

    out = fn(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    outs = [o for o in outs if isinstance(o, flow.Tensor) and o.dtype.is_floating_point]
    projections = [rng.standard_normal(tuple(o.shape)) for o in outs]

    def scalar(values):
        with flow.no_grad():
            res = fn(*values)
        res = res if isinstance(res, (tuple, list)) else (res,)
        res = [o for o in res if isinstance(o, flow.Tensor) and o.dtype.is_floating_point]
        return float(sum((o.numpy().astype(np.float64) * p).sum()
                         for o, p in zip(res, projections)))

    total = None
    for o, p in zip(outs, projections):
        term = (o * flow.tensor(p)).sum()
        total = term if total is None else total + term
    total.backward()
    for i in check:
        analytic = args[i].grad
        analytic = np.zeros(args[i].shape) if analytic is None else analytic.numpy()
        base = args[i].detach().numpy().copy()
        numeric = np.zeros_like(base)
        it = np.nditer(base, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            vals = []
            for sign in (1, -1):
                pert = base.copy()
                pert[idx] += sign * eps
                values = list(args)
                values[i] = flow.tensor(pert)
                vals.append(scalar(values))
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, atol=atol, rtol=rtol,
                                   err_msg=f"gradient of argument {i} differs from finite "
                                           f"differences")


def to_torch(a, requires_grad: bool = False):
    """A torch tensor with the same values as NumPy array ``a``."""
    t = torch.tensor(np.asarray(a))
    if requires_grad:
        t.requires_grad_(True)
    return t


def fail_if_negative_op():
    """A test op: identity whose kernel raises ``ValueError("negative input")`` when any input
    element is negative (registered once per process), for runtime error-path tests."""
    from actorflow.ops import registry
    from actorflow.ops.registry import Meta

    name = "_test_fail_if_negative"
    try:
        return registry.get(name)
    except KeyError:
        pass
    op = registry.register(name, doc="test op: identity, fails on x < 0")

    @op.infer
    def _(inputs, attrs):
        return [Meta(inputs[0]._shape, inputs[0].dtype)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        if (ins[0] < 0).any():
            raise ValueError("negative input")
        outs[0][...] = ins[0]

    return op


class SquareLossTrain(flow.nn.Graph):
    """A training graph: ``model(x).square().mean()`` as the loss, backward, ``opt``'s update."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = self.model(x).square().mean()
        loss.backward()
        return loss


class FnGraph(flow.nn.Graph):
    """A graph whose build calls one function of its inputs."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def build(self, *args):
        return self.fn(*args)


def slow_actors(monkeypatch, seconds: float = 0.02) -> None:
    """Make every input actor and kernel actor sleep ``seconds`` before computing, so that
    iterations in flight overlap visibly (runtime pipelining tests)."""
    from actorflow.runtime import actors as actor_mod

    def slowed(compute):
        def slow(self, ins, out):
            time.sleep(seconds)
            return compute(self, ins, out)
        return slow

    classes = (actor_mod.InputActor, actor_mod.KernelActor, actor_mod.LightKernelActor)
    originals = [cls.compute for cls in classes]  # before patching: a subclass may inherit it
    for cls, compute in zip(classes, originals):
        monkeypatch.setattr(cls, "compute", slowed(compute))


def generation_on() -> bool:
    """Whether an nn.Graph compiled now runs generated C kernels (ACTORFLOW_GRAPH_CODEGEN,
    on by default)."""
    from actorflow.compiler.compile import CompileOptions
    return CompileOptions().codegen


# Generated kernels call libm's tanh / exp / log where the NumPy kernels run NumPy's own SIMD
# implementations; in float32 the two differ by an ulp or two on some elements. A few training
# steps carry that to about 1e-7..1e-6 relative in losses and parameters, so with generation on
# graph-vs-eager results agree within these bounds (float32 rounding, with headroom for the
# optimizer steps); with it off they must be bit-identical.
GEN_RTOL, GEN_ATOL = 1e-5, 1e-6


def assert_graph_matches(got, want, msg: str = "", rtol: float = GEN_RTOL,
                         atol: float = GEN_ATOL) -> None:
    """``got`` (a graph's result) equals ``want`` bit for bit when generated kernels are off,
    and within ``rtol`` / ``atol`` (default ``GEN_RTOL`` / ``GEN_ATOL``) when they are on."""
    got, want = np.asarray(got), np.asarray(want)
    if generation_on():
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=msg)
    else:
        assert np.array_equal(got, want), f"{msg}: {got} vs {want}"


def numpy_kernels_under_adamw(monkeypatch) -> None:
    """Compare a model trained with AdamW on the NumPy kernels (generated kernels off for the
    graphs compiled in this test). AdamW steps each weight by about lr whatever its gradient's
    size, so the rounding noise of a near-zero gradient (a generated layer_norm or softmax
    reorders its row sums) becomes a step of noise in that weight: no float32 bound holds.
    The generated kernels' agreement is tested in tests/compiler and by the SGD models."""
    monkeypatch.setenv("ACTORFLOW_GRAPH_CODEGEN", "0")


def bounded_synchronize(timeout: float = 20.0) -> None:
    """synchronize() on another thread; fails the test instead of hanging."""
    box: list = []

    def run():
        try:
            flow.synchronize()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "synchronize() did not return: the VM is stuck"
    if box:
        raise box[0]
