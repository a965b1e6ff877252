"""Run a :class:`~streamc.ir.Graph` with the numpy reference semantics of :mod:`streamc.reference`."""

from __future__ import annotations

import numpy as np
from onnx import helper

from .ir import Graph
from .reference import run_node


def lookup_table(attrs: dict, codes: np.ndarray) -> np.ndarray:
    """streamc's ``LookupTable`` node: ``table[code - in_min]`` (bipolar inputs -1/+1 index 0/1); with
    ``channels`` (the table holds their rows one after the other), ``table[c][code - in_min]`` for
    the codes of channel ``c`` (axis 1)."""
    table = np.asarray(attrs["table"], np.float32)
    if attrs.get("channels", 1) > 1:
        table = table.reshape(attrs["channels"], -1)
    step = 2 if attrs.get("in_bipolar") else 1
    index = (np.rint(codes).astype(np.int64) - attrs["in_min"]) // step
    if table.ndim == 1:
        return table[index]
    channel = np.arange(table.shape[0]).reshape((-1,) + (1,) * (codes.ndim - 2))
    return table[channel, index]


def execute(graph: Graph, feeds: dict[str, np.ndarray], *, keep_all: bool = False) -> dict[str, np.ndarray]:
    """Evaluate ``graph`` on ``feeds``; returns the graph outputs, or every tensor with ``keep_all``.

    Feeds may carry any leading batch size: a ``Reshape`` whose constant shape starts with the
    model's batch of 1 is applied per batch element, so a whole set of frames runs at once.
    """
    values: dict[str, np.ndarray] = dict(graph.constants)
    values.update(feeds)
    batch = next(iter(feeds.values())).shape[0] if feeds else 1
    for node in graph.nodes:
        inputs = [values[t] if t else None for t in node.inputs]
        if node.op_type == "Reshape" and batch != 1 and inputs[1] is not None and len(inputs[1]) and inputs[1][0] == 1:
            inputs[1] = np.concatenate([[batch], inputs[1][1:]]).astype(np.int64)
        if node.op_type == "LookupTable":
            results = [lookup_table(node.attrs, inputs[0])]
        else:
            results = run_node(node.op_type, node.attrs, inputs, opset=graph.opset, qonnx_opset=graph.qonnx_opset)
        values.update(zip(node.outputs, results))
    if keep_all:
        return values
    return {o.name: values[o.name] for o in graph.outputs}


def tensor_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape for one frame, by running the graph once on zeros."""
    given = graph.inputs[0]
    zeros = np.zeros(given.shape, dtype=helper.tensor_dtype_to_np_dtype(given.elem_type))
    return {name: np.shape(value) for name, value in execute(graph, {given.name: zeros}, keep_all=True).items()}
