"""``nv.func``: torch.func's namespace.

``functional_call`` calls a module with other tensors in place of its parameters and
buffers: the given tensors are put into the module's parameter and buffer tables for
the call and the originals put back afterwards, even when the call raises, so the output
is differentiable with respect to the given tensors (``nv.autograd.grad(out, [w])``) and
the module is unchanged (implemented in ``nova.nn.utils.stateless``, as PyTorch keeps
it). The transforms (``grad``, ``vjp``, ``jvp``, ``linearize``, ``jacrev``, ``jacfwd``,
``hessian``, ``vmap``, ``stack_module_state``) are ``nova.func_transforms``'s.
"""
from __future__ import annotations

from nova.func_transforms import (  # noqa: F401  (torch.func's names)
    grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, stack_module_state, vjp,
    vmap)
from nova.nn.utils.stateless import _functional_call as functional_call  # noqa: F401
