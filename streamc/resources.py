"""Resource models of streamc's kernels: LUT, FF, block RAM, SPRAM and DSP as Yosys maps them.

Block RAM and DSP counts follow the rules Yosys itself applies, so they are exact:

- **Memories** (``amaranth.lib.memory`` ROMs and RAMs) go through ``memory_libmap``. It maps a
  memory to soft logic when that is cheaper than every hard mapping: soft logic costs
  ``width * depth / 16`` for a ROM (no write port) and ``width * depth`` for a RAM (the
  ``-logic-cost-rom`` and ``-logic-cost-ram`` defaults, truncated to an integer); a block RAM
  mapping costs ``cost * blocks + 0.5 * (address blocks - 1) * width`` (the read mux), with
  ``cost`` 64 for iCE40's ``SB_RAM40_4K`` and 128 for ECP5's ``DP16KD``/``PDPW16KD``, and
  ``blocks = ceil(address blocks * width / port width)`` over the port widths the block offers
  (:func:`memory_mapping`). ECP5 RAMs (not ROMs: ``prune_rom``) may also become LUT RAM
  (``TRELLIS_DPR16X4``, cost 4 per 16 x 4 bits), which is nearly always cheaper than FFs.
  ``synth_ice40`` never maps to SPRAM on its own (``SB_SPRAM256KA`` only by attribute), so
  SPRAM is 0 for every kernel streamc generates today. A ``ram_style`` the planner chose
  (:mod:`streamc.rtl.placement`) overrides the cost model: LUTs, or the cheapest block RAM mapping;
  a ``res_type`` of ``"lut"`` keeps a kernel's lane multiplies off the DSPs.
- **Multipliers** go through ``mul2dsp``: ``synth_ice40 -dsp`` uses one ``SB_MAC16`` per
  16 x 16 piece of a product of operands at least 2 bits wide and a result at least 11 bits
  wide; ``synth_ecp5`` one ``MULT18X18D`` per 18 x 18 piece of any product of operands at
  least 2 bits wide (:func:`dsp_count`). XNOR-popcount and a bipolar operand (a masked weight or
  a complemented input in an MVAU, a negation in a vector unit) use no multiplier.

LUT and FF counts are linear models over structural features of each kernel (datapath bits,
comparators, ROM bits kept in logic, pipeline registers), with coefficients fitted per device
family by ``benchmarks/calibrate_resources.py`` on a sweep of single-kernel syntheses stored in
``benchmarks/calibration/``. Where the logic is regular the features count it as the generator
builds it: the register bits a sliding window or an MVAU declares (less what Yosys merges or
finds constant), the adders of an MVAU's adder tree, the bank multiplexers of block and LUT RAM.
A ROM kept in logic costs per *live* bit column (:func:`rom_live_bits`): its contents, which the
specs read off the units, decide how many columns Yosys keeps.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from .datatypes import DataType
# Fitted by benchmarks/calibrate_resources.py on the training part of the calibration designs (Yosys 0.70).
from .resource_coefficients import COEFFICIENTS

FAMILIES = ("ice40", "ecp5")


def family_of(device: str) -> str:
    """The family (``"ice40"`` or ``"ecp5"``) of a device name such as ``"ice40-up5k"``."""
    family = device.split("-", 1)[0]
    if family not in FAMILIES:
        raise ValueError(f"device must be an iCE40 or ECP5 device (ice40-*, ecp5-*), not {device!r}")
    return family


def _bits_of_range(lo: int, hi: int) -> tuple[int, bool]:
    """Width and signedness of the narrowest shape holding ``[lo, hi]`` (as the RTL computes it)."""
    if lo >= 0:
        return max(int(hi).bit_length(), 1), False
    return max((-int(lo) - 1).bit_length(), int(hi).bit_length()) + 1, True


def accumulator_range(weights: np.ndarray, in_dtype: DataType) -> tuple[int, int]:
    """Least and greatest complete dot product of ``weights`` rows with ``in_dtype`` vectors."""
    w = np.asarray(weights, dtype=np.int64)
    lo = np.minimum(w * in_dtype.min, w * in_dtype.max).sum(axis=1)
    hi = np.maximum(w * in_dtype.min, w * in_dtype.max).sum(axis=1)
    return int(lo.min()), int(hi.max())


#: Largest ROM (bits) whose contents :func:`rom_live_bits` reads (about 10 ms at this size); a larger
#: one is counted whole if it stays in logic.
_LIVE_BITS_LIMIT = 1 << 18


def varying_bits(fields: np.ndarray, bits: int, word_axes: tuple[int, ...] = (0,)) -> int:
    """Bit columns of a ROM that differ between its words: ``fields`` holds the ROM's ``bits``-wide,
    non-negative fields, indexed along ``word_axes`` by word and along the others by position in the
    word. Yosys drops the constant columns before it maps the memory: they take no block RAM width."""
    fields = np.asarray(fields, dtype=np.int64)
    if np.prod([fields.shape[axis] for axis in word_axes]) < 2:
        return 0
    same, any_set = fields, fields
    for axis in sorted(word_axes, reverse=True):
        same, any_set = np.bitwise_and.reduce(same, axis=axis), np.bitwise_or.reduce(any_set, axis=axis)
    differ = same ^ any_set
    return int(sum(((differ >> b) & 1).sum() for b in range(bits)))


def rom_live_bits(rows: list[int], width: int) -> int:
    """Bit columns of a ROM (``rows`` of ``width`` bits) that cost logic when it stays out of block
    RAM: Yosys drops a column that holds the same bit in every row and shares equal columns, so
    only the distinct non-constant ones need LUTs and read registers. -1 for no rows (not counted);
    :func:`_live_bits_of` keeps large ROMs from being read at all."""
    if not rows:
        return -1
    size = (width + 7) // 8
    packed = np.frombuffer(b"".join(int(row).to_bytes(size, "little") for row in rows), dtype=np.uint8)
    bits = np.unpackbits(packed.reshape(len(rows), size), axis=1, bitorder="little")[:, :width]
    varying = bits[:, bits.min(axis=0) != bits.max(axis=0)]
    return len({column.tobytes() for column in np.packbits(varying, axis=0).T})


def _live_bits_of(rows_of, width: int, depth: int) -> int:
    """:func:`rom_live_bits` of the ROM whose rows ``rows_of()`` builds, -1 past the size limit. Any ROM
    may stay in logic, where Yosys would put it in block RAM too: the planner tries both (an 8-bit
    layer's 255 thresholds per channel in logic, 17,400 LUTs in Yosys: 24,857 estimated with every
    bit counted, 17,544 with the live ones)."""
    return rom_live_bits(rows_of(), width) if width * depth <= _LIVE_BITS_LIMIT else -1


class _Spec:
    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MVAUSpec(_Spec):
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
    ``rq_*`` fields describe the requantization's multiply (0 without one). ``weight_rom_live``, ``threshold_rom_live``,
    ``rq_multiplier_live`` and ``rq_offset_live``: the :func:`rom_live_bits` of the weight, threshold
    and requantization ROMs (-1: not known, all bits count). ``rq_sum_live``: the bits of the
    requantization's sum that reach the output (-1: all). ``live_compares``: over the PE lanes, the
    threshold compares that are not constant (a level every channel of a lane reaches, or none does,
    folds away), equal ones merged as Yosys merges them in logic; ``block_compares``: the same
    unmerged, as they stay with the thresholds in block RAM; ``compare_full_adders``: the full adders
    summing a lane's compares, which take merged ones apart too (-1: not known, every compare counts).
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
    weight_rom_live: int = -1
    threshold_rom_live: int = -1
    weight_rom_varying: int = -1
    threshold_rom_varying: int = -1
    rq_multiplier_live: int = -1
    rq_offset_live: int = -1
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

    @property
    def nf(self) -> int:
        return self.mh // self.pe

    @property
    def sf(self) -> int:
        return self.mw // self.simd

    @property
    def output_stage(self) -> str:
        return "requant" if self.rq_multiplier_bits else "thresholds" if self.thresholds else "accumulator"

    @classmethod
    def of_unit(cls, unit) -> "MVAUSpec":
        """The spec of a constructed :class:`~streamc.rtl.mvau.MatrixVectorUnit` (not elaborated)."""
        in_dt, w_dt = unit.in_dtype, unit.weight_dtype
        weights, pe, simd = unit.weights, unit.out_elems, unit.in_elems
        lanes, nf = pe * simd, weights.shape[0] // pe
        xnor = in_dt.bipolar and w_dt.bipolar
        if xnor or in_dt.bipolar or w_dt.bipolar:
            # XNOR: a bit; a masked weight: the weight; a complemented input: the input.
            mul_a = mul_b = 0
            product_bits = 1 if xnor else w_dt.bitwidth if in_dt.bipolar else in_dt.bitwidth
        else:
            # Amaranth widens the unsigned operand of a mixed-sign product by one bit.
            mul_a = in_dt.bitwidth + (1 if w_dt.signed and not in_dt.signed else 0)
            mul_b = w_dt.bitwidth + (1 if in_dt.signed and not w_dt.signed else 0)
            product_bits = in_dt.bitwidth + w_dt.bitwidth + (1 if in_dt.signed != w_dt.signed else 0)
        thresholds = 0 if unit.thresholds is None else unit.thresholds.shape[1]
        rq = {}
        if unit.requant is not None:
            acc, mult = unit.acc_shape, unit.multiplier_shape
            mixed = acc.signed != mult.signed
            rq = dict(rq_acc_bits=acc.width + (1 if mixed and not acc.signed else 0),
                      rq_multiplier_bits=mult.width + (1 if mixed and not mult.signed else 0),
                      rq_product_bits=unit.product_shape.width, rq_offset_bits=unit.offset_shape.width,
                      rq_sum_bits=unit.sum_shape.width,
                      # Rounding without a tie fix-up reads no sum bit below the shift.
                      rq_sum_live=(unit.sum_shape.width if unit.requant.rounding in ("HALF_EVEN", "HALF_ODD")
                                   else max(unit.sum_shape.width - unit.requant.shift, 1)),
                      rq_multiplier_live=_live_bits_of(lambda: unit.multiplier_rom_rows, pe * mult.width, nf),
                      rq_offset_live=_live_bits_of(lambda: unit.offset_rom_rows, pe * unit.offset_shape.width, nf))
        live = dict(weight_rom_live=_live_bits_of(lambda: unit.weight_rom_rows, lanes * w_dt.bitwidth,
                                                  nf * weights.shape[1] // simd))
        if thresholds:
            live["threshold_rom_live"] = _live_bits_of(lambda: unit.threshold_rom_rows,
                                                       pe * thresholds * unit.acc_shape.width, nf)
            width = unit.acc_shape.width
            fields = (unit.thresholds & ((1 << width) - 1)).reshape(nf, -1)
            live["threshold_rom_varying"] = varying_bits(fields, width)
            full_lo, full_hi = unit.output_sum_range
            live["live_compares"], _, _ = _threshold_structure(
                unit.thresholds, pe, full_lo, full_hi + 1, width, shared=False)
            live["block_compares"], _, live["compare_full_adders"] = _threshold_structure(
                unit.thresholds, pe, full_lo, full_hi + 1, width, shared=False, merge_equal=False)
        start = unit.start_rom_shape()
        if start is not None:
            live.update(start_rom_bits=start.width,
                        start_rom_live=_live_bits_of(lambda: unit.start_rom_rows, pe * start.width, nf))
        sf = weights.shape[1] // simd
        # Lanes of equal weights matter where the ROM is logic, which past the size limit it is not.
        live.update(_lanes_of(weights.reshape(nf, pe, sf, simd),
                              distinct=lanes * nf * sf * w_dt.bitwidth <= _LIVE_BITS_LIMIT))
        live["weight_rom_varying"] = varying_bits(w_dt.to_hw(weights).reshape(nf, pe, sf, simd),
                                                  w_dt.bitwidth, word_axes=(0, 2))
        return cls(mh=weights.shape[0], mw=weights.shape[1], pe=pe, simd=simd,
                   in_bits=in_dt.bitwidth, weight_bits=w_dt.bitwidth, out_bits=unit.out_width,
                   acc_bits=unit.acc_shape.width, product_bits=product_bits, mul_a=mul_a, mul_b=mul_b,
                   xnor=xnor, thresholds=thresholds,
                   signed_multiply=bool(mul_a and in_dt.signed and w_dt.signed),
                   starts_from_offsets=unit.starts_from_offsets, ram_style=unit.ram_style,
                   ram_style_thresholds=unit.ram_style_thresholds, res_type=unit.res_type, **rq, **live)


@dataclass(frozen=True)
class LUTSpec(_Spec):
    """An elementwise :class:`~streamc.rtl.lut.LookupTable`: one ROM of ``folds * 2**in_bits`` words
    per lane (``folds`` the beats of a pixel with a table per channel, else 1)."""

    in_bits: int
    out_bits: int
    elems: int
    # Of all lanes' tables where their contents are known (-1: not known, counted as full ROMs):
    # the distinct 16-word pieces of an output bit, and the selects joining them (table_pieces).
    rom_leaves: int = -1
    rom_selects: int = -1
    ram_style: str = "auto"
    folds: int = 1


def table_pieces(words: list[int], width: int) -> tuple[int, int]:
    """LUT4 leaves and 2:1 selects of a ROM of ``words`` kept in logic, from its contents: each output
    bit is a decision tree on the address, its high bits selecting between 16-word pieces of the low
    four. A constant piece costs nothing, equal pieces of one bit are one LUT, and a select is needed
    only where its two halves differ (a reduced decision diagram); a monotone requantization table
    takes a few pieces per bit where random contents take every one."""
    bits = (np.asarray(words, dtype=np.int64)[None, :] >> np.arange(width)[:, None]) & 1
    leaves = selects = 0
    for column in bits:
        pieces = column.reshape(-1, min(16, len(column)))
        leaves += len({piece.tobytes() for piece in pieces if piece.min() != piece.max()})
        level = [piece.tobytes() for piece in pieces]
        while len(level) > 1:
            # A table per channel of a count of channels that is no power of two leaves an odd
            # piece out, to be joined a level up.
            halves = list(zip(level[::2], level[1::2]))
            selects += len({a + b for a, b in halves if a != b})
            level = [a + b for a, b in halves] + level[len(halves) * 2:]
    return leaves, selects


@dataclass(frozen=True)
class WindowSpec(_Spec):
    """A :class:`~streamc.rtl.window.SlidingWindow`: a ring of ``ring_words`` words of ``simd * bits``."""

    height: int
    width: int
    channels: int
    kernel_h: int
    kernel_w: int
    out_h: int
    out_w: int
    bits: int
    simd: int
    buffer_rows: int
    pad_top: int = 0
    pad_left: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1

    @property
    def ring_words(self) -> int:
        return self.buffer_rows * self.width * self.channels // self.simd

    @classmethod
    def of_unit(cls, unit) -> "WindowSpec":
        (h, w, c), (kh, kw), (oh, ow, _) = unit.in_shape, unit.kernel, unit.out_shape
        (sh, sw), (dh, dw), (top, left) = unit.stride, unit.dilation, unit.padding_before
        return cls(height=h, width=w, channels=c, kernel_h=kh, kernel_w=kw, out_h=oh, out_w=ow, bits=unit.in_width,
                   simd=unit.in_elems, buffer_rows=unit.buffer_rows, pad_top=top, pad_left=left, stride_h=sh,
                   stride_w=sw, dilation_h=dh, dilation_w=dw)

    @classmethod
    def of_stage(cls, stage) -> "WindowSpec":
        """The spec of a :class:`~streamc.hw.WindowStage` at its current lanes."""
        from .rtl.window import SlidingWindow

        return cls.of_unit(SlidingWindow(in_shape=stage.in_shape, kernel=stage.kernel, stride=stage.strides,
                                         padding=stage.padding, dilation=stage.dilations, dtype=stage.dtype,
                                         pad_value=stage.pad_value, simd=stage.elems, name=stage.name))


@dataclass(frozen=True)
class PoolSpec(_Spec):
    """A max :class:`~streamc.rtl.window.WindowReduce`: one running value per channel in registers,
    ``value_bits`` wide (the input's code for one- and two-bit types, else a signed value just wide
    enough for the type's range)."""

    channels: int
    window: int
    vectors: int
    bits: int
    simd: int
    value_bits: int


@dataclass(frozen=True)
class FIFOSpec(_Spec):
    """A :class:`~streamc.rtl.stream.StreamFIFO` of ``depth`` beats of ``width`` bits."""

    width: int
    depth: int


@dataclass(frozen=True)
class ConverterSpec(_Spec):
    """A :class:`~streamc.rtl.stream.WidthConverter` of ``bits``-bit elements."""

    bits: int
    in_elems: int
    out_elems: int

    @property
    def structure(self) -> str:
        """How the converter is built (:attr:`streamc.rtl.stream.WidthConverter.structure`)."""
        from .rtl.stream import conversion_structure

        return conversion_structure(self.in_elems, self.out_elems)


@dataclass(frozen=True)
class VVAUSpec(_Spec):
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
        mul_a, mul_b, product_bits, xnor = _lane_multiply(in_dt, w_dt)
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
                   weight_rom_live=_live_bits_of(lambda: rows, simd * w_dt.bitwidth, len(rows)),
                   weight_rom_varying=varying_bits(
                       w_dt.to_hw(weights).reshape(channels // simd, simd, taps), w_dt.bitwidth,
                       word_axes=(0, 2)),
                   ram_style=unit.ram_style, res_type=unit.res_type)


@dataclass(frozen=True)
class ThresholdSpec(_Spec):
    """A :class:`~streamc.rtl.threshold.ThresholdUnit`: ``elems * thresholds`` comparators of
    ``compare_bits``, against constants (``shared``) or a ROM of one row per channel group
    (``rom_live``: its :func:`rom_live_bits`); ``signed``: the compares are signed.

    Where the thresholds are known (trained ones repeat at the clip, and Yosys merges equal
    compares and folds those no input can fail or pass): ``live_compares`` the distinct compares
    left, ``live_compare_bits`` their width less the constant low zero bits of each threshold
    (the input bits below them do not decide the compare), and ``count_full_adders`` those of the
    compressor trees that sum each element's live compares (:func:`_full_adders`)."""

    channels: int
    elems: int
    thresholds: int
    in_bits: int
    compare_bits: int
    out_bits: int
    shared: bool
    rom_live: int = -1
    signed: bool = False
    live_compares: int = -1
    live_compare_bits: int = -1
    count_full_adders: int = -1

    @classmethod
    def of_unit(cls, unit) -> "ThresholdSpec":
        rows, elems = unit.rom_rows, unit.in_elems
        channels, thresholds = unit.thresholds.shape
        shared = len(set(rows)) == 1
        live, live_bits, full_adders = _threshold_structure(
            unit.thresholds, elems, unit.in_dtype.min, unit.in_dtype.max + 1, unit.compare_shape.width, shared)
        return cls(channels=channels, elems=elems, thresholds=thresholds,
                   in_bits=unit.in_width, compare_bits=unit.compare_shape.width, out_bits=unit.out_width,
                   shared=shared, signed=unit.compare_shape.signed,
                   rom_live=_live_bits_of(lambda: rows, elems * thresholds * unit.compare_shape.width,
                                          len(rows)),
                   live_compares=live, live_compare_bits=live_bits, count_full_adders=full_adders)


def _twos(n: int) -> int:
    """How many times 2 divides ``n``: the constant low bits of a register holding multiples of ``n``."""
    return (n & -n).bit_length() - 1


def _low_zero_bits(value: int, width: int) -> int:
    """Trailing zero bits of ``value`` as a ``width``-bit field (``width`` for zero)."""
    value &= (1 << width) - 1
    return width if value == 0 else _twos(value)


def _threshold_structure(thresholds: np.ndarray, elems: int, lo: int, hi: int, width: int,
                         shared: bool, merge_equal: bool = True) -> tuple[int, int, int]:
    """:class:`ThresholdSpec`'s ``live_compares``, ``live_compare_bits`` and ``count_full_adders``
    of ``(channels, L)`` thresholds clamped to ``[lo, hi]``, ``elems`` per beat: element ``j``
    compares with column ``l`` of channels ``j, j + elems, ...`` (constants when ``shared``).
    Yosys merges the compares of equal columns (``merge_equal``) unless they are read from block
    RAM, whose words it cannot see."""
    levels = thresholds.shape[1]
    live = live_bits = full_adders = 0
    for j in range(elems):
        columns = [tuple(int(t) for t in thresholds[j::elems, l]) for l in range(levels)]
        if merge_equal:
            columns = list(dict.fromkeys(columns))
        # A column every input reaches (t <= lo) or none does (t >= hi) folds to a constant.
        distinct = [column for column in columns
                    if not (all(t <= lo for t in column) or all(t >= hi for t in column))]
        live += len(distinct)
        live_bits += sum(width - _low_zero_bits(column[0], width) if shared else width for column in distinct)
        full_adders += _full_adders(len(distinct))
    return live, live_bits, full_adders


def _full_adders(count: int) -> int:
    """Full adders of the compressor tree Yosys' ``alumacc``/``maccmap`` build for a sum of
    ``count`` single bits: each takes three bits of a column and leaves two, until the
    ``count.bit_length()`` bits of the sum are left."""
    return max(count - count.bit_length(), 0)


@dataclass(frozen=True)
class AddSpec(_Spec):
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
            const_bits, const_signed = _bits_of_range(min(weight, 0), max(weight, 0))
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
class ConcatSpec(_Spec):
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
class ForkSpec(_Spec):
    """A :class:`~streamc.rtl.branch.StreamFork` to ``outputs`` streams: a flag per output, payload wired."""

    outputs: int
    width: int

    @classmethod
    def of_unit(cls, unit) -> "ForkSpec":
        return cls(outputs=unit.outputs, width=unit.in_elems * unit.in_width)


@dataclass(frozen=True)
class ChainSpec(_Spec):
    """Kernels one hardware stage is built of, each feeding the next directly (a residual add and its
    thresholds, a vector unit and its thresholds): their resources are the sum of theirs."""

    kernels: tuple


def with_placement(spec: "Spec", **styles: str) -> "Spec":
    """``spec`` with its ROMs placed as ``styles`` say (``ram_style="block"``), on each kernel that has them."""
    if isinstance(spec, ChainSpec):
        return ChainSpec(kernels=tuple(with_placement(part, **styles) for part in spec.kernels))
    own = {f.name for f in fields(spec)}
    return replace(spec, **{name: style for name, style in styles.items() if name in own})


Spec = (MVAUSpec | LUTSpec | WindowSpec | PoolSpec | FIFOSpec | ConverterSpec | VVAUSpec | ThresholdSpec | AddSpec
        | ConcatSpec | ForkSpec | ChainSpec)
_SPEC_OF_KERNEL = {"mvau": MVAUSpec, "lut": LUTSpec, "window": WindowSpec, "pool": PoolSpec, "fifo": FIFOSpec,
                   "convert": ConverterSpec, "vvau": VVAUSpec, "threshold": ThresholdSpec, "add": AddSpec,
                   "concat": ConcatSpec, "fork": ForkSpec}


def _lanes_of(blocks: np.ndarray, distinct: bool) -> dict[str, int]:
    """``live_lanes`` and, with ``distinct``, ``distinct_lanes`` of :class:`MVAUSpec` from the weights as
    the ROM holds them, ``blocks[nf, j, sf, k]``. Each lane's weights over the ROM's words are compared
    by a random projection (equal columns project equally; different ones almost surely not): one
    product over the matrix and a sort per SIMD position, cheap enough for every folding the planner
    tries."""
    nf, pe, sf, simd = blocks.shape
    columns = blocks.transpose(3, 1, 0, 2).reshape(simd, pe, nf * sf)
    live = columns.any(axis=2)
    if not distinct:
        return {"live_lanes": int(live.sum())}
    keys = np.where(live, columns @ np.random.default_rng(0).random(nf * sf), np.nan)
    ordered = np.sort(keys, axis=1)
    first = np.ones(ordered.shape, bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    return {"live_lanes": int(live.sum()), "distinct_lanes": int((first & ~np.isnan(ordered)).sum())}


def _lane_multiply(in_dt: DataType, w_dt: DataType) -> tuple[int, int, int, bool]:
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


def spec_of_unit(unit) -> Spec:
    """The spec of any constructed (not elaborated) kernel streamc generates, read off its parameters."""
    from .rtl.branch import ChannelConcat, ElementwiseAdd, StreamFork
    from .rtl.lut import LookupTable
    from .rtl.mvau import MatrixVectorUnit
    from .rtl.stream import StreamFIFO, WidthConverter
    from .rtl.threshold import ThresholdUnit
    from .rtl.vvau import VectorVectorUnit
    from .rtl.window import SlidingWindow, WindowReduce

    if isinstance(unit, LookupTable):
        pieces = [table_pieces(words, unit.out_width) for words in unit.rom_words]
        return LUTSpec(in_bits=unit.in_width, out_bits=unit.out_width, elems=unit.in_elems,
                       rom_leaves=sum(p[0] for p in pieces), rom_selects=sum(p[1] for p in pieces),
                       ram_style=unit.ram_style, folds=unit.folds)
    if isinstance(unit, WindowReduce):
        return PoolSpec(channels=unit.channels, window=unit.window, vectors=unit.vectors, bits=unit.in_width,
                        simd=unit.in_elems, value_bits=unit.value_shape.width)
    if isinstance(unit, StreamFIFO):
        return FIFOSpec(width=unit.width, depth=unit.depth)
    if isinstance(unit, WidthConverter):
        return ConverterSpec(bits=unit.elem_width, in_elems=unit.in_elems, out_elems=unit.out_elems)
    of_unit = {MatrixVectorUnit: MVAUSpec, SlidingWindow: WindowSpec, VectorVectorUnit: VVAUSpec,
               ThresholdUnit: ThresholdSpec, ElementwiseAdd: AddSpec, ChannelConcat: ConcatSpec, StreamFork: ForkSpec}
    for unit_class, spec_class in of_unit.items():
        if isinstance(unit, unit_class):
            return spec_class.of_unit(unit)
    raise TypeError(f"no resource model for {type(unit).__name__}")


def spec_from_dict(kernel: str, values: dict) -> Spec:
    """Rebuild a spec stored by :meth:`to_dict` (the calibration data)."""
    cls = _SPEC_OF_KERNEL[kernel]
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


# --- Memories -------------------------------------------------------------------------------------

#: memory_libmap's block RAMs: primitive, cost, address bits, port widths (a ROM may use every width).
_BLOCK_RAMS = {
    "ice40": [dict(primitive="SB_RAM40_4K", cost=64, abits=11, widths=(2, 4, 8, 16), byte=0)],
    "ecp5": [dict(primitive="DP16KD", cost=128, abits=14, widths=(1, 2, 4, 9, 18), byte=9),
             dict(primitive="PDPW16KD", cost=128, abits=14, widths=(1, 2, 4, 9, 18, 36), byte=9)],
}
_LUTRAM = {"ecp5": dict(primitive="TRELLIS_DPR16X4", cost=4, depth=16, width=4)}   # RAMs only (prune_rom)
_ROM_LOGIC_COST, _RAM_LOGIC_COST = 1 / 16, 1.0


@dataclass(frozen=True)
class MemoryMapping:
    """Where Yosys puts one memory: ``kind`` is ``"bram"``, ``"lutram"`` or ``"logic"``; in block or
    LUT RAM, the ``primitive`` and the ``banks`` of words one after another in the address space."""

    kind: str
    blocks: int = 0
    primitive: str = ""
    banks: int = 1


def memory_mapping(*, width: int, depth: int, rom: bool, family: str, style: str = "auto") -> MemoryMapping:
    """Where ``memory_libmap`` puts a memory of ``depth`` words of ``width`` bits, as it decides.

    A ROM has a synchronous read port only; a RAM adds one write port of the full width (the
    only kinds streamc generates). The cheapest hard mapping wins if it is cheaper than soft
    logic (see the module documentation). A ``style`` of ``"distributed"`` (a ``rom_style =
    "logic"`` attribute) keeps the memory in logic; ``"block"`` takes the cheapest block RAM
    mapping whatever logic would cost (:mod:`streamc.rtl.placement`). A one-word ROM is a
    constant, whatever its style.
    """
    if depth <= 0 or width <= 0 or style == "distributed" or (rom and depth == 1):
        return MemoryMapping("logic")
    logic_cost = int(width * depth * (_ROM_LOGIC_COST if rom else _RAM_LOGIC_COST))
    best = (float("inf") if style == "block" else logic_cost, MemoryMapping("logic"))
    # Candidates in memory_libmap's order (LUT RAM library first): on equal cost the first stays.
    lutram = _LUTRAM.get(family)
    if lutram and not rom and style == "auto":
        mult_a = -(-depth // lutram["depth"])
        blocks = mult_a * -(-width // lutram["width"])
        cost = lutram["cost"] * blocks + 0.5 * (mult_a - 1) * width
        if cost < best[0]:
            best = (cost, MemoryMapping("lutram", blocks, lutram["primitive"], mult_a))
    for block in _BLOCK_RAMS[family]:
        for log2, unit in enumerate(block["widths"]):
            words = 1 << (block["abits"] - log2)
            mult_a = (depth - 1) // words + 1
            padded = width if rom else -(-width // min(block["byte"] or unit, unit)) * min(block["byte"] or unit, unit)
            blocks = -(-mult_a * padded // unit)
            cost = block["cost"] * blocks + 0.5 * (mult_a - 1) * width
            if cost < best[0]:
                best = (cost, MemoryMapping("bram", blocks, block["primitive"], mult_a))
    return best[1]


def _bram_read_mux(mapping: MemoryMapping, width: int) -> int:
    """LUT4s of the read multiplexer joining a block-RAM memory's address banks (0 when not in block
    RAM): a 2-to-1 select per bank past the first, per bit, on both families. On the ECP5 no PFUMX
    or L6MUX joins them (those join a ROM's LUTs, see ``rom_muxes``): the calibration designs of 4,
    6 and 8 banks came out 10-13 % above a model of one LUT4 per pair of banks, and 9 banks and
    more showed about a LUT4 per bank (per bit: 7 LUT4s at 9 banks, 17 at 16, about 21 at 18 and 24)."""
    return width * (mapping.banks - 1) if mapping.kind == "bram" else 0


# --- Multipliers ----------------------------------------------------------------------------------

_DSP_RULES = {"ice40": dict(max_width=16, min_width=2, min_result=11),
              "ecp5": dict(max_width=18, min_width=2, min_result=0)}


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


# --- Estimates ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResourceEstimate:
    """Resources of one kernel or a whole design.

    ``lut`` counts 4-input LUTs as :func:`streamc.synth.synthesize` does (an ECP5 carry cell as
    two); ``lutram`` counts ECP5 ``TRELLIS_DPR16X4`` cells (16 x 4 bits each), which the LUT
    count leaves out, as Yosys' statistics do.
    """

    lut: int = 0
    ff: int = 0
    bram: int = 0
    dsp: int = 0
    spram: int = 0
    lutram: int = 0

    def __add__(self, other: "ResourceEstimate") -> "ResourceEstimate":
        return ResourceEstimate(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: "ResourceEstimate") -> "ResourceEstimate":
        return ResourceEstimate(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class _Memories:
    """The memories of one kernel, mapped: what they cost besides the kernel's datapath."""

    bram: int = 0
    lutram: int = 0
    logic_rom_luts: int = 0         # LUT4s holding the words of ROMs kept in logic (16 words each)
    logic_rom_muxes: int = 0        # 2:1 muxes joining them (free in ECP5's PFUMX/L6MUX up to 64 words)
    logic_rom_regs: int = 0         # the read registers of ROMs kept in logic
    ff_ram_bits: int = 0            # RAM bits in flip-flops (iCE40: no LUT RAM)
    ff_ram_mux: float = 0.0         # their read multiplexers
    sync_regs: int = 0              # read registers of RAMs in LUT RAM or flip-flops

    def add(self, *, width: int, depth: int, rom: bool, family: str, style: str = "auto") -> MemoryMapping:
        mapping = memory_mapping(width=width, depth=depth, rom=rom, family=family, style=style)
        if mapping.kind == "bram":
            self.bram += mapping.blocks
        elif mapping.kind == "lutram":
            self.lutram += mapping.blocks
            self.sync_regs += width
        elif rom:
            leaves = max(1, -(-depth // 16))
            self.logic_rom_luts += width * leaves
            self.logic_rom_muxes += width * (leaves - 1)
            self.logic_rom_regs += width
        else:
            self.ff_ram_bits += width * depth
            self.ff_ram_mux += width * max(depth - 1, 0) / 3
            self.sync_regs += width
        return mapping


def _and_luts(inputs: int, family: str) -> int:
    """LUT4s of an AND of ``inputs`` signals: a tree of LUT4s, or on ECP5 up to 7 inputs one
    LUT5 to LUT7 (2 to 8 LUT4s joined by PFUMX and L6MUX cells), which ABC takes for depth."""
    if family == "ecp5" and 4 < inputs <= 7:
        return 2 ** (inputs - 4)
    return max(1, -(-(inputs - 1) // 3))


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


def _range_bits(n: int) -> int:
    """Width of an Amaranth ``Signal(range(n))``."""
    return max(0, (n - 1).bit_length())


def _signed_range_bits(lo: int, hi: int) -> int:
    """Width of an Amaranth ``Signal(range(lo, hi))``."""
    return _bits_of_range(lo, hi - 1)[0] if hi - 1 >= lo else 0


def _window_features(spec: WindowSpec) -> tuple[dict[str, float], dict[str, float]]:
    """LUT and FF features of a :class:`~streamc.rtl.window.SlidingWindow`, from the widths of its
    registers as the generator declares them: the loop counters (an incrementer and a compare with
    a constant each), the row, column and pixel positions (an adder each), the ring addresses (an
    adder, a compare and a subtraction each, and two adders forming the read address), and the
    compares that decide padding and whether the pixels a patch needs have arrived."""
    h, w, cf = spec.height, spec.width, spec.channels // spec.simd
    kh, kw, sh = spec.kernel_h, spec.kernel_w, spec.stride_h
    top, left = spec.pad_top, spec.pad_left
    extent_h = spec.dilation_h * (kh - 1) + 1
    extent_w = spec.dilation_w * (kw - 1) + 1
    ring = _range_bits(spec.ring_words)
    counters = (_range_bits(cf) * 2 + _range_bits(w) + _range_bits(kw) + _range_bits(kh) + _range_bits(spec.out_w)
                + _range_bits(spec.out_h) + ring)
    # The patch corner (r0, c0, r0_pixels, c0_beat) is constant along an axis with one output;
    # the beat's position (r, c, col_beat, row_addr) moves with the corner (and Yosys merges the
    # two) along an axis the kernel does not span.
    one_row, one_col = spec.out_h == 1, spec.out_w == 1
    r0 = 0 if one_row else _signed_range_bits(-top - 1, h + 1)
    r = 0 if kh == 1 else _signed_range_bits(-top - 1, h + extent_h)
    c0 = 0 if one_col else _signed_range_bits(-left - 1, w + 1)
    c = 0 if kw == 1 else _signed_range_bits(-left - 1, w + extent_w)
    # r0_pixels counts in whole rows: Yosys finds its low bits constant. It does not for the
    # beat positions (col_beat, c0_beat) and the ring addresses that follow the patch (top_addr,
    # and row_addr when the kernel spans rows), which are also added to or compared with others.
    pixels = 0 if one_row else max(0, _signed_range_bits(-top * w, (h + 1) * w + 1) - _twos(w))
    # The beat positions move in whole pixels: their low _twos(cf) bits stay zero.
    beats = ((0 if kw == 1 else _signed_range_bits(-left * cf, (w + extent_w) * cf) - _twos(cf))
             + (0 if one_col else _signed_range_bits(-left * cf, (w + 1) * cf) - _twos(cf)))
    credit = _range_bits(spec.buffer_rows + h + sh + 1)
    written = _signed_range_bits(-h * w, (h + spec.buffer_rows) * w + 1)
    # top_addr steps with the patch rows (with one row of patches, only from image to image, as
    # base_addr does); row_addr too when the kernel spans rows. base_addr only ever moves by whole
    # images of ring rows, and only its high bits stay.
    ring_steps = ((0 if one_row else ring) + (ring if kh > 1 else 0)
                  + max(0, ring - _twos(w * cf) - 1))
    positions = r0 + r + c0 + c + pixels + beats + credit + written
    # Each register above, the ring addresses (row_addr merged with top_addr when the kernel spans
    # one row), the output valid and the padding flag.
    registers = counters + positions + ring_steps + 2
    # Stepping modulo a ring of 2**n words is an n-bit adder; any other ring needs a compare and
    # a subtraction as well.
    ring_wraps = ring_steps if spec.ring_words & (spec.ring_words - 1) else 0
    # With padding the patch corner starts outside the image: its coordinates go below zero, and
    # what they are compared and summed with is signed arithmetic on both sides (fitted).
    padded_positions = r0 + c0 + pixels if top or left else 0
    lut = {"control": 1.0, "counters": counters, "positions": positions, "ring_steps": ring_steps,
           "ring_wraps": ring_wraps, "padded_positions": padded_positions,
           "read_address": 2 * ring, "compares": written + _signed_range_bits(-top - 1, h + extent_h)
           + _signed_range_bits(-left - 1, w + extent_w), "payload": 0.0,
           "logic_memory": 0.0, "lutram_read_mux": 0.0, "bram_read_mux": 0.0, "write_delay": 0.0}
    return lut, {"registers": registers, "memory_registers": 0.0, "payload": 0.0, "write_delay": 0.0}


def _known(count: int, otherwise: int) -> int:
    return otherwise if count < 0 else count


def _mvau_parts(spec: MVAUSpec, family: str, dsp: bool) -> tuple[_Memories, int, dict[str, float], dict[str, float]]:
    lanes = spec.pe * spec.simd
    memories = _Memories()
    # Yosys maps a ROM without its constant bit columns (where the contents are known).
    weight_width = _known(spec.weight_rom_varying, lanes * spec.weight_bits)
    threshold_width = _known(spec.threshold_rom_varying, spec.pe * spec.thresholds * spec.acc_bits)
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
    if spec.rq_multiplier_bits:
        roms += [(spec.pe * spec.rq_multiplier_bits, spec.nf, spec.rq_multiplier_live, "auto"),
                 (spec.pe * spec.rq_offset_bits, spec.nf, spec.rq_offset_live, "auto")]
    logic_roms = [(depth, _logic_rom(width, depth, live, family, style)) for width, depth, live, style in roms]
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
    bram_read_mux = sum(_bram_read_mux(mapping, width) for (width, *_), mapping in zip(memories_read, mappings))
    # mul2dsp sees the product after wreduce: a mixed-sign multiply's widened operand adds no bit.
    lane_dsps = dsp_count(spec.mul_a, spec.mul_b, _product_operand_bits(spec), family,
                          dsp=dsp and spec.res_type == "auto")
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
    lut_mult = (lanes * _shift_add_bits(spec.in_bits, spec.weight_bits)
                if spec.mul_a and spec.res_type == "lut" and not direct else 0)
    # Yosys' soft signed multipliers grow faster than their partial products (4 x 4: about 55 LUTs, 3 x 2: 8).
    soft_mult_wide = soft_mult * spec.mul_a * spec.mul_b / 16
    masked = _binary_operand_bits(spec)
    # The lanes that only ever multiply by 0 drop out of their PE's tree (counted as spread evenly).
    live_per_pe = max(1, round(_known(spec.live_lanes, lanes) / spec.pe))
    # A binary input against a weight that never changes (a ROM of one word) is that weight or 0:
    # each of the weight's set bits a copy of the input bit, so the tree is priced as one of single
    # bits, with a coefficient of its own.
    fixed_binary = binary_input and not masked
    tree = spec.pe * (_adder_tree_bits(live_per_pe, 1 if fixed_binary else spec.product_bits) + spec.acc_bits)
    # Wider products are summed on a tree of carry-chain adders (rtl.mvau._adder_tree keeps each
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
           "multiply_direct": lanes * _product_operand_bits(spec) if direct else 0,
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
           "thresholds": _known(compares, spec.pe * spec.thresholds) * spec.acc_bits,
           # Yosys sums each PE's compares reached in one $macc: a compressor of full adders.
           "count_full_adders": _known(spec.compare_full_adders, spec.pe * _full_adders(spec.thresholds)),
           "requant": spec.pe * _known(spec.rq_sum_live, spec.rq_sum_bits) + rq_soft,
           # Below the shift a rounded-down sum still carries: the chain is there, fewer LUTs beside it.
           "requant_carry": spec.pe * (spec.rq_sum_bits - _known(spec.rq_sum_live, spec.rq_sum_bits)),
           "logic_memory": rom_luts + memories.ff_ram_mux, "requant_rom": rq_rom_luts,
           "rom_muxes": rom_muxes,
           # The neuron fold, the synapse fold and the weight address count apart.
           "counters": _range_bits(spec.nf) + _range_bits(spec.sf) + _range_bits(spec.nf * spec.sf),
           "bram_read": bram_read, "bram_read_masked": bram_read_masked, "bram_ram_read": bram_ram_read,
           "bram_read_mux": bram_read_mux}
    ff = {"registers": _mvau_registers(spec, lane_dsps, rq_dsps, weights_in_logic=mappings[0].kind == "logic"),
          "bram_ram_read": bram_ram_read,
          "bram_ram_wide": bram_ram_wide,
          "dsp_products": lanes * spec.product_bits if lane_dsps else 0,
          "rq_dsp_products": spec.pe * spec.rq_product_bits if rq_dsps else 0,
          "memory_registers": rom_regs + memories.sync_regs + memories.ff_ram_bits}
    return memories, dsps, lut, ff


def _shift_add_bits(a_bits: int, b_bits: int) -> int:
    """Output bits of the adders of :func:`streamc.rtl.placement.multiply` in LUTs: the partial
    products of the wider operand, one per bit of the narrower, added one after the other."""
    wide, narrow = max(a_bits, b_bits), min(a_bits, b_bits)
    total, bits = wide, 0
    for i in range(1, narrow):
        total = max(total, wide + i) + 1
        bits += total
    return bits


def _product_operand_bits(spec: "MVAUSpec | VVAUSpec") -> int:
    """Width of a lane's registered product once Yosys has trimmed it to the range it can take: the
    widened operand of a mixed-sign multiply adds no bit to the product."""
    return min(spec.product_bits, spec.in_bits + spec.weight_bits) if spec.mul_a else spec.product_bits


def _adder_tree_bits(count: int, width: int) -> int:
    """Output bits of all adders of :func:`streamc.rtl.mvau._adder_tree` over ``count`` values of
    ``width`` bits: pairs are summed level by level, each sum one bit wider than its wider operand."""
    level, bits = [width] * count, 0
    while len(level) > 1:
        pairs = [max(level[n], level[n + 1]) + 1 for n in range(0, len(level) - 1, 2)]
        bits += sum(pairs)
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return bits


def _logic_rom(width: int, depth: int, live: int, family: str, style: str = "auto") -> tuple[int, int, int]:
    """LUT4s holding the words, 2:1 multiplexers joining them and read registers of a ROM that
    ``memory_mapping`` keeps in logic (zeros for one in block RAM): per live bit column
    (:func:`rom_live_bits`; all ``width`` when ``live`` is -1)."""
    if memory_mapping(width=width, depth=depth, rom=True, family=family, style=style).kind != "logic":
        return 0, 0, 0
    columns = width if live < 0 else live
    leaves = max(1, -(-depth // 16))
    return columns * leaves, columns * (leaves - 1), columns


def _binary_operand_bits(spec: MVAUSpec) -> int:
    """Product bits of the lanes that mask a weight or complement an input by a weight (0 for other
    lanes), each a LUT4 where the adder does not take it in: only where the weight varies over the
    ROM's words. A weight that stays the same makes the product a constant, the input bit or the
    input itself, which PEs share (:func:`_mvau_registers`)."""
    if spec.mul_a or spec.xnor:
        return 0
    varying = _known(spec.weight_rom_varying, spec.pe * spec.simd * spec.weight_bits)
    return varying * spec.product_bits // spec.weight_bits


def _mvau_registers(spec: MVAUSpec, lane_dsps: int, rq_dsps: int, weights_in_logic: bool) -> int:
    """Register bits a :class:`~streamc.rtl.mvau.MatrixVectorUnit` declares, stage by stage, except
    memory read registers and the products a hard multiplier holds in its own registers. Where the
    weight ROM is logic, lanes with equal weights share their product registers (a binary-weight
    layer's ROM of 4 words has at most 16 weight patterns per SIMD position, whatever the PEs)."""
    nf, sf, pe, lanes = spec.nf, spec.sf, spec.pe, spec.pe * spec.simd
    counters = _range_bits(nf) + _range_bits(sf) + _range_bits(nf * sf)
    operands = 3 + _range_bits(nf) + spec.simd * spec.in_bits + (1 if nf > 1 else 0)
    product_bits = _known(spec.live_lanes, lanes) * spec.product_bits
    if not spec.mul_a and not spec.xnor:
        # A lane whose weight never changes holds an input bit (or its complement) or a constant:
        # the PEs share one register per input bit.
        product_bits = _binary_operand_bits(spec)
        if product_bits < lanes * spec.product_bits:
            product_bits += spec.simd * spec.in_bits
    if weights_in_logic and spec.distinct_lanes >= 0:
        product_bits = min(product_bits, spec.distinct_lanes * spec.product_bits)
    products = 3 + _range_bits(nf) + (0 if lane_dsps else product_bits)
    accumulators = 1 + pe * spec.acc_bits
    output = 1 + pe * spec.out_bits
    if spec.rq_multiplier_bits:
        stage4 = (2 + _range_bits(nf) + (0 if rq_dsps else pe * spec.rq_product_bits)
                  + pe * _known(spec.rq_sum_live, spec.rq_sum_bits))
    elif spec.thresholds:
        stage4 = 1 + pe * spec.thresholds
    else:
        stage4 = 0
    return counters + operands + products + accumulators + stage4 + output


def _vvau_parts(spec: VVAUSpec, family: str, dsp: bool) -> tuple[_Memories, int, dict[str, float], dict[str, float]]:
    memories = _Memories()
    weight_width = _known(spec.weight_rom_varying, spec.simd * spec.weight_bits)
    if not spec.constant_weights:
        memories.add(width=weight_width, depth=spec.taps * spec.groups, rom=True, family=family, style=spec.ram_style)
    # mul2dsp sees the product after wreduce: a mixed-sign multiply's widened operand adds no bit.
    lane_dsps = dsp_count(spec.mul_a, spec.mul_b, _product_operand_bits(spec), family,
                          dsp=dsp and spec.res_type == "auto")
    soft_mult = 0 if lane_dsps or not spec.mul_a or spec.res_type == "lut" else spec.simd * spec.mul_a * spec.mul_b
    lut_mult = (spec.simd * _shift_add_bits(spec.in_bits, spec.weight_bits) if spec.mul_a and spec.res_type == "lut"
                else 0)
    negate = spec.simd * spec.product_bits if not spec.mul_a and not spec.xnor and not spec.constant_weights else 0
    counters = _log2(spec.groups) + _log2(spec.taps) + (0 if spec.constant_weights else _log2(spec.taps * spec.groups))
    rom_luts, rom_muxes, rom_regs = ((0, 0, 0) if spec.constant_weights else
                                     _logic_rom(weight_width, spec.taps * spec.groups,
                                                spec.weight_rom_live, family, spec.ram_style))
    lut = {"control": 1.0, "multiply": soft_mult + negate + (spec.simd if spec.xnor else 0),
           "multiply_wide": soft_mult * spec.mul_a * spec.mul_b / 16, "lut_multiply": lut_mult,
           "adders": spec.simd * spec.acc_bits + counters,
           "logic_memory": rom_luts + rom_muxes}
    ff = {"control": 1.0, "pipeline": spec.simd * (spec.in_bits + spec.out_bits) + counters,
          "products": spec.simd * spec.product_bits, "partial_sums": spec.channels * spec.acc_bits,
          "memory_registers": rom_regs}
    return memories, spec.simd * lane_dsps, lut, ff


def _threshold_parts(spec: ThresholdSpec, family: str) -> tuple[_Memories, int, dict[str, float], dict[str, float]]:
    memories = _Memories()
    comparators = spec.elems * spec.thresholds
    if not spec.shared:
        memories.add(width=comparators * spec.compare_bits, depth=spec.channels // spec.elems, rom=True,
                     family=family)
    rom_luts, rom_muxes, rom_regs = ((0, 0, 0) if spec.shared else
                                     _logic_rom(comparators * spec.compare_bits, spec.channels // spec.elems,
                                                spec.rom_live, family))
    # Where the thresholds are unknown every compare is live, full width, and summed by a full tree.
    live = _known(spec.live_compares, comparators)
    live_bits = _known(spec.live_compare_bits, comparators * spec.compare_bits)
    full_adders = _known(spec.count_full_adders, spec.elems * _full_adders(spec.thresholds))
    lut = {"control": 1.0, "compare_rom": 0 if spec.shared else live * spec.compare_bits,
           "compare_constant": live_bits if spec.shared else 0,
           # A signed compare decides on the sign bits apart (a LUT beside an iCE40 carry chain).
           "signed_compares": live if spec.signed else 0,
           # Yosys sums the compares reached in one $macc per element: a compressor of full adders.
           "count_full_adders": full_adders,
           "logic_memory": rom_luts + rom_muxes}
    # Yosys merges the registers of equal compares and drops those of constant ones.
    ff = {"control": 1.0, "pipeline": spec.elems * (spec.in_bits + spec.out_bits) + live,
          "memory_registers": rom_regs}
    return memories, 0, lut, ff


def _shallow_fifo_lutram(spec: FIFOSpec, family: str) -> int:
    """LUT RAM blocks of a shallow queue's storage, 0 where it is in flip-flops: memory_libmap
    takes LUT RAM (ECP5 only) where it costs less than the bits do in flip-flops."""
    lutram = _LUTRAM.get(family)
    if not lutram:
        return 0
    blocks = -(-spec.depth // lutram["depth"]) * -(-spec.width // lutram["width"])
    return blocks if lutram["cost"] * blocks < spec.width * spec.depth * _RAM_LOGIC_COST else 0


def _fifo_features(spec: FIFOSpec, family: str) -> tuple[dict[str, float], dict[str, float]]:
    """LUT and FF features of a :class:`~streamc.rtl.stream.StreamFIFO`.

    A shallow queue (``depth < 16``, Amaranth's ``SyncFIFO``) reads its storage combinationally:
    LUT RAM (:func:`_shallow_fifo_lutram`) or flip-flops and a read multiplexer; a write and a read
    pointer and a level count it. A deep one (``SyncFIFOBuffered``) keeps ``depth - 1`` words in a
    memory read synchronously (block RAM, LUT RAM beside a multiplexer over its 16-word blocks, or
    flip-flops), and one more in an output register.
    """
    width, depth = spec.width, spec.depth
    lut = dict.fromkeys(("shallow", "shallow_pointers", "shallow_words", "shallow_read_mux", "shallow_wide_level",
                         "deep", "deep_pointers",
                         "bram_width", "lutram", "lutram_banked", "lutram_read_mux", "lutram_write_enables",
                         "ff_read_mux"), 0.0)
    ff = dict.fromkeys(("storage", "pointers", "output_register", "bram_output"), 0.0)
    if depth < 16:
        pointers = 2 * _range_bits(depth) + _range_bits(depth + 1)
        # Each word's write enable decodes the write pointer.
        # Measured, not derived: a level count of four bits (depth 8 and up) takes some twelve
        # LUTs more than one of three (17 LUTs at depths 5 to 7 on the ECP5, 29 at depth 8).
        lut.update(shallow=1.0, shallow_pointers=pointers, shallow_words=depth,
                   shallow_wide_level=1.0 if _range_bits(depth + 1) >= 4 else 0.0)
        ff.update(pointers=pointers)
        if not _shallow_fifo_lutram(spec, family):
            lut.update(shallow_read_mux=width * (depth - 1))
            ff.update(storage=width * depth)
        return lut, ff
    words = depth - 1
    pointers = 2 * _range_bits(words) + _range_bits(words + 1) + _range_bits(depth + 1)
    lut.update(deep=1.0, deep_pointers=pointers)
    ff.update(pointers=pointers, output_register=width)
    mapping = memory_mapping(width=width, depth=words, rom=False, family=family)
    if mapping.kind == "bram":
        # Block RAM output registers sit beside the FIFO's own, with a multiplexer per bit.
        lut.update(bram_width=width)
        ff.update(bram_output=width)
    elif mapping.kind == "lutram":
        # Past 16 words the LUT RAM is banked: a write enable per bank, a read multiplexer across them.
        banks = -(-words // 16)
        lut.update(lutram=1.0 if banks == 1 else 0.0, lutram_banked=1.0 if banks > 1 else 0.0,
                   lutram_read_mux=width * (banks - 1), lutram_write_enables=banks if banks > 1 else 0)
        ff.update(bram_output=0.0, storage=width)
    else:
        lut.update(ff_read_mux=width * (words - 1))
        ff.update(storage=width * words + width)
    return lut, ff


def _converter_features(spec: ConverterSpec) -> tuple[dict[str, float], dict[str, float]]:
    """LUT and FF features of a width converter, by how it is built (each kernel's features share
    their names, so the structures a converter is not built as count zero)."""
    lut = dict.fromkeys(("gather", "split", "split_select", "split_count", "ring", "ring_read", "ring_writes",
                         "ring_table"), 0.0)
    structure = spec.structure
    if structure == "gather":
        # A shift register with an enable (no logic per bit), a one-hot phase and a full flag.
        beats = spec.out_elems // spec.in_elems
        lut.update(gather=1.0)
        return lut, {"registers": spec.out_elems * spec.bits + (beats if beats > 1 else 0) + 1}
    if structure == "split":
        # The held beat shifts down a part per output beat: a load-or-shift choice per held bit
        # below the top part (which only loads); two flags and a count of the parts left past
        # the next one say when the beat is done.
        beats = spec.in_elems // spec.out_elems
        count = _range_bits(beats - 1)
        lut.update(split=1.0, split_select=(spec.in_elems - spec.out_elems) * spec.bits, split_count=count)
        return lut, {"registers": spec.in_elems * spec.bits + 2 + count}
    # A ring of lcm slots: each output bit picks one of lcm / out_elems slots (one two-way choice
    # fewer than that), each input beat's slots load on a decode of the write beat, and whether a
    # beat may leave or land is a table of the two beat counts and a flag.
    size = math.lcm(spec.in_elems, spec.out_elems)
    in_beats, out_beats = size // spec.in_elems, size // spec.out_elems
    counters = _range_bits(in_beats) + _range_bits(out_beats)
    lut.update(ring=1.0, ring_read=spec.out_elems * spec.bits * (out_beats - 1), ring_writes=in_beats,
               ring_table=2 ** (counters + 1))
    return lut, {"registers": size * spec.bits + counters + 1}


def _parts(spec: Spec, family: str, dsp: bool) -> tuple[_Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of one kernel."""
    if isinstance(spec, MVAUSpec):
        return _mvau_parts(spec, family, dsp)
    memories = _Memories()
    if isinstance(spec, LUTSpec):
        mappings = [memories.add(width=spec.out_bits, depth=spec.folds << spec.in_bits, rom=True, family=family,
                                 style=spec.ram_style) for _ in range(spec.elems)]
        luts, muxes = memories.logic_rom_luts, memories.logic_rom_muxes
        if luts and spec.rom_leaves >= 0:
            luts, muxes = spec.rom_leaves, spec.rom_selects
        # A table per channel counts the beats of a pixel to pick the channel's table; its words
        # may span several block RAMs, read through a multiplexer.
        folds = _range_bits(spec.folds) if spec.folds > 1 else 0
        read_mux = sum(_bram_read_mux(mapping, spec.out_bits) for mapping in mappings)
        return (memories, 0, {"control": 1.0, "logic_memory": luts, "rom_muxes": muxes, "folds": folds,
                              "bram_read_mux": read_mux},
                {"control": 1.0, "memory_registers": memories.logic_rom_regs, "folds": folds})
    if isinstance(spec, WindowSpec):
        beat = spec.simd * spec.bits
        ring = memories.add(width=beat, depth=spec.ring_words, rom=False, family=family)
        lut, ff = _window_features(spec)
        # LUT RAM past 16 words is banked, with a read multiplexer across the banks.
        banks = ring.banks if ring.kind == "lutram" else 1
        lut.update(payload=beat, logic_memory=memories.ff_ram_mux, lutram_read_mux=beat * (banks - 1),
                   bram_read_mux=_bram_read_mux(ring, beat))
        # Block RAM reads with an enable and no transparency: Yosys keeps the read data beside it.
        # To give that read the old word when it meets the write, Yosys delays the write a cycle
        # (its data, address and enable in flip-flops) and forwards the delayed word to a read of
        # its address (a compare and a multiplexer).
        delayed = beat + _range_bits(spec.ring_words) + 1 if memories.bram else 0
        lut.update(write_delay=delayed)
        ff.update(memory_registers=memories.sync_regs + memories.ff_ram_bits, payload=beat if memories.bram else 0,
                  write_delay=delayed)
        return memories, 0, lut, ff
    if isinstance(spec, PoolSpec):
        value_bits = spec.value_bits
        groups = spec.channels // spec.simd
        # The running values rotate through registers with the groups: no multiplexer reads them,
        # so a lane costs its compare (the sign of a subtraction one bit wider than the values)
        # and select whatever the number of groups. Yosys maps a subtraction to a carry chain
        # only past 4 bits (ECP5) or 2 bits (iCE40), else to LUT logic that takes in the select.
        # With one group the select keeps a register's own value: the flip-flop's enable.
        # The max of one-bit codes is their OR.
        width = value_bits + 1
        in_logic = width <= (4 if family == "ecp5" else 2)
        one_bit = value_bits == 1
        beats = groups * spec.window
        count_bits = _range_bits(beats)
        compare_logic = spec.simd * value_bits if in_logic and not one_bit else 0
        if compare_logic and family == "ecp5":
            # ABC maps each bit of a two-bit lane to one LUT of its whole support, taking in the
            # decode of the first group (the count's top bits when the groups are a power of two,
            # else one compare's output): bit 1 reads both high bits, bit 0 all four.
            decode = _range_bits(spec.window) if groups & (groups - 1) == 0 else 1
            decode = decode if 4 + decode <= 7 else 1
            compare_logic = spec.simd * (_and_luts(4 + decode, family) + _and_luts(2 + decode, family))
        return (memories, 0, {"control": 1.0, "compare": 0 if in_logic else spec.simd * width,
                              "compare_logic": compare_logic,
                              "or_lanes": spec.simd if one_bit else 0,
                              "select": spec.simd * value_bits if groups > 1 and not in_logic else 0,
                              "counters": count_bits,
                              # A count that does not wrap by itself compares and resets.
                              "count_wrap": count_bits if beats & (beats - 1) else 0},
                # The output register loads what the last group's running values load, and Yosys
                # keeps one of each pair.
                {"control": 1.0, "running": spec.channels * value_bits if groups > 1 else 0,
                 "shared": spec.channels * spec.bits if groups == 1 else 0,
                 "counters": count_bits})
    if isinstance(spec, FIFOSpec):
        if spec.depth < 16:
            # Shallow queues are read combinationally: LUT RAM reads so, block RAM does not.
            lutram = _shallow_fifo_lutram(spec, family)
            memories.lutram += lutram
            if not lutram:
                memories.ff_ram_bits += spec.width * spec.depth
                memories.ff_ram_mux += spec.width * max(spec.depth - 1, 0) / 3
        else:
            # SyncFIFOBuffered: depth - 1 words in the memory, one in its output register.
            memories.add(width=spec.width, depth=spec.depth - 1, rom=False, family=family)
        return memories, 0, *_fifo_features(spec, family)
    if isinstance(spec, ConverterSpec):
        return memories, 0, *_converter_features(spec)
    if isinstance(spec, VVAUSpec):
        return _vvau_parts(spec, family, dsp)
    if isinstance(spec, ThresholdSpec):
        return _threshold_parts(spec, family)
    if isinstance(spec, AddSpec):
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
    if isinstance(spec, ConcatSpec):
        counters = _log2(spec.inputs) + _log2(spec.max_beats)
        return (memories, 0, {"control": 1.0, "select": spec.elems * spec.bits * (spec.inputs - 1),
                              "counters": counters},
                {"control": 1.0, "counters": counters})
    if isinstance(spec, ForkSpec):
        # The input is ready once every output has its beat (a flag or its ready): one AND of two
        # terms per output, which ECP5's mapping puts in a single wide LUT while it fits.
        return (memories, 0, {"control": 1.0, "outputs": spec.outputs,
                              "ready": _and_luts(2 * spec.outputs, family)},
                {"control": 1.0, "outputs": spec.outputs})
    raise TypeError(f"no resource model for {type(spec).__name__}")


def kernel_name(spec: Spec) -> str:
    """The calibration name of a spec's kernel (``"mvau"``, ``"window"``, ...)."""
    return next(name for name, cls in _SPEC_OF_KERNEL.items() if isinstance(spec, cls))


def features(spec: Spec, family: str, what: str) -> dict[str, float]:
    """The features the ``what`` (``"lut"`` or ``"ff"``) model of ``spec``'s kernel is linear in."""
    _, _, lut, ff = _parts(spec, family, True)
    return lut if what == "lut" else ff


def estimate_kernel(spec: Spec, family: str, *, dsp: bool = True) -> ResourceEstimate:
    """Resources of one kernel on a device ``family``; ``dsp=False`` where the flow has no DSPs."""
    if isinstance(spec, ChainSpec):
        return sum((estimate_kernel(part, family, dsp=dsp) for part in spec.kernels), ResourceEstimate())
    memories, dsps, lut_features, ff_features = _parts(spec, family, dsp)
    coefficients = COEFFICIENTS[family][kernel_name(spec)]
    lut = sum(coefficients["lut"].get(name, 0.0) * value for name, value in lut_features.items())
    ff = sum(coefficients["ff"].get(name, 0.0) * value for name, value in ff_features.items())
    return ResourceEstimate(lut=round(lut), ff=round(ff), bram=memories.bram, dsp=dsps, lutram=memories.lutram)

