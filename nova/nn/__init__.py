"""``nv.nn``: modules, parameters, initializers and the functional API."""
from nova.nn import functional, init, utils
from nova.nn.layers import (
    GELU, Dropout, Embedding, Identity, LayerNorm, Linear, ModuleDict, ModuleList, ReLU,
    RMSNorm, Sequential, SiLU, Tanh,
)
from nova.nn.module import Module, StateDictError
from nova.nn.parameter import Parameter

__all__ = ["Module", "Parameter", "StateDictError", "Linear", "Embedding", "LayerNorm",
           "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU", "Tanh", "Identity", "Sequential",
           "ModuleList", "ModuleDict", "functional", "init", "utils"]
