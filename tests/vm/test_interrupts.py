"""Ctrl-C (SIGINT) at any point of an eager op or an nn.Graph call leaves the VM and the actor
runtime usable: the interrupted call fails alone (or completes whole), the next call gives the
right values and ``synchronize()`` returns.

Two ways in: ``interrupt_at`` raises SIGINT at the n-th point of one call where CPython runs
signal handlers (after a call returns, at a backward jump), for every n until the call gets
through uninterrupted; a child process loops calls while a timer thread sends it real SIGINTs
after varying delays.
"""
from __future__ import annotations

import dis
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import bounded_synchronize

pytestmark = pytest.mark.timeout(120)

_PKG = os.path.dirname(flow.__file__) + os.sep
# the instructions after which CPython 3.11+ runs pending signal handlers in Python code
# (3.10's names too)
_CHECKS = {dis.opmap[n] for n in ("CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD", "CALL_FUNCTION",
                                  "CALL_METHOD", "JUMP_ABSOLUTE") if n in dis.opmap}


def interrupt_at(n: int, fn) -> bool:
    """Run ``fn()`` with SIGINT raised at the ``n``-th signal-check point inside actorflow's
    code (on this thread); True if a ``KeyboardInterrupt`` came out, False if ``fn`` ran
    through (``n`` is past its last point)."""
    count = [0]
    prev: dict = {}

    def local(frame, event, arg):
        if event == "opcode":
            code = frame.f_code
            p = prev.get(id(frame))
            prev[id(frame)] = (code, frame.f_lasti)
            if p is not None and p[0] is code and code.co_code[p[1]] in _CHECKS:
                count[0] += 1
                if count[0] == n:
                    signal.raise_signal(signal.SIGINT)  # the handler runs as for a real one
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.startswith(_PKG):
            frame.f_trace_opcodes = True
            return local
        return None

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    old_trace = sys.gettrace()  # (a coverage tool's, say)
    sys.settrace(tracer)
    try:
        fn()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(old_trace)
        signal.signal(signal.SIGINT, old)
    return False


def every_point(call, check) -> int:
    """Interrupt ``call`` at each of its points in turn; after each, ``check()`` and a bounded
    synchronize. Returns the number of points."""
    n = 1
    while interrupt_at(n, call):
        check()
        bounded_synchronize()
        n += 1
    assert n > 20, "too few interrupt points: the tracer saw nothing"
    return n - 1


class _Linear(flow.nn.Graph):
    def __init__(self, m, opt=None, sched=None):
        super().__init__()
        self.m = m
        self.training_graph = opt is not None
        if opt is not None:
            self.add_optimizer(opt, lr_sch=sched)

    def build(self, x):
        y = self.m(x)
        if self.training_graph:
            loss = y.sum()
            loss.backward()
            return loss
        return y


def test_an_interrupt_anywhere_in_eager_ops_fails_that_op_alone():
    a = flow.ones(2, 3)            # small: may run inline on the caller
    big = flow.ones(100, 100)      # queued on the worker

    def call():
        a * 2
        big.relu()

    def check():
        np.testing.assert_array_equal((a * 2).numpy(), np.full((2, 3), 2.0))
        assert (big * 3).sum().item() == 30000

    every_point(call, check)


def test_an_interrupt_anywhere_in_a_graph_call_leaves_the_graph_usable():
    flow.manual_seed(0)
    m = flow.nn.Linear(8, 8)
    g = _Linear(m)
    x = flow.ones(4, 8)
    ref = g(x).numpy()

    def check():
        np.testing.assert_allclose(g(x).numpy(), ref, rtol=1e-6)

    every_point(lambda: g(x), check)


def test_an_interrupted_training_call_is_counted_whole_or_not_at_all():
    """The scheduler steps once for every update that ran: an interrupt between issuing the
    call and recording it must not leave a call that ran but was not counted."""
    flow.manual_seed(0)
    m = flow.nn.Linear(8, 8)
    opt = flow.optim.SGD(m.parameters(), lr=0.01)
    sched = flow.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0)
    g = _Linear(m, opt, sched)
    x = flow.ones(4, 8)
    w0 = m.weight.numpy().copy()
    g(x)
    one = w0 - m.weight.numpy()  # the gradient does not depend on the weights: equal steps
    seen = [1]

    def check():
        g(x)
        steps = (w0 - m.weight.numpy()) / one
        k = float(np.round(steps.mean()))
        np.testing.assert_allclose(steps, k, rtol=1e-3)
        assert k >= seen[0] + 1
        assert sched.last_epoch == k, f"{k} updates ran, the scheduler counted {sched.last_epoch}"
        seen[0] = k

    every_point(lambda: g(x), check)


_CHILD = textwrap.dedent("""
    import os, random, signal, sys, threading, time
    import numpy as np
    import actorflow as flow

    class G(flow.nn.Graph):
        def __init__(self, m, opt):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)
        def build(self, x):
            loss = self.m(x).sum()
            loss.backward()
            return loss

    rng = random.Random(int(sys.argv[1]))
    flow.vm.scheduler.MAX_QUEUED = 16  # a short queue: the check after each interrupt waits for it
    flow.manual_seed(0)
    m = flow.nn.Linear(8, 8)
    g = G(m, flow.optim.SGD(m.parameters(), lr=0.01))
    x = flow.ones(4, 8)
    g(x).numpy()
    a = flow.ones(64, 64)
    for k in range(12):  # 12 delays in each mode
        armed = threading.Event()
        def fire(delay=rng.uniform(0.0005, 0.03)):
            armed.wait()
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=fire, daemon=True)
        t.start()
        try:
            armed.set()
            while True:
                if k % 2:
                    g(x)
                else:
                    b = ((a * 1.5).relu() + 1).sum()
        except KeyboardInterrupt:
            pass
        t.join()
        before = m.weight.numpy().copy()
        loss = g(x).item()               # another call: it runs and updates once
        step = before - m.weight.numpy()
        assert np.isfinite(loss) and np.allclose(step, step.flat[0]), step
        assert ((flow.ones(3) * 2).numpy() == 2).all()
        flow.synchronize()
    print("ok", flush=True)
""")


@pytest.mark.parametrize("blocking", ["0", "1"])
def test_real_sigints_during_loops_of_graph_calls_and_eager_ops(blocking):
    env = dict(os.environ, ACTORFLOW_EAGER_BLOCKING=blocking,
               PYTHONPATH=os.path.dirname(_PKG.rstrip(os.sep)))
    p = subprocess.run([sys.executable, "-c", _CHILD, "7"], env=env, capture_output=True,
                       text=True, timeout=90)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr[-3000:]


def test_deferred_interrupts_raises_after_the_block_and_restores_the_handler():
    from actorflow.vm import deferred_interrupts

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with deferred_interrupts():
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
                done.append(1)  # reached: the SIGINT waits for the end of the block
        assert done == [1]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with deferred_interrupts():  # nothing arrived: nothing raised
            pass
    finally:
        signal.signal(signal.SIGINT, old)
