"""The autograd graph's record types, re-exported from ``nova.tensor.tape``.

The op front end writes a GradFn for every differentiable primitive it records, so the
types live in ``nova.tensor`` (which must not import ``nova.autograd``); this module
keeps ``nova.autograd.graph`` naming the same objects for the engine and the rules."""
from nova.tensor.tape import ALIAS, FUNCTION, GradFn, alias_fn, register_saves, saves

__all__ = ["ALIAS", "FUNCTION", "GradFn", "alias_fn", "register_saves", "saves"]
