"""The memory plan: register memory is allocated once, in blocks; registers whose lifetimes
within an iteration don't overlap share a block.

Register B may take over A's block when every consumer of A acts before B's producer - known
from the dependency graph (A's consumers are ancestors of B's producer), not from a guess about
timing. That holds within an iteration; across iterations the compiler's ``compute_start`` /
``iteration_end`` ticks keep one iteration's compute section from starting before the previous
one ended. Registers that live across acts of several iterations or micro-batches (more than one
register, per-micro-batch tasks, inputs, variables, literals, aliases) get memory of their own.
"""
from __future__ import annotations

import bisect
import heapq

from actorflow.compiler.plan import _aligned

_SHAREABLE_KINDS = ("normal", "acc", "pack")


def plan_memory(tasks: list, regsts: dict, share: bool = True) -> dict:
    """Assign ``regst.mem`` for every register that needs memory; returns the report
    ``{"blocks": [bytes...], "bytes_without_sharing", "bytes_with_sharing"}``.

    Registers are placed in producer order. A block becomes a candidate once the position of
    the last task touching its occupant (producer and readers; tasks are numbered in a
    topological order) is before the new producer - necessary for those tasks to be its
    ancestors - and candidates are kept sorted by size, so finding the best fit costs a few
    reachability checks instead of a scan of every block."""
    order = {t.task_id: i for i, t in enumerate(tasks)}
    by_id = {t.task_id: t for t in tasks}
    ancestors = _ancestors(tasks, regsts, order) if share else None
    readers = _readers(tasks, regsts) if share else None
    blocks: list = []        # sizes
    occupant: list = []      # per block: the regst last placed there
    pending: list = []       # heap of (last position touching the occupant, block)
    released: list = []      # sorted (size, block) of blocks whose occupant is done by position
    without = 0
    for r in sorted(regsts.values(), key=lambda r: order[r.producer]):
        producer = by_id[r.producer]
        if not r.blobs or producer.kind in ("variable", "input") or r.alias_of is not None:
            r.mem = [[None] * len(r.blobs) for _ in range(r.regst_num)]
            continue
        size = r.nbytes()
        without += size * r.regst_num
        shareable = (share and r.regst_num == 1 and producer.kind in _SHAREABLE_KINDS
                     and producer.time_shape == 1 and size > 0)
        pos = order[r.producer]
        while pending and pending[0][0] < pos:
            _, b = heapq.heappop(pending)
            bisect.insort(released, (blocks[b], b))
        r.mem = []
        for _ in range(r.regst_num):
            block = _take_block(r, size, released, occupant, regsts, ancestors, order,
                                readers, by_id) if shareable else None
            if block is None:
                block = len(blocks)
                blocks.append(size)
                occupant.append(r.regst_desc_id if shareable else None)
            else:
                blocks[block] = max(blocks[block], size)
                occupant[block] = r.regst_desc_id
            if shareable:
                last = max([pos] + [order[c] for c in readers[r.regst_desc_id]])
                heapq.heappush(pending, (last, block))
            offsets, off = [], 0
            for _, d in r.blobs:
                offsets.append((block, off))
                off += _aligned(d.nbytes())
            r.mem.append(offsets)
    return {"blocks": blocks, "bytes_without_sharing": without,
            "bytes_with_sharing": sum(blocks)}


def _take_block(r, size, released, occupant, regsts, ancestors, order, readers, by_id):
    """Remove from ``released`` and return the block closest in size whose last occupant was
    written, and read by every task that reads it, before ``r``'s producer acts (known from
    reachability). An acc/pack task writes its register at its first micro-batch act, so it
    only takes a block no per-micro-batch task reads. None if no block qualifies."""
    mine = ancestors[order[r.producer]]
    first_act_writes = by_id[r.producer].kind in ("acc", "pack")

    def fits(b: int) -> bool:
        prev = regsts[occupant[b]]
        if prev.producer == r.producer or not (mine >> order[prev.producer]) & 1:
            return False
        if not all((mine >> order[c]) & 1 for c in readers[prev.regst_desc_id]):
            return False
        return not (first_act_writes
                    and any(by_id[c].time_shape > 1 for c in readers[prev.regst_desc_id]))

    up = bisect.bisect_left(released, (size, -1))
    down = up - 1
    while up < len(released) or down >= 0:  # nearest sizes first, from both sides
        take_up = down < 0 or (up < len(released)
                               and released[up][0] - size <= size - released[down][0])
        k = up if take_up else down
        if fits(released[k][1]):
            return released.pop(k)[1]
        if take_up:
            up += 1
        else:
            down -= 1
    return None


def _readers(tasks: list, regsts: dict) -> dict:
    """regst id -> the tasks that read its memory: consumers whose kernel inputs come from it
    (a control consumer - an update ordered after the readers of the variable it writes, or a
    tick - only waits for the register, so it doesn't keep the memory alive), and the readers
    of a register aliasing it (repeat/unpack)."""
    readers: dict = {rid: set() for rid in regsts}
    for t in tasks:
        for rid, _ in t.input_blobs:
            readers[rid].add(t.task_id)
    for r in regsts.values():
        src = r.alias_of
        while src is not None:
            readers[src] |= readers[r.regst_desc_id]
            src = regsts[src].alias_of
    return readers


def _ancestors(tasks: list, regsts: dict, order: dict) -> list:
    """Per task (by position in ``tasks``), a bit set of the positions of every task that acts
    before it in the same iteration (its transitive producers, data and control)."""
    preds = [set() for _ in tasks]
    users = [[] for _ in tasks]
    for t in tasks:
        i = order[t.task_id]
        for rids in t.consumed_regsts.values():
            for rid in rids:
                p = order[regsts[rid].producer]
                if p != i and p not in preds[i]:
                    preds[i].add(p)
                    users[p].append(i)
    missing = [len(p) for p in preds]
    ready = [i for i, m in enumerate(missing) if m == 0]
    anc = [0] * len(tasks)
    while ready:
        i = ready.pop()
        bits = 0
        for p in preds[i]:
            bits |= anc[p] | (1 << p)
        anc[i] = bits
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                ready.append(u)
    return anc
