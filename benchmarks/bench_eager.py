"""Eager-mode benchmarks: per-op overhead and training-step time against references.

    python benchmarks/bench_eager.py [--quick]

(1) microseconds per eager op on tiny tensors (add, 8x8 matmul, relu with backward) for
actorflow and PyTorch; (2) milliseconds per training step of an MLP 784-1024-1024-10 (batch 256,
SGD) and of the GPT example, for actorflow eager, PyTorch eager and a hand-written NumPy step
(``benchmarks/numpy_gpt.py`` for the GPT). All figures come from the same run; ratios are
actorflow / reference. Step times are the fastest of several rounds in which the runners take
turns, every step ending with ``flow.synchronize()``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks.common import (quick_parser, race, table, time_per_call, torch,  # noqa: E402
                               versions)


# ---- (1) tiny ops ----------------------------------------------------------------------------

def tiny_ops(min_time):
    rows = []
    a, b = flow.randn(8, 8), flow.randn(8, 8)
    x = flow.randn(8, 8, requires_grad=True)

    def relu_bwd_af():
        x.relu().sum().backward()

    cases = [("add 8x8", lambda: a + b), ("matmul 8x8", lambda: flow.matmul(a, b)),
             ("relu + sum + backward 8x8", relu_bwd_af)]
    tcases = [None] * 3
    if torch is not None:
        ta, tb = torch.randn(8, 8), torch.randn(8, 8)
        tx = torch.randn(8, 8, requires_grad=True)

        def relu_bwd_t():
            tx.relu().sum().backward()
        tcases = [lambda: ta + tb, lambda: torch.matmul(ta, tb), relu_bwd_t]
    for (name, fn), tfn in zip(cases, tcases):
        us = time_per_call(fn, min_time=min_time, sync=flow.synchronize) * 1e6
        tus = time_per_call(tfn, min_time=min_time) * 1e6 if tfn else float("nan")
        rows.append((name, f"{us:.1f}", f"{tus:.1f}", f"{us / tus:.2f}x"))
    return table(rows, ["op", "actorflow µs", "PyTorch µs", "ratio"])


# ---- (2) MLP step -----------------------------------------------------------------------------

def mlp_numpy_step(params, x, y, lr):
    """A hand-written NumPy training step (the floor for a NumPy backend)."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = x @ w1.T + b1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ w2.T + b2
    a2 = np.maximum(h2, 0)
    logits = a2 @ w3.T + b3
    m = logits.max(1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    g = p
    g[np.arange(n), y] -= 1
    g /= n
    gw3, gb3 = g.T @ a2, g.sum(0)
    g = (g @ w3) * (h2 > 0)
    gw2, gb2 = g.T @ a1, g.sum(0)
    g = (g @ w2) * (h1 > 0)
    gw1, gb1 = g.T @ x, g.sum(0)
    for p_, g_ in zip(params, (gw1, gb1, gw2, gb2, gw3, gb3)):
        p_ -= lr * g_
    return loss


GPT_CONFIG = {"batch": 32, "block": 64, "layers": 2, "heads": 4, "embd": 64}
GPT_VOCAB = 96
GPT_ADAMW = {"lr": 1e-3, "weight_decay": 0.01}  # one AdamW for every runner (OneFlow's default
#                                                 weight decay is 0, PyTorch's 0.01)


def af_mlp():
    """The actorflow MLP 784-1024-1024-10 (seeded) and its SGD, as every benchmark runs it."""
    nn = flow.nn
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    return model, flow.optim.SGD(model.parameters(), lr=0.01)


def af_gpt(cfg: dict):
    """The GPT example (seeded) and its AdamW, as every benchmark runs it."""
    from examples.gpt import GPT
    flow.manual_seed(0)
    model = GPT(GPT_VOCAB, cfg["block"], cfg["layers"], cfg["heads"], cfg["embd"])
    return model, flow.optim.AdamW(model.parameters(), **GPT_ADAMW)


def mlp_loss(model, x, y):
    return flow.nn.functional.cross_entropy(model(x), y)


def gpt_loss(model, x, y):
    return model(x, y)[1]


def eager_step(model, opt, loss_fn, x, y):
    """One eager training step of ``model`` on (x, y); returns the loss."""
    def step():
        loss = loss_fn(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def mlp_data():
    """(x, y) of the MLP benchmark: a batch of 256 784-vectors and class labels."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256)


def gpt_data(cfg: dict):
    """(x, y) token batches of the GPT benchmark."""
    rng = np.random.default_rng(0)
    shape = (cfg["batch"], cfg["block"])
    return rng.integers(0, GPT_VOCAB, shape), rng.integers(0, GPT_VOCAB, shape)


def mlp_numpy_params() -> list:
    """Weights (out, in) and biases of the MLP for ``mlp_numpy_step``."""
    rng = np.random.default_rng(1)
    params = []
    for o, i in [(1024, 784), (1024, 1024), (10, 1024)]:
        params += [(rng.standard_normal((o, i)) * 0.02).astype(np.float32),
                   np.zeros(o, np.float32)]
    return params


def torch_mlp_step(x, y):
    """A PyTorch SGD step of the MLP 784-1024-1024-10 on (x, y); returns the loss."""
    tm = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                             torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                             torch.nn.Linear(1024, 10))
    topt = torch.optim.SGD(tm.parameters(), lr=0.01)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        loss = torch.nn.functional.cross_entropy(tm(tx), ty)
        topt.zero_grad()
        loss.backward()
        topt.step()
        return loss
    return step


def torch_gpt_step(cfg: dict, x, y):
    """A PyTorch AdamW step of the GPT example's architecture on (x, y); returns the loss."""
    tm = torch_gpt(GPT_VOCAB, cfg)
    topt = torch.optim.AdamW(tm.parameters(), **GPT_ADAMW)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        logits = tm(tx)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, GPT_VOCAB), ty.reshape(-1))
        topt.zero_grad()
        loss.backward()
        topt.step()
        return loss
    return step


def mlp_steps(min_time):
    x, y = mlp_data()
    params_np = mlp_numpy_params()
    runners = {"NumPy (hand-written)": lambda: mlp_numpy_step(params_np, x, y, 0.01),
               "actorflow eager": eager_step(*af_mlp(), mlp_loss, flow.from_numpy(x),
                                             flow.from_numpy(y))}
    if torch is not None:
        runners["PyTorch eager"] = torch_mlp_step(x, y)
    return race(runners, min_time * len(runners), sync=flow.synchronize)


# ---- GPT step ----------------------------------------------------------------------------------

def gpt_steps(min_time, cfg):
    from benchmarks.numpy_gpt import NumpyGPT
    x, y = gpt_data(cfg)
    model, opt = af_gpt(cfg)
    ng = NumpyGPT.from_state_dict(model.state_dict(), cfg["heads"], **GPT_ADAMW)
    runners = {"NumPy (hand-written)": lambda: ng.step(x, y),
               "actorflow eager": eager_step(model, opt, gpt_loss, flow.from_numpy(x),
                                             flow.from_numpy(y))}
    if torch is not None:
        runners["PyTorch eager"] = torch_gpt_step(cfg, x, y)
    return race(runners, min_time * len(runners), sync=flow.synchronize)


def torch_gpt(V, cfg):
    """The same architecture as examples/gpt.py, in PyTorch."""
    F = torch.nn.functional
    C, H, T = cfg["embd"], cfg["heads"], cfg["block"]

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
            self.qkv, self.proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(C, 4 * C), torch.nn.GELU(),
                                           torch.nn.Linear(4 * C, C))

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.reshape(B, T_, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T_, C))
            return x + self.mlp(self.ln2(x))

    class TGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = torch.nn.Embedding(V, C), torch.nn.Embedding(T, C)
            self.blocks = torch.nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = torch.nn.LayerNorm(C)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            return F.linear(self.ln_f(x), self.tok.weight)
    return TGPT()


def main(argv=None):
    args = quick_parser().parse_args(argv)
    min_time = 0.3 if args.quick else 1.0
    print(versions())
    print("## (1) eager op overhead, tiny tensors\n")
    print(tiny_ops(min_time))
    print("\n## (2) training step time\n")
    cfg = GPT_CONFIG
    gpt_name = (f"GPT example (b{cfg['batch']}, T{cfg['block']}, {cfg['layers']} layers, "
                f"d{cfg['embd']}), AdamW")
    rows = []
    for model, res in (("MLP 784-1024-1024-10, b256, SGD", mlp_steps(min_time)),
                       (gpt_name, gpt_steps(min_time, cfg))):
        ref_t, ref_np = res.get("PyTorch eager"), res["NumPy (hand-written)"]
        for k, v in res.items():
            rows.append((model, k, f"{v * 1e3:.2f}", f"{v / ref_t:.2f}x" if ref_t else "-",
                         f"{v / ref_np:.2f}x"))
    print(table(rows, ["model", "runner", "ms/step", "vs PyTorch", "vs NumPy"]))


if __name__ == "__main__":
    main()
