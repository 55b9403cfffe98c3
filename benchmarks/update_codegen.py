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

``--clip``: the clipped update step instead (SGD momentum, one param group with
``clip_grad_max_norm=1e-3``, ``clip_grad_norm_type=2.0``: every step clips, as a NumPy
clip of a coefficient of 1 writes nothing): per model the graph with generation
off, with generation on but ``disable_pass("fuse_clip_grad")`` (the generated ``grad_norm``,
then one NumPy ``clip_grad_by_norm`` per gradient, then the generated update) and with
generation on (the generated ``grad_norm`` and ONE generated update loop scaling each
gradient as it loads it); rows: the time per step of the clipping and update tasks
(``grad_norm``, ``clip_grad_by_norm``, the updates) and the whole step. Run on a tree without
``fuse_clip_grad`` (the code before it) the second variant is left out and the third is the
code before. A second table times the kernels alone on the model's parameter shapes:
``grad_norm`` NumPy against generated, and ``clip_grad_by_norm`` per gradient plus the
generated update against the generated clipping update.
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


def graph_step(build, make_opt, codegen: bool, disable: tuple = ()):
    """A compiled graph step of a fresh copy of the model (generation on or off; the passes
    in ``disable`` off)."""
    model, loss_fn, x, y = build()
    opt = make_opt(model.parameters())

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            for name in disable:
                self.config.disable_pass(name)

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


CLIP_OPS = ("grad_norm", "clip_grad_by_norm")


def _clipped_ms(times: dict) -> float:
    return _update_ms(times) + 1e3 * sum(times[n][1] for n in CLIP_OPS if n in times)


def _clip_opt(ps):
    return flow.optim.SGD([{"params": list(ps), "clip_grad_max_norm": 1e-3,
                            "clip_grad_norm_type": 2.0}], lr=0.01, momentum=0.9)


def _has_fold() -> bool:
    from actorflow.passes import PASSES
    return any(name == "fuse_clip_grad" for name, _, _ in PASSES)


def clip_kernels_alone(shapes: list) -> tuple:
    """(grad_norm NumPy ms, generated ms, clips + generated update ms, generated clipping
    update ms) over float32 params of ``shapes`` (fastest of 20 calls; the unfused pair runs
    on a fresh copy of the gradients each call, outside the timing, as clipping writes them)."""
    from actorflow.compiler.codegen import reduce

    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    metas = [(g.shape, dt.float32) for g in grads]
    gen_norm = reduce.reduce_kernels_for([("grad_norm", {"norm_type": 2.0}, metas,
                                           [((), dt.float32)])])[0]
    norm_np = registry.get("grad_norm").kernel_cpu
    out = np.zeros((), np.float32)
    res = []
    for k in (norm_np, gen_norm):
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            k(grads, [out], {"norm_type": 2.0})
            best = min(best, time.perf_counter() - t0)
        res.append(best * 1e3)
    ins = [np.array(1e-3)]
    for s, g in zip(shapes, grads):
        ins += [rng.standard_normal(s).astype(np.float32), g.copy(), np.zeros(s, np.float32)]
    norm = np.array(float(out) * 2, np.float32)  # a coefficient below 1: the clip scales
    plain = {"update": "momentum_update", "update_attrs": {"momentum": 0.9}, "arity": 3}
    fused = {**plain, "grad_scale": "clip_grad_by_norm", "grad_scale_inputs": 1,
             "grad_scale_attrs": {"max_norm": float(out)},
             "grad_scale_params": list(range(len(shapes)))}
    f32 = [(a.shape, dt.float32 if a.dtype == np.float32 else dt.float64) for a in ins]
    gen_plain, gen_fused = update.kernels_for([
        ("multi_tensor_update", plain, f32), ("multi_tensor_update", fused,
                                              f32 + [((), dt.float32)])])
    clip = registry.get("clip_grad_by_norm").kernel_cpu
    for variant in ("unfused", "fused"):
        best = float("inf")
        for _ in range(20):
            for i, g in enumerate(grads):
                np.copyto(ins[2 + 3 * i], g)
            t0 = time.perf_counter()
            if variant == "unfused":
                for i in range(len(shapes)):
                    clip([ins[2 + 3 * i], norm], [], {"max_norm": float(out)})
                gen_plain(ins, [], plain)
            else:
                gen_fused(ins + [norm], [], fused)
            best = min(best, time.perf_counter() - t0)
        res.append(best * 1e3)
    return tuple(res)


def clip_main(steps: int, rounds: int) -> None:
    """The ``--clip`` tables (see the module docstring)."""
    fold = _has_fold()
    rows = []
    for key in ("mlp", "gpt"):
        name, build = MODELS[key]
        n_params = sum(p.numel() for p in build()[0].parameters())
        variants = [("codegen off", graph_step(build, _clip_opt, False))]
        if fold:
            variants.append(("codegen on, fuse_clip_grad off",
                             graph_step(build, _clip_opt, True, ("fuse_clip_grad",))))
        variants.append(("codegen on" if fold else "codegen on (before fuse_clip_grad)",
                         graph_step(build, _clip_opt, True)))
        for _ in range(3):
            for _, step in variants:
                step().item()
        best = {v: [float("inf"), float("inf")] for v, _ in variants}
        for _ in range(rounds):  # the variants take turns: load from elsewhere hits all alike
            for v, step in variants:
                best[v][0] = min(best[v][0], step_time(step, steps, 1))
                best[v][1] = min(best[v][1], _clipped_ms(kernel_times(step, steps, True)))
        for v, _ in variants:
            rows.append((f"{key} ({n_params / 1e6:.2f} M params)", v, f"{best[v][1]:.3f}",
                         f"{best[v][0] * 1e3:.2f}"))
    print(table(rows, ["model", "graph", "clip + update ms / step", "step ms"]))
    print()
    if not fold:
        return
    rows = []
    for key in ("mlp", "gpt"):
        shapes = [tuple(p.shape) for p in MODELS[key][1]()[0].parameters()]
        n_np, n_gen, u_unfused, u_fused = clip_kernels_alone(shapes)
        rows.append((key, f"{n_np:.3f}", f"{n_gen:.3f}", f"{n_np / n_gen:.2f}x",
                     f"{u_unfused:.3f}", f"{u_fused:.3f}", f"{u_unfused / u_fused:.2f}x"))
    print(table(rows, ["model", "grad_norm NumPy ms", "generated", "speed-up",
                       "clips + update ms", "clipping update", "speed-up"]))


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--kernels-only", action="store_true", help="only the kernel-alone table")
    p.add_argument("--clip", action="store_true",
                   help="the clipped update step (grad_norm, clip, update) instead")
    args = p.parse_args(argv)
    steps, rounds = (3, 3) if args.quick else (10, 5)
    print(versions())
    if args.clip:
        clip_main(steps, rounds)
        return
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
