"""What ranks must agree on before a collective: its shapes, dtypes and root rank.

A collective whose ranks pass different shapes or dtypes, or name different roots, makes MPI
move the wrong number of bytes: garbage, stale memory or a hang. ``check(comm, op, fields)``
runs before each such call, on the thread that makes it (in the same order on every rank):
one all-reduce of two 64-bit numbers (a CRC of ``fields`` and its negation, with MPI's MAX)
tells whether every rank passed the same fields. Only when they differ does it gather every
rank's fields, and then it raises on every rank the same ``RankMismatchError`` naming the op,
the ranks and their values.
"""
from __future__ import annotations

import zlib

import numpy as np


class RankMismatchError(ValueError):
    """Ranks passed a collective different shapes, dtypes or roots."""


def check(comm, op: str, fields: tuple) -> None:
    """Raise ``RankMismatchError`` on every rank of ``comm`` unless all passed ``fields``
    (a tuple of plain values: shapes, dtype names, ranks). Nothing to do without ``comm``."""
    if comm is None:
        return
    from mpi4py import MPI  # (a multi-process program: mpi4py is there)

    h = zlib.crc32(repr(fields).encode())
    v = np.array([h, -h], np.int64)
    comm.Allreduce(MPI.IN_PLACE, v, op=MPI.MAX)
    if v[0] == h and v[1] == -h:  # max == min == h: every rank passed the same
        return
    every = comm.allgather(fields)
    groups: dict = {}
    for r, f in enumerate(every):
        groups.setdefault(repr(f), []).append(r)
    parts = [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {f}"
             for f, rs in groups.items()]
    raise RankMismatchError(f"{op}: the ranks disagree on what they pass ({'; '.join(parts)})")
