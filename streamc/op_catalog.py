"""What ``streamc ops`` lists and ``docs/ops.md`` holds: every op the loader accepts, the domain and dialects
it comes in, what the lowering makes of it and what it refuses.

The ops and their domains are the loader's own sets, and an op's place in the design is read off the
sets the lowering dispatches on (:mod:`streamc.transforms.op_kinds`), so neither can drift from what
streamc does. Written here are only the dialect names, the rewrites tidy makes (``tests/test_ops_listing.py``
checks that tidy makes each) and the limits, in prose, of ops the tests check are listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .frontend.load import QONNX_DOMAINS
from .ir import MICROSOFT_DOMAIN, MICROSOFT_OPS, QONNX_OPS
from .reference import SUPPORTED_OPS
from .transforms.op_kinds import (ABSORBABLE_OPS, AVERAGING_OPS, CODE_OPS, INTEGER_LINEAR_OPS, LINEAR_OPS,
                                  QUANTIZER_OPS)

ONNX_DOMAIN = "ai.onnx"
#: The quantized formats, each by the ops that mark it; an op in none of them is a float op any dialect has.
DIALECTS = {
    "QONNX": QONNX_OPS,
    "QDQ/QCDQ": frozenset({"QuantizeLinear", "DequantizeLinear"}),
    "QOperator": frozenset({"QLinearMatMul", "QLinearConv"}) | MICROSOFT_OPS,
    "integer operators": INTEGER_LINEAR_OPS | {"QuantizeLinear"},
}
#: The lowering's roles, in the order an op's roles are listed: the ops, a short name, what it means. The
#: residual Add and Concat are dispatched by name in streamline; the rest by the op_kinds sets.
ROLES = (
    (QUANTIZER_OPS, "quantizer", "ends a hardware stage: becomes its thresholds or a requantization"),
    (LINEAR_OPS | AVERAGING_OPS, "layer", "a hardware stage: matrix-vector unit, sliding window, vector unit"),
    (frozenset({"Add", "Concat"}), "join", "joins two quantized branches in hardware: residual add, channel concat"),
    (CODE_OPS, "on codes", "between a quantizer and the next layer: moves into the stream (shape ops, max pools)"),
    (ABSORBABLE_OPS - QUANTIZER_OPS, "absorbed", "between a layer and its quantizer: folded into its thresholds "
                                                 "or a lookup table"),
)
#: Ops tidy rewrites before the lowering sees them, by the ops whose roles they take there.
REWRITTEN = {"Gemm": ("MatMul",), "QLinearMatMul": ("MatMulInteger", "QuantizeLinear"),
             "QLinearConv": ("ConvInteger", "QuantizeLinear"), "QGemm": ("MatMulInteger", "QuantizeLinear"),
             "Dropout": ("Identity",)}
HOST_ROLE = ("host", "folded into constants, or run on the host before the first quantizer or after the last layer")
#: What the lowering refuses or restricts, for the ops where a user meets it.
LIMITS = {
    "AveragePool": "ceil_mode is refused",
    "BipolarQuant": "a padded convolution of bipolar inputs is refused",
    "Conv": "1-D and 2-D; grouped convolutions become block-diagonal dense weights; a layer mixing channels of "
            "different activation scales is refused; ConvTranspose is not supported",
    "Gemm": "rewritten into MatMul, Mul and Add",
    "MatMul": "one vector per frame: a MatMul over the rows of a matrix is refused",
    "Add": "a residual add's integer weighting is checked on every pair of codes; refused where one weighting "
           "cannot reproduce every channel's scale ratio",
    "QGemm": "transA=1 is refused",
    "QLinearConv": "rewritten into ConvInteger and a requantization",
    "QLinearMatMul": "rewritten into MatMulInteger and a requantization",
    "Reshape": "one that reorders the stream into a convolution, pool or add is refused",
    "Transpose": "before a dense layer it reorders the weights; one that reorders the stream into a convolution, "
                 "pool or add is refused",
    "Trunc": "v1 and v2, as a quantizer; only a Relu may follow it before the next layer",
    "Tanh": "between quantizers: a lookup table (one per channel where the channels' functions differ)",
    "Sigmoid": "between quantizers: a lookup table (one per channel where the channels' functions differ)",
    "Dropout": "removed (inference)",
}


@dataclass(frozen=True)
class SupportedOp:
    name: str
    domains: tuple[str, ...]
    dialects: tuple[str, ...]
    roles: tuple[str, ...]
    limits: str


def _domains(name: str) -> tuple[str, ...]:
    if name in QONNX_OPS:
        return tuple(sorted(QONNX_DOMAINS))
    return (MICROSOFT_DOMAIN,) if name in MICROSOFT_OPS else (ONNX_DOMAIN,)


def supported_ops() -> list[SupportedOp]:
    """Every op a model may hold, by name."""
    names = SUPPORTED_OPS | QONNX_OPS | MICROSOFT_OPS
    return [SupportedOp(name=name, domains=_domains(name),
                        dialects=tuple(dialect for dialect, ops in DIALECTS.items() if name in ops) or ("any",),
                        roles=tuple(role for ops, role, _ in ROLES if set(REWRITTEN.get(name, [name])) & ops)
                        or (HOST_ROLE[0],),
                        limits=LIMITS.get(name, ""))
            for name in sorted(names)]


def role_meanings() -> dict[str, str]:
    """What each role an op is listed with means."""
    return {role: meaning for *_, role, meaning in (*ROLES, (None, *HOST_ROLE))}


def markdown() -> str:
    """``docs/ops.md``: the listing as a Markdown table."""
    lines = ["# Supported ops", "",
             "Written by `streamc ops --markdown` from the sets the loader and the lowering use; "
             "`tests/test_ops_listing.py` fails when this file differs from what streamc does.", "",
             "Dialect `any` marks a float op any exporter writes around the quantizers. An op outside this list "
             "is refused when the model is loaded. What the lowering makes of an op:", "",
             *(f"- **{role}**: {meaning}" for role, meaning in role_meanings().items()), "",
             "| op | domain | dialects | in the design | limits |", "|---|---|---|---|---|"]
    for entry in supported_ops():
        lines.append(f"| {entry.name} | {', '.join(entry.domains)} | {', '.join(entry.dialects)} "
                     f"| {'; '.join(entry.roles)} | {entry.limits} |")
    return "\n".join(lines) + "\n"
