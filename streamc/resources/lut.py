"""The resource model of the :class:`~streamc.rtl.lut.LookupTable`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .memories import Memories, bram_bank_mux
from .shared import KernelSpec, range_bits


@dataclass(frozen=True)
class LUTSpec(KernelSpec):
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

    @classmethod
    def of_unit(cls, unit) -> "LUTSpec":
        pieces = [table_pieces(words, unit.out_width) for words in unit.rom_words]
        return cls(in_bits=unit.in_width, out_bits=unit.out_width, elems=unit.in_elems,
                   rom_leaves=sum(p[0] for p in pieces), rom_selects=sum(p[1] for p in pieces),
                   ram_style=unit.ram_style, folds=unit.folds)


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


def lut_parts(spec: LUTSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a lookup table."""
    memories = Memories()
    mappings = [memories.add(width=spec.out_bits, depth=spec.folds << spec.in_bits, rom=True, family=family,
                             style=spec.ram_style) for _ in range(spec.elems)]
    luts, muxes = memories.logic_rom_luts, memories.logic_rom_muxes
    if luts and spec.rom_leaves >= 0:
        luts, muxes = spec.rom_leaves, spec.rom_selects
    # A table per channel counts the beats of a pixel to pick the channel's table; its words
    # may span several block RAMs, read through a multiplexer.
    folds = range_bits(spec.folds) if spec.folds > 1 else 0
    read_mux = sum(bram_bank_mux(mapping, spec.out_bits) for mapping in mappings)
    return (memories, 0, {"control": 1.0, "logic_memory": luts, "rom_muxes": muxes, "folds": folds,
                          "bram_read_mux": read_mux},
            {"control": 1.0, "memory_registers": memories.logic_rom_regs, "folds": folds})
