"""Reading nova IR written in a test: a module in the builtin, func and nova dialects."""
from xdsl.context import Context
from xdsl.dialects import builtin, func
from xdsl.parser import Parser

from nova.compiler.dialect import Nova


def parse_module(text: str) -> builtin.ModuleOp:
    ctx = Context()
    for d in (builtin.Builtin, func.Func, Nova):
        ctx.load_dialect(d)
    return Parser(ctx, text).parse_module()


def assert_rewrites(rewrite, text: str, want: str, rtol: float = 1e-6) -> None:
    """``rewrite`` (a pass) turns the module ``text`` into ``want``, and the reference
    interpreter gives the same values (to ``rtol``) for random float32 arguments."""
    import numpy as np

    from nova.runtime.interpreter import compile_function

    def run(module, args):
        fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
        return compile_function(fn)(args)

    module = parse_module(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    rs = np.random.RandomState(0)
    args = [rs.randn(*a.type.get_shape()).astype(np.float32) for a in fn.body.block.args]
    before = run(module, args)
    out = rewrite(module)
    assert str(out) == want
    for got, ref in zip(run(out, args), before):
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)
