"""``nv.stft`` / ``nv.istft``: PyTorch's short-time Fourier transform and its inverse.

Built from the pieces ``nova.fft`` records (DFT-matrix products, complex results as
``ComplexTensor`` pairs): framing is ``Tensor.unfold``, the window a product, the
centring pad an index gather (reflect, replicate, circular) or a concatenation
(constant), the inverse's overlap-add a sum of shifted frame chunks. So both are
recorded, fused and differentiated as any real computation (a window that requires
grad gets its gradient too), on every engine.

As PyTorch 2.x: real input needs ``return_complex=True`` (``None`` raises,
``False`` warns and returns ``view_as_real`` of the result); ``istft`` takes complex
input only and checks the NOLA condition (the overlapped squared window nowhere below
1e-11), which reads the envelope on the host.
"""
from __future__ import annotations

import builtins
import warnings
from typing import Any

import numpy as np

from nova import fft as _fft
from nova.nn import functional as _F
from nova.core import dtypes as dt
from nova.tensor import creation as _creation
from nova.tensor import movement as _movement
from nova.tensor.constants import constant
from nova.tensor.complex import ComplexTensor, view_as_real
from nova.tensor.tensor import Tensor

__all__ = ["stft", "istft"]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
_NO_WINDOW = ("A window was not provided. A rectangular window will be applied, which is "
              "known to cause spectral leakage. Other windows such as nv.hann_window or "
              "nv.hamming_window are recommended to reduce spectral leakage. To suppress "
              "this warning and use a rectangular window, explicitly set "
              "`window=nv.ones(n_fft)`.")
_NO_WINDOW_INVERSE = ("A window was not provided. A rectangular window will be applied. "
                      "Please provide the same window used by stft to make the inversion "
                      "lossless. To suppress this warning and use a rectangular window, "
                      "explicitly set `window=nv.ones(n_fft)`.")


# ---------------------------------------------------------------- argument checks

def _int_arg(op: str, name: str, value: Any) -> int:
    if isinstance(value, builtins.bool) or not isinstance(value, (builtins.int, np.integer)):
        raise TypeError(f"{op}: argument '{name}' must be int, not {type(value).__name__}")
    return builtins.int(value)


def _describe(x: Any) -> str:
    return f"{x.dtype.name}{list(x.shape)}"


def _lengths(op: str, n_fft: Any, hop_length: Any, win_length: Any) -> tuple[int, int, int]:
    """``n_fft``, ``hop_length`` (default ``n_fft // 4``) and ``win_length`` (default
    ``n_fft``) as ints."""
    n_fft = _int_arg(op, "n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else _int_arg(op, "hop_length", hop_length)
    win = n_fft if win_length is None else _int_arg(op, "win_length", win_length)
    return n_fft, hop, win


def _full_window(op: str, window: Any, win: int, n_fft: int, like: Any,
                 bad_shape: str) -> Any:
    """The window as ``n_fft`` points: ``window`` -- ``win`` ones when None, as
    PyTorch's -- zero-padded on both sides (left ``(n_fft - win) // 2``), as PyTorch
    centres a short window."""
    if window is None:
        dtype = like.dtype.real if isinstance(like, ComplexTensor) else like.dtype
        window = _creation.ones(win, dtype=dtype, device=like.device)
    if not isinstance(window, (Tensor, ComplexTensor)):
        raise TypeError(f"{op}: window must be a Tensor or None, got {type(window).__name__}")
    if window.ndim != 1 or window.shape[0] != win:
        raise RuntimeError(bad_shape.format(shape=list(window.shape)))
    left = (n_fft - win) // 2
    if left == 0 and win == n_fft:
        return window
    parts = (window.real, window.imag) if isinstance(window, ComplexTensor) else (window,)
    padded = [_movement.cat([_creation.zeros(left, dtype=p.dtype, device=p.device), p,
                             _creation.zeros(n_fft - win - left, dtype=p.dtype,
                                             device=p.device)]) for p in parts]
    return ComplexTensor(*padded) if len(padded) == 2 else padded[0]


def _pad_indices(op: str, mode: str, length: int, pad: int, shape: list[int]) -> np.ndarray:
    """Source positions of the ``pad``-padded signal for the gather modes, refusing the
    pads PyTorch's ``F.pad`` refuses."""
    if mode == "reflect" and pad >= length:
        raise RuntimeError(f"{op}: Argument #4: Padding size should be less than the "
                           f"corresponding input dimension, but got: padding ({pad}, {pad}) "
                           f"at dimension {len(shape) - 1} of input {shape}")
    if mode == "circular" and pad > length:
        raise RuntimeError(f"{op}: Padding value causes wrapping around more than once "
                           f"(padding ({pad}, {pad}) of input {shape})")
    if length == 0:
        raise RuntimeError(f"{op}: cannot pad an empty signal (input {shape}) in "
                           f"{mode} mode")
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    return np.pad(np.arange(length), pad, mode=np_mode)


def _center_pad(op: str, x: Any, pad: int, mode: str) -> Any:
    """``x`` padded by ``pad`` on both sides of its last dimension in ``mode``."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"{op}: Unrecognised padding mode {mode}; valid modes: "
                                  f"{', '.join(_PAD_MODES)}")
    if pad == 0:
        return x
    if mode == "constant":
        return _zero_pad_last(x, pad, pad)
    shape = [1] * (3 - x.ndim) + list(x.shape)
    idx = _pad_indices(op, mode, x.shape[-1], pad, shape)
    return x.index_select(-1, constant(idx, dtype=dt.int64, device=x.device))


# ---------------------------------------------------------------- stft

def _check_stft_input(op: str, input: Any) -> None:
    if not isinstance(input, (Tensor, ComplexTensor)):
        raise TypeError(f"{op}: expected a Tensor as input, got {type(input).__name__}")
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a tensor of floating point or complex values, "
                           f"got {input.dtype.name}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1D or 2D tensor, got input of shape "
                           f"{list(input.shape)}")


def stft(input: Any, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Any = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Any:
    """The short-time Fourier transform (``torch.stft``): for a signal of shape
    ``(B?, L)``, the DFT of every ``n_fft``-point frame, ``hop_length`` apart, times
    ``window``: a complex tensor of shape ``(B?, n_freq, n_frames)``, ``n_freq`` being
    ``n_fft // 2 + 1`` when ``onesided`` (the default for a real signal and window).

    ``center`` pads the signal by ``n_fft // 2`` on both sides (``pad_mode``) so frame
    ``t`` is centred at ``t * hop_length``; ``normalized`` scales by ``n_fft ** -0.5``;
    ``align_to_window`` (with ``center=False`` only) starts each frame at its window's
    first point, a short window then fitting ``1 + (L - win_length) // hop_length``
    frames."""
    op = "stft"
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    _check_stft_input(op, input)
    complex_in = isinstance(input, ComplexTensor) or isinstance(window, ComplexTensor)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True "
                               "in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch "
                      "release, stft will return complex tensors for all inputs, and "
                      "return_complex=False will raise an error. Note: you can still call "
                      "nv.view_as_real on the complex output to recover the old return "
                      "format.", UserWarning, stacklevel=2)
    n_fft, hop, win = _lengths(op, n_fft, hop_length, win_length)
    if center:
        input = _center_pad(op, input, n_fft // 2, pad_mode)
    out = _frames_dft(op, input, n_fft, hop, win, window, normalized, onesided,
                      complex_in, bool(align_to_window))
    return out if return_complex else view_as_real(out)


def _frames_dft(op: str, x: Any, n_fft: int, hop: int, win: int, window: Any,
                normalized: bool, onesided: bool | None, complex_in: bool,
                align: bool) -> ComplexTensor:
    """The windowed frames of the (already padded) ``x`` and their DFTs, as
    ``(B?, n_freq, n_frames)``."""
    length = x.shape[-1]
    call = (f"{op}({_describe(x)}, n_fft={n_fft}, hop_length={hop}, win_length={win}, "
            f"window={None if window is None else _describe(window)})")
    if not 0 < n_fft <= length:
        raise RuntimeError(f"{call}: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{call}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{call}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    if onesided is None:
        onesided = not complex_in
    elif onesided and complex_in:
        raise RuntimeError(f"{op}: Cannot have onesided output if window or input is complex")
    if window is None:
        warnings.warn(_NO_WINDOW, UserWarning, stacklevel=3)
    w = _full_window(op, window, win, n_fft, x,
                     f"{call}: expected a 1D window tensor of size equal to win_length="
                     f"{win}, but got window with size {{shape}}")
    if align and win < n_fft:        # each frame starts at its window's first point
        left = (n_fft - win) // 2
        x = _zero_pad_last(x, left, n_fft - win - left)
    frames = x.unfold(-1, n_fft, hop) * w                    # (B?, n_frames, n_fft)
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if onesided else \
        _fft.fft(frames, dim=-1, norm=norm)
    return spec.transpose(-1, -2)


def _zero_pad_last(x: Any, left: int, right: int) -> Any:
    """``x`` (real or complex) with ``left`` and ``right`` zeros on its last dim."""
    return _F.pad(x, (left, right))


# ---------------------------------------------------------------- istft

def _overlap_add(frames: Tensor, hop: int) -> Tensor:
    """Frames ``(B, T, n)`` placed ``hop`` apart and summed: ``(B, n + hop * (T - 1))``.

    Each frame is cut into ``K = ceil(n / hop)`` chunks of ``hop`` points; chunk ``k``
    of frame ``t`` lands in output block ``t + k``, so the sum over ``k`` of the chunk
    planes shifted by ``k`` blocks is the overlap-add (``K`` shifted adds, no scatter)."""
    b, t, n = frames.shape
    k = -(-n // hop)
    if k * hop != n:
        frames = _zero_pad_last(frames, 0, k * hop - n)
    chunks = frames.reshape(b, t, k, hop)
    total = None
    for i in range(k):
        plane = chunks.select(2, i)                                     # (B, T, hop)
        shifted = _F.pad(plane, (0, 0, i, k - 1 - i))                   # (B, T + K - 1, hop)
        total = shifted if total is None else total + shifted
    return total.reshape(b, (t + k - 1) * hop).narrow(1, 0, n + hop * (t - 1))


def _check_istft_input(op: str, input: Any, call: str) -> ComplexTensor:
    if isinstance(input, Tensor):
        raise RuntimeError(f"{op}: istft requires a complex-valued input tensor matching "
                           "the output from stft with return_complex=True.")
    if not isinstance(input, ComplexTensor):
        raise TypeError(f"{op}: expected a complex Tensor as input, got "
                        f"{type(input).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{call}: expected a tensor with 3 or 4 dimensions, but got "
                           f"{input.ndim + 1} (the complex input of shape "
                           f"{list(input.shape)} viewed as real)")
    return input


def istft(input: Any, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Any = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Any:
    """The inverse short-time Fourier transform (``torch.istft``): the least-squares
    signal whose ``stft`` (same arguments) is ``input`` of shape ``(B?, n_freq,
    n_frames)``: the frames' inverse DFTs times the window, overlap-added and divided
    by the overlap-added squared window (which must be nowhere near zero: NOLA).

    ``onesided`` defaults to ``n_freq != n_fft``; ``length`` trims (or zero-pads, with
    a warning) the result to that many points; ``return_complex=False`` (the default)
    treats the input as the transform of a real signal."""
    op = "istft"
    n_fft, hop, win = _lengths(op, n_fft, hop_length, win_length)
    z = input
    call = (f"{op}({_describe(z) if hasattr(z, 'dtype') else type(z).__name__}, "
            f"n_fft={n_fft}, hop_length={hop}, win_length={win}, window="
            f"{None if window is None else _describe(window)}, center={builtins.int(center)}, "
            f"normalized={builtins.int(normalized)}, onesided={onesided}, length={length}, "
            f"return_complex={builtins.int(return_complex)})")
    z = _check_istft_input(op, z, call)
    batched = z.ndim == 3
    if not batched:
        z = z.unsqueeze(0)
    n_freq, n_frames = z.shape[1], z.shape[2]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided and n_fft // 2 + 1 != n_freq:
        raise RuntimeError(f"{call} : expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft / 2 + 1 when onesided=True, but "
                           f"got {n_freq}")
    if not onesided and n_fft != n_freq:
        raise RuntimeError(f"{call} : expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft when onesided=False, but got "
                           f"{n_freq}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{call} : expected 0 < win_length <= n_fft")
    if not 0 < hop <= win:
        raise RuntimeError(f"{call} : expected 0 < hop_length <= win_length")
    if window is not None and (window.ndim != 1 or window.shape[0] != win):
        raise RuntimeError(f"{call} : Invalid window shape. window has to be 1D and length "
                           "of `win_length`")
    if n_frames == 0:
        raise RuntimeError(f"{call} : input tensor cannot be empty.")
    if window is None:
        warnings.warn(_NO_WINDOW_INVERSE, UserWarning, stacklevel=2)
    w = _full_window(op, window, win, n_fft, z, "")
    frames = _inverse_frames(op, z.transpose(1, 2), n_fft, onesided, return_complex,
                             normalized, w)
    return _assemble(call, frames, w, n_fft, hop, center, length, batched)


def _inverse_frames(op: str, spec: ComplexTensor, n_fft: int, onesided: bool,
                    return_complex: bool, normalized: bool, w: Any) -> Any:
    """Each frame's inverse DFT times the window: ``(B, n_frames, n_fft)``."""
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise RuntimeError(f"{op}: Cannot have onesided output if window or input is "
                               "complex")
        return _fft.ifft(spec, dim=-1, norm=norm) * w
    if isinstance(w, ComplexTensor):
        raise RuntimeError(f"{op}: Complex windows are incompatible with "
                           "return_complex=False")
    if not onesided:
        spec = spec.narrow(-1, 0, n_fft // 2 + 1)
    return _fft.irfft(spec, n=n_fft, dim=-1, norm=norm) * w


def _assemble(call: str, frames: Any, w: Any, n_fft: int, hop: int, center: bool,
              length: int | None, batched: bool) -> Any:
    """Overlap-add, trim, divide by the window envelope (after the NOLA check), pad."""
    n_frames = frames.shape[1]
    expected = n_fft + hop * (n_frames - 1)
    if isinstance(frames, ComplexTensor):
        y = ComplexTensor(_overlap_add(frames.real, hop), _overlap_add(frames.imag, hop))
    else:
        y = _overlap_add(frames, hop)
    w2 = (w * w.conj()).real if isinstance(w, ComplexTensor) else w * w
    env = _overlap_add(w2.reshape(1, 1, n_fft).expand(1, n_frames, n_fft), hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + _int_arg("istft", "length", length)
    else:
        end = expected - n_fft // 2 if center else expected
    stop = builtins.min(end, expected)
    y, env = y.narrow(1, start, builtins.max(stop - start, 0)), \
        env.narrow(1, start, builtins.max(stop - start, 0))
    if env.numel() and builtins.bool((env.abs() < 1e-11).any().item()):
        raise RuntimeError(f"{call} window overlap add min: the squared window overlap-"
                           "added is below 1e-11 somewhere (the NOLA condition fails): "
                           "choose a window and hop_length whose frames cover every point")
    y = y / env
    if end > expected:
        warnings.warn("The length of signal is shorter than the length parameter. Result is "
                      "being padded with zeros in the tail. Please check your center and "
                      "hop_length settings.", UserWarning, stacklevel=3)
        y = _zero_pad_last(y, 0, end - expected)
    return y if batched else y.squeeze(0)


def _stft_method(self: Any, n_fft: int, hop_length: int | None = None,
                 win_length: int | None = None, window: Any = None, center: bool = True,
                 pad_mode: str = "reflect", normalized: bool = False,
                 onesided: bool | None = None, return_complex: bool | None = None,
                 align_to_window: bool | None = None) -> Any:
    return stft(self, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
                onesided, return_complex, align_to_window)


def _istft_method(self: Any, n_fft: int, hop_length: int | None = None,
                  win_length: int | None = None, window: Any = None, center: bool = True,
                  normalized: bool = False, onesided: bool | None = None,
                  length: int | None = None, return_complex: bool = False) -> Any:
    return istft(self, n_fft, hop_length, win_length, window, center, normalized, onesided,
                 length, return_complex)


_stft_method.__name__, _stft_method.__doc__ = "stft", "``nv.stft(self, ...)``."
_istft_method.__name__, _istft_method.__doc__ = "istft", "``nv.istft(self, ...)``."

# Tensor and ComplexTensor methods (``x.stft(...)``), installed here: the tensor package
# sits below ``nova.fft`` and cannot import it.
for _cls in (Tensor, ComplexTensor):
    _cls.stft = _stft_method
    _cls.istft = _istft_method
del _cls
