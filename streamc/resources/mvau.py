"""The resource model of the :class:`~streamc.rtl.mvau.MatrixVectorUnit`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ..rtl.arithmetic import tree_stages
from ..rtl.constant_products import graph_levels, graph_stages
from ..rtl.mvau import (credit_queue_depth, has_operand_stage, has_route_stage, splits_multiplies, unit_latency,
                        weight_rom_banks)
from .arithmetic import dsp_count, product_operand_bits, shift_add_bits
from .constant_products import constant_adder_bits, graph_register_bits, is_one_magnitude
from .memories import (LIVE_BITS_LIMIT, Memories, bram_bank_mux, live_bits_of, logic_rom, memory_mapping,
                       rom_varying_bits, varying_bits)
from .shared import KernelSpec, known, range_bits
from .stream import FIFOSpec
from .threshold import compressor_full_adders, threshold_structure
from .weight_rom import WeightRomColumns


@dataclass(frozen=True)
class MVAUSpec(KernelSpec):
    """What the resources of a :class:`~streamc.rtl.mvau.MatrixVectorUnit` depend on.

    Widths are the ones the generator gives its signals: ``acc_bits`` the accumulator and
    comparator, ``product_bits`` one lane's product; ``mul_a``/``mul_b`` the operand widths of a
    lane's multiply as Yosys sees it (0 when the lane does not multiply: XNOR or a bipolar
    operand). ``starts_from_offsets``: the bare accumulator restarts from a per-channel offset (a
    bipolar operand's), read from a ROM of ``start_rom_bits`` per lane (0: constants) of which
    ``start_rom_live`` bits are live. ``live_lanes``: the PE x SIMD lanes whose weight is not 0 in
    every word of the ROM (-1: all); a lane that only ever multiplies by 0 adds nothing.
    ``distinct_lanes``: of those, the ones whose weights over the ROM's words differ from every other
    lane's at the same SIMD position (-1: not known); lanes with equal weights compute equal
    products, which Yosys merges where the ROM is logic. ``thresholds`` per channel (0: none); the
    ``rq_*`` fields describe the requantization's multiply (0 without one), ``rq_corrections`` its correction points per lane. ``weight_rom_live``, ``threshold_rom_live``,
    ``rq_multiplier_live``, ``rq_offset_live`` and ``rq_correction_live``: the :func:`rom_live_bits` of the
    weight, threshold and requantization ROMs (-1: not known, all bits count); ``rq_correction_varying``: the
    correction points' ROM bit columns that differ between its words, as ``weight_rom_varying`` for the weights. ``rq_sum_live``: the bits of the
    requantization's sum that reach the output (-1: all). ``live_compares``: over the PE lanes, the
    threshold compares that are not constant (a level every channel of a lane reaches, or none does,
    folds away), equal ones merged as Yosys merges them in logic; ``block_compares``: the same
    unmerged, as they stay with the thresholds in block RAM; ``compare_full_adders``: the full adders
    summing a lane's compares, which take merged ones apart too (-1: not known, every compare counts).
    ``constant_adders``: where the weight ROM has one word, the estimated adder bits of the lanes' shift-and-add
    graph (:func:`~.constant_products.constant_adder_bits`); -1 where the lanes multiply; ``one_magnitude``: those
    weights all of one magnitude (+-1, ternary), whose bits take their own LUT coefficient; ``graph_levels``: the most
    adder levels of that graph solved for pipelining (:func:`~streamc.rtl.constant_products.graph_levels`: the spec's
    latency takes that bound, the unit's the solved graph's); ``keep_adders``: its adders
    each kept as a carry chain (:attr:`~streamc.rtl.mvau.MatrixVectorUnit.keep_adders`). ``flow_control``: what moves
    the pipeline (:data:`~streamc.rtl.mvau.FLOW_CONTROLS`); ``"credit"``'s output queue holds :attr:`queue_depth` beats
    (:attr:`output_queue`).
    ``multiply_register``: the lanes' multiplies in LUTs are split by a register
    (:attr:`~streamc.rtl.mvau.MatrixVectorUnit.multiply_register`).
    """

    mh: int
    mw: int
    pe: int
    simd: int
    in_bits: int
    weight_bits: int
    out_bits: int
    acc_bits: int
    product_bits: int
    mul_a: int
    mul_b: int
    xnor: bool
    thresholds: int = 0
    rq_acc_bits: int = 0
    rq_multiplier_bits: int = 0
    rq_product_bits: int = 0
    rq_offset_bits: int = 0
    rq_sum_bits: int = 0
    rq_corrections: int = 0
    weight_rom_live: int = -1
    threshold_rom_live: int = -1
    weight_rom_varying: int = -1
    threshold_rom_varying: int = -1
    rq_multiplier_live: int = -1
    rq_offset_live: int = -1
    rq_correction_live: int = -1
    rq_correction_varying: int = -1
    rq_sum_live: int = -1
    live_compares: int = -1
    block_compares: int = -1
    compare_full_adders: int = -1
    signed_multiply: bool = False
    starts_from_offsets: bool = False
    start_rom_bits: int = 0
    start_rom_live: int = -1
    live_lanes: int = -1
    distinct_lanes: int = -1
    ram_style: str = "auto"
    ram_style_thresholds: str = "auto"
    res_type: str = "auto"
    operand_register: bool = False
    route_register: bool = False
    tree_every: int = 0
    constant_adders: float = -1
    one_magnitude: bool = False
    graph_levels: int = 0
    keep_adders: bool = False
    flow_control: str = "stall"
    multiply_register: bool = False

    @property
    def nf(self) -> int:
        return self.mh // self.pe

    @property
    def sf(self) -> int:
        return self.mw // self.simd

    @property
    def latency(self) -> int:
        """The unit's :attr:`~streamc.rtl.mvau.MatrixVectorUnit.latency` at this folding."""
        constant = self.constant_adders >= 0
        banks = weight_rom_banks(self.nf * self.sf, self.operand_register, self.ram_style)
        operand_stage = has_operand_stage(self.operand_register, banks, bool(self.mul_a))
        route_stage = has_route_stage(self.route_register, operand_stage, self.ram_style, constant)
        product_stage = splits_multiplies(self.multiply_register, bool(self.mul_a) and not constant, self.res_type)
        return unit_latency(self.output_stage, operand_stage + 2 * route_stage, product_stage,
                            1 if constant else self.simd,
                            self.thresholds, self.tree_every, graph_stages(self.graph_levels, self.tree_every))

    @property
    def queue_depth(self) -> int:
        """Beats of the output queue of ``flow_control="credit"`` (:func:`~streamc.rtl.mvau.credit_queue_depth`);
        0 otherwise."""
        return credit_queue_depth(self.latency, self.sf) if self.flow_control == "credit" else 0

    @property
    def output_queue(self) -> FIFOSpec | None:
        """The output queue of ``flow_control="credit"``, a FIFO priced by its own model; ``None`` otherwise."""
        return (FIFOSpec(width=self.pe * self.out_bits, depth=self.queue_depth, buffered=False) if self.queue_depth
                else None)

    @property
    def output_stage(self) -> str:
        return "requant" if self.rq_multiplier_bits else "thresholds" if self.thresholds else "accumulator"

    @classmethod
    def of_unit(cls, unit) -> "MVAUSpec":
        """The spec of a constructed :class:`~streamc.rtl.mvau.MatrixVectorUnit` (not elaborated)."""
        return MVAUSpecs(unit).at(unit.in_elems)


class MVAUSpecs:
    """The :class:`MVAUSpec` of a constructed :class:`~streamc.rtl.mvau.MatrixVectorUnit` at any SIMD: SIMD
    only lays out the weight ROM's words (the unit's other parts depend on its PE, its weights and its
    output stage), so the planner builds a layer's unit once per PE and reads every SIMD's spec off it.
    What the weight ROM's layout decides is computed from the weights here, as
    :attr:`~streamc.rtl.mvau.MatrixVectorUnit.weight_rom_rows` lays them out (tests compare the two)."""

    def __init__(self, unit):
        in_dt, w_dt = unit.in_dtype, unit.weight_dtype
        weights, pe = unit.weights, unit.out_elems
        nf = weights.shape[0] // pe
        xnor = in_dt.bipolar and w_dt.bipolar
        if xnor or in_dt.bipolar or w_dt.bipolar:
            # XNOR: a bit; a masked weight: the weight; a complemented input: the input.
            mul_a = mul_b = 0
            product_bits = 1 if xnor else w_dt.bitwidth if in_dt.bipolar else in_dt.bitwidth
        else:
            # Amaranth widens the unsigned operand of a mixed-sign product by one bit.
            in_signed = unit.lanes_multiply_signed_input
            mul_a = in_dt.bitwidth + (1 if w_dt.signed and not in_signed else 0)
            mul_b = w_dt.bitwidth + (1 if in_signed and not w_dt.signed else 0)
            product_bits = in_dt.bitwidth + w_dt.bitwidth + (1 if in_signed != w_dt.signed else 0)
        thresholds = 0 if unit.thresholds is None else unit.thresholds.shape[1]
        rq = {}
        if unit.requant is not None:
            acc, mult = unit.acc_shape, unit.multiplier_shape
            mixed = acc.signed != mult.signed
            rq = dict(rq_acc_bits=acc.width + (1 if mixed and not acc.signed else 0),
                      rq_multiplier_bits=mult.width + (1 if mixed and not mult.signed else 0),
                      rq_product_bits=unit.product_shape.width, rq_offset_bits=unit.offset_shape.width,
                      rq_sum_bits=unit.sum_shape.width, rq_corrections=unit.requant.corrections,
                      # Rounding without a tie fix-up reads no sum bit below the shift.
                      rq_sum_live=(unit.sum_shape.width if unit.requant.rounding in ("HALF_EVEN", "HALF_ODD")
                                   else max(unit.sum_shape.width - unit.requant.shift, 1)),
                      rq_multiplier_live=live_bits_of(lambda: unit.multiplier_rom_rows, pe * mult.width, nf),
                      rq_offset_live=live_bits_of(lambda: unit.offset_rom_rows, pe * unit.offset_shape.width, nf))
            if unit.requant.corrections:
                # Channels share correction points, or pad theirs with one never reached: Yosys drops the ROM's
                # constant columns and compares with constants (onnxruntime's u8 MLP's first layer: 2 of 200 vary).
                correction_width = pe * unit.requant.corrections * acc.width
                rq.update(rq_correction_live=live_bits_of(lambda: unit.correction_rom_rows, correction_width, nf),
                          rq_correction_varying=rom_varying_bits(unit.correction_rom_rows, correction_width))
        live = {}
        if thresholds:
            live["threshold_rom_live"] = live_bits_of(lambda: unit.threshold_rom_rows,
                                                       pe * thresholds * unit.acc_shape.width, nf)
            width = unit.acc_shape.width
            fields = (unit.thresholds & ((1 << width) - 1)).reshape(nf, -1)
            live["threshold_rom_varying"] = varying_bits(fields, width)
            full_lo, full_hi = unit.output_sum_range
            live["live_compares"], _, _ = threshold_structure(
                unit.thresholds, pe, full_lo, full_hi + 1, width, shared=False)
            live["block_compares"], _, live["compare_full_adders"] = threshold_structure(
                unit.thresholds, pe, full_lo, full_hi + 1, width, shared=False, merge_equal=False)
        start = unit.start_rom_shape()
        if start is not None:
            live.update(start_rom_bits=start.width,
                        start_rom_live=live_bits_of(lambda: unit.start_rom_rows, pe * start.width, nf))
        self._fields = dict(mh=weights.shape[0], mw=weights.shape[1], pe=pe,
                            in_bits=in_dt.bitwidth, weight_bits=w_dt.bitwidth, out_bits=unit.out_width,
                            acc_bits=unit.acc_shape.width, product_bits=product_bits, mul_a=mul_a, mul_b=mul_b,
                            xnor=xnor, thresholds=thresholds,
                            signed_multiply=bool(mul_a and unit.lanes_multiply_signed_input and w_dt.signed),
                            starts_from_offsets=unit.starts_from_offsets, ram_style=unit.ram_style,
                            ram_style_thresholds=unit.ram_style_thresholds, res_type=unit.res_type,
                            operand_register=unit.operand_register, route_register=unit.route_register,
                            tree_every=unit.tree_every,
                            flow_control=unit.flow_control,
                            multiply_register=unit.multiply_register,
                            keep_adders=unit.keep_adders,
                            **rq, **live)
        self._weights, self._in_bits, self._bits = weights, in_dt.bitwidth, w_dt.bitwidth
        # The weights as the ROM stores them, in the narrowest integers that hold them.
        stored = w_dt.to_hw(weights).astype(np.min_scalar_type((1 << w_dt.bitwidth) - 1))
        # Lanes of equal weights matter where the ROM is logic, which past the size limit it is not.
        self._columns = WeightRomColumns(weights, stored, pe, w_dt.bitwidth,
                                         distinct=weights.size * w_dt.bitwidth <= LIVE_BITS_LIMIT)
        self._spec_of: dict[int, MVAUSpec] = {}

    def at(self, simd: int) -> MVAUSpec:
        """The spec with ``simd`` lanes per PE."""
        if simd not in self._spec_of:
            fields = self._columns.at(simd)
            if self._weights.shape[0] // self._fields["pe"] * (self._weights.shape[1] // simd) == 1:
                fields["constant_adders"] = constant_adder_bits(self._weights, self._in_bits, self._bits)
                fields["one_magnitude"] = is_one_magnitude(self._weights)
                fields["graph_levels"] = graph_levels(self._weights)
            self._spec_of[simd] = MVAUSpec(simd=simd, **self._fields, **fields)
        return self._spec_of[simd]


def mvau_parts(spec: MVAUSpec, family: str, dsp: bool) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of an MVAU.

    One long function: it is the feature list of the fitted model, each feature written beside the
    synthesis result that gave it its form, and most of them read the same memory mappings and lane
    counts."""
    lanes = spec.pe * spec.simd
    memories = Memories()
    # Yosys maps a ROM without its constant bit columns (where the contents are known).
    weight_width = known(spec.weight_rom_varying, lanes * spec.weight_bits)
    threshold_width = known(spec.threshold_rom_varying, spec.pe * spec.thresholds * spec.acc_bits)
    # A requantization's correction points are compared with the sum as thresholds are.
    correction_width = known(spec.rq_correction_varying, spec.pe * spec.rq_corrections * spec.acc_bits)
    memories.add(width=weight_width, depth=spec.nf * spec.sf, rom=True, family=family, style=spec.ram_style)
    if spec.nf > 1:
        memories.add(width=spec.simd * spec.in_bits, depth=spec.sf, rom=False, family=family)
    if spec.thresholds:
        memories.add(width=threshold_width, depth=spec.nf, rom=True, family=family, style=spec.ram_style_thresholds)
    if spec.start_rom_bits:
        memories.add(width=spec.pe * spec.start_rom_bits, depth=spec.nf, rom=True, family=family)
    # The ROMs kept in logic, counting only their live bit columns where the contents are known.
    roms = [(weight_width, spec.nf * spec.sf, spec.weight_rom_live, spec.ram_style)]
    if spec.thresholds:
        roms.append((threshold_width, spec.nf, spec.threshold_rom_live, spec.ram_style_thresholds))
    if spec.start_rom_bits:
        roms.append((spec.pe * spec.start_rom_bits, spec.nf, spec.start_rom_live, "auto"))
    if spec.rq_corrections:
        memories.add(width=correction_width, depth=spec.nf, rom=True, family=family)
        roms.append((correction_width, spec.nf, spec.rq_correction_live, "auto"))
    if spec.rq_multiplier_bits:
        roms += [(spec.pe * spec.rq_multiplier_bits, spec.nf, spec.rq_multiplier_live, "auto"),
                 (spec.pe * spec.rq_offset_bits, spec.nf, spec.rq_offset_live, "auto")]
    logic_roms = [(depth, logic_rom(width, depth, live, family, style)) for width, depth, live, style in roms]
    # The requantizer's ROMs feed a multiplier and an adder: a LUT4 per live column, measured by
    # synthesizing designs with and without their contents (onnxruntime's and the sweep's, one to
    # four lanes, 8 and 12 words: 31 to 52 LUTs for 31 to 54 columns); of 4 words or fewer they
    # join the logic they feed (7 LUTs for 19 columns). The other ROMs feed compares and adders
    # that the LUTs of their columns take in differently, so they are counted apart.
    rq_roms = 2 if spec.rq_multiplier_bits else 0
    rom_luts = sum(luts for _, (luts, _, _) in logic_roms[:len(logic_roms) - rq_roms])
    rq_rom_luts = sum(luts for depth, (luts, _, _) in logic_roms[len(logic_roms) - rq_roms:] if depth > 4)
    rom_regs = sum(regs for _, (_, _, regs) in logic_roms)
    # ECP5 joins the 16-word LUTs of a ROM of 32 or 64 words in PFUMX and L6MUX cells, which are
    # not LUTs; at other depths (and on iCE40) the joining multiplexers are LUTs.
    rom_muxes = sum(muxes for depth, (_, muxes, _) in logic_roms
                    if family != "ecp5" or depth > 64 or depth & (depth - 1))
    # Block RAM read ports with an enable: the read data is held beside the block.
    memories_read = [(width, depth, True, style) for width, depth, _, style in roms]
    if spec.nf > 1:
        memories_read.append((spec.simd * spec.in_bits, spec.sf, False, "auto"))
    mappings = [memory_mapping(width=width, depth=depth, rom=rom, family=family, style=style)
                for width, depth, rom, style in memories_read]
    in_bram = [mapping.kind == "bram" for mapping in mappings]
    # An XNOR lane is one LUT4 of the weight bit as read, the input bit, the buffered input bit and
    # the select between those two: the weight ROM's read (the first) and the input select cost
    # nothing more. On the iCE40 a binary input masking a weight takes in some of the logic that
    # holds the weight's read too: that read has a coefficient of its own (an ECP5 block RAM holds
    # its read data itself, bram_read fits near 0 there, and nothing is left to take in).
    binary_input = spec.in_bits == 1 and not spec.mul_a and not spec.xnor
    masks_weights = family == "ice40" and binary_input
    bram_reads = [width if bram and rom and not (spec.xnor and n == 0) else 0
                  for n, ((width, _, rom, _), bram) in enumerate(zip(memories_read, in_bram))]
    bram_read_masked = bram_reads[0] if masks_weights else 0
    bram_read = sum(bram_reads) - bram_read_masked
    # The input buffer is a RAM: Yosys keeps its read data and enable beside a block RAM in logic.
    bram_ram_read = sum(width for (width, _, rom, _), bram in zip(memories_read, in_bram) if bram and not rom)
    # Past 18 bits the buffer takes a PDPW16KD, whose read port has no read-during-write rule:
    # to read the old word Yosys delays the write, as it does for a sliding window's ring.
    bram_ram_wide = sum(width for (width, _, rom, _), mapping in zip(memories_read, mappings)
                        if not rom and mapping.primitive == "PDPW16KD")
    bram_read_mux = sum(bram_bank_mux(mapping, width) for (width, *_), mapping in zip(memories_read, mappings))
    # mul2dsp sees the product after wreduce: a mixed-sign multiply's widened operand adds no bit.
    constant = spec.constant_adders >= 0
    # Constant products are shifts and adds: never a DSP.
    lane_dsps = dsp_count(spec.mul_a, spec.mul_b, product_operand_bits(spec), family,
                          dsp=dsp and spec.res_type == "auto" and not constant)
    rq_dsps = 0
    if spec.rq_multiplier_bits:
        memories.add(width=spec.pe * spec.rq_multiplier_bits, depth=spec.nf, rom=True, family=family)
        memories.add(width=spec.pe * spec.rq_offset_bits, depth=spec.nf, rom=True, family=family)
        rq_dsps = dsp_count(spec.rq_acc_bits, spec.rq_multiplier_bits, spec.rq_product_bits, family, dsp=dsp)
    dsps = lanes * lane_dsps + spec.pe * rq_dsps
    # A registered product of at most four operand bits is one LUT4 per product bit, however it is
    # written: neither Yosys' soft multiplier nor the shift-and-add of res_type "lut" shows.
    direct = bool(spec.mul_a) and not lane_dsps and spec.in_bits + spec.weight_bits <= 4
    soft_mult = (0 if lane_dsps or not spec.mul_a or spec.res_type == "lut" or direct
                 else lanes * spec.mul_a * spec.mul_b)
    lut_mult = (lanes * shift_add_bits(spec.in_bits, spec.weight_bits)
                if spec.mul_a and spec.res_type == "lut" and not direct else 0)
    # Once the adder tree is registered (tree_every) an unsplit multiply in LUTs is the critical stage, and a Gowin's
    # abc9 (-maxlut 8) maps it for depth in LUT5s (two LUT4s and a MUX2_LUT5) before the product's carry chain: 64
    # lanes of UINT4 x INT4 took 3552 LUTs against 3104 unregistered (with -nowidelut 3104 both). The iCE40 and ECP5
    # kept their counts (the ECP5 only grows for signed inputs, listed as known off in the tests).
    timed_multiply = (lanes * product_operand_bits(spec) if family == "gowin" and lut_mult and spec.tree_every
                      and not splits_multiplies(spec.multiply_register, True, spec.res_type) else 0)
    # Yosys' soft signed multipliers grow faster than their partial products (4 x 4: about 55 LUTs, 3 x 2: 8).
    soft_mult_wide = soft_mult * spec.mul_a * spec.mul_b / 16
    masked = _binary_operand_bits(spec)
    # The lanes that only ever multiply by 0 drop out of their PE's tree (counted as spread evenly).
    live_per_pe = max(1, round(known(spec.live_lanes, lanes) / spec.pe))
    # A binary input against a weight that never changes (a ROM of one word) is that weight or 0:
    # each of the weight's set bits a copy of the input bit, so the tree is priced as one of single
    # bits, with a coefficient of its own.
    fixed_binary = binary_input and not masked
    tree = spec.pe * (_adder_tree_bits(live_per_pe, 1 if fixed_binary else spec.product_bits) + spec.acc_bits)
    # Wider products are summed on a tree of carry-chain adders (rtl.arithmetic.adder_tree keeps each
    # sum); one-bit products (XNOR) are left to Yosys, which builds full adders in LUTs.
    popcount, tree = (tree, 0) if spec.product_bits == 1 else (0, tree)
    # Past the first fold the lanes read the input buffer instead of the input: a multiplexer per
    # input bit, with one input more for each further 16-word bank of a LUT RAM buffer; a LUT4
    # selects between two (ECP5's PFUMX/L6MUX join LUT4s into wider multiplexers). An XNOR lane's
    # LUT4 takes in the last select (see bram_read), not the ones across the banks.
    input_select = buffer_banks = 0
    if spec.nf > 1:
        buffer_width = spec.simd * spec.in_bits
        buffer = mappings[-1]
        banks = buffer.banks if buffer.kind == "lutram" else 1
        input_select = buffer_width * (-(-(banks + 1) // 2) - (1 if spec.xnor else 0))
        # A LUT-RAM buffer in several 16-word banks decodes a write enable for each.
        buffer_banks = banks if banks > 1 else 0
    rq_soft = 0 if rq_dsps or not spec.rq_multiplier_bits else spec.pe * spec.rq_acc_bits * spec.rq_multiplier_bits
    # Equal compares merge in logic, not in block RAM (the threshold ROM, read after the weights).
    compares = spec.block_compares if spec.thresholds and in_bram[1] else spec.live_compares
    lut = {"control": 1.0, "soft_multiply": soft_mult, "soft_multiply_wide": soft_mult_wide,
           "soft_multiply_signed": soft_mult if spec.signed_multiply else 0, "lut_multiply": lut_mult,
           "lut_multiply_timed": timed_multiply,
           "multiply_direct": lanes * product_operand_bits(spec) if direct else 0,
           "hard_multiply_signed": lanes * spec.product_bits if lane_dsps and spec.signed_multiply else 0,
           "binary_operand": masked + (lanes if spec.xnor else 0),
           # A bare XNOR accumulator restarts from -MW and adds twice the popcount: Yosys builds the
           # popcount and that sum as one compressor, unlike the popcount before thresholds.
           "popcount": 0 if spec.starts_from_offsets else popcount,
           "popcount_from_offset": popcount if spec.starts_from_offsets else 0,
           # Sums of masked or complemented products are narrow and take their inputs' LUTs in
           # differently from products of multiplies: a coefficient of their own.
           "adders": 0 if masked or fixed_binary else tree, "binary_adders": tree if masked else 0,
           "fixed_binary_adders": tree if fixed_binary else 0,
           # Each masked or complemented lane also feeds its adder apart from its width (ECP5: a
           # carry cell's LUT4 pair takes two bits, so two-bit products cost relatively more).
           "binary_lanes": -(-masked // spec.product_bits) if masked else 0,
           # Each accumulator bit restarts from the first fold's sum: a select in a LUT of its own on
           # the ECP5, whose carry cells take in nothing but the two addends.
           "accumulator_select": spec.pe * spec.acc_bits if spec.product_bits > 1 else 0,
           "accumulator_start": spec.pe * spec.acc_bits if spec.starts_from_offsets else 0,
           "input_select": input_select, "buffer_banks": buffer_banks,
           "thresholds": (known(compares, spec.pe * spec.thresholds) + spec.pe * spec.rq_corrections) * spec.acc_bits,
           # Yosys sums each PE's compares reached in one $macc: a compressor of full adders.
           "count_full_adders": (known(spec.compare_full_adders, spec.pe * compressor_full_adders(spec.thresholds))
                                 + spec.pe * compressor_full_adders(spec.rq_corrections)),
           "requant": spec.pe * known(spec.rq_sum_live, spec.rq_sum_bits) + rq_soft,
           # Below the shift a rounded-down sum still carries: the chain is there, fewer LUTs beside it.
           "requant_carry": spec.pe * (spec.rq_sum_bits - known(spec.rq_sum_live, spec.rq_sum_bits)),
           "logic_memory": rom_luts + memories.ff_ram_mux, "requant_rom": rq_rom_luts,
           "rom_muxes": rom_muxes,
           # The neuron fold, the synapse fold and the weight address count apart.
           "counters": range_bits(spec.nf) + range_bits(spec.sf) + range_bits(spec.nf * spec.sf),
           "bram_read": bram_read, "bram_read_masked": bram_read_masked, "bram_ram_read": bram_ram_read,
           "bram_read_mux": bram_read_mux}
    if constant:
        # The lanes' products and tree are the adder graph; their sum starts the accumulator.
        for name in ("soft_multiply", "soft_multiply_wide", "soft_multiply_signed", "lut_multiply",
                     "lut_multiply_timed", "multiply_direct", "binary_operand", "popcount", "popcount_from_offset",
                     "adders", "binary_adders", "fixed_binary_adders", "binary_lanes", "accumulator_select"):
            lut[name] = 0
        lut["constant_adders"] = spec.constant_adders
    bram_words = sum(width for (width, _, rom, _), bram in zip(memories_read, in_bram) if bram and rom)
    # route_register registers the words of the output stage's ROMs (not the weights', the first, nor the starting
    # offsets', read with no register) a second time: a word's bits where the ROM is a block RAM; Yosys moves a ROM in
    # logic's registers to its address (an MVAU of 2 PEs, 2 neuron folds, 3 thresholds: 2 flip-flops more).
    start_rom = 1 + bool(spec.thresholds) if spec.start_rom_bits else None
    route_words = sum(width for n, ((width, _, rom, _), bram) in enumerate(zip(memories_read, in_bram))
                      if spec.route_register and rom and bram and n not in (0, start_rom))
    ff = {"registers": _mvau_registers(spec, lane_dsps, rq_dsps, weights_in_logic=mappings[0].kind == "logic",
                                       bram_words=bram_words) + route_words,
          "bram_ram_read": bram_ram_read,
          "bram_ram_wide": bram_ram_wide,
          "dsp_products": lanes * spec.product_bits if lane_dsps else 0,
          "rq_dsp_products": spec.pe * spec.rq_product_bits if rq_dsps else 0,
          "memory_registers": rom_regs + memories.sync_regs + memories.ff_ram_bits}
    return memories, dsps, lut, ff


def _tree_levels(count: int, width: int):
    """The widths of each level of :func:`streamc.rtl.arithmetic.adder_tree` over ``count`` values of ``width``
    bits, after the first: pairs summed, each sum one bit wider than its wider operand, an odd one carried on.
    Each level is a pair of (its sums' widths, all its values' widths)."""
    level = [width] * count
    while len(level) > 1:
        pairs = [max(level[n], level[n + 1]) + 1 for n in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
        yield pairs, level


@cache
def _adder_tree_bits(count: int, width: int) -> int:
    """Output bits of all adders of :func:`streamc.rtl.arithmetic.adder_tree` over ``count`` values of
    ``width`` bits."""
    return sum(sum(pairs) for pairs, _ in _tree_levels(count, width))


@cache
def _registered_tree_bits(count: int, width: int, every: int) -> int:
    """Register bits :func:`streamc.rtl.arithmetic.adder_tree` puts after every ``every`` levels (and the
    last) of its tree over ``count`` values of ``width`` bits (0 without ``every``)."""
    if not every:
        return 0
    levels = [level for _, level in _tree_levels(count, width)]
    return sum(sum(level) for depth, level in enumerate(levels, 1) if depth % every == 0 or depth == len(levels))


def _pipeline_registers(spec: MVAUSpec, bram_words: int, weights_in_logic: bool) -> int:
    """Register bits of the stages ``operand_register``, ``multiply_register`` and ``tree_every`` add: the
    operands, the words of the ROMs in block RAM (``bram_words`` bits; a ROM in logic has its read register moved
    to its address by Yosys, so registering its word adds next to nothing: 56 flip-flops where its words have 183
    bits on the UP5K), the weight ROM's banks in logic (:func:`~streamc.rtl.mvau.weight_rom_banks`), the lanes'
    split multiplies, each lane's registered tree levels and each PE's threshold count, and the control that moves
    along (valid, first, last and the neuron fold)."""
    control = 3 + range_bits(spec.nf)
    bits = 0
    banks = weight_rom_banks(spec.nf * spec.sf, spec.operand_register, spec.ram_style)
    if banks > 1:
        # Each bank's word and the bank number are registered; Yosys keeps them (an MVAU of 4 PEs, 8 lanes of
        # 2-bit weights, 4 banks: 359 flip-flops more than without operand_register on the ECP5-85F).
        width = known(spec.weight_rom_varying, spec.pe * spec.simd * spec.weight_bits)
        bits += banks * width + range_bits(banks)
        if spec.mul_a:
            # The operand register after the bank select is a stage of its own where the lanes multiply
            # (MatrixVectorUnit.operand_stage), and it takes the selected word too.
            bits += control + spec.simd * spec.in_bits + width
    elif spec.operand_register:
        bits += control + spec.simd * spec.in_bits + bram_words
        if has_route_stage(spec.route_register, True, spec.ram_style, spec.constant_adders >= 0):
            # The second operand stage: the inputs, and the weights' word where it is a block RAM's (Yosys moves a
            # ROM in logic's registers to its address); the stage before it: the inputs and the ROM's address.
            weights = 0 if weights_in_logic else known(spec.weight_rom_varying, spec.pe * spec.simd * spec.weight_bits)
            bits += 2 * (control + spec.simd * spec.in_bits) + weights + range_bits(spec.nf * spec.sf)
    if splits_multiplies(spec.multiply_register, bool(spec.mul_a) and spec.constant_adders < 0, spec.res_type):
        lanes = known(spec.live_lanes, spec.pe * spec.simd)
        bits += control + lanes * _split_multiply_bits(spec.mul_a, spec.mul_b)
    if spec.tree_every:
        if spec.constant_adders >= 0:
            # The lanes' adder graph, pipelined (its solved levels are not known before it is).
            graph_bits, stages = graph_register_bits(spec.constant_adders, spec.graph_levels, spec.tree_every)
            bits += round(graph_bits) + control * stages
        else:
            bits += spec.pe * _registered_tree_bits(spec.simd, spec.product_bits, spec.tree_every)
            bits += control * tree_stages(spec.simd, spec.tree_every)
        bits += spec.pe * _registered_tree_bits(spec.thresholds, 1, spec.tree_every)
        bits += tree_stages(spec.thresholds, spec.tree_every)
    return bits


def _split_multiply_bits(a_bits: int, b_bits: int) -> int:
    """Register bits of one product :func:`~streamc.rtl.placement.multiply` splits: the sums of pairs of partial
    products over the narrower operand's bits, each two bits wider than the wider operand, and a lone one as wide
    (Yosys on 32 lanes of 5 x 4-bit multiplies: 453 flip-flops more on the ECP5-85F, 14 a lane and the control)."""
    wide, narrow = max(a_bits, b_bits), min(a_bits, b_bits)
    return narrow // 2 * (wide + 2) + narrow % 2 * wide


def _binary_operand_bits(spec: MVAUSpec) -> int:
    """Product bits of the lanes that mask a weight or complement an input by a weight (0 for other
    lanes), each a LUT4 where the adder does not take it in: only where the weight varies over the
    ROM's words. A weight that stays the same makes the product a constant, the input bit or the
    input itself, which PEs share (:func:`_mvau_registers`)."""
    if spec.mul_a or spec.xnor:
        return 0
    varying = known(spec.weight_rom_varying, spec.pe * spec.simd * spec.weight_bits)
    return varying * spec.product_bits // spec.weight_bits


def _mvau_registers(spec: MVAUSpec, lane_dsps: int, rq_dsps: int, weights_in_logic: bool, bram_words: int) -> int:
    """Register bits a :class:`~streamc.rtl.mvau.MatrixVectorUnit` declares, stage by stage, except
    memory read registers and the products a hard multiplier holds in its own registers. Where the
    weight ROM is logic, lanes with equal weights share their product registers (a binary-weight
    layer's ROM of 4 words has at most 16 weight patterns per SIMD position, whatever the PEs)."""
    nf, sf, pe, lanes = spec.nf, spec.sf, spec.pe, spec.pe * spec.simd
    counters = range_bits(nf) + range_bits(sf) + range_bits(nf * sf)
    operands = 3 + range_bits(nf) + spec.simd * spec.in_bits + (1 if nf > 1 else 0)
    product_bits = known(spec.live_lanes, lanes) * spec.product_bits
    if not spec.mul_a and not spec.xnor:
        # A lane whose weight never changes holds an input bit (or its complement) or a constant:
        # the PEs share one register per input bit.
        product_bits = _binary_operand_bits(spec)
        if product_bits < lanes * spec.product_bits:
            product_bits += spec.simd * spec.in_bits
    if weights_in_logic and spec.distinct_lanes >= 0:
        product_bits = min(product_bits, spec.distinct_lanes * spec.product_bits)
    if spec.constant_adders >= 0:
        # One registered sum per PE (the adder graph's), as wide as the accumulator.
        product_bits = pe * spec.acc_bits
    products = 3 + range_bits(nf) + (0 if lane_dsps else product_bits)
    accumulators = 1 + pe * spec.acc_bits
    # The output register, and with "skid" a skid register as wide, valid bit included, beside it (Yosys: an MVAU of
    # 4 PEs with 2-bit outputs, 9 flip-flops more on the UP5K and the ECP5-85F alike). With "credit" the output
    # queue (its own model, MVAUSpec.output_queue) stands in their place; its credits, a bit per beat, count here.
    output = {"stall": 1 + pe * spec.out_bits, "skid": 2 * (1 + pe * spec.out_bits),
              "credit": spec.queue_depth}[spec.flow_control]
    if spec.rq_multiplier_bits:
        stage4 = (2 + range_bits(nf) + (0 if rq_dsps else pe * spec.rq_product_bits)
                  + pe * known(spec.rq_sum_live, spec.rq_sum_bits)
                  + pe * (spec.rq_corrections + range_bits(2 * spec.rq_corrections + 1)))
    elif spec.thresholds:
        stage4 = 1 + pe * spec.thresholds
    else:
        stage4 = 0
    return (counters + operands + products + accumulators + stage4 + output
            + _pipeline_registers(spec, bram_words, weights_in_logic))
