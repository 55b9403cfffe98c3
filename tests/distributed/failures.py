"""Run under ``mpiexec -n 2`` with a mode argument; each mode makes one rank fail in a way that
would leave the other blocked forever with plain MPI. The test checks every rank exits non-zero
in bounded time and that the output names the op and the rank."""
import sys
import time

import actorflow as flow

mode = sys.argv[1]
r = flow.env.get_rank()
# small: a plain MPI call on this thread (comm.all_reduce's direct path); large: queued on the
# communication worker
x = flow.ones(flow.comm.SMALL_ALL_REDUCE + 1) if mode == "stall_large" else flow.ones(4, 8)
flow.synchronize()  # nothing pending on x: a small one takes the direct path
if mode == "raise" and r == 1:
    raise ValueError("bad input on rank 1 only")
if mode in ("stall", "stall_large") and r == 1:
    time.sleep(120)  # alive, but never joins the collective
if mode == "exit" and r == 1:
    sys.exit(0)  # leaves without joining the collective
if mode == "kernel" and r == 1:
    flow.embedding(flow.tensor([9]), flow.ones(3, 2)).numpy()  # a kernel error, uncaught
flow.comm.all_reduce(x)
print(f"rank {r} finished: {x.numpy().sum()}", flush=True)
