"""Run under ``mpiexec -n 2``: the Plan summaries ``simulate_plans(make, 2)`` compiles in one
process (each rank does it on its own, nothing exchanged) equal the summaries of the ranks'
real Plans (each rank compiles and runs its graph; the summaries gathered over MPI), for data
and tensor parallel, a pipeline with gradient accumulation and ZeRO 2 - up to the graph's
number in the job and communicator names. Afterwards the real graphs still run (the world
is back). Prints ``OK rank R``."""
import functools

import numpy as np

import actorflow as flow
from actorflow.process import groups
from tests.distributed import plan_factories as pf

r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n == 2, "run me under mpiexec -n 2"


def normal(s: dict) -> dict:
    """``s`` without the graph's number (job name, communicator keys)."""
    s = dict(s, job=s["job"].rsplit("_", 1)[0])
    s["collectives"] = [dict(c, group=c["group"].rstrip("0123456789")) for c in s["collectives"]]
    return s


CASES = {"dp": pf.dp, "tp": pf.tp, "pipe_acc": functools.partial(pf.pipe, acc=2),
         "zero2": functools.partial(pf.zero, 2)}
graphs = []
for name, make in CASES.items():
    g, args = make()
    loss = g(*args)
    real = groups.allgather_object(flow.distributed.plan_summary(g.plan), f"{name} summaries")
    sim, failures = flow.distributed.simulate_plans(make, 2)
    assert failures == [], (name, failures)
    assert [normal(s) for s in sim] == [normal(s) for s in real], (name, sim, real)
    assert sum(len(s["collectives"]) + len(s["transfers"]) for s in sim) > 0, name
    assert flow.distributed.check_plans(make, world_size=2) == [], name
    assert flow.distributed.check_plans(g) == [], name
    graphs.append((name, g, args, loss.numpy()))
assert flow.env.get_rank() == r and flow.env.get_world_size() == 2
for name, g, args, first in graphs:   # the real world is back: the graphs train on
    loss = g(*args).numpy()
    # (the step changed the parameters, every rank's all-reduces/transfers completed)
    assert loss.shape == first.shape and not np.array_equal(loss, first), (name, loss, first)
    g.close()
flow.synchronize()
print(f"OK rank {r}", flush=True)
