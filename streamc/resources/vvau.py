"""The resource model of the :class:`~streamc.rtl.vvau.VectorVectorUnit`."""

from __future__ import annotations

from dataclasses import dataclass

from .arithmetic import dsp_count, lane_multiply, product_operand_bits, shift_add_bits
from .memories import Memories, live_bits_of, logic_rom, varying_bits
from .shared import KernelSpec, known, log2


@dataclass(frozen=True)
class VVAUSpec(KernelSpec):
    """What the resources of a :class:`~streamc.rtl.vvau.VectorVectorUnit` depend on.

    ``C = channels`` partial sums of ``acc_bits`` sit in registers; the weights in a ROM of
    ``taps * C / simd`` rows of ``simd`` weights unless every row is the same
    (``constant_weights``, an average pool). ``mul_a``/``mul_b`` as for :class:`MVAUSpec`
    (0: no multiplier, also when a constant weight is a power of two or zero); ``weight_rom_live``
    the ROM's :func:`rom_live_bits`.
    """

    channels: int
    taps: int
    simd: int
    in_bits: int
    weight_bits: int
    out_bits: int
    acc_bits: int
    product_bits: int
    mul_a: int
    mul_b: int
    xnor: bool
    constant_weights: bool
    weight_rom_live: int = -1
    weight_rom_varying: int = -1
    ram_style: str = "auto"
    res_type: str = "auto"

    @property
    def groups(self) -> int:
        return self.channels // self.simd

    @classmethod
    def of_unit(cls, unit) -> "VVAUSpec":
        """The spec of a constructed :class:`~streamc.rtl.vvau.VectorVectorUnit` (not elaborated)."""
        in_dt, w_dt, weights, simd = unit.in_dtype, unit.weight_dtype, unit.weights, unit.in_elems
        mul_a, mul_b, product_bits, xnor = lane_multiply(in_dt, w_dt)
        rows = unit.weight_rom_rows
        constant = len(set(rows)) == 1
        if constant and mul_a:
            # Yosys folds a product by a constant power of two (or zero) into wiring.
            lanes = {abs(int(w)) for w in weights[:, 0]}
            if all(w & (w - 1) == 0 for w in lanes):
                mul_a = mul_b = 0
        channels, taps = weights.shape
        return cls(channels=channels, taps=taps, simd=simd, in_bits=in_dt.bitwidth,
                   weight_bits=w_dt.bitwidth, out_bits=unit.out_width, acc_bits=unit.acc_shape.width,
                   product_bits=product_bits, mul_a=mul_a, mul_b=mul_b, xnor=xnor, constant_weights=constant,
                   weight_rom_live=live_bits_of(lambda: rows, simd * w_dt.bitwidth, len(rows)),
                   weight_rom_varying=varying_bits(
                       w_dt.to_hw(weights).reshape(channels // simd, simd, taps), w_dt.bitwidth,
                       word_axes=(0, 2)),
                   ram_style=unit.ram_style, res_type=unit.res_type)


def vvau_parts(spec: VVAUSpec, family: str, dsp: bool) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a vector unit."""
    memories = Memories()
    weight_width = known(spec.weight_rom_varying, spec.simd * spec.weight_bits)
    if not spec.constant_weights:
        memories.add(width=weight_width, depth=spec.taps * spec.groups, rom=True, family=family, style=spec.ram_style)
    # mul2dsp sees the product after wreduce: a mixed-sign multiply's widened operand adds no bit.
    lane_dsps = dsp_count(spec.mul_a, spec.mul_b, product_operand_bits(spec), family,
                          dsp=dsp and spec.res_type == "auto")
    soft_mult = 0 if lane_dsps or not spec.mul_a or spec.res_type == "lut" else spec.simd * spec.mul_a * spec.mul_b
    lut_mult = (spec.simd * shift_add_bits(spec.in_bits, spec.weight_bits) if spec.mul_a and spec.res_type == "lut"
                else 0)
    negate = spec.simd * spec.product_bits if not spec.mul_a and not spec.xnor and not spec.constant_weights else 0
    counters = log2(spec.groups) + log2(spec.taps) + (0 if spec.constant_weights else log2(spec.taps * spec.groups))
    rom_luts, rom_muxes, rom_regs = ((0, 0, 0) if spec.constant_weights else
                                     logic_rom(weight_width, spec.taps * spec.groups,
                                                spec.weight_rom_live, family, spec.ram_style))
    lut = {"control": 1.0, "multiply": soft_mult + negate + (spec.simd if spec.xnor else 0),
           "multiply_wide": soft_mult * spec.mul_a * spec.mul_b / 16, "lut_multiply": lut_mult,
           "adders": spec.simd * spec.acc_bits + counters,
           "logic_memory": rom_luts + rom_muxes}
    ff = {"control": 1.0, "pipeline": spec.simd * (spec.in_bits + spec.out_bits) + counters,
          "products": spec.simd * spec.product_bits, "partial_sums": spec.channels * spec.acc_bits,
          "memory_registers": rom_regs}
    return memories, spec.simd * lane_dsps, lut, ff
