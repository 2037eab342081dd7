"""The bottom layer: dtypes, shapes and the graph contract the compiler consumes.

Everything above (tensor, autograd, runtime, compiler) may import it; it imports nothing
else of Nova (``tests/test_layers.py`` checks)."""
