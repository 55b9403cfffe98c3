"""``actorflow.boxing``: OneFlow's switches for NCCL's collective boxing, accepted and checked.

They tune NCCL, which actorflow does not use (its collectives are MPI on the CPU), so they
change nothing here; see ``_switches`` for what a call does.
"""
from __future__ import annotations

from actorflow.boxing import nccl
from actorflow.boxing._switches import SETTINGS, record


def enable_fusion(val: bool = True) -> None:
    """Whether NCCL may fuse collective operations (nothing to fuse with MPI: recorded only)."""
    record("enable_fusion", val, bool)


__all__ = ["enable_fusion", "nccl", "SETTINGS"]
