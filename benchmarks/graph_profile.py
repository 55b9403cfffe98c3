"""Where a training step's time goes, eager against nn.Graph, op by op.

    python benchmarks/graph_profile.py [--quick] [--model mlp|cnn|gpt|all] [--top K]

For each model (issue #17's: an MLP 784-1024-1024-10, batch 256, a small CNN on 3x32x32
images, batch 32, and a GPT with 4 layers, d128, T64, batch 16, all with SGD momentum) it runs
the same training step eagerly (asynchronous VM) and as an nn.Graph on the actor runtime, each
under ``flow.profiler.profile()``, which records every VM instruction (eager kernels) and every
actor act (graph kernels) with its start and end. ``ACTORFLOW_GRAPH_COMPUTE_LANES=2`` and
``ACTORFLOW_GRAPH_ALIAS_VIEWS=0`` select the compiler's options.
It prints:

* per op type: calls per step and kernel milliseconds per step in each mode, and the difference
  (the same kernels run in both, so an op that is slower in the graph is a finding: a copy
  where eager has a view, an extra cast, an unfused update, cold memory; fused ops of the graph
  show under their fused name);
* per mode: the wall time of a step, the kernels' total, and the difference: the time outside
  kernels (Python dispatch and autograd in eager; messages and thread hand-offs in the graph)
  when positive; negative when kernels overlap each other or the caller's Python (async eager,
  BLAS threads, intra-op threads), or when other load stretches kernel spans.

Kernel times come from the profiler's event spans: an instruction's span is its kernel call on
the VM worker; an act's span is the act (kernel plus a few attribute reads); "(view)" marks the
acts of view ops that publish an alias of their input instead of copying (issue #17). Steps are
timed separately, without the profiler, as the smallest of several rounds.
"""
from __future__ import annotations

import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import actorflow as flow  # noqa: E402
from benchmarks.common import env, quick_parser, table, versions  # noqa: E402

nn = flow.nn
F = flow.nn.functional

GPT = {"batch": 16, "block": 64, "layers": 4, "heads": 4, "embd": 128, "vocab": 96}


def mlp():
    """(model, loss function, x, y) of the MLP."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((256, 784)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 10, 256))
    return model, lambda m, a, b: F.cross_entropy(m(a), b), x, y


def gpt():
    """(model, loss function, x, y) of the GPT (the example's model, attention written with
    ordinary ops: the example's ``GPT`` with fused attention off where it allows)."""
    from examples.gpt import GPT as Model
    flow.manual_seed(0)
    c = GPT
    model = Model(c["vocab"], c["block"], c["layers"], c["heads"], c["embd"])
    rng = np.random.default_rng(0)
    shape = (c["batch"], c["block"])
    x = flow.tensor(rng.integers(0, c["vocab"], shape))
    y = flow.tensor(rng.integers(0, c["vocab"], shape))
    return model, lambda m, a, b: m(a, b)[1], x, y


def cnn():
    """(model, loss function, x, y) of a small CNN: two conv-batchnorm-relu-maxpool stages on
    3x32x32 images, batch 32, then a linear layer."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((32, 3, 32, 32)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 10, 32))
    return model, lambda m, a, b: F.cross_entropy(m(a), b), x, y


MODELS = {"mlp": ("MLP 784-1024-1024-10, b256, SGD momentum", mlp),
          "cnn": ("CNN conv16-conv32-linear, 3x32x32, b32, SGD momentum", cnn),
          "gpt": ("GPT 4 layers, d128, T64, b16, SGD momentum", gpt)}


def make_steps(build):
    """(eager step, graph step, graph), each a fresh copy of the model with SGD momentum."""
    eager = make_eager(build)[3]
    g, graph = make_graph(build)
    return eager, graph, g


def make_eager(build):
    """(model, x, y, step) of the eager training step of a fresh copy of the model, SGD
    momentum."""
    model, loss_fn, x, y = build()
    opt = flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        loss = loss_fn(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, x, y, step


def make_graph(build):
    """(graph, step) of a fresh copy of the model with SGD momentum, as an nn.Graph."""
    gmodel, loss_fn, gx, gy = build()
    gopt = flow.optim.SGD(gmodel.parameters(), lr=0.01, momentum=0.9)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = gmodel
            self.add_optimizer(gopt)

        def build(self, a, b):
            loss = loss_fn(self.model, a, b)
            loss.backward()
            return loss

    g = Train()
    return g, (lambda: g(gx, gy))


def reference_step(build):
    """A graph step on the reference executor (``ACTORFLOW_RUN_GRAPH_BY_VM=1``): the optimised
    Job's ops called one after another on one thread, no actors, no messages, but view ops as
    copying kernels (the Plan makes them aliases), so it is no bound on the actor runtime where
    a Job has many views (the GPT); on a Job without, it shows what the runtime adds."""
    _, step = make_graph(build)
    with env("ACTORFLOW_RUN_GRAPH_BY_VM", "1"):
        step().item()  # compiles on the reference executor
    return step


def step_time(step, steps: int, rounds: int) -> float:
    """Seconds per step: the fastest of ``rounds`` rounds of ``steps`` synchronised steps.

    ``.item()`` waits for the loss only; the round ends with ``flow.synchronize()`` inside the
    timed span, so eager's last backward and update count (without it eager looked a third of a
    backward faster per step in ``--quick``)."""
    best = float("inf")
    for _ in range(rounds):
        flow.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step().item()
        flow.synchronize()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def kernel_times(step, steps: int, graph) -> dict:
    """op type -> [calls, seconds] per step, from the profiler's events of ``steps`` steps."""
    with flow.profiler.profile() as prof:
        for _ in range(steps):
            step().item()
        flow.synchronize()
    out: dict = collections.defaultdict(lambda: [0.0, 0.0])
    if graph:
        spans = [(e["op_type"] + (" (view)" if e["kind"] == "view" else ""),
                  e["end"] - e["start"]) for e in prof.acts() if e["kind"] in ("normal", "view")]
    else:  # kernels, not the graph calls' launches or transfers
        spans = [(e["name"], e["end"] - e["start"]) for e in prof.instructions()
                 if not e["name"].endswith("-call") and e["stream"] != "launch"]
    for op, seconds in spans:
        s = out[op]
        s[0] += 1 / steps
        s[1] += seconds / steps
    return out


def report(name: str, build, quick: bool, top: int) -> str:
    steps, rounds = (3, 3) if quick else (10, 5)
    eager, graph, g = make_steps(build)
    t0 = time.perf_counter()
    graph().item()
    t_compile = time.perf_counter() - t0  # trace, passes, Plan, runtime start, one step
    reference = reference_step(build)
    for _ in range(3):  # warm up
        eager().item()
        graph().item()
        reference().item()
    t_eager, t_graph, t_ref = (float("inf"),) * 3
    for _ in range(rounds):  # taking turns, so load falls on all three alike
        t_eager = min(t_eager, step_time(eager, steps, 1))
        t_graph = min(t_graph, step_time(graph, steps, 1))
        t_ref = min(t_ref, step_time(reference, steps, 1))
    k_eager = kernel_times(eager, steps, graph=False)
    k_graph = kernel_times(graph, steps, graph=True)
    ops = sorted(set(k_eager) | set(k_graph),
                 key=lambda o: -max(k_eager.get(o, [0, 0])[1], k_graph.get(o, [0, 0])[1]))
    rows = []
    for o in ops[:top]:
        ce, te = k_eager.get(o, [0, 0])
        cg, tg = k_graph.get(o, [0, 0])
        rows.append((o, f"{ce:.0f}", f"{te * 1e3:.2f}", f"{cg:.0f}", f"{tg * 1e3:.2f}",
                     f"{(tg - te) * 1e3:+.2f}"))
    sum_e = sum(v[1] for v in k_eager.values())
    sum_g = sum(v[1] for v in k_graph.values())
    rows.append(("all kernels", f"{sum(v[0] for v in k_eager.values()):.0f}", f"{sum_e * 1e3:.2f}",
                 f"{sum(v[0] for v in k_graph.values()):.0f}", f"{sum_g * 1e3:.2f}",
                 f"{(sum_g - sum_e) * 1e3:+.2f}"))
    out = [f"## {name}", "",
           table(rows, ["op", "eager calls", "eager ms", "graph acts", "graph ms",
                        "graph - eager"]),
           "",
           table([("step wall ms", f"{t_eager * 1e3:.2f}", f"{t_graph * 1e3:.2f}",
                   f"{t_graph / t_eager:.2f}x", f"{t_ref * 1e3:.2f}", f"{t_ref / t_eager:.2f}x"),
                  ("kernels ms", f"{sum_e * 1e3:.2f}", f"{sum_g * 1e3:.2f}", "", "", ""),
                  ("wall - kernels ms", f"{(t_eager - sum_e) * 1e3:.2f}",
                   f"{(t_graph - sum_g) * 1e3:.2f}", "", "", "")],
                 ["", "eager (async VM)", "nn.Graph (actor runtime)", "graph / eager",
                  "reference executor (ops in a loop)", "reference / eager"]),
           "", f"graph: {len(g.full_job.ops)} ops after passes; first call (trace, passes, "
               f"compile, runtime start, one step) {t_compile:.3f} s", ""]
    return "\n".join(out)


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=[*MODELS, "all"], default="all")
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    print(versions())
    for key in (MODELS if args.model == "all" else [args.model]):
        name, build = MODELS[key]
        print(report(name, build, args.quick, args.top))


if __name__ == "__main__":
    main()
