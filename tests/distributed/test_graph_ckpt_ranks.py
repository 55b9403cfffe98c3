"""The global-view round trip of a checkpoint: saved on 2 ranks (``global_dst_rank=0``: an
eager global model with Adam, and a global nn.Graph's state dict with its training step),
loaded on 1 process into local models and on 4 ranks into the same global layout (uneven
splits), each continuing to the 2-rank run's losses (rank script ``graph_ckpt_ranks.py``)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.distributed.test_distributed import ROOT, HERE, needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(300)
def test_a_checkpoint_of_2_ranks_loads_on_1_process_and_on_4_ranks(tmp_path):
    code, _, out = run_ranks(2, "graph_ckpt_ranks.py", "save", str(tmp_path), timeout=120)
    assert code == 0 and "OK rank 1" in out, out
    assert sorted(os.listdir(tmp_path)) == ["graph.af", "model.af", "opt.af", "ref.npz"]

    p = subprocess.run([sys.executable, os.path.join(HERE, "graph_ckpt_ranks.py"), "load",
                        str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0 and "OK rank 0" in p.stdout, p.stdout + p.stderr

    code, _, out = run_ranks(4, "graph_ckpt_ranks.py", "load", str(tmp_path), timeout=120)
    assert code == 0, out
    for r in range(4):
        assert f"OK rank {r}" in out, out
