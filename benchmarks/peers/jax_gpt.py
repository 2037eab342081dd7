"""JAX: a pure-function GPT and AdamW, the whole training step under ``jax.jit`` with
the parameters and optimizer state donated."""
from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import BETAS, EPS, LR, WEIGHT_DECAY, Timer, Work
from models.gpt import GPTConfig


def init(cfg: GPTConfig, seed: int) -> dict:
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4 + 4 * cfg.layers))
    normal = lambda shape, std=0.02: std * jax.random.normal(next(keys), shape, jnp.float32)  # noqa: E731
    d, proj_std = cfg.d, 0.02 / math.sqrt(2 * cfg.layers)
    zeros, ones = (lambda n: jnp.zeros(n, jnp.float32)), (lambda n: jnp.ones(n, jnp.float32))
    blocks = [{
        "ln_1": {"weight": ones(d), "bias": zeros(d)},
        "attn": {"c_attn": {"weight": normal((3 * d, d)), "bias": zeros(3 * d)},
                 "c_proj": {"weight": normal((d, d), proj_std), "bias": zeros(d)}},
        "ln_2": {"weight": ones(d), "bias": zeros(d)},
        "mlp": {"c_fc": {"weight": normal((4 * d, d)), "bias": zeros(4 * d)},
                "c_proj": {"weight": normal((d, 4 * d), proj_std), "bias": zeros(d)}},
    } for _ in range(cfg.layers)]
    return {"wte": normal((cfg.vocab, d)), "wpe": normal((cfg.block, d)), "h": blocks,
            "ln_f": {"weight": ones(d), "bias": zeros(d)}}


def _linear(p, x):
    return x @ p["weight"].T + p["bias"]


def _layer_norm(p, x, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * p["weight"] + p["bias"]


def loss_fn(params, x, y, heads: int):
    B, T = x.shape
    h = params["wte"][x] + params["wpe"][:T]
    causal = jnp.tril(jnp.ones((T, T), bool))
    for blk in params["h"]:
        a = _linear(blk["attn"]["c_attn"], _layer_norm(blk["ln_1"], h))
        q, k, v = (t.reshape(B, T, heads, -1).transpose(0, 2, 1, 3) for t in jnp.split(a, 3, -1))
        att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(q.shape[-1])
        att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
        out = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, -1)
        h = h + _linear(blk["attn"]["c_proj"], out)
        m = jax.nn.gelu(_linear(blk["mlp"]["c_fc"], _layer_norm(blk["ln_2"], h)), approximate=False)
        h = h + _linear(blk["mlp"]["c_proj"], m)
    logits = _layer_norm(params["ln_f"], h) @ params["wte"].T
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.take_along_axis(logp, y[..., None], -1).mean()


@partial(jax.jit, static_argnames=("heads",), donate_argnums=(0, 1))
def train_step(params, opt_state, x, y, heads: int):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, heads)
    m, v, t = opt_state
    t = t + 1
    b1, b2 = BETAS
    m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
    v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
    step = LR / (1 - b1 ** t)
    bc2 = jnp.sqrt(1 - b2 ** t)

    def update(p, m_, v_):
        p = p * (1 - LR * WEIGHT_DECAY)
        return p - step * m_ / (jnp.sqrt(v_) / bc2 + EPS)

    params = jax.tree.map(update, params, m, v)
    return params, (m, v, t), loss


def train(work: Work) -> tuple[list[float], list[float]]:
    cfg = work.config
    params = init(cfg, work.seed)
    zeros = jax.tree.map(jnp.zeros_like, params)
    opt_state = (zeros, jax.tree.map(jnp.zeros_like, params), jnp.zeros((), jnp.float32))
    batches = work.batches()
    timer, losses = Timer(), []
    for step in range(work.steps):
        x, y = (jnp.asarray(a.astype(np.int32)) for a in batches(step))
        with timer:
            params, opt_state, loss = train_step(params, opt_state, x, y, heads=cfg.heads)
            losses.append(float(loss))
    return timer.times, losses
