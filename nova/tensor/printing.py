"""How tensors print: ``nv.set_printoptions``, PyTorch's options over numpy's printer.

Process-wide, as PyTorch's. ``Tensor.__repr__`` reads ``OPTIONS`` each time.
"""
from __future__ import annotations

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
    always scientific, False: never, None: numpy's choice)."""
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


def array_text(arr: Any, prefix: str) -> str:
    """``arr`` printed with the options (numpy's printer, PyTorch's separators)."""
    import numpy as np
    sci = OPTIONS["sci_mode"]
    formatter = None
    if sci is True and arr.dtype.kind == "f":
        p = OPTIONS["precision"]
        formatter = {"float_kind": lambda v: np.format_float_scientific(v, precision=p, unique=False)}
    return np.array2string(arr, separator=", ", prefix=prefix,
                           precision=OPTIONS["precision"], threshold=OPTIONS["threshold"],
                           edgeitems=OPTIONS["edgeitems"], max_line_width=OPTIONS["linewidth"],
                           suppress_small=sci is False, formatter=formatter)
