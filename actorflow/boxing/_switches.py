"""The settings behind ``actorflow.boxing``: OneFlow's NCCL collective-boxing switches.

OneFlow's collectives between GPUs run on NCCL, and these switches tune how it fuses and
schedules them. actorflow's collectives run over MPI on the CPU, with no NCCL and no fusion of
collectives, so there is nothing for them to tune: each call checks its value's type and
records it in ``SETTINGS`` (readable, for code that wants to see what was asked), and no
collective reads it.
"""
from __future__ import annotations

SETTINGS: dict = {}


def record(name: str, value, kind: type):
    """Check that ``value`` is a ``kind`` (bool or int) and store it under ``name``."""
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        article = "an" if kind is int else "a"
        raise TypeError(f"boxing.{name}: expected {article} {kind.__name__}, got {value!r}")
    if kind is int and value < 0:
        raise ValueError(f"boxing.{name}: expected a non-negative int, got {value}")
    SETTINGS[name] = value
