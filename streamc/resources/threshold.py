"""The resource model of the :class:`~streamc.rtl.threshold.ThresholdUnit`, and its compares an MVAU shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memories import Memories, live_bits_of, logic_rom
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
    compressor trees that sum each element's live compares (:func:`compressor_full_adders`)."""

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
        live, live_bits, full_adders = threshold_structure(
            unit.thresholds, elems, unit.in_dtype.min, unit.in_dtype.max + 1, unit.compare_shape.width, shared)
        return cls(channels=channels, elems=elems, thresholds=thresholds,
                   in_bits=unit.in_width, compare_bits=unit.compare_shape.width, out_bits=unit.out_width,
                   shared=shared, signed=unit.compare_shape.signed,
                   rom_live=live_bits_of(lambda: rows, elems * thresholds * unit.compare_shape.width,
                                          len(rows)),
                   live_compares=live, live_compare_bits=live_bits, count_full_adders=full_adders)


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
