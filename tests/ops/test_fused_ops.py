"""Tests of the fused ops the fusion passes emit (``actorflow/ops/fused.py``): programs of
registered ops run in order and in place, and the multi-tensor optimizer update."""
from __future__ import annotations

import time

import numpy as np
import pytest

import actorflow as flow
import actorflow.functional as F
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.job.job import BlobDesc
from actorflow.job.verify import _meta_tensor
from actorflow.ops import registry
from actorflow.ops.fused import buffer_plan, program_attrs
from actorflow.ops.registry import OpError


def _ops_with(trait: str) -> set:
    """Names of the registered ops (optimizer updates aside) whose record has ``trait`` set."""
    return {n for n, op in registry.all_ops().items()
            if getattr(op, trait) and not op.optimizer_update}


ELEMENTWISE = _ops_with("elementwise")
ALIAS_SAFE = _ops_with("alias_safe")
ACTIVATIONS = _ops_with("activation")


# ---- the fused ops ------------------------------------------------------------------------------

def _elementwise_job():
    """A traced Job calling every elementwise op (registry trait) once."""
    rng = np.random.default_rng(0)
    x0 = flow.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = LazyInterpreter("ew")
    with b:
        x = b.add_input(0, "x", x0)
        y = b.add_input(1, "y", x0)
        m = F.gt(x, 0.1)
        unary = ["abs", "sign", "square", "floor", "ceil", "trunc", "round", "neg", "exp", "exp2",
                 "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
                 "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
                 "atanh", "erf", "erfc", "sigmoid", "relu", "gelu", "silu", "mish", "leaky_relu",
                 "elu", "softplus", "hardtanh", "hardsigmoid", "hardswish", "softsign",
                 "logsigmoid", "hardshrink", "softshrink", "nan_to_num", "isnan", "isinf",
                 "isfinite", "logical_not", "erfinv", "lgamma", "digamma"]
        for name in unary:
            getattr(F, name)(x)
        F.polygamma(1, x)
        F.frac(x)
        F.lerp(x, y, y)
        F.lerp(x, y, 0.3)
        F.zeta(x, y)
        F.zeta(x, 2.0)
        F.conj(F.cast(x, flow.complex64))  # conj of a real tensor is the tensor itself
        F.threshold(x, 0.2, -1.0)
        F.clamp(x, -0.5, 0.5)
        F.clamp(x, min=y)
        F.cast(x, flow.float64)
        for name in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2",
                     "floor_divide", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge",
                     "logical_and", "logical_or", "logical_xor", "logaddexp", "logaddexp2"]:
            getattr(F, name)(x, y)
            getattr(F, name)(x, 1.5)
        F.leaky_relu_grad(x, y, 0.1)
        F.hardtanh_grad(x, y, -0.5, 0.5)
        F.threshold_grad(x, y, 0.2)
        F.shrink_grad(x, y, 0.5)
        F.hardsigmoid_grad(x, y)
        F.gelu_grad(x, y, approximate="none")
        F.dropout_grad(x, F.cast(m, flow.float32), 2.0)
        F.where(m, x, y)
        F.masked_fill(x, m, 3.0)
    return b.job


def _random_input(desc, rng):
    if desc.dtype is flow.bool:
        return rng.random(desc.shape) > 0.5
    if desc.dtype.is_complex:
        return (rng.standard_normal(desc.shape) + 1j * rng.standard_normal(desc.shape)).astype(
            desc.dtype.np)
    return (rng.standard_normal(desc.shape) * 2).astype(desc.dtype.np)


@pytest.mark.timeout(60)
def test_alias_safe_ops_give_the_same_values_in_place():
    """A program step may write over its input; every op with the alias_safe trait must allow
    it (and the ops that are not, must not: the trait is exact)."""
    job = _elementwise_job()
    descs = {o.out(i): d for o in job.ops for i, d in enumerate(o.outputs)}
    seen = set()
    bad = set()
    rng = np.random.default_rng(1)
    for o in job.ops:
        if o.op_type not in ELEMENTWISE:
            continue
        seen.add(o.op_type)
        op = registry.get(o.op_type)
        ins = [_random_input(descs[b], rng) for b in o.inputs]
        ref = np.empty(o.outputs[0].shape, o.outputs[0].dtype.np)
        with np.errstate(all="ignore"):
            op.kernel_cpu(ins, [ref], o.attrs)
            for i, d in enumerate(o.inputs):
                if descs[d] != o.outputs[0]:
                    continue
                alias = [a.copy() for a in ins]
                op.kernel_cpu(alias, [alias[i]], o.attrs)
                if not np.array_equal(alias[i], ref, equal_nan=True):
                    bad.add(o.op_type)
    assert seen == ELEMENTWISE and ACTIVATIONS <= ALIAS_SAFE
    assert bad == ELEMENTWISE - ALIAS_SAFE


def _program_conf(ops, op_attrs, args, descs, exports):
    return program_attrs(ops, op_attrs, args, [d[0] for d in descs], [d[1] for d in descs],
                         exports, [f"p{i}" for i in range(len(ops))])


def test_program_op_runs_parts_in_order_and_in_place():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    f32 = flow.float32
    attrs = _program_conf(["matmul", "add", "relu"], [{}, {}, {}], [[0, 1], [3, 2], [4]],
                          [((5, 4), f32)] * 3, [2])
    assert buffer_plan(3, attrs) == [("o", 0)] * 3  # matmul into the output, the rest in place
    op = registry.get("fused_matmul_bias_act")
    metas = op.infer_fn([_meta(a) for a in (x, w, bias)], attrs)
    assert [tuple(m[0]) for m in metas] == [(5, 4)]
    out = np.empty((5, 4), np.float32)
    op.kernel_cpu([x, w, bias], [out], attrs)
    ref = np.empty((5, 4), np.float32)
    registry.get("matmul").kernel_cpu([x, w], [ref], {})
    registry.get("add").kernel_cpu([ref, bias], [ref2 := np.empty_like(ref)], {})
    registry.get("relu").kernel_cpu([ref2], [ref3 := np.empty_like(ref)], {})
    assert np.array_equal(out, ref3)
    # exporting the pre-activation: it gets its own output and relu no longer runs in place
    attrs2 = _program_conf(["matmul", "add", "relu"], [{}, {}, {}], [[0, 1], [3, 2], [4]],
                           [((5, 4), f32)] * 3, [2, 1])
    assert buffer_plan(3, attrs2) == [("o", 1), ("o", 1), ("o", 0)]
    outs = [np.empty((5, 4), np.float32), np.empty((5, 4), np.float32)]
    op.kernel_cpu([x, w, bias], outs, attrs2)
    assert np.array_equal(outs[0], ref3) and np.array_equal(outs[1], ref2)


def _meta(a):
    return _meta_tensor(BlobDesc(a.shape, flow.framework.dtype.from_numpy_dtype(a.dtype)))


def test_program_op_errors_name_the_step():
    f32 = flow.float32
    op = registry.get("fused_elementwise")
    bad_ref = _program_conf(["exp"], [{}], [[3]], [((2,), f32)], [0])
    with pytest.raises(OpError, match="reads value 3"):
        op.infer_fn([_meta(np.zeros(2, np.float32))], bad_ref)
    wrong = _program_conf(["exp"], [{}], [[0]], [((3,), f32)], [0])
    with pytest.raises(OpError, match="step 0 .exp, was op p0. infers"):
        op.infer_fn([_meta(np.zeros(2, np.float32))], wrong)
    no_last = _program_conf(["exp", "neg"], [{}, {}], [[0], [1]], [((2,), f32)] * 2, [0])
    with pytest.raises(OpError, match="exports must start with the last step"):
        op.infer_fn([_meta(np.zeros(2, np.float32))], no_last)
    mismatch = _program_conf(["add"], [{}], [[0, 1]], [((2,), f32)], [0])
    with pytest.raises(OpError, match="step 0 .add, was op p0. failed"):
        op.kernel_cpu([np.zeros(2, np.float32), np.zeros(3, np.float32)],
                      [np.zeros(2, np.float32)], mismatch)


def test_multi_tensor_update_matches_per_parameter_updates_and_names_mutated_inputs():
    rng = np.random.default_rng(0)
    shapes = [(3, 2), (4,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    lr = np.array(0.1)
    attrs = {"beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.01, "decoupled": True}

    def state():
        return [[p.copy(), np.zeros((), np.int64), np.zeros_like(p), np.zeros_like(p)]
                for p in params]

    ref, got = state(), state()
    for (p, step, m, v), g in zip(ref, grads):
        for _ in range(2):
            registry.get("adam_update").kernel_cpu([p, g, lr, step, m, v], [], attrs)
    op = registry.get("multi_tensor_update")
    fused_attrs = {"update": "adam_update", "update_attrs": attrs, "arity": 5}
    ins = [lr]
    for (p, step, m, v), g in zip(got, grads):
        ins += [p, g, step, m, v]
    assert op.infer_fn([_meta(np.asarray(a)) for a in ins], fused_attrs) == []
    for _ in range(2):
        op.kernel_cpu(ins, [], fused_attrs)
    for r, s in zip(ref, got):
        for a, b in zip(r, s):
            assert np.array_equal(a, b)
    # param, step, exp_avg, exp_avg_sq of each block; never lr or a gradient
    assert op.mutated_inputs(len(ins), fused_attrs) == (1, 3, 4, 5, 6, 8, 9, 10)
    with pytest.raises(OpError, match="do not form lr plus blocks of 5"):
        op.infer_fn([_meta(np.asarray(a)) for a in ins[:-1]], fused_attrs)


@pytest.mark.parametrize("update,attrs,n_state,has_step", [
    ("momentum_update", {"momentum": 0.9}, 1, False),
    ("momentum_update", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, 1, False),
    ("sgd_update", {}, 0, False),
    ("adam_update", {"beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.01,
                     "decoupled": True}, 2, True),
])
def test_multi_tensor_update_slices_large_parameters_with_the_same_bits(update, attrs, n_state,
                                                                         has_step):
    """Parameters above the slice size run as slices on the intra-op threads: the same bits as
    one call per parameter, the step count advanced once per call, a non-contiguous or repeated
    parameter still updated whole (and twice)."""
    from actorflow.ops import fused
    rng = np.random.default_rng(1)
    big = fused._SLICE * 2 + 123
    shapes = [(big,), (3, fused._SLICE // 2 + 5), (7,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params.append(rng.standard_normal((fused._SLICE + 9, 2)).astype(np.float32).T)  # strided
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    lr = np.array(0.05)

    def state():
        out = []
        for p in params:
            block = [p.copy()]
            if has_step:
                block.append(np.zeros((), np.int64))
            block += [np.zeros_like(p) for _ in range(n_state)]
            out.append(block)
        return out

    ref, got = state(), state()
    base = registry.get(update)
    for _ in range(3):
        for (p, *st), g in zip(ref, grads):
            base.kernel_cpu([p, g, lr, *st], [], attrs)
        base.kernel_cpu([ref[0][0], grads[0], lr, *ref[0][1:]], [], attrs)  # listed twice
    ins = [lr]
    for (p, *st), g in zip(got, grads):
        ins += [p, g, *st]
    ins += [got[0][0], grads[0], *got[0][1:]]
    fused_attrs = {"update": update, "update_attrs": attrs, "arity": 2 + n_state + has_step}
    for _ in range(3):
        registry.get("multi_tensor_update").kernel_cpu(ins, [], fused_attrs)
    for r, s in zip(ref, got):
        for a, b in zip(r, s):
            assert np.array_equal(a, b)
    if has_step:
        assert int(got[1][1]) == 3 and int(got[0][1]) == 6


def test_multi_tensor_update_slices_run_on_the_intra_op_threads(monkeypatch):
    """The slices of a large parameter run on more than one thread when helpers exist."""
    import threading

    from actorflow.ops import fused, parallel
    if parallel.threads() < 2:
        pytest.skip("one intra-op thread")
    seen = set()
    base = registry.get("sgd_update")
    real = base.kernel_cpu

    def spy(ins, outs, attrs):
        seen.add(threading.get_ident())
        time.sleep(0.002)  # long enough for a helper to claim a slice
        real(ins, outs, attrs)

    monkeypatch.setattr(base, "kernel_cpu", spy)
    p = np.zeros(fused._SLICE * 8, np.float32)
    g = np.ones_like(p)
    registry.get("multi_tensor_update").kernel_cpu(
        [np.array(1.0), p, g], [], {"update": "sgd_update", "update_attrs": {}, "arity": 2})
    assert np.array_equal(p, -g) and len(seen) >= 2
