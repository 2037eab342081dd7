"""Executables, the structural-hash cache, engines and the reference interpreter."""
