"""``nv.nn``: modules, parameters, initializers and the functional API."""
from nova.nn import functional, init, parallel, utils
from nova.nn.layers import (
    ELU, GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, LeakyReLU, Linear,
    LogSigmoid, LogSoftmax, Mish, ModuleDict, ModuleList, ReLU, RMSNorm, Sequential, Sigmoid,
    SiLU, Softmax, Softplus, Tanh, Unflatten,
)
from nova.nn.losses import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from nova.nn.conv_layers import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,
    AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, Conv1d, Conv2d, Conv3d, MaxPool1d, MaxPool2d, MaxPool3d,
)
from nova.nn.interpolate import Upsample
from nova.nn.module import Module, StateDictError
from nova.nn.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm
from nova.nn.parameter import Parameter

__all__ = ["Module", "Parameter", "StateDictError", "Linear", "Embedding", "LayerNorm",
           "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU", "Tanh", "Identity", "Sequential",
           "ModuleList", "ModuleDict", "Sigmoid", "LogSigmoid", "Softmax", "LogSoftmax",
           "LeakyReLU", "ELU", "Softplus", "Mish", "Flatten", "Unflatten", "CrossEntropyLoss",
           "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "MaxPool2d",
           "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AdaptiveMaxPool3d", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "GroupNorm", "Upsample", "functional", "init", "utils"]
