"""Run under ``mpiexec -n 2``: the seed program of issue #15 (OneFlow's runtime walkthrough,
section 10.1) - an nn.Graph over a linear layer with broadcast parameters and an input split
along dim 1 - equals the one-process computation, on both graph executors. Prints ``OK rank R``."""
import json
import os

import numpy as np

import actorflow as flow
import actorflow.nn as nn

r, n = flow.env.get_rank(), flow.env.get_world_size()
P0 = flow.placement("cpu", ranks=list(range(n)))
flow.manual_seed(3)


class ModuleMyLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(flow.randn(in_features, out_features, placement=P0,
                                              sbp=flow.sbp.broadcast))
        self.bias = nn.Parameter(flow.randn(1, out_features, placement=P0,
                                            sbp=flow.sbp.broadcast))

    def forward(self, input):
        return flow.matmul(input, self.weight) + self.bias


linear_model = ModuleMyLinear(4, 3)


class GraphMyLinear(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = linear_model

    def build(self, input):
        return self.model(input)


graph_mylinear = GraphMyLinear()
input = flow.randn(5, 4, placement=P0, sbp=flow.sbp.split(1))
out = graph_mylinear(input)
print(out, flush=True)
w, b, x = linear_model.weight.numpy(), linear_model.bias.numpy(), input.numpy()
want = x @ w + b
assert out.is_global and out.placement == P0, out
assert tuple(out.shape) == (5, 3)
np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
# the same program eagerly (eager-global) picks the same layout
eager = linear_model(input)
assert eager.sbp == out.sbp, (eager.sbp, out.sbp)
np.testing.assert_allclose(out.numpy(), eager.numpy(), rtol=1e-6, atol=1e-6)
# the traced Job carries placement and sbp per op
job = graph_mylinear.forward_job
tags = [o.tags.get("global") for o in job.ops if o.op_type == "matmul"]
assert tags and tags[0]["in"] == ("S(1)", "S(0)") and tags[0]["out"] == ("P",), tags
text = job.to_json()
text = text if isinstance(text, str) else json.dumps(text)
assert '"placement"' in text and "S(1)" in text
assert type(job).from_json(text).to_json() == job.to_json()
where = "cpu:" + ",".join(str(k) for k in range(n))
assert f"{where} S(1),S(0) -> P" in job.to_dot(), job.to_dot()
# both executors run the Job of this rank
for by_vm in ("1", "0"):
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = by_vm
    g = GraphMyLinear()
    np.testing.assert_allclose(g(input).numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g(input * 2).numpy(), 2 * x @ w + b, rtol=1e-5, atol=1e-5)



class GraphMax(nn.Graph):
    """amax over the split dim gives partial_max (as eagerly); to_global(B) all-reduces it."""

    def build(self, x):
        m = x.amax(dim=0)
        return m, m.to_global(sbp=flow.sbp.broadcast)


xm = flow.randn(7, 3, placement=P0, sbp=flow.sbp.split(0))
assert xm.amax(dim=0).sbp == (flow.sbp.partial_max,)
for by_vm in ("1", "0"):
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = by_vm
    gm = GraphMax()
    pm, bm = gm(xm)
    assert pm.sbp == (flow.sbp.partial_max,) and bm.sbp == (flow.sbp.broadcast,), (pm, bm)
    np.testing.assert_array_equal(pm.numpy(), xm.numpy().max(0))
    np.testing.assert_array_equal(bm.to_local().numpy(), xm.numpy().max(0))
    assert [o.op_type for o in gm.forward_job.ops if "boxing" in o.tags] == ["boxing_pm_to_b"]
flow.synchronize()
values = out.numpy()   # (a collective: every rank reads)
if r == 0:   # the test compares these with a run on one process
    print("VALUES", values.astype(np.float64).tolist(), flush=True)
flow.comm.barrier()  # (rank 0's VALUES line is out before another rank prints: no interleaving)
print(f"OK rank {r}", flush=True)
