"""``nv.nn``: modules, parameters, initializers and the functional API."""
from nova.nn import attention, functional, init, parallel, utils
from nova.nn.layers import (
    ELU, GELU, AlphaDropout, Bilinear, Dropout, Dropout1d, Dropout2d, Dropout3d, Embedding,
    FeatureAlphaDropout, Flatten, Identity, LayerNorm, LeakyReLU, Linear, LogSigmoid,
    LogSoftmax, Mish, ModuleDict, ModuleList, ParameterDict, ParameterList, ReLU, RMSNorm,
    Sequential, Sigmoid, SiLU, Softmax, Softplus, Tanh, Unflatten, UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from nova.nn.activation import (
    CELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, PReLU, ReLU6, RReLU,
    Softmax2d, Softmin, Softshrink, Softsign, Tanhshrink, Threshold,
)
from nova.nn.distance import CosineSimilarity, PairwiseDistance
from nova.nn.fold import Fold, Unfold
from nova.nn.losses import (
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
    HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
    MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss, SmoothL1Loss,
    SoftMarginLoss, TripletMarginLoss,
)
from nova.nn.padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
)
from nova.nn.shuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle
from nova.nn.conv_layers import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, Conv1d, Conv2d, Conv3d, MaxPool1d, MaxPool2d, MaxPool3d,
)
from nova.nn.interpolate import Upsample
from nova.nn.module import Module, StateDictError
from nova.nn.normalization import (
    BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    InstanceNorm3d, LocalResponseNorm,
)
from nova.nn.parameter import Parameter
from nova.nn.sync_batchnorm import SyncBatchNorm
from nova.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from nova.nn.transformer import (
    MultiheadAttention, Transformer, TransformerDecoder, TransformerDecoderLayer,
    TransformerEncoder, TransformerEncoderLayer,
)
from nova.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from nova.nn.parallel import DataParallel
from nova.nn.unpool import (
    LPPool1d, LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from nova.nn.embedding_bag import EmbeddingBag
from nova.nn.more_losses import MultiLabelMarginLoss, TripletMarginWithDistanceLoss
from nova.nn.adaptive import AdaptiveLogSoftmaxWithLoss
from nova.nn.ctc import CTCLoss
from nova.nn.lazy import (
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
    LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear, UninitializedBuffer,
    UninitializedParameter,
)
from nova.nn.more_modules import Buffer
from nova.nn.fractional_pool import FractionalMaxPool2d, FractionalMaxPool3d

__all__ = ["Module", "Parameter", "StateDictError", "Linear", "Embedding", "LayerNorm",
           "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU", "Tanh", "Identity", "Sequential",
           "ModuleList", "ModuleDict", "Sigmoid", "LogSigmoid", "Softmax", "LogSoftmax",
           "LeakyReLU", "ELU", "Softplus", "Mish", "Flatten", "Unflatten", "CrossEntropyLoss",
           "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "MaxPool2d",
           "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AdaptiveMaxPool3d", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "GroupNorm", "Upsample", "functional", "init", "utils",
           "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid", "SELU", "CELU", "GLU", "PReLU",
           "RReLU", "Softsign", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold",
           "Softmin", "Softmax2d", "ParameterList", "ParameterDict", "Dropout1d", "Dropout2d",
           "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "CosineSimilarity", "PairwiseDistance", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "Bilinear", "Unfold",
           "Fold", "KLDivLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
           "HingeEmbeddingLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
           "MultiMarginLoss", "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "DataParallel",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d",
           "EmbeddingBag", "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss"]
__all__ += ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
            "UninitializedParameter"]
__all__ += ["AdaptiveLogSoftmaxWithLoss", "CTCLoss"]
__all__ += ["Buffer", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
            "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
            "UninitializedBuffer"]
__all__ += ["SyncBatchNorm"]
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d"]
from nova.nn import modules  # noqa: E402  (PyTorch's submodule names: nn.modules.batchnorm)
