"""``nv.no_grad`` and friends, re-exported from ``nova.tensor.grad_mode``.

The state lives below autograd, in ``nova.tensor``, because recording an op reads it
and ``nova.tensor`` must not import ``nova.autograd``; this module keeps the public
path ``nova.autograd.grad_mode`` (used by ``nn`` and ``optim``) pointing at the same
objects."""
from nova.tensor.grad_mode import (
    STATE, enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)

__all__ = ["STATE", "enable_grad", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "no_grad", "set_grad_enabled"]
