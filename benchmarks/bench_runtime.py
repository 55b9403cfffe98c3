"""The actor runtime: µs per act, µs per graph call, and training steps against the peers.

    .venv/bin/python benchmarks/bench_runtime.py [--quick]

* µs per act on a chain of 1,000 tiny ops (the runtime's per-act cost: messages, readiness,
  the kernel call), with the reference executor's µs per op beside it;
* µs per call of a one-op graph (the whole path: VM instruction, buffers, source, sink);
* ms per training step of the MLP 784-1024-1024-10 (batch 256, SGD) for the graph on the actor
  runtime, eager actorflow, PyTorch eager (when installed) and a hand-written NumPy step;
* ms per training step of the GPT example (AdamW, dropout) for graph and eager.
Everything is measured in one run; the ratios are against the references of that run.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
import actorflow.nn as nn  # noqa: E402
from actorflow.job.builder import JobBuilder  # noqa: E402
from actorflow.job.executor import ReferenceExecutor  # noqa: E402
from actorflow.runtime.launcher import RuntimeExecutor  # noqa: E402
from benchmarks.common import table, time_per_call, torch  # noqa: E402


def chain_acts(n: int = 1000) -> tuple:
    """µs per act (runtime) and per op (reference executor) on a chain of n tiny adds."""
    x = flow.randn(4)
    b = JobBuilder("chain")
    with b:
        h = b.add_input(0, "x", x)
        for _ in range(n):
            h = h + 1.0
        b.add_output(0, "y", h)
    xa = x.numpy()
    rx, ref = RuntimeExecutor(b.job), ReferenceExecutor(b.job)
    acts = len(rx.plan.tasks)
    t_rt = time_per_call(lambda: rx.run([xa], {}), min_time=1.0)
    t_ref = time_per_call(lambda: ref.run([xa], {}), min_time=1.0)
    rx.close()
    return t_rt / acts * 1e6, t_ref / n * 1e6, acts


def one_op_call() -> float:
    """µs per call of a graph holding one relu, output read back."""
    class G(nn.Graph):
        def build(self, x):
            return x.relu()

    g = G()
    x = flow.randn(16)
    t = time_per_call(lambda: g(x).numpy(), min_time=1.0)
    g.close()
    return t * 1e6


def mlp_steps(quick: bool) -> dict:
    flow.manual_seed(0)
    dims = (784, 1024, 1024, 10)
    batch = 256
    x_np = np.random.default_rng(0).standard_normal((batch, dims[0])).astype(np.float32)
    y_np = np.random.default_rng(1).integers(0, dims[-1], batch)
    x, y = flow.tensor(x_np), flow.tensor(y_np)

    def make():
        flow.manual_seed(0)
        m = nn.Sequential(nn.Linear(dims[0], dims[1]), nn.ReLU(), nn.Linear(dims[1], dims[2]),
                          nn.ReLU(), nn.Linear(dims[2], dims[3]))
        return m, flow.optim.SGD(m.parameters(), lr=0.01)

    m_g, o_g = make()

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m_g
            self.add_optimizer(o_g)

        def build(self, x, y):
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            return loss

    g = Train()
    m_e, o_e = make()

    def eager():
        loss = nn.functional.cross_entropy(m_e(x), y)
        o_e.zero_grad()
        loss.backward()
        o_e.step()
        loss.numpy()

    W = [p.numpy().copy() for p in make()[0].parameters()]

    def numpy_step():
        w1, b1, w2, b2, w3, b3 = W
        h1 = x_np @ w1.T
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2.T
        h2 += b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3.T
        z += b3
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(1, keepdims=True)
        p[np.arange(batch), y_np] -= 1
        p /= batch
        gw3, gb3 = p.T @ a2, p.sum(0)
        ga2 = p @ w3
        ga2 *= h2 > 0
        gw2, gb2 = ga2.T @ a1, ga2.sum(0)
        ga1 = ga2 @ w2
        ga1 *= h1 > 0
        gw1, gb1 = ga1.T @ x_np, ga1.sum(0)
        for w, gw in zip(W, (gw1, gb1, gw2, gb2, gw3, gb3)):
            w -= 0.01 * gw

    min_time = 1.0 if quick else 3.0
    res = {"graph": time_per_call(lambda: g(x, y).numpy(), min_time=min_time),
           "eager": time_per_call(eager, min_time=min_time),
           "numpy": time_per_call(numpy_step, min_time=min_time)}
    if torch is not None:
        tm = torch.nn.Sequential(torch.nn.Linear(dims[0], dims[1]), torch.nn.ReLU(),
                                 torch.nn.Linear(dims[1], dims[2]), torch.nn.ReLU(),
                                 torch.nn.Linear(dims[2], dims[3]))
        to = torch.optim.SGD(tm.parameters(), lr=0.01)
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def torch_step():
            loss = torch.nn.functional.cross_entropy(tm(tx), ty)
            to.zero_grad()
            loss.backward()
            to.step()
            loss.item()

        res["torch"] = time_per_call(torch_step, min_time=min_time)
    g.close()
    return res


def gpt_steps(quick: bool) -> dict:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from gpt import GPT

    class cfg:  # the example's defaults, a little wider
        vocab_size, block_size, n_layer, n_head, n_embd, dropout = 96, 64, 2, 4, 128, 0.1

    batch = 16
    rng = np.random.default_rng(0)
    idx = flow.tensor(rng.integers(0, cfg.vocab_size, (batch, cfg.block_size)))
    tgt = flow.tensor(rng.integers(0, cfg.vocab_size, (batch, cfg.block_size)))

    def make():
        flow.manual_seed(0)
        m = GPT(cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd,
                cfg.dropout)
        return m, flow.optim.AdamW(m.parameters(), lr=3e-4)

    m_g, o_g = make()

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m_g
            self.add_optimizer(o_g)

        def build(self, idx, tgt):
            logits = self.model(idx)
            loss = nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size),
                                               tgt.reshape(-1))
            loss.backward()
            return loss

    g = Train()
    m_e, o_e = make()

    def eager():
        logits = m_e(idx)
        loss = nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), tgt.reshape(-1))
        o_e.zero_grad()
        loss.backward()
        o_e.step()
        loss.numpy()

    min_time = 1.0 if quick else 3.0
    res = {"graph": time_per_call(lambda: g(idx, tgt).numpy(), min_time=min_time),
           "eager": time_per_call(eager, min_time=min_time)}
    g.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing rounds")
    args = ap.parse_args()
    act_us, ref_us, acts = chain_acts()
    call_us = one_op_call()
    print(table([[f"{act_us:.1f}", f"{ref_us:.1f}", acts, f"{call_us:.0f}"]],
                ["µs per act (runtime)", "µs per op (reference)", "acts per call",
                 "µs per call, one-op graph"]))
    print()
    mlp = mlp_steps(args.quick)
    rows = [[k, f"{v * 1e3:.1f}", f"{v / mlp['graph']:.2f}"] for k, v in mlp.items()]
    print("MLP 784-1024-1024-10, batch 256, SGD (ms per step; ratio = time / graph time)")
    print(table(rows, ["", "ms/step", "x graph"]))
    print()
    gpt = gpt_steps(args.quick)
    rows = [[k, f"{v * 1e3:.1f}", f"{v / gpt['graph']:.2f}"] for k, v in gpt.items()]
    print("GPT example (2 layers, 128 wide, block 64, batch 16, AdamW, dropout 0.1)")
    print(table(rows, ["", "ms/step", "x graph"]))


if __name__ == "__main__":
    main()
