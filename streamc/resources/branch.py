"""The resource models of the branch kernels of :mod:`streamc.rtl.branch`: add, concatenation and fork."""

from __future__ import annotations

from dataclasses import dataclass

from .arithmetic import dsp_count
from .memories import Memories
from .shared import KernelSpec, and_luts, bits_of_range, log2


@dataclass(frozen=True)
class AddSpec(KernelSpec):
    """An :class:`~streamc.rtl.branch.ElementwiseAdd`: ``elems`` adders of ``out_bits``, a weight
    other than a power of two costing a DSP or, in logic, one operand-wide adder per further set
    bit (shift-and-add)."""

    elems: int
    a_bits: int
    b_bits: int
    out_bits: int
    a_weight: int
    b_weight: int
    a_signed: bool
    b_signed: bool

    def multiplies(self) -> list[tuple[int, int, int, int]]:
        """Operand and product widths, and the weight, of each weight's multiply that Yosys keeps: a
        weight of 0, 1, -1 or a positive power of two folds into wiring, a shift or a negation."""
        kept = []
        for bits, signed, weight in ((self.a_bits, self.a_signed, self.a_weight),
                                     (self.b_bits, self.b_signed, self.b_weight)):
            if weight in (0, 1, -1) or (weight > 0 and weight & (weight - 1) == 0):
                continue
            # Amaranth gives the constant its narrowest shape and widens the unsigned side of a mixed
            # product; Yosys' wreduce takes the sign bit it adds to a positive constant off again.
            const_bits, const_signed = bits_of_range(min(weight, 0), max(weight, 0))
            a = bits + (1 if const_signed and not signed else 0)
            kept.append((a, const_bits, a + const_bits, weight))
        return kept

    @classmethod
    def of_unit(cls, unit) -> "AddSpec":
        a_dt, b_dt = unit.a_dtype, unit.b_dtype
        return cls(elems=unit.in_elems, a_bits=unit.a_width + a_dt.bipolar, b_bits=unit.b_width + b_dt.bipolar,
                   out_bits=unit.out_width, a_weight=unit.a_weight, b_weight=unit.b_weight,
                   a_signed=a_dt.signed or a_dt.bipolar, b_signed=b_dt.signed or b_dt.bipolar)


@dataclass(frozen=True)
class ConcatSpec(KernelSpec):
    """A :class:`~streamc.rtl.branch.ChannelConcat` of ``inputs`` streams: a multiplexer and two counters."""

    inputs: int
    elems: int
    bits: int
    max_beats: int

    @classmethod
    def of_unit(cls, unit) -> "ConcatSpec":
        return cls(inputs=len(unit.channels), elems=unit.in_elems, bits=unit.in_width,
                   max_beats=max(unit.channels) // unit.in_elems)


@dataclass(frozen=True)
class ForkSpec(KernelSpec):
    """A :class:`~streamc.rtl.branch.StreamFork` to ``outputs`` streams: a flag per output, payload wired."""

    outputs: int
    width: int

    @classmethod
    def of_unit(cls, unit) -> "ForkSpec":
        return cls(outputs=unit.outputs, width=unit.in_elems * unit.in_width)


def add_parts(spec: AddSpec, family: str, dsp: bool) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of an elementwise add."""
    memories = Memories()
    dsps, hard_products, shift_adds = 0, 0, 0
    for a, b, product, weight in spec.multiplies():
        hard = dsp_count(a, b, product, family, dsp=dsp)
        dsps += spec.elems * hard
        hard_products += bool(hard)
        # A multiply left to logic adds a shifted copy of its operand per further set bit of the
        # weight, each sum about an operand wide (the shifted-out low bits pass through).
        shift_adds += 0 if hard else (bin(abs(weight)).count("1") - 1) * (a + 1)
    # The final sum of a hard product may go into the multiplier block's own adder (iCE40's
    # SB_MAC16 has one, ECP5's MULT18X18D not): counted apart. A sum of three bits or fewer
    # stays off the carry chain, in LUT logic.
    final = spec.elems * spec.out_bits
    small = spec.out_bits <= 3
    return (memories, dsps, {"control": 1.0, "adders": 0 if hard_products or small else final,
                             "small_adders": spec.elems if small and not hard_products else 0,
                             "shift_adds": spec.elems * shift_adds,
                             # A weight of -1 negates its operand: an adder of its own on iCE40.
                             "negations": final * [spec.a_weight, spec.b_weight].count(-1),
                             "adders_after_multiplier": final if hard_products else 0},
            {"control": 1.0, "registers": spec.elems * spec.out_bits})


def concat_parts(spec: ConcatSpec) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a channel concatenation."""
    memories = Memories()
    counters = log2(spec.inputs) + log2(spec.max_beats)
    return (memories, 0, {"control": 1.0, "select": spec.elems * spec.bits * (spec.inputs - 1),
                          "counters": counters},
            {"control": 1.0, "counters": counters})


def fork_parts(spec: ForkSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a stream fork."""
    memories = Memories()
    # The input is ready once every output has its beat (a flag or its ready): one AND of two
    # terms per output, which ECP5's mapping puts in a single wide LUT while it fits.
    return (memories, 0, {"control": 1.0, "outputs": spec.outputs,
                          "ready": and_luts(2 * spec.outputs, family)},
            {"control": 1.0, "outputs": spec.outputs})
