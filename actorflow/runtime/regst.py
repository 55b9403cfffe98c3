"""Registers: the runtime form of a regst desc. A register holds one array per blob (views
into the memory blocks the memory plan laid out) and the id of the job instance it belongs to."""
from __future__ import annotations

import numpy as np


class Regst:
    """One register of regst desc ``desc_id`` (``index`` among its ``regst_num``)."""

    __slots__ = ("desc_id", "index", "producer", "arrays", "piece", "micro")

    def __init__(self, desc_id: int, index: int, producer: int, arrays: list):
        self.desc_id = desc_id
        self.index = index
        self.producer = producer
        self.arrays = arrays
        self.piece = -1   # job instance (graph call) it carries
        self.micro = 0    # micro-batch index within the instance

    def __repr__(self) -> str:
        return f"<Regst {self.desc_id}.{self.index} piece={self.piece}>"


def allocate_blocks(memory: dict) -> list:
    """One byte array per memory block of the plan (allocated once per runtime)."""
    return [np.empty(size, dtype=np.uint8) for size in memory.get("blocks", [])]


def make_regsts(desc, blocks: list) -> list:
    """The registers of ``desc``, their blob arrays placed as the memory plan says (None where
    the actor binds memory at act time: inputs, variables, aliases)."""
    out = []
    for k in range(desc.regst_num):
        arrays = []
        placement = desc.mem[k] if k < len(desc.mem) else [None] * len(desc.blobs)
        for (_, d), where in zip(desc.blobs, placement):
            if where is None:
                arrays.append(None)
                continue
            block, off = where
            n = d.nbytes()
            raw = blocks[block][off:off + n]
            arrays.append(raw.view(d.dtype.np).reshape(d.shape))
        out.append(Regst(desc.regst_desc_id, k, desc.producer, arrays))
    return out
