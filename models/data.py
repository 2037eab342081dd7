"""Byte-level text corpora with a deterministic split and deterministic batches.

The built-in corpus is the source of the running Python's standard library (every
``.py`` file under the stdlib directory, excluding site-packages, in sorted path
order), so it exists on every machine without a download. ``--data FILE`` uses any text
file instead. Batch ``k`` depends only on (seed, split, k), so a run resumed from a
checkpoint sees exactly the batches an uninterrupted run would.
"""
from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass

import numpy as np

_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def stdlib_files(root: str | None = None) -> list[str]:
    root = root or sysconfig.get_paths()["stdlib"]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS)
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    return sorted(files)


def default_corpus(max_bytes: int | None = None) -> bytes:
    """The standard library's source as one byte string (optionally the first
    ``max_bytes``)."""
    parts, total = [], 0
    for path in stdlib_files():
        with open(path, "rb") as f:
            data = f.read()
        parts.append(data)
        total += len(data)
        if max_bytes is not None and total >= max_bytes:
            break
    corpus = b"".join(parts)
    return corpus[:max_bytes] if max_bytes is not None else corpus


@dataclass
class ByteCorpus:
    """Train/validation token arrays (uint8 bytes) with deterministic sampling."""

    train: np.ndarray
    val: np.ndarray
    seed: int = 0

    @classmethod
    def from_bytes(cls, data: bytes, val_fraction: float = 0.1, seed: int = 0) -> ByteCorpus:
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"ByteCorpus: val_fraction must be in (0, 1), got {val_fraction}")
        tokens = np.frombuffer(data, dtype=np.uint8)
        cut = int(len(tokens) * (1.0 - val_fraction))
        return cls(tokens[:cut], tokens[cut:], seed)

    @classmethod
    def load(cls, path: str | None = None, max_bytes: int | None = None,
             seed: int = 0) -> ByteCorpus:
        if path is None:
            return cls.from_bytes(default_corpus(max_bytes), seed=seed)
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes) if max_bytes is not None else f.read()
        except OSError as e:
            raise ValueError(f"data: cannot read {path}: {e.strerror}") from None
        return cls.from_bytes(data, seed=seed)

    def check_context(self, block: int) -> None:
        """Raise unless both splits hold at least one sample of context ``block``, so a
        short file is reported before training, not at the first evaluation."""
        total = len(self.train) + len(self.val)
        for name, tokens in (("train", self.train), ("validation", self.val)):
            if len(tokens) < block + 2:
                raise ValueError(f"the {name} split has {len(tokens)} bytes (of {total} in "
                                 f"all), fewer than the {block + 2} a context of {block} needs")

    def batch(self, split: str, index: int, batch_size: int, block: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and next-byte targets, each (batch_size, block) int64."""
        tokens = {"train": self.train, "val": self.val}.get(split)
        if tokens is None:
            raise ValueError(f"batch: split must be 'train' or 'val', got {split!r}")
        if len(tokens) <= block + 1:
            raise ValueError(f"batch: the {split} split has {len(tokens)} bytes, fewer than the "
                             f"context {block} + 1")
        rng = np.random.default_rng((self.seed, 0 if split == "train" else 1, index))
        starts = rng.integers(0, len(tokens) - block - 1, size=batch_size)
        window = starts[:, None] + np.arange(block + 1)[None, :]
        chunk = tokens[window].astype(np.int64)
        return np.ascontiguousarray(chunk[:, :-1]), np.ascontiguousarray(chunk[:, 1:])
