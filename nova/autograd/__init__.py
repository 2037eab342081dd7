"""Symbolic autograd (vector-Jacobian rules appended to the trace) arrives here next."""
