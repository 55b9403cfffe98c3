"""``examples/gpt.py --parallel data|tensor``: the GPT trained as a global nn.Graph on 2 ranks
(``gpt_graph.py`` beside this file) gives the one-process losses."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.distributed.gpt_graph import ARGS, PIPE_ARGS
from tests.distributed.test_distributed import needs_mpi, run_ranks


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The losses and sample of the same run in one process (a local graph)."""
    from examples import gpt

    out = tmp_path_factory.mktemp("one")
    return gpt.train(gpt.build_parser().parse_args(ARGS + ["--out", str(out)]))


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["data", "tensor"])
def test_gpt_global_graph_gives_the_one_process_losses(mode, tmp_path, one_process):
    code, _, out = run_ranks(2, "gpt_graph.py", mode, str(tmp_path), timeout=280)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
    with open(tmp_path / "losses.json") as f:
        got = json.load(f)
    np.testing.assert_allclose(got["losses"], one_process["losses"], rtol=1e-5)
    assert got["sample"] == one_process["sample"]
    boxing = "\n".join(got["boxing"])
    if mode == "data":   # parameters broadcast: each gradient all-reduced before its update
        assert "model.blocks.0.attn.qkv.weight grad: P -> B all-reduce" in boxing, boxing
        assert "to_global" not in boxing, boxing
    else:   # Megatron: the row-split projections' outputs all-reduced in the forward
        assert "to_global in model.blocks.0.attn: P -> B all-reduce" in boxing, boxing
        assert "to_global in model.blocks.0: P -> B all-reduce" in boxing, boxing
        assert "qkv" not in boxing and "attn.q.weight grad" not in boxing, boxing


@needs_mpi
@pytest.mark.timeout(300)
def test_gpt_pipeline_with_micro_batches_gives_the_one_process_losses(tmp_path):
    # block 0 (and the embeddings) on rank 0, block 1, the norm and the tied head on rank 1;
    # 4 micro-batches through the stages; the same run in one process (a local graph, 4 steps)
    from examples import gpt

    one = gpt.train(gpt.build_parser().parse_args(ARGS + PIPE_ARGS + ["--out",
                                                                      str(tmp_path / "one")]))
    code, _, out = run_ranks(2, "gpt_graph.py", "pipeline", str(tmp_path), timeout=280)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
    with open(tmp_path / "losses.json") as f:
        got = json.load(f)
    np.testing.assert_allclose(got["losses"], one["losses"], rtol=1e-5)
    assert got["sample"] == one["sample"]
    report = "\n".join(got["boxing"])   # rank 0: the activation and the embedding sent on,
    assert "send to rank 1" in report and "receive from rank 1" in report, report
    assert "all-reduce" not in report, report   # no collective: a stage is one rank


def test_parallel_refuses_eager_mode_resume_and_indivisible_heads(tmp_path):
    from examples import gpt

    def args(*extra):
        return gpt.build_parser().parse_args(ARGS + ["--out", str(tmp_path), *extra])

    with pytest.raises(ValueError, match="--parallel trains a global nn.Graph"):
        gpt.train(args("--parallel", "data", "--mode", "eager"))
    with pytest.raises(ValueError, match="--grad-acc accumulates micro-batches"):
        gpt.train(args("--grad-acc", "2", "--mode", "eager"))
    with pytest.raises(ValueError, match="not divisible into --grad-acc 3"):
        gpt.train(args("--grad-acc", "3"))
    with pytest.raises(ValueError, match="--parallel pipeline: needs at least 2"):
        gpt.pipeline_stages(1)
    with pytest.raises(ValueError, match="--resume is not supported with --parallel"):
        gpt.train(args("--parallel", "tensor", "--resume"))
    model = gpt.GPT(10, block_size=8, n_layer=1, n_head=3, n_embd=6)
    with pytest.raises(ValueError, match=r"n_head \(3\) and the MLP width \(24\) must be "
                                         r"divisible by the 2 processes"):
        gpt.parallelize(model, "tensor", world=2)
