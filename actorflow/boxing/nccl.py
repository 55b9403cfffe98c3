"""``actorflow.boxing.nccl``: OneFlow's NCCL tuning switches. actorflow's collectives are
MPI on the CPU, so each is checked and recorded (``actorflow.boxing.SETTINGS``) and read by
nothing."""
from __future__ import annotations

from actorflow.boxing._switches import record


def set_fusion_threshold_mbytes(val: int) -> None:
    """NCCL: the size in MiB up to which collectives are fused (recorded only; no NCCL here)."""
    record("nccl.set_fusion_threshold_mbytes", val, int)


def set_fusion_max_ops_num(val: int) -> None:
    """NCCL: the most collectives fused into one (recorded only; no NCCL here)."""
    record("nccl.set_fusion_max_ops_num", val, int)


def allow_fuse_all_reduce(val: bool) -> None:
    """NCCL: whether all-reduces may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_all_reduce", val, bool)


def allow_fuse_reduce_scatter(val: bool) -> None:
    """NCCL: whether reduce-scatters may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_reduce_scatter", val, bool)


def allow_fuse_all_gather(val: bool) -> None:
    """NCCL: whether all-gathers may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_all_gather", val, bool)


def allow_fuse_reduce(val: bool) -> None:
    """NCCL: whether reduces may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_reduce", val, bool)


def allow_fuse_broadcast(val: bool) -> None:
    """NCCL: whether broadcasts may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_broadcast", val, bool)


def allow_fuse_mixed_ops(val: bool) -> None:
    """NCCL: whether collectives of different kinds may be fused (recorded only; no NCCL here)."""
    record("nccl.allow_fuse_mixed_ops", val, bool)


def enable_use_buffer_to_fuse_all_reduce(val: bool) -> None:
    """NCCL: whether fused all-reduces go through one buffer (recorded only; no NCCL here)."""
    record("nccl.enable_use_buffer_to_fuse_all_reduce", val, bool)


def set_stream_num(val: int) -> None:
    """NCCL: the number of NCCL streams (recorded only; no NCCL here)."""
    record("nccl.set_stream_num", val, int)


def enable_all_to_all(val: bool) -> None:
    """NCCL: whether NCCL's all-to-all may be used for boxing (recorded only; no NCCL here)."""
    record("nccl.enable_all_to_all", val, bool)


def enable_use_compute_stream(val: bool = False) -> None:
    """NCCL: whether NCCL runs on the compute stream (recorded only; no NCCL here)."""
    record("nccl.enable_use_compute_stream", val, bool)


def disable_group_boxing_by_dst_parallel(val: bool = False) -> None:
    """NCCL: whether boxing is not grouped by destination placement (recorded only)."""
    record("nccl.disable_group_boxing_by_dst_parallel", val, bool)


__all__ = [
    "set_fusion_threshold_mbytes", "set_fusion_max_ops_num", "allow_fuse_all_reduce",
    "allow_fuse_reduce_scatter", "allow_fuse_all_gather", "allow_fuse_reduce",
    "allow_fuse_broadcast", "allow_fuse_mixed_ops", "enable_use_buffer_to_fuse_all_reduce",
    "set_stream_num", "enable_all_to_all", "enable_use_compute_stream",
    "disable_group_boxing_by_dst_parallel",
]
