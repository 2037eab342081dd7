"""``nv.nn``: modules, parameters, initializers and the functional API."""
from nova.nn import functional, init, utils
from nova.nn.layers import (
    ELU, GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, LeakyReLU, Linear,
    LogSigmoid, LogSoftmax, Mish, ModuleDict, ModuleList, ReLU, RMSNorm, Sequential, Sigmoid,
    SiLU, Softmax, Softplus, Tanh, Unflatten,
)
from nova.nn.losses import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from nova.nn.module import Module, StateDictError
from nova.nn.parameter import Parameter

__all__ = ["Module", "Parameter", "StateDictError", "Linear", "Embedding", "LayerNorm",
           "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU", "Tanh", "Identity", "Sequential",
           "ModuleList", "ModuleDict", "Sigmoid", "LogSigmoid", "Softmax", "LogSoftmax",
           "LeakyReLU", "ELU", "Softplus", "Mish", "Flatten", "Unflatten", "CrossEntropyLoss",
           "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "functional", "init", "utils"]
