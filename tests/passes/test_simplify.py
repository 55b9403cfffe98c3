"""identity_elimination: reshape/expand/cast/transpose ops that change nothing are removed."""
import numpy as np

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.job.executor import ReferenceExecutor
from actorflow.passes.simplify import eliminate_identities


def types(job):
    return [o.op_type for o in job.ops]


def test_before_after():
    x = flow.randn(3, 4)
    b = LazyInterpreter("j")
    with b:
        h = b.add_input(0, "x", x)
        a = h.reshape(3, 4)                # identity
        c = a.to(flow.float32)             # identity cast
        d = c.permute(0, 1)                # identity transpose
        e = d.reshape(4, 3)                # a real reshape: kept
        f = e.expand(4, 3)                 # identity expand
        b.add_output(0, "y", f * 2.0)
    before = b.job
    after = eliminate_identities(before.copy())
    after.verify()
    assert types(after).count("reshape") == 1
    assert "cast" not in types(after) and "transpose" not in types(after)
    assert "expand" not in types(after)
    xa = x.numpy()
    assert np.array_equal(ReferenceExecutor(after).run([xa], {})[0],
                          ReferenceExecutor(before).run([xa], {})[0])


def test_kept_when_memory_is_written_in_place():
    from actorflow.job.job import BlobDesc, Job, OpConf

    d = BlobDesc((3,), flow.float32)
    job = Job("j", [
        OpConf("x", "input", [], {"index": 0, "path": "x"}, [d]),
        OpConf("w", "variable", [], {"name": "w", "kind": "parameter"}, [d]),
        OpConf("r", "reshape", ["w/0"], {"shape": (3,)}, [d]),   # reads state written below
        OpConf("m", "mul", ["r/0", "x/0"], {}, [d]),
        OpConf("a", "assign", ["w/0", "x/0"], {}, [], ctrl_inputs=["r"]),
        OpConf("y", "output", ["m/0"], {"index": 0}, [d]),
    ])
    job.verify()
    after = eliminate_identities(job.copy())
    assert "reshape" in types(after)  # it must stay a copy taken before the assign
    w = flow.ones(3)
    out = ReferenceExecutor(after).run([np.full(3, 2.0, np.float32)], {"w": w})[0]
    assert np.array_equal(out, np.full(3, 2.0)) and np.array_equal(w.numpy(), np.full(3, 2.0))


def test_graph_training_same_with_and_without():
    def run(disable):
        flow.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = flow.optim.SGD(model.parameters(), lr=0.1)

        class G(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)
                if disable:
                    self.config.disable_pass("identity_elimination")

            def build(self, x, y):
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                return loss

        g = G()
        x, y = flow.randn(5, 6), flow.tensor([0, 1, 2, 0, 1])
        losses = [g(x, y).item() for _ in range(3)]
        n_reshape = types(g.full_job).count("reshape")
        return losses, [p.numpy().copy() for p in model.parameters()], n_reshape

    on, off = run(False), run(True)
    assert on[0] == off[0]
    assert all(np.array_equal(a, b) for a, b in zip(on[1], off[1]))
    assert on[2] == 0 < off[2]
