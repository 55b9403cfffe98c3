"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder."""
from __future__ import annotations

import copy
import math
from typing import Callable

import numpy as np

import actorflow.functional as flow_f
from actorflow.functional.creation import empty, tensor, zeros
from actorflow.nn import functional as F
from actorflow.nn import init
from actorflow.nn.module import Module
from actorflow.nn.modules.activation import Dropout
from actorflow.nn.modules.container import ModuleList
from actorflow.nn.modules.linear import Linear
from actorflow.nn.modules.normalization import LayerNorm
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


def _additive_mask(mask: Tensor | None, like: Tensor, name: str) -> Tensor | None:
    """A float mask to add to attention scores: bool ``True`` (masked out) becomes -inf."""
    if mask is None:
        return None
    if mask.dtype.is_floating_point:
        return mask.to(like.dtype)
    if mask.dtype.name != "bool":
        raise TypeError(f"MultiheadAttention: {name} must be a bool or float tensor, got "
                        f"{mask.dtype}")
    return zeros(tuple(mask.shape), dtype=like.dtype).masked_fill(mask, float("-inf"))


def _causal_mask(length: int, source: int, like: Tensor) -> Tensor:
    blocked = np.triu(np.ones((length, source), dtype=bool), k=1)
    return tensor(np.where(blocked, -np.inf, 0.0), dtype=like.dtype)


class NonDynamicallyQuantizableLinear(Linear):
    """The output projection of MultiheadAttention (a Linear; the name matches PyTorch's, so
    reprs agree)."""


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention with input and output projections.

    ``forward(query, key, value)`` takes ``(L, N, E)`` tensors (``(N, L, E)`` with
    ``batch_first``, or unbatched ``(L, E)``) and returns ``(output, weights)``; ``weights`` is
    None unless ``need_weights``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be positive, got "
                             f"{embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), dtype=dtype))
            self.bias_v = Parameter(empty((1, 1, embed_dim), dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform input projections, zero biases (the output weight keeps Linear's
        init); ``bias_k``/``bias_v`` xavier-normal."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple:
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple:
        """Attend from ``query`` to ``key``/``value``. Boolean masks mark blocked positions
        with True; float masks are added to the scores. ``is_causal`` without ``attn_mask``
        blocks attention to later positions."""
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif query.dim() != 3:
            raise ValueError(f"MultiheadAttention: query should be 2-D (unbatched) or 3-D, got "
                             f"shape {tuple(query.shape)}")
        if not self.batch_first or unbatched:  # work in (N, L, E)
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        n, tgt_len, e = query.shape
        if e != self.embed_dim:
            raise ValueError(f"MultiheadAttention: expected query embedding dim "
                             f"{self.embed_dim}, got shape {tuple(query.shape)}")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"MultiheadAttention: key shape {tuple(key.shape)} does not match "
                             f"value shape {tuple(value.shape)}")
        h, d = self.num_heads, self.head_dim
        kpm = _additive_mask(key_padding_mask, query, "key_padding_mask")
        am = _additive_mask(attn_mask, query, "attn_mask")
        if am is None and is_causal:
            am = _causal_mask(tgt_len, key.shape[1], query)

        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            k = flow_f.cat([k, self.bias_k.expand(n, 1, e)], dim=1)
            v = flow_f.cat([v, self.bias_v.expand(n, 1, e)], dim=1)
            am, kpm = _pad_last(am), _pad_last(kpm)
        q = q.reshape(n, tgt_len, h, d).transpose(1, 2)
        k = k.reshape(n, k.shape[1], h, d).transpose(1, 2)
        v = v.reshape(n, v.shape[1], h, d).transpose(1, 2)
        if self.add_zero_attn:
            k = flow_f.cat([k, zeros((n, h, 1, d), dtype=k.dtype)], dim=2)
            v = flow_f.cat([v, zeros((n, h, 1, d), dtype=v.dtype)], dim=2)
            am, kpm = _pad_last(am), _pad_last(kpm)
        src_len = k.shape[2]

        scores = flow_f.matmul(q * (1.0 / math.sqrt(d)), k.transpose(-2, -1))  # (N, H, L, S)
        if am is not None:
            if am.dim() == 2:
                want = (tgt_len, src_len)
            else:
                want = (n * h, tgt_len, src_len)
            if tuple(am.shape) != want:
                raise ValueError(f"MultiheadAttention: attn_mask should have shape {want}, got "
                                 f"{tuple(am.shape)}")
            scores = scores + (am if am.dim() == 2 else am.reshape(n, h, tgt_len, src_len))
        if kpm is not None:
            if tuple(kpm.shape) != (n, src_len):
                raise ValueError(f"MultiheadAttention: key_padding_mask should have shape "
                                 f"{(n, src_len)}, got {tuple(kpm.shape)}")
            scores = scores + kpm.reshape(n, 1, 1, src_len)
        weights = F.softmax(scores, dim=-1)
        if self.dropout > 0.0:
            weights = F.dropout(weights, self.dropout, self.training)
        out = flow_f.matmul(weights, v).transpose(1, 2).reshape(n, tgt_len, e)
        out = self.out_proj(out)
        if not self.batch_first or unbatched:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if unbatched:
            weights = weights.squeeze(0)
        return out, weights


def _pad_last(mask: Tensor | None) -> Tensor | None:
    """Append one zero (unmasked) column to an additive mask."""
    return None if mask is None else F.pad(mask, (0, 1))


def _activation(activation) -> Callable:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with dropout, a residual connection and
    layer norm (before the block with ``norm_first``, after it otherwise)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then an optional norm."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out
