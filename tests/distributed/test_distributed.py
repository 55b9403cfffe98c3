"""Several processes: flow.env, flow.comm and the launcher, run through ``mpiexec`` (the mpich
wheel's, from the ``mpi`` extra). Each test starts the ranks as subprocesses with a timeout and
shows their output when one fails; without mpi4py/mpiexec the tests skip."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import actorflow as flow
from tests.helpers import REPO_ROOT
from actorflow.distributed import launch

HERE = os.path.dirname(os.path.abspath(__file__))  # the rank scripts sit beside this file
ROOT = REPO_ROOT

try:
    import mpi4py  # noqa: F401
    MPIEXEC = launch.find_mpiexec()
except (ImportError, FileNotFoundError):
    MPIEXEC = None

needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpi4py and mpiexec (the mpi extra) are "
                                                       "not installed")


def run_ranks(n: int, script: str, *args, timeout: float = 120, env=None):
    """Run ``script`` on ``n`` ranks; returns (exit code, seconds, output)."""
    cmd = [MPIEXEC, "-n", str(n), sys.executable, os.path.join(HERE, script), *args]
    e = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, time.monotonic() - t0, p.stdout + p.stderr


def test_one_process_is_a_world_of_one():
    assert (flow.env.get_rank(), flow.env.get_world_size()) == (0, 1)
    assert (flow.env.get_local_rank(), flow.env.get_node_size()) == (0, 1)
    x = flow.tensor([1.0, 2.0])
    flow.comm.all_reduce(x)
    flow.comm.broadcast(x, 0)
    out = []
    flow.comm.all_gather(out, x)
    assert len(out) == 1 and out[0].numpy().tolist() == [1.0, 2.0]
    flow.comm.barrier()
    with pytest.raises(RuntimeError, match="only one process"):
        flow.comm.send(x, 0)
    with pytest.raises(ValueError, match="rank 3 is not in 0..0"):
        flow.comm.broadcast(x, 3)
    # a one-process program leaves the environment alone (OneFlow: no RANK, MASTER_ADDR...)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    code = "import os, actorflow; print(sorted(k for k in os.environ if k in " \
           "('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=dict(env, PYTHONPATH=ROOT))
    assert p.stdout.strip() == "[]", p.stdout + p.stderr


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_on_several_ranks(n):
    code, _, out = run_ranks(n, "comm_checks.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
def test_the_launcher_starts_the_ranks_and_exports_the_environment(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import os, sys, actorflow as flow\n"
                      "x = flow.ones(1) * (flow.env.get_rank() + 1)\n"
                      "flow.comm.all_reduce(x)\n"
                      "e = os.environ\n"
                      "line = (f\"rank {e['RANK']} {e['LOCAL_RANK']} {e['WORLD_SIZE']} \"\n"
                      "        f\"{e['MASTER_PORT']} {int(x.numpy()[0])} {sys.argv[1:]}\\n\")\n"
                      "sys.stdout.write(line)\n")
    p = subprocess.run([sys.executable, "-m", "actorflow.distributed.launch",
                        "--nproc_per_node", "2", "--master_port", "29611", str(script), "a"],
                       capture_output=True, text=True, timeout=100,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(2):
        assert f"rank {r} {r} 2 29611 3 ['a']" in p.stdout, p.stdout + p.stderr


def test_the_launcher_maps_oneflow_flags():
    args = launch.parse(["--nproc_per_node", "2", "--nnodes", "2", "--hosts", "a,b", "t.py",
                         "--lr", "1"])
    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    cmd = launch.build_command(args)
    assert cmd[1:7] == ["-hosts", "a,b", "-ppn", "2", "-n", "4"]
    assert cmd[-3:] == ["t.py", "--lr", "1"]
    with pytest.raises(ValueError, match="--hosts"):
        launch.build_command(launch.parse(["--nnodes", "2", "t.py"]))
    with pytest.raises(ValueError, match="node_rank"):
        launch.build_command(launch.parse(["--node_rank", "1", "t.py"]))


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode, expect", [
    ("raise", "bad input on rank 1 only"),
    ("kernel", "embedding"),
    ("stall", "comm.all_reduce (4, 8) actorflow.float32 did not complete"),
    ("exit", "comm.all_reduce (4, 8) actorflow.float32 did not complete"),
    ("stall_large", "comm.all_reduce (1048577,) actorflow.float32 did not complete"),
])
def test_a_failing_rank_stops_every_rank_in_bounded_time(mode, expect):
    code, seconds, out = run_ranks(2, "failures.py", mode, timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "4"})
    assert code != 0, out
    assert expect in out, out
    assert "[actorflow rank" in out, out
    assert seconds < 60, (seconds, out)
    assert "finished" not in out or mode == "exit", out


class _Request:
    """A stand-in for an MPI request that completes at its ``n``-th test (never if None)."""

    def __init__(self, n):
        self.n, self.tests = n, 0

    def Test(self):
        self.tests += 1
        return self.n is not None and self.tests >= self.n


def test_a_failure_notice_fails_the_graphs_waits_until_this_rank_failed_that_call(monkeypatch):
    """The bookkeeping of failure notices (one process, no MPI): a notice of another rank's
    call of graph ``g1`` makes the waits of ``g1`` (and its transfers, ``g1_p2p``) raise a
    RemoteRankError naming that rank's error, not another graph's; once this rank's call of
    that number failed, waits started later ignore it; a notice of a call that already
    failed here is dropped; a wait past the timeout raises without a notice."""
    from actorflow.process import watchdog as w
    from actorflow.errors import KernelError, RemoteRankError

    for name, value in [("_poison", {}), ("_failed_calls", {}), ("_abandoned", []),
                        ("GRACE_S", 0.0)]:
        monkeypatch.setattr(w, name, value)
    text = "rank 1 failed: embedding (op emb-embedding-0): kernel failed [in module emb]"
    w._take_notice("g1", 3, text, time.monotonic())
    time.sleep(0.01)
    assert w.abandon_error("g2", "op", "", time.monotonic() - 1, 60) is None
    req = _Request(None)
    with pytest.raises(RemoteRankError, match=r"pipe_recv x abandoned: rank 1 failed: "
                                              r"embedding .*\[in module emb\]") as info:
        w.wait(req, "pipe_recv", lambda: "x", "g1_p2p", keep=("buffer",))
    assert info.value.from_notice and isinstance(info.value, KernelError)
    assert w._abandoned == [(req, ("buffer",))] and req.tests > 2
    w.wait(_Request(3), "op", "", "g1_p2p")   # a request that completes is not given up
    before = time.monotonic()
    time.sleep(0.01)
    w.call_failed("g1", 3)   # this rank's call 3 failed too
    time.sleep(0.01)
    assert w.abandon_error("g1", "op", "", before, 60) is not None   # pending before that
    assert w.abandon_error("g1", "op", "", time.monotonic(), 60) is None
    w._take_notice("g1", 3, text, time.monotonic())   # a notice of a call failed here too
    assert w.abandon_error("g1", "op", "", time.monotonic(), 60) is None
    err = w.abandon_error("g3", "boxing", "shard (2,)", time.monotonic() - 5, 2)
    assert "boxing shard (2,) did not complete in 5.0 s" in str(err) and not err.from_notice


@pytest.mark.timeout(30)
def test_guarded_calls_and_the_direct_slot_are_one_record():
    """``guarded`` and the direct path's ``slot()`` record a pending call in the same place:
    the watchdog sees either while it is pending (dated when first seen), neither after."""
    import threading

    from actorflow.process import watchdog as w

    now = time.monotonic()
    assert w._pending(now) == []
    with w.guarded("make a communicator", lambda: "ranks [0, 1]"):
        (op, detail, t0), = w._pending(now)
        assert (op, w._what(op, detail), t0) == (
            "make a communicator", "make a communicator ranks [0, 1]", now)
        assert w._pending(now + 5)[0][2] == now   # the same call: still dated from then
    assert w._pending(now) == []
    seen = []

    def other():   # another thread's direct call, pending beside this thread's guarded one
        s = w.slot()
        s.enter("comm.all_reduce", lambda t: f"{t} float32", (4,))
        seen.append(sorted(w._what(o, d) for o, d, _ in w._pending(now)))
        s.leave()

    with w.guarded("comm.barrier"):
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
    assert seen == [["comm.all_reduce (4,) float32", "comm.barrier"]], seen
    assert w._pending(now) == []


class _Comm:
    """A communicator of ``size`` ranks (this one rank 0) that records its non-blocking
    barriers and sends (one process, no MPI); ``done``: whether the sends complete."""

    def __init__(self, size: int = 2):
        self.barriers, self.sent, self.size, self.done = 0, [], size, True

    def Ibarrier(self):
        self.barriers += 1
        return _Request(1)

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return 0

    def isend(self, note, dest, tag):
        self.sent.append((dest, note))
        return _Request(1 if self.done else None)


@pytest.mark.timeout(30)
def test_a_failed_call_notifies_once_and_a_refused_one_not_at_all(monkeypatch):
    """``call_failed(group, call, notice=...)``: one entry point recording this rank's failed
    call and sending its notice to every other rank; completed sends are not kept; a refused
    call (``CompiledGraph._refuse``) records the call and sends nothing."""
    from types import SimpleNamespace

    from actorflow.process import watchdog as w
    from actorflow.errors import KernelError
    from actorflow.nn.graph.compiled import CompiledGraph

    comm = _Comm(size=3)
    for name, value in [("_poison", {}), ("_failed_calls", {}), ("_sent", []),
                        ("_notice_comm", comm), ("_world", SimpleNamespace(rank=0, comm=comm))]:
        monkeypatch.setattr(w, name, value)
    w.call_failed("g1_p2p", 0, notice="boom")
    assert comm.sent == [(p, (0, "g1", 0, "rank 0 failed: boom")) for p in (1, 2)]
    assert w._failed_calls == {"g1": [0]}
    for k in range(1, 50):   # the completed sends are dropped as new ones go out
        w.call_failed("g1", k, notice="boom")
    assert len(comm.sent) == 100 and len(w._sent) == 2, len(w._sent)
    comm.done = False
    w.call_failed("g1", 50, notice="boom")
    w.call_failed("g1", 51, notice="boom")
    assert len(w._sent) == 4   # pending ones are kept
    got = []
    CompiledGraph._refuse(SimpleNamespace(_broken="call 0 failed: boom", _group="g1"), 52,
                          got.append)
    assert len(comm.sent) == 104 and w._failed_calls["g1"][-1] == 52
    assert isinstance(got[0], KernelError) and str(got[0]).startswith(
        "graph call refused: call 0 failed: boom"), got
    w.call_failed("g1", 53)   # no notice: recorded only
    assert len(comm.sent) == 104 and w._failed_calls["g1"][-1] == 53


@pytest.mark.timeout(30)
def test_the_exit_barrier_is_not_on_the_world_communicator(monkeypatch):
    """``exit_barrier`` runs at exit while the communication worker may still be in a
    collective on the world communicator: it must use the watchdog's own communicator (two
    threads' concurrent collectives on one communicator are MPI misuse)."""
    from types import SimpleNamespace

    from actorflow.process import watchdog as w

    world, notices = _Comm(), _Comm()
    monkeypatch.setattr(w, "_world", SimpleNamespace(comm=world, rank=0))
    monkeypatch.setattr(w, "_notice_comm", notices)
    w.exit_barrier()
    assert (world.barriers, notices.barriers) == (0, 1)


@needs_mpi
@pytest.mark.timeout(450)   # shared.EAGER_2_TIMEOUT + 150
def test_module_to_global_and_back():
    from tests.distributed.shared import check_eager_2   # (shared imports run_ranks from here)
    check_eager_2("module_global.py")


def test_a_graph_calls_state_note_keeps_the_errors_attributes():
    """``errors.with_note`` (the state note of a failed graph call, the issue site of an op)
    keeps the exception's type, attributes and cause: an error that already names the user's
    line is not given a second site, a notice's error stays one."""
    from actorflow.errors import KernelError, RemoteRankError, with_issue_site
    from actorflow.nn.graph.compiled import _with_state_note

    cause = ValueError("index 9")
    err = KernelError("embedding: kernel failed: ValueError: index 9")
    err.__cause__ = cause
    sited = with_issue_site(err, '  File "train.py", line 3, in <module>\n')
    assert sited.issued_at and sited.__cause__ is cause
    noted = _with_state_note(sited, False)
    assert type(noted) is KernelError and noted.issued_at and noted.__cause__ is cause
    assert str(noted).endswith("line 3, in <module>\n(parameters and optimizer state are as "
                               "they were before this call)"), str(noted)
    assert with_issue_site(noted, "elsewhere") is noted   # no second site
    remote = RemoteRankError("boxing abandoned: rank 1 failed: x")
    remote.from_notice = True
    noted = _with_state_note(remote, True)
    assert type(noted) is RemoteRankError and noted.from_notice and noted.__cause__ is remote
    assert "they hold what it wrote" in str(noted)
