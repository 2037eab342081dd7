"""nanoGPT's model and training loop written as PyTorch code, run on Nova by changing
the import: the same file trains on PyTorch with ``--torch``.

Run:  python examples/nanogpt_port.py            (Nova; the built-in corpus, on CPU)
      python examples/nanogpt_port.py --torch    (the same code on PyTorch, if installed)

Everything below the import block is written the way karpathy's nanoGPT writes its
``model.py`` and ``train.py``, idioms included: a LayerNorm with an optional bias,
causal self-attention through ``F.scaled_dot_product_attention`` (or the masked softmax
when ``--no-flash``), a tied LM head, GPT-2 initialization through ``self.apply``,
``configure_optimizers`` with decay and no-decay groups (probing AdamW's signature for
``fused``), ``get_batch`` from ``torch.randint`` and ``torch.from_numpy``, an
``estimate_loss`` under ``@torch.no_grad()``, warmup and cosine learning rates set on
``optimizer.param_groups``, gradient accumulation, ``GradScaler``, gradient clipping,
``torch.compile(model)``, ``zero_grad(set_to_none=True)`` and ``generate`` with top-k
sampling. Nothing in it knows which library runs it; ``tests/test_examples.py`` loads
one model's weights into the other and checks that the two libraries give the same
losses step by step and generate the same tokens.

One difference shows in the time, not the code: nanoGPT's ``generate`` runs the model
on a context that grows by one token per call, and Nova compiles one step per length
(about 3 s each with an empty kernel cache on a 2-core VM, cached on disk after that),
so sampling is off unless asked for (``--sample 40``). ``models/gpt.py``'s
``GPT.generate`` decodes through a key/value cache of fixed shape instead and compiles
at most three steps whatever the length.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

if os.environ.get("NANOGPT_PORT_BACKEND") == "torch" or "--torch" in sys.argv[1:]:
    import torch
    import torch.nn as nn
    from torch.nn import functional as F
else:                                   # the port: these three lines are the whole change
    import nova as torch
    import nova.nn as nn
    from nova.nn import functional as F


@dataclass
class GPTConfig:
    block_size: int = 128
    vocab_size: int = 256        # bytes
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True            # biases in the Linears and LayerNorms, as GPT-2
    flash: bool = True           # scaled_dot_product_attention, else the masked softmax


class LayerNorm(nn.Module):
    """LayerNorm whose bias can be switched off."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = config.flash and hasattr(F, "scaled_dot_product_attention")
        if not self.flash:
            mask = torch.tril(torch.ones(config.block_size, config.block_size))
            self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight      # tied
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():                   # GPT-2's residual scaling
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of {t} > block size {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:                                   # inference: the last position only
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size \
                else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def corpus(max_bytes):
    """The repository's built-in corpus (the Python standard library's source), split
    90/10 as nanoGPT's prepare scripts split theirs."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from models.data import default_corpus      # (the repository's, beside examples/)
    data = np.frombuffer(default_corpus(max_bytes), dtype=np.uint8)
    n = int(0.9 * len(data))
    return data[:n], data[n:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", action="store_true", help="run on PyTorch instead")
    parser.add_argument("--max-iters", type=int, default=200)
    parser.add_argument("--eval-interval", type=int, default=100)
    parser.add_argument("--eval-iters", type=int, default=10)
    parser.add_argument("--log-interval", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--no-flash", action="store_true")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--sample", type=int, default=0,
                        help="bytes to generate at the end (nanoGPT's loop: one compile per "
                             "length on Nova, see the module docstring)")
    parser.add_argument("--seed", type=int, default=1337)
    args = parser.parse_args(argv)

    # adamw, lr schedule, clipping: nanoGPT's shakespeare_char settings, scaled down
    learning_rate, min_lr, warmup_iters = 1e-3, 1e-4, 20
    lr_decay_iters = args.max_iters
    weight_decay, beta1, beta2, grad_clip = 1e-1, 0.9, 0.99, 1.0
    device, device_type, dtype = "cpu", "cpu", "float32"
    batch_size, block_size = args.batch_size, args.block_size

    torch.manual_seed(args.seed)
    ctx = nullcontext()
    train_data, val_data = corpus(2_000_000)

    def get_batch(split):
        data = train_data if split == "train" else val_data
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64))
                         for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64))
                         for i in ix])
        return x.to(device), y.to(device)

    gptconf = GPTConfig(block_size=block_size, dropout=args.dropout, flash=not args.no_flash)
    model = GPT(gptconf)
    model.to(device)
    print(f"number of parameters: {model.get_num_params() / 1e6:.2f}M")
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2),
                                           device_type)
    raw_model = model
    if not args.no_compile:
        model = torch.compile(model)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(args.eval_iters)
            for k in range(args.eval_iters):
                X, Y = get_batch(split)
                with ctx:
                    logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    X, Y = get_batch("train")
    t0 = time.time()
    losses = {}
    for iter_num in range(args.max_iters + 1):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % args.eval_interval == 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, "
                  f"val loss {losses['val']:.4f}")
        if iter_num == args.max_iters:
            break
        for micro_step in range(args.grad_accum):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / args.grad_accum
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        dt, t0 = t1 - t0, t1
        if iter_num % args.log_interval == 0:
            lossf = loss.item() * args.grad_accum
            print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms")

    if args.sample:
        raw_model.eval()
        start = torch.tensor([list(b"def ")], dtype=torch.long)
        out = raw_model.generate(start, args.sample, temperature=0.8, top_k=40)
        text = bytes(out[0].tolist()).decode("utf-8", errors="replace")
        print(f"sample: {text!r}")
    return {k: float(v) for k, v in losses.items()}


if __name__ == "__main__":
    main()
