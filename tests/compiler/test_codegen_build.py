"""The generated kernels' build: the on-disk cache's size bound and two processes building the
same library at once."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO_ROOT

cbuild = importlib.import_module("actorflow.compiler.codegen.build")  # the module (not build())

pytestmark = pytest.mark.timeout(300)


def _fake_library(directory, name: str, mib: float, age_s: float) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(b"\0" * int(mib * (1 << 20)))
    t = time.time() - age_s
    os.utime(path, (t, t))
    return path


def test_prune_keeps_the_newest_libraries_within_the_bound(tmp_path):
    old = _fake_library(tmp_path, "af_old.so", 1, 300)
    mid = _fake_library(tmp_path, "af_mid.so", 1, 200)
    new = _fake_library(tmp_path, "af_new.so", 1, 100)
    other = _fake_library(tmp_path, "notes.txt", 1, 400)  # not a library: never touched
    assert cbuild.prune(str(tmp_path), limit_mb=2) == [old]
    assert sorted(os.listdir(tmp_path)) == ["af_mid.so", "af_new.so", "notes.txt"]
    # the library kept by the caller stays even when it alone is over the bound
    assert sorted(cbuild.prune(str(tmp_path), keep=mid, limit_mb=0)) == [new]
    assert os.path.exists(mid) and os.path.exists(other)


def test_a_build_prunes_the_cache_to_the_environment_bound(monkeypatch, tmp_path):
    monkeypatch.setenv(cbuild.CACHE_VAR, str(tmp_path))
    monkeypatch.setenv(cbuild.CACHE_MB_VAR, "1")
    stale = _fake_library(tmp_path, "af_stale.so", 1, 1000)
    lib = cbuild.build("int af_prune_probe(void) { return 7; }\n")
    assert lib.af_prune_probe() == 7
    # the new library (a few KiB) and the 1 MiB stale one exceed 1 MiB: the stale one goes
    assert not os.path.exists(stale)
    assert os.listdir(tmp_path) == [os.path.basename(lib._name)]


_RACER = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import importlib
b = importlib.import_module("actorflow.compiler.codegen.build")
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.005)
lib = b.build("int af_race_probe(void) { return 1234; }\n")
print(lib.af_race_probe(), b.stats["builds"], flush=True)
"""


def test_two_processes_building_the_same_library_at_once(tmp_path):
    cache = tmp_path / "cache"
    go = tmp_path / "go"
    env = dict(os.environ, **{cbuild.CACHE_VAR: str(cache)})
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, REPO_ROOT, str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    time.sleep(1.0)  # both started and waiting
    go.write_text("")
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.split()[0] == "1234", (out, err)
    # one complete library, no temporary files left behind
    assert [n for n in os.listdir(cache)] == [n for n in os.listdir(cache)
                                             if n.startswith("af_") and n.endswith(".so")]
    assert len(os.listdir(cache)) == 1
