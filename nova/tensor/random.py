"""The counter-based generator behind ``rand``/``randn``/``randint`` (and dropout later).

Host state is just (seed, offset). Each random op takes the pair as a runtime input
(a ``tensor<2xi64>`` argument of the step function, never a baked constant) and then
advances the offset, so a loop that draws fresh numbers every step compiles once, and
``nv.manual_seed(s)`` makes every draw reproducible.
"""
from __future__ import annotations

import math
import operator
import threading

from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core import philox
from nova.core.errors import ArgumentError, DTypeError
from nova.tensor import capture_log
from nova.tensor.device import CPU, check_device
from nova.tensor.device import device as Device
from nova.tensor.ops import add, cast, cos, log, minimum, mul, prim, sqrt, sub
from nova.tensor.tensor import Tensor
from nova.tensor.trace import buffer_node


class Generator:
    """Philox key (seed) and counter offset; one draw consumes one offset.

    ``Generator(device='cpu')`` as PyTorch's (a device string may also come first:
    ``Generator('cpu')``); an int first argument is Nova's starting seed
    (``Generator(7)``, the same as ``Generator().manual_seed(7)``). The key is a runtime
    input any device's step reads, so one generator serves every device; ``device``
    is what ``.device`` reports."""

    def __init__(self, seed: Any = 0, device: Any = None):
        if isinstance(seed, (str, Device)):          # torch's positional device
            if device is not None:
                raise TypeError("Generator: device given twice (positionally and as "
                                "device=)")
            seed, device = 0, seed
        self.device = check_device(device, "Generator")
        self._lock = threading.Lock()   # two threads drawing at once get distinct offsets
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"manual_seed: seed must be an int, got {seed!r}")
        self._seed = seed & (2**64 - 1)
        self.offset = 0
        capture_log.action("manual_seed", self, seed)
        return self

    def seed(self) -> int:
        """Reseed from the OS's entropy and return the new seed (``Generator.seed``:
        non-deterministic, unlike ``manual_seed``)."""
        import secrets
        value = secrets.randbits(63)
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        return self._seed

    def next_key(self) -> Tensor:
        """The (seed, offset) pair as a runtime input tensor, then advance."""
        # No device: a step on any device reads the 16-byte key (the cuda engine uploads
        # it), so dropout inside a model on the GPU needs no GPU-side generator.
        t = Tensor._wrap(buffer_node(self._next_key_array(), dt.int64, None))
        capture_log.fresh("rng", self, t.node)
        return t

    def _next_key_array(self) -> np.ndarray:
        """The (seed, offset) pair as an int64 array, then advance (what ``nv.compile``
        draws when it replays a call that drew a key)."""
        with self._lock:
            key = np.array([self._seed, self.offset], dtype=np.uint64).view(np.int64)
            self.offset += 1
        return key

    def get_state(self) -> tuple[int, int]:
        return (self._seed, self.offset)

    def set_state(self, state: tuple[int, int]) -> None:
        self._seed, self.offset = int(state[0]), int(state[1])

    def __getstate__(self) -> tuple[int, int, str]:
        """Pickled (``copy.deepcopy``, a DataLoader sent to spawned workers) as its
        state and device; the copy gets a lock of its own."""
        return self.get_state() + (str(self.device),)

    def __setstate__(self, state: tuple) -> None:
        self._lock = threading.Lock()
        # (a 2-tuple: pickled before generators had a device)
        self.device = Device(state[2]) if len(state) > 2 else CPU
        self.set_state(state[:2])


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (resets its offset), as ``torch.manual_seed``."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    """The default generator's seed (``torch.initial_seed``)."""
    return default_generator.initial_seed()


def seed() -> int:
    """Seed the default generator from the OS's entropy and return the seed
    (``torch.seed``)."""
    return default_generator.seed()


def get_rng_state() -> Tensor:
    """The default generator's state as an int64 tensor (seed, offset): what
    ``set_rng_state`` takes back (``torch.get_rng_state``; PyTorch's is a byte tensor
    of its Mersenne Twister, Nova's the two numbers of its counter-based generator)."""
    seed_bits = np.array([default_generator.initial_seed()], dtype=np.uint64).view(np.int64)[0]
    return Tensor._wrap(buffer_node(np.array([seed_bits, default_generator.offset],
                                             dtype=np.int64), dt.int64))


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator from ``get_rng_state``'s tensor."""
    if not isinstance(new_state, Tensor) or new_state.shape != (2,) or \
            new_state.dtype != dt.int64:
        raise ValueError(f"set_rng_state: expected the int64 tensor of shape (2,) that "
                         f"get_rng_state returns, got "
                         f"{getattr(new_state, 'dtype', type(new_state).__name__)} "
                         f"{getattr(new_state, 'shape', '')}")
    seed_bits, offset = new_state.numpy()
    if offset < 0:
        raise ValueError(f"set_rng_state: the offset must be >= 0, got {offset}")
    default_generator.set_state((int(np.array([seed_bits]).view(np.uint64)[0]), int(offset)))


def host_permutation(n: int, generator: Generator | None = None) -> np.ndarray:
    """A random permutation of ``range(n)`` drawn on the host: the stable argsort of
    one float64 uniform draw of ``n`` values (``nova.core.philox``, the numbers
    ``rand(n, dtype=float64)`` would give for the same key), consuming one key. What
    ``randperm`` and the data loader's shuffling use: no step to compile."""
    n = permutation_length(n)
    return np.argsort(host_uniform(n, generator), kind="stable").astype(np.int64)


def permutation_length(n: Any) -> int:
    """``n`` as ``randperm`` takes it: a non-negative integer (numpy integers too)."""
    try:
        value = operator.index(n) if not isinstance(n, bool) else -1
    except TypeError:
        value = -1
    if value < 0:
        raise ValueError(f"randperm: n must be a non-negative integer, got {n!r}")
    return value


def host_uniform(n: int, generator: Generator | None = None) -> np.ndarray:
    """``n`` float64 uniforms in [0, 1) drawn on the host, consuming one key of the
    generator: the values ``rand(n, dtype=float64)`` gives for that key. Inside an
    ``nv.compile`` capture the call then cannot be replayed (a replay would not draw)."""
    capture_log.refuse("the function draws random numbers on the host (randperm, a "
                       "shuffling sampler or random_split)")
    seed, offset = (generator or default_generator)._next_key_array().view(np.uint64)
    return philox.uniform(int(seed), int(offset), (n,), "float64", np.float64)


def uniform(shape: tuple[int, ...], dtype: dt.DType, generator: Generator | None = None) -> Tensor:
    if not dtype.is_floating_point:
        raise DTypeError(f"rand: dtype must be floating point, got {dtype.name}")
    g = generator or default_generator
    return prim("rng_uniform", [g.next_key()], {}, shape, dtype)


def normal(shape: tuple[int, ...], dtype: dt.DType, generator: Generator | None = None) -> Tensor:
    """Box-Muller over two uniform draws, computed in float32 (float64 for float64)."""
    if not dtype.is_floating_point:
        raise DTypeError(f"randn: dtype must be floating point, got {dtype.name}")
    work = dt.float64 if dtype == dt.float64 else dt.float32
    u1 = sub(1.0, uniform(shape, work, generator))        # in (0, 1]: log is finite
    u2 = uniform(shape, work, generator)
    z = mul(sqrt(mul(log(u1), -2.0)), cos(mul(u2, 2.0 * math.pi)))
    return cast(z, dtype)


def integers(low: int, high: int, shape: tuple[int, ...], dtype: dt.DType,
             generator: Generator | None = None) -> Tensor:
    """Uniform integers in [low, high) from a float64 draw (53 random bits); bool
    takes the integers' truth (the caller keeps [low, high) within [0, 2)); a float
    dtype holds the integers as values, as PyTorch's ``randint(..., dtype=float32)``."""
    if high <= low:
        raise ArgumentError(f"randint: high ({high}) must be greater than low ({low})")
    span = high - low
    u = uniform(shape, dt.float64, generator)
    k = minimum(cast(mul(u, float(span)), dt.int64), span - 1)  # u < 1, guard rounding
    return cast(add(k, low), dtype)

