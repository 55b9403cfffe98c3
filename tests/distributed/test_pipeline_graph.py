"""Pipeline parallelism in the distributed nn.Graph (issue #15): stages on different ranks,
activations and gradients moved between them by send/recv tasks; the rank scripts
``graph_pipe*.py`` run through ``mpiexec`` on 2 ranks, on both graph executors."""
from __future__ import annotations

import re

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_two_stage_pipeline_trains_like_one_process(executor):
    code, _, out = run_ranks(2, "graph_pipe.py", executor, timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_data_parallel_stages_on_four_ranks(executor):
    code, _, out = run_ranks(4, "graph_pipe.py", executor, timeout=290)
    assert code == 0, out
    for r in range(4):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_data_parallel_stages_with_micro_batches_on_four_ranks(executor):
    # each stage's collectives run once per micro-batch, in the same order on its two ranks
    code, _, out = run_ranks(4, "graph_pipe.py", executor, "2", timeout=290)
    assert code == 0, out
    for r in range(4):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_micro_batches_flow_through_the_stages_concurrently(executor):
    code, _, out = run_ranks(2, "graph_pipe.py", executor, "4", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_a_stage_that_never_answers_ends_every_rank(executor):
    """Rank 1 never calls again (no failure notice): rank 0's receive raises at the comm
    timeout naming the transfer; uncaught, the job ends non-zero."""
    code, seconds, out = run_ranks(2, "graph_pipe_fail.py", "silent", executor, timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "3"})
    assert code != 0, out
    assert "UNREACHABLE" not in out
    assert "[actorflow rank 0] uncaught exception" in out, out
    assert "RemoteRankError" in out and "did not complete" in out and "pipe_recv" in out, out
    assert seconds < 50, (seconds, out)


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_a_kernel_error_in_one_stage_raises_in_the_other(executor):
    """Stage 1's kernel fails on rank 1 (graph_pipe_fail.py kernel) while rank 0 waits for the
    gradient: rank 0 raises too within seconds (comm timeout 60 s), naming rank 1, the op and
    its module; both ranks catch it and exit 0."""
    code, seconds, out = run_ranks(2, "graph_pipe_fail.py", "kernel", executor, timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code == 0, out
    assert re.search(r"rank 1 raised after [\d.]+ s: KernelError: embedding \(op "
                     r"emb-embedding-\d+\): kernel failed \[in module emb\]", out), out
    m = re.search(r"rank 0 raised after ([\d.]+) s: RemoteRankError: (receive )?pipe_recv"
                  r".* abandoned: rank 1 failed: embedding \(op emb-embedding-\d+\): kernel "
                  r"failed \[in module emb\].*index 9 is out of range", out)
    assert m and float(m.group(1)) < 5, out
    assert "rank 0 exits" in out and "rank 1 exits" in out and "UNREACHABLE" not in out, out
    assert seconds < 50, (seconds, out)
