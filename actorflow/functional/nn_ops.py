"""Neural-network functional API with ``torch.nn.functional`` signatures: linear, bmm,
softmax, log_softmax, dropout, embedding, scaled_dot_product_attention (+ Tensor.softmax,
Tensor.log_softmax, Tensor.bmm). Convolution, pooling and normalisation live in ``conv``,
``pool`` and ``normalization``."""
from __future__ import annotations

import math
import warnings

from actorflow.autograd import grad_mode
from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.elementwise import cast
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_LINEAR = registry.get("linear")
_MATMUL = registry.get("matmul")
_SOFTMAX = registry.get("softmax")
_LOG_SOFTMAX = registry.get("log_softmax")
_SOFTMAX_GRAD = registry.get("softmax_grad")
_LOG_SOFTMAX_GRAD = registry.get("log_softmax_grad")
_DROPOUT = registry.get("dropout")
_DROPOUT_GRAD = registry.get("dropout_grad")
_EMBEDDING = registry.get("embedding")
_EMBEDDING_GRAD = registry.get("embedding_grad")
_EMBEDDING_RENORM = registry.get("embedding_renorm")
_SDPA = registry.get("scaled_dot_product_attention")
_SDPA_GRAD = registry.get("scaled_dot_product_attention_grad")
_NO_ATTRS: dict = {}


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""
    ins = [input, weight] if bias is None else [input, weight, bias]
    return apply(_LINEAR, ins, _NO_ATTRS)[0]


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting)."""
    a, b = input._shape, mat2._shape
    if len(a) != 3 or len(b) != 3:
        raise ValueError(f"bmm: both arguments must be 3-d, got shapes {tuple(a)} and "
                         f"{tuple(b)}")
    if a[0] != b[0] or a[2] != b[1]:
        raise ValueError(f"bmm: shapes {tuple(a)} and {tuple(b)} don't fit (batch sizes must "
                         f"match and input.shape[2] must equal mat2.shape[1])")
    return apply(_MATMUL, [input, mat2], {"transpose_a": False, "transpose_b": False})[0]


def _softmax_dim(name: str, x: Tensor, dim) -> int:
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                      f"call to include dim=X as an argument.", UserWarning, stacklevel=3)
        return 0 if len(x._shape) in (0, 1, 3) else 1
    return int(dim)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed stably); ``dtype`` casts first."""
    if dtype is not None:
        input = cast(input, dt.as_dtype(dtype))
    dim = _softmax_dim("softmax", input, dim)
    return apply(_SOFTMAX, [input], {"dim": dim, "safe": False})[0]


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """``x - logsumexp(x)`` along ``dim`` (computed stably); ``dtype`` casts first."""
    if dtype is not None:
        input = cast(input, dt.as_dtype(dtype))
    dim = _softmax_dim("log_softmax", input, dim)
    return apply(_LOG_SOFTMAX, [input], {"dim": dim})[0]


def softmax_grad(dout: Tensor, y: Tensor, dim: int) -> Tensor:
    """Gradient of softmax along ``dim`` given its output ``y``."""
    return apply(_SOFTMAX_GRAD, [dout, y], {"dim": int(dim)})[0]


def log_softmax_grad(dout: Tensor, y: Tensor, dim: int) -> Tensor:
    """Gradient of log_softmax along ``dim`` given its output ``y``."""
    return apply(_LOG_SOFTMAX_GRAD, [dout, y], {"dim": int(dim)})[0]


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False, generator=None, addend: Tensor | None = None) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by ``1/(1-p)`` (training only),
    then add ``addend`` if given (OneFlow's fused residual).

    The mask comes from ``generator`` or the global one (``flow.manual_seed`` makes it
    reproducible)."""
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input if addend is None else input + addend
    attrs = {"p": p}
    if generator is not None:
        attrs["seed"] = generator.next_seed()
    if inplace:
        from actorflow.functional.creation import empty
        mask = empty(tuple(input._shape), dtype=dt.bool_)
        out = apply(_DROPOUT, [input], attrs, out=[input, mask])[0]
    else:
        out = apply(_DROPOUT, [input], attrs)[0]
    return out if addend is None else out + addend


def dropout_grad(dout: Tensor, mask: Tensor, scale: float) -> Tensor:
    """``dout * mask * scale``: the gradient of dropout."""
    return apply(_DROPOUT_GRAD, [dout, mask], {"scale": float(scale)})[0]


class PaddingIndexError(ValueError, AssertionError):
    """A ``padding_idx`` outside ``[-num_embeddings, num_embeddings)``. Both a ValueError and,
    as PyTorch's and OneFlow's ``assert`` raise, an AssertionError."""


def check_padding_idx(who: str, padding_idx: int, n: int) -> int:
    """``padding_idx`` as an index in ``[0, n)``; raises PaddingIndexError naming ``who``."""
    padding_idx = int(padding_idx)
    if not -n <= padding_idx < n:
        raise PaddingIndexError(f"{who}: padding_idx {padding_idx} must be within "
                                f"num_embeddings ({n})")
    return padding_idx % n


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) at the integer ``input`` indices.

    ``padding_idx``'s row gets no gradient; ``max_norm`` renormalises the used rows of
    ``weight`` in place first. Gradients are always dense (``sparse`` is accepted for
    compatibility)."""
    n = weight._shape[0] if len(weight._shape) == 2 else 0
    if padding_idx is not None:
        padding_idx = check_padding_idx("embedding", padding_idx, n)
    if max_norm is not None:
        with grad_mode.no_grad():
            apply(_EMBEDDING_RENORM, [weight, input],
                  {"max_norm": float(max_norm), "norm_type": float(norm_type)}, out=[weight])
    return apply(_EMBEDDING, [input, weight], {"padding_idx": padding_idx,
                                               "scale_grad_by_freq": bool(scale_grad_by_freq)})[0]


def embedding_grad(dout: Tensor, indices: Tensor, num_weights: int, padding_idx: int | None,
                   scale_grad_by_freq: bool = False) -> Tensor:
    """Gradient of embedding with respect to its (num_weights, dim) weight."""
    return apply(_EMBEDDING_GRAD, [dout, indices],
                 {"num_weights": int(num_weights), "padding_idx": padding_idx,
                  "scale_grad_by_freq": bool(scale_grad_by_freq)})[0]


def _repeat_heads(t: Tensor, reps: int) -> Tensor:
    """(..., H, S, E) -> (..., H * reps, S, E), each head repeated ``reps`` times in a row."""
    from actorflow.functional.elementwise import expand
    from actorflow.functional.shape import reshape
    s = tuple(t._shape)
    t = reshape(t, s[:-2] + (1,) + s[-2:])
    t = expand(t, s[:-3] + (s[-3], reps) + s[-2:])
    return reshape(t, s[:-3] + (s[-3] * reps,) + s[-2:])


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` over (..., L, E) / (..., S, E) tensors.

    ``attn_mask``: boolean (True = may attend) or float (added to the scores), broadcasting
    to (..., L, S). ``is_causal`` masks keys after each query (top-left aligned). Rows with no
    allowed key give zeros. ``dropout_p`` drops attention weights (always, like PyTorch).
    Without dropout this is one fused op (and one fused gradient op)."""
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, "
                         "not both")
    qs, ks, vs = query._shape, key._shape, value._shape
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ValueError(f"scaled_dot_product_attention: query, key and value need at least 2 "
                         f"dims, got {tuple(qs)}, {tuple(ks)}, {tuple(vs)}")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise ValueError(f"scaled_dot_product_attention: shapes don't fit: query {tuple(qs)}, "
                         f"key {tuple(ks)}, value {tuple(vs)} (need query/key embedding dims "
                         f"and key/value lengths to match)")
    if enable_gqa and len(qs) >= 3 and ks[-3] != qs[-3]:
        if qs[-3] % ks[-3] or ks[-3] != vs[-3]:
            raise ValueError(f"scaled_dot_product_attention: {qs[-3]} query heads can't share "
                             f"{ks[-3]} key / {vs[-3]} value heads")
        key = _repeat_heads(key, qs[-3] // ks[-3])
        value = _repeat_heads(value, qs[-3] // vs[-3])
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    dropout_p = float(dropout_p)
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout probability has to be between "
                         f"0 and 1, but got {dropout_p}")
    if dropout_p > 0.0:
        return _sdpa_composite(query, key, value, attn_mask, dropout_p, is_causal, scale)
    ins = [query, key, value] if attn_mask is None else [query, key, value, attn_mask]
    return apply(_SDPA, ins, {"scale": scale, "is_causal": bool(is_causal)})[0]


def _sdpa_composite(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
                    dropout_p: float, is_causal: bool, scale: float) -> Tensor:
    """Attention from separate ops (matmul, mask, softmax, dropout, matmul): the path for
    ``dropout_p > 0``, which the fused op does not take."""
    import actorflow.functional as F
    L, S = query._shape[-2], key._shape[-2]
    scores = F.mul(apply(_MATMUL, [query, key], {"transpose_a": False, "transpose_b": True})[0],
                   scale)
    if is_causal:
        future = F.triu(F.ones(L, S, dtype=dt.bool_), 1)
        scores = F.masked_fill(scores, future, -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype is dt.bool_:
            scores = F.masked_fill(scores, F.logical_not(attn_mask), -math.inf)
        else:
            scores = F.add(scores, attn_mask)
    attn = apply(_SOFTMAX, [scores], {"dim": -1, "safe": True})[0]
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return apply(_MATMUL, [attn, value], {"transpose_a": False, "transpose_b": False})[0]


def scaled_dot_product_attention_grad(dout: Tensor | None, query: Tensor, key: Tensor,
                                      value: Tensor, probs: Tensor, out: Tensor, scale: float,
                                      mask: Tensor | None = None, dprobs: Tensor | None = None,
                                      needs_input_grad: tuple = (True, True, True, True)
                                      ) -> tuple:
    """(dquery, dkey, dvalue, dmask) of scaled_dot_product_attention from its saved ``probs``
    and ``out``.

    ``dout`` / ``dprobs`` are the gradients arriving at the output and at ``probs`` (either
    may be None). ``dmask`` is None unless ``mask`` is an additive (non-boolean) mask and
    ``needs_input_grad[3]``; other entries are None where ``needs_input_grad`` says so. When
    grad mode is on and an argument requires grad (``create_graph=True``), the result is built
    from differentiable ops, so it can be differentiated again; otherwise it is one fused op."""
    need = tuple(bool(n) for n in needs_input_grad) + (False,) * (4 - len(needs_input_grad))
    want_mask = mask is not None and mask.dtype is not dt.bool_ and need[3]
    if dout is None and dprobs is None:
        return None, None, None, None
    args = [t for t in (dout, query, key, value, probs, dprobs) if t is not None]
    if grad_mode.is_grad_enabled() and any(t.requires_grad for t in args):
        return _sdpa_grad_composite(dout, query, key, value, probs, float(scale),
                                    mask if want_mask else None, dprobs, need)
    if dout is None:
        from actorflow.functional.creation import zeros_like
        dout = zeros_like(out)  # (global where out is)
    attrs = {"scale": float(scale), "needs": need[:3], "has_dprobs": dprobs is not None,
             "mask_shape": tuple(mask._shape) if want_mask else None}
    ins = [dout, query, key, value, probs, out] + ([dprobs] if dprobs is not None else [])
    grads = apply(_SDPA_GRAD, ins, attrs)
    return tuple(g if n else None for g, n in zip(grads[:3], need)) + \
        (grads[3] if want_mask else None,)


def _sdpa_grad_composite(dout, query, key, value, probs, scale, mask, dprobs, need) -> tuple:
    """The gradient of attention from differentiable functional ops (double backward)."""
    import actorflow.functional as F
    dq = dk = dv = dmask = None
    ds = None
    if dout is not None:
        if need[2]:
            dv = F.sum_to(F.matmul(probs, dout, transpose_a=True), value._shape)
        ds = F.sum_to(F.matmul(dout, value, transpose_b=True), probs._shape)
    if dprobs is not None:
        ds = dprobs if ds is None else F.add(ds, dprobs)
    ds = softmax_grad(ds, probs, -1)
    if need[0]:
        dq = F.mul(F.sum_to(F.matmul(ds, key), query._shape), scale)
    if need[1]:
        dk = F.mul(F.sum_to(F.matmul(ds, query, transpose_a=True), key._shape), scale)
    if mask is not None:
        dmask = F.sum_to(ds, mask._shape)
    return dq, dk, dv, dmask


def _tensor_softmax(self: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    return softmax(self, dim, dtype=dtype)


def _tensor_log_softmax(self: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    return log_softmax(self, dim, dtype=dtype)


register_tensor_methods({"softmax": _tensor_softmax, "log_softmax": _tensor_log_softmax,
                         "bmm": bmm})

__all__ = ["linear", "bmm", "softmax", "log_softmax", "softmax_grad", "log_softmax_grad",
           "dropout", "dropout_grad", "embedding", "embedding_grad",
           "scaled_dot_product_attention", "scaled_dot_product_attention_grad"]
