"""The resource model of the :class:`~streamc.rtl.threshold.ThresholdUnit`, and its compares an MVAU shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lut import table_pieces
from .memories import Memories, bram_bank_mux, live_bits_of, live_columns, logic_rom, varying_bits
from .shared import KernelSpec, known, twos


@dataclass(frozen=True)
class ThresholdSpec(KernelSpec):
    """A :class:`~streamc.rtl.threshold.ThresholdUnit`: ``elems * thresholds`` comparators of
    ``compare_bits``, against constants (``shared``) or a ROM of one row per channel group
    (``rom_live``: its :func:`rom_live_bits`); ``signed``: the compares are signed.

    Where the thresholds are known (trained ones repeat at the clip, and Yosys merges equal
    compares and folds those no input can fail or pass): ``live_compares`` the distinct compares
    left, ``live_compare_bits`` their width less the constant low zero bits of each threshold
    (the input bits below them do not decide the compare), and ``count_full_adders`` those of the
    compressor trees that sum each element's live compares (:func:`compressor_full_adders`).

    ``threshold_style`` is the unit's style (a placement: :func:`~streamc.resources.with_placement` turns a
    parallel unit's spec into the search's and back), and every spec of a unit that can search carries
    what the search is built of: ``search_steps``, and per step and lane (step-major) its ROM's
    ``search_roms`` ``(depth, varying, live, address, leaves, selects)``: ``varying`` the bit columns that are
    not constant (Yosys drops the others before it maps the memory), ``live`` the distinct ones of those (0:
    the words are all one, a constant), ``address`` the address bits its words depend on, ``leaves`` and
    ``selects`` its LUT4s and 2:1 selects in logic (:func:`~.lut.table_pieces`: sorted thresholds make simple
    columns)."""

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
    threshold_style: str = "parallel"
    search_steps: int = 0
    search_roms: tuple[tuple[int, int, int, int, int, int], ...] = ()

    @classmethod
    def of_unit(cls, unit) -> "ThresholdSpec":
        rows, elems = unit.rom_rows, unit.in_elems
        channels, thresholds = unit.thresholds.shape
        shared = len(set(rows)) == 1
        live, live_bits, full_adders = threshold_structure(
            unit.thresholds, elems, unit.in_dtype.min, unit.in_dtype.max + 1, unit.compare_shape.width, shared)
        return cls(channels=channels, elems=elems, thresholds=thresholds,
                   in_bits=unit.in_width, compare_bits=unit.compare_shape.width, out_bits=unit.out_width,
                   shared=shared, signed=unit.compare_shape.signed,
                   rom_live=live_bits_of(lambda: rows, elems * thresholds * unit.compare_shape.width,
                                          len(rows)),
                   live_compares=live, live_compare_bits=live_bits, count_full_adders=full_adders,
                   threshold_style=unit.style, search_steps=unit.search_steps if unit.can_search else 0,
                   search_roms=search_roms(unit) if unit.can_search else ())


def search_roms(unit) -> tuple[tuple[int, int, int, int, int, int], ...]:
    """:class:`ThresholdSpec`'s ``search_roms`` of a :class:`~streamc.rtl.threshold.ThresholdUnit`."""
    width = unit.compare_shape.width
    roms = []
    for step in range(unit.search_steps):
        table = unit.search_thresholds(step)
        words = table.reshape(table.shape[0], -1) & ((1 << width) - 1)
        addresses = np.arange(words.shape[1])
        for lane in words:
            live = 0 if (lane == lane[0]).all() else live_columns(lane.astype(np.uint64)[:, None], width)
            # An address bit matters where flipping it reads another word.
            used = sum(1 for bit in range((len(lane) - 1).bit_length())
                       if ((flipped := addresses ^ (1 << bit)) < len(lane)).any()
                       and (lane[addresses[flipped < len(lane)]] != lane[flipped[flipped < len(lane)]]).any())
            roms.append((len(lane), varying_bits(lane[:, None], width), live, used,
                         *table_pieces([int(word) for word in lane], width)))
    return tuple(roms)


def _low_zero_bits(value: int, width: int) -> int:
    """Trailing zero bits of ``value`` as a ``width``-bit field (``width`` for zero)."""
    value &= (1 << width) - 1
    return width if value == 0 else twos(value)


def threshold_structure(thresholds: np.ndarray, elems: int, lo: int, hi: int, width: int,
                         shared: bool, merge_equal: bool = True) -> tuple[int, int, int]:
    """:class:`ThresholdSpec`'s ``live_compares``, ``live_compare_bits`` and ``count_full_adders``
    of ``(channels, L)`` thresholds clamped to ``[lo, hi]``, ``elems`` per beat: element ``j``
    compares with column ``l`` of channels ``j, j + elems, ...`` (constants when ``shared``).
    Yosys merges the compares of equal columns (``merge_equal``) unless they are read from block
    RAM, whose words it cannot see."""
    thresholds = np.asarray(thresholds, dtype=np.int64)
    channels, levels = thresholds.shape
    lanes, groups = min(elems, channels), -(-channels // elems)
    # Whole groups of ``elems`` channels, the last one filled with copies of each lane's first channel:
    # a copy makes no column distinct and does not change whether one folds.
    filled = thresholds[np.minimum(np.arange(groups * elems) % elems, channels - 1)]
    filled[:channels] = thresholds
    columns = filled.reshape(groups, elems, levels).transpose(1, 2, 0)[:lanes]  # [lane, level, channel group]
    # A column every input reaches (t <= lo) or none does (t >= hi) folds to a constant.
    kept = ~((columns <= lo).all(axis=2) | (columns >= hi).all(axis=2)).reshape(-1)
    flat, lane = columns.reshape(-1, groups), np.repeat(np.arange(lanes), levels)
    if merge_equal:
        order = np.lexsort((*flat.T[::-1], lane))
        flat, lane, kept = flat[order], lane[order], kept[order]
        kept[1:] &= (lane[1:] != lane[:-1]) | (flat[1:] != flat[:-1]).any(axis=1)
    per_lane = np.bincount(lane[kept], minlength=lanes)
    live = int(per_lane.sum())
    live_bits = (sum(width - _low_zero_bits(int(first), width) for first in flat[kept, 0]) if shared
                 else width * live)
    full_adders = sum(compressor_full_adders(int(count)) for count in per_lane)
    return live, live_bits, full_adders


def compressor_full_adders(count: int) -> int:
    """Full adders of the compressor tree Yosys' ``alumacc``/``maccmap`` build for a sum of
    ``count`` single bits: each takes three bits of a column and leaves two, until the
    ``count.bit_length()`` bits of the sum are left."""
    return max(count - count.bit_length(), 0)


def threshold_parts(spec: ThresholdSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a threshold unit."""
    if spec.threshold_style == "search":
        return search_parts(spec, family)
    memories = Memories()
    comparators = spec.elems * spec.thresholds
    if not spec.shared:
        memories.add(width=comparators * spec.compare_bits, depth=spec.channels // spec.elems, rom=True,
                     family=family)
    rom_luts, rom_muxes, rom_regs = ((0, 0, 0) if spec.shared else
                                     logic_rom(comparators * spec.compare_bits, spec.channels // spec.elems,
                                                spec.rom_live, family))
    # Where the thresholds are unknown every compare is live, full width, and summed by a full tree.
    live = known(spec.live_compares, comparators)
    live_bits = known(spec.live_compare_bits, comparators * spec.compare_bits)
    full_adders = known(spec.count_full_adders, spec.elems * compressor_full_adders(spec.thresholds))
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


#: The weights of :func:`search_parts`' features, per family: each feature counts cells; on the iCE40 the count
#: came out 0.74 to 1.01 of Yosys' LUTs over the designs below, so its LUT features weigh 1.1. Against Yosys on 10
#: designs per family (15 to 255 random sorted thresholds, 1 to 8 lanes, 8- to 26-bit inputs, shared and
#: per-channel; three of them in ``tests/test_threshold_search.py``) the LUTs came out 0.81 to 1.11 of Yosys' on
#: the iCE40 and 0.81 to 1.14 on the ECP5, block RAMs equal, flip-flops within 1 %. On the zoo's stages
#: (``benchmarks/bench_thresholds.py --synth``) onnxruntime's ResNet-8 add came out 1.08 and 1.10, its pool 1.51
#: and 1.19, the DS-CNN's pool 1.49 and 1.27: evenly spaced thresholds shared by every channel (an average's)
#: leave ROM columns ABC folds further than pieces show, so the search is overestimated there.
SEARCH_COEFFICIENTS = {
    family: {"lut": {"search_compare": weight, "search_rom": weight, "control": 1.0},
             "ff": {"pipeline": 1.0, "memory_registers": 1.0}}
    for family, weight in (("ice40", 1.1), ("ecp5", 1.0), ("gowin", 1.0))}


def search_parts(spec: ThresholdSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a threshold unit that searches (weighed with
    :data:`SEARCH_COEFFICIENTS`): the cells Yosys maps each step's compare and ROM to.

    A step's compare is a carry chain, on the iCE40 with a LUT per bit that is not the same in every word, which
    also holds the word's bit
    where the ROM stays in logic and its address and the input bit fit the LUT's four inputs (a ROM of up to
    8 words); a larger ROM's pieces and selects (``leaves``, ``selects``) feed those LUTs, the top select of
    a column inside its compare LUT. On the ECP5 the compare is ``CCU2C`` cells, two LUTs per two bits, and a
    ROM in logic its pieces, joined by ``PFUMX``/``L6MUX21`` up to 64 words, past that by a LUT4 per 4 of
    the ``words / 16`` leaves of a column. A ROM in block RAM adds its read multiplexer
    (:func:`~.memories.bram_bank_mux`). The flip-flops are the pipeline's registers as built (the last step
    keeps no group) and the read registers of the ROMs in logic, a live column each."""
    memories = Memories()
    width, lanes = spec.compare_bits, spec.elems
    # The first step's ROM holds a word per channel group, or one where the groups' thresholds are the same.
    group_bits = (spec.search_roms[0][0] - 1).bit_length()
    compare = rom = rom_registers = 0
    for depth, varying, live, address, pieces, selects in spec.search_roms:
        mapping = memories.add(width=varying, depth=depth, rom=True, family=family) if live else None
        in_logic = mapping is not None and mapping.kind == "logic"
        leaves = 1 << max(address - 4, 0)
        # Equal columns share their pieces (live), and simple columns take fewer than 16 words a piece (pieces).
        pieces = min(pieces, live * leaves)
        if family == "ice40":
            # Against a constant bit the chain needs no LUT; a ROM of up to 8 words sits in the compare's LUTs, a
            # larger one's pieces and selects feed them, the top select of each column inside.
            in_rom = varying if address <= 3 else pieces + selects + varying - min(selects, live)
            compare += (in_rom if in_logic else varying) + (1 if spec.signed else 0)
        else:
            compare += 2 * ((width + 2) // 2)
            rom += pieces + live * max(leaves // 4 - 1, 0) if in_logic else 0
        rom += bram_bank_mux(mapping, varying) if mapping is not None else 0
        rom_registers += live if in_logic else 0
    steps = spec.search_steps
    pipeline = (steps * (1 + lanes * spec.in_bits) + (steps - 1) * group_bits + lanes * steps * (steps - 1) // 2
                + lanes * spec.out_bits + 1 + group_bits)
    lut = {"search_compare": compare, "search_rom": rom, "control": group_bits + 1}
    ff = {"pipeline": pipeline, "memory_registers": rom_registers}
    return memories, 0, lut, ff
