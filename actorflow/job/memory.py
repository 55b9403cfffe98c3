"""Memory accounting of a Job: the bytes of live blobs while the Job runs in its stored order.

Each op allocates its outputs when it runs; a blob is freed right after its last reader (or
right after its producer when nothing reads it); blobs read by ``output`` ops live to the end
(they are returned). ``repeat``, ``unpack`` and ``output`` outputs alias their input (no
allocation; the input lives as long as the alias is read). Variables (parameters, buffers,
optimizer state, learning rates), graph inputs and literals are not part of the live-blob
figure: they are reported separately (``state_bytes``, ``input_bytes``, ``literal_bytes``).
While an op runs, its inputs and outputs are all live.

A Job with gradient accumulation is accounted as written: the micro-step ops once (one micro
step's activations), ``acc`` / ``pack`` buffers as the blobs they are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from actorflow.job.job import Job
from actorflow.job.system_ops import system_op

# system ops whose memory is not allocated by the run: the report field that counts it
_EXCLUDED = {"state": "state_bytes", "input": "input_bytes", "literal": "literal_bytes"}


def _memory_of(op_type: str) -> str:
    row = system_op(op_type)
    return row.memory if row is not None else "own"


@dataclass
class MemoryReport:
    """What ``job_memory`` measured (bytes)."""

    peak_bytes: int
    peak_op: str
    timeline: list = field(default_factory=list)  # live bytes while op i runs, per op
    state_bytes: int = 0
    input_bytes: int = 0
    literal_bytes: int = 0
    allocated_bytes: int = 0  # sum of all blobs allocated by ops over the run

    def __str__(self) -> str:
        return (f"peak {self.peak_bytes} B of live blobs (at op {self.peak_op}); "
                f"{self.allocated_bytes} B allocated in all; state {self.state_bytes} B, "
                f"inputs {self.input_bytes} B, literals {self.literal_bytes} B")


def job_memory(job: Job) -> MemoryReport:
    """Account ``job``'s blob memory in its stored op order (see the module docstring)."""
    ops = job.ops
    report = MemoryReport(0, "")
    for o in ops:
        kind = _EXCLUDED.get(_memory_of(o.op_type))
        if kind is not None:
            setattr(report, kind, getattr(report, kind) + sum(d.nbytes() for d in o.outputs))
    descs = {o.out(k): d for o in ops for k, d in enumerate(o.outputs)}
    delta = [0] * (len(ops) + 1)
    for blob, (first, last) in blob_lifetimes(job).items():
        n = descs[blob].nbytes()
        report.allocated_bytes += n
        delta[first] += n
        delta[last + 1] -= n
    live = 0
    for i in range(len(ops)):
        live += delta[i]
        report.timeline.append(live)
        if live > report.peak_bytes:
            report.peak_bytes, report.peak_op = live, ops[i].name
    return report


def blob_lifetimes(job: Job) -> dict:
    """blob -> (index of its producer, index of its last reader) in stored order, for the blobs
    ops allocate (readers of an alias count for the blob it aliases; blobs output ops read
    live to the last op)."""
    ops = job.ops
    end = len(ops) - 1
    root: dict = {}
    life: dict = {}
    for i, o in enumerate(ops):
        for b in o.inputs:
            r = root.get(b, b)
            if r in life:
                life[r] = (life[r][0], max(life[r][1], end if o.op_type == "output" else i))
        for k in range(len(o.outputs)):
            blob = o.out(k)
            memory = _memory_of(o.op_type)
            if memory == "alias":
                root[blob] = root.get(o.inputs[0], o.inputs[0])
            elif memory not in _EXCLUDED:
                life[blob] = (i, i)
    return life


__all__ = ["MemoryReport", "job_memory", "blob_lifetimes"]
