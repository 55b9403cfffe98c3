"""One training step, five runners: actorflow (eager, blocking eager, nn.Graph) against PyTorch
(eager, torch.compile), on issue #17's three models.

    python benchmarks/graph_vs_torch.py [--quick] [--model mlp|cnn|gpt|all]

The models, their data and the SGD (lr 0.01, momentum 0.9) are ``benchmarks/graph_profile.py``'s:
an MLP 784-1024-1024-10 (batch 256), a small CNN on 3x32x32 images (batch 32) and the GPT of
examples/gpt.py (4 layers, d128, T64, batch 16, 4 heads, vocab 96). The PyTorch models have the
same architectures and start from the actorflow model's initial weights (copied name by name,
shapes checked); the first step's losses must agree to 1e-4 relative, so every runner computes
the same step. Runners:

1. actorflow eager (the asynchronous VM, the default);
2. actorflow eager, blocking (``ACTORFLOW_EAGER_BLOCKING=1``, which the VM reads at import): run
   in a child process of this script, so it is timed on its own, NOT interleaved with the others;
3. actorflow nn.Graph (the actor runtime);
4. PyTorch eager (``torch.get_num_threads()`` as PyTorch chooses);
5. ``torch.compile`` (default mode) of the PyTorch step function.

Runners 1, 3, 4 and 5 take turns round by round (rounds of a few steps, each ending with
``flow.synchronize()`` inside the timed span: ``graph_profile.step_time``), so load from
elsewhere falls on all of them alike; each one's fastest round counts. The first-call rows give
the compile cost: actorflow's graph (trace, passes, Plan, C build of the generated kernels,
runtime start, one step) and torch.compile's (dynamo, AOT autograd, inductor, one step), in
seconds, cold: inductor's on-disk caches and actorflow's kernel cache
(``ACTORFLOW_KERNEL_CACHE``, unless set) go to fresh temporary folders (else a second run reads
the compiled kernels back and shows a fraction of the time); a second nn.Graph of the model
shows the first call with the kernels already built (warm); the second call's time shows any
recompilation. With ``--model all`` each model is measured in a child process of its own
(after a torch.compile, the same process' next nn.Graph first call took twice as long). Where
PyTorch is missing or torch.compile fails (e.g. no C compiler) the table says why.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import actorflow as flow  # noqa: E402
from benchmarks.common import quick_parser, table, torch, versions  # noqa: E402
from benchmarks.graph_profile import GPT, MODELS, make_eager, make_graph, step_time  # noqa: E402

WARMUP = 3


def rounds_of(quick: bool) -> tuple:
    """(steps per round, rounds)."""
    return (3, 3) if quick else (10, 7)


# ---- the PyTorch copies ------------------------------------------------------------------------

def torch_model(key: str):
    """The PyTorch module of model ``key`` (fresh weights; ``copy_weights`` sets them)."""
    tnn = torch.nn
    if key == "mlp":
        return tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024),
                              tnn.ReLU(), tnn.Linear(1024, 10))
    if key == "cnn":
        return tnn.Sequential(tnn.Conv2d(3, 16, 3, padding=1), tnn.BatchNorm2d(16), tnn.ReLU(),
                              tnn.MaxPool2d(2), tnn.Conv2d(16, 32, 3, padding=1),
                              tnn.BatchNorm2d(32), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                              tnn.Linear(32 * 8 * 8, 10))
    from benchmarks.bench_eager import torch_gpt
    return torch_gpt(GPT["vocab"], GPT)


# actorflow GPT name -> torch_gpt name (bench_eager's copy registers ln2 before qkv, so the
# parameters' orders differ; the names map one to one)
_GPT_RENAMES = (("tok_emb.", "tok."), ("pos_emb.", "pos."), (".attn.qkv.", ".qkv."),
                (".attn.proj.", ".proj."))


def torch_name(key: str, name: str) -> str:
    """The PyTorch copy's name of the actorflow model's state entry ``name``."""
    if key == "gpt":
        for a, b in _GPT_RENAMES:
            name = name.replace(a, b)
    return name


def copy_weights(key: str, model, tmodel) -> None:
    """Set ``tmodel``'s parameters and buffers to ``model``'s (actorflow) values; every entry
    must be matched, with the same shape."""
    src = {torch_name(key, k): v.numpy() for k, v in model.state_dict().items()}
    dst = tmodel.state_dict()
    missing = [k for k in dst if k not in src and not k.endswith("num_batches_tracked")]
    extra = [k for k in src if k not in dst]
    if missing or extra:
        raise RuntimeError(f"copy_weights({key}): torch entries without a source {missing}, "
                           f"actorflow entries without a target {extra}")
    new = {}
    for k, t in dst.items():
        if k not in src:
            new[k] = t
            continue
        a = np.ascontiguousarray(src[k])
        if k.endswith("num_batches_tracked") and a.size == t.numel():
            a = a.reshape(tuple(t.shape))   # a (1,) counter in actorflow, 0-d in torch
        if tuple(a.shape) != tuple(t.shape):
            raise RuntimeError(f"copy_weights({key}): {k} has shape {tuple(a.shape)} in "
                               f"actorflow, {tuple(t.shape)} in torch")
        new[k] = torch.from_numpy(a.copy()).to(t.dtype)
    tmodel.load_state_dict(new)


def torch_step(key: str, model, x, y):
    """A PyTorch SGD-momentum training step of a copy of actorflow ``model`` on numpy (x, y),
    as an uncompiled function returning the loss."""
    tm = torch_model(key)
    copy_weights(key, model, tm)
    tm.train()
    opt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))
    ce = torch.nn.functional.cross_entropy

    def step():
        out = tm(tx)
        loss = ce(out.reshape(-1, out.shape[-1]), ty.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def check_same_loss(name: str, af_loss: float, t_loss: float, rtol: float = 1e-4) -> None:
    """Raise unless the two first-step losses agree to ``rtol`` relative."""
    if abs(af_loss - t_loss) > rtol * abs(af_loss):
        raise AssertionError(f"{name}: first-step loss actorflow {af_loss!r} vs PyTorch "
                             f"{t_loss!r}: the models do not compute the same step")


# ---- the blocking runner (a child process) -----------------------------------------------------

def blocking_ms(key: str, quick: bool) -> float | str:
    """ms/step of actorflow blocking eager, timed in a child process (the VM mode is read at
    import); returns the number formatted, or why it is missing."""
    env = dict(os.environ, ACTORFLOW_EAGER_BLOCKING="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--only-blocking", key]
    if quick:
        cmd.append("--quick")
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            err = r.stderr.strip().splitlines()
            return f"failed: exit {r.returncode}: {err[-1][:160] if err else 'no output'}"
        return float(json.loads(r.stdout.strip().splitlines()[-1])["ms"])
    except (subprocess.SubprocessError, ValueError, KeyError, IndexError) as e:
        return f"failed: {type(e).__name__}: {e}"


def only_blocking(key: str, quick: bool) -> None:
    """The child's part: time the eager step and print ``{"ms": ...}`` as one JSON line."""
    from actorflow.vm import scheduler
    if os.environ.get(scheduler.BLOCKING_VAR) != "1":
        raise SystemExit("--only-blocking: run with ACTORFLOW_EAGER_BLOCKING=1")
    steps, rounds = rounds_of(quick)
    *_, step = make_eager(MODELS[key][1])
    for _ in range(WARMUP):
        step().item()
    print(json.dumps({"ms": step_time(step, steps, rounds) * 1e3}))


def first_calls(step) -> tuple:
    """The first and second calls' seconds of ``step``, formatted (the second waits for the
    first's asynchronous work before it starts)."""
    out = []
    for _ in range(2):
        flow.synchronize()
        t0 = time.perf_counter()
        step().item()
        flow.synchronize()
        out.append(f"{time.perf_counter() - t0:.3f}")
    return tuple(out)


# ---- the report --------------------------------------------------------------------------------

def report(key: str, quick: bool) -> str:
    """The markdown section of model ``key``."""
    name, build = MODELS[key]
    steps, rounds = rounds_of(quick)
    model, x, y, eager = make_eager(build)
    xn, yn = x.numpy(), y.numpy()   # before any step: the data, never updated
    notes = []
    runners = {"actorflow eager (async VM)": eager}
    first: dict = {}

    g, graph = make_graph(build)
    first["actorflow nn.Graph"] = first_calls(graph)
    runners["actorflow nn.Graph (actor runtime)"] = graph
    # a second graph of the model: its generated kernels come from the kernel cache
    first["actorflow nn.Graph, warm"] = first_calls(make_graph(build)[1])

    if torch is None:
        notes.append("PyTorch eager, torch.compile: torch is not installed")
    else:
        t_eager = torch_step(key, model, xn, yn)   # copies before the eager step changes them
        t_comp = torch_step(key, model, xn, yn)
        af_loss, t_loss = eager().item(), t_eager().item()
        check_same_loss(name, af_loss, t_loss)
        notes.append(f"first-step loss: actorflow {af_loss:.6f}, PyTorch {t_loss:.6f}")
        runners["PyTorch eager"] = t_eager
        try:
            compiled = torch.compile(t_comp)
            first["torch.compile"] = first_calls(compiled)
            runners["torch.compile (default mode)"] = compiled
        except Exception as e:  # noqa: BLE001 - any backend failure is reported, not raised
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            first["torch.compile"] = (f"failed: {type(e).__name__}: {msg}", "-")

    for fn in runners.values():
        for _ in range(WARMUP):
            fn().item()
    best = {r: float("inf") for r in runners}
    for _ in range(rounds):   # taking turns, so load falls on all of them alike
        for r, fn in runners.items():
            best[r] = min(best[r], step_time(fn, steps, 1))
    ms = {r: t * 1e3 for r, t in best.items()}
    blocking = blocking_ms(key, quick)
    order = ["actorflow eager (async VM)", "actorflow eager, blocking (child process)",
             "actorflow nn.Graph (actor runtime)", "PyTorch eager",
             "torch.compile (default mode)"]
    if isinstance(blocking, float):
        ms[order[1]] = blocking
    ref_af, ref_t = ms[order[0]], ms.get("PyTorch eager")
    rows = []
    for r in order:
        if r in ms:
            rows.append((r, f"{ms[r]:.2f}", f"{ms[r] / ref_af:.2f}x",
                         f"{ms[r] / ref_t:.2f}x" if ref_t else "-"))
        elif r == order[1]:
            rows.append((r, blocking, "-", "-"))
        elif r.startswith("torch.compile") and torch is not None:
            rows.append((r, first["torch.compile"][0], "-", "-"))
        else:
            rows.append((r, "torch is not installed", "-", "-"))
    first_rows = [("actorflow nn.Graph: trace, passes, compile, C build (cold kernel cache), "
                   "runtime start, one step", *first["actorflow nn.Graph"]),
                  ("the same, a second nn.Graph of the model (kernels built: warm cache)",
                   *first["actorflow nn.Graph, warm"])]
    if torch is not None:
        first_rows.append(("torch.compile: dynamo, AOT autograd, inductor, one step",
                           *first["torch.compile"]))
    out = [f"## {name}", "",
           table(rows, ["runner", "ms/step", "vs actorflow eager", "vs PyTorch eager"]), "",
           table(first_rows, ["first call", "seconds", "second call, seconds"]), "",
           f"graph: {len(g.full_job.ops)} ops after passes; " + "; ".join(notes) + "; "
           f"{rounds} rounds of {steps} steps, fastest round (blocking: in a child process, "
           "not interleaved)", ""]
    return "\n".join(out)


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=[*MODELS, "all"], default="all")
    p.add_argument("--only-blocking", choices=list(MODELS), help=argparse.SUPPRESS)
    p.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.only_blocking:
        only_blocking(args.only_blocking, args.quick)
        return
    if torch is not None and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = tempfile.mkdtemp(prefix="graph_vs_torch_inductor_")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache   # cold compiles (read when compiling)
    else:
        cache = None
    kernels = None
    if "ACTORFLOW_KERNEL_CACHE" not in os.environ:  # cold C builds of the generated kernels
        kernels = os.environ["ACTORFLOW_KERNEL_CACHE"] = tempfile.mkdtemp(prefix="af_kernels_")
    try:
        run(args)
    finally:
        for d in (cache, kernels):
            if d:
                shutil.rmtree(d, ignore_errors=True)


def run(args) -> None:
    """The report of the chosen models; with ``--model all`` each model runs in a child process
    of its own, so that one model's torch.compile (its caches, threads and heap) does not weigh
    on the next model's first call and steps."""
    if not args.no_header:
        print(versions() + (f"torch threads {torch.get_num_threads()}\n"
                            if torch is not None else ""), flush=True)
    if args.model != "all":
        print(report(args.model, args.quick), flush=True)
        return
    for key in MODELS:
        cmd = [sys.executable, __file__, "--model", key, "--no-header"]
        r = subprocess.run(cmd + (["--quick"] if args.quick else []), timeout=3600)
        if r.returncode != 0:
            print(f"## {MODELS[key][0]}\n\nfailed: exit {r.returncode}\n", flush=True)


if __name__ == "__main__":
    main()
