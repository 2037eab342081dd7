"""Multi-head attention and the Transformer family, with PyTorch's modules, arguments
and parameter names, so a PyTorch ``state_dict`` loads and gives the same outputs.

``MultiheadAttention`` keeps PyTorch's layout: a packed ``in_proj_weight`` (3E, E) or,
when ``kdim``/``vdim`` differ from ``embed_dim``, ``q_proj_weight``, ``k_proj_weight``
and ``v_proj_weight``; one ``in_proj_bias`` (3E); ``out_proj`` a Linear; ``bias_k`` and
``bias_v`` (1, 1, E) with ``add_bias_kv``. Masks follow PyTorch's attention-module
convention (the opposite of ``F.scaled_dot_product_attention``'s): a boolean
``attn_mask`` or ``key_padding_mask`` is True where attention is NOT allowed, a float
one is added to the scores. Both become one additive float mask (in the query's dtype).
Without ``need_weights`` the heads go through ``F.scaled_dot_product_attention``, which
fusion turns into one attention kernel; with it the softmax is written out so the
weights can be returned (after dropout, as PyTorch returns them).

Deviations from PyTorch, all from having no inference fast path or nested tensors:
``TransformerEncoder``'s ``enable_nested_tensor`` and ``mask_check`` are accepted and
ignored, so in ``eval()`` positions that ``src_key_padding_mask`` pads hold computed
values, as in training, where PyTorch's nested-tensor path returns zeros there. An
``is_causal=None`` (PyTorch: read the mask to detect a causal one) is taken as False: the
mask is applied as given, which gives the same numbers without reading its values.
Shape errors PyTorch raises as ``AssertionError`` raise ``ValueError``. A query whose
keys are all masked gets NaN outputs with ``need_weights`` (the softmax written out)
and zeros before ``out_proj`` without (``F.scaled_dot_product_attention``'s safe
softmax), as in PyTorch.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any, Union

from nova.core import dtypes as dt
from nova.nn import functional as F
from nova.nn import init
from nova.nn.layers import (
    Dropout, LayerNorm, Linear, ModuleList, NonDynamicallyQuantizableLinear,
)
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.creation import full, zeros
from nova.tensor.movement import cat
from nova.tensor.tensor import Tensor

Activation = Union[str, Callable[[Tensor], Tensor]]


def _check_shapes(query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                  attn_mask: Tensor | None, num_heads: int) -> bool:
    """PyTorch's ``_mha_shape_check``: whether the call is batched (3-D query)."""
    if query.ndim not in (2, 3):
        raise ValueError(f"multi_head_attention_forward: query should be unbatched 2-D (L, E) "
                         f"or batched 3-D (L, N, E), got shape {query.shape}")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"multi_head_attention_forward: for {kind} query, expected key and "
                         f"value to be {query.ndim}-D, got shapes {key.shape} and {value.shape}")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise ValueError(f"multi_head_attention_forward: for {kind} query, expected "
                         f"key_padding_mask to be None or {query.ndim - 1}-D, got shape "
                         f"{key_padding_mask.shape}")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise ValueError(f"multi_head_attention_forward: attn_mask must be None, 2-D (L, S) "
                             f"or 3-D (N * num_heads, L, S), got shape {attn_mask.shape}")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and attn_mask.shape != expected:
            raise ValueError(f"multi_head_attention_forward: for unbatched query, a 3-D "
                             f"attn_mask must have shape {expected}, got {attn_mask.shape}")
    return batched


def _float_mask(name: str, mask: Tensor | None, dtype: dt.DType) -> Tensor | None:
    """A boolean mask (True: masked out) as 0 / -inf in ``dtype``; a float one cast to it."""
    if mask is None:
        return None
    if mask.dtype == dt.bool_:
        return ops.masked_fill(zeros(mask.shape, dtype=dtype, device=mask.device), mask,
                               -math.inf)
    if not mask.dtype.is_floating_point:
        raise TypeError(f"multi_head_attention_forward: only bool and floating types of {name} "
                        f"are supported, got {mask.dtype.name}")
    return ops.cast(mask, dtype)


def _in_projection(query: Tensor, key: Tensor, value: Tensor, in_proj_weight: Tensor | None,
                   in_proj_bias: Tensor | None, separate: bool,
                   separate_weights: tuple[Tensor | None, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v = the three input projections; self-attention with the packed weight is one
    matmul of width 3E."""
    biases = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
    if separate:
        if any(w is None for w in separate_weights):
            raise ValueError("multi_head_attention_forward: use_separate_proj_weight needs "
                             "q_proj_weight, k_proj_weight and v_proj_weight")
        weights = separate_weights
    else:
        if in_proj_weight is None:
            raise ValueError("multi_head_attention_forward: use_separate_proj_weight is False "
                             "but in_proj_weight is None")
        if query is key and key is value:
            return F.linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
        weights = in_proj_weight.chunk(3)
    return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def _heads(x: Tensor, batch: int, num_heads: int, head_dim: int) -> Tensor:
    """(S, N, E) -> (N, num_heads, S, head_dim)."""
    return x.reshape(x.shape[0], batch, num_heads, head_dim).permute(1, 2, 0, 3)


def _static_heads(name: str, static: Tensor, batch: int, num_heads: int,
                  head_dim: int) -> Tensor:
    """A precomputed (N * num_heads, S, head_dim) key or value as (N, num_heads, S, hd)."""
    if static.ndim != 3 or static.shape[0] != batch * num_heads or static.shape[2] != head_dim:
        raise ValueError(f"multi_head_attention_forward: {name} must have shape "
                         f"({batch * num_heads}, S, {head_dim}), got {static.shape}")
    return static.reshape(batch, num_heads, static.shape[1], head_dim)


def _pad_key_dim(mask: Tensor | None) -> Tensor | None:
    """One more key position (a bias_k/bias_v or zero-attention slot) that no mask hides."""
    return None if mask is None else F.pad(mask, (0, 1))


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """``torch.nn.functional.multi_head_attention_forward`` on sequence-first inputs:
    query (L, N, E), key (S, N, kdim), value (S, N, vdim), or unbatched (L, E), (S, ...).

    Returns the output (L, N, E) and, with ``need_weights``, the attention weights
    (N, L, S), or (N, num_heads, L, S) without ``average_attn_weights`` (unbatched: the
    N dim dropped). ``is_causal`` is a hint that ``attn_mask`` is the causal mask; with
    neither a key padding mask nor ``need_weights`` the causal kernel is used instead.
    """
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise ValueError(f"multi_head_attention_forward: was expecting embedding dimension of "
                         f"{embed_dim_to_check}, but got query {query.shape}")
    if embed_dim % num_heads:
        raise ValueError(f"multi_head_attention_forward: embed_dim {embed_dim} not divisible "
                         f"by num_heads {num_heads}")
    head_dim = embed_dim // num_heads
    statics = [None if t is None else _static_heads(name, t, bsz, num_heads, head_dim)
               for name, t in (("static_k", static_k), ("static_v", static_v))]
    src_len = key.shape[0] if statics[0] is None else statics[0].shape[2]
    if (key.shape[:2] != value.shape[:2] if use_separate_proj_weight
            else key.shape != value.shape):
        raise ValueError(f"multi_head_attention_forward: key shape {key.shape} does not match "
                         f"value shape {value.shape}")
    key_padding_mask = _float_mask("key_padding_mask", key_padding_mask, query.dtype)
    if key_padding_mask is not None and key_padding_mask.shape != (bsz, src_len):
        raise ValueError(f"multi_head_attention_forward: expecting key_padding_mask shape of "
                         f"{(bsz, src_len)}, but got {key_padding_mask.shape}")
    if is_causal and attn_mask is None:
        raise RuntimeError("multi_head_attention_forward: need attn_mask if specifying the "
                           "is_causal hint; Transformer.generate_square_subsequent_mask "
                           "makes one")
    causal = is_causal and key_padding_mask is None and not need_weights
    attn_mask = None if causal else _float_mask("attn_mask", attn_mask, query.dtype)
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias,
                             use_separate_proj_weight,
                             (q_proj_weight, k_proj_weight, v_proj_weight))
    if attn_mask is not None:
        expected = ((tgt_len, src_len) if attn_mask.ndim == 2
                    else (bsz * num_heads, tgt_len, src_len))
        if attn_mask.shape != expected:
            raise RuntimeError(f"multi_head_attention_forward: the shape of the "
                               f"{attn_mask.ndim}-D attn_mask is {attn_mask.shape}, but should "
                               f"be {expected}")
        if attn_mask.ndim == 3:
            attn_mask = attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
    if (bias_k is None) != (bias_v is None):
        raise ValueError("multi_head_attention_forward: give both bias_k and bias_v or neither")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ValueError("multi_head_attention_forward: bias_k and bias_v cannot be added "
                             "to a static key or value")
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_key_dim(attn_mask), _pad_key_dim(key_padding_mask)
    q = _heads(q, bsz, num_heads, head_dim)
    k = _heads(k, bsz, num_heads, head_dim) if statics[0] is None else statics[0]
    v = _heads(v, bsz, num_heads, head_dim) if statics[1] is None else statics[1]
    if add_zero_attn:
        k = cat([k, zeros(bsz, num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], 2)
        v = cat([v, zeros(bsz, num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], 2)
        attn_mask, key_padding_mask = _pad_key_dim(attn_mask), _pad_key_dim(key_padding_mask)
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, k.shape[2])
        attn_mask = (key_padding_mask if attn_mask is None
                     else ops.add(attn_mask, key_padding_mask))
    dropout_p = dropout_p if training else 0.0
    weights = None
    if need_weights:
        scores = ops.matmul(ops.mul(q, 1.0 / math.sqrt(head_dim)), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = ops.add(scores, attn_mask)
        att = F.dropout(ops.softmax(scores, -1), dropout_p, True)
        out = ops.matmul(att, v)
        weights = ops.mean(att, 1) if average_attn_weights else att
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal=causal)
    out = F.linear(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim), out_proj_weight,
                   out_proj_bias)
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features each,
    ``torch.nn.MultiheadAttention`` with its parameters, initialization (xavier-uniform
    input projections, zero biases) and ``forward``; sequence-first (L, N, E) unless
    ``batch_first``."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater "
                             f"than 0, got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(zeros(3 * embed_dim, embed_dim))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(zeros(embed_dim, embed_dim))
            self.k_proj_weight = Parameter(zeros(embed_dim, self.kdim))
            self.v_proj_weight = Parameter(zeros(embed_dim, self.vdim))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = Parameter(zeros(1, 1, embed_dim))
            self.bias_v = Parameter(zeros(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()
        self.to(device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                  self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """(output, weights or None): see ``multi_head_attention_forward``; with
        ``batch_first`` batched inputs and the output are (N, L, E)."""
        transposed = self.batch_first and query.ndim == 3
        if transposed:
            # keep self-attention recognizable (query is key is value) after the transpose
            if key is value and query is key:
                query = key = value = query.transpose(0, 1)
            elif key is value:
                query, key = query.transpose(0, 1), key.transpose(0, 1)
                value = key
            else:
                query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        return (out.transpose(0, 1) if transposed else out), weights


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if isinstance(activation, str):
        if activation not in ("relu", "gelu"):
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return F.relu if activation == "relu" else F.gelu
    if not callable(activation):
        raise TypeError(f"activation should be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")
    return activation


def _clones(module: Module, n: int) -> ModuleList:
    """``n`` deep copies of ``module`` with the same initial values (PyTorch's
    ``_get_clones``)."""
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with dropout, a residual and a
    LayerNorm (after the residual, or before the block with ``norm_first``)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation)
        self.to(device=device, dtype=dtype)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's ``memory``, then a feed-forward
    block, each with dropout, a residual and a LayerNorm (``norm_first``: before)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)
        self.to(device=device, dtype=dtype)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask: Tensor | None,
                   key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (each starting from its values), then
    ``norm`` if given. ``enable_nested_tensor`` and ``mask_check`` are accepted for
    PyTorch compatibility and ignored (Nova has no nested tensors)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        return out if self.norm is None else self.norm(out)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (each starting from its values), then
    ``norm`` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need", ``torch.nn.Transformer``:
    an encoder and a decoder stack, each closed by a LayerNorm, every weight matrix
    re-initialized xavier-uniform."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = F.relu,
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None):
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*layer_args), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*layer_args), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self.to(device=device, dtype=dtype)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(f"Transformer: the batch number of src {src.shape} and tgt "
                               f"{tgt.shape} must be equal (batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src {src.shape} and tgt "
                               f"{tgt.shape} must be equal to d_model={self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None,
                                        dtype: Any = None) -> Tensor:
        """The (sz, sz) causal float mask: -inf above the diagonal, 0 on and below it."""
        return ops.triu(full((sz, sz), -math.inf, dtype=dtype, device=device), 1)


__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
