"""The meta interpreter: ops on tensors of the ``meta`` device run shape and dtype inference
only; the results are meta tensors (no data, no kernel, no VM instruction).

``dispatch.apply`` picks it when an input, or a tensor written in place, is a meta tensor. A
meta tensor may take CPU inputs (``meta.copy_(cpu)``, as PyTorch: nothing is copied), but
meta values can't be written into a CPU tensor. Autograd records as usual, so a backward
through meta tensors yields meta gradients. Creation functions called with ``device="meta"``
run their ops under this interpreter (``creating_on``).
"""
from __future__ import annotations

import functools

from actorflow.dispatch.common import check_inplace, infer
from actorflow.framework.device import is_meta
from actorflow.ops.registry import Op
from actorflow.scope import interpreter_scope
from actorflow.tensor import DeviceMetaBlob, Tensor, meta_tensor


class MetaInterpreter:
    """Runs inference only; every result is a meta tensor."""

    def apply(self, op: Op, inputs: list, attrs: dict, out: list | None, record: bool):
        """``(results, node inputs, node outputs, None)``: see ``actorflow.dispatch.apply``."""
        metas = infer(op, inputs, attrs)
        if out is not None:
            for t in out:
                if type(t._h) is not DeviceMetaBlob:
                    raise RuntimeError(
                        f"{op.name}: can't write the result of an op on meta tensors into a "
                        f"tensor on the cpu device (shape {tuple(t._shape)})")
            check_inplace(op, inputs, out, metas, record)
            for t in out:
                t._vc[0] += 1
            return list(out), inputs, list(out), None
        results = [meta_tensor(shape, d) for shape, d in metas]
        return results, inputs, results, None

    def old_identity(self, t: Tensor) -> Tensor:
        """In-place rules that need the old values get a meta tensor of the same metadata."""
        return meta_tensor(t._shape, t.dtype)


META = MetaInterpreter()


def creating_on(fn):
    """Wrap a creation function: with ``device="meta"`` (or, for ``*_like`` functions without a
    device, a meta tensor to imitate) its ops run under the meta interpreter and the result
    is a meta tensor."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        device = kwargs.get("device")
        if device is None and args and isinstance(args[0], Tensor) \
                and type(args[0]._h) is DeviceMetaBlob:
            device = kwargs["device"] = "meta"
        if not is_meta(device):
            return fn(*args, **kwargs)
        kwargs["device"] = None
        with interpreter_scope(META):
            t = fn(*args, **kwargs)
        if type(t._h) is not DeviceMetaBlob:  # made from data, not by an op
            rg = t.requires_grad
            t = meta_tensor(t._shape, t.dtype)
            t.requires_grad = rg
        return t
    return wrapper
