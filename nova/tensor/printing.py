"""How tensors print: ``nv.set_printoptions`` and PyTorch's number format and layout.

Process-wide, as PyTorch's. ``Tensor.__repr__`` reads ``OPTIONS`` each time.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=2**63 - 1, edgeitems=3, linewidth=80)}

OPTIONS: dict[str, Any] = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """``torch.set_printoptions``: digits after the point, the element count past
    which a tensor prints summarized (``edgeitems`` per end), the line width, a
    ``profile`` ("default", "short", "full") applied first, and ``sci_mode`` (True:
    always scientific, False: never, None: PyTorch's choice, ``float_format``)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, "
                             f"got {profile!r}")
        OPTIONS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be a non-negative int, "
                                 f"got {value!r}")
            OPTIONS[name] = value
    if sci_mode is not None or profile is not None:
        OPTIONS["sci_mode"] = sci_mode


# dtypes a nonempty tensor's printed values imply (float32 even when empty)
_IMPLIED = ("float32", "int64", "bool", "complex64")


def tensor_text(arr: Any, shape: tuple[int, ...], dtype: Any, cuda: bool = False,
                extra: tuple[str, ...] = ()) -> str:
    """A tensor's repr, as PyTorch's: ``tensor(`` + ``array_text`` + its suffixes --
    the size of an empty tensor of more than one dim, the device, a dtype its values do
    not imply, then ``extra`` (``grad_fn=<...>``) -- each after ``", "``, or on a line
    of its own (indented under the numbers) when it would pass ``linewidth``."""
    suffixes = [f"size={tuple(shape)}"] if arr.size == 0 and arr.ndim != 1 else []
    if cuda:
        suffixes.append("device='cuda:0'")
    if dtype.name not in _IMPLIED or (arr.size == 0 and dtype.name != "float32"):
        suffixes.append(f"dtype={dtype}")
    prefix = "tensor("
    text = prefix + array_text(arr, prefix)
    last = len(text) - text.rfind("\n") - 1
    for suffix in [*suffixes, *extra]:
        if last + len(suffix) + 2 > OPTIONS["linewidth"]:
            text += ",\n" + " " * len(prefix) + suffix
            last = len(prefix) + len(suffix)
        else:
            text += ", " + suffix
            last += len(suffix) + 2
    return text + ")"


def array_text(arr: Any, prefix: str) -> str:
    """``arr`` printed with the options, laid out as PyTorch lays out a tensor: nested
    brackets, ``", "`` between numbers, a fixed count of them per line (as many
    padded numbers as fit in ``linewidth`` after the ``prefix``), ``edgeitems`` at each
    end of every dim once the tensor has more than ``threshold`` elements (``" ..."``
    in a row, ``"..."`` for rows), and the number format ``float_format`` picks from
    the numbers shown (``complex_format`` for complex arrays)."""
    summarize = arr.size > OPTIONS["threshold"]
    shown = _shown(arr) if summarize else arr
    if arr.dtype.kind == "c":
        fmt = complex_format(shown)
    elif arr.dtype.kind == "f":
        fmt = float_format(shown)
    else:
        width = max(map(len, map(str, shown.reshape(-1).tolist())), default=0)

        def fmt(v: Any) -> str:
            return str(v).rjust(width)
    if arr.ndim == 0:
        return fmt(arr.item())
    if arr.size == 0:
        return "[]"         # (the caller adds the size when it has more than one dim)
    width = max(len(fmt(v)) for v in shown.reshape(-1).tolist())
    return _nested(arr, len(prefix), fmt, width, summarize)


def complex_format(arr: Any) -> Callable[[complex], str]:
    """PyTorch's complex numbers: the real part in the format ``float_format`` picks
    for the real parts (padded to their width), then the imaginary part in the one it
    picks for the imaginary parts, signed, unpadded, and ``j``: ``1.5000+2.2500j``."""
    real, imag = float_format(arr.real), float_format(arr.imag)

    def fmt(v: complex) -> str:
        im = imag(v.imag).lstrip() + "j"
        return real(v.real) + (im if im[0] in "+-" else "+" + im)
    return fmt


def _nested(arr: Any, indent: int, fmt: Callable[[Any], str], width: int,
            summarize: bool) -> str:
    """Dim by dim: a row of numbers (``_row``), or rows of rows separated by ``",\n"``
    (a blank line more per dim below) and indented under their bracket."""
    edge = OPTIONS["edgeitems"]
    if arr.ndim == 1:
        return _row(arr, indent, fmt, width, summarize)
    n = arr.shape[0]
    elided = summarize and n > 2 * edge
    parts = [_nested(arr[i], indent + 1, fmt, width, summarize)
             for i in ([*range(edge), *range(n - edge, n)] if elided else range(n))]
    if elided:
        parts.insert(edge, "...")
    glue = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + glue.join(parts) + "]"


def _row(arr: Any, indent: int, fmt: Callable[[Any], str], width: int,
         summarize: bool) -> str:
    edge, n = OPTIONS["edgeitems"], arr.shape[0]
    values = arr.tolist()
    if summarize and n > 2 * edge:
        items = [fmt(v) for v in values[:edge]] + [" ..."] + [fmt(v) for v in values[-edge:]]
    else:
        items = [fmt(v) for v in values]
    per_line = max(1, (OPTIONS["linewidth"] - indent) // (width + 2))
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _shown(arr: Any) -> Any:
    """The elements a summarized print shows: ``edgeitems`` at each end of every dim
    longer than twice that."""
    import numpy as np
    edge = OPTIONS["edgeitems"]
    for axis, n in enumerate(arr.shape):
        if n > 2 * edge:
            arr = np.concatenate([arr.take(range(edge), axis),
                                  arr.take(range(n - edge, n), axis)], axis)
    return arr


def float_format(arr: Any) -> Callable[[float], str]:
    """How PyTorch prints each number of a floating tensor, chosen from its nonzero
    finite values with ``p = precision`` digits: all integral -> ``2.`` (scientific
    when the largest is over 1e8 or 1000 times the smallest); otherwise ``2.5000`` (p
    decimals), scientific (``2.5000e-05``) when the largest is over 1e8, the smallest
    under 1e-4, or their ratio over 1000. ``sci_mode`` True or False overrides that
    choice (not for a tensor without such values: it prints ``0.``, ``nan``). Numbers
    are right-aligned to the widest of those values' texts in the format chosen (NaN
    and infinities print as ``nan``, ``inf``, ``-inf``, padded alike)."""
    import numpy as np
    p = OPTIONS["precision"]
    signed = arr[np.isfinite(arr) & (arr != 0)].astype(np.float64)
    values = np.abs(signed)
    integral = bool(np.all(values == np.ceil(values)))
    sci = False
    width = 1
    if values.size:      # (none: ``2.``-style, whatever ``sci_mode`` says, as PyTorch)
        lo, hi = values.min(), values.max()
        sci = hi / lo > 1000.0 or hi > 1.0e8 or (not integral and lo < 1.0e-4) \
            if OPTIONS["sci_mode"] is None else OPTIONS["sci_mode"]
        # the width of the format chosen, after ``sci_mode``'s override
        if sci:
            width = max(len(f"{v:.{p}e}") for v in signed)
        elif integral:
            width = max(len(f"{v:.0f}") + 1 for v in signed)
        else:
            width = max(len(f"{v:.{p}f}") for v in signed)

    def fmt(v: float) -> str:
        v = float(v)
        if sci:
            text = f"{v:.{p}e}"
        elif integral:
            text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            text = f"{v:.{p}f}"
        return text.rjust(width)
    return fmt
