"""A decoder-only transformer in the nanoGPT style, written with ``nv.nn``.

Token + learned position embeddings, pre-LayerNorm blocks with causal multi-head
attention and a 4x GELU MLP, a final LayerNorm, and an LM head tied to the token
embedding. Initialization follows GPT-2: N(0, 0.02) weights, zero biases, and residual
projections scaled by 1/sqrt(2 * layers).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

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

    def config_dict(self) -> dict:
        return asdict(self.config)
