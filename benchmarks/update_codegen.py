"""Optimizer update time per step in nn.Graph: the generated C update loop against the NumPy
update kernels (issue #27), on benchmarks/graph_profile.py's MLP and GPT with SGD momentum and
AdamW.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/update_codegen.py [--quick]

Per model and optimizer, two graphs of fresh copies (generation on: ``CompileOptions`` via
``ACTORFLOW_GRAPH_CODEGEN=1`` at compile time; off: ``0``) take turns round by round, so load
from elsewhere falls on both alike. Rows: the update tasks' time per step (the profiler's act
spans of ``multi_tensor_update`` and single update ops) and the whole step (fastest round,
``graph_profile.step_time``). A second table times the update kernel alone, outside any graph
(``multi_tensor_update``'s NumPy kernel against the generated one on the model's parameter
shapes, fastest of 20 calls), which is less exposed to load from elsewhere.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import time  # noqa: E402

import numpy as np  # noqa: E402

import actorflow as flow  # noqa: E402
from actorflow.compiler.codegen import update  # noqa: E402
from actorflow.framework import dtype as dt  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402
from benchmarks.graph_profile import MODELS, kernel_times, step_time  # noqa: E402
from actorflow.ops import registry  # noqa: E402

nn = flow.nn
OPTIMIZERS = {"SGD momentum": lambda ps: flow.optim.SGD(ps, lr=0.01, momentum=0.9),
              "AdamW": lambda ps: flow.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)}


def graph_step(build, make_opt, codegen: bool):
    """A compiled graph step of a fresh copy of the model (generation on or off)."""
    model, loss_fn, x, y = build()
    opt = make_opt(model.parameters())

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            loss = loss_fn(self.model, a, b)
            loss.backward()
            return loss

    g = Train()
    old = os.environ.get("ACTORFLOW_GRAPH_CODEGEN")
    os.environ["ACTORFLOW_GRAPH_CODEGEN"] = "1" if codegen else "0"
    try:
        g(x, y).item()  # compiles now, with generation as asked
    finally:
        if old is None:
            os.environ.pop("ACTORFLOW_GRAPH_CODEGEN")
        else:
            os.environ["ACTORFLOW_GRAPH_CODEGEN"] = old
    return lambda: g(x, y)


def _update_ms(times: dict) -> float:
    ops = registry.all_ops()
    return 1e3 * sum(s for name, (_, s) in times.items()
                     if name == "multi_tensor_update"
                     or (name in ops and ops[name].optimizer_update))


KERNEL_CASES = {"SGD momentum": ("momentum_update", {"momentum": 0.9}),
                "AdamW": ("adam_update", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                          "weight_decay": 0.01, "decoupled": True})}


def kernel_alone(shapes: list, op_name: str, attrs: dict) -> tuple:
    """(NumPy ms, generated ms) of one multi-tensor update over float32 params of ``shapes``."""
    form = registry.get(op_name).c_update(attrs)
    rng = np.random.default_rng(0)
    ins = [np.array(1e-3)]
    for s in shapes:
        ins += [rng.standard_normal(s).astype(np.float32) for _ in range(2)]
        ins += [np.array(0, np.int64)] if form.has_step else []
        ins += [np.zeros(s, np.float32) for _ in range(form.n_state)]
    attrs_m = {"update": op_name, "update_attrs": attrs, "arity": 2 + form.n_state
               + form.has_step}
    metas = [(a.shape, {np.float32: dt.float32, np.int64: dt.int64}.get(a.dtype.type,
                                                                          dt.float64))
             for a in ins]
    gen = update.kernel_for("multi_tensor_update", attrs_m, metas)
    numpy_kernel = registry.get("multi_tensor_update").kernel_cpu
    out = []
    for k in (numpy_kernel, gen):
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            k(ins, [], attrs_m)
            best = min(best, time.perf_counter() - t0)
        out.append(best * 1e3)
    return tuple(out)


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--kernels-only", action="store_true", help="only the kernel-alone table")
    args = p.parse_args(argv)
    steps, rounds = (3, 3) if args.quick else (10, 5)
    print(versions())
    rows = []
    for key in ([] if args.kernels_only else ("mlp", "gpt")):
        name, build = MODELS[key]
        n_params = sum(p.numel() for p in build()[0].parameters())
        for opt_name, make_opt in OPTIMIZERS.items():
            on, off = graph_step(build, make_opt, True), graph_step(build, make_opt, False)
            for _ in range(3):
                on().item()
                off().item()
            t_on = t_off = float("inf")
            for _ in range(rounds):
                t_on = min(t_on, step_time(on, steps, 1))
                t_off = min(t_off, step_time(off, steps, 1))
            u_on = min(_update_ms(kernel_times(on, steps, True)) for _ in range(2))
            u_off = min(_update_ms(kernel_times(off, steps, True)) for _ in range(2))
            rows.append((f"{key} ({n_params / 1e6:.2f} M params)", opt_name, f"{u_off:.3f}",
                         f"{u_on:.3f}", f"{u_off / u_on:.2f}x", f"{t_off * 1e3:.2f}",
                         f"{t_on * 1e3:.2f}"))
    if rows:
        print(table(rows, ["model", "optimizer", "update ms NumPy", "update ms generated",
                           "speed-up", "step ms codegen off", "step ms codegen on"]))
        print()
    rows = []
    for key in ("mlp", "gpt"):
        shapes = [tuple(p.shape) for p in MODELS[key][1]()[0].parameters()]
        for opt_name, (op_name, attrs) in KERNEL_CASES.items():
            t_np, t_gen = kernel_alone(shapes, op_name, attrs)
            rows.append((key, opt_name, f"{t_np:.3f}", f"{t_gen:.3f}", f"{t_np / t_gen:.2f}x"))
    print(table(rows, ["model", "optimizer", "kernel alone ms NumPy", "generated",
                       "speed-up"]))


if __name__ == "__main__":
    main()
