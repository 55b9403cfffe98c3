"""Which compute thread ("lane") each kernel task of a Plan runs on (issue #17).

With one lane every compute task shares one actor thread, so kernels run one after another even
where the Job has independent branches (a weight gradient beside the input gradient, the
branches of attention). NumPy and BLAS release the GIL inside their loops, so kernels of two
lanes overlap on two cores. ``assign_lanes`` places tasks by list scheduling on a rough cost
model: in topological order, each registered op goes to the lane where it would finish first,
counting a hop between lanes as a fixed latency (a message through the other thread's channel);
ties stay on lane 0. System ops (variables, outputs, gradient accumulation) stay on lane 0.

The cost model only steers placement: any placement is correct, since the runtime runs a task
when its registers arrive, whichever thread it is on, and the memory plan reasons about the
dependency graph, not threads.
"""
from __future__ import annotations

from actorflow.job.job import Job, split_blob
from actorflow.job.system_ops import is_system_op

LANE_STREAMS = ("compute", "compute_1")   # the task-id stream of each lane
ACT_S = 6e-6           # per act: messages, readiness, the kernel call
HOP_S = 60e-6          # a register crossing to the other lane (wake-up, GIL hand-over)
FLOPS = 3e10           # GEMM throughput
BYTES = 4e9            # memory-bound kernels: bytes read and written per second
_GEMMS = ("matmul", "linear", "fused_matmul_bias_act", "fused_matmul_bias", "bmm", "conv2d",
          "conv1d", "conv3d", "conv_data_grad", "conv_filter_grad")


def _cost(conf, descs: dict, aliased: set) -> float:
    if conf.name in aliased:
        return ACT_S / 2
    ins = [descs[b] for b in conf.inputs]
    nbytes = sum(d.nbytes() for d in ins) + sum(d.nbytes() for d in conf.outputs)
    t = ACT_S + nbytes / BYTES
    if conf.op_type.startswith(_GEMMS) and len(ins) >= 2 and conf.outputs:
        k = ins[0].shape[-1] if ins[0].shape else 1
        n_out = 1
        for s in conf.outputs[0].shape:
            n_out *= int(s)
        t += 2.0 * n_out * int(k) / FLOPS
    return t


def assign_lanes(job: Job, order: list, lanes: int, aliased: set = frozenset()) -> dict:
    """op name -> lane (0..lanes-1) for every op of ``order`` (see the module docstring)."""
    if lanes <= 1:
        return {o.name: 0 for o in order}
    if lanes > len(LANE_STREAMS):
        raise ValueError(f"compute lanes: at most {len(LANE_STREAMS)} (got {lanes}; "
                         f"ACTORFLOW_GRAPH_COMPUTE_LANES or CompileOptions.compute_lanes)")
    descs = {o.out(i): d for o in order for i, d in enumerate(o.outputs)}
    finish: dict = {}
    lane_of: dict = {}
    free = [0.0] * lanes
    for o in order:
        preds = [split_blob(b)[0] for b in o.inputs] + list(o.ctrl_inputs)
        if is_system_op(o.op_type):
            choices = [0]
        else:
            choices = range(lanes)
        best = None
        for lane in choices:
            ready = 0.0
            for p in preds:
                t = finish[p] + (HOP_S if lane_of[p] != lane else 0.0)
                ready = max(ready, t)
            end = max(ready, free[lane]) + _cost(o, descs, aliased)
            if best is None or end < best[0] - 1e-9:
                best = (end, lane)
        finish[o.name], lane_of[o.name] = best
        free[best[1]] = best[0]
    return lane_of


__all__ = ["assign_lanes", "LANE_STREAMS"]
