"""Eager autocast: the thread's autocast state and the casts ``dispatch.apply`` inserts.

The state is OneFlow's (``oneflow/core/framework/autocast.cpp``), one per thread: whether
autocast is on, the device type the current region names (``"cuda"`` by default, as OneFlow),
the low precision dtype of each device type (CPU: bfloat16, CUDA: float16), whether leaf casts
are cached, the nesting depth of ``flow.autocast`` regions and the cache itself. The user-facing
region is ``flow.autocast`` (``actorflow/autocast_mode.py``).

While autocast is on for the CPU, ``apply`` hands every op call to ``cast_inputs`` *on the
calling thread* (eager kernels run later on VM workers; the decision is made at dispatch, so
the workers' own thread state never matters). The op's registry record says what happens, the
same ``amp`` class the graph AMP pass reads (``passes/amp.py``):

* ``"allow"`` (matmul, linear, convolutions): floating inputs go to the low precision dtype;
* ``"deny"`` (losses, softmax, norms, reductions, exp/log ...), and ops that write an input in
  place: half-precision inputs go to float32 (the written inputs stay as they are);
* ``"follow"``: nothing is cast, the op's own type promotion gives the widest input type; if
  its inference rejects the mix of precisions, the half inputs go to float32 (the graph pass's
  fallback).

Only float32/float16/bfloat16 inputs are cast (float64, integers and bools never are; nor
meta tensors); calls writing into ``out=`` tensors are left alone. Casts are ordinary ``cast``
ops through ``apply``, so autograd records them and gradients come back in each input's dtype,
and in an ``nn.Graph`` trace they become cast ops of the Job.

The cache (``cache_enabled``): a float32 leaf that requires grad, cast to the low precision
dtype with grad mode on, is cast once per region and the cast reused (a weight read by several
ops); an entry is dropped when the leaf is written in place (its version changes) or dies.
"""
from __future__ import annotations

import threading
import weakref

from actorflow.autograd import grad_mode
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.tensor import DeviceMetaBlob

_HALF = (dt.float16, dt.bfloat16)
_ELIGIBLE = (dt.float32, dt.float16, dt.bfloat16)
_CAST = registry.get("cast")
DEVICE_TYPES = ("cpu", "cuda")


class _State(threading.local):
    """One thread's autocast state (OneFlow's thread-local defaults)."""

    def __init__(self):
        self.enabled = False
        self.device_type = "cuda"
        self.dtype = dt.float16          # the current region's low precision dtype
        self.cpu_dtype = dt.bfloat16
        self.gpu_dtype = dt.float16
        self.cache_enabled = True
        self.nesting = 0
        self.saved: list = []            # states the open regions replaced, innermost last
        self.cache: dict = {}            # (id(leaf), dtype) -> (weakref(leaf), version, cast)


state = _State()


def check_low_dtype(what: str, d) -> dt.dtype:
    """``d`` as a dtype, which must be float16 or bfloat16 (else a ValueError naming ``what``)."""
    d = dt.as_dtype(d)
    if d not in _HALF:
        raise ValueError(f"{what}: the autocast dtype must be float16 or bfloat16, got {d}")
    return d


def is_enabled() -> bool:
    """Whether autocast is on for this thread (in the current region's device type)."""
    return state.enabled


def set_enabled(enabled: bool) -> None:
    """Turn this thread's autocast on or off (the device type stays the current one)."""
    state.enabled = bool(enabled)


def get_cpu_dtype() -> dt.dtype:
    """This thread's CPU autocast dtype (bfloat16 unless set)."""
    return state.cpu_dtype


def get_gpu_dtype() -> dt.dtype:
    """This thread's CUDA autocast dtype (float16 unless set)."""
    return state.gpu_dtype


def set_cpu_dtype(dtype) -> None:
    """Set this thread's CPU autocast dtype (float16 or bfloat16)."""
    state.cpu_dtype = check_low_dtype("set_autocast_cpu_dtype", dtype)
    if state.device_type == "cpu":
        state.dtype = state.cpu_dtype


def set_gpu_dtype(dtype) -> None:
    """Set this thread's CUDA autocast dtype (float16 or bfloat16)."""
    state.gpu_dtype = check_low_dtype("set_autocast_gpu_dtype", dtype)
    if state.device_type == "cuda":
        state.dtype = state.gpu_dtype


def is_cache_enabled() -> bool:
    """Whether casts of leaf tensors are cached on this thread."""
    return state.cache_enabled


def set_cache_enabled(enabled: bool) -> None:
    """Turn this thread's cast cache on or off."""
    state.cache_enabled = bool(enabled)


def clear_cache() -> None:
    """Forget this thread's cached casts."""
    state.cache.clear()


def enter(device_type: str, dtype, enabled: bool, cache_enabled: bool) -> None:
    """Open a region: save this thread's state and set the region's (``flow.autocast``)."""
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"autocast: device_type must be 'cuda' or 'cpu', got {device_type!r}")
    s = state
    s.saved.append((s.enabled, s.cache_enabled, s.device_type, s.dtype, s.cpu_dtype,
                    s.gpu_dtype))
    s.nesting += 1
    s.enabled, s.cache_enabled, s.device_type, s.dtype = enabled, cache_enabled, device_type, dtype
    if device_type == "cpu":
        s.cpu_dtype = dtype
    else:
        s.gpu_dtype = dtype


def leave() -> None:
    """Close the innermost region: restore the state it replaced; leaving the outermost one
    for a disabled state (or one without the cache) clears the cache, as OneFlow does."""
    s = state
    if not s.saved:
        raise RuntimeError("autocast: leaving a region that was never entered on this thread")
    (s.enabled, s.cache_enabled, s.device_type, s.dtype, s.cpu_dtype,
     s.gpu_dtype) = s.saved.pop()
    s.nesting -= 1
    if s.nesting == 0 and (not s.enabled or not s.cache_enabled):
        s.cache.clear()


def _eligible(t) -> bool:
    return t.dtype in _ELIGIBLE and type(t._h) is not DeviceMetaBlob


def cast_inputs(op, inputs: list, attrs: dict) -> list:
    """``inputs`` with the casts autocast gives a call of ``op`` with ``attrs`` (see the module
    docstring); the same list when nothing is cast."""
    if op is _CAST:
        return inputs
    mutated = op.mutated_inputs(len(inputs), attrs)
    kind = "deny" if mutated else op.amp
    if kind == "allow":
        low = state.dtype
        if not any(t.dtype is not low and _eligible(t) for t in inputs):
            return inputs
        return [_cast(t, low) if t.dtype is not low and _eligible(t) else t for t in inputs]
    if kind == "deny":
        if not any(t.dtype in _HALF for t in inputs):
            return inputs
        return [_cast(t, dt.float32) if t.dtype in _HALF and i not in mutated and _eligible(t)
                else t for i, t in enumerate(inputs)]
    return _follow(op, inputs, attrs)


def _follow(op, inputs: list, attrs: dict) -> list:
    """A ``"follow"`` op's inputs: unchanged, unless they mix precisions its inference rejects;
    then the half-precision ones are cast to float32."""
    if op.infer_fn is None or len({t.dtype for t in inputs if _eligible(t)}) < 2:
        return inputs
    try:
        op.infer_fn(inputs, attrs)
        return inputs
    except Exception:  # the op doesn't take this mix: run it in float32
        return [_cast(t, dt.float32) if t.dtype in _HALF and _eligible(t) else t
                for t in inputs]


def _cast(t, to):
    from actorflow.dispatch import apply  # same package: the cast is an ordinary op call

    s = state
    cacheable = (s.cache_enabled and to is s.dtype and t.dtype is dt.float32 and t.requires_grad
                 and t.grad_fn is None and grad_mode._state.enabled)
    if not cacheable:
        return apply(_CAST, [t], {"dtype": to})[0]
    key = (id(t), to)
    hit = s.cache.get(key)
    if hit is not None and hit[0]() is t and hit[1] == t._version:
        return hit[2]
    c = apply(_CAST, [t], {"dtype": to})[0]
    s.cache[key] = (weakref.ref(t), t._version, c)
    return c
