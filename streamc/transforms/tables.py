"""Lookup tables: any elementwise ops between two quantizers, run by the model on every input code."""

from __future__ import annotations

import numpy as np

from ..datatypes import BIPOLAR, smallest_datatype
from ..execute import execute
from ..ir import Graph, Node, TensorInfo
from .op_kinds import CODE_OPS
from .quantizers import Codes, Quantizer, code_values, reading


def code_table(graph, codes: Codes, between: list[Node], quantizer: Quantizer, shape: tuple[int, ...],
               reads: tuple[str, bool] | None = None) -> np.ndarray | None:
    """The model's ops from ``codes`` through ``quantizer``, run on every input code of a tensor of
    ``shape`` (N, C, *spatial). Where the result differs between channels (a per-channel constant among
    the ops, such as a bias): one row per channel. None where it differs within a channel (a constant
    per pixel): no table holds that.

    ``between`` reads the source quantizer's output, or ``reads``: a tensor that holds its
    dequantized values (True) or its codes (False). Shape ops and max pools in ``between`` are
    passed over: the table is elementwise. The ops run on one pixel of every channel per code, so a
    constant shaped per channel broadcasts as it does over the whole tensor."""
    source = codes.quantizer
    coding = quantizer.nodes[:quantizer.n_coding]
    last = coding[-1].outputs[0]
    start, front = reading(source, *(reads or (source.output, True)))
    passed = [Node("Identity", n.name, [n.inputs[0]], [n.outputs[0]]) if n.op_type in CODE_OPS else n for n in between]
    channels, pixel = shape[1], (1, shape[1]) + (1,) * (len(shape) - 2)
    sub = Graph(nodes=[*front, *passed, *coding], constants=graph.constants,
                inputs=[TensorInfo(start, pixel)], outputs=[TensorInfo(last, pixel)],
                opset=graph.opset, qonnx_opset=graph.qonnx_opset)
    values = code_values(codes)
    # Codes to values channel by channel: a per-channel scale broadcasts over the (N, C, 1, ...) grid.
    grid = source.output_from_codes(np.repeat(values[:, None], channels, axis=1).reshape((len(values),) + pixel[1:]))
    output = execute(sub, {start: grid})[last]
    if output.size != grid.size:
        return None
    tables = quantizer.codes_from_output(output).reshape(len(values), channels).astype(np.int64)
    if np.all(tables == tables[:, :1]):
        return tables[:, 0]
    return tables.T.copy()


def lower_lookup_table(graph, codes: Codes, table: np.ndarray, quantizer: Quantizer, stages):
    """A ``LookupTable`` node from ``codes`` to the codes of ``quantizer``; ``table`` is 1-D, or one
    row per channel (held row after row, with the count of channels)."""
    out_dtype = BIPOLAR if quantizer.dtype == BIPOLAR else smallest_datatype(table.min(), table.max())
    out = graph.fresh_name(f"{quantizer.name}_codes")
    graph.datatypes[out] = out_dtype
    rows = {"channels": table.shape[0]} if table.ndim == 2 else {}
    lut = Node("LookupTable", graph.fresh_name(f"{quantizer.name}_table"), [codes.tensor], [out],
               {"table": table.ravel().tolist(), **rows, "in_min": int(code_values(codes)[0]),
                "in_bipolar": int(codes.dtype == BIPOLAR)})
    stages.append(dict(kind="lut", name=lut.name, inputs=[codes.tensor], output=out, table=table, in_dtype=codes.dtype,
                       out_dtype=out_dtype))
    return [lut], Codes(out, int(table.min()), int(table.max()), out_dtype, quantizer)
