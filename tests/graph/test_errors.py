"""nn.Graph error paths: each mistake raises a clear error at the call that made it, naming
the argument, module or op, and leaves the graph (and eager mode) usable."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.framework import graph_build_util
from actorflow.nn.graph.args_tree import GraphArgumentError

pytestmark = pytest.mark.timeout(20)


class _Two(nn.Graph):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def build(self, x, y=None):
        out = self.fc(x)
        return out if y is None else out + y


class _Opaque:
    pass


@dataclasses.dataclass
class _Out(dict):
    sample: object = None


@pytest.mark.parametrize("call, message", [
    (lambda g: g(), "missing a required argument: 'x'"),
    (lambda g: g(flow.ones(1, 3), flow.ones(1, 2), flow.ones(1)), "too many positional"),
    (lambda g: g(flow.ones(1, 3), z=flow.ones(1)), "unexpected keyword argument 'z'"),
    (lambda g: g(np.ones((1, 3), np.float32)), r"argument x has type ndarray .*actorflow.tensor"),
    (lambda g: g(flow.ones(1, 3), y=[flow.ones(1), _Opaque()]),
     r"argument y\[1\] has type _Opaque"),
    (lambda g: g(flow.ones(1, 3), y={"a": _Out()}), r"y\['a'\] has type _Out .*plain dict"),
])
def test_wrong_inputs_name_the_argument(call, message):
    g = _Two()
    with pytest.raises(GraphArgumentError, match=message):
        call(g)
    assert isinstance(GraphArgumentError("x"), TypeError)
    # the graph still works afterwards
    assert tuple(g(flow.ones(2, 3)).shape) == (2, 2)


def test_an_op_error_in_build_names_the_module_and_leaves_eager_mode_on():
    g = _Two()
    with pytest.raises(RuntimeError, match=r"linear: .*\(2, 4\).*\[in module fc\]"):
        g(flow.ones(2, 4))
    assert not graph_build_util.lazy_mode.is_enabled()
    assert float((flow.ones(2) * 2).sum().item()) == 4.0  # eager works
    assert tuple(g(flow.ones(2, 3)).shape) == (2, 2) and g.compile_count == 2
    assert len(g._cache) == 1  # the failed trace left nothing behind


def test_returning_an_unsupported_value_names_the_output():
    @nn.Graph.trace
    def f(x):
        return [x, _Opaque()]

    with pytest.raises(GraphArgumentError, match=r"build\(\) returned .*output\[1\] has type"):
        f(flow.ones(1))


def test_tensor_attributes_are_refused():
    g = _Two()
    with pytest.raises(AttributeError, match="a Tensor can't be set as an attribute.*'w'"):
        g.w = flow.ones(2)
    with pytest.raises(AttributeError, match="'p'"):
        g.p = nn.Parameter(flow.ones(2))
    with pytest.raises(AttributeError, match="'q'"):
        g.q = g.fc.weight  # a tensor proxy
    g.note = "plain values are fine"
    assert g.note == "plain values are fine"


def test_unknown_module_attribute_names_the_module_path():
    g = _Two()
    with pytest.raises(AttributeError, match="'Linear' module 'fc' in nn.Graph has no attribute "
                                             "'nope'"):
        g.fc.nope  # noqa: B018


def test_calling_a_graph_inside_another_graphs_build():
    inner = _Two()

    @nn.Graph.trace
    def outer(x):
        return inner(x)

    with pytest.raises(TypeError, match="lazy tensor.*inside another graph's build"):
        outer(flow.ones(1, 3))


def test_optimizer_misuse():
    model = nn.Linear(3, 1)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class G(nn.Graph):
        def __init__(self, with_opt=True):
            super().__init__()
            self.model = model
            if with_opt:
                self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    with pytest.raises(RuntimeError, match="backward.*no optimizer.*add_optimizer"):
        G(with_opt=False)(flow.ones(1, 3))
    g = G()
    with pytest.raises(TypeError, match="expected an actorflow Optimizer"):
        g.add_optimizer(object())
    other = flow.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="different optimizer"):
        g.add_optimizer(opt, lr_sch=flow.optim.lr_scheduler.StepLR(other, 1))
    g(flow.ones(1, 3))
    with pytest.raises(RuntimeError, match="before the first call"):
        g.add_optimizer(other)


def test_inspection_and_config_errors():
    g = _Two()
    with pytest.raises(RuntimeError, match="has not been called yet"):
        g.forward_job  # noqa: B018
    with pytest.raises(ValueError, match="v_level"):
        g.debug("loud")
    with pytest.raises(ValueError, match="set_cache_size"):
        g.config.set_cache_size(0)
    with pytest.raises(ValueError, match="set_outputs_buffer_size"):
        g.config.set_outputs_buffer_size(0)
    with pytest.raises(NotImplementedError, match="must define build"):
        nn.Graph()(flow.ones(1))


def test_load_state_dict_checks_keys():
    g = _Two()
    with pytest.raises(KeyError, match="missing entries \\['fc'\\].*unexpected entries "
                                       "\\['other'\\]"):
        g.load_state_dict({"other": {}})


def test_depend_and_lazy_mode_guard_errors():
    with pytest.raises(TypeError, match="depend must be a Tensor or a non-empty list"):
        F.depend(flow.ones(1), [])
    with pytest.raises(TypeError, match="depend: input must be a Tensor"):
        F.depend(3, flow.ones(1))
    with pytest.raises(RuntimeError, match="lazy mode is only on while an nn.Graph traces"):
        with graph_build_util.lazy_mode.guard(True):
            pass


def test_module_names_and_missing_super_init():
    g = _Two()
    with pytest.raises(AttributeError, match="can't be named 'config'"):
        g.config = nn.Linear(1, 1)
    with pytest.raises(AttributeError, match="can't be named 'build'"):
        g.build = nn.Linear(1, 1)

    class NoInit(nn.Graph):
        def __init__(self):
            self.m = nn.Linear(1, 1)

        def build(self, x):
            return self.m(x)

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first"):
        NoInit()


@pytest.mark.parametrize("fn, error, message", [
    (lambda x: x.add_(flow.ones(2, 3)), "OpError",
     r"add_: output of shape \(2, 3\) can't be written in place into a tensor of shape \(3,\)"),
    (lambda x: x.add_(flow.ones(3, dtype=flow.float64)).long().add_(0.5), "OpError",
     "add_: result type actorflow.float32 can't be cast to the in-place output's dtype "
     "actorflow.int64"),
    (lambda x: flow.nn.Parameter(flow.ones(3)).mul_(x), "RuntimeError",
     "mul_: a leaf tensor that requires grad is being used in an in-place operation"),
])
def test_in_place_errors_while_tracing_match_eager(fn, error, message):
    """The tracer checks in-place calls with the dispatcher's own check: same messages, with
    the input shapes."""
    from tests.helpers import FnGraph
    x = flow.ones(3)
    with pytest.raises(Exception, match=message) as eager:
        fn(x.clone())
    with pytest.raises(Exception, match=message) as traced:
        FnGraph(fn)(x.clone())
    assert type(eager.value).__name__ == type(traced.value).__name__ == error
    assert "input shapes" in str(traced.value)
