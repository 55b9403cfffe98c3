"""Run under ``mpiexec -n N`` with a mode (``data``, ``tensor`` or ``pipeline``) and an output
folder: ``examples/gpt.py --parallel <mode>`` trains a global nn.Graph (pipeline: two blocks
in two stages, ``PIPE_ARGS``: 4 micro-batches); rank 0 writes the losses and the boxing and
transfer report of its Job to ``<folder>/losses.json``. Prints ``OK rank R``."""
import json
import os
import sys

import actorflow as flow
from examples import gpt

ARGS = ["--steps", "4", "--batch-size", "4", "--block-size", "16", "--n-embd", "16",
        "--n-layer", "1", "--n-head", "2", "--schedule-steps", "4", "--sample-len", "10",
        "--no-progress", "--trace-steps", "0"]
PIPE_ARGS = ["--n-layer", "2", "--grad-acc", "4"]


def main() -> None:
    r = flow.env.get_rank()
    mode, out = sys.argv[1], sys.argv[2]
    extra = PIPE_ARGS if mode == "pipeline" else []
    args = gpt.build_parser().parse_args(ARGS + extra + ["--parallel", mode, "--out",
                                                 os.path.join(out, "run")])
    res = gpt.train(args)
    if r == 0:
        with open(os.path.join(out, "losses.json"), "w") as f:
            json.dump({"losses": res["losses"], "sample": res["sample"],
                       "boxing": res["boxing"]}, f)
    print(f"OK rank {r}", flush=True)


if __name__ == "__main__":
    main()
