"""flow.one_embedding's stores and files: snapshots (rows and optimizer state round trip), the
file-backed store of make_cached_ssd_store_options, persistent table readers and writers,
state dicts, and the store options OneFlow's functions build."""
from __future__ import annotations

import os

import numpy as np
import pytest

import actorflow as flow

oe = flow.one_embedding
D = 3


def _emb(path, name, kind="device", size_factor=3, seed=0):
    if kind == "ssd":
        so = oe.make_cached_ssd_store_options(8, str(path), size_factor=size_factor)
    elif kind == "host":
        so = oe.make_cached_host_mem_store_options(8, str(path), 100, size_factor=size_factor)
    else:
        so = oe.make_device_mem_store_options(str(path), 100, size_factor=size_factor)
    return oe.MultiTableEmbedding(name, D, flow.float, flow.int64,
                                  [oe.make_table(oe.make_normal_initializer(0, 1))], so,
                                  seed=seed)


def _train(emb, opt, batches):
    for ids in batches:
        (emb(flow.tensor(ids, dtype=flow.int64)) ** 2).sum().backward()
        opt.step()
        opt.zero_grad()


def _look(emb, ids):
    with flow.no_grad():
        return emb(flow.tensor(ids, dtype=flow.int64)).numpy()


IDS = [[1, 2, 3], [3, 4, 5], [1, 5, 9]]


@pytest.mark.timeout(60)
def test_snapshot_round_trip_restores_rows_and_optimizer_state(tmp_path):
    emb = _emb(tmp_path, "snap")
    opt = flow.optim.Adam(emb.parameters(), lr=0.1)
    _train(emb, opt, IDS[:2])
    emb.save_snapshot("s1")
    flow.save(opt.state_dict(), str(tmp_path / "opt"))  # the optimizer's own state (its step)
    assert os.path.isdir(tmp_path / "0-1" / "snapshots" / "s1")
    saved = _look(emb, [1, 2, 3, 4, 5])
    _train(emb, opt, IDS[2:])  # rows and their Adam moments move on
    moved = _look(emb, [1, 2, 3, 4, 5, 9])
    _train(emb, opt, IDS[:1])
    expected = _look(emb, [1, 2, 3, 4, 5, 9])
    emb.load_snapshot("s1")
    np.testing.assert_array_equal(_look(emb, [1, 2, 3, 4, 5]), saved)
    assert 9 not in emb.store.index  # the snapshot holds exactly its rows
    # the moments came back too: training the same steps again gives the same rows (the
    # step counter is the optimizer's state, restored with it)
    opt2 = flow.optim.Adam(emb.parameters(), lr=0.1)
    opt2.load_state_dict(flow.load(str(tmp_path / "opt")))
    _train(emb, opt2, IDS[2:])
    np.testing.assert_allclose(_look(emb, [1, 2, 3, 4, 5, 9]), moved, rtol=1e-6)
    _train(emb, opt2, IDS[:1])
    np.testing.assert_allclose(_look(emb, [1, 2, 3, 4, 5, 9]), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="no snapshot"):
        emb.load_snapshot("missing")


@pytest.mark.timeout(60)
def test_ssd_store_keeps_lines_in_a_file_and_agrees_with_the_memory_stores(tmp_path):
    runs = {}
    for kind in ("device", "host", "ssd"):
        emb = _emb(tmp_path / kind, f"kind_{kind}", kind, seed=4)
        opt = flow.optim.SGD(emb.parameters(), lr=0.1, momentum=0.9)
        ids = [list(range(i, i + 40)) for i in range(0, 120, 30)]  # past the first capacity
        _train(emb, opt, ids)
        runs[kind] = _look(emb, list(range(150)))
        if kind == "ssd":
            lines = tmp_path / kind / "0-1" / "lines.bin"
            assert lines.exists() and lines.stat().st_size >= 150 * 3 * D * 4
            assert isinstance(emb.store.lines, np.memmap)
    np.testing.assert_array_equal(runs["host"], runs["device"])
    np.testing.assert_array_equal(runs["ssd"], runs["device"])


@pytest.mark.timeout(60)
def test_persistent_writer_and_reader_round_trip(tmp_path):
    paths = [str(tmp_path / "t0"), str(tmp_path / "t1")]
    rng = np.random.default_rng(0)
    keys = rng.choice(10 ** 6, 5000, replace=False).astype(np.int64)
    values = rng.standard_normal((5000, 6)).astype(np.float32)
    with oe.make_persistent_table_writer(paths, "snap", flow.int64, flow.float, 6) as w:
        w.write(keys[:3000], values[:3000])
        w.write(keys[3000:], values[3000:])
        with pytest.raises(TypeError, match="int64"):
            w.write(keys.astype(np.int32), values)
    got_k, got_v = [], []
    with oe.make_persistent_table_reader(paths, "snap", flow.int64, flow.float, 6) as r:
        for k, v in r:
            assert len(k) <= 4096 and v.shape == (len(k), 6)
            got_k.append(k)
            got_v.append(v)
    got_k, got_v = np.concatenate(got_k), np.concatenate(got_v)
    order, expect = np.argsort(got_k), np.argsort(keys)
    np.testing.assert_array_equal(got_k[order], keys[expect])
    np.testing.assert_array_equal(got_v[order], values[expect])
    with pytest.raises(ValueError, match="storage_dim"):
        oe.make_persistent_table_reader(paths, "snap", flow.int64, flow.float, 5)


@pytest.mark.timeout(60)
def test_an_embedding_reads_a_written_table_and_a_reader_reads_its_snapshot(tmp_path):
    emb = _emb(tmp_path, "written", size_factor=1)
    keys = np.array([7, 8, -3], np.int64)
    values = np.arange(9, dtype=np.float32).reshape(3, 3)
    with oe.make_persistent_table_writer([emb.table_path], "init", flow.int64, flow.float,
                                         emb.storage_dim) as w:
        w.write(keys, values)
    emb.load_snapshot("init")
    np.testing.assert_array_equal(_look(emb, [8, -3, 7]), values[[1, 2, 0]])
    opt = flow.optim.SGD(emb.parameters(), lr=1.0)
    _train(emb, opt, [[7]])  # d/dx x^2 = 2x: row 7 becomes -row 7
    emb.save_snapshot("after")
    rows = dict()
    for k, v in oe.make_persistent_table_reader([emb.table_path], "after", flow.int64,
                                                flow.float, emb.storage_dim):
        rows.update(zip(k.tolist(), v))
    np.testing.assert_array_equal(rows[7], -values[0])
    np.testing.assert_array_equal(rows[8], values[1])


@pytest.mark.timeout(60)
def test_state_dict_saves_a_snapshot_and_load_state_dict_restores_it(tmp_path):
    emb = _emb(tmp_path, "sd")
    before = _look(emb, [1, 2])
    sd = emb.state_dict()
    assert "OneEmbeddingSnapshot" in sd and "shadow" in sd
    _train(emb, flow.optim.SGD(emb.parameters(), lr=0.5), [[1, 2]])
    assert not np.allclose(_look(emb, [1, 2]), before)
    emb.load_state_dict(sd)
    np.testing.assert_array_equal(_look(emb, [1, 2]), before)


def test_store_options_have_oneflows_layout():
    o = oe.make_device_mem_store_options("/p", 100, size_factor=2)
    assert o["kv_store"]["caches"] == [{"policy": "full", "capacity": 100,
                                        "value_memory_kind": "device"}]
    assert o["kv_store"]["persistent_table"]["path"] == "/p" and o["size_factor"] == 2
    s = oe.make_cached_ssd_store_options(16, "/p", host_cache_budget_mb=8)
    assert [c["value_memory_kind"] for c in s["kv_store"]["caches"]] == ["device", "host"]
    h = oe.make_cached_host_mem_store_options(16, "/p", 10)
    assert [c["policy"] for c in h["kv_store"]["caches"]] == ["lru", "full"]
    assert oe.make_uniform_initializer(-1, 1) == {"type": "uniform", "low": -1, "high": 1}
    assert oe.make_normal_initializer(0, 2) == {"type": "normal", "mean": 0, "std": 2}
    with pytest.raises(ValueError):
        oe.make_device_mem_store_options("/p", 0)
    with pytest.raises(ValueError):
        oe.make_cached_ssd_store_options(0, "/p")
