"""A hand-written NumPy training step of the GPT example (examples/gpt.py), the reference floor
for a NumPy backend in the benchmarks.

``NumpyGPT`` holds float32 copies of a GPT's parameters and runs forward, a hand-derived
backward and an AdamW update (actorflow's / PyTorch's form: decoupled decay
``p *= 1 - lr * weight_decay``, bias-corrected moments) with plain NumPy. It is written for speed
the way a NumPy programmer would: float32 throughout, batched ``np.matmul`` over (batch, head),
``out=`` into buffers allocated once per batch shape, row sums as matrix-vector products, and all
parameters (and their gradients and moments) are views of one flat buffer, so the optimizer step
is a handful of whole-buffer operations. Dropout is not modelled (the benchmark runs with
dropout 0).
"""
from __future__ import annotations

import math

import numpy as np

_F32 = np.float32

# Abramowitz & Stegun 7.1.26: erf(x) = 1 - t*(a1 + t*(a2 + ... + t*a5)) * exp(-x^2),
# t = 1 / (1 + p*x) for x >= 0; absolute error <= 1.5e-7.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

_BLOCK_KEYS = ("ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
               "attn.proj.bias", "ln2.weight", "ln2.bias", "mlp.0.weight", "mlp.0.bias",
               "mlp.2.weight", "mlp.2.bias")


def gelu_forward(u: np.ndarray, out: np.ndarray, cdf: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU of float32 ``u`` into ``out``; also leaves ``Phi(u)`` in ``cdf`` and
    ``exp(-u^2/2)`` in ``e``, which give the derivative in ``gelu_backward``."""
    a1, a2, a3, a4, a5 = (_F32(a) for a in _AS_A)
    t = out  # scratch until the last line
    np.abs(u, out=t)
    t *= _F32(_AS_P * _INV_SQRT2)
    t += _F32(1.0)
    np.reciprocal(t, out=t)
    np.multiply(t, a5, out=cdf)
    for a in (a4, a3, a2, a1):
        cdf += a
        cdf *= t
    np.square(u, out=e)
    e *= _F32(-0.5)
    np.exp(e, out=e)
    # cdf * e / 2 = Phi(-|u|); Phi(u) = 1/2 + sign(u) * (1/2 - Phi(-|u|))
    cdf *= e
    cdf *= _F32(0.5)
    np.subtract(_F32(0.5), cdf, out=t)
    np.copysign(t, u, out=cdf)
    cdf += _F32(0.5)
    return np.multiply(u, cdf, out=out)


def gelu_backward(dy: np.ndarray, u: np.ndarray, cdf: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``dy * gelu'(u)`` into ``dy``, from ``gelu_forward``'s ``cdf`` and ``e``; ``e`` is
    overwritten."""
    e *= u
    e *= _F32(_INV_SQRT_2PI)
    e += cdf
    dy *= e
    return dy


def _ln_forward(x, w, b, eps, y, xhat, rstd, row, mean_c):
    """LayerNorm over the last axis of (N, C) ``x`` into ``y``, keeping ``xhat`` and ``rstd``
    (N, 1) for the backward; ``row`` is (N, 1) scratch, ``mean_c`` the (C, 1) column 1/C."""
    # row means as a matrix-vector product: BLAS beats NumPy's reduction over a short axis
    np.matmul(x, mean_c, out=row)
    np.subtract(x, row, out=xhat)
    np.square(xhat, out=y)
    np.matmul(y, mean_c, out=rstd)
    rstd += _F32(eps)
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    xhat *= rstd
    np.multiply(xhat, w, out=y)
    y += b
    return y


def _ln_backward(dy, xhat, rstd, w, gw, gb, tmp, row, mean_c):
    """LayerNorm backward in place: writes ``gw``/``gb`` and turns ``dy`` into dL/dx
    (``xhat`` and the (N, C) / (N, 1) scratch ``tmp`` / ``row`` are overwritten)."""
    dy.sum(axis=0, out=gb)
    np.multiply(dy, xhat, out=tmp)
    tmp.sum(axis=0, out=gw)
    # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w
    tmp *= w
    np.matmul(tmp, mean_c, out=row)
    xhat *= row
    dy *= w
    np.matmul(dy, mean_c, out=row)
    dy -= row
    dy -= xhat
    dy *= rstd
    return dy


def _linear(x, w, b, out):
    """``x @ w.T + b`` into ``out`` for (N, in) ``x``."""
    np.matmul(x, w.T, out=out)
    out += b
    return out


def _linear_backward(dy, x, w, gw, gb, dx):
    """Writes ``gw = dy.T @ x``, ``gb = dy.sum(0)`` and ``dx = dy @ w``."""
    np.matmul(dy.T, x, out=gw)
    dy.sum(axis=0, out=gb)
    return np.matmul(dy, w, out=dx)


class _Workspace:
    """Every activation and scratch array of one (B, T) batch shape, allocated once: fresh
    megabyte-sized arrays each step would cost page faults on every call."""

    def __init__(self, B: int, T: int, C: int, H: int, V: int, n_layer: int):
        N, hs, e = B * T, C // H, np.empty
        self.shape = (B, T)
        self.layers = [dict(h1=e((N, C), _F32), xhat1=e((N, C), _F32), rstd1=e((N, 1), _F32),
                            heads=e((3, B, H, T, hs), _F32), att=e((B, H, T, T), _F32),
                            y=e((N, C), _F32), h2=e((N, C), _F32), xhat2=e((N, C), _F32),
                            rstd2=e((N, 1), _F32), u=e((N, 4 * C), _F32),
                            a=e((N, 4 * C), _F32), cdf=e((N, 4 * C), _F32),
                            e=e((N, 4 * C), _F32)) for _ in range(n_layer)]
        self.x, self.xf, self.xhatf = e((N, C), _F32), e((N, C), _F32), e((N, C), _F32)
        self.rstdf, self.row = e((N, 1), _F32), e((N, 1), _F32)
        self.qkv, self.nc = e((N, 3 * C), _F32), e((N, C), _F32)
        self.nc2, self.n4c = e((N, C), _F32), e((N, 4 * C), _F32)
        self.att_row = e((B, H, T, 1), _F32)
        self.datt = e((B, H, T, T), _F32)
        self.dheads = e((B, T, 3, H, hs), _F32)
        self.logits, self.onehot = e((N, V), _F32), np.zeros((N, V), _F32)
        self.vc = e((V, C), _F32)
        self.rows = np.arange(N)
        self.mean_c = np.full((C, 1), 1.0 / C, _F32)
        self.ones_t, self.ones_v = np.ones((T, 1), _F32), np.ones((V, 1), _F32)


class NumpyGPT:
    """examples/gpt.py's GPT (dropout 0) trained with AdamW, in plain NumPy.

    ``params`` maps the GPT's state-dict names to arrays (copied to float32); a state without
    ``head.weight`` has the tied head ``logits = x @ tok_emb.weight.T``. ``lr``, ``betas``,
    ``eps`` and ``weight_decay`` are AdamW's, with actorflow's defaults; ``ln_eps`` is
    LayerNorm's epsilon.
    """

    def __init__(self, params: dict, n_head: int, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, ln_eps: float = 1e-5):
        n_layer = 0
        while f"blocks.{n_layer}.ln1.weight" in params:
            n_layer += 1
        required = (["tok_emb.weight", "pos_emb.weight", "ln_f.weight", "ln_f.bias"]
                    + [f"blocks.{i}.{k}" for i in range(n_layer) for k in _BLOCK_KEYS])
        missing = [k for k in required if k not in params]
        extra = [k for k in params if k not in required and k != "head.weight"]
        if missing or extra or n_layer == 0:
            raise ValueError(f"NumpyGPT: not a GPT state dict (missing {missing}, "
                             f"unexpected {extra}, {n_layer} blocks)")
        arrays = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
                  for k, v in params.items()}
        if arrays["tok_emb.weight"].ndim != 2:
            raise ValueError(f"NumpyGPT: tok_emb.weight must be (vocab, n_embd), got shape "
                             f"{arrays['tok_emb.weight'].shape}")
        V, C = arrays["tok_emb.weight"].shape
        if n_head <= 0 or C % n_head:
            raise ValueError(f"NumpyGPT: n_embd {C} is not divisible by n_head {n_head}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0 or lr < 0 or eps < 0 \
                or weight_decay < 0:
            raise ValueError(f"NumpyGPT: invalid AdamW hyper-parameters lr={lr}, "
                             f"betas={betas}, eps={eps}, weight_decay={weight_decay}")
        self.n_layer, self.n_head, self.vocab_size, self.n_embd = n_layer, n_head, V, C
        self.block_size = arrays["pos_emb.weight"].shape[0]
        self.tied = "head.weight" not in arrays
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.ln_eps = ln_eps
        self.steps_done = 0
        # parameters, gradients and both moments are views of one flat float32 buffer each
        order = required + ([] if self.tied else ["head.weight"])
        total = sum(arrays[k].size for k in order)
        self._flat = np.empty(total, _F32)
        self._flat_grad = np.zeros(total, _F32)
        self._m = np.zeros(total, _F32)
        self._v = np.zeros(total, _F32)
        self._tmp = np.empty(total, _F32)
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        off = 0
        for k in order:
            a = arrays[k]
            self.params[k] = self._flat[off:off + a.size].reshape(a.shape)
            self.params[k][...] = a
            self.grads[k] = self._flat_grad[off:off + a.size].reshape(a.shape)
            off += a.size
        self._check_shapes()
        self._masks: dict[int, np.ndarray] = {}
        self._ws: _Workspace | None = None

    @classmethod
    def from_state_dict(cls, state: dict, n_head: int, **adamw) -> NumpyGPT:
        """Build from a GPT's ``state_dict()`` (actorflow tensors or arrays)."""
        return cls(state, n_head, **adamw)

    def _check_shapes(self) -> None:
        V, C, p = self.vocab_size, self.n_embd, self.params
        want = {"ln_f.weight": (C,), "ln_f.bias": (C,), "pos_emb.weight": (self.block_size, C)}
        if not self.tied:
            want["head.weight"] = (V, C)
        for i in range(self.n_layer):
            for k, s in zip(_BLOCK_KEYS, [(C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,),
                                          (C,), (4 * C, C), (4 * C,), (C, 4 * C), (C,)]):
                want[f"blocks.{i}.{k}"] = s
        for k, s in want.items():
            if p[k].shape != s:
                raise ValueError(f"NumpyGPT: {k} has shape {p[k].shape}, expected {s} "
                                 f"(vocab {V}, n_embd {C})")

    def _mask(self, T: int) -> np.ndarray:
        m = self._masks.get(T)
        if m is None:
            m = np.triu(np.full((T, T), -np.inf, _F32), 1)
            self._masks[T] = m
        return m

    def _check_batch(self, idx, targets) -> tuple[np.ndarray, np.ndarray]:
        idx, targets = np.asarray(idx), np.asarray(targets)
        if idx.ndim != 2 or targets.shape != idx.shape:
            raise ValueError(f"NumpyGPT: idx and targets must both be (B, T), got {idx.shape} "
                             f"and {targets.shape}")
        if idx.dtype.kind not in "iu" or targets.dtype.kind not in "iu":
            raise ValueError(f"NumpyGPT: idx and targets must be integer arrays, got "
                             f"{idx.dtype} and {targets.dtype}")
        if not 0 < idx.shape[1] <= self.block_size or idx.shape[0] == 0:
            raise ValueError(f"NumpyGPT: batch shape {idx.shape} is empty or exceeds "
                             f"block_size {self.block_size}")
        for name, a in (("idx", idx), ("targets", targets)):
            if a.min() < 0 or a.max() >= self.vocab_size:
                raise ValueError(f"NumpyGPT: {name} has values outside [0, {self.vocab_size})")
        return idx, targets

    def _workspace(self, B: int, T: int) -> _Workspace:
        """The buffers for this batch shape (only the latest shape's are kept)."""
        if self._ws is None or self._ws.shape != (B, T):
            self._ws = _Workspace(B, T, self.n_embd, self.n_head, self.vocab_size,
                                  self.n_layer)
        return self._ws

    def loss_and_grads(self, idx, targets) -> tuple[float, dict[str, np.ndarray]]:
        """Mean cross-entropy of next-token prediction and its gradient per parameter name.
        The gradient arrays are reused (overwritten) by the next call."""
        idx, targets = self._check_batch(idx, targets)
        p, g = self.params, self.grads
        B, T = idx.shape
        C, H = self.n_embd, self.n_head
        hs, N = C // H, B * T
        scale = _F32(1.0 / math.sqrt(hs))
        mask = self._mask(T)
        ws = self._workspace(B, T)
        rows, row, mc = ws.rows, ws.row, ws.mean_c
        flat_idx, flat_t = idx.reshape(N), targets.reshape(N)
        wte = p["tok_emb.weight"]

        # ---- forward
        x = ws.x
        np.take(wte, flat_idx, axis=0, out=x)
        x.reshape(B, T, C)[...] += p["pos_emb.weight"][:T]
        for i, L in enumerate(ws.layers):
            pre = f"blocks.{i}."
            h1 = _ln_forward(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"], self.ln_eps,
                             L["h1"], L["xhat1"], L["rstd1"], row, mc)
            qkv = _linear(h1, p[pre + "attn.qkv.weight"], p[pre + "attn.qkv.bias"], ws.qkv)
            # heads: (3, B, H, T, hs), contiguous; q is pre-scaled by 1/sqrt(hs)
            heads, att = L["heads"], L["att"]
            heads[...] = qkv.reshape(B, T, 3, H, hs).transpose(2, 0, 3, 1, 4)
            q, k, v = heads[0], heads[1], heads[2]
            q *= scale
            np.matmul(q, k.swapaxes(-1, -2), out=att)
            att += mask
            np.max(att, axis=-1, keepdims=True, out=ws.att_row)
            att -= ws.att_row
            np.exp(att, out=att)
            np.matmul(att, ws.ones_t, out=ws.att_row)  # row sums
            np.reciprocal(ws.att_row, out=ws.att_row)
            att *= ws.att_row
            y = L["y"]
            np.matmul(att, v, out=y.reshape(B, T, H, hs).transpose(0, 2, 1, 3))
            x += _linear(y, p[pre + "attn.proj.weight"], p[pre + "attn.proj.bias"], ws.nc)
            h2 = _ln_forward(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"], self.ln_eps,
                             L["h2"], L["xhat2"], L["rstd2"], row, mc)
            u = _linear(h2, p[pre + "mlp.0.weight"], p[pre + "mlp.0.bias"], L["u"])
            a = gelu_forward(u, L["a"], L["cdf"], L["e"])
            x += _linear(a, p[pre + "mlp.2.weight"], p[pre + "mlp.2.bias"], ws.nc)
        xf = _ln_forward(x, p["ln_f.weight"], p["ln_f.bias"], self.ln_eps, ws.xf, ws.xhatf,
                         ws.rstdf, row, mc)
        whead = wte if self.tied else p["head.weight"]
        logits = np.matmul(xf, whead.T, out=ws.logits)

        # ---- loss: mean cross-entropy; logits become softmax probabilities in place
        np.max(logits, axis=-1, keepdims=True, out=row)
        logits -= row
        picked = logits[rows, flat_t]
        np.exp(logits, out=logits)
        np.matmul(logits, ws.ones_v, out=row)
        loss = float(np.log(row).mean(dtype=np.float64) - picked.mean(dtype=np.float64))

        # ---- backward
        np.reciprocal(row, out=row)
        row *= _F32(1.0 / N)
        dlogits = logits
        dlogits *= row
        dlogits[rows, flat_t] -= _F32(1.0 / N)
        np.matmul(dlogits.T, xf, out=g["tok_emb.weight"] if self.tied else g["head.weight"])
        dx = np.matmul(dlogits, whead, out=ws.x)  # the residual stream's gradient from here on
        _ln_backward(dx, ws.xhatf, ws.rstdf, p["ln_f.weight"], g["ln_f.weight"], g["ln_f.bias"],
                     ws.nc, row, mc)
        dnc, da = ws.nc2, ws.n4c
        for i in reversed(range(self.n_layer)):
            pre, L = f"blocks.{i}.", ws.layers[i]
            _linear_backward(dx, L["a"], p[pre + "mlp.2.weight"], g[pre + "mlp.2.weight"],
                             g[pre + "mlp.2.bias"], da)
            gelu_backward(da, L["u"], L["cdf"], L["e"])
            _linear_backward(da, L["h2"], p[pre + "mlp.0.weight"], g[pre + "mlp.0.weight"],
                             g[pre + "mlp.0.bias"], dnc)
            dx += _ln_backward(dnc, L["xhat2"], L["rstd2"], p[pre + "ln2.weight"],
                               g[pre + "ln2.weight"], g[pre + "ln2.bias"], ws.nc, row, mc)
            dy = _linear_backward(dx, L["y"], p[pre + "attn.proj.weight"],
                                  g[pre + "attn.proj.weight"], g[pre + "attn.proj.bias"], dnc)
            dy = dy.reshape(B, T, H, hs).transpose(0, 2, 1, 3)
            heads, att, datt = L["heads"], L["att"], ws.datt
            q, k, v = heads[0], heads[1], heads[2]
            dq, dk, dv = (ws.dheads[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            np.matmul(att.swapaxes(-1, -2), dy, out=dv)
            # softmax backward: dS = P * (dP - sum(dP * P)); masked entries have P = 0
            np.matmul(dy, v.swapaxes(-1, -2), out=datt)
            datt *= att
            np.matmul(datt, ws.ones_t, out=ws.att_row)
            att *= ws.att_row
            datt -= att
            np.matmul(datt.swapaxes(-1, -2), q, out=dk)
            np.matmul(datt, k, out=dq)
            dq *= scale
            _linear_backward(ws.dheads.reshape(N, 3 * C), L["h1"], p[pre + "attn.qkv.weight"],
                             g[pre + "attn.qkv.weight"], g[pre + "attn.qkv.bias"], dnc)
            dx += _ln_backward(dnc, L["xhat1"], L["rstd1"], p[pre + "ln1.weight"],
                               g[pre + "ln1.weight"], g[pre + "ln1.bias"], ws.nc, row, mc)
        dx.reshape(B, T, C).sum(axis=0, out=g["pos_emb.weight"][:T])
        g["pos_emb.weight"][T:] = 0.0
        # token embedding: one-hot(idx).T @ dx (the vocabulary is small), added to the tied head;
        # the one-hot buffer is all zeros between calls
        ws.onehot[rows, flat_idx] = 1.0
        if self.tied:
            g["tok_emb.weight"] += np.matmul(ws.onehot.T, dx, out=ws.vc)
        else:
            np.matmul(ws.onehot.T, dx, out=g["tok_emb.weight"])
        ws.onehot[rows, flat_idx] = 0.0
        return loss, self.grads

    def adamw_update(self) -> None:
        """One AdamW step on every parameter from the gradients in ``self.grads``."""
        self.steps_done += 1
        b1, b2 = self.betas
        lr, g, m, v, tmp = self.lr, self._flat_grad, self._m, self._v, self._tmp
        if self.weight_decay:
            self._flat *= _F32(1.0 - lr * self.weight_decay)
        m *= _F32(b1)
        np.multiply(g, _F32(1.0 - b1), out=tmp)
        m += tmp
        v *= _F32(b2)
        np.multiply(g, g, out=tmp)
        tmp *= _F32(1.0 - b2)
        v += tmp
        bc1, bc2 = 1.0 - b1 ** self.steps_done, 1.0 - b2 ** self.steps_done
        np.sqrt(v, out=tmp)
        tmp *= _F32(1.0 / math.sqrt(bc2))
        tmp += _F32(self.eps)
        np.divide(m, tmp, out=tmp)
        tmp *= _F32(lr / bc1)
        self._flat -= tmp

    def step(self, idx, targets) -> float:
        """One training step (forward, backward, AdamW); returns the loss before the update."""
        loss, _ = self.loss_and_grads(idx, targets)
        self.adamw_update()
        return loss

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the parameters under the GPT's state-dict names."""
        return {k: v.copy() for k, v in self.params.items()}
