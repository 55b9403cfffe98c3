"""``flow.comm``: collectives and point-to-point transfers of local tensors between the
processes of one program, as in OneFlow.

Each call is a VM instruction on the communication worker (``vm.pool().comm``): it returns at
once, runs after the last writers of the tensors it reads (and the readers of those it writes),
and later ops on its results wait for it, so compute on the other workers overlaps with the
transfer. Collectives run in the order they were issued; every rank must issue the same
collectives in the same order (as MPI requires). Issue them from one Python thread per process:
two threads issuing collectives concurrently can interleave them differently on different
ranks. ``barrier()`` (and ``recv`` without a given shape) wait for the transfer.

Sums accumulate float16/bfloat16 in float32. With one process (no MPI launch) every call works
and moves nothing between processes. Every blocking MPI call is watched: past
``ACTORFLOW_COMM_TIMEOUT`` seconds every rank is aborted with the op, rank and shapes named
(``actorflow.process.watchdog``).
"""
from __future__ import annotations

import numpy as np

from actorflow import profiler as _profiler
from actorflow import vm
from actorflow.process import agree, watchdog
from actorflow.process.world import world
from actorflow.framework import dtype as dt
from actorflow.tensor import EagerBlob, Tensor, unsynced_array

_META_TAG, _DATA_TAG = 31001, 31002


def _check(name: str, t, what: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"comm.{name}: {what} must be a Tensor, got {type(t).__name__}")
    if t.is_lazy:
        raise TypeError(f"comm.{name}: {what} is a lazy tensor of a graph being traced; "
                        f"flow.comm works on eager local tensors")
    return t


def _check_pieces(name: str, whole: Tensor, piece: Tensor) -> int:
    """Check that ``whole`` holds one ``piece`` per rank (stacked, or concatenated along dim 0)
    of the same dtype; returns the world size."""
    _check(name, whole)
    _check(name, piece)
    n = world().size
    wshape, pshape = tuple(whole._shape), tuple(piece._shape)
    ok = wshape == (n,) + pshape or (pshape and wshape == (pshape[0] * n,) + pshape[1:])
    if not ok or whole.dtype is not piece.dtype:
        raise ValueError(f"comm.{name}: {_describe(whole)} is not {n} pieces (one per rank) "
                         f"of {_describe(piece)}")
    return n


def _describe(*tensors) -> str:
    return ", ".join(f"{tuple(t._shape)} {t.dtype}" for t in tensors)


def _issue(name: str, fn, reads=(), writes=(), creates=(), detail="", small: bool = False):
    """Run ``fn()`` as an instruction on the communication worker (``small``: on the calling
    thread when that worker is idle and nothing it needs is pending). ``detail`` (the shapes,
    or a callable giving them) is what the watchdog prints if the call hangs."""
    def run():
        with watchdog.guarded(f"comm.{name}", detail):
            fn()

    vm.push_worker(vm.pool().comm)
    try:
        return vm.launch(run, reads=list(reads), writes=list(writes), creates=list(creates),
                         name=f"comm.{name}", small=small)
    finally:
        vm.pop_worker()


def _wire(a: np.ndarray) -> np.ndarray:
    """A contiguous array MPI can move (half types travel as their bits)."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "V" or a.dtype == np.float16:  # bfloat16 (ml_dtypes) and float16
        return a.view(np.uint16)
    return a


def _for_sum(a: np.ndarray) -> np.ndarray:
    """A contiguous copy MPI can sum (half types in float32)."""
    if a.dtype.kind == "V" or a.dtype == np.float16:
        return a.astype(np.float32)
    return np.ascontiguousarray(a).copy()


_MPI = None


def _mpi():
    """The mpi4py ``MPI`` module (imported once, on first use)."""
    global _MPI
    if _MPI is None:
        from mpi4py import MPI
        _MPI = MPI
    return _MPI


def _sum_op(a: np.ndarray):
    MPI = _mpi()
    return MPI.LOR if a.dtype == np.bool_ else MPI.SUM


def _comm():
    return world().comm


def all_reduce(tensor: Tensor) -> None:
    """Sum ``tensor`` over all ranks, in place (every rank gets the same values).

    A contiguous tensor of a type MPI sums is reduced in its own memory; others through a
    copy. One of at most ``SMALL_ALL_REDUCE`` elements runs on the calling thread when the
    communication worker is idle (no hand-off between threads: what bounds a small message's
    time); when moreover nothing in the VM is still to read or write its memory, it is a plain
    MPI call, with no VM instruction at all (``_direct``)."""
    d = _direct
    if d is None and _comm() is not None:
        d = _setup_direct()
    if d is not None and isinstance(tensor, Tensor):
        h = tensor._h
        if type(h) is EagerBlob:
            a = h.raw
            op = d.ops.get(a.dtype)
            s = h.storage
            x = s.writer
            w = d.worker
            if op is not None and a.size <= SMALL_ALL_REDUCE and w.issued == w.finished \
                    and (x is None or (x.done and x.error is None)) \
                    and (not s.readers or _settled(s.readers)) and _profiler.ACTIVE is None:
                f = a.flags
                if f.c_contiguous and f.writeable:  # direct: a plain MPI call (see _direct_failed)
                    sl = watchdog.slot()
                    sl.enter("comm.all_reduce", _describe, tensor)
                    try:
                        agree.check(d.comm, "comm.all_reduce", (a.shape, a.dtype))
                        d.comm.Allreduce(d.in_place, a, op=op)
                    except Exception as e:
                        sl.leave()
                        _direct_failed(tensor, e)
                        return
                    sl.leave()
                    return
    _check("all_reduce", tensor)
    _all_reduce(tensor, tensor.numel() <= SMALL_ALL_REDUCE)


class _Direct:
    """What ``all_reduce``'s direct path looks up once per process: the communicator, the
    communication worker (it must be idle: collectives keep their issue order), MPI's in-place
    marker and the reduction op of each dtype MPI sums as it is."""

    __slots__ = ("comm", "worker", "in_place", "ops")

    def __init__(self, comm, worker):
        MPI = _mpi()
        self.comm, self.worker, self.in_place = comm, worker, MPI.IN_PLACE
        # _sum_op per dtype MPI sums as it is (_direct_sum), looked up once
        arrays = [np.empty(0, t) for t in (np.float32, np.float64, np.int8, np.int16,
                                           np.int32, np.int64, np.uint8, np.bool_)]
        self.ops = {a.dtype: _sum_op(a) for a in arrays if _direct_sum(a)}


_direct: _Direct | None = None   # set on the first all_reduce of a multi-process program


def _setup_direct() -> _Direct:
    global _direct
    _direct = _Direct(_comm(), vm.pool().comm)
    return _direct


def _settled(readers: list) -> bool:
    """Whether every instruction in ``readers`` has run."""
    for y in readers:
        if not y.done:
            return False
    return True


def _direct_failed(tensor: Tensor, exc: Exception) -> None:
    """``all_reduce``'s direct path: no VM instruction reads or writes ``tensor``'s memory any
    more and the communication worker is idle, so a plain MPI call on this thread is what the
    VM would do, minus the instruction; it is watched like any other call (the watchdog's
    per-thread ``slot``). When that call raised ``exc``, it is handed to the VM as a failed
    instruction writing ``tensor``, so it is reported where the VM would report it (at once in
    blocking mode, else at the next sync point)."""
    def fail():
        raise exc

    _issue("all_reduce", fail, writes=[tensor], detail=lambda: _describe(tensor), small=True)


def _all_reduce(tensor: Tensor, small: bool) -> None:
    """``all_reduce``; ``small=False`` always queues it on the communication worker, so the
    caller never waits for the other ranks (DDP's buckets, issued inside backward)."""
    if _comm() is None:
        return

    def fn():
        a = unsynced_array(tensor)
        agree.check(_comm(), "comm.all_reduce", (a.shape, a.dtype))
        if a.flags.c_contiguous and a.flags.writeable and _direct_sum(a):
            _comm().Allreduce(_in_place(), a, op=_sum_op(a))
            return
        buf = _for_sum(a)
        _comm().Allreduce(_in_place(), buf, op=_sum_op(buf))
        a[...] = buf

    _issue("all_reduce", fn, writes=[tensor], detail=lambda: _describe(tensor), small=small)


# all-reduces of at most this many elements (4 MiB of float32) may run on the calling thread
# (see all_reduce): up to there the two thread hand-offs are a visible share of a call's time
# (0.61x mpi4py at 1 MiB with 65536); past it the caller is better left free to issue work
SMALL_ALL_REDUCE = 1 << 20


def _direct_sum(a: np.ndarray) -> bool:
    """Whether MPI sums ``a``'s dtype as it is (not half types, which are summed in float32)."""
    return not (a.dtype.kind == "V" or a.dtype == np.float16)


def _in_place():
    return _mpi().IN_PLACE


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor) -> None:
    """Concatenate every rank's ``input_tensor`` along dim 0 into ``output_tensor``, whose
    first dim is the world size times the input's (or which has shape ``(world, *input)``)."""
    n = _check_pieces("all_gather_into_tensor", output_tensor, input_tensor)

    def fn():
        src, out = unsynced_array(input_tensor), unsynced_array(output_tensor)
        if _comm() is None:
            out.reshape(-1)[...] = src.reshape(-1)
            return
        agree.check(_comm(), "comm.all_gather", (src.shape, src.dtype))
        buf = np.empty((n,) + src.shape, src.dtype)
        _comm().Allgather(_wire(src), _wire(buf))
        out.reshape(-1)[...] = buf.reshape(-1)

    _issue("all_gather_into_tensor", fn, reads=[input_tensor], writes=[output_tensor],
           detail=_describe(input_tensor))


def all_gather(tensor_list: list, tensor: Tensor) -> None:
    """Gather every rank's ``tensor`` into ``tensor_list`` (entry i: rank i's tensor), as in
    OneFlow the list's entries are replaced by the gathered tensors."""
    _check("all_gather", tensor)
    if not isinstance(tensor_list, list):
        raise TypeError(f"comm.all_gather: tensor_list must be a list, got "
                        f"{type(tensor_list).__name__}")
    n = world().size
    out = Tensor._wrap(np.empty((n,) + tuple(tensor._shape), tensor.dtype.np), tensor.dtype)
    all_gather_into_tensor(out, tensor)
    pieces = [out[i] for i in range(n)]
    tensor_list[:] = pieces


def broadcast(tensor: Tensor, src: int) -> None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank, in place."""
    _check("broadcast", tensor)
    _check_rank("broadcast", src)
    if _comm() is None:
        return

    def fn():
        a = unsynced_array(tensor)
        agree.check(_comm(), "comm.broadcast", (a.shape, a.dtype, "src", src))
        buf = _wire(a)
        _comm().Bcast(buf, root=src)
        if buf.base is not a and buf is not a:
            a[...] = buf.view(a.dtype).reshape(a.shape)

    _issue("broadcast", fn, writes=[tensor], detail=f"{_describe(tensor)} from rank {src}")


def reduce(tensor: Tensor, dst: int) -> None:
    """Sum ``tensor`` over all ranks into rank ``dst``'s ``tensor`` (in place there; the others
    keep theirs)."""
    _check("reduce", tensor)
    _check_rank("reduce", dst)
    if _comm() is None:
        return

    def fn():
        a = unsynced_array(tensor)
        agree.check(_comm(), "comm.reduce", (a.shape, a.dtype, "dst", dst))
        buf = _for_sum(a)
        if world().rank == dst:
            _comm().Reduce(_in_place(), buf, op=_sum_op(buf), root=dst)
            a[...] = buf
        else:
            _comm().Reduce(buf, None, op=_sum_op(buf), root=dst)

    _issue("reduce", fn, writes=[tensor], detail=f"{_describe(tensor)} to rank {dst}")


def reduce_scatter_tensor(output_tensor: Tensor, input_tensor: Tensor) -> None:
    """Sum ``input_tensor`` over all ranks and give rank r the r-th of its world-size equal
    pieces along dim 0 in ``output_tensor``."""
    _check_pieces("reduce_scatter_tensor", input_tensor, output_tensor)

    def fn():
        src, out = unsynced_array(input_tensor), unsynced_array(output_tensor)
        if _comm() is None:
            out.reshape(-1)[...] = src.reshape(-1)
            return
        agree.check(_comm(), "comm.reduce_scatter", (src.shape, src.dtype))
        send = _for_sum(src)
        recv = np.empty(out.shape, send.dtype)
        _comm().Reduce_scatter_block(send, recv, op=_sum_op(send))
        out[...] = recv

    _issue("reduce_scatter_tensor", fn, reads=[input_tensor], writes=[output_tensor],
           detail=_describe(input_tensor))


def reduce_scatter(output: Tensor, input_list: list) -> None:
    """``output`` = the sum over ranks of ``input_list[rank]`` (one tensor per rank)."""
    n = world().size
    if not isinstance(input_list, (list, tuple)) or len(input_list) != n:
        raise ValueError(f"comm.reduce_scatter: input_list must hold {n} tensors (one per "
                         f"rank), got {input_list!r:.80}")
    for t in input_list:
        _check("reduce_scatter", t, "input_list entry")
    from actorflow.functional import stack

    reduce_scatter_tensor(output, stack(list(input_list)))


def all_to_all(output_tensor_list: list, input_tensor_list: list) -> None:
    """Send ``input_tensor_list[i]`` to rank i; ``output_tensor_list[i]`` receives what rank i
    sent here (written in place; all entries of one shape and dtype)."""
    n = world().size
    for lst, what in ((output_tensor_list, "output"), (input_tensor_list, "input")):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"comm.all_to_all: the {what} list must hold {n} tensors")
        for t in lst:
            _check("all_to_all", t, f"{what} entry")
    first = input_tensor_list[0]
    for t in list(output_tensor_list) + list(input_tensor_list):
        if tuple(t._shape) != tuple(first._shape) or t.dtype is not first.dtype:
            raise ValueError(f"comm.all_to_all: every tensor must be {_describe(first)}, got "
                             f"{_describe(t)}")

    def fn():
        send = np.stack([np.ascontiguousarray(unsynced_array(t)) for t in input_tensor_list])
        recv = np.empty_like(send)
        if _comm() is None:
            recv[...] = send
        else:
            agree.check(_comm(), "comm.all_to_all", (send.shape[1:], send.dtype))
            _comm().Alltoall(_wire(send), _wire(recv))
        for t, piece in zip(output_tensor_list, recv):
            unsynced_array(t)[...] = piece

    _issue("all_to_all", fn, reads=input_tensor_list, writes=output_tensor_list,
           detail=_describe(first))


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int = 0) -> None:
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it into ``tensor``."""
    _check("scatter", tensor)
    _check_rank("scatter", src)
    n, rank = world().size, world().rank
    if rank == src:
        if not isinstance(scatter_list, (list, tuple)) or len(scatter_list) != n:
            raise ValueError(f"comm.scatter: rank {src} must give scatter_list with {n} tensors")
        for t in scatter_list:
            _check("scatter", t, "scatter_list entry")
            if tuple(t._shape) != tuple(tensor._shape) or t.dtype is not tensor.dtype:
                raise ValueError(f"comm.scatter: scatter_list entries must be "
                                 f"{_describe(tensor)}, got {_describe(t)}")
    reads = list(scatter_list) if rank == src else []

    def fn():
        out = unsynced_array(tensor)
        send = np.stack([unsynced_array(t) for t in scatter_list]) if rank == src else None
        if _comm() is None:
            out[...] = send[0]
            return
        agree.check(_comm(), "comm.scatter", (out.shape, out.dtype, "src", src))
        recv = np.empty(out.shape, out.dtype)
        _comm().Scatter(_wire(send) if send is not None else None, _wire(recv), root=src)
        out[...] = recv

    _issue("scatter", fn, reads=reads, writes=[tensor], detail=f"{_describe(tensor)} from {src}")


def gather(tensor: Tensor, gather_list: list | None = None, dst: int = 0) -> None:
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list`` (written in place)."""
    _check("gather", tensor)
    _check_rank("gather", dst)
    n, rank = world().size, world().rank
    if rank == dst:
        if not isinstance(gather_list, (list, tuple)) or len(gather_list) != n:
            raise ValueError(f"comm.gather: rank {dst} must give gather_list with {n} tensors")
        for t in gather_list:
            _check("gather", t, "gather_list entry")
    writes = list(gather_list) if rank == dst else []

    def fn():
        src = np.ascontiguousarray(unsynced_array(tensor))
        recv = np.empty((n,) + src.shape, src.dtype) if rank == dst else None
        if _comm() is None:
            recv[0] = src
        else:
            agree.check(_comm(), "comm.gather", (src.shape, src.dtype, "dst", dst))
            _comm().Gather(_wire(src), _wire(recv) if recv is not None else None, root=dst)
        if recv is not None:
            for t, piece in zip(gather_list, recv):
                unsynced_array(t)[...] = piece

    _issue("gather", fn, reads=[tensor], writes=writes, detail=f"{_describe(tensor)} to {dst}")


def send(tensor: Tensor, dst: int, send_meta: bool = True) -> None:
    """Send ``tensor`` to rank ``dst``. Its shape and dtype always go first, in a small message
    of their own: ``recv`` needs them when it is given no ``shape``/``dtype``, and checks them
    against what it was given otherwise (``send_meta=False`` as in OneFlow: the receiver must
    pass them; they still travel, so a mismatch is an error, never stale memory)."""
    _check("send", tensor)
    _check_rank("send", dst, peer=True)

    def fn():
        a = np.ascontiguousarray(unsynced_array(tensor))
        _comm().send((a.shape, tensor.dtype.name), dest=dst, tag=_META_TAG)
        _comm().Send(_wire(a), dest=dst, tag=_DATA_TAG)

    _issue("send", fn, reads=[tensor], detail=f"{_describe(tensor)} to rank {dst}")


def recv(src: int, shape=None, dtype=None, device=None, *, out: Tensor | None = None) -> Tensor:
    """Receive a tensor ``send`` sent from rank ``src``: into ``out`` if given, else a new
    tensor. Without ``shape`` and ``dtype`` (and ``out``) this call waits for the sender's
    shape and dtype; with them, a sent tensor of another shape or dtype is received (so the
    sender is not left waiting) and the receive fails naming both."""
    _check_rank("recv", src, peer=True)
    box = {}
    if out is not None:
        _check("recv", out, "out")
        shape, dtype = tuple(out._shape), out.dtype
    elif shape is None or dtype is None:
        def meta():
            box["meta"] = _comm().recv(source=src, tag=_META_TAG)

        vm.wait(_issue("recv", meta, detail=f"shape and dtype from rank {src}"))
        shape, name = box["meta"]
        dtype = dt.as_dtype(name)
    else:
        dtype = dt.as_dtype(dtype)
        shape = tuple(shape)
    if out is None:
        out = Tensor._wrap(np.empty(tuple(shape), dtype.np), dtype)
        creates, writes = [out], []
    else:
        creates, writes = [], [out]
    want = (tuple(shape), dtype.name)

    def fn():
        sent = box.pop("meta", None) or _comm().recv(source=src, tag=_META_TAG)
        sent = (tuple(sent[0]), sent[1])
        a = unsynced_array(out)
        buf = np.empty(sent[0], dt.as_dtype(sent[1]).np)
        _comm().Recv(_wire(buf), source=src, tag=_DATA_TAG)
        if sent != want:
            raise agree.RankMismatchError(
                f"comm.recv: rank {src} sent {sent[0]} {sent[1]}, rank {world().rank} "
                f"receives into {want[0]} {want[1]}")
        a[...] = buf

    _issue("recv", fn, writes=writes, creates=creates,
           detail=f"{tuple(shape)} {dtype} from rank {src}")
    return out


def barrier() -> None:
    """Wait until every rank has reached this call (and its earlier transfers are done)."""
    if _comm() is None:
        vm.synchronize()
        return
    vm.wait(_issue("barrier", lambda: _comm().Barrier()))


def _check_rank(name: str, r, peer: bool = False) -> None:
    n = world().size
    if not isinstance(r, (int, np.integer)) or isinstance(r, bool) or not 0 <= r < n:
        raise ValueError(f"comm.{name}: rank {r!r} is not in 0..{n - 1} (world size {n})")
    if peer:
        if _comm() is None:
            raise RuntimeError(f"comm.{name}: there is only one process; point-to-point "
                               f"transfers need a program started by mpiexec (or "
                               f"python -m actorflow.distributed.launch)")
        if r == world().rank:
            raise ValueError(f"comm.{name}: rank {r} is this process itself")


__all__ = ["all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce",
           "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "scatter", "gather",
           "send", "recv", "barrier"]
