"""Multipliers: the hard ones ``mul2dsp`` maps, and the lanes' multiplies that the MVAU and vector unit share."""

from __future__ import annotations

from ..datatypes import DataType


_DSP_RULES = {"ice40": dict(max_width=16, min_width=2, min_result=11),
              "ecp5": dict(max_width=18, min_width=2, min_result=0),
              # synth_gowin: a MULT9X9 from 4 x 4 bits, counted as a whole 18 x 18 multiplier (it takes half).
              "gowin": dict(max_width=18, min_width=4, min_result=0)}


def dsp_count(a: int, b: int, result: int, family: str, *, dsp: bool = True) -> int:
    """Hard multipliers ``mul2dsp`` uses for an ``a`` x ``b`` product of ``result`` bits.

    ``dsp=False`` for a device or flow without them (iCE40 HX, or ``synth_ice40`` without ``-dsp``).
    """
    if not dsp or a <= 0 or b <= 0:
        return 0
    rule = _DSP_RULES[family]
    a, b = max(a, b), min(a, b)
    top = rule["max_width"]
    if b < rule["min_width"] or result < rule["min_result"]:
        return 0
    if a > top:
        pieces = (a - 1) // top       # full-width pieces, then the rest
        rest = a - pieces * top
        return pieces * dsp_count(top, b, min(result, b + top), family) + dsp_count(rest, b, b + rest, family)
    if b > top:
        return dsp_count(b, a, result, family)
    return 1


def lane_multiply(in_dt: DataType, w_dt: DataType) -> tuple[int, int, int, bool]:
    """Operand widths of one lane's multiply as Yosys sees it (0, 0 without one), product width, XNOR."""
    xnor = in_dt.bipolar and w_dt.bipolar
    if xnor:
        return 0, 0, 2, True
    if in_dt.bipolar or w_dt.bipolar:
        return 0, 0, (w_dt.bitwidth if in_dt.bipolar else in_dt.bitwidth) + 1, False
    # Amaranth widens the unsigned operand of a mixed-sign product by one bit.
    mul_a = in_dt.bitwidth + (1 if w_dt.signed and not in_dt.signed else 0)
    mul_b = w_dt.bitwidth + (1 if in_dt.signed and not w_dt.signed else 0)
    return mul_a, mul_b, in_dt.bitwidth + w_dt.bitwidth + (1 if in_dt.signed != w_dt.signed else 0), False


def shift_add_bits(a_bits: int, b_bits: int) -> int:
    """Output bits of the adders of :func:`streamc.rtl.placement.multiply` in LUTs: the partial
    products of the wider operand, one per bit of the narrower, added one after the other."""
    wide, narrow = max(a_bits, b_bits), min(a_bits, b_bits)
    total, bits = wide, 0
    for i in range(1, narrow):
        total = max(total, wide + i) + 1
        bits += total
    return bits


def product_operand_bits(spec) -> int:
    """Width of a lane's registered product once Yosys has trimmed it to the range it can take: the
    widened operand of a mixed-sign multiply adds no bit to the product. ``spec``: an
    :class:`~.mvau.MVAUSpec` or a :class:`~.vvau.VVAUSpec` (not imported here: both models import this)."""
    return min(spec.product_bits, spec.in_bits + spec.weight_bits) if spec.mul_a else spec.product_bits
