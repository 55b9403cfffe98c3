"""The memory plan: register memory is allocated once. Registers whose lifetimes within an
iteration can't overlap may lie at the same addresses of one arena; the others get a block of
their own.

Register B may lie over A when every task touching A (its producer and readers) acts before
B's producer - known from the dependency graph (they are ancestors of B's producer), not from
a guess about timing - or the other way round. That holds within an iteration; across
iterations the compiler's ``compute_start`` / ``iteration_end`` ticks keep one iteration's
compute section from starting before the previous one ended. Registers that live across acts
of several iterations or micro-batches (more than one register, per-micro-batch tasks, inputs,
variables, literals, aliases) get memory of their own. An acc/pack task writes its register at
its first micro-batch act, so it only lies over registers no per-micro-batch task reads.

Placement is greedy by size (largest register first; ties in producer order), each at the
lowest offset of the arena where it overlaps no register it may not lie over (heap-simulation
allocators do the same): the arena comes out close to the largest set of registers live at
once, where a block per register shape would add the differences of sizes.

In place: a task whose kernel may write an output over one of its inputs (``in_place``: task
id -> ``(output blob, input position)`` pairs its generated kernel declares safe, see
``compiler/codegen``) may put its register exactly over that input's when the input register
is shareable, holds only that blob, has the output's size, is read by the task at that position
only and not through a view, and every other task touching it is an ancestor of the task (so
the task is its last reader). The output is the register's first blob, so it lies over the
input element for element and the register's other blobs after it.
"""
from __future__ import annotations

from actorflow.compiler.plan import _aligned

_SHAREABLE_KINDS = ("normal", "acc", "pack")


class _Life:
    """What the placement knows of one shareable register."""

    __slots__ = ("rid", "size", "pos", "last", "bits", "first_act_writes", "micro_read",
                 "offset", "partner")

    def __init__(self, rid, size, pos, last, bits, first_act_writes, micro_read):
        self.rid, self.size, self.pos, self.last, self.bits = rid, size, pos, last, bits
        self.first_act_writes, self.micro_read = first_act_writes, micro_read
        self.offset = None
        self.partner = None  # the register it is computed over, or that is computed over it


def plan_memory(tasks: list, regsts: dict, share: bool = True,
                in_place: dict | None = None) -> dict:
    """Assign ``regst.mem`` for every register that needs memory; returns the report
    ``{"blocks": [bytes...], "bytes_without_sharing", "bytes_with_sharing", "in_place"}``
    (``in_place``: how many registers lie over an input of their producer, see the module
    docstring; the arena is the last block)."""
    order = {t.task_id: i for i, t in enumerate(tasks)}
    by_id = {t.task_id: t for t in tasks}
    readers = _readers(tasks, regsts) if share else None
    blocks: list = []
    lives: dict = {}
    without = 0
    for r in sorted(regsts.values(), key=lambda r: order[r.producer]):
        producer = by_id[r.producer]
        if not r.blobs or producer.kind in ("variable", "input") or r.alias_of is not None:
            r.mem = [[None] * len(r.blobs) for _ in range(r.regst_num)]
            continue
        size = r.nbytes()
        without += size * r.regst_num
        if (share and r.regst_num == 1 and producer.kind in _SHAREABLE_KINDS
                and producer.time_shape == 1 and size > 0):
            pos = order[r.producer]
            rs = readers[r.regst_desc_id]
            bits = 1 << pos
            for c in rs:
                bits |= 1 << order[c]
            lives[r.regst_desc_id] = _Life(
                r.regst_desc_id, size, pos, max([pos] + [order[c] for c in rs]), bits,
                producer.kind in ("acc", "pack"), any(by_id[c].time_shape > 1 for c in rs))
            continue
        r.mem = []
        for _ in range(r.regst_num):
            r.mem.append(_offsets(r, len(blocks), 0))
            blocks.append(size)
    n_in_place = 0
    if lives:
        ancestors = _ancestors(tasks, regsts, order)
        if in_place:
            _pair_in_place(lives, in_place, regsts, by_id, order, ancestors, readers)
        arena = _place(lives, ancestors)
        for life in lives.values():
            r = regsts[life.rid]
            r.mem = [_offsets(r, len(blocks), life.offset)]
            p = life.partner
            if p is not None and p.offset == life.offset and p.pos < life.pos:
                n_in_place += 1
        blocks.append(arena)
    return {"blocks": blocks, "bytes_without_sharing": without,
            "bytes_with_sharing": sum(blocks), "in_place": n_in_place}


def _offsets(r, block: int, start: int) -> list:
    out, off = [], start
    for _, d in r.blobs:
        out.append((block, off))
        off += _aligned(d.nbytes())
    return out


def _disjoint(a: _Life, b: _Life, ancestors: list) -> bool:
    """Whether ``a`` and ``b`` may lie at the same addresses: every task touching one acts
    before the other's producer (positions first: a necessary condition, cheap)."""
    if a.last < b.pos:
        return (not (b.first_act_writes and a.micro_read)
                and ancestors[b.pos] & a.bits == a.bits)
    if b.last < a.pos:
        return (not (a.first_act_writes and b.micro_read)
                and ancestors[a.pos] & b.bits == b.bits)
    return False


def _place(lives: dict, ancestors: list) -> int:
    """Give each register its arena offset (see the module docstring); returns the arena's
    size. A register and the one it is computed over in place go together, at the lowest
    offset free for both."""
    placed: list = []
    top = 0
    for life in sorted(lives.values(), key=lambda x: (-x.size, x.pos)):
        if life.offset is not None:
            continue  # placed with its partner
        group = (life,) if life.partner is None else (life, life.partner)
        size = max(m.size for m in group)
        taken = []
        for q in placed:
            for m in group:
                if not _disjoint(q, m, ancestors):
                    taken.append((q.offset, q.offset + q.size))
                    break
        taken.sort()
        off = 0
        for lo, hi in taken:
            if lo >= off + size:
                break
            if hi > off:
                off = hi
        for m in group:
            m.offset = off
            placed.append(m)
        top = max(top, off + size)
    return top


def _pair_in_place(lives, in_place, regsts, by_id, order, ancestors, readers) -> None:
    """Pair each register a task may compute over one of its inputs with that input."""
    for tid, pairs in in_place.items():
        t = by_id.get(tid)
        rid = t.produced_regsts.get("out") if t is not None else None
        mine = lives.get(rid)
        if mine is None:
            continue
        anc = ancestors[order[tid]]
        r = regsts[rid]
        for out_idx, pos in pairs:
            if out_idx != 0 or pos >= len(t.input_blobs) or pos in t.input_views:
                continue
            src_id, idx = t.input_blobs[pos]
            src = lives.get(src_id)
            if src is None or src.partner is not None or idx != 0:
                continue
            s = regsts[src_id]
            if len(s.blobs) != 1:
                continue
            a, b = r.blobs[0][1], s.blobs[0][1]
            if a.dtype != b.dtype or a.nbytes() != b.nbytes():
                continue
            if sum(1 for x in t.input_blobs if x[0] == src_id) != 1 or src.micro_read:
                continue
            others = src.bits & ~(1 << order[tid])
            if anc & others != others:
                continue
            src.partner, mine.partner = mine, src
            break


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
