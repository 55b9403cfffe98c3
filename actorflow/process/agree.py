"""What ranks must agree on before a collective: its shapes, dtypes and root rank.

A collective whose ranks pass different shapes or dtypes, or name different roots, makes MPI
move the wrong number of bytes: garbage, stale memory or a hang. ``check(comm, op, fields)``
runs before each such call, on the thread that makes it (in the same order on every rank), and
compares once per signature: the first time this process passes ``fields`` to ``op``, one
all-reduce of two 64-bit numbers (a CRC of the signature and its negation, with MPI's MAX, on
a duplicate of ``comm`` kept for these checks) tells whether every rank passed the same; later
calls with a signature already agreed on cost a set lookup. Only when they differ does it
gather every rank's fields, and then it raises on every rank the same ``RankMismatchError``
naming the op, the ranks and their values.

In a program whose ranks agree, every rank sees the same signatures in the same order, so all
of them check at the same calls. A mismatch is caught cleanly when it appears on every rank at
once (the first call, or a signature new on each rank); when one rank repeats a signature
agreed on earlier while another passes a new one, the first enters the collective and the
second the check, on different communicators: both wait, and the watchdog ends the job within
``ACTORFLOW_COMM_TIMEOUT`` naming the op on each rank (never garbage).
"""
from __future__ import annotations

import zlib

import numpy as np

_agreed: set = set()   # the (op, fields) signatures every rank passed
_MAX_AGREED = 1 << 16  # then the set starts over (on every rank at the same call)
_check_comms: dict = {}  # id(comm) -> (comm, its duplicate for the checks)


class RankMismatchError(ValueError):
    """Ranks passed a collective different shapes, dtypes or roots."""


def check(comm, op: str, fields: tuple, ranks: tuple | None = None) -> None:
    """Raise ``RankMismatchError`` on every rank of ``comm`` unless all passed ``fields``
    (a tuple of plain values: shapes, dtype names, ranks). Nothing to do without ``comm``.
    ``ranks``: the world rank of each of ``comm``'s (the error names those)."""
    if comm is None:
        return
    key = (op, fields)
    if key in _agreed:
        return
    h = zlib.crc32(repr(key).encode())
    from mpi4py import MPI  # (a multi-process program: mpi4py is there)

    pair = _check_comms.get(id(comm))
    if pair is None or pair[0] is not comm:
        pair = _check_comms[id(comm)] = (comm, comm.Dup())  # (collective: the first check)
    cc = pair[1]
    v = np.array([h, -h], np.int64)
    cc.Allreduce(MPI.IN_PLACE, v, op=MPI.MAX)
    if v[0] == h and v[1] == -h:  # max == min == h: every rank passed the same
        if len(_agreed) >= _MAX_AGREED:
            _agreed.clear()
        _agreed.add(key)
        return
    every = cc.allgather(fields)
    groups: dict = {}
    for r, f in enumerate(every):
        groups.setdefault(repr(_shown(f)), []).append(r if ranks is None else ranks[r])
    parts = [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {f}"
             for f, rs in groups.items()]
    raise RankMismatchError(f"{op}: the ranks disagree on what they pass ({'; '.join(parts)})")


def _shown(fields: tuple) -> tuple:
    """``fields`` with NumPy dtypes as their names (as the error prints them)."""
    return tuple(f.name if isinstance(f, np.dtype) else f for f in fields)
