"""Micro-batch inputs of a graph with gradient accumulation: while ``nn.Graph`` traces
``build``, each input becomes an input op of the whole batch and an ``unpack`` op, so ``build``
sees the micro-batch (see ``actorflow.passes.grad_acc`` for the pass that then splits the Job
into micro steps)."""
from __future__ import annotations

from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.dispatch.lazy_global import micro_batch_input
from actorflow.job.job import BlobDesc, OpConf, split_blob
from actorflow.passes.grad_acc import GradientAccumulationError


def add_micro_batch_input(b: LazyInterpreter, index: int, path: str, t, n: int):
    """While tracing with ``n`` accumulation steps: an input op for the whole batch ``t`` and an
    ``unpack`` op; returns the lazy micro-batch tensor ``build`` receives."""
    whole = b.add_input(index, path, t)
    shape = tuple(t._shape)
    if not shape:
        raise GradientAccumulationError(
            f"nn.Graph {b.graph_name}: gradient accumulation ({n} steps) splits every input "
            f"along dim 0, but input {path} is a 0-d tensor")
    if shape[0] % n:
        raise GradientAccumulationError(
            f"nn.Graph {b.graph_name}: gradient accumulation splits input {path} of shape "
            f"{shape} along dim 0 into {n} micro-batches, but {shape[0]} is not divisible "
            f"by {n}")
    micro = (shape[0] // n,) + shape[1:]
    if getattr(whole._h, "is_global", False):  # a distributed graph's input
        return micro_batch_input(b, whole, micro, n)
    src = whole._h.name
    desc = BlobDesc(micro, t.dtype)
    conf = OpConf(b.builder.unique_name(f"{split_blob(src)[0]}-unpack"), "micro_unpack", [src],
                  {"n": n}, [desc], tags={"phase": "forward", "stage": "micro"})
    b.builder.add_op(conf)
    lazy = b.lazy_tensor(conf.out(0), desc)
    lazy.requires_grad = whole.requires_grad
    return lazy
