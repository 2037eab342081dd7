"""Symbolic autograd: the backward pass is more graph in the same trace.

``rules`` holds the vector-Jacobian rule table, ``engine`` the walk that appends
backward nodes to the trace, ``gradcheck`` the finite-difference check. The per-primitive
backward records and grad mode live below, in ``nova.tensor`` (``tape``, ``grad_mode``),
because recording an op writes them; ``graph`` and ``grad_mode`` here re-export them
(``graph`` also holds the saved-tensor hooks). ``forward_ad`` is forward-mode AD with
dual tensors, by double backward. Importing this package registers the engine and the
rules' saved values with the tape, and attaches the hook methods of tensors and graph
nodes (``hooks``).
"""
from nova.autograd.grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from nova.autograd.engine import backward, grad  # noqa: E402  (after grad_mode: import order)
from nova.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402
from nova.autograd.function import Function, FunctionCtx  # noqa: E402
from nova.autograd.variable import Variable  # noqa: E402  (torch's legacy alias)
from nova.autograd import hooks as _hooks  # noqa: E402
from nova.autograd import functional  # noqa: E402,F401  (nv.autograd.functional)
from nova.autograd import anomaly_mode  # noqa: E402,F401  (torch.autograd.anomaly_mode)
from nova.autograd.anomaly_mode import (  # noqa: E402
    detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled,
    set_detect_anomaly,
)
from nova.autograd import graph  # noqa: E402,F401  (nv.autograd.graph)
from nova.autograd import forward_ad  # noqa: E402,F401  (nv.autograd.forward_ad)
from nova.autograd import profiler  # noqa: E402,F401  (nv.autograd.profiler)
from nova.tensor.tensor import Tensor as _Tensor  # noqa: E402

# Tensor's and the graph nodes' hook methods live with the engine that calls them
# (tensor sits below autograd).
_Tensor.register_hook = _hooks.register_hook
_Tensor.register_post_accumulate_grad_hook = _hooks.register_post_accumulate_grad_hook
graph.GradFn.register_hook = _hooks.register_node_hook
graph.GradFn.register_prehook = _hooks.register_node_prehook
graph.AccumulateGrad.register_hook = _hooks.register_accumulate_hook
graph.AccumulateGrad.register_prehook = _hooks.register_accumulate_prehook

__all__ = ["backward", "grad", "gradcheck", "gradgradcheck", "GradcheckError", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled", "Function", "FunctionCtx", "Variable", "detect_anomaly",
           "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "set_anomaly_enabled"]
