"""The resource models of :mod:`streamc.rtl.window`: the ``SlidingWindow`` and the ``WindowReduce``."""

from __future__ import annotations

from dataclasses import dataclass

from .memories import Memories, bram_bank_mux
from .shared import KernelSpec, and_luts, bits_of_range, range_bits, twos


@dataclass(frozen=True)
class WindowSpec(KernelSpec):
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
    needed_register: bool = False
    address_register: bool = False

    @property
    def ring_words(self) -> int:
        return self.buffer_rows * self.width * self.channels // self.simd

    @classmethod
    def of_unit(cls, unit) -> "WindowSpec":
        (h, w, c), (kh, kw), (oh, ow, _) = unit.in_shape, unit.kernel, unit.out_shape
        (sh, sw), (dh, dw), (top, left) = unit.stride, unit.dilation, unit.padding_before
        return cls(height=h, width=w, channels=c, kernel_h=kh, kernel_w=kw, out_h=oh, out_w=ow, bits=unit.in_width,
                   simd=unit.in_elems, buffer_rows=unit.buffer_rows, pad_top=top, pad_left=left, stride_h=sh,
                   stride_w=sw, dilation_h=dh, dilation_w=dw, needed_register=unit.needed_register,
                   address_register=unit.address_register)

    @classmethod
    def of_stage(cls, stage) -> "WindowSpec":
        """The spec of a :class:`~streamc.hw.WindowStage` at its current lanes."""
        from ..rtl.window import SlidingWindow

        return cls.of_unit(SlidingWindow(in_shape=stage.in_shape, kernel=stage.kernel, stride=stage.strides,
                                         padding=stage.padding, dilation=stage.dilations, dtype=stage.dtype,
                                         pad_value=stage.pad_value, simd=stage.elems,
                                         needed_register=stage.needed_register,
                                         address_register=stage.address_register, name=stage.name))


@dataclass(frozen=True)
class PoolSpec(KernelSpec):
    """A max :class:`~streamc.rtl.window.WindowReduce`: one running value per channel in registers,
    ``value_bits`` wide (the input's code for one- and two-bit types, else a signed value just wide
    enough for the type's range)."""

    channels: int
    window: int
    vectors: int
    bits: int
    simd: int
    value_bits: int

    @classmethod
    def of_unit(cls, unit) -> "PoolSpec":
        return cls(channels=unit.channels, window=unit.window, vectors=unit.vectors, bits=unit.in_width,
                   simd=unit.in_elems, value_bits=unit.value_shape.width)


def _signed_range_bits(lo: int, hi: int) -> int:
    """Width of an Amaranth ``Signal(range(lo, hi))``."""
    return bits_of_range(lo, hi - 1)[0] if hi - 1 >= lo else 0


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
    ring = range_bits(spec.ring_words)
    counters = (range_bits(cf) * 2 + range_bits(w) + range_bits(kw) + range_bits(kh) + range_bits(spec.out_w)
                + range_bits(spec.out_h) + ring)
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
    pixels = 0 if one_row else max(0, _signed_range_bits(-top * w, (h + 1) * w + 1) - twos(w))
    # The beat positions move in whole pixels: their low twos(cf) bits stay zero.
    beats = ((0 if kw == 1 else _signed_range_bits(-left * cf, (w + extent_w) * cf) - twos(cf))
             + (0 if one_col else _signed_range_bits(-left * cf, (w + 1) * cf) - twos(cf)))
    credit = range_bits(spec.buffer_rows + h + sh + 1)
    written = _signed_range_bits(-h * w, (h + spec.buffer_rows) * w + 1)
    # top_addr steps with the patch rows (with one row of patches, only from image to image, as
    # base_addr does); row_addr too when the kernel spans rows. base_addr only ever moves by whole
    # images of ring rows, and only its high bits stay.
    ring_steps = ((0 if one_row else ring) + (ring if kh > 1 else 0)
                  + max(0, ring - twos(w * cf) - 1))
    # The count of pixels a patch needs, as a register (needed_register): set from a copy of its sum in each
    # of the two moves of the patch's corner, where without the register one sum feeds the compare.
    needed = _signed_range_bits(-(top + 1) * w - left - 2, (h + 1) * w + 2) if spec.needed_register else 0
    positions = r0 + r + c0 + c + pixels + beats + credit + written + 2 * needed
    # Each register above, the ring addresses (row_addr merged with top_addr when the kernel spans
    # one row), the output valid and the padding flag.
    registers = counters + positions - needed + ring_steps + 2
    # The counts of the corner's next moves, summed a cycle ahead where a patch takes two beats or more
    # (SlidingWindow.precomputed_moves): two more registers of the count's width.
    registers += 2 * needed if kh * kw * cf >= 2 else 0
    if spec.needed_register:
        # The reader's compares registered a cycle ahead (one per move of the corner) and the move that picks
        # one, the rows it frees a cycle later, and the frame's beat count with its last-beat flag.
        beats = spec.out_h * spec.out_w * kh * kw * spec.channels // spec.simd
        registers += 4 + 2 + range_bits(h + sh + 1) + (range_bits(beats) + 1 if beats > 1 else 0)
    if spec.address_register:
        # The ring's read address and padding flag as registers, moved with the counters: each move an adder
        # of the address's width from it or from a corner's address (Yosys keeps about one register's bits).
        address = _signed_range_bits(-left * cf, spec.ring_words + (w + extent_w + 1) * cf)
        registers += address + 1
        ring_steps += 3 * address
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


def window_parts(spec: WindowSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a sliding window."""
    memories = Memories()
    beat = spec.simd * spec.bits
    ring = memories.add(width=beat, depth=spec.ring_words, rom=False, family=family)
    lut, ff = _window_features(spec)
    # LUT RAM past 16 words is banked, with a read multiplexer across the banks.
    banks = ring.banks if ring.kind == "lutram" else 1
    lut.update(payload=beat, logic_memory=memories.ff_ram_mux, lutram_read_mux=beat * (banks - 1),
               bram_read_mux=bram_bank_mux(ring, beat))
    # Block RAM reads with an enable and no transparency: Yosys keeps the read data beside it.
    # To give that read the old word when it meets the write, Yosys delays the write a cycle
    # (its data, address and enable in flip-flops) and forwards the delayed word to a read of
    # its address (a compare and a multiplexer).
    delayed = beat + range_bits(spec.ring_words) + 1 if memories.bram else 0
    lut.update(write_delay=delayed)
    ff.update(memory_registers=memories.sync_regs + memories.ff_ram_bits, payload=beat if memories.bram else 0,
              write_delay=delayed)
    return memories, 0, lut, ff


def pool_parts(spec: PoolSpec, family: str) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of a max pool."""
    memories = Memories()
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
    count_bits = range_bits(beats)
    compare_logic = spec.simd * value_bits if in_logic and not one_bit else 0
    if compare_logic and family == "ecp5":
        # ABC maps each bit of a two-bit lane to one LUT of its whole support, taking in the
        # decode of the first group (the count's top bits when the groups are a power of two,
        # else one compare's output): bit 1 reads both high bits, bit 0 all four.
        decode = range_bits(spec.window) if groups & (groups - 1) == 0 else 1
        decode = decode if 4 + decode <= 7 else 1
        compare_logic = spec.simd * (and_luts(4 + decode, family) + and_luts(2 + decode, family))
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
