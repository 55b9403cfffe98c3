"""Intra-op parallelism: blocks claimed by the caller and helper threads; split GEMMs."""
import threading
import time

import pytest

from actorflow.ops import parallel

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def two_threads():
    before = parallel.threads()
    parallel.set_threads(2)
    yield
    parallel.set_threads(before)


def test_every_block_runs_once_across_threads(two_threads):
    seen, names = [], set()

    def block(i):
        time.sleep(0.002)  # releases the GIL, so the helper gets blocks too
        seen.append(i)
        names.add(threading.current_thread().name)

    parallel.parallel_for(40, block)
    assert sorted(seen) == list(range(40))
    assert threading.current_thread().name in names
    assert any(n.startswith("actorflow-intra-op-") for n in names)


def test_caller_takes_every_block_when_the_helper_is_busy(two_threads):
    # the helper is held inside another call's block: the caller claims all of its own blocks
    # instead of waiting for a share dealt to the helper
    hold, started = threading.Event(), threading.Event()

    def slow(i):
        if threading.current_thread().name.startswith("actorflow-intra-op-"):
            started.set()
            hold.wait(10)
        else:
            started.wait(10)

    other = threading.Thread(target=parallel.parallel_for, args=(2, slow))
    other.start()
    assert started.wait(10)
    ran_on = []
    t0 = time.perf_counter()
    parallel.parallel_for(8, lambda i: ran_on.append(threading.current_thread().name))
    assert time.perf_counter() - t0 < 5
    assert ran_on == [threading.current_thread().name] * 8
    hold.set()
    other.join(10)
    assert not other.is_alive()


def test_first_error_is_raised_after_all_blocks_ran(two_threads):
    ran = []

    def block(i):
        ran.append(i)
        if i == 3:
            raise ValueError("block 3 failed")

    with pytest.raises(ValueError, match="block 3 failed"):
        parallel.parallel_for(10, block)
    assert sorted(ran) == list(range(10))


def test_one_thread_runs_inline_in_order():
    before = parallel.threads()
    parallel.set_threads(1)
    try:
        order = []
        parallel.parallel_for(5, lambda i: order.append((i, threading.current_thread().name)))
        assert order == [(i, threading.current_thread().name) for i in range(5)]
    finally:
        parallel.set_threads(before)


def test_helper_threads_are_bounded(two_threads):
    for _ in range(50):
        parallel.parallel_for(4, lambda i: None)
    def helpers():
        return [t for t in threading.enumerate() if t.name.startswith("actorflow-intra-op-")]
    end = time.monotonic() + 5  # a helper retired by set_threads may still be leaving
    while len(helpers()) > 1 and time.monotonic() < end:
        time.sleep(0.01)
    assert len(helpers()) <= 1


def test_bad_thread_count():
    with pytest.raises(ValueError, match="positive integer"):
        parallel.set_threads(0)


def test_split_covers_the_range():
    for total, size in [(1, 1), (7, 1), (100, 30), (5, 100), (64, 8)]:
        ranges = parallel.split(total, size)
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert parallel.split(0, 4) == []


def test_env_int_names_the_variable(monkeypatch):
    from actorflow.settings import env_flag, env_int
    monkeypatch.setenv("ACTORFLOW_TEST_N", "3")
    assert env_int("ACTORFLOW_TEST_N", 7, minimum=1) == 3
    monkeypatch.setenv("ACTORFLOW_TEST_N", "")
    assert env_int("ACTORFLOW_TEST_N", 7, minimum=1) == 7
    for bad in ("x", "0"):
        monkeypatch.setenv("ACTORFLOW_TEST_N", bad)
        with pytest.raises(ValueError, match="ACTORFLOW_TEST_N must be an integer >= 1"):
            env_int("ACTORFLOW_TEST_N", 7, minimum=1)
    monkeypatch.setenv("ACTORFLOW_TEST_N", "Off")
    assert env_flag("ACTORFLOW_TEST_N", True) is False
    monkeypatch.setenv("ACTORFLOW_TEST_N", "yes")
    assert env_flag("ACTORFLOW_TEST_N", False) is True
