"""How the simulated hardware's outputs are judged against the original model and ``verify.expected``.

The sim step first compares the hardware's integers with streamc's executor on the tidied graph,
bit for bit. What a user gets, though, is those integers run through the host tail: this module
judges that end to end, against the *original* model in streamc's executor, and against the
outputs a user recorded in their own framework.
"""

from __future__ import annotations

import numpy as np

from ..execute import execute
from ..hw import Dataflow
from ..ir import Graph

#: Float outputs agree end to end when every value is within this share of the frame's largest
#: |reference output|. The tail starts from the exact accumulator and rounds in float32; the
#: original model rounds its float32 MatMul products instead: the two differ by a few ulps (the
#: digits demo by 9.5e-7 on logits near 10). 2^-12 leaves room for rounding through a few float
#: ops and is still 16 times finer than one step of an 8-bit quantizer spanning the outputs.
END_TO_END_RTOL = 2.0 ** -12

#: Ops after which each output value still depends on one hardware integer, so a step of that
#: integer is a step of the output.
_ONE_TO_ONE_OPS = {"Mul", "Add", "Sub", "Div", "Neg", "Abs", "Relu", "Clip", "Cast", "Identity", "Tanh",
                   "Sigmoid", "QuantizeLinear", "DequantizeLinear", "Quant", "Reshape", "Flatten", "Transpose",
                   "Squeeze", "Unsqueeze", "Max", "Min"}

#: Where onnxruntime computes a model's integers in ways that depend on the CPU or on its graph optimizations.
_ONNXRUNTIME_INTEGER_OPS = {"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm",
                            "QLinearAdd", "QLinearConcat", "QLinearAveragePool", "QLinearGlobalAveragePool"}


def end_to_end_differing_frames(outputs: np.ndarray, reference: np.ndarray) -> list[int]:
    """The frames whose outputs differ from the original model's beyond float32 rounding of the tail
    (:data:`END_TO_END_RTOL`); integer outputs must be equal."""
    n = len(reference)
    actual, wanted = outputs.reshape(n, -1), reference.reshape(n, -1)
    if np.issubdtype(wanted.dtype, np.integer) or np.issubdtype(actual.dtype, np.integer):
        return [int(i) for i in np.flatnonzero(np.any(actual != wanted, axis=1))]
    wanted64 = wanted.astype(np.float64)
    tolerance = END_TO_END_RTOL * np.max(np.abs(wanted64), axis=1, keepdims=True)
    far = ~(np.abs(actual.astype(np.float64) - wanted64) <= tolerance)   # NaN counts as far
    return [int(i) for i in np.flatnonzero(np.any(far, axis=1))]


def output_steps(dataflow: Dataflow, hw: np.ndarray) -> np.ndarray | None:
    """Per output value, how far it moves when its hardware integer moves by one (the larger of the
    two neighbours); ``None`` where an output mixes several integers (a float layer on the host)."""
    if any(node.op_type not in _ONE_TO_ONE_OPS for node in dataflow.tail.nodes):
        return None
    name, out = dataflow.hw_output, dataflow.tail.outputs[0].name

    def tail(values):
        tail_input = dataflow.from_stream_order(values).astype(np.float32)
        return execute(dataflow.tail, {name: tail_input})[out].reshape(len(hw), -1).astype(np.float64)

    at = tail(hw)
    return np.maximum(np.abs(tail(hw + 1) - at), np.abs(at - tail(hw - 1)))


def expected_differences(outputs: np.ndarray, expected: np.ndarray, steps: np.ndarray | None,
                         rtol: float = 1e-4, atol: float = 1e-4) -> list[dict]:
    """One entry per frame that differs from ``verify.expected``: its index, the largest difference,
    and how many output steps (see :func:`output_steps`) that is, where steps are defined."""
    n = len(expected)
    actual = outputs.reshape(n, -1).astype(np.float64)
    wanted = expected.reshape(n, -1).astype(np.float64)
    differing = ~np.all(np.isclose(actual, wanted, rtol=rtol, atol=atol), axis=1)
    entries = []
    for frame in np.flatnonzero(differing):
        diff = np.abs(actual[frame] - wanted[frame])
        entry = {"frame": int(frame), "max_abs_diff": float(np.max(diff))}
        if steps is not None:
            step = steps[frame]
            with np.errstate(divide="ignore", invalid="ignore"):
                apart = np.where(diff == 0, 0.0, diff / step)
            entry["steps_apart"] = float(np.round(np.max(apart), 2))
        entries.append(entry)
    return entries


def onnxruntime_note(graph: Graph) -> str | None:
    """One line on onnxruntime's inexact integers, for a model whose expected outputs likely came
    from onnxruntime: it holds onnxruntime's integer operators or QDQ pairs it fuses."""
    ops = {node.op_type for node in graph.nodes}
    integer_ops = sorted(ops & _ONNXRUNTIME_INTEGER_OPS)
    qdq = {"QuantizeLinear", "DequantizeLinear"} <= ops
    if not integer_ops and not qdq:
        return None
    what = ", ".join(integer_ops + (["QuantizeLinear/DequantizeLinear pairs"] if qdq else []))
    return (f"this model holds {what}: onnxruntime is not exact on CPUs without VNNI (it sums pairs of u8 x s8 "
            "products in saturating int16) nor with graph optimizations on (its QDQ fusions round again); for an "
            "exact reference run onnxruntime with graph_optimization_level=ORT_DISABLE_ALL on a VNNI CPU, or the "
            "ops' exact integer semantics (streamc's executor)")


def verification_failure(rtlsim: dict | None) -> str | None:
    """What went wrong in the simulation report, or ``None`` when the hardware matched (or did not run)."""
    if rtlsim is None:
        return None
    problems = []
    if rtlsim["mismatches"]:
        problems.append(f"{rtlsim['mismatches']} hardware outputs differ from the reference over "
                        f"{rtlsim['frames']} frames")
    end_to_end = rtlsim.get("end_to_end_differing_frames") or []
    if end_to_end and not rtlsim["mismatches"]:
        problems.append(f"the hardware equals streamc's executor, but after the host tail {len(end_to_end)} of "
                        f"{rtlsim['frames']} frames differ from the original model by more than "
                        f"{rtlsim['end_to_end_rtol']:.3g} of the frame's largest output (frames "
                        f"{_listed(end_to_end)}; max |diff| {rtlsim['end_to_end_max_abs_diff']:.3g}): the host tail "
                        "does not compute what the model does after the hardware (a streamc bug)")
    if rtlsim.get("expected_mismatches"):
        frames = rtlsim["expected_differing_frames"]
        apart = [f"{f['frame']}: {f['steps_apart']:g} steps" if "steps_apart" in f else
                 f"{f['frame']}: max |diff| {f['max_abs_diff']:.3g}" for f in frames]
        problems.append(f"{rtlsim['expected_mismatches']} of {rtlsim['frames']} frames differ from verify.expected "
                        f"(frame: how far apart, {_listed(apart)})")
        if "expected_note" in rtlsim:
            problems.append(f"note: {rtlsim['expected_note']}")
    return "; ".join(problems) or None


def _listed(items: list, shown: int = 8) -> str:
    more = f", and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(map(str, items[:shown])) + more
