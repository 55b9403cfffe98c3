"""flow.one_embedding: lookups, gradients and row updates against a dense PyTorch embedding
with the same initial rows (eager and nn.Graph), initializers, tables, padding, errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.job.job import Job
from tests.helpers import torch

oe = flow.one_embedding
V, D = 10, 4  # ids 0..V-1


def _store(tmp_path, size_factor=3, kind="device"):
    if kind == "ssd":
        return oe.make_cached_ssd_store_options(1, str(tmp_path), capacity=V,
                                                size_factor=size_factor)
    if kind == "host":
        return oe.make_cached_host_mem_store_options(1, str(tmp_path), capacity=V,
                                                     size_factor=size_factor)
    return oe.make_device_mem_store_options(str(tmp_path), capacity=V, size_factor=size_factor)


def _embedding(tmp_path, name, size_factor=3, kind="device", **kw):
    tables = [oe.make_table(oe.make_uniform_initializer(-0.5, 0.5)),
              oe.make_table(oe.make_normal_initializer(0.0, 0.3))]
    return oe.MultiTableEmbedding(name, D, flow.float, flow.int64, tables,
                                  _store(tmp_path / name, size_factor, kind), seed=7, **kw)


def _rows(emb) -> np.ndarray:
    """Every row 0..V-1 (created through table 0 / 1 for even / odd ids, as the batches do)."""
    ids = np.arange(V).reshape(V // 2, 2)
    with flow.no_grad():
        out = emb(flow.tensor(ids, dtype=flow.int64)).numpy()
    return out.reshape(V, D)


def _batches(steps, seed=0):
    """Batches of shape (B, 2) (column j: table j) holding every id at least once, some
    twice (so the dense and the sparse optimizers touch the same rows)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        even, odd = rng.permutation(np.arange(0, V, 2)), rng.permutation(np.arange(1, V, 2))
        extra = np.stack([rng.choice(np.arange(0, V, 2), 3), rng.choice(np.arange(1, V, 2), 3)], 1)
        out.append(np.concatenate([np.stack([even, odd], 1), extra]))
    return out


W = np.random.default_rng(1).standard_normal((2, D)).astype(np.float32)


def _loss_flow(y):
    return ((y * flow.tensor(W)).sum(-1) ** 2).mean() + (y ** 3).sum() * 0.1


def _loss_torch(y):
    return ((y * torch.tensor(W)).sum(-1) ** 2).mean() + (y ** 3).sum() * 0.1


OPTIMIZERS = {
    "sgd": (lambda p: flow.optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1), 1),
    "momentum": (lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
                 lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01), 2),
    "adam": (lambda p: flow.optim.Adam(p, lr=0.05, betas=(0.8, 0.9), weight_decay=0.01),
             lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.9), weight_decay=0.01), 3),
    "adagrad": (lambda p: flow.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                             initial_accumulator_value=0.1),
                lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01,
                                              initial_accumulator_value=0.1), 2),
}


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_matches_a_dense_torch_embedding(tmp_path, name):
    make_flow, make_torch, size_factor = OPTIMIZERS[name]
    emb = _embedding(tmp_path, f"dense_{name}", size_factor)
    ref = torch.nn.Embedding(V, D)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(_rows(emb)))
    opt = oe.Optimizer(make_flow(emb.parameters()), [emb])
    topt = make_torch(ref.parameters())
    for ids in _batches(4):
        y = emb(flow.tensor(ids, dtype=flow.int64))
        y.retain_grad()
        _loss_flow(y).backward()
        ty = ref(torch.tensor(ids))
        ty.retain_grad()
        _loss_torch(ty).backward()
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-6)
        pending = _pending_rows(emb)  # the rows' gradients, summed per id
        np.testing.assert_allclose(pending, ref.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
        opt.step()
        topt.step()
        opt.zero_grad()
        topt.zero_grad()
    np.testing.assert_allclose(_rows(emb), ref.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def _pending_rows(emb) -> np.ndarray:
    from actorflow.vm import scheduler

    scheduler.synchronize()
    out = np.zeros((V, D), np.float64)
    for keys, grads in emb.store.pending:
        np.add.at(out, keys, grads.reshape(-1, D))
    return out


@pytest.mark.timeout(120)
def test_only_looked_up_rows_change_and_adam_state_starts_at_first_touch(tmp_path):
    emb = _embedding(tmp_path, "sparse_rows", 3)
    before = _rows(emb)
    opt = flow.optim.Adam(emb.parameters(), lr=0.1)  # a plain optimizer trains the rows too
    for ids in ([[0, 1]], [[2, 1]]):
        emb(flow.tensor(ids, dtype=flow.int64)).sum().backward()
        opt.step()
        opt.zero_grad()
    after = _rows(emb)
    np.testing.assert_array_equal(after[3:], before[3:])
    # gradient 1 everywhere: Adam moves each touched row by lr per update (bias corrected)
    np.testing.assert_allclose(after[1], before[1] - 0.2, rtol=1e-4)
    np.testing.assert_allclose(after[0], before[0] - 0.1, rtol=1e-4)
    # row 2's first update is the embedding's second step: m, v start at 0 with t = 2
    m, v = 0.1, 0.001
    step = 0.1 * (m / (1 - 0.9 ** 2)) / (np.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    np.testing.assert_allclose(after[2], before[2] - step, rtol=1e-4)


class _Train(flow.nn.Graph):
    def __init__(self, emb, opt):
        super().__init__()
        self.emb = emb
        self.add_optimizer(opt)

    def build(self, ids):
        loss = _loss_flow(self.emb(ids))
        loss.backward()
        return loss


@pytest.mark.timeout(180)
@pytest.mark.parametrize("wrapped", [False, True])
def test_graph_training_matches_eager(tmp_path, wrapped):
    eager = _embedding(tmp_path, "eager_m", 2)
    lazy = _embedding(tmp_path, "graph_m", 2)  # same seed and tables: the same initial rows
    np.testing.assert_array_equal(_rows(eager), _rows(lazy))
    opt = flow.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    # OneFlow's graphs take the plain optimizer; the eager wrapper works as well
    lazy_opt = flow.optim.SGD(lazy.parameters(), lr=0.1, momentum=0.9)
    graph = _Train(lazy, oe.Optimizer(lazy_opt, [lazy]) if wrapped else lazy_opt)
    for ids in _batches(3, seed=5):
        x = flow.tensor(ids, dtype=flow.int64)
        loss = _loss_flow(eager(x))
        loss.backward()
        opt.step()
        opt.zero_grad()
        np.testing.assert_allclose(graph(x).numpy(), loss.numpy(), rtol=1e-5)
    np.testing.assert_allclose(_rows(lazy), _rows(eager), rtol=1e-5, atol=1e-7)
    ops = {o.op_type for o in graph.full_job.ops}
    assert {"one_embedding_lookup", "one_embedding_grad", "one_embedding_update"} <= ops
    text = graph.full_job.to_json()  # the Job is data: it round trips
    assert Job.from_json(text).to_json() == text


@pytest.mark.timeout(60)
def test_columns_tables_and_table_ids_choose_the_initializers(tmp_path):
    c = oe.make_constant_initializer
    tables = [oe.make_table([oe.make_column_options(c(1.0)), oe.make_column_options(c(2.0))]),
              oe.make_table([oe.make_column_options(c(3.0)), oe.make_column_options(c(4.0))])]
    emb = oe.MultiTableMultiColumnEmbedding("columns", [2, 3], flow.float, flow.int64, tables,
                                            _store(tmp_path, 1))
    with flow.no_grad():
        by_column = emb(flow.tensor([[10, 11]], dtype=flow.int64)).numpy()
        by_ids = emb(flow.tensor([12, 13], dtype=flow.int64),
                     flow.tensor([1, 0], dtype=flow.int32)).numpy()
        again = emb(flow.tensor([[11, 10]], dtype=flow.int64)).numpy()  # rows exist: kept
    np.testing.assert_array_equal(by_column[0], [[1, 1, 2, 2, 2], [3, 3, 4, 4, 4]])
    np.testing.assert_array_equal(by_ids, [[3, 3, 4, 4, 4], [1, 1, 2, 2, 2]])
    np.testing.assert_array_equal(again[0], by_column[0][::-1])
    with pytest.raises(Exception, match="table_ids"):
        emb(flow.tensor([1, 2, 3], dtype=flow.int64))


@pytest.mark.timeout(60)
def test_random_initializers_are_in_range_and_depend_on_seed_table_and_id_only(tmp_path):
    emb = oe.MultiTableEmbedding(
        "ranges", 64, flow.float, flow.int64,
        [oe.make_table(oe.make_uniform_initializer(2.0, 3.0)),
         oe.make_table(oe.make_normal_initializer(5.0, 0.5))], _store(tmp_path / "a", 1), seed=3)
    ids = np.arange(200).reshape(100, 2)
    with flow.no_grad():
        out = emb(flow.tensor(ids, dtype=flow.int64)).numpy()
    assert out[:, 0].min() >= 2.0 and out[:, 0].max() < 3.0
    assert abs(out[:, 0].mean() - 2.5) < 0.02 and abs(out[:, 0].std() - 12 ** -0.5) < 0.01
    assert len(np.unique(out)) > 0.99 * out.size  # (float32 rounding makes a few alike)
    assert abs(np.corrcoef(out[:-1, 0].ravel(), out[1:, 0].ravel())[0, 1]) < 0.05
    assert abs(out[:, 1].mean() - 5.0) < 0.05 and abs(out[:, 1].std() - 0.5) < 0.05
    other = oe.MultiTableEmbedding(
        "ranges_b", 64, flow.float, flow.int64,
        [oe.make_table(oe.make_uniform_initializer(2.0, 3.0)),
         oe.make_table(oe.make_normal_initializer(5.0, 0.5))], _store(tmp_path / "b", 1), seed=3)
    with flow.no_grad():
        backwards = other(flow.tensor(ids[::-1].copy(), dtype=flow.int64)).numpy()
    np.testing.assert_array_equal(backwards[::-1], out)
    tn = oe.MultiTableEmbedding("trunc", 256, flow.float, flow.int64,
                                [oe.make_table(oe.make_trunc_normal_initializer(0, 1, -0.5, 0.5))],
                                _store(tmp_path / "c", 1))
    with flow.no_grad():
        t = tn(flow.tensor([1, 2], dtype=flow.int64)).numpy()
    assert t.min() >= -0.5 and t.max() <= 0.5 and t.std() > 0.2


@pytest.mark.timeout(60)
def test_padding_idx_is_zeros_and_never_learned(tmp_path):
    emb = _embedding(tmp_path, "padding", 1, padding_idx=0)
    opt = flow.optim.SGD(emb.parameters(), lr=1.0)
    ids = flow.tensor([[0, 1], [0, 3]], dtype=flow.int64)
    y = emb(ids)
    np.testing.assert_array_equal(y.numpy()[:, 0], 0)
    y.sum().backward()
    opt.step()
    np.testing.assert_array_equal(emb(ids).detach().numpy()[:, 0], 0)
    assert 0 not in emb.store.index


@pytest.mark.timeout(60)
def test_errors_name_the_problem(tmp_path):
    emb = _embedding(tmp_path, "errors", 1)
    with pytest.raises(TypeError, match="key_type"):
        emb(flow.tensor([[1, 2]], dtype=flow.int32))
    opt = flow.optim.LAMB(emb.parameters(), lr=0.1)
    emb(flow.tensor([[1, 2]], dtype=flow.int64)).sum().backward()
    with pytest.raises(ValueError, match="lamb_update"):
        opt.step()
    small = _embedding(tmp_path, "too_small", 1)  # Adam needs size_factor 3
    adam = flow.optim.Adam(small.parameters(), lr=0.1)
    small(flow.tensor([[1, 2]], dtype=flow.int64)).sum().backward()
    with pytest.raises(Exception, match="storage_dim must be at least 12"):
        adam.step()
        flow.tensor(small.shadow).numpy()
    with pytest.raises(ValueError, match="param groups"):
        oe.Optimizer(flow.optim.SGD([flow.nn.Parameter(flow.zeros(1))], lr=0.1), [emb])
    with pytest.raises(ValueError, match="initializer"):
        oe.MultiTableEmbedding("bad", D, flow.float, flow.int64, [oe.make_table({"type": "x"})],
                               _store(tmp_path, 1))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [
    lambda p: flow.optim.RMSprop(p, lr=0.01, centered=True, momentum=0.5),
    lambda p: flow.optim.Adam(p, lr=0.05, amsgrad=True),
    lambda p: oe.Ftrl(p, lr=0.1, lambda1=0.01, lambda2=0.1, beta=0.5, weight_decay=0.01)],
    ids=["rmsprop", "amsgrad", "ftrl"])
def test_any_elementwise_update_matches_a_dense_flow_embedding(tmp_path, make):
    emb = _embedding(tmp_path, "dense_flow", 4)
    ref = flow.nn.Embedding(V, D)
    with flow.no_grad():
        ref.weight.copy_(flow.tensor(_rows(emb)))
    opt, ropt = make(emb.parameters()), make(ref.parameters())
    for ids in _batches(3, seed=2):
        x = flow.tensor(ids, dtype=flow.int64)
        for model, o in ((emb, opt), (ref, ropt)):
            _loss_flow(model(x)).backward()
            o.step()
            o.zero_grad()
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-6)


def _ftrl_reference(p, grads, lr, wd, power, acc0, l1, l2, beta):
    """OneFlow's FTRL kernel, element by element in float64."""
    p = p.astype(np.float64).copy()
    acc, z = np.full_like(p, acc0), np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        new_acc = acc + g * g
        sigma = (new_acc ** power - acc ** power) / lr
        z = z + g - sigma * p
        p = np.where(np.abs(z) < l1, 0.0,
                     (np.sign(z) * l1 - z) / ((beta + new_acc ** power) / lr + l2))
        acc = new_acc
    return p


@pytest.mark.timeout(60)
def test_ftrl_matches_oneflows_formula():
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal((4, 5))
    grads = [rng.standard_normal((4, 5)) for _ in range(4)]
    p = flow.nn.Parameter(flow.tensor(p0))
    opt = oe.Ftrl([p], lr=0.2, weight_decay=0.05, lr_power=-0.5, initial_accumulator_value=0.3,
                  lambda1=0.3, lambda2=0.2, beta=0.1)
    for g in grads:
        p.grad = flow.tensor(g)
        opt.step()
    ref = _ftrl_reference(p0, grads, 0.2, 0.05, -0.5, 0.3, 0.3, 0.2, 0.1)
    np.testing.assert_allclose(p.numpy(), ref, rtol=1e-12, atol=1e-12)
    assert (p.numpy() == 0).any()  # lambda1 zeroes small |z|
    with pytest.raises(ValueError, match="learning rate"):
        oe.Ftrl([p], lr=0.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_drops_row_gradients_not_yet_applied(tmp_path, set_to_none):
    emb = _embedding(tmp_path, f"zero_{set_to_none}", 1)
    before = _rows(emb)
    opt = flow.optim.SGD(emb.parameters(), lr=1.0)
    emb(flow.tensor([[0, 1]], dtype=flow.int64)).sum().backward()
    opt.zero_grad(set_to_none=set_to_none)  # those gradients are dropped
    emb(flow.tensor([[2, 3]], dtype=flow.int64)).sum().backward()
    emb(flow.tensor([[2, 5]], dtype=flow.int64)).sum().backward()  # accumulates
    opt.step()
    after = _rows(emb)
    np.testing.assert_array_equal(after[[0, 1, 4]], before[[0, 1, 4]])
    np.testing.assert_allclose(after[2], before[2] - 2.0, rtol=1e-6)
    np.testing.assert_allclose(after[[3, 5]], before[[3, 5]] - 1.0, rtol=1e-6)
