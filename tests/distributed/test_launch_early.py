"""The launcher fails a job in which a rank ended early, even with exit status 0 (issue 25,
item 8): every rank waits for the others at exit, and tells the launcher how it left."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from actorflow.distributed import launch
from tests.distributed.test_distributed import HERE, ROOT, needs_mpi


def _launch(n: int, mode: str):
    p = subprocess.run([sys.executable, "-m", "actorflow.distributed.launch",
                        "--nproc_per_node", str(n), os.path.join(HERE, "early_exit.py"), mode],
                       capture_output=True, text=True, timeout=150,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    return p.returncode, p.stdout + p.stderr


@needs_mpi
@pytest.mark.timeout(160)
@pytest.mark.parametrize("n, mode", [(2, "together"), (3, "tail")])
def test_ranks_that_end_together_succeed(n, mode):
    code, out = _launch(n, mode)
    assert code == 0, out
    for r in range(n):
        assert f"rank {r} done" in out, out
    assert "ended early" not in out and "launch failed" not in out, out


@needs_mpi
@pytest.mark.timeout(160)
@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_that_exits_0_early_fails_the_launch(n):
    code, out = _launch(n, "exit0")
    assert code == 1, out
    assert "rank 1 leaves early" in out and "rank 0 done" in out, out
    assert "[actorflow rank 1] reached the end of the program, but not every rank did" in out
    assert "rank(s) [1] ended early:" in out and "the launch failed" in out, out


@needs_mpi
@pytest.mark.timeout(160)
def test_a_rank_that_leaves_through_os_exit_fails_the_launch():
    code, out = _launch(2, "os_exit")
    # mpiexec may also end the other rank (a process that left without MPI_Finalize): then
    # the status is mpiexec's (9, the signal it sent), not the launcher's 1
    assert code != 0, out
    assert re.search(r"rank\(s\) \[(0, )?1\] ended without actorflow's orderly exit", out), out


def test_status_files_are_read_as_written(tmp_path):
    assert launch.early_ranks(str(tmp_path), 2).startswith("rank(s) [0, 1] ended without")
    (tmp_path / "rank0").write_text("timeout 1006.5 1.5")  # waited for rank 1, then left
    (tmp_path / "rank1").write_text("timeout 1000.0 1.5")  # left first, 6.5 s early
    (tmp_path / "rank2").write_text("complete 1006.4")
    assert launch.early_ranks(str(tmp_path), 3) == (
        "rank(s) [1] ended early: they reached the end of the program while other ranks were "
        "still running")
    (tmp_path / "rank1").write_text("complete 1006.0")
    assert launch.early_ranks(str(tmp_path), 3) == (
        "rank(s) [0] left without every rank at the exit")
    (tmp_path / "rank0").write_text("complete 1006.5")
    assert launch.early_ranks(str(tmp_path), 3) == ""
    (tmp_path / "rank2").write_text("garbage")
    assert "rank(s) [2] ended without" in launch.early_ranks(str(tmp_path), 3)
