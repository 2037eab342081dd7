"""Exhaustive check of a float32 math op of the CPU engine against float64 numpy (scipy
for erf): every positive finite float32 (2^31 - 2^23 values, in chunks of 2^24), and the
negative ones too for the ops whose code is not odd or even by construction
(``SIGNED``: exp, expm1, log1p; sin, cos, tanh and erf apply the sign to the result,
and log of a negative is NaN), printing the worst ulp error so far after each chunk.

Run: ``python tools/check_float32_math.py sin cos`` (a few minutes per op and sign on
2 cores). ``tests/compiler/test_cpu_math.py`` samples every magnitude in the normal
suite; this is the full sweep behind the README's worst errors over every float32.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import scipy.special as sp

import nova as nv

REFERENCES = {"sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log, "tanh": np.tanh,
              "expm1": np.expm1, "log1p": np.log1p, "erf": sp.erf}
SIGNED = {"exp", "expm1", "log1p"}
CHUNK = 1 << 24
END = 0x7F800000            # the bits of +inf: every positive finite float32 is below
SIGN = 0x80000000


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in float32 ulps of the correctly rounded ``ref``."""
    with np.errstate(over="ignore"):
        spacing = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    spacing = np.maximum(spacing, np.finfo(np.float32).smallest_subnormal)
    return np.abs(got.astype(np.float64) - ref) / spacing


def main(names: list[str]) -> None:
    warnings.simplefilter("ignore")
    worst = {name: (0.0, 0.0) for name in names}
    signs = (0, SIGN) if SIGNED & set(names) else (0,)
    for sign in signs:
        for start in range(0, END, CHUNK):
            x = (np.arange(start, min(start + CHUNK, END), dtype=np.uint32)
                 | np.uint32(sign)).view(np.float32)
            _check(names if not sign else [n for n in names if n in SIGNED], x, worst)
            print(f"{'-' if sign else ''}{start:#010x}: " + ", ".join(
                f"{n} {e:.3f} ulp at {at:.9g}" for n, (e, at) in worst.items()), flush=True)
    print("worst: " + ", ".join(f"{n} {e:.3f} ulp at {at:.9g}" for n, (e, at) in worst.items()))


def _check(names: list[str], x: np.ndarray, worst: dict[str, tuple[float, float]]) -> None:
    """Fold the worst ulp error of each op over ``x`` into ``worst``."""
    with np.errstate(all="ignore"):
        reference = x.astype(np.float64)
        for name in names:
            ref = REFERENCES[name](reference)
            got = getattr(nv, name)(nv.from_numpy(x)).numpy()
            finite = np.isfinite(ref) & (np.abs(ref) < np.finfo(np.float32).max)
            errors = ulp_errors(got[finite], ref[finite])
            if errors.size and errors.max() > worst[name][0]:
                i = int(errors.argmax())
                worst[name] = (float(errors[i]), float(x[finite][i]))


if __name__ == "__main__":
    main(sys.argv[1:] or ["sin", "cos"])
