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
