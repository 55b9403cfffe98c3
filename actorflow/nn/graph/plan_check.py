"""Cross-checking the ranks' compiled Plans of a distributed nn.Graph in one process (issue
#15): the part that compiles Plans (``flow.distributed.check_plans`` and ``simulate_plans``
forward here; the summaries and their comparison are ``compiler/plan_check.py``'s).

- ``check_plans(make, world_size=N)``: in ONE process (no ``mpiexec`` needed; under it every
  rank does the same on its own): ``simulate_plans`` compiles the Plan of each rank 0..N-1 and
  the summaries are compared; a rank whose trace or compile fails is a problem naming it.
- ``check_plans(graph)``: under ``mpiexec``, every rank summarises its compiled Plan of the
  running world, the summaries are gathered over the control communicator and compared
  (the same list on every rank).

A Job is traced per rank (shard shapes, pipeline stages and ZeRO's slices depend on the rank),
so the one-process form takes a factory ``make() -> (graph, args)`` (or ``(graph, args,
kwargs)``) that builds the model, optimizer, graph and inputs, and calls it once per rank under
``world.simulate_rank(r, N)``: ``world()`` says rank r of N, the graph is traced and compiled
(``Graph._compiled_for``; the runtime never starts, no kernel of the Job runs). The factory's
eager global work (``to_global`` of the parameters, input creation, boxing) must not
communicate there: under the simulation global tensors get *meta shards*
(``dispatch.global_tensor._no_data``), the meta device's machinery reused - every global op and
boxing runs shape inference only, so the shard shapes and SBPs are exact and no collective is
even issued. That was chosen over a loopback communicator, which would have to fake each
collective's result shapes kernel by kernel (an all-gather's pieces, uneven splits) and would
still run every kernel; the meta shards need a switch in two helpers. The metadata exchanges
(``groups.allgather_object``: shard shapes of ``to_global``, seeds) answer as if every rank
passed the same (OneFlow's contract for ``to_global``). Each rank starts from the same random
state and graph/communicator numbering (as N real processes would: ``graph.graph_numbering``,
``lazy_global.group_numbering``), all of which is restored afterwards, with the real world,
also when a factory raises.
"""
from __future__ import annotations

from typing import Callable

from actorflow.dispatch.lazy_global import group_numbering
from actorflow.process import groups
from actorflow.compiler.plan_check import compare_plans, plan_summary
from actorflow.process.world import get_world_size, simulate_rank
from actorflow.nn.graph.graph import Graph, graph_numbering
from actorflow.random import default_generator


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

    homes = (graph_numbering, group_numbering)

    def __init__(self):
        self.start = [number() for number in self.homes]
        self.used = list(self.start)

    def restart(self) -> None:
        for k, number in enumerate(self.homes):
            self.used[k] = max(self.used[k], number())
            number(self.start[k])

    def finish(self) -> None:
        self.restart()
        for number, n in zip(self.homes, self.used):
            number(n)


def simulate_plans(make: Callable, world_size: int) -> tuple:
    """``(summaries, failures)``: ``plan_summary`` of the Plan each rank 0..world_size-1
    compiles from ``make()`` (see the module docstring), in this one process; ``failures``:
    one line per rank whose factory, trace or compile raised, naming the rank."""
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
    problem naming it. Or an ``nn.Graph`` already called, under ``mpiexec`` (every rank calls
    it): the running ranks' Plans are gathered and compared, the same list on every rank; its
    ``world_size``, if given, must be the running world's size."""
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


__all__ = ["check_plans", "simulate_plans"]
