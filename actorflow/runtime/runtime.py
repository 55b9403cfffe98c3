"""The Runtime: runs a Plan on actor threads.

``Runtime(plan, bindings)`` creates the threads the plan names, has each construct its actors
(a CONSTRUCT_ACTOR message per task), then sends START to the source actors. ``launch`` is one
graph call: it pushes the call's input arrays into the input Buffers and one job instance into
the source Buffer and returns a ``Future`` that the sink completes with the output arrays.
Several calls may be in flight.

``close()`` is the orderly shutdown of the OneFlow article: the source Buffer closes, the source
actor sends EORD, every actor leaves once its producers sent EORD and its registers came back,
then each thread gets STOP_THREAD and is joined. A kernel error (or any exception on an actor
thread) calls ``abort``: buffers close, every pending call fails with the error, threads are
woken and stop; nothing waits forever. In a distributed graph a failure on another rank comes
the same way: the collective or transfer waiting for that rank raises ``RemoteRankError``
(``process.watchdog``) and this runtime aborts with it; a thread waiting in such a
collective leaves once the runtime aborted.
"""
from __future__ import annotations

import itertools
import threading

from actorflow.compiler import codegen
from actorflow.compiler.task_id import thread_id_of
from actorflow.job.executor import Future
from actorflow.runtime.actors import make_actor
from actorflow.runtime.buffer import Buffer, BufferStatus
from actorflow.runtime.message import CONSTRUCT_ACTOR, START, STOP_THREAD
from actorflow.runtime.msg_bus import ActorMsgBus
from actorflow.runtime.regst import allocate_blocks
from actorflow.runtime.thread import ActorThread

class RuntimeAborted(RuntimeError):
    """The runtime stopped because of an earlier error; the message says which."""


class Runtime:
    """See the module docstring."""

    def __init__(self, plan, bindings: dict, timeout: float = 30.0):
        self.plan = plan
        self.bindings = bindings
        self.aborted = False
        self.error: BaseException | None = None
        self.closed = False
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pieces = itertools.count()
        self.pending: dict = {}
        self.seeds: dict = {}
        self.overrides: dict = {}  # job instance -> {variable name: array} for that call only
        self.blocks = allocate_blocks(plan.memory)
        self.generated_kernels = codegen.kernels_of(plan)  # task id -> generated C kernel
        self.input_buffers = {int(k): Buffer(name=f"input{k}") for k in plan.io["inputs"]}
        self.output_buffers = {int(k): Buffer(name=f"output{k}") for k in plan.io["outputs"]}
        self.source_buffer = Buffer(name="source")
        self.threads = {tid: ActorThread(tid, self) for tid in plan.thread_ids}
        self.bus = ActorMsgBus(self.threads)
        self._started = 0
        self._constructed = 0
        self._alive = 0
        for t in self.threads.values():
            t.start()
        self._wait(lambda: self._started == len(self.threads), timeout, "threads to start")
        for task in plan.tasks:
            self.bus.register(task.task_id)
            self.bus.send((CONSTRUCT_ACTOR, 0, task.task_id, task))
        self._wait(lambda: self._constructed == len(plan.tasks), timeout, "actors to construct")
        for task in plan.source_tasks:
            self.bus.send((START, 0, task.task_id, None))

    # -- thread callbacks ------------------------------------------------------------------------
    def thread_started(self, thread) -> None:
        with self._cond:
            self._started += 1
            self._cond.notify_all()

    def construct_actor(self, task):
        return make_actor(task, self)

    def actor_constructed(self) -> None:
        with self._cond:
            self._constructed += 1
            self._alive += 1
            self._cond.notify_all()

    def actor_exited(self, actor) -> None:
        with self._cond:
            self._alive -= 1
            self._cond.notify_all()

    def seed_for(self, piece: int, key: str, micro: int) -> int:
        seeds = self.seeds[piece][key]
        return seeds[micro] if len(seeds) > 1 else seeds[0]

    def on_instance_done(self, piece: int) -> None:
        outs = []
        for i in range(len(self.output_buffers)):
            status, item = self.output_buffers[i].try_pull()
            if status is not BufferStatus.SUCCESS or item[0] != piece:
                raise RuntimeError(f"output {i} of job instance {piece} is missing")
            outs.append(item[1])
        with self._lock:
            fut = self.pending.pop(piece, None)
            self.seeds.pop(piece, None)
            self.overrides.pop(piece, None)
        if fut is not None:
            fut.set_result(outs)

    # -- calls -----------------------------------------------------------------------------------
    def launch(self, inputs: list, seeds: dict, overrides: dict | None = None) -> Future:
        """Start one iteration on ``inputs`` (arrays by input index) with the random seeds it
        uses (op name -> list of seeds, one per micro-batch or one). ``overrides`` gives
        variables a value for this call only (a learning rate snapshotted when the call was
        made, so calls in flight don't see a later call's value)."""
        if self.aborted:
            raise RuntimeAborted(f"the runtime stopped after an error: {self.error}")
        if self.closed:
            raise RuntimeError("the runtime is closed")
        piece = next(self._pieces)
        fut = Future(piece)
        with self._lock:
            self.pending[piece] = fut
            self.seeds[piece] = seeds
            if overrides:
                self.overrides[piece] = overrides
        for i, a in enumerate(inputs):
            self.input_buffers[i].push(a)
        self.source_buffer.push(piece)
        return fut

    # -- ending ----------------------------------------------------------------------------------
    def close(self, timeout: float = 10.0) -> None:
        """Orderly shutdown (see the module docstring); falls back to ``abort`` on timeout."""
        if self.closed:
            return
        self.closed = True
        self.source_buffer.close()
        if not self.aborted:
            ok = self._wait(lambda: self._alive == 0, timeout, None)
            if not ok:
                self.abort(TimeoutError("runtime shutdown timed out: actors did not leave"))
        for t in self.threads.values():
            t.channel.put((STOP_THREAD, 0, 0, None))
        self._join(timeout)
        self._release()

    def _release(self) -> None:
        """Once every thread has ended: drop the actors, register memory and bound state, and
        the threads' link back to the runtime. The runtime and its threads reference each
        other, so without this a closed runtime (its registers and the parameters it was
        bound to) would live until the cyclic garbage collector happened to run."""
        if any(t.thread.is_alive() for t in self.threads.values()):
            return
        for t in self.threads.values():
            t.actors.clear()
            t.local.clear()
            t.rt = None
        self.blocks = None
        self.bindings = {}
        self.seeds.clear()
        self.overrides.clear()

    def abort(self, error: BaseException) -> None:
        """Stop everything because of ``error``: pending and later calls fail with it."""
        with self._cond:
            if self.aborted:
                return
            self.aborted = True
            self.error = error
            pending = list(self.pending.values())
            self.pending.clear()
            self._cond.notify_all()
        for b in [self.source_buffer, *self.input_buffers.values(),
                  *self.output_buffers.values()]:
            b.close()
        for fut in pending:
            fut.set_error(error if fut is pending[0] else RuntimeAborted(
                f"graph call {fut.piece} was aborted by an earlier error: {error}"))
        for t in self.threads.values():
            t.channel.put((STOP_THREAD, 0, 0, None))

    def _join(self, timeout: float) -> None:
        me = threading.get_ident()
        for t in self.threads.values():
            if t.ident != me:
                t.thread.join(timeout)

    def join(self, timeout: float = 10.0) -> None:
        """Wait for the threads to end (after ``close`` or ``abort``)."""
        self._join(timeout)

    def _wait(self, pred, timeout: float, what: str | None) -> bool:
        with self._cond:
            ok = self._cond.wait_for(lambda: pred() or self.aborted, timeout)
        if self.aborted and what is not None:
            self._join(timeout)
            raise RuntimeAborted(f"runtime failed while waiting for {what}: {self.error}") \
                from self.error
        if not ok and what is not None:
            self.abort(TimeoutError(f"timed out waiting for {what}"))
            self._join(timeout)
            raise TimeoutError(f"runtime: timed out waiting for {what}")
        return ok

    @property
    def thread_names(self) -> dict:
        """task id -> name of the thread its actor runs on."""
        return {t.task_id: self.threads[thread_id_of(t.task_id)].name for t in self.plan.tasks}

    def __del__(self):
        try:
            if not self.closed:
                self.close(timeout=2.0)
        except Exception:
            pass
