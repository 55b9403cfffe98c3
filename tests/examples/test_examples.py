"""The examples train for real: GPT beats the unigram entropy, the MLP reaches 95% on digits."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from examples import gpt


def _args(tmp_path, **kw):
    args = gpt.build_parser().parse_args([])
    args.out = str(tmp_path / "gpt")
    args.no_progress = True
    args.sample_len = 40
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def test_gpt_loss_falls_below_unigram_entropy(tmp_path):
    res = gpt.train(_args(tmp_path, steps=250, batch_size=16, block_size=32, n_embd=48,
                          n_layer=2, n_head=4))
    tail = float(np.mean(res["losses"][-25:]))
    assert tail < res["entropy"] - 0.5, (tail, res["entropy"])
    assert len(res["sample"]) == 41


def test_gpt_default_mode_is_graph():
    assert gpt.build_parser().parse_args([]).mode == "graph"


def test_gpt_checkpoint_resumes(tmp_path):
    small = dict(batch_size=4, block_size=16, n_embd=16, n_layer=1, n_head=2, schedule_steps=5)
    first = gpt.train(_args(tmp_path, steps=3, **small))
    resumed = gpt.train(_args(tmp_path, steps=2, resume=True, **small))
    straight = gpt.train(_args(tmp_path / "b", steps=5, **small))
    assert len(first["losses"]) == 3
    np.testing.assert_allclose(resumed["losses"], straight["losses"][3:], rtol=1e-5)


def test_gpt_graph_mode_gives_the_eager_losses(tmp_path):
    # same seed, same numbers: dropout on, clipping and the cosine schedule in the graph; a
    # graph-mode checkpoint resumes (in graph mode) where the straight eager run goes on
    small = dict(batch_size=4, block_size=16, n_embd=16, n_layer=1, n_head=2, dropout=0.1,
                 schedule_steps=5)
    eager = gpt.train(_args(tmp_path / "e", steps=5, mode="eager", **small))
    graph = gpt.train(_args(tmp_path / "g", steps=3, mode="graph", trace_steps=2, **small))
    # graph mode writes the Plan as DOT and a Chrome trace of steps 2-3 on the actor runtime
    with open(graph["artifacts"]["plan"]) as f:
        assert f.read().startswith("digraph")
    with open(graph["artifacts"]["trace"]) as f:
        events = json.load(f)["traceEvents"]
    resumed = gpt.train(_args(tmp_path / "g", steps=2, mode="graph", resume=True, **small))
    assert graph["losses"] == eager["losses"][:3]
    assert resumed["losses"] == eager["losses"][3:]
    assert resumed["sample"] == eager["sample"]
    assert eager["artifacts"] == {}
    acts = [e for e in events if e["ph"] == "X" and e["pid"] == 0]  # process 1: the VM
    assert {e["args"]["iteration"] for e in acts} == {1, 2}
    assert any(e["ph"] == "s" for e in events)


def test_mlp_digits_accuracy():
    pytest.importorskip("sklearn")
    from examples import mlp_digits
    assert mlp_digits.train(epochs=30) >= 0.95


def test_gpt_rejects_bad_config():
    with pytest.raises(ValueError, match="divisible"):
        gpt.GPT(10, n_embd=30, n_head=4)
    assert isinstance(gpt.build_parser().parse_args([]), argparse.Namespace)
