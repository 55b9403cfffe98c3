"""Cross-checking the ranks' compiled Plans of a distributed nn.Graph (issue #15).

Every rank compiles its own Plan from its own trace; ranks meet only in collectives (entered in
the Plan's ``collective_seq`` order, on the graph's communicators) and in point-to-point
transfers (pipeline stages). A rank whose Plan issues another collective at the same number, or
a send without its matching receive, hangs the job at run time; this check finds it from the
Plans before anything runs:

- ``plan_summary(plan)``: what a Plan shows the other ranks - its collectives in schedule order
  (op name, op type, group, logical shape, bytes, split dims) and its transfers (send/recv
  tasks: peer, key, shape).
- ``compare_plans(summaries)``: pure; the summaries of ranks 0..n-1 in, one line per problem
  out, naming the ops on each side: collectives that differ at a position (or that one rank
  lacks), and sends without a matching receive (or out of order).
- ``check_plans(make, world_size=N)`` (one process: every rank's Plan compiled under
  ``process.world.simulate_rank``) and ``check_plans(graph)`` (under ``mpiexec``: the running
  ranks' summaries gathered and compared) trace and compile Graphs, so they live with
  ``nn.Graph`` (``nn/graph/plan_check.py``, which says how the simulation works);
  ``flow.distributed`` offers both halves.
"""
from __future__ import annotations

from actorflow.process.world import get_rank

# fields of a collective that every rank must agree on, in the order they are reported
_AGREE = ("op_type", "group", "shape", "in_dim", "out_dim", "ranks")
# ... and those of a transfer that its sender and receiver must agree on (where both know them)
_MATCH = ("key", "shape", "bytes")


def _is_transfer(task) -> str | None:
    """"send" or "recv" for a point-to-point task (one with a ``peer`` attr), else None."""
    if "peer" not in task.attrs:
        return None
    for kind in ("send", "recv"):
        if kind in task.op_type or task.kind == kind:
            return kind
    return None


def plan_summary(plan, rank: int | None = None) -> dict:
    """What ``plan`` (this rank's compiled Plan) does with other ranks: ``{"rank", "job",
    "collectives": [...] in schedule order, "transfers": [...] in task order}``."""
    coll = [t for t in plan.tasks if t.kind == "collective"]
    coll.sort(key=lambda t: t.attrs.get("collective_seq", 0))
    out = []
    for t in coll:
        a = t.attrs
        box = t.tags.get("boxing", {}) if isinstance(t.tags, dict) else {}
        out.append({"op": t.op_name, "op_type": t.op_type, "group": a.get("group"),
                    "shape": tuple(a["shape"]) if a.get("shape") is not None else None,
                    "in_dim": a.get("in_dim"), "out_dim": a.get("out_dim"),
                    "ranks": tuple(a["ranks"]) if a.get("ranks") is not None else None,
                    "bytes": box.get("bytes"), "reason": box.get("reason")})
    transfers = []
    for t in plan.tasks:
        kind = _is_transfer(t)
        if kind is not None:
            a = t.attrs
            info = t.tags.get("transfer", {}) if isinstance(t.tags, dict) else {}
            transfers.append({"op": t.op_name, "kind": kind, "peer": int(a["peer"]),
                              "key": a.get("key", a.get("tag")),
                              "shape": tuple(a["shape"]) if a.get("shape") is not None else None,
                              "bytes": info.get("bytes")})
    return {"rank": get_rank() if rank is None else rank, "job": plan.job_name, "collectives": out,
            "transfers": transfers}


def _describe(c: dict) -> str:
    extra = f", {c['bytes']} B" if c.get("bytes") is not None else ""
    return f"{c['op_type']} {c['op']!r} (group {c['group']}, shape {c['shape']}{extra})"


def _comm(c: dict, everyone: tuple) -> tuple:
    """The communicator a collective runs on: its group key and ranks (all, when unnamed)."""
    return c.get("group"), tuple(c["ranks"]) if c.get("ranks") is not None else everyone


def _compare_collectives(summaries: list) -> list:
    """Replay the ranks' collectives as the runtime enters them: each rank in its schedule
    order, a collective completing once every rank of its communicator has reached it. Ranks
    that meet on a communicator with collectives that differ (op type, shape, split dims) are
    named; when no collective can complete any more, the ranks still waiting hang: each is
    named with the collective it waits in and what the rank it waits for does instead."""
    seqs = {s["rank"]: s["collectives"] for s in summaries}
    everyone = tuple(sorted(seqs))
    pos = dict.fromkeys(seqs, 0)
    problems = []

    def head(r):
        return seqs[r][pos[r]] if pos[r] < len(seqs[r]) else None

    moved = True
    while moved:
        moved = False
        for r in everyone:
            c = head(r)
            if c is None:
                continue
            comm = _comm(c, everyone)
            absent = [m for m in comm[1] if m not in seqs]
            if absent:
                problems.append(f"collective #{pos[r]}: rank {r} issues {_describe(c)} with rank "
                                f"{absent[0]}, which has no Plan here")
                pos[r] += 1
                moved = True
                continue
            heads = {m: head(m) for m in comm[1]}
            if any(h is None or _comm(h, everyone) != comm for h in heads.values()):
                continue  # not every member is there yet
            ref = comm[1][0]
            for m in comm[1][1:]:
                diff = [f for f in _AGREE if heads[ref].get(f) != heads[m].get(f)]
                if diff:
                    problems.append(
                        f"collective #{pos[ref]}: rank {ref} issues {_describe(heads[ref])} but "
                        f"rank {m} issues {_describe(heads[m])} (they differ in "
                        f"{', '.join(diff)})")
            for m in comm[1]:
                pos[m] += 1
            moved = True
    told = set()
    for r in everyone:   # stuck: every rank left waits for one that does something else
        c = head(r)
        if c is None:
            continue
        comm = _comm(c, everyone)
        for m in comm[1]:
            h = head(m)
            if m == r or frozenset((r, m)) in told or (h is not None
                                                       and _comm(h, everyone) == comm):
                continue
            told.add(frozenset((r, m)))
            if h is None:
                problems.append(f"collective #{pos[r]}: rank {r} issues {_describe(c)}, rank {m} "
                                f"has only {len(seqs[m])} collectives (it would wait forever)")
            else:
                diff = [f for f in _AGREE if c.get(f) != h.get(f)]
                problems.append(f"collective #{pos[r]}: rank {r} issues {_describe(c)} but rank "
                                f"{m} issues {_describe(h)} (they differ in {', '.join(diff)}; "
                                f"neither completes: a hang)")
            break
    return problems


def _disagree(send: dict, recv: dict) -> list:
    """The fields of ``_MATCH`` a send and its receive give differently (both known)."""
    return [f for f in _MATCH if send.get(f) is not None and recv.get(f) is not None
            and send[f] != recv[f]]


def _side(t: dict) -> str:
    extra = f", {t['bytes']} B" if t.get("bytes") is not None else ""
    return f"{t['op']!r} (key {t['key']}, shape {t['shape']}{extra})"


def _compare_transfers(summaries: list) -> list:
    problems = []
    by_rank = {s["rank"]: s for s in summaries}
    pairs = set()   # (sender, receiver) either side names
    for s in summaries:
        for t in s["transfers"]:
            pairs.add((s["rank"], t["peer"]) if t["kind"] == "send" else (t["peer"], s["rank"]))
    for src, dst in sorted(pairs):
        missing = [r for r in (src, dst) if r not in by_rank]
        if missing:
            problems.append(f"a transfer rank {src} -> {dst} names rank {missing[0]}, which has "
                            f"no Plan here")
            continue
        sends = [t for t in by_rank[src]["transfers"] if t["kind"] == "send" and t["peer"] == dst]
        recvs = [t for t in by_rank[dst]["transfers"] if t["kind"] == "recv" and t["peer"] == src]
        for k in range(max(len(sends), len(recvs))):
            if k >= len(recvs):
                problems.append(f"send {sends[k]['op']!r} (rank {src} -> {dst}, key "
                                f"{sends[k]['key']}) has no matching recv on rank {dst}")
            elif k >= len(sends):
                problems.append(f"recv {recvs[k]['op']!r} on rank {dst} waits for rank "
                                f"{src}, which sends nothing for it (key {recvs[k]['key']})")
            elif _disagree(sends[k], recvs[k]):
                problems.append(f"transfer #{k} rank {src} -> {dst}: send {_side(sends[k])} "
                                f"meets recv {_side(recvs[k])} (they differ in "
                                f"{', '.join(_disagree(sends[k], recvs[k]))})")
    return problems


def compare_plans(summaries: list) -> list:
    """Problems between the ranks' Plan summaries (``plan_summary`` of each rank, any order):
    one line each, naming the ops on both sides; empty when the Plans agree."""
    summaries = sorted(summaries, key=lambda s: s["rank"])
    jobs = {s["job"] for s in summaries}
    problems = []
    if len(jobs) > 1:
        problems.append(f"the ranks compiled different graphs: {sorted(jobs)}")
    return problems + _compare_collectives(summaries) + _compare_transfers(summaries)


__all__ = ["plan_summary", "compare_plans"]
