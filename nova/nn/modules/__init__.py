"""``torch.nn.modules``: the layer classes under the submodule names PyTorch files them
in, for code that imports or tests them there (``nn.modules.batchnorm._BatchNorm``,
``from torch.nn.modules.loss import _Loss``, ``nn.modules.conv._ConvNd``). The classes
are ``nova.nn``'s own: ``SUBMODULES`` maps each of PyTorch's submodule names to the
names it holds, and each becomes a module object registered under
``nova.nn.modules.<name>`` (so ``import`` and ``from ... import`` find it).
``nova.nn.modules.module`` also holds the hooks common to every module
(``register_module_forward_hook`` and kin). ``utils`` (``_pair`` and friends) is a file
of its own."""
from __future__ import annotations

import sys
import types

from nova.nn import (
    activation, adaptive, conv_layers, conv_transpose, fractional_pool, layers, lazy, losses,
    module, normalization, padding, unpool,
)
from nova.nn.modules import utils  # noqa: F401  (nn.modules.utils)

# PyTorch's submodule -> (the Nova module holding each name, the names)
SUBMODULES: dict[str, tuple[tuple[types.ModuleType, tuple[str, ...]], ...]] = {
    "module": ((module, ("Module", "_IncompatibleKeys", "register_module_backward_hook",
                         "register_module_buffer_registration_hook",
                         "register_module_forward_hook", "register_module_forward_pre_hook",
                         "register_module_full_backward_hook",
                         "register_module_full_backward_pre_hook",
                         "register_module_module_registration_hook",
                         "register_module_parameter_registration_hook")),),
    "linear": ((layers, ("Bilinear", "Identity", "Linear", "NonDynamicallyQuantizableLinear")),
               (lazy, ("LazyLinear",))),
    "conv": ((conv_layers, ("Conv1d", "Conv2d", "Conv3d", "_ConvNd")),
             (conv_transpose, ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                               "_ConvTransposeNd")),
             (lazy, ("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                     "LazyConvTranspose2d", "LazyConvTranspose3d"))),
    "batchnorm": ((normalization, ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                                   "_BatchNorm", "_NormBase")),
                  (lazy, ("LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"))),
    "instancenorm": ((normalization, ("InstanceNorm1d", "InstanceNorm2d",
                                      "InstanceNorm3d", "_InstanceNorm")),
                     (lazy, ("LazyInstanceNorm1d", "LazyInstanceNorm2d",
                             "LazyInstanceNorm3d"))),
    "normalization": ((normalization, ("GroupNorm", "LocalResponseNorm")),
                      (layers, ("LayerNorm", "RMSNorm"))),
    "activation": ((activation, ("CELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish",
                                 "Hardtanh", "PReLU", "RReLU", "ReLU6", "SELU", "Softmax2d",
                                 "Softmin", "Softshrink", "Softsign", "Tanhshrink",
                                 "Threshold")),
                   (layers, ("ELU", "GELU", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish",
                             "ReLU", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh"))),
    "loss": ((losses, ("BCELoss", "BCEWithLogitsLoss", "CosineEmbeddingLoss",
                       "CrossEntropyLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
                       "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "MarginRankingLoss",
                       "MultiLabelSoftMarginLoss", "MultiMarginLoss", "NLLLoss",
                       "PoissonNLLLoss", "SmoothL1Loss", "SoftMarginLoss",
                       "TripletMarginLoss", "_Loss", "_WeightedLoss")),),
    "container": ((layers, ("ModuleDict", "ModuleList", "ParameterDict", "ParameterList",
                            "Sequential")),),
    "dropout": ((layers, ("AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                          "FeatureAlphaDropout", "_DropoutNd")),),
    "pooling": ((conv_layers, ("AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
                               "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
                               "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d",
                               "MaxPool2d", "MaxPool3d", "_AdaptiveAvgPoolNd",
                               "_AdaptiveMaxPoolNd", "_AvgPoolNd", "_MaxPoolNd")),
                (unpool, ("LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d",
                          "MaxUnpool3d", "_LPPoolNd", "_MaxUnpoolNd")),
                (fractional_pool, ("FractionalMaxPool2d", "FractionalMaxPool3d"))),
    "padding": ((padding, ("CircularPad1d", "CircularPad2d", "CircularPad3d",
                           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
                           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
                           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
                           "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "_ConstantPadNd")),),
    "flatten": ((layers, ("Flatten", "Unflatten")),),
    "upsampling": ((layers, ("UpsamplingBilinear2d", "UpsamplingNearest2d")),),
    "lazy": ((lazy, ("LazyModuleMixin",)),),
    "adaptive": ((adaptive, ("AdaptiveLogSoftmaxWithLoss",)),),
}
# names ``nova.nn`` exports whose PyTorch submodule holds them (their Nova files are
# not listed above)
_FROM_NN = {
    "sparse": ("Embedding", "EmbeddingBag"),
    "rnn": ("GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell",
            "RNNCellBase"),
    "transformer": ("Transformer", "TransformerDecoder", "TransformerDecoderLayer",
                    "TransformerEncoder", "TransformerEncoderLayer"),
    "pixelshuffle": ("PixelShuffle", "PixelUnshuffle"),
    "channelshuffle": ("ChannelShuffle",),
    "fold": ("Fold", "Unfold"),
    "distance": ("CosineSimilarity", "PairwiseDistance"),
    "upsampling": ("Upsample",),
    "loss": ("CTCLoss", "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss"),
    "activation": ("MultiheadAttention",),
    "batchnorm": ("SyncBatchNorm",),
}


def _build() -> dict[str, types.ModuleType]:
    import nova.nn as nn
    made: dict[str, types.ModuleType] = {}
    for name in sorted(set(SUBMODULES) | set(_FROM_NN)):
        sub = types.ModuleType(f"{__name__}.{name}",
                               f"``torch.nn.modules.{name}``: Nova's classes under "
                               "PyTorch's submodule name (``nova.nn.modules``).")
        names: list[str] = []
        for source, held in SUBMODULES.get(name, ()):
            for attr in held:
                setattr(sub, attr, getattr(source, attr))
                names.append(attr)
        for attr in _FROM_NN.get(name, ()):
            setattr(sub, attr, getattr(nn, attr))
            names.append(attr)
        sub.__all__ = [n for n in names if not n.startswith("_")]
        sys.modules[sub.__name__] = sub
        made[name] = sub
    return made


_SUBS = _build()
globals().update(_SUBS)
# ``torch.nn.modules`` also holds every public layer class at its top level (not the
# functions of ``module``: the global hooks are only ``nn.modules.module``'s)
_CLASSES = sorted({n for s in _SUBS.values() for n in s.__all__
                   if isinstance(getattr(s, n), type)})
for _sub in _SUBS.values():
    for _name in _sub.__all__:
        if _name in _CLASSES:
            globals()[_name] = getattr(_sub, _name)

__all__ = _CLASSES
