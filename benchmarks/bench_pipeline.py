"""The pipeline bubble of the GPT example in two stages, from the two ranks' profiler traces.

    python benchmarks/bench_pipeline.py [--quick] [--micro 4] [--out runs/bench_pipeline]

Starts itself on 2 ranks (``mpiexec``). ``examples/gpt.py``'s model (4 blocks, 64 wide, batch
32 x 64 tokens, AdamW) laid out by ``parallelize(model, "pipeline")``: the embeddings and
blocks 0-1 on rank 0, blocks 2-3, the final norm and the tied head on rank 1; ``--micro``
micro-batches per step (gradient accumulation). After warm-up steps it profiles a few steps on
both ranks (each rank writes its Chrome trace to ``--out``) and reports per step (median):

* step time: from the first act of the step on either rank to the last;
* busy: the union of one rank's compute acts (every act but the send/recv ones, which span
  from posting to completion, i.e. mostly waiting);
* bubble: step time - busy, per rank;
* the ideal schedule's step time with those busy times and free communication: micro-batches
  of equal cost ``t_r = busy_r / m`` on stage ``r``, stage 1 starts micro-batch 0 after stage 0
  finished its forward and each stage alternates as it can; for 2 stages that is
  ``(m - 1) * max(t_0, t_1) + t_0 + t_1`` (the GPipe / 1F1B fill and drain), an ideal bubble
  fraction of ``(p - 1) / (m + p - 1)`` for equal stages.

The one-process step of the same graph (the whole model, same micro-batches) is timed first,
for reference. Every process has one BLAS thread.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import actorflow as flow  # noqa: E402
from benchmarks.common import quick_parser, versions  # noqa: E402

VOCAB, BATCH, BLOCK, LAYERS, EMBD, HEADS = 96, 32, 64, 4, 64, 4
IDLE_KINDS = ("send", "recv")


def _setup(pipeline: bool, micro: int):
    from examples import gpt

    flow.manual_seed(0)
    model = gpt.GPT(VOCAB, BLOCK, LAYERS, HEADS, EMBD)
    if pipeline:
        gpt.parallelize(model, "pipeline")
    opt = flow.optim.AdamW(model.parameters(), lr=1e-3)
    graph = gpt.TrainGraph(model, opt, grad_acc=micro)
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, (BATCH, BLOCK))
    y = rng.integers(0, VOCAB, (BATCH, BLOCK))
    if pipeline:
        p0, p1 = gpt.pipeline_stages(2)
        b = flow.sbp.broadcast
        return graph, (flow.tensor(x, placement=p0, sbp=b), flow.tensor(y, placement=p1, sbp=b))
    return graph, (flow.tensor(x), flow.tensor(y))


def _step(graph, args) -> None:
    loss = graph(*args)
    if loss.is_global:   # (no shard on the first stage: wait for the call itself)
        loss = loss.to_global(placement=flow.placement.all("cpu"), sbp=flow.sbp.broadcast)
        loss = loss.to_local()
    loss.numpy()


def _union(spans: list) -> float:
    total, end = 0.0, -np.inf
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def worker(micro: int, steps: int, warmup: int, out: str) -> None:
    """On each of the 2 ranks: profile ``steps`` pipelined steps; rank 0 prints a JSON line."""
    from actorflow.process import groups

    rank = flow.env.get_rank()
    graph, args = _setup(True, micro)
    for _ in range(warmup):
        _step(graph, args)
    flow.comm.barrier()
    with flow.profiler.profile() as prof:
        for _ in range(steps):
            _step(graph, args)
        flow.synchronize()
    os.makedirs(out, exist_ok=True)
    prof.export_chrome_trace(os.path.join(out, f"trace_rank{rank}.json"))
    acts = [(e["iteration"], e["kind"], e["start"], e["end"]) for e in prof.acts()]
    both = groups.allgather_object(acts, "pipeline bench acts")
    graph.close()
    if rank:
        return
    iters = sorted({a[0] for a in both[0]} & {a[0] for a in both[1]})
    rows = []
    for it in iters:   # (perf_counter: one clock for the processes of a machine)
        mine = [[a for a in both[r] if a[0] == it] for r in range(2)]
        start = min(a[2] for m in mine for a in m)
        end = max(a[3] for m in mine for a in m)
        busy = [_union([(a[2], a[3]) for a in m if a[1] not in IDLE_KINDS]) for m in mine]
        rows.append((end - start, *busy))
    step, b0, b1 = (float(np.median([r[k] for r in rows])) * 1e3 for k in range(3))
    t0, t1 = b0 / micro, b1 / micro
    ideal = (micro - 1) * max(t0, t1) + t0 + t1
    print(json.dumps({"micro": micro, "steps": len(rows), "step_ms": step, "busy_ms": [b0, b1],
                      "bubble_ms": [step - b0, step - b1], "ideal_ms": ideal,
                      "ideal_bubble_ms": [ideal - b0, ideal - b1]}), flush=True)


def main() -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--out", default="runs/bench_pipeline")
    p.add_argument("--worker", action="store_true", help=argparse_suppress())
    a = p.parse_args()
    steps, warmup = (3, 2) if a.quick else (8, 3)
    if a.worker:
        worker(a.micro, steps, warmup, a.out)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    graph, args = _setup(False, a.micro)
    for _ in range(warmup):
        _step(graph, args)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        _step(graph, args)
        times.append(time.perf_counter() - t)
    graph.close()
    one = float(np.median(times)) * 1e3
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cmd = [mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__), "--worker",
           "--micro", str(a.micro), "--out", a.out] + (["--quick"] if a.quick else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(done.stdout + done.stderr)
    res = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    print(versions())
    print(f"GPT {LAYERS} blocks x {EMBD}, batch {BATCH}x{BLOCK}, {a.micro} micro-batches; "
          f"median of {res['steps']} profiled steps; traces in {a.out}/trace_rank*.json")
    print(f"one process, same graph: {one:.1f} ms per step")
    print("| ms per step | rank 0 (embeddings, blocks 0-1) | rank 1 (blocks 2-3, head, loss) |")
    print("|---|---|---|")
    print(f"| step time (both ranks) | {res['step_ms']:.1f} | {res['step_ms']:.1f} |")
    print(f"| busy (compute acts) | {res['busy_ms'][0]:.1f} | {res['busy_ms'][1]:.1f} |")
    print(f"| bubble (step - busy) | {res['bubble_ms'][0]:.1f} | {res['bubble_ms'][1]:.1f} |")
    print(f"| ideal schedule's step | {res['ideal_ms']:.1f} | {res['ideal_ms']:.1f} |")
    print(f"| ideal schedule's bubble | {res['ideal_bubble_ms'][0]:.1f} | "
          f"{res['ideal_bubble_ms'][1]:.1f} |")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
