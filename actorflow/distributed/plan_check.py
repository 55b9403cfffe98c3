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
- ``check_plans(make, world_size=N)``: in ONE process (no ``mpiexec`` needed; under it every
  rank does the same on its own): ``simulate_plans`` compiles the Plan of each rank 0..N-1 and
  the summaries are compared; a rank whose trace or compile fails is a problem naming it.
- ``check_plans(graph)``: under ``mpiexec``, every rank summarises its compiled Plan of the
  running world, the summaries are gathered over the control communicator and compared
  (the same list on every rank).

A Job is traced per rank (shard shapes, pipeline stages and ZeRO's slices depend on the rank),
so the one-process form takes a factory ``make() -> (graph, args)`` (or ``(graph, args,
kwargs)``) that builds the model, optimizer, graph and inputs, and calls it once per rank
under ``world.simulate_rank(r, N)``: ``world()`` says rank r of N, the graph is traced and
compiled (``Graph._compiled_for``; the runtime never starts, no kernel of the Job runs). The
factory's eager global work (``to_global`` of the parameters, input creation, boxing) must
not communicate there: under the simulation global tensors get *meta shards*
(``dispatch.global_tensor._no_data``), the meta device's machinery reused - every global op
and boxing runs shape inference only, so the shard shapes and SBPs are exact and no
collective is even issued. That was chosen over a loopback communicator, which would have to
fake each collective's result shapes kernel by kernel (an all-gather's pieces, uneven splits)
and would still run every kernel; the meta shards need a switch in two helpers. The metadata
exchanges (``groups.allgather_object``: shard shapes of ``to_global``, seeds) answer as if
every rank passed the same (OneFlow's contract for ``to_global``). Each rank starts from the
same random state and graph/communicator numbering (as N real processes would), all of
which is restored afterwards, with the real world, also when a factory raises.
"""
from __future__ import annotations

import itertools
from typing import Callable

from actorflow.distributed import groups
from actorflow.distributed.world import get_rank, get_world_size, simulate_rank

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


def _unpack(made, r: int) -> tuple:
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise TypeError(f"check_plans: the factory returned {type(made).__name__} on rank {r}; "
                        f"it must return (graph, args) or (graph, args, kwargs)")
    graph, args = made[0], tuple(made[1])
    kwargs = dict(made[2]) if len(made) == 3 else {}
    return graph, args, kwargs


class _Numbering:
    """Graph and communicator numbers (``Graph_3``, ``graph3``: in job names and collectives'
    groups) restarted at today's values for each simulated rank, as each real process would
    count them, and moved past every number used on exit."""

    def __init__(self):
        # late: distributed sits below dispatch and nn.graph, whose counters these are
        from actorflow.dispatch import lazy_global  # (late, as above)
        from actorflow.nn.graph import graph  # (late, as above)

        self.homes = ((graph, "_graph_ids"), (lazy_global, "_group_ids"))
        self.start = [next(getattr(m, a)) for m, a in self.homes]
        self.used = list(self.start)

    def restart(self) -> None:
        for k, (m, a) in enumerate(self.homes):
            self.used[k] = max(self.used[k], next(getattr(m, a)))
            setattr(m, a, itertools.count(self.start[k]))

    def finish(self) -> None:
        self.restart()
        for (m, a), n in zip(self.homes, self.used):
            setattr(m, a, itertools.count(n + 1))


def simulate_plans(make: Callable, world_size: int) -> tuple:
    """``(summaries, failures)``: ``plan_summary`` of the Plan each rank 0..world_size-1
    compiles from ``make()`` (see the module docstring), in this one process; ``failures``:
    one line per rank whose factory, trace or compile raised, naming the rank."""
    from actorflow.random import default_generator

    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"check_plans: world_size must be an int >= 1, got {world_size!r}")
    state = default_generator.get_state()
    numbering = _Numbering()
    summaries, failures = [], []
    try:
        for r in range(world_size):
            default_generator.set_state(state)
            numbering.restart()
            try:
                with simulate_rank(r, world_size):
                    graph, args, kwargs = _unpack(make(), r)
                    compiled, _ = graph._compiled_for(args, kwargs)
                    summaries.append(plan_summary(compiled.plan, r))
                    graph.close()
            except Exception as e:  # noqa: BLE001  (reported, naming the rank)
                msg = "\n    ".join(str(e).splitlines()[:6])
                failures.append(f"rank {r} of {world_size}: building or compiling its Plan "
                                f"failed: {type(e).__name__}: {msg}")
    finally:
        default_generator.set_state(state)
        numbering.finish()
    return summaries, failures


def check_plans(graph, world_size: int | None = None) -> list:
    """The problems (``compare_plans``) between the ranks' compiled Plans. ``graph``: a
    factory ``make() -> (graph, args[, kwargs])``: the Plans of ranks 0..``world_size``-1
    (default: the running world's size; required in a one-process world, ValueError without
    it) are compiled in this process (``simulate_plans``), a rank that fails to compile is a
    problem naming it. Or an ``nn.Graph`` already called,
    under ``mpiexec`` (every rank calls it): the running ranks' Plans are gathered and
    compared, the same list on every rank; its ``world_size``, if given, must be the
    running world's size."""
    from actorflow.nn.graph.graph import Graph  # late: nn sits above the distributed layer

    n = get_world_size()
    if not isinstance(graph, Graph):
        if not callable(graph):
            raise TypeError(f"check_plans: takes an nn.Graph or a factory make() -> (graph, "
                            f"args), got {type(graph).__name__}")
        if world_size is None and n == 1:   # one simulated rank compared with itself
            raise ValueError("check_plans: a factory needs world_size= (the number of ranks "
                             "whose Plans to compile and compare in this process) or a run "
                             "under mpiexec; in a one-process world it would compare one "
                             "rank's Plan with itself")
        summaries, failures = simulate_plans(graph, n if world_size is None else world_size)
        return failures + (compare_plans(summaries) if summaries else [])
    if world_size is not None and world_size != n:
        raise ValueError(f"check_plans: world_size={world_size} but {n} process(es) are "
                         f"running; each rank's Plan comes from that rank's own trace: pass a "
                         f"factory make() -> (graph, args) to compile the Plans of "
                         f"{world_size} ranks in this process, or run the program under "
                         f"mpiexec -n {world_size}")
    summary = plan_summary(graph.plan)
    return compare_plans(groups.allgather_object(summary, "check_plans: gathering Plans"))


__all__ = ["plan_summary", "compare_plans", "check_plans", "simulate_plans"]
