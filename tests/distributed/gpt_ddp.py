"""Run under ``mpiexec -n N`` with an output folder: ``examples/gpt.py`` in eager mode trains
data parallel; rank 0 writes the losses to ``<folder>/losses.json``. Prints ``OK rank R``."""
import json
import os
import sys

import actorflow as flow
from examples import gpt

r = flow.env.get_rank()
out = sys.argv[1]
args = gpt.build_parser().parse_args(
    ["--mode", "eager", "--steps", "4", "--batch-size", "4", "--block-size", "16",
     "--n-embd", "16", "--n-layer", "1", "--n-head", "2", "--schedule-steps", "4",
     "--sample-len", "10", "--no-progress", "--out", os.path.join(out, "run")])
res = gpt.train(args)
if r == 0:
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump({"losses": res["losses"], "sample": res["sample"]}, f)
print(f"OK rank {r}", flush=True)
