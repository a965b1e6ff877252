"""Memories: where Yosys' ``memory_libmap`` puts them, and what a ROM kept in logic costs from its contents."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cache, reduce

import numpy as np

from .shared import reduce_axes

#: Largest ROM (bits) whose contents :func:`rom_live_bits` reads (about 10 ms at this size); a larger
#: one is counted whole if it stays in logic.
LIVE_BITS_LIMIT = 1 << 18


def varying_bits(fields: np.ndarray, bits: int, word_axes: tuple[int, ...] = (0,)) -> int:
    """Bit columns of a ROM that differ between its words: ``fields`` holds the ROM's ``bits``-wide,
    non-negative fields, indexed along ``word_axes`` by word and along the others by position in the
    word. Yosys drops the constant columns before it maps the memory: they take no block RAM width."""
    fields = np.asarray(fields)
    if np.prod([fields.shape[axis] for axis in word_axes]) < 2:
        return 0
    # Reduced in the fields' own integers (weights as the ROM stores them are bytes), then the differing
    # bits of the fields' ``bits`` counted over the bytes.
    fields = fields.astype(np.uint64, copy=False) if fields.dtype.kind == "i" else fields
    return differing_bits(reduce_axes(np.bitwise_and, fields, word_axes), reduce_axes(np.bitwise_or, fields, word_axes),
                          bits)


def differing_bits(same: np.ndarray, any_set: np.ndarray, bits: int) -> int:
    """:func:`varying_bits` of the fields whose AND over the words is ``same`` and OR ``any_set`` (non-negative
    integers of one dtype)."""
    mask = same.dtype.type((1 << min(bits, 8 * same.dtype.itemsize)) - 1)
    return int(np.bitwise_count((same ^ any_set) & mask).sum())


def rom_live_bits(rows: list[int], width: int) -> int:
    """Bit columns of a ROM (``rows`` of ``width`` bits) that cost logic when it stays out of block
    RAM: Yosys drops a column that holds the same bit in every row and shares equal columns, so
    only the distinct non-constant ones need LUTs and read registers. -1 for no rows (not counted);
    :func:`live_bits_of` keeps large ROMs from being read at all."""
    if not rows:
        return -1
    size = (width + 7) // 8
    packed = np.frombuffer(b"".join(int(row).to_bytes(size, "little") for row in rows), dtype=np.uint8)
    return _live_columns(np.unpackbits(packed.reshape(len(rows), size), axis=1, bitorder="little")[:, :width])


def rom_varying_bits(rows: list[int], width: int) -> int:
    """Bit columns of a ROM (``rows`` of ``width`` bits) that differ between its rows: the width Yosys maps, once
    it has dropped the constant ones (-1 for no rows)."""
    if not rows:
        return -1
    same, any_set = reduce(operator.and_, rows), reduce(operator.or_, rows)
    return ((same ^ any_set) & ((1 << width) - 1)).bit_count()


def live_columns(fields: np.ndarray, bits: int) -> int:
    """:func:`rom_live_bits` of the ROM whose words hold ``fields`` (an array of words by positions in the
    word, each a ``bits``-wide non-negative field), read off the fields without packing the words."""
    fields = np.asarray(fields)
    if not len(fields):
        return -1
    # Each field's bytes, least significant first, unpacked to bits and cut to the field's width.
    fields = np.ascontiguousarray(fields, dtype=fields.dtype.newbyteorder("<"))
    unpacked = np.unpackbits(fields.view(np.uint8), bitorder="little").reshape(*fields.shape, -1)
    return _live_columns(unpacked[:, :, :bits].reshape(len(fields), -1))


def _live_columns(bits: np.ndarray) -> int:
    """The distinct non-constant columns of a ROM's ``bits`` (words by bit columns, 0 or 1)."""
    varying = bits[:, bits.min(axis=0) != bits.max(axis=0)]
    if not varying.shape[1]:
        return 0
    # Each column's bits as one opaque value: np.unique over those is a plain sort of byte strings.
    columns = np.ascontiguousarray(np.packbits(varying, axis=0).T)
    return len(np.unique(columns.view(np.dtype((np.void, columns.shape[1])))))


def live_bits_of(rows_of, width: int, depth: int) -> int:
    """:func:`rom_live_bits` of the ROM whose rows ``rows_of()`` builds, -1 past the size limit. Any ROM
    may stay in logic, where Yosys would put it in block RAM too: the planner tries both (an 8-bit
    layer's 255 thresholds per channel in logic, 17,400 LUTs in Yosys: 24,857 estimated with every
    bit counted, 17,544 with the live ones)."""
    return rom_live_bits(rows_of(), width) if width * depth <= LIVE_BITS_LIMIT else -1


#: memory_libmap's block RAMs: primitive, cost, address bits, port widths (a ROM may use every width).
_BLOCK_RAMS = {
    "ice40": [dict(primitive="SB_RAM40_4K", cost=64, abits=11, widths=(2, 4, 8, 16), byte=0)],
    "ecp5": [dict(primitive="DP16KD", cost=128, abits=14, widths=(1, 2, 4, 9, 18), byte=9),
             dict(primitive="PDPW16KD", cost=128, abits=14, widths=(1, 2, 4, 9, 18, 36), byte=9)],
    # synth_gowin's brams.txt: single port (a ROM) and semi dual port (a RAM) take every width to 36.
    "gowin": [dict(primitive="SDPB", cost=128, abits=14, widths=(1, 2, 4, 9, 18, 36), byte=9)],
}
LUTRAM = {"ecp5": dict(primitive="TRELLIS_DPR16X4", cost=4, depth=16, width=4),   # RAMs only (prune_rom)
          "gowin": dict(primitive="RAM16SDP4", cost=4, depth=16, width=4)}
_ROM_LOGIC_COST, RAM_LOGIC_COST = 1 / 16, 1.0


@dataclass(frozen=True)
class MemoryMapping:
    """Where Yosys puts one memory: ``kind`` is ``"bram"``, ``"lutram"`` or ``"logic"``; in block or
    LUT RAM, the ``primitive`` and the ``banks`` of words one after another in the address space."""

    kind: str
    blocks: int = 0
    primitive: str = ""
    banks: int = 1


# Memoized: the planner asks the same few questions thousands of times.
@cache
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
    logic_cost = int(width * depth * (_ROM_LOGIC_COST if rom else RAM_LOGIC_COST))
    best = (float("inf") if style == "block" else logic_cost, MemoryMapping("logic"))
    # Candidates in memory_libmap's order (LUT RAM library first): on equal cost the first stays.
    lutram = LUTRAM.get(family)
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


def bram_bank_mux(mapping: MemoryMapping, width: int) -> int:
    """LUT4s of the read multiplexer joining a block-RAM memory's address banks (0 when not in block
    RAM): a 2-to-1 select per bank past the first, per bit, on both families. On the ECP5 no PFUMX
    or L6MUX joins them (those join a ROM's LUTs, see ``rom_muxes``): the calibration designs of 4,
    6 and 8 banks came out 10-13 % above a model of one LUT4 per pair of banks, and 9 banks and
    more showed about a LUT4 per bank (per bit: 7 LUT4s at 9 banks, 17 at 16, about 21 at 18 and 24)."""
    return width * (mapping.banks - 1) if mapping.kind == "bram" else 0


@dataclass
class Memories:
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


def logic_rom(width: int, depth: int, live: int, family: str, style: str = "auto") -> tuple[int, int, int]:
    """LUT4s holding the words, 2:1 multiplexers joining them and read registers of a ROM that
    ``memory_mapping`` keeps in logic (zeros for one in block RAM): per live bit column
    (:func:`rom_live_bits`; all ``width`` when ``live`` is -1)."""
    if memory_mapping(width=width, depth=depth, rom=True, family=family, style=style).kind != "logic":
        return 0, 0, 0
    columns = width if live < 0 else live
    leaves = max(1, -(-depth // 16))
    return columns * leaves, columns * (leaves - 1), columns
