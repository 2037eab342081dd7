"""The compiler: the nova dialect, IR construction, passes, lowering and codegen."""
