"""Rank script for test_launch_early.py: ranks that leave the program at different times.

argv[1]: "together" (every rank ends at once), "tail" (rank 0 works 1 s longer than the
others: within the exit wait), "exit0" (rank 1 calls sys.exit(0) at once, the others work on
for 6 s), "os_exit" (rank 1 leaves through os._exit(0), skipping actorflow's exit)."""
import os
import sys
import time

import actorflow as flow
from actorflow.process import watchdog

mode = sys.argv[1]
rank = flow.env.get_rank()
x = flow.ones(2) * (rank + 1)
flow.comm.all_reduce(x)  # every rank was there at the start
if mode in ("exit0", "os_exit"):
    watchdog.EXIT_WAIT_S = 1.5  # (shorter than the default 10 s, to keep the test quick)
    if rank == 1:
        print(f"rank {rank} leaves early", flush=True)
        if mode == "exit0":
            sys.exit(0)
        os._exit(0)
    time.sleep(6.0)
elif mode == "tail" and rank == 0:
    time.sleep(1.0)
print(f"rank {rank} done {x.numpy().tolist()}", flush=True)
