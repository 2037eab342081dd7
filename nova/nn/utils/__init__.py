"""``nv.nn.utils``: PyTorch's ``torch.nn.utils``.

Gradient clipping and norms (recorded into the step, no host round trip), parameters
as one vector, sequence padding and packing (``rnn``), parametrizations (``parametrize``,
``parametrizations.orthogonal`` / ``weight_norm`` / ``spectral_norm``), ``stateless``
(the deprecated ``functional_call``), the older hook-based
``weight_norm`` and ``spectral_norm``, pruning (``prune``), BatchNorm folding (``fuse_*``)
and ``skip_init``.
"""
from nova.nn.utils import parametrizations, parametrize, prune, rnn, stateless
from nova.nn.utils.clip_grad import (
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
)
from nova.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from nova.nn.utils.fusion import (
    fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights,
)
from nova.nn.utils.init import skip_init
from nova.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from nova.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "get_total_norm", "parameters_to_vector",
           "parametrizations", "parametrize", "prune", "remove_spectral_norm", "remove_weight_norm",
           "rnn", "skip_init", "spectral_norm", "stateless", "vector_to_parameters", "weight_norm"]
