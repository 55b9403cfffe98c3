"""Task ids: one integer that says where a task runs.

Bits, from high to low: rank (16), device type (4), device index (8), stream (12), task index
(24). The thread an actor runs on is the id without its task index, so every task of one
(rank, device, stream) shares a thread, as in OneFlow.
"""
from __future__ import annotations

from typing import NamedTuple

_INDEX_BITS = 24
_STREAM_BITS = 12
_DEVICE_INDEX_BITS = 8
_DEVICE_TYPE_BITS = 4
_RANK_BITS = 16

DEVICE_TYPES = {"cpu": 1, "cuda": 2}
_DEVICE_NAMES = {v: k for k, v in DEVICE_TYPES.items()}

# the streams a Plan uses: one thread each per (rank, device); "compute_1" is the second compute
# lane (compiler/lanes.py), "comm" runs a distributed graph's collectives in their fixed order,
# "p2p" its sends and receives between ranks (compiler/transfer.py)
STREAMS = {"compute": 0, "source": 1, "io": 2, "comm": 3, "p2p": 4, "compute_1": 16}
_STREAM_NAMES = {v: k for k, v in STREAMS.items()}


class TaskId(NamedTuple):
    """The parts of a task id."""

    rank: int
    device_type: str
    device_index: int
    stream: str
    index: int

    def encode(self) -> int:
        return encode_task_id(self.rank, self.device_type, self.device_index, self.stream,
                              self.index)


def _check(value: int, bits: int, what: str) -> int:
    if not 0 <= value < (1 << bits):
        raise ValueError(f"task id: {what} {value} does not fit in {bits} bits")
    return value


def encode_task_id(rank: int, device_type: str, device_index: int, stream: str,
                   index: int) -> int:
    """Pack the parts into one int (see the module docstring)."""
    if device_type not in DEVICE_TYPES:
        raise ValueError(f"task id: unknown device type {device_type!r}")
    if stream not in STREAMS:
        raise ValueError(f"task id: unknown stream {stream!r}; streams: {sorted(STREAMS)}")
    v = _check(rank, _RANK_BITS, "rank")
    v = (v << _DEVICE_TYPE_BITS) | DEVICE_TYPES[device_type]
    v = (v << _DEVICE_INDEX_BITS) | _check(device_index, _DEVICE_INDEX_BITS, "device index")
    v = (v << _STREAM_BITS) | STREAMS[stream]
    return (v << _INDEX_BITS) | _check(index, _INDEX_BITS, "task index")


def decode_task_id(task_id: int) -> TaskId:
    """Inverse of ``encode_task_id``."""
    index = task_id & ((1 << _INDEX_BITS) - 1)
    v = task_id >> _INDEX_BITS
    stream = v & ((1 << _STREAM_BITS) - 1)
    v >>= _STREAM_BITS
    device_index = v & ((1 << _DEVICE_INDEX_BITS) - 1)
    v >>= _DEVICE_INDEX_BITS
    device_type = v & ((1 << _DEVICE_TYPE_BITS) - 1)
    rank = v >> _DEVICE_TYPE_BITS
    return TaskId(rank, _DEVICE_NAMES[device_type], device_index, _STREAM_NAMES[stream], index)


def thread_id_of(task_id: int) -> int:
    """The thread a task runs on: its id without the task index."""
    return task_id >> _INDEX_BITS


def describe_thread(thread_id: int) -> str:
    """``"rank0/cpu:0/compute"`` for a thread id."""
    t = decode_task_id(thread_id << _INDEX_BITS)
    return f"rank{t.rank}/{t.device_type}:{t.device_index}/{t.stream}"
