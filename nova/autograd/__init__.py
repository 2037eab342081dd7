"""Symbolic autograd: the backward pass is more graph in the same trace.

``graph`` holds the per-primitive backward records, ``rules`` the vector-Jacobian rule
table, ``engine`` the walk that appends backward nodes to the trace.
"""
from nova.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


def backward(*args, **kwargs):
    from nova.autograd.engine import backward as _backward
    return _backward(*args, **kwargs)


def grad(*args, **kwargs):
    from nova.autograd.engine import grad as _grad
    return _grad(*args, **kwargs)
