"""Grad mode: whether ops record autograd nodes (per Python thread, as in PyTorch)."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    enabled = True
    inference = False
    backward_depth = 0  # > 0 while the engine runs gradient rules (lazy ops are tagged backward)
    grad_root = False  # True while backward() makes its seed gradient (lazy ops: grad_root)


_state = _State()


def is_grad_enabled() -> bool:
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _GradModeContext:
    """Base for context managers that also work as decorators."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return fn(*args, **kwargs)
        return wrapper

    _args: tuple = ()


class _NoArgsGradModeContext(_GradModeContext):
    """Also usable as a bare decorator: ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        if not callable(fn):
            raise TypeError(f"{cls.__name__}() takes no arguments (or a function to decorate)")
        return cls()(fn)

    def __init__(self, fn=None):
        pass


class no_grad(_NoArgsGradModeContext):
    """Disable gradient recording inside the block (context manager or decorator)."""

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = False

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False


class enable_grad(_NoArgsGradModeContext):
    """Enable gradient recording inside the block (context manager or decorator)."""

    def __enter__(self):
        self._prev = _state.enabled
        _state.enabled = True

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False


class set_grad_enabled(_GradModeContext):
    """Set grad mode: as a function call it takes effect at once; as a context it is scoped."""

    def __init__(self, mode: bool = True):
        self._args = (mode,)
        self._prev = _state.enabled
        _state.enabled = bool(mode)

    def __call__(self, fn):
        _state.enabled = self._prev  # used as a decorator: no effect until the call
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _state.enabled = self._prev
        return False


class inference_mode(_GradModeContext):
    """Like no_grad, for inference (``inference_mode(False)`` leaves grad mode as it is)."""

    def __new__(cls, mode=True):
        if callable(mode):  # used as a bare decorator: @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self._args = (mode,)
        self._mode = mode

    def __enter__(self):
        self._prev = (_state.enabled, _state.inference)
        if self._mode:
            _state.enabled = False
            _state.inference = True

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self._prev
        return False
