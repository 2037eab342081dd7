"""Nova: a lazy-tensor deep-learning framework that compiles whole training steps.

``import nova as nv``; the names follow PyTorch's.
"""
from nova import (
    amp, autograd, cuda, debug, distributed, distributions, export, func, linalg, nn, optim,
    signal, special, utils,
)
from nova.amp import autocast, get_autocast_dtype, is_autocast_enabled

from nova.autograd.anomaly_mode import (
    is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled,
)
from nova.autograd.grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from nova.core import dtypes as _dt
from nova.tensor.creation import (
    arange, empty, empty_like, eye, from_numpy, full, full_like, linspace, multinomial, ones,
    ones_like, rand, rand_like, randint, randn, randn_like, randperm, tensor, zeros, zeros_like,
)
from nova.tensor.device import device
from nova.core.dtypes import (
    DType as dtype, bfloat16, can_cast, finfo, float16, float32, float64, get_default_dtype,
    iinfo, int8, int16, int32, int64, promote_types, set_default_dtype, uint8,
)
from nova.tensor.movement import (
    broadcast_tensors, cat, chunk, concatenate, expand, flatten, narrow, permute, repeat,
    reshape, split, squeeze, stack, swapaxes, t, transpose, unbind, unflatten, unsqueeze,
)
from nova.tensor.ops import (
    abs, add, amax, amin, argmax, argmin, bitwise_and, bitwise_not, bitwise_or,
    bitwise_xor, bmm, clamp, clip, cos, eq, erf,
    exp, expm1, gather, ge, gelu, gt, isinf, isnan, le, log, log1p, log_softmax,
    logical_and, logical_not, logical_or, logical_xor, logsumexp, lt, masked_fill, matmul, max, maximum, mean, min,
    minimum, mm, mul, ne, neg, one_hot, pow, reciprocal, relu, rsqrt, scatter, scatter_add,
    sigmoid, silu, sin, softmax, sqrt, square, std, sub, sum, tanh, tril, triu, var, where,
)
from nova.tensor.indexing import index_put
from nova.tensor.elementary import (  # noqa: A004 (torch's names)
    acos, acosh, addcdiv, addcmul, arccos, arcsin, arctan, arctan2, asin, asinh, atan, atan2,
    atanh, clamp_max, clamp_min, cosh, deg2rad, exp2,
    float_power, fmax, fmin, heaviside, hypot, isclose, isfinite, isneginf, isposinf, lerp,
    log2, log10, logaddexp, logit, nan_to_num, nanmean, nansum, rad2deg, sinc, sinh, tan,
    xlogy,
)
from nova.tensor.arrays import (
    addmm, addmv, aminmax, atleast_1d, atleast_2d, atleast_3d, baddbmm, bucketize, clone,
    column_stack, detach, diag, diagonal, diff, dot, dsplit, dstack, ger, hsplit, hstack,
    index_select, is_floating_point, is_tensor, kron, meshgrid, movedim, moveaxis, mv, numel,
    outer, prod, ravel, repeat_interleave, roll, row_stack, searchsorted, select, std_mean,
    take_along_dim, tensor_split, tile, trace, tril_indices, triu_indices, var_mean, vsplit,
    vstack, index_add, index_copy, index_fill, cross, rot90, median, quantile, nonzero,
    nonzero_static, argwhere, masked_select, unique, unique_consecutive, bincount, block_diag,
    cartesian_prod, trapezoid, trapz, logspace, allclose, nanquantile, conj, conj_physical,
    resolve_conj, resolve_neg, is_conj, is_neg, isreal, real, imag, adjoint, hardshrink,
    prelu, masked_scatter, diagonal_scatter, select_scatter, slice_scatter, put, histogram,
    matrix_exp,
)
from nova.tensor.einsum import einsum
from nova.tensor.special import *  # noqa: F401,F403 (its __all__: torch's names)
from nova.tensor.products import (
    addbmm, addr, cdist, diag_embed, diagflat, dist, inner, renorm, tensordot, vdot,
)
from nova.tensor.statistics import corrcoef, cov, histc, isin, kthvalue, nanmedian, take
from nova.tensor.integration import cumulative_trapezoid, gradient
from nova.tensor.more_ops import (
    bitwise_left_shift, bitwise_right_shift, combinations, gcd, index_reduce, lcm, mode,
    scatter_reduce, vander,
)
from nova.tensor.compat import (
    as_tensor, asarray, bernoulli, broadcast_shapes, broadcast_to, equal, fliplr, flipud,
    positive, result_type, rsub, scalar_tensor, swapdims,
)
from nova.tensor.torch_aliases import *  # noqa: F401,F403 (its __all__: torch's names)
from nova.tensor.signal_windows import (
    bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window,
)
from nova.nn.torch_aliases import *  # noqa: F401,F403 (torch's names for F's ops)
from nova.tensor.scan import cummax, cummin, cumprod, cumsum, logcumsumexp
from nova.tensor.sorting import argsort, msort, sort, topk
from nova.tensor.numeric import (  # noqa: A004 (torch's names: any, all, round)
    all, any, ceil, count_nonzero, div, divide, flip, floor, floor_divide, fmod, frac, norm,
    remainder, round, sign, trunc,
)
from nova.tensor.random import (
    Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed,
    set_rng_state,
)
from nova import random  # noqa: E402,F401  (torch.random: fork_rng, manual_seed, ...)
from nova.tensor.printing import set_printoptions
from nova.tensor.legacy import CPU_TYPES as _LEGACY_TYPES, Size
from nova import jit
from nova.func_transforms import vmap
from nova import backends
from nova.backends import (
    are_deterministic_algorithms_enabled, get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled, set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from nova.tensor.realize import RealizationError, realize
from nova.runtime.engine import engine, get_engine, get_remat, set_engine, set_remat
from nova.runtime.memory_plan import NovaOutOfMemoryError
from nova.runtime.memory_plan import NovaOutOfMemoryError as OutOfMemoryError  # torch's name
from nova.runtime.threads import get_num_threads, set_num_threads
from nova.serialization import CheckpointError, load, save
from nova.tensor.tensor import Tensor, layout, strided
from nova.capture import CaptureError, compile  # noqa: A001 (torch.compile's name)

# torch's other names for the same functions
concat = cat
multiply, subtract, negative, true_divide = mul, sub, neg, div
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
absolute, fix, sgn = abs, trunc, sign
arccosh, arcsinh, arctanh = acosh, asinh, atanh
from nova import decompositions as _decompositions  # noqa: E402
# (torch.det's argument is ``input``, torch.linalg.det's ``A``: two functions)
det, slogdet = _decompositions.legacy_det, _decompositions.legacy_slogdet
inverse, logdet = _decompositions.legacy_inverse, linalg.logdet
matrix_power = linalg.matrix_power
from nova.decompositions_spectral import legacy_qr as qr, legacy_svd as svd, pinverse  # noqa: E402
from nova.linalg_legacy import (  # noqa: E402 (torch's pre-linalg names)
    chain_matmul, cholesky, cholesky_inverse, cholesky_solve, eig, lstsq, lu, lu_solve,
    lu_unpack, matrix_rank, solve, symeig, triangular_solve,
)

# The legacy tensor types (torch.FloatTensor ...: constructors and isinstance tests)
FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor = (
    _LEGACY_TYPES[n] for n in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor"))
IntTensor, LongTensor, BoolTensor = (
    _LEGACY_TYPES[n] for n in ("IntTensor", "LongTensor", "BoolTensor"))
ByteTensor, CharTensor, ShortTensor = (
    _LEGACY_TYPES[n] for n in ("ByteTensor", "CharTensor", "ShortTensor"))

bool = _dt.bool_
float = _dt.float32
double = _dt.float64
half = _dt.float16
long = _dt.int64
int = _dt.int32
short = _dt.int16

__version__ = "0.1.0"
from nova import version  # noqa: E402  (torch.version: __version__, cuda, git_version)

from nova.tensor.sampling_ops import (  # noqa: E402
    _sample_dirichlet, _standard_gamma, binomial, normal, poisson, randint_like,
)
from nova.tensor.sampling_ops import gammainc as igamma, gammaincc as igammac  # noqa: E402

from nova.tensor.strided import as_strided, narrow_copy, unsafe_chunk, unsafe_split  # noqa: E402
from nova.tensor.histogramdd import histogramdd  # noqa: E402

# PyTorch's ``out=`` on the functions that take it there (one wrapper, installed last).
from nova.tensor import out_arg as _out_arg  # noqa: E402

_out_arg.install(globals(), _out_arg.TORCH_OUT)
_out_arg.install(vars(linalg), _out_arg.TORCH_LINALG_OUT)
_out_arg.install(vars(special), _out_arg.TORCH_SPECIAL_OUT)

# Complex tensors (pairs of real tensors, ``nova.tensor.complex``): the functions it
# names take complex arguments and complex ``dtype=``s (wrapped last, over ``out=``).
from nova.core.dtypes import complex64, complex128  # noqa: E402
from nova.tensor import complex_creation as _complex  # noqa: E402
from nova.tensor.complex import (  # noqa: E402
    ComplexTensor, angle, complex, polar, view_as_complex, view_as_real,
)

cfloat, cdouble = complex64, complex128
_out_arg.install(globals(), _out_arg.TORCH_OUT)   # (angle, complex, polar: imported above)
_complex.install(globals())
from nova import linalg_complex as _linalg_complex  # noqa: E402
from nova.tensor.complex_math import LINALG_FUNCTIONS as _complex_linalg  # noqa: E402

_complex.install(vars(linalg), {**_complex_linalg, **_linalg_complex.FUNCTIONS})
_complex.share_wrappers(vars(special), globals())
from nova import fft  # noqa: E402

_out_arg.install(vars(fft), _out_arg.TORCH_FFT_OUT)
_out_arg.install(vars(nn.functional), _out_arg.TORCH_NN_FUNCTIONAL_OUT)

# PyTorch 2.13 names (issue #22): spectral, factories, interchange, ATen forms.
from nova.spectral_stft import istft, stft  # noqa: E402
from nova.tensor.device import get_default_device, set_default_device  # noqa: E402
from nova.tensor.creation import empty_strided, frombuffer  # noqa: E402
from nova.tensor.dlpack import from_dlpack  # noqa: E402
from nova.tensor.layout_info import is_inference  # noqa: E402
from nova.aten_functional import constant_pad_nd, convolution  # noqa: E402
from nova import profiler  # noqa: E402,F401  (torch.profiler: profile, record_function)
from nova import cpu  # noqa: E402,F401  (torch.cpu: amp.autocast, device queries)
from nova import testing  # noqa: E402,F401  (torch.testing: assert_close, make_tensor)
from nova import compiler  # noqa: E402,F401  (torch.compiler: is_compiling, disable)
from nova.torch_misc import (  # noqa: E402
    get_num_interop_threads, set_default_tensor_type, set_num_interop_threads, typename,
)
from nova.core.memory_format import (  # noqa: E402,F401  (torch.channels_last, ...)
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from nova.foreach import FOREACH_OPS as _FOREACH_OPS  # noqa: E402
globals().update(_FOREACH_OPS)  # torch._foreach_lerp_, _foreach_mul_, _foreach_norm, ...

import math as _math  # noqa: E402
# torch.pi / torch.e / torch.inf / torch.nan: Python floats, as PyTorch's
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan

# Last, over every function and method installed above: PyTorch's NumPy-style keyword
# aliases (``x.sum(axis=-1)``, ``nv.cat(ts, axis=1)``, ``keepdims=``).
from nova.tensor import numpy_aliases as _numpy_aliases  # noqa: E402
for _namespace in (globals(), vars(special), vars(linalg), vars(nn.functional)):
    _numpy_aliases.install(_namespace)
_numpy_aliases.install_methods(Tensor)
