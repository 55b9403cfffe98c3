"""Pipeline parallelism in the distributed nn.Graph (issue #15): stages on different ranks,
activations and gradients moved between them by send/recv tasks; the rank scripts
``graph_pipe*.py`` run through ``mpiexec`` on 2 ranks, on both graph executors."""
from __future__ import annotations

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
    code, seconds, out = run_ranks(2, "graph_pipe_fail.py", executor, timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "3"})
    assert code != 0, out
    assert "UNREACHABLE" not in out
    assert "did not complete" in out and "pipe_" in out, out
    assert seconds < 50, (seconds, out)
