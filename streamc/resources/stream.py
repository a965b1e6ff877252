"""The resource models of :mod:`streamc.rtl.stream`: the ``StreamFIFO`` and the ``WidthConverter``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .memories import LUTRAM, RAM_LOGIC_COST, Memories, memory_mapping
from .shared import KernelSpec, range_bits


@dataclass(frozen=True)
class FIFOSpec(KernelSpec):
    """A :class:`~streamc.rtl.stream.StreamFIFO` of ``depth`` beats of ``width`` bits, its storage read through a
    register if ``buffered`` (``None``: as the FIFO decides from its depth)."""

    width: int
    depth: int
    buffered: bool | None = None

    @property
    def shallow(self) -> bool:
        """Whether the storage is read combinationally (:attr:`streamc.rtl.stream.StreamFIFO.buffered`)."""
        from ..rtl.stream import reads_buffered

        return not reads_buffered(self.depth, self.buffered)

    @classmethod
    def of_unit(cls, unit) -> "FIFOSpec":
        return cls(width=unit.width, depth=unit.depth, buffered=unit.buffered)


@dataclass(frozen=True)
class ConverterSpec(KernelSpec):
    """A :class:`~streamc.rtl.stream.WidthConverter` of ``bits``-bit elements."""

    bits: int
    in_elems: int
    out_elems: int

    @property
    def structure(self) -> str:
        """How the converter is built (:attr:`streamc.rtl.stream.WidthConverter.structure`)."""
        from ..rtl.stream import conversion_structure

        return conversion_structure(self.in_elems, self.out_elems)

    @classmethod
    def of_unit(cls, unit) -> "ConverterSpec":
        return cls(bits=unit.elem_width, in_elems=unit.in_elems, out_elems=unit.out_elems)


def _shallow_fifo_lutram(spec: FIFOSpec, family: str) -> int:
    """LUT RAM blocks of a shallow queue's storage, 0 where it is in flip-flops: memory_libmap
    takes LUT RAM (ECP5 only) where it costs less than the bits do in flip-flops."""
    lutram = LUTRAM.get(family)
    if not lutram:
        return 0
    blocks = -(-spec.depth // lutram["depth"]) * -(-spec.width // lutram["width"])
    return blocks if lutram["cost"] * blocks < spec.width * spec.depth * RAM_LOGIC_COST else 0


def _fifo_features(spec: FIFOSpec, family: str) -> tuple[dict[str, float], dict[str, float]]:
    """LUT and FF features of a :class:`~streamc.rtl.stream.StreamFIFO`.

    A shallow queue (:attr:`FIFOSpec.shallow`) reads its storage combinationally: LUT RAM
    (:func:`_shallow_fifo_lutram`) or flip-flops and a read multiplexer; a write and a read pointer
    and a level count it, a wide one a level on each side (:func:`~streamc.rtl.stream.counts_per_side`),
    each level's next value a function of both; its ready and valid are registers. A deep one
    (``SyncFIFOBuffered``) keeps ``depth - 1`` words in a
    memory read synchronously (block RAM, LUT RAM beside a multiplexer over its 16-word blocks, or
    flip-flops), and one more in an output register.
    """
    width, depth = spec.width, spec.depth
    lut = dict.fromkeys(("shallow", "shallow_pointers", "shallow_words", "shallow_read_mux", "shallow_wide_level",
                         "shallow_two_counts", "shallow_two_wide_counts", "deep", "deep_pointers",
                         "bram", "bram_width", "lutram", "lutram_banked", "lutram_read_mux", "lutram_write_enables",
                         "ff_read_mux"), 0.0)
    ff = dict.fromkeys(("storage", "pointers", "output_register", "bram_output"), 0.0)
    if spec.shallow:
        from ..rtl.stream import counts_per_side

        level = range_bits(depth + 1)
        pointers = 2 * range_bits(depth) + level
        two = counts_per_side(width)
        # Each word's write enable decodes the write pointer.
        # Measured, not derived: a level count of four bits (depth 8 and up) takes some twelve
        # LUTs more than one of three (17 LUTs at depths 5 to 7 on the ECP5, 29 at depth 8); two
        # counts of three bits or more, whose next values read eight inputs, more than two of two
        # (ECP5: 11 LUTs more than one count at depths 2 and 3, 37 at depths 4 to 6).
        lut.update(shallow=1.0, shallow_pointers=pointers, shallow_words=depth,
                   shallow_wide_level=1.0 if level >= 4 else 0.0, shallow_two_counts=level if two else 0,
                   shallow_two_wide_counts=1.0 if two and level >= 3 else 0.0)
        # The registered ready and valid, and with two counts the second.
        ff.update(pointers=pointers + 2 + (level if two else 0))
        if not _shallow_fifo_lutram(spec, family):
            lut.update(shallow_read_mux=width * (depth - 1))
            ff.update(storage=width * depth)
        return lut, ff
    words = depth - 1
    pointers = 2 * range_bits(words) + range_bits(words + 1) + range_bits(depth + 1)
    lut.update(deep=1.0, deep_pointers=pointers)
    ff.update(pointers=pointers, output_register=width)
    mapping = memory_mapping(width=width, depth=words, rom=False, family=family)
    if mapping.kind == "bram":
        # Block RAM output registers sit beside the FIFO's own, with a multiplexer per bit; and a constant part the
        # fit finds for a FIFO in block RAM (about 24 LUTs on the ECP5, 28 on the GW1NR-9, none on the iCE40).
        lut.update(bram=1.0, bram_width=width)
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
        count = range_bits(beats - 1)
        lut.update(split=1.0, split_select=(spec.in_elems - spec.out_elems) * spec.bits, split_count=count)
        return lut, {"registers": spec.in_elems * spec.bits + 2 + count}
    # A ring of lcm slots: each output bit picks one of lcm / out_elems slots (one two-way choice
    # fewer than that), each input beat's slots load on a decode of the write beat, and whether a
    # beat may leave or land is a table of the two beat counts and a flag.
    size = math.lcm(spec.in_elems, spec.out_elems)
    in_beats, out_beats = size // spec.in_elems, size // spec.out_elems
    counters = range_bits(in_beats) + range_bits(out_beats)
    lut.update(ring=1.0, ring_read=spec.out_elems * spec.bits * (out_beats - 1), ring_writes=in_beats,
               ring_table=2 ** (counters + 1))
    return lut, {"registers": size * spec.bits + counters + 1}


def fifo_parts(spec: FIFOSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a FIFO."""
    memories = Memories()
    if spec.shallow:
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


def converter_parts(spec: ConverterSpec) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a width converter."""
    memories = Memories()
    return memories, 0, *_converter_features(spec)
