"""The nn.Graph user API: proxies, tracing, the compile cache, training options, state,
inspection and debug output (error paths are in test_graph_errors.py)."""
from __future__ import annotations

import copy
import re
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.framework import graph_build_util, scope_util
from tests.helpers import SquareLossTrain, assert_graph_matches
from actorflow.job import Job
from actorflow.nn.graph import GraphModule, GraphTensor, Proxy, ProxyTensor


def _x(*shape, seed=0):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class _Wrap(nn.Graph):
    """A graph calling one module."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def build(self, *args, **kwargs):
        return self.m(*args, **kwargs)


def test_the_articles_example_runs_as_written():
    class ModuleMyLinear(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = nn.Parameter(flow.randn(in_features, out_features))
            self.bias = nn.Parameter(flow.randn(out_features))

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
    input = flow.randn(1, 4)
    out = graph_mylinear(input)
    np.testing.assert_allclose(out.numpy(), linear_model(input).numpy(), rtol=1e-6)
    names = [o.name for o in graph_mylinear.forward_job.ops]
    assert names[:4] == ["_input.input", "model.weight", "model-matmul-0", "model.bias"]
    assert re.match(r"model-add-\d+$", names[4])


# -- proxies --------------------------------------------------------------------------------------

def test_proxies_share_state_with_the_eager_module():
    lin = nn.Linear(3, 2)
    g = _Wrap(lin)
    x = _x(4, 3)
    assert isinstance(g.m, Proxy) and isinstance(g.m, nn.Linear)
    assert g.m.to(nn.Module) is lin
    np.testing.assert_array_equal(g(x).numpy(), lin(x).numpy())
    with flow.no_grad():
        lin.weight.mul_(2.0)  # an eager change is seen by the compiled graph
    np.testing.assert_array_equal(g(x).numpy(), lin(x).numpy())
    w = g.m.weight  # outside build: a tensor proxy
    assert isinstance(w, ProxyTensor) and w.to(flow.Tensor) is lin.weight
    assert w.to(GraphTensor).path == "m.weight" and w.to(GraphTensor).type == "PARAMETER"
    assert tuple(w.shape) == (2, 3)
    g.m.extra = 5  # attribute writes go to the module
    assert lin.extra == 5


def test_train_and_eval_graphs_share_one_module():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    train, evaluate = SquareLossTrain(model, opt), _Wrap(model)
    x = _x(5, 4)
    model.train()
    train(x)
    model.eval()
    before = evaluate(x).numpy().copy()
    np.testing.assert_array_equal(before, model(x).numpy())  # dropout off in eval
    model.train()
    train(x)  # updates the shared parameters in place
    model.eval()
    after = evaluate(x).numpy()
    assert not np.array_equal(before, after)
    np.testing.assert_array_equal(after, model(x).numpy())


def test_graph_module_options():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            sc = scope_util.current_scope()
            proto = graph_build_util.scope_to_proto(sc)
            self.seen = (graph_build_util.lazy_mode.is_enabled(), sc.path,
                         proto.attr_name2attr_value["checkpointing"].at_bool, sc.stage_id)
            return self.fc(x).relu()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.a = Block()
            self.b = Block()
            self.a.to(GraphModule).activation_checkpointing = True
            self.b.to(GraphModule).set_stage(1)

        def build(self, x):
            return self.b(self.a(x))

    g = G()
    gm = g.a.to(GraphModule)
    assert gm.name == "a" and gm.path == "a" and gm.activation_checkpointing
    assert g.a.fc.to(GraphModule).path == "a.fc"
    g(_x(2, 4))
    assert g.a.to(nn.Module).seen == (True, "a", True, None)
    assert g.b.to(nn.Module).seen == (True, "b", False, 1)
    ops = {o.name: o for o in g.forward_job.ops}
    assert any(n.startswith("a.fc-") and o.tags.get("checkpointing") == "a"
               for n, o in ops.items())
    assert all("checkpointing" not in o.tags for n, o in ops.items() if n.startswith("b."))
    with pytest.raises(ValueError, match="stage_id"):
        gm.set_stage(-1)
    assert not graph_build_util.lazy_mode.is_enabled()


def test_lazy_mode_guard_runs_eagerly_inside_build():
    seen = {}

    @nn.Graph.trace
    def f(x):
        with graph_build_util.lazy_mode.guard(False):
            t = flow.ones(2)
            seen["eager"] = (t.is_lazy, float(t.sum().item()))
        return x * 2

    np.testing.assert_array_equal(f(flow.ones(2)).numpy(), [2.0, 2.0])
    assert seen["eager"] == (False, 2.0)


def test_containers_custom_methods_and_forward_overrides():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
            self.plist = nn.ParameterList([nn.Parameter(flow.ones(4)) for _ in range(2)])
            self.pdict = nn.ParameterDict({"s": nn.Parameter(flow.ones(2) * 3)})
            self.odd = nn.Linear(4, 4)
            self.odd.forward = lambda x: x * 0.5  # an instance-level override

        def _mix(self, x):  # a custom method
            for p in self.plist:
                x = x * p
            return x

        def forward(self, x):
            x = self._mix(self.seq(x))
            for layer in self.layers[1:]:  # slicing keeps the children (and their paths)
                x = layer(x)
            x = self.seq[:2](x)
            x = self.odd(x)
            return {k: h(x) * self.pdict["s"] for k, h in self.heads.items()}

    net = Net()
    x = _x(3, 4)
    eager = net(x)
    g = _Wrap(net)
    out = g(x)
    assert set(out) == {"a", "b"}
    for k in out:
        np.testing.assert_allclose(out[k].numpy(), eager[k].numpy(), rtol=1e-6)
    names = [o.name for o in g.forward_job.ops]
    assert any(n.startswith("m.layers.2-") for n in names)
    assert not any(n.startswith("m.layers.0-") for n in names)
    assert any(n.startswith("m.seq.0-") for n in names)
    assert not any(n.startswith("m.odd-linear") for n in names)  # override ran instead


def test_trace_turns_a_function_into_a_graph():
    lin = nn.Linear(3, 3)

    @nn.Graph.trace
    def step(x, scale=2.0):
        return lin(x) * scale

    assert isinstance(step, nn.Graph)
    x = _x(2, 3)
    np.testing.assert_allclose(step(x).numpy(), (lin(x) * 2.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(step(x, scale=3.0).numpy(), (lin(x) * 3.0).numpy(), rtol=1e-6)
    assert "lin.weight" in {o.name for o in step.forward_job.variables}
    with pytest.raises(TypeError, match="function"):
        nn.Graph.trace(lin)


# -- tracing --------------------------------------------------------------------------------------

def test_nested_inputs_with_constants_come_back_in_the_same_structure():
    Pair = namedtuple("Pair", "first second")

    class G(nn.Graph):
        def build(self, x, pair, cfg, *rest, flag=None, **extra):
            assert cfg["mode"] == "sum" and cfg["k"] == 3 and flag is None
            y = pair.first + pair.second[0] * cfg["k"]
            return {"y": y, "echo": [x, (None, 1.5, "s")], "rest": rest,
                    "extra": OrderedDict(extra), "pair": Pair(y, [pair.second[1]])}

    g = G()
    x, a, b, c, d = (_x(2, 2, seed=i) for i in range(5))
    out = g(x, Pair(a, [b, c]), {"mode": "sum", "k": 3}, d, 7, kw=x)
    np.testing.assert_allclose(out["y"].numpy(), (a + b * 3).numpy(), rtol=1e-6)
    assert out["echo"][1] == (None, 1.5, "s") and isinstance(out["echo"], list)
    assert out["echo"][0] is not x
    np.testing.assert_array_equal(out["echo"][0].numpy(), x.numpy())
    assert isinstance(out["rest"], tuple) and out["rest"][1] == 7
    assert isinstance(out["extra"], OrderedDict) and list(out["extra"]) == ["kw"]
    assert isinstance(out["pair"], Pair) and isinstance(out["pair"].second, list)
    paths = [o.attrs["path"] for o in g.forward_job.inputs]
    assert paths == ["x", "pair.first", "pair.second[0]", "pair.second[1]", "rest[0]", "kw"]


def test_single_and_empty_outputs():
    class G(nn.Graph):
        def build(self, x):
            return (x + 1,)

    out = G()(flow.ones(2))
    assert isinstance(out, tuple) and len(out) == 1

    @nn.Graph.trace
    def nothing(x):
        return None

    assert nothing(flow.ones(2)) is None


def test_ops_are_named_after_module_paths_and_carry_metas():
    model = nn.Sequential(OrderedDict(fc=nn.Linear(4, 3), act=nn.Tanh()))
    g = _Wrap(model)
    g(_x(5, 4))
    ops = g.forward_job.ops
    fc = next(o for o in ops if o.name.startswith("m.fc-"))
    assert fc.scope == "m.fc" and tuple(fc.outputs[0].shape) == (5, 3)
    assert fc.outputs[0].dtype == flow.float32
    assert {o.name for o in g.forward_job.variables} == {"m.fc.weight", "m.fc.bias"}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("read", ["numpy", "item", "bool", "tolist"])
def test_reading_a_lazy_value_in_build_says_why(read):
    @nn.Graph.trace
    def f(x):
        y = x.sum()
        return getattr(y, read)() if read != "bool" else bool(y)

    with pytest.raises(RuntimeError, match="lazy tensor.*no value until the graph runs"):
        f(flow.ones(3))


def test_same_signature_reuses_the_compiled_graph():
    calls = []

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def build(self, x):
            calls.append(tuple(x.shape))
            return self.fc(x)

    g = G()
    for _ in range(3):
        g(_x(4, 3))
    assert calls == [(4, 3)] and g.compile_count == 1 and g.call_count == 3
    g(_x(5, 3))
    g(_x(4, 3))  # still cached
    assert calls == [(4, 3), (5, 3)]
    assert g.compile_log == ["x: shape (4, 3) -> (5, 3)"]


def test_cache_is_lru_and_bounded():
    calls = []

    @nn.Graph.trace
    def f(x):
        calls.append(x.shape[0])
        return x * 2

    f.config.set_cache_size(2)
    for n in (1, 2, 1, 3, 1, 2):
        f(flow.ones(n))
    # 1, 2 compile; 1 hits; 3 evicts 2 (least recently used); 1 hits; 2 compiles again
    assert calls == [1, 2, 3, 2] and len(f._cache) == 2


def test_debug_1_explains_each_recompile(capsys):
    model = nn.Linear(3, 3)
    g = _Wrap(model)
    g.debug(1)
    g(_x(2, 3))
    g(_x(2, 3))
    g(_x(4, 3))
    g(flow.ones(4, 3, dtype=flow.float64).float())
    model.eval()
    g(_x(4, 3))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3, out
    assert re.search(r"compile #1 \(first call\); inputs args\[0\]: \(2, 3\) float32", out[0])
    assert "recompile #2 (args[0]: shape (2, 3) -> (4, 3))" in out[1]
    assert "recompile #3 (module training mode changed: m train -> eval)" in out[2]
    assert all(re.search(r"traced \d+ ops in .* ms, \d+ passes in .* -> \d+ ops", ln)
               for ln in out)


def test_debug_2_and_3_show_pass_diffs_and_the_job(capsys):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    g = G()
    g.debug(2)
    g(_x(2, 4))
    text = capsys.readouterr().out
    assert re.search(r"pass optimizer: \+\d+ ops, -0 ops", text)
    assert re.search(r"\+ .*momentum_update", text)
    assert "Job " not in text
    g2 = _Wrap(nn.Linear(2, 2))
    g2.debug(3)
    g2(_x(1, 2))
    text = capsys.readouterr().out
    assert "Job _Wrap" in text and "= linear(" in text


def test_outputs_buffer_ring():
    g = _Wrap(nn.Identity())
    g.config.set_outputs_buffer_size(3)
    x = _x(2)
    outs = [g(x) for _ in range(4)]
    ring = g._outputs_tensor_tuple_buffer
    assert len(ring) == 3 and all(len(slot) == 1 for slot in ring)
    ids = {id(t) for slot in ring for t in slot}
    assert len(ids) == 3 and not ids & {id(o) for o in outs}
    assert len({id(o) for o in outs}) == 4
    outs[0].numpy()[...] = 7  # outputs own their values (x is untouched)
    np.testing.assert_array_equal(outs[1].numpy(), x.numpy())


def test_0d_and_noncontiguous_inputs():
    g = _Wrap(nn.Identity())
    np.testing.assert_array_equal(g(flow.tensor(3.0)).numpy(), np.array(3.0, np.float32))
    t = _x(4, 3).transpose(0, 1)
    np.testing.assert_array_equal(g(t).numpy(), t.numpy())


# -- depend ---------------------------------------------------------------------------------------

def test_depend_orders_ops_and_is_identity():
    x = _x(3)
    assert F.depend(x, x * 2) is x  # eagerly: the input itself

    class M(nn.Module):
        def forward(self, x):
            side = x * 2
            y = F.depend(x, [side, x + 1])
            return (y * 3).sum()

    m = M()
    g = _Wrap(m)
    np.testing.assert_allclose(g(x).numpy(), m(x).numpy(), rtol=1e-6)
    job = g.forward_job
    dep = next(o for o in job.ops if o.op_type == "depend")
    producers = {o.out(0): o.op_type for o in job.ops}
    assert [producers[b] for b in dep.inputs] == ["input", "scalar_mul", "scalar_add"]
    xt = flow.tensor(np.arange(3.0), requires_grad=True)

    @nn.Graph.trace
    def grad_graph(t):
        with flow.enable_grad():
            y = F.depend(t * 1.0, t * 5.0)
            return flow.autograd.grad(y.sum() * 2, t)[0]

    np.testing.assert_array_equal(grad_graph(xt).numpy(), [2.0, 2.0, 2.0])


# -- args tree -------------------------------------------------------------------------------------

# -- training -------------------------------------------------------------------------------------

class _TrainGraph(nn.Graph):
    """Trains ``model`` on a squared error; the optimizer (and scheduler) are made in __init__
    from the proxy's parameters unless given."""

    def __init__(self, model, make_opt=None, make_sch=None):
        super().__init__()
        self.model = model
        opt = (make_opt or (lambda ps: flow.optim.Adam(ps, lr=0.01)))(self.model.parameters())
        sch = make_sch(opt) if make_sch else None
        self.add_optimizer(opt, lr_sch=sch)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
             flow.tensor(rng.standard_normal((6, 2)).astype(np.float32))) for _ in range(n)]


def _mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def test_param_group_options_and_clipping_match_eager():
    flow.manual_seed(0)
    m_eager = _mlp()
    m_graph = copy.deepcopy(m_eager)

    def groups(m, graph):
        # lr_scale is OneFlow's graph-only key: the eager group gets the scaled lr itself
        second = {"lr_scale": 0.5} if graph else {"lr": 0.005}
        return [{"params": list(m[0].parameters()), "lr": 0.05, "weight_decay": 0.1,
                 "betas": (0.8, 0.9), "clip_grad_max_norm": 0.5, "clip_grad_norm_type": 2.0},
                {"params": list(m[2].parameters()), **second,
                 "clip_grad_max_norm": 0.1, "clip_grad_norm_type": float("inf")}]

    opt = flow.optim.AdamW(groups(m_eager, False), lr=0.01)
    sch = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    g = _TrainGraph(m_graph, lambda _: flow.optim.AdamW(groups(m_graph, True), lr=0.01),
                    lambda o: flow.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5))
    for x, y in _batches(5):
        loss = ((m_eager(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.clip_grad()
        opt.step()
        sch.step()
        assert_graph_matches(g(x, y).item(), loss.item(), "loss")
    for a, b in zip(m_eager.parameters(), m_graph.parameters()):
        assert_graph_matches(b.numpy(), a.numpy(), "parameter")
    graph_opt = g._optimizers[0].optimizer
    assert [pg["lr"] * pg.get("lr_scale", 1.0) for pg in graph_opt.param_groups] \
        == [pg["lr"] for pg in opt.param_groups]
    ops = [o.op_type for o in g.full_job.ops if o.tags.get("phase") == "optimizer"]
    assert ops, "the optimizer's update ops are in the Job"


def test_scheduler_steps_once_per_call_and_optimizer_made_in_init():
    flow.manual_seed(0)
    g = _TrainGraph(_mlp(), lambda ps: flow.optim.SGD(ps, lr=1.0, momentum=0.9),
                    lambda o: flow.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (e + 1)))
    entry = g._optimizers[0]
    for i, (x, y) in enumerate(_batches(3)):
        assert entry.optimizer.param_groups[0]["lr"] == pytest.approx(1.0 / (i + 1))
        g(x, y)
        assert entry.lr_scheduler.last_epoch == i + 1
    assert g.compile_count == 1
    assert {p for p in entry.optimizer.state} == set(g.model.to(nn.Module).parameters())


def _value(v):
    return v.numpy() if isinstance(v, flow.Tensor) else v


def test_graph_state_dict_round_trip(tmp_path):
    def make():
        flow.manual_seed(0)
        return _TrainGraph(_mlp(), None, lambda o: flow.optim.lr_scheduler.StepLR(o, 1, 0.9))

    batches = _batches(5)
    g1 = make()
    for x, y in batches[:3]:
        g1(x, y)
    flow.save(g1.state_dict(), str(tmp_path / "g.pt"))
    sd = flow.load(str(tmp_path / "g.pt"))
    assert list(sd) == ["model", "_optimizer0", "_lr_scheduler0", "System-Train-TrainStep"]
    flow.manual_seed(1)
    g2 = _TrainGraph(_mlp(), None, lambda o: flow.optim.lr_scheduler.StepLR(o, 1, 0.9))
    g2(*batches[0])  # compiled before loading: the load makes it trace again
    g2.load_state_dict(sd)
    for x, y in batches[3:]:
        assert g1(x, y).item() == g2(x, y).item()
    for a, b in zip(g1.model.to(nn.Module).parameters(), g2.model.to(nn.Module).parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    s1, s2 = g1.state_dict(), g2.state_dict()
    assert s1["_lr_scheduler0"] == s2["_lr_scheduler0"]
    for p1, p2 in zip(g1._optimizers[0].optimizer.state.values(),
                      g2._optimizers[0].optimizer.state.values()):
        for k in p1:
            np.testing.assert_array_equal(np.asarray(_value(p1[k])), np.asarray(_value(p2[k])))
    assert g2.compile_log[-1] == "load_state_dict replaced the optimizer state"


# -- inspection -----------------------------------------------------------------------------------

def test_print_graph_shows_the_module_tree_shapes_and_ops():
    g = _TrainGraph(_mlp())
    assert "(MODULE:model:Sequential())" in repr(g)  # before the first call: the tree only
    g(*_batches(1)[0])
    text = repr(g)
    assert text.startswith(f"(GRAPH:{g.name}:_TrainGraph): (")
    assert "(INPUT:x:tensor(..., size=(6, 4), dtype=actorflow.float32))" in text
    assert "(MODULE:model.0:Linear(in_features=4, out_features=8, bias=True)): (" in text
    assert "(PARAMETER:model.0.weight:tensor(..., size=(8, 4)" in text
    assert re.search(r"\(OPERATOR: model\.1-tanh-\d+\(model\.0-linear-\d+/0\) -> "
                     r"\(size=\(6, 8\)", text)
    assert "(OUTPUT:output:tensor(..., size=(), dtype=actorflow.float32))" in text
    assert re.search(r"\(JOB: traced \d+ ops; after passes \d+ ops; passes: optimizer \+", text)
    block = repr(g.model[0])
    assert block.startswith("(MODULE:model.0:Linear(") and "OPERATOR: model.0-linear" in block


def test_jobs_round_trip_through_json_and_render_to_dot():
    g = _TrainGraph(_mlp())
    g(*_batches(1)[0])
    for job in (g.forward_job, g.full_job):
        again = Job.from_json(job.to_json())
        assert again == job and again is not job
        again.verify()
        dot = job.to_dot()
        assert dot.startswith("digraph") and dot.count("->") > len(job.ops) // 2
    assert len(g.full_job.ops) > len(g.forward_job.ops)
