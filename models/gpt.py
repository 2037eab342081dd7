"""A decoder-only transformer in the nanoGPT style, written with ``nv.nn``.

Token + learned position embeddings, pre-LayerNorm blocks with causal multi-head
attention and a 4x GELU MLP, a final LayerNorm, and an LM head tied to the token
embedding. Initialization follows GPT-2: N(0, 0.02) weights, zero biases, and residual
projections scaled by 1/sqrt(2 * layers).

``generate`` samples as nanoGPT's does (temperature, top-k, the context cropped to the
last ``block`` tokens), but one position at a time through a key/value cache of fixed
shape: the position is a runtime tensor and the cache always holds ``block`` slots, the
ones not yet written hidden by the attention mask, so every step has the same shapes
and a generation compiles at most three step functions (the prompt's, the sampling
one, and the moving window's once the context is full), not one per length.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

import nova as nv
import nova.nn as nn
import nova.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256
    block: int = 128
    d: int = 128
    layers: int = 4
    heads: int = 4
    dropout: float = 0.0
    bias: bool = True

    def __post_init__(self) -> None:
        if self.d % self.heads:
            raise ValueError(f"GPTConfig: d={self.d} is not divisible by heads={self.heads}")

    def num_parameters(self) -> int:
        """Closed form (tied head counted once), so big presets can be sized without
        building them."""
        d, b = self.d, int(self.bias)
        per_layer = (2 * d * (1 + b)            # two LayerNorms
                     + 3 * d * d + 3 * d * b     # qkv
                     + d * d + d * b             # attention projection
                     + 4 * d * d + 4 * d * b     # MLP up
                     + 4 * d * d + d * b)        # MLP down
        return self.vocab * d + self.block * d + self.layers * per_layer + d * (1 + b)


PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(vocab=256, block=32, d=32, layers=2, heads=2),
    "small": GPTConfig(vocab=256, block=128, d=128, layers=4, heads=4),
    "medium": GPTConfig(vocab=256, block=256, d=256, layers=6, heads=8),
    "gpt-42m": GPTConfig(vocab=50304, block=1024, d=512, layers=5, heads=8),
    "gpt-144m": GPTConfig(vocab=50304, block=1024, d=768, layers=15, heads=12),
}


def preset(name: str, **overrides) -> GPTConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown GPT preset {name!r}; available: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **overrides)


@dataclass(frozen=True)
class KVCache:
    """One layer's keys and values, (B, heads, block, head size) each: slot ``t`` holds
    position ``t`` once it has been decoded (zeros before, never read: masked)."""

    keys: nv.Tensor
    values: nv.Tensor


@dataclass(frozen=True)
class Position:
    """Where a decoding step writes and what it reads, from the position as a tensor:
    ``slot`` is true at the cache slot being written ((1, 1, block, 1)), ``visible``
    at the slots up to it ((1, 1, 1, block))."""

    slot: nv.Tensor
    visible: nv.Tensor

    @staticmethod
    def of(pos: nv.Tensor, block: int) -> Position:
        slots = nv.arange(block, device=pos.device)
        p = pos.view(1, 1, 1, 1)
        return Position((slots.view(1, 1, block, 1) == p), (slots.view(1, 1, 1, block) <= p))


def next_token(logits: nv.Tensor, temperature: float = 1.0, top_k: int | None = None) -> nv.Tensor:
    """The next token per row of ``logits`` (B, vocab) as (B, 1) int64, as nanoGPT picks
    it: scaled by 1/temperature, cut to the ``top_k`` largest, sampled from the softmax
    (``nv.multinomial``); ``temperature=0`` takes the argmax instead."""
    if temperature < 0:
        raise ValueError(f"next_token: temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"next_token: top_k must be >= 1, got {top_k}")
        kth = nv.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    return nv.multinomial(F.softmax(logits, dim=-1), num_samples=1)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.heads = cfg.heads
        self.c_attn = nn.Linear(cfg.d, 3 * cfg.d, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d, cfg.d, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: nv.Tensor) -> nv.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.heads
        q, k, v = (t.view(B, T, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def decode(self, x: nv.Tensor, cache: KVCache, at: Position) -> tuple[nv.Tensor, KVCache]:
        """``forward`` for one new position per sequence (``x``: (B, 1, C)): its key and
        value are written into the cache's slot ``at.slot``, and it attends to the
        slots up to it."""
        B, _, C = x.shape
        hs = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, 1, self.heads, hs).transpose(1, 2) for t in (q, k, v))
        keys = nv.where(at.slot, k, cache.keys)        # (B, H, block, hs)
        values = nv.where(at.slot, v, cache.values)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=at.visible,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(B, 1, C)
        return self.resid_dropout(self.c_proj(y)), KVCache(keys, values)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d, 4 * cfg.d, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.d, cfg.d, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: nv.Tensor) -> nv.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: nv.Tensor) -> nv.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def decode(self, x: nv.Tensor, cache: KVCache, at: Position) -> tuple[nv.Tensor, KVCache]:
        y, cache = self.attn.decode(self.ln_1(x), cache, at)
        x = x + y
        return x + self.mlp(self.ln_2(x)), cache


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d)
        self.wpe = nn.Embedding(cfg.block, cfg.d)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.layers))
        nv.realize(*self.parameters())

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx: nv.Tensor, targets: nv.Tensor | None = None):
        B, T = idx.shape
        if T > self.config.block:
            raise ValueError(f"GPT: sequence length {T} exceeds the context size "
                             f"{self.config.block}")
        pos = nv.arange(T)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return logits, loss

    def decode(self, tokens: nv.Tensor, pos: nv.Tensor,
               caches: list[KVCache]) -> tuple[nv.Tensor, list[KVCache]]:
        """The logits (B, vocab) after one more token per sequence (``tokens``: (B, 1)) at
        position ``pos`` (a 1-element int64 tensor, so that the step's shapes do not
        depend on it), and the caches with that position written."""
        at = Position.of(pos, self.config.block)
        x = self.drop(self.wte(tokens) + self.wpe(pos))
        out = []
        for block, cache in zip(self.h, caches):
            x, cache = block.decode(x, cache, at)
            out.append(cache)
        return self.lm_head(self.ln_f(x))[:, -1, :], out

    def empty_caches(self, batch: int) -> list[KVCache]:
        """Zeroed (realized) caches for ``batch`` sequences."""
        cfg = self.config
        shape = (batch, cfg.heads, cfg.block, cfg.d // cfg.heads)
        device = self.wte.weight.device
        caches = [KVCache(nv.zeros(*shape, device=device), nv.zeros(*shape, device=device))
                  for _ in self.h]
        nv.realize(*_flat(caches))
        return caches

    def generate(self, idx: nv.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None) -> nv.Tensor:
        """``idx`` (B, T) continued by ``max_new_tokens`` tokens, as nanoGPT's
        ``generate``: each new token is ``next_token`` of the logits at the last
        position, given at most the last ``block`` tokens. While the sequence fits the
        context, positions are decoded one at a time through the key/value caches (the
        prompt too, without sampling); past it, every step runs the whole window of
        ``block`` tokens (the context moves, so every key changes). Each of these three
        kinds of step has one shape, so a generation compiles three step functions at
        most, whatever its length, and each runs under ``nv.compile`` (replayed without
        re-recording the model). Runs without
        gradients; dropout follows the module's mode, as in nanoGPT (call ``eval()``
        first)."""
        if idx.ndim != 2 or idx.dtype not in (nv.int32, nv.int64):
            raise ValueError(f"generate: idx must be (batch, length) integer tokens, got "
                             f"shape {idx.shape} of {idx.dtype.name}")
        if idx.shape[1] == 0:
            raise ValueError("generate: idx must hold at least one token per sequence")
        block = self.config.block
        seq = idx.numpy().astype(np.int64)
        device = idx.device
        steps = self.__dict__.get("_generation_steps")
        if steps is None:
            steps = self._generation_steps = _GenerationSteps(self)
        with nv.no_grad():
            flat = None
            for _ in range(max_new_tokens):
                length = seq.shape[1]
                if length <= block:
                    if flat is None:       # the prompt but its last token, into the caches
                        flat = _flat(self.empty_caches(seq.shape[0]))
                        for p in range(length - 1):
                            flat = steps.fill(*_at(seq, p, device), flat)
                            nv.realize(*flat)
                    nxt, flat = steps.sample(*_at(seq, length - 1, device), flat,
                                             temperature, top_k)
                    nv.realize(nxt, *flat)
                else:
                    nxt = steps.window(nv.tensor(seq[:, -block:], device=device),
                                       temperature, top_k)
                    nv.realize(nxt)
                seq = np.concatenate([seq, nxt.numpy().astype(np.int64)], axis=1)
        return nv.tensor(seq.astype(idx.dtype.np), device=device)

    def config_dict(self) -> dict:
        return asdict(self.config)


def _flat(caches: list[KVCache]) -> list[nv.Tensor]:
    return [t for c in caches for t in (c.keys, c.values)]


def _caches(flat: list[nv.Tensor]) -> list[KVCache]:
    return [KVCache(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def _at(seq: np.ndarray, p: int, device) -> tuple[nv.Tensor, nv.Tensor]:
    """The host tokens ``seq[:, p]`` and the position ``p`` as decoding inputs."""
    return nv.tensor(seq[:, p:p + 1], device=device), nv.tensor([p], device=device)


class _GenerationSteps:
    """The three steps ``generate`` takes, each an ``nv.compile`` function of tensors
    (the caches passed flat), so that after two calls a step replays its compiled
    kernels on new inputs instead of recording the model again."""

    def __init__(self, model: GPT):
        self.model = model
        self.fill = nv.compile(self._fill)
        self.sample = nv.compile(self._sample)
        self.window = nv.compile(self._window)

    def _fill(self, tokens: nv.Tensor, pos: nv.Tensor, flat: list[nv.Tensor]) -> list[nv.Tensor]:
        _, caches = self.model.decode(tokens, pos, _caches(flat))
        return _flat(caches)

    def _sample(self, tokens: nv.Tensor, pos: nv.Tensor, flat: list[nv.Tensor],
                temperature: float, top_k: int | None) -> tuple[nv.Tensor, list[nv.Tensor]]:
        logits, caches = self.model.decode(tokens, pos, _caches(flat))
        return next_token(logits, temperature, top_k), _flat(caches)

    def _window(self, window: nv.Tensor, temperature: float, top_k: int | None) -> nv.Tensor:
        return next_token(self.model(window)[0][:, -1, :], temperature, top_k)
