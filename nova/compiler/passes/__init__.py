"""Rewrites of the nova step function. Each pass consumes and produces verified nova IR."""
from nova.compiler.passes.cleanup import simplify

__all__ = ["simplify"]
