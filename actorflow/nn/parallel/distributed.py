"""``DistributedDataParallel``: one model replica per process, gradients averaged across them.

At construction the parameters of rank 0 (and its buffers, with ``broadcast_buffers``, as
OneFlow does) are broadcast to every rank, and the
parameters that require grad are cut into buckets (reverse registration order, the order
backward tends to produce gradients in; one dtype per bucket, at most ``bucket_size``
parameters). Each parameter gets a post-accumulation hook, which the engine calls as soon as
the parameter's gradient is final, while backward's remaining ops are still being issued;
when every parameter of a bucket has its gradient, and every earlier bucket was reduced (so
every rank reduces the buckets in one order, whatever order its backward made them ready
in), the bucket's gradients are copied into its flat buffer (kept from step to step),
all-reduced (``flow.comm.all_reduce``), divided by the world size (OneFlow averages) and
copied back into the gradients. All three steps are issued on
the VM's communication worker, so they wait only for the bucket's own gradients and run while
worker 0 still computes the rest of backward; the optimizer's update waits for them through the
ordinary storage dependencies.

Every rank must produce gradients for the same parameters in the same order (one model, the
same graph): a parameter that gets no gradient in a backward that filled part of its bucket
is reported at the next forward, as PyTorch does without ``find_unused_parameters``.
"""
from __future__ import annotations

import contextlib
import weakref

import actorflow.functional as F
from actorflow import vm
from actorflow.autograd import engine
from actorflow.autograd.grad_mode import no_grad
from actorflow.process import groups
from actorflow.process.world import world
from actorflow.nn.module import Module


def _comm():
    # flow.comm (a layer below nn: the user-facing collective API), loaded on first use
    from actorflow import comm
    return comm


def _check_replicas(module: Module, with_buffers: bool) -> None:
    """Raise on every rank, before anything is broadcast, unless every rank's ``module`` has
    the same parameters (and buffers, when they are broadcast): names, shapes and dtypes (one
    gather of the metadata). The error names the first entry that differs and each rank's
    value of it."""
    entries = [("parameter", n, tuple(p.shape), str(p.dtype))
               for n, p in module.named_parameters()]
    if with_buffers:
        entries += [("buffer", n, tuple(b.shape), str(b.dtype))
                    for n, b in module.named_buffers() if b is not None]
    every = groups.allgather_object(entries, "DistributedDataParallel parameter check")
    if all(e == every[0] for e in every):
        return
    longest = max(len(e) for e in every)
    for k in range(longest):
        at = [e[k] if k < len(e) else None for e in every]
        if any(a != at[0] for a in at):
            named = next(a for a in at if a is not None)
            held = "; ".join(f"rank {r}: " + ("absent" if a is None else
                                             f"{a[1]} {a[2]} {a[3]}")
                             for r, a in enumerate(at))
            raise RuntimeError(f"DistributedDataParallel: the ranks' modules differ at "
                               f"{named[0]} {named[1]!r} (entry {k}): {held}; every rank must "
                               f"wrap the same model (nothing was broadcast)")


class _Bucket:
    __slots__ = ("params", "ready", "flat", "pieces")

    def __init__(self, params: list):
        self.params = params
        self.ready: set = set()
        self.flat = None  # the bucket's gradients, flattened (kept from step to step)
        self.pieces: list = []  # per parameter: its span of ``flat``, in its shape (a view)

    def buffer(self, grads: list):
        """The flat buffer for ``grads`` (made, with its per-parameter views, on first use or
        when the gradients' sizes or dtype changed) and those views."""
        total = sum(g.numel() for g in grads)
        flat = self.flat
        if flat is None or flat.numel() != total or flat.dtype is not grads[0].dtype:
            flat = self.flat = F.empty(total, dtype=grads[0].dtype)
            self.pieces, off = [], 0
            for g in grads:
                k = g.numel()
                self.pieces.append(flat[off:off + k].reshape(tuple(g.shape)))
                off += k
        return flat, self.pieces


class DistributedDataParallel(Module):
    """Data parallel ``module``: rank 0's parameters are broadcast at construction (its
    buffers too, and again before each forward, when ``broadcast_buffers``); gradients are
    averaged across the ranks in buckets of at most ``bucket_size`` parameters while backward
    runs. ``no_sync()`` keeps gradients local (accumulation). ``self.module`` is the wrapped
    module (state dict keys start with ``module.``, as in PyTorch)."""

    def __init__(self, module: Module, broadcast_buffers: bool = True, bucket_size: int = 10,
                 use_bucket: bool = True):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got "
                            f"{type(module).__name__}")
        if bucket_size < 1:
            raise ValueError(f"DistributedDataParallel: bucket_size must be >= 1, got "
                             f"{bucket_size}")
        for name, p in module.named_parameters():
            if not p.is_local:
                raise ValueError(f"DistributedDataParallel: parameter {name!r} is a global "
                                 f"tensor; DDP replicates local modules (global parameters "
                                 f"already train data parallel)")
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self._world = world().size
        self._sync = True
        if self._world > 1:
            _check_replicas(module, self.broadcast_buffers)
        with no_grad():
            for p in module.parameters():
                _comm().broadcast(p, 0)
            if self.broadcast_buffers:  # (OneFlow's: without it, buffers stay as they are)
                self._broadcast_buffers()
        params = [p for p in dict.fromkeys(module.parameters()) if p.requires_grad]
        cap = bucket_size if use_bucket else 1
        self._buckets: list = []
        self._next = 0  # the next bucket to reduce
        self._in_backward = False  # a hook fired in the running backward
        for p in reversed(params):
            last = self._buckets[-1].params if self._buckets else None
            if last is None or len(last) >= cap or last[0].dtype is not p.dtype:
                self._buckets.append(_Bucket([]))
            self._buckets[-1].params.append(p)
        for b in self._buckets:
            for p in b.params:
                p.register_post_accumulate_grad_hook(self._hook(b, p))

    def __getattr__(self, name: str):
        """Attributes of the wrapped module too (``ddp.w``), as OneFlow's DDP, which returns
        the module itself."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("module")
            if module is None or name.startswith("__"):
                raise
            return getattr(module, name)

    def _broadcast_buffers(self) -> None:
        for b in self.module.buffers():
            if b is not None:
                _comm().broadcast(b, 0)

    def _hook(self, bucket: _Bucket, param):
        ref = weakref.ref(self)  # a wrapper that was dropped stops reducing

        def hook(_param) -> None:
            me = ref()
            if me is None or not me._sync or me._world == 1:
                return
            if not me._in_backward:  # the first final gradient of this backward
                me._in_backward = True
                engine.queue_callback(me._end_of_backward)
            bucket.ready.add(id(param))
            me._reduce_ready()

        return hook

    def _reduce_ready(self) -> None:
        """Reduce the buckets that are complete, in their fixed order, whatever order this
        rank's backward made them ready in, so every rank issues the same collectives in the
        same order."""
        buckets = self._buckets
        while self._next < len(buckets) and \
                len(buckets[self._next].ready) == len(buckets[self._next].params):
            done = buckets[self._next]
            done.ready.clear()
            self._next += 1
            _reduce(done, self._world)

    def _end_of_backward(self) -> None:
        """Parameters that got no gradient in this backward (unused on this rank) take part
        with zeros, as in OneFlow's DDP, so every bucket is reduced on every rank."""
        self._in_backward = False
        with no_grad():
            for b in self._buckets[self._next:]:
                for p in b.params:
                    if id(p) not in b.ready:
                        if p.grad is None:
                            p.grad = F.zeros_like(p)
                        b.ready.add(id(p))
            self._reduce_ready()
        self._next = 0

    @contextlib.contextmanager
    def no_sync(self):
        """Within the block, backward accumulates gradients locally without all-reducing
        them; the first backward after it averages the accumulated gradients."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def forward(self, *args, **kwargs):
        """Run the wrapped module (after broadcasting rank 0's buffers when asked)."""
        missing = [tuple(p.shape) for b in self._buckets if b.ready for p in b.params
                   if id(p) not in b.ready]
        for b in self._buckets:  # (a backward that raised leaves its state behind)
            b.ready.clear()
        self._next, self._in_backward = 0, False
        if missing:
            raise RuntimeError(
                f"DistributedDataParallel: the last backward stopped before every bucket was "
                f"all-reduced; {len(missing)} parameter(s) of shapes {missing} got no "
                f"gradient")
        if self.broadcast_buffers and self._world > 1:
            with no_grad():
                self._broadcast_buffers()
        return self.module(*args, **kwargs)


def _reduce(bucket: _Bucket, n: int) -> None:
    """Average the gradients of ``bucket``'s parameters over the ranks: copy them into the
    bucket's flat buffer, all-reduce it, scale it and copy it back, all on the communication
    worker. The buffer is kept from step to step: a fresh bucket-sized array per step costs
    more in page faults than its copy (measured on the MLP: ~1,700 faults per step); the VM
    orders the next step's copies in after this step's copies back. The views of the buffer
    (one per parameter, in its shape) are made with it, not per step."""
    grads = [p.grad for p in bucket.params]
    with no_grad():
        vm.push_worker(vm.pool().comm)
        try:
            flat, pieces = bucket.buffer(grads)
            for piece, g in zip(pieces, grads):
                piece.copy_(g)
        finally:
            vm.pop_worker()
        _comm()._all_reduce(flat, small=False)  # queued: backward goes on issuing meanwhile
        vm.push_worker(vm.pool().comm)
        try:
            flat.div_(float(n))  # in place
            for piece, g in zip(pieces, grads):
                g.copy_(piece)
        finally:
            vm.pop_worker()


__all__ = ["DistributedDataParallel"]
