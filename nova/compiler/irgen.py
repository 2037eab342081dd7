"""Build a PendingGraph (the trace's flat form) into ``func.func @step`` in the nova
dialect, and verify it. This is the only way a trace enters the compiler."""
from __future__ import annotations

from typing import Any

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute

from nova.compiler import dialect as nd
from nova.compiler.dialect import BACKWARD_ATTR
from nova.core.graph import GraphNode, PendingGraph


def _props(n: GraphNode) -> dict[str, Attribute]:
    props: dict[str, Attribute] = {}
    for k, v in n.attrs.items():
        if n.op == "constant" and k == "value":
            et = nd.element_type(n.dtype.mlir)
            if n.dtype.is_floating_point:
                props[k] = FloatAttr(float(v), et)
            else:
                props[k] = IntegerAttr(int(v), et)
        elif isinstance(v, tuple):
            props[k] = nd.i64_array(v)
        elif isinstance(v, str):
            props[k] = StringAttr(v)
        elif isinstance(v, int):
            props[k] = IntegerAttr(v, i64)
        else:
            raise TypeError(f"irgen: nova.{n.op} attribute {k}={v!r} has no IR form")
    return props


def build_module(graph: PendingGraph, name: str = "step") -> ModuleOp:
    """The pending graph as ``func.func @<name>(args) -> outputs``, verified (its
    template calls inlined: the IR holds primitive ops only)."""
    graph = graph.inlined()
    arg_types = [nd.tensor_type(s, d.mlir) for s, d in graph.args]
    out_types = []
    for i in graph.outputs:
        shape, dt = (graph.args[i] if i < len(graph.args)
                     else (graph.nodes[i - len(graph.args)].shape,
                           graph.nodes[i - len(graph.args)].dtype))
        out_types.append(nd.tensor_type(shape, dt.mlir))
    fn = func.FuncOp(name, (arg_types, out_types))
    values: list[Any] = list(fn.body.block.args)
    with ImplicitBuilder(fn.body):
        for n in graph.nodes:
            op_cls = nd.OPS_BY_NAME[n.op]
            op = op_cls.create(operands=[values[i] for i in n.inputs],
                               result_types=[nd.tensor_type(n.shape, n.dtype.mlir)],
                               properties=_props(n))
            if n.backward:
                op.attributes[BACKWARD_ATTR] = UnitAttr()
            values.append(op.results[0])
        func.ReturnOp(*[values[i] for i in graph.outputs])
    module = ModuleOp([fn])
    module.verify()
    return module
