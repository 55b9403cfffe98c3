"""cat_of_reshapes: a cat along the last axis of reshapes that merge trailing dims becomes a cat
along a new axis and one reshape; the values stay the same bits, the copies go."""
import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.job.executor import ReferenceExecutor
from actorflow.passes.simplify import stack_cat_of_reshapes


def types(job):
    return [o.op_type for o in job.ops]


def _heads_job(n_parts=3, extra_reader=False, dim=-1, other_shape=False):
    """x (2, 3, 4, 5) per part, transposed to (2, 4, 3, 5) and merged to (2, 4, 15), then cat."""
    xs = [flow.randn(2, 3, 4, 5) for _ in range(n_parts)]
    b = LazyInterpreter("j")
    with b:
        hs = [b.add_input(i, f"x{i}", x) for i, x in enumerate(xs)]
        merged = [h.transpose(1, 2).reshape(2, 4, 15) for h in hs]
        if other_shape:
            merged[-1] = hs[-1].reshape(2, 4, 15)  # a reshape of another layout
        y = flow.cat(merged, dim=dim)
        b.add_output(0, "y", y * 2.0)
        if extra_reader:
            b.add_output(1, "m", merged[0] + 1.0)
    return b.job, [x.numpy() for x in xs]


def test_the_cat_of_merged_heads_stacks_them_and_reshapes_once():
    before, xs = _heads_job()
    after = stack_cat_of_reshapes(before.copy())
    after.verify()
    assert types(before).count("reshape") == 3 and types(after).count("reshape") == 4
    cats = [o for o in after.ops if o.op_type == "cat"]
    assert len(cats) == 1 and cats[0].attrs["dim"] == 2
    assert tuple(cats[0].outputs[0].shape) == (2, 4, 3, 3, 5)
    # the cat's readers read the final reshape under the cat's old name
    old_cat = next(o for o in before.ops if o.op_type == "cat").name
    assert next(o for o in after.ops if o.name == old_cat).op_type == "reshape"
    want = ReferenceExecutor(before).run(xs, {})[0]
    np.testing.assert_array_equal(ReferenceExecutor(after).run(xs, {})[0], want)
    np.testing.assert_array_equal(
        want, 2.0 * np.concatenate([x.transpose(0, 2, 1, 3).reshape(2, 4, 15) for x in xs], -1))


@pytest.mark.parametrize("case", [{"extra_reader": True}, {"dim": 1}, {"other_shape": True}])
def test_other_cats_are_left_alone(case):
    # a reshape another op reads, a cat along another axis, parts of different layouts
    before, _ = _heads_job(**case)
    assert types(stack_cat_of_reshapes(before.copy())) == types(before)


def test_attention_heads_train_to_the_same_bits_with_fewer_copy_tasks():
    def run(disable):
        flow.manual_seed(0)
        qkv = nn.Linear(16, 48)
        opt = flow.optim.SGD(qkv.parameters(), lr=0.1)

        class G(nn.Graph):
            def __init__(self):
                super().__init__()
                self.qkv = qkv
                self.add_optimizer(opt)
                if disable:
                    self.config.disable_pass("cat_of_reshapes")

            def build(self, x):
                q, k, v = self.qkv(x).split(16, dim=-1)
                heads = [t.reshape(2, 5, 4, 4).transpose(1, 2) for t in (q, k, v)]
                y = flow.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
                loss = (y.transpose(1, 2).reshape(2, 5, 16) ** 2).mean()
                loss.backward()
                return loss

        g = G()
        x = flow.tensor(np.random.default_rng(3).standard_normal((2, 5, 16)).astype(np.float32))
        losses = [g(x).item() for _ in range(3)]
        copies = sum(t.op_type == "reshape" for t in g.plan.tasks)
        return losses, [p.numpy().copy() for p in qkv.parameters()], copies

    on, off = run(False), run(True)
    assert on[0] == off[0]
    assert all(np.array_equal(a, b) for a, b in zip(on[1], off[1]))
    assert on[2] < off[2], (on[2], off[2])
