"""Recurrent layers: RNN, LSTM, GRU and their one-step cells RNNCell, LSTMCell, GRUCell.

They are compositions of existing functional ops (``linear``, ``sigmoid``, ``tanh``, ``relu``,
``stack``), so autograd and nn.Graph tracing come from those ops. Each layer and direction
multiplies the whole input sequence by ``weight_ih`` once, then steps through time with
``weight_hh``. Parameter names, gate order (LSTM: i, f, g, o; GRU: r, z, n), shapes and
initialisation (uniform in +-1/sqrt(hidden_size)) are PyTorch's and OneFlow's, so their
state dicts load unchanged. A PackedSequence input (``nn.utils.rnn``) runs each time step on
the sequences still running at that step and returns a PackedSequence.
"""
from __future__ import annotations

import math

import actorflow.functional as flow_f
from actorflow.framework.sbp_parallel import broadcast, split
from actorflow.functional.creation import empty, zeros
from actorflow.nn import functional as F
from actorflow.nn import init
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.nn.utils.rnn import PackedSequence
from actorflow.tensor import Tensor

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(mode: str, x_proj: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """One RNN step: ``x_proj`` is ``x @ w_ih.T + b_ih``."""
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return flow_f.relu(pre) if mode == "RNN_RELU" else flow_f.tanh(pre)


def _lstm_step(x_proj: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None,
               w_hr: Tensor | None) -> tuple[Tensor, Tensor]:
    """One LSTM step (gates i, f, g, o); ``w_hr`` projects the new hidden state."""
    i, f, g, o = flow_f.chunk(x_proj + F.linear(h, w_hh, b_hh), 4, -1)
    c = flow_f.sigmoid(f) * c + flow_f.sigmoid(i) * flow_f.tanh(g)
    h = flow_f.sigmoid(o) * flow_f.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(x_proj: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """One GRU step (gates r, z, n); the reset gate scales ``h @ w_hn.T + b_hn``."""
    xr, xz, xn = flow_f.chunk(x_proj, 3, -1)
    hr, hz, hn = flow_f.chunk(F.linear(h, w_hh, b_hh), 3, -1)
    r = flow_f.sigmoid(xr + hr)
    z = flow_f.sigmoid(xz + hz)
    n = flow_f.tanh(xn + r * hn)
    return n + z * (h - n)


class RNNBase(Module):
    """Shared parameters and forward pass of RNN, LSTM and GRU (``mode``: RNN_TANH, RNN_RELU,
    LSTM or GRU)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unknown mode {mode!r}")
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0 or input_size < 0:
            raise ValueError(f"{name}: input_size ({input_size}), hidden_size ({hidden_size}) "
                             f"and num_layers ({num_layers}) must be positive")
        if proj_size < 0 or (proj_size and (mode != "LSTM" or proj_size >= hidden_size)):
            raise ValueError(f"{name}: proj_size ({proj_size}) must be 0, or smaller than "
                             f"hidden_size ({hidden_size}) for an LSTM")
        self.mode = mode
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(2 if bidirectional else 1):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                layer_in = input_size if layer == 0 else out_size * (2 if bidirectional else 1)
                shapes = [("weight_ih", (gate_size, layer_in)),
                          ("weight_hh", (gate_size, out_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    setattr(self, stem + suffix,
                            Parameter(empty(shape, dtype=dtype, device=device)))
                    names.append(stem + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        """The weights in PyTorch's order, as the attributes are now (a pruned weight is the
        plain tensor that replaced the Parameter)."""
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """Per layer and direction, that layer's weights."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        for key, default in (("bias", True), ("batch_first", False), ("dropout", 0.0),
                             ("bidirectional", False)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        return s

    def _hidden(self, hx, batch: int | None, like: Tensor, size: int, what: str) -> Tensor:
        """``hx`` (or zeros) as (layers * directions, batch, size), checked."""
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs,) + ((batch,) if batch is not None else ()) + (size,)
        if hx is None:
            return _zero_state(want, like, 1, 1 if batch is not None else None)
        if tuple(hx.shape) != want:
            raise ValueError(f"{type(self).__name__}: expected {what} of shape {want}, got "
                             f"{tuple(hx.shape)}")
        return hx if batch is not None else hx.unsqueeze(1)

    def forward(self, input: Tensor, hx=None):
        """``(output, h_n)`` for RNN and GRU, ``(output, (h_n, c_n))`` for LSTM. ``input`` is
        (L, N, H_in), (N, L, H_in) with ``batch_first``, or unbatched (L, H_in)."""
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected a tensor or a PackedSequence input, got "
                            f"{type(input).__name__}")
        if input.dim() not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (L, N, {self.input_size}) or "
                             f"(L, {self.input_size}), got {tuple(input.shape)}")
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1] if batched else None
        h0, c0 = self._initial_states(hx, batch, x)
        dirs = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                seq, h, c = self._run_direction(x, k, d == 1, h0[k],
                                                None if c0 is None else c0[k])
                outs.append(seq)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if dirs == 1 else flow_f.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output = x
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        h_n = flow_f.stack(h_n, 0)
        if not batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
        if self.mode != "LSTM":
            return output, h_n
        c_n = flow_f.stack(c_n, 0)
        return output, (h_n, c_n if batched else c_n.squeeze(1))

    def _initial_states(self, hx, batch: int | None, x: Tensor):
        """``(h0, c0)`` checked against the batch (``c0`` None unless LSTM)."""
        out_size = self.proj_size or self.hidden_size
        if self.mode != "LSTM":
            return self._hidden(hx, batch, x, out_size, "h_0"), None
        h0, c0 = (None, None) if hx is None else hx
        return (self._hidden(h0, batch, x, out_size, "h_0"),
                self._hidden(c0, batch, x, self.hidden_size, "c_0"))

    def _weights(self, k: int):
        """``(w_ih, b_ih, step)`` of layer-direction ``k``: ``step(x_proj, h, c)`` returns the
        next ``(h, c)``."""
        ws = [getattr(self, n) for n in self._all_weights[k]]
        w_ih, w_hh = ws[0], ws[1]
        b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
        w_hr = ws[-1] if self.proj_size else None
        mode = self.mode

        def step(xp, h, c):
            if mode == "LSTM":
                return _lstm_step(xp, h, c, w_hh, b_hh, w_hr)
            if mode == "GRU":
                return _gru_step(xp, h, w_hh, b_hh), None
            return _rnn_step(mode, xp, h, w_hh, b_hh), None
        return w_ih, b_ih, step

    def _run_direction(self, x: Tensor, k: int, reverse: bool, h: Tensor, c: Tensor | None):
        """Run one layer-direction (weights ``self._all_weights[k]``) over the sequence
        ``x`` (L, N, H); returns (outputs (L, N, H_out), last h, last c)."""
        w_ih, b_ih, step = self._weights(k)
        x_proj = F.linear(x, w_ih, b_ih)  # every time step at once
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outs = [None] * x.shape[0]
        for t in steps:
            h, c = step(x_proj[t], h, c)
            outs[t] = h
        return flow_f.stack(outs, 0), h, c

    def _forward_packed(self, seq: PackedSequence, hx):
        """The forward pass over a PackedSequence: ``(PackedSequence, h_n)`` (LSTM:
        ``(PackedSequence, (h_n, c_n))``); ``hx`` and the final states are in the caller's
        batch order."""
        data, batch_sizes, sorted_idx, unsorted_idx = seq
        if data.dim() != 2 or data.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: expected packed data of shape (N, "
                             f"{self.input_size}), got {tuple(data.shape)}")
        sizes = [int(b) for b in batch_sizes.numpy()]

        def order(states, idx):
            return states if idx is None else flow_f.index_select(states, 1, idx)
        if hx is not None and sorted_idx is not None:
            hx = (tuple(order(s, sorted_idx) for s in hx) if self.mode == "LSTM"
                  else order(hx, sorted_idx))
        h0, c0 = self._initial_states(hx, sizes[0], data)
        dirs = 2 if self.bidirectional else 1
        x, h_n, c_n = data, [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._run_packed(x, sizes, k, d == 1, h0[k],
                                             None if c0 is None else c0[k])
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if dirs == 1 else flow_f.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output = PackedSequence(x, batch_sizes, sorted_idx, unsorted_idx)
        h_n = order(flow_f.stack(h_n, 0), unsorted_idx)
        if self.mode != "LSTM":
            return output, h_n
        return output, (h_n, order(flow_f.stack(c_n, 0), unsorted_idx))

    def _run_packed(self, x: Tensor, sizes: list, k: int, reverse: bool, h: Tensor,
                    c: Tensor | None):
        """One layer-direction over packed rows ``x``; step ``t`` runs the first ``sizes[t]``
        sequences. Returns (packed outputs, final h, final c), final states for all B."""
        w_ih, b_ih, step = self._weights(k)
        x_proj = F.linear(x, w_ih, b_ih)
        starts = [0]
        for n in sizes:
            starts.append(starts[-1] + n)
        outs = [None] * len(sizes)
        if not reverse:  # sequences drop out as they end; keep their last states
            done_h, done_c = [], []
            for t, n in enumerate(sizes):
                if n < h.shape[0]:
                    done_h.append(h[n:])
                    h = h[:n]
                    if c is not None:
                        done_c.append(c[n:])
                        c = c[:n]
                h, c = step(x_proj[starts[t]:starts[t + 1]], h, c)
                outs[t] = h
            h = flow_f.cat([h] + done_h[::-1], 0) if done_h else h
            if c is not None and done_c:
                c = flow_f.cat([c] + done_c[::-1], 0)
        else:  # sequences join, with their initial states, as the step reaches their end
            h_init, c_init = h, c
            live = sizes[-1]
            h = h_init[:live]
            c = None if c is None else c_init[:live]
            for t in range(len(sizes) - 1, -1, -1):
                n = sizes[t]
                if n > live:
                    h = flow_f.cat([h, h_init[live:n]], 0)
                    if c is not None:
                        c = flow_f.cat([c, c_init[live:n]], 0)
                    live = n
                h, c = step(x_proj[starts[t]:starts[t + 1]], h, c)
                outs[t] = h
        return flow_f.cat(outs, 0), h, c


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu with
    ``nonlinearity='relu'``), stacked ``num_layers`` deep, optionally bidirectional."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory layers; ``proj_size`` > 0 projects each hidden state."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit layers."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class RNNCellBase(Module):
    """Parameters of a one-step cell: weight_ih, weight_hh (and bias_ih, bias_hh)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((gates * hidden_size, input_size), dtype=dtype,
                                         device=device))
        self.weight_hh = Parameter(empty((gates * hidden_size, hidden_size), dtype=dtype,
                                         device=device))
        if bias:
            self.bias_ih = Parameter(empty((gates * hidden_size,), dtype=dtype, device=device))
            self.bias_hh = Parameter(empty((gates * hidden_size,), dtype=dtype, device=device))
        else:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)]."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -bound, bound)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")

    def _prepare(self, input: Tensor, hx: Tensor | None) -> tuple[Tensor, Tensor | None, bool]:
        name = type(self).__name__
        if input.dim() not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (N, {self.input_size}) or "
                             f"({self.input_size},), got {tuple(input.shape)}")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if hx is not None:
            want = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
            if tuple(hx.shape) != want:
                raise ValueError(f"{name}: expected a hidden state of shape {want}, got "
                                 f"{tuple(hx.shape)}")
            hx = hx if batched else hx.unsqueeze(0)
        return x, hx, batched

    def _zeros(self, x: Tensor) -> Tensor:
        return _zero_state((x.shape[0], self.hidden_size), x, 0, 0)


def _zero_state(shape: tuple, like: Tensor, like_batch: int, batch: int | None) -> Tensor:
    """Zeros of ``shape`` for an initial state of the input ``like``: a global ``like``
    gives global zeros on its placement, split along ``batch`` where ``like`` is split
    along its batch dim ``like_batch`` (each rank keeps its own samples), else broadcast."""
    if not like.is_global:
        return zeros(shape, dtype=like.dtype, device=like.device)
    sbp = tuple(split(batch) if batch is not None and s == split(like_batch) else broadcast
                for s in like.sbp)
    return zeros(shape, dtype=like.dtype, placement=like.placement, sbp=sbp)


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """The next hidden state, (N, hidden_size) (or (hidden_size,) unbatched)."""
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        mode = "RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH"
        out = _rnn_step(mode, F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                        self.bias_hh)
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``x`` and ``(h, c)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple[Tensor, Tensor]:
        """``(h', c')``, each (N, hidden_size) (or (hidden_size,) unbatched)."""
        h, c = (None, None) if hx is None else hx
        x, h, batched = self._prepare(input, h)
        _, c, _ = self._prepare(input, c)
        h = self._zeros(x) if h is None else h
        c = self._zeros(x) if c is None else c
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        """The next hidden state, (N, hidden_size) (or (hidden_size,) unbatched)."""
        x, h, batched = self._prepare(input, hx)
        h = self._zeros(x) if h is None else h
        out = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                        self.bias_hh)
        return out if batched else out.squeeze(0)


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
