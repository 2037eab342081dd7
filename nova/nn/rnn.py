"""Recurrent layers: ``RNN`` (tanh or relu), ``LSTM`` and ``GRU`` and their one-step
cells, with PyTorch's arguments, parameter names (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``weight_hr_l0``, ``..._reverse``), gate order and
initialization (every parameter U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so a
PyTorch ``state_dict`` loads and gives the same outputs.

Gates: LSTM i, f, g, o (c' = f c + i g, h' = o tanh(c'), then ``h' W_hr^T`` with
``proj_size``); GRU r, z, n with n = tanh(W_in x + b_in + r (W_hn h + b_hn)) and
h' = (1 - z) n + z h; RNN h' = act(W_ih x + b_ih + W_hh h + b_hh).

Nova records a static trace, so a sequence layer unrolls its time loop in Python over
the (static) sequence length: one compile per length, then replays. The input
projection of all time steps is ONE matmul, (T, N, H_in) by (H_in, gates), before the
loop; only the hidden projection ``h W_hh^T`` runs per step.

A ``PackedSequence`` input (``nv.nn.utils.rnn``) runs the same recurrence on its
sequences padded to the longest, in sorted order, with the state updated only where a
sequence is still running (``h = where(running, h_new, h)``): each sequence's final
state is the one at its own last step, and the reverse direction, which walks the
padding first with its state held at h_0, starts at each sequence's own last element.
Steps where every sequence runs need no mask, so equal lengths run as padded input.
The output is packed again; h_n comes back in the batch's original order. The lengths
shape the graph: each distinct set of them compiles once, then replays.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from nova.nn import functional as F
from nova.nn import init
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.nn.utils import rnn as rnn_utils
from nova.nn.utils.rnn import PackedSequence
from nova.tensor import ops
from nova.tensor.creation import zeros
from nova.tensor.movement import cat, stack
from nova.tensor.tensor import Tensor

# gate blocks per mode: the rows of weight_ih / weight_hh are gates * hidden_size
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

State = tuple[Tensor, ...]  # (h,) or, for an LSTM, (h, c)


def _step(mode: str, gx: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None,
          w_hr: Tensor | None) -> State:
    """One time step from the input's projection ``gx`` (W_ih x + b_ih) and the state."""
    h = state[0]
    gh = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = ops.add(gx, gh).chunk(4, -1)
        c = ops.add(ops.mul(ops.sigmoid(f), state[1]), ops.mul(ops.sigmoid(i), ops.tanh(g)))
        h = ops.mul(ops.sigmoid(o), ops.tanh(c))
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU":
        xr, xz, xn = gx.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = ops.sigmoid(ops.add(xr, hr)), ops.sigmoid(ops.add(xz, hz))
        n = ops.tanh(ops.add(xn, ops.mul(r, hn)))
        return (ops.add(n, ops.mul(z, ops.sub(h, n))),)  # (1 - z) n + z h
    pre = ops.add(gx, gh)
    return (ops.tanh(pre) if mode == "RNN_TANH" else ops.relu(pre),)


def _run_direction(mode: str, x: Tensor, state: State, w_ih: Tensor, w_hh: Tensor,
                   b_ih: Tensor | None, b_hh: Tensor | None, w_hr: Tensor | None,
                   reverse: bool, running: list[Tensor | None] | None = None
                   ) -> tuple[Tensor, State]:
    """One layer in one direction over x (T, N, H_in): its outputs (T, N, H_out), in the
    input's time order, and its last state. ``running[t]``, a (N, 1) bool mask (None:
    all), keeps the state of the sequences that ended before step t as it was."""
    gx = F.linear(x, w_ih, b_ih)  # every step's input projection in one matmul
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs: list[Tensor | None] = [None] * x.shape[0]
    for t in steps:
        new = _step(mode, gx[t], state, w_hh, b_hh, w_hr)
        mask = None if running is None else running[t]
        state = new if mask is None else tuple(ops.where(mask, n, s)
                                               for n, s in zip(new, state))
        outs[t] = state[0]
    return stack(outs), state


def _check_dtype(op: str, what: str, t: Tensor, weight: Tensor) -> None:
    if t.dtype != weight.dtype:
        raise RuntimeError(f"{op}: {what} has dtype {t.dtype.name} but the weights are "
                           f"{weight.dtype.name}; convert one of them with .to()")


def _uniform_reset(module: Module) -> None:
    """PyTorch's initialization of every recurrent weight and bias: U(-1/sqrt(hidden),
    1/sqrt(hidden))."""
    bound = 1.0 / math.sqrt(module.hidden_size)
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrent layer behind RNN, LSTM and
    GRU; ``mode`` is 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unrecognized RNN mode {mode!r}; valid: {list(_GATES)}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing "
                             f"the probability of an element being zeroed, got {dropout!r}")
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers), ("proj_size", proj_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name}: {arg} should be of type int, got "
                                f"{type(value).__name__}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"{name}: hidden_size and num_layers must be greater than zero, "
                             f"got hidden_size={hidden_size}, num_layers={num_layers}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN "
                             "or GRU")
        if not 0 <= proj_size < hidden_size:
            raise ValueError(f"{name}: proj_size must be >= 0 (0: no projection) and smaller "
                             f"than hidden_size={hidden_size}, got {proj_size}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout applies between layers, so dropout={dropout} with "
                          "num_layers=1 does nothing", stacklevel=2)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        gates = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {"weight_ih": (gates, input_size if layer == 0
                                        else out_size * directions),
                          "weight_hh": (gates, out_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(zeros(shape)))
                self._all_weights.append([kind + suffix for kind in shapes])
        self.reset_parameters()
        self.to(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        _uniform_reset(self)

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch compacts the weights for cuDNN here; Nova uses the
        parameters as they are."""

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each (layer, direction), as PyTorch lists them."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _layer_weights(self, layer: int, direction: int) -> tuple[Tensor | None, ...]:
        """(w_ih, w_hh, b_ih, b_hh, w_hr), None for those this layer has not."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(getattr(self, kind + suffix, None)
                     for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))

    def _initial_state(self, hx: Any, x: Tensor, batched: bool) -> State:
        """hx as a tuple of (layers * directions, N, size) tensors for x (T, N, H_in);
        zeros when None."""
        name = type(self).__name__
        rows = self.num_layers * (2 if self.bidirectional else 1)
        batch = x.shape[1]
        sizes = [self.proj_size or self.hidden_size]
        if self.mode == "LSTM":
            sizes.append(self.hidden_size)
        if hx is None:
            return tuple(zeros(rows, batch, s, dtype=x.dtype, device=x.device)
                         for s in sizes)
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)):
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got "
                                f"{type(hx).__name__}")
            if len(hx) != 2:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) of 2 tensors, got "
                                f"a {type(hx).__name__} of length {len(hx)}")
            given = tuple(hx)
        else:
            given = (hx,)
        state = []
        for which, t, size in zip(("h_0", "c_0"), given, sizes):
            expected = (rows, batch, size) if batched else (rows, size)
            if not isinstance(t, Tensor) or t.shape != expected:
                shape = t.shape if isinstance(t, Tensor) else type(t).__name__
                kind = f"batched input (batch {batch})" if batched else "unbatched input"
                raise RuntimeError(f"{name}: expected {which} of shape {expected} for {kind}, "
                                   f"got {shape}")
            _check_dtype(name, which, t, self.weight_ih_l0)
            state.append(t if batched else t.unsqueeze(1))
        return tuple(state)

    def forward(self, input: Tensor | PackedSequence,
                hx: Any = None) -> tuple[Tensor | PackedSequence, Any]:
        """input (L, N, H_in) ((N, L, H_in) with batch_first), unbatched (L, H_in) or a
        PackedSequence; returns (output, h_n) -- (output, (h_n, c_n)) for an LSTM -- with
        output (L, N, D * H_out) (packed for packed input) and h_n
        (D * num_layers, N, H_out) (unbatched: no N dim)."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        name = type(self).__name__
        if not isinstance(input, Tensor) or input.ndim not in (2, 3):
            raise ValueError(f"{name}: expected input to be 2-D (L, H_in) or 3-D "
                             f"(L, N, H_in), got "
                             f"{input.shape if isinstance(input, Tensor) else type(input)}")
        _check_dtype(name, "input", input, self.weight_ih_l0)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[2] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got input of shape {input.shape}")
        if x.shape[0] == 0:
            raise RuntimeError(f"{name}: expected a sequence length larger than 0, got input "
                               f"of shape {input.shape}")
        x, h_n = self._layers(x, self._initial_state(hx, x, batched))
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if not batched:
            x, h_n = x.squeeze(1), tuple(h.squeeze(1) for h in h_n)
        return x, (h_n if self.mode == "LSTM" else h_n[0])

    def _forward_packed(self, input: PackedSequence,
                        hx: Any) -> tuple[PackedSequence, Any]:
        """A PackedSequence through the layers: hx and h_n in the batch's original
        order, the output packed like the input (``batch_first`` does not apply)."""
        name = type(self).__name__
        data = input.data
        if not isinstance(data, Tensor) or data.ndim != 2:
            raise RuntimeError(f"{name}: packed input data must have 2 dimensions "
                               f"(sum of lengths, H_in), got "
                               f"{data.shape if isinstance(data, Tensor) else type(data)}")
        _check_dtype(name, "input", data, self.weight_ih_l0)
        if data.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got packed data of shape {data.shape}")
        x, running, lengths = rnn_utils._pad_for_rnn(input, name)
        state = self._initial_state(hx, x, True)
        if hx is not None and input.sorted_indices is not None:   # hx: the batch's order
            state = tuple(rnn_utils._take(s, 1, input.sorted_indices) for s in state)
        x, h_n = self._layers(x, state, running)
        if input.unsorted_indices is not None:
            h_n = tuple(rnn_utils._take(h, 1, input.unsorted_indices) for h in h_n)
        out = PackedSequence(rnn_utils._pack_for_rnn(x, lengths), input.batch_sizes,
                             input.sorted_indices, input.unsorted_indices)
        return out, (h_n if self.mode == "LSTM" else h_n[0])

    def _layers(self, x: Tensor, state: State,
                running: list[Tensor | None] | None = None) -> tuple[Tensor, State]:
        """Every layer and direction over x (T, N, H_in) from ``state`` (each
        (D * num_layers, N, size)): the last layer's output and the final states."""
        directions = 2 if self.bidirectional else 1
        finals: list[list[Tensor]] = [[] for _ in state]
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                row = layer * directions + direction
                out, last = _run_direction(self.mode, x, tuple(s[row] for s in state),
                                           *self._layer_weights(layer, direction),
                                           reverse=direction == 1, running=running)
                outs.append(out)
                for final, s in zip(finals, last):
                    final.append(s)
            x = cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, tuple(stack(final) for final in finals)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":   # kept, though PyTorch omits it: the layer differs
            s += ", nonlinearity='relu'"
        for arg, value, default in (("bias", self.bias, True),
                                    ("batch_first", self.batch_first, False),
                                    ("dropout", self.dropout, 0.0),
                                    ("bidirectional", self.bidirectional, False)):
            if value != default:
                s += f", {arg}={value}"
        return s


def _rnn_mode(op: str, nonlinearity: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{op}: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or "
                         "'relu'")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class RNN(RNNBase):
    """Elman RNN: h_t = act(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh), act tanh or relu."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None):
        super().__init__(_rnn_mode("RNN", nonlinearity), input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory; ``proj_size`` > 0 projects each h_t to that size."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n as in PyTorch)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    """One step of a recurrent layer: ``weight_ih`` (gates * hidden, input_size),
    ``weight_hh`` (gates * hidden, hidden), ``bias_ih``, ``bias_hh``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(zeros(num_chunks * hidden_size, input_size))
        self.weight_hh = Parameter(zeros(num_chunks * hidden_size, hidden_size))
        if bias:
            self.bias_ih = Parameter(zeros(num_chunks * hidden_size))
            self.bias_hh = Parameter(zeros(num_chunks * hidden_size))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        self.to(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        _uniform_reset(self)

    def _cell(self, mode: str, input: Tensor, hx: tuple[Tensor | None, ...]) -> State:
        """The step's new state, each (N, hidden) ((hidden,) for a 1-D input); ``hx``
        holds the states given, None for zeros."""
        name = type(self).__name__
        if not isinstance(input, Tensor) or input.ndim not in (1, 2):
            raise ValueError(f"{name}: expected input to be 1-D (H_in) or 2-D (N, H_in), got "
                             f"{input.shape if isinstance(input, Tensor) else type(input)}")
        _check_dtype(name, "input", input, self.weight_ih)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got input of shape "
                               f"{input.shape}, expected {self.input_size} features")
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        state = []
        for k, h in enumerate(hx):
            if h is None:
                h = zeros(expected, dtype=x.dtype, device=x.device)
            elif not isinstance(h, Tensor) or h.shape != expected:
                raise RuntimeError(f"{name}: hidden state {k} must have shape {expected} for "
                                   f"input of shape {input.shape}, got "
                                   f"{h.shape if isinstance(h, Tensor) else type(h).__name__}")
            _check_dtype(name, f"hidden state {k}", h, self.weight_hh)
            state.append(h if batched else h.unsqueeze(0))
        new = _step(mode, F.linear(x, self.weight_ih, self.bias_ih), tuple(state),
                    self.weight_hh, self.bias_hh, None)
        return new if batched else tuple(s.squeeze(0) for s in new)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")
        if getattr(self, "nonlinearity", "tanh") != "tanh":   # RNNCell's, unquoted
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None):
        mode = _rnn_mode("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self._mode, self.nonlinearity = mode, nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._cell(self._mode, input, (hx,))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from input and (h, c) (zeros when ``hx`` is None)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor,
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        h, c = self._cell("LSTM", input, (None, None) if hx is None else tuple(hx))
        return h, c


class GRUCell(RNNCellBase):
    """One GRU step: h' from input and h (zeros when ``hx`` is None)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._cell("GRU", input, (hx,))[0]


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
