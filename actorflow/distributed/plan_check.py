"""Cross-checking the ranks' compiled Plans of a distributed nn.Graph (issue #15).

Every rank compiles its own Plan from its own trace; ranks meet only in collectives (entered in
the Plan's ``collective_seq`` order, on the graph's communicators) and, once pipelining lands,
in point-to-point transfers. A rank whose Plan issues another collective at the same number, or
a send without its matching receive, hangs the job at run time; this check finds it from the
Plans before anything runs:

- ``plan_summary(plan)``: what a Plan shows the other ranks - its collectives in schedule order
  (op name, op type, group, logical shape, bytes, split dims) and its transfers (send/recv
  tasks: peer, key, shape).
- ``compare_plans(summaries)``: pure; the summaries of ranks 0..n-1 in, one line per problem
  out, naming the ops on each side: collectives that differ at a position (or that one rank
  lacks), and sends without a matching receive (or out of order).
- ``check_plans(graph)``: under ``mpiexec``, every rank summarises its compiled Plan, the
  summaries are gathered over the control communicator and compared; returns the problems
  (the same list on every rank). Compiling all ranks' Plans in one process would need each
  rank's trace (its shard shapes, its rank-dependent ops), so a ``world_size`` other than the
  running world's is refused.
"""
from __future__ import annotations

from actorflow.distributed import groups
from actorflow.distributed.world import get_rank, get_world_size

# fields of a collective that every rank must agree on, in the order they are reported
_AGREE = ("op_type", "group", "shape", "in_dim", "out_dim", "ranks")


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
            transfers.append({"op": t.op_name, "kind": kind, "peer": int(a["peer"]),
                              "key": a.get("key", a.get("tag")),
                              "shape": tuple(a["shape"]) if a.get("shape") is not None else None})
    return {"rank": get_rank() if rank is None else rank, "job": plan.job_name, "collectives": out,
            "transfers": transfers}


def _describe(c: dict) -> str:
    extra = f", {c['bytes']} B" if c.get("bytes") is not None else ""
    return f"{c['op_type']} {c['op']!r} (group {c['group']}, shape {c['shape']}{extra})"


def _compare_collectives(summaries: list) -> list:
    problems = []
    ref = summaries[0]
    for s in summaries[1:]:
        a, b = ref["collectives"], s["collectives"]
        for k in range(max(len(a), len(b))):
            if k >= len(a) or k >= len(b):
                have, lack = (ref, s) if k < len(a) else (s, ref)
                problems.append(
                    f"collective #{k}: rank {have['rank']} issues "
                    f"{_describe(have['collectives'][k])}, rank {lack['rank']} has only "
                    f"{len(lack['collectives'])} collectives (it would wait forever)")
                continue
            diff = [f for f in _AGREE if a[k].get(f) != b[k].get(f)]
            if diff:
                problems.append(
                    f"collective #{k}: rank {ref['rank']} issues {_describe(a[k])} but rank "
                    f"{s['rank']} issues {_describe(b[k])} (they differ in "
                    f"{', '.join(diff)})")
    return problems


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
            elif (sends[k]["key"], sends[k]["shape"]) != (recvs[k]["key"], recvs[k]["shape"]):
                problems.append(f"transfer #{k} rank {src} -> {dst}: send {sends[k]['op']!r} "
                                f"(key {sends[k]['key']}, shape {sends[k]['shape']}) meets "
                                f"recv {recvs[k]['op']!r} (key {recvs[k]['key']}, shape "
                                f"{recvs[k]['shape']})")
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


def check_plans(graph, world_size: int | None = None) -> list:
    """Under ``mpiexec`` (every rank calls it, after the graph's first call): compare the ranks'
    compiled Plans of ``graph``; returns the problems (``compare_plans``), the same on every
    rank. ``world_size``, if given, must be the running world's size."""
    n = get_world_size()
    if world_size is not None and world_size != n:
        raise ValueError(f"check_plans: world_size={world_size} but {n} process(es) are "
                         f"running; each rank's Plan comes from that rank's own trace, so run "
                         f"the program under mpiexec -n {world_size}")
    summary = plan_summary(graph.plan)
    return compare_plans(groups.allgather_object(summary, "check_plans: gathering Plans"))


__all__ = ["plan_summary", "compare_plans", "check_plans"]
