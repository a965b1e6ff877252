"""Convolution and pooling front ends: the sliding-window generator and the window reduction.

A convolution is compiled as FINN compiles it: :class:`SlidingWindow` turns a channels-last
image stream into one ``KH*KW*C`` patch per output pixel, and the MVAU multiplies each patch
by the weight matrix. A max or sum pool reduces the same patches with :class:`WindowReduce`.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType
from streamc.errors import FoldingError

__all__ = ["SlidingWindow", "WindowReduce", "sliding_window_reference", "window_reduce_reference"]


def _output_size(size: int, pad_before: int, pad_after: int, kernel: int, stride: int,
                 dilation: int) -> int:
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


def sliding_window_reference(frame: np.ndarray, *, kernel: tuple[int, int],
                             stride: tuple[int, int] = (1, 1),
                             padding: tuple[int, int, int, int] = (0, 0, 0, 0),
                             dilation: tuple[int, int] = (1, 1), pad_value: int = 0) -> np.ndarray:
    """The patches :class:`SlidingWindow` emits for one ``(H, W, C)`` frame.

    Returns an array of shape ``(OH*OW, KH*KW*C)``: row ``oh*OW + ow`` is the patch of output
    pixel ``(oh, ow)`` in ``(kh, kw, c)`` order, ``pad_value`` outside the image.
    """
    frame = np.asarray(frame)
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, left, bottom, right = padding
    padded = np.pad(frame, ((top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    oh = _output_size(frame.shape[0], top, bottom, kh, sh, dh)
    ow = _output_size(frame.shape[1], left, right, kw, sw, dw)
    patches = [padded[y * sh:y * sh + dh * (kh - 1) + 1:dh, x * sw:x * sw + dw * (kw - 1) + 1:dw]
               for y in range(oh) for x in range(ow)]
    return np.stack(patches).reshape(oh * ow, -1)


def window_reduce_reference(patches: np.ndarray, *, channels: int, mode: str) -> np.ndarray:
    """What :class:`WindowReduce` computes: ``patches`` of shape ``(vectors, window*channels)``
    in ``(k, c)`` order reduced over ``k`` to shape ``(vectors, channels)``."""
    patches = np.asarray(patches).reshape(len(patches), -1, channels)
    return patches.max(axis=1) if mode == "max" else patches.sum(axis=1)


def check_channel_fold(name: str, what: str, simd, channels: int) -> None:
    if not isinstance(simd, (int, np.integer)) or simd < 1 or channels % simd:
        divisors = ", ".join(str(d) for d in range(1, channels + 1) if channels % d == 0)
        raise FoldingError(f"node {name!r}: simd={simd!r} does not divide the {channels} "
                           f"{what}; valid simd: {divisors}")


def _positive_ints(name: str, what: str, values, count: int, minimum: int = 1) -> tuple:
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    if len(values) != count or not all(isinstance(v, (int, np.integer)) and v >= minimum
                                       for v in values):
        raise ValueError(f"node {name!r}: {what} must be {count} integers >= {minimum}, "
                         f"not {values!r}")
    return tuple(int(v) for v in values)


class SlidingWindow(wiring.Component):
    """Emits, for each output pixel of a convolution, the input patch it covers.

    Input: one frame of ``H*W*C`` elements in raster order ``(h, w, c)``, ``simd`` per beat.
    Output: for each output pixel ``(oh, ow)`` in raster order, its patch in ``(kh, kw, c)``
    order, ``simd`` elements per beat. Element ``[kh][kw][c]`` is input pixel
    ``(oh*SH - top + kh*DH, ow*SW - left + kw*DW)``, channel ``c``, or ``pad_value`` outside
    the image. ``OH = (H + top + bottom - DH*(KH-1) - 1) // SH + 1``, likewise ``OW``.

    Design. Input rows land in a ring of ``buffer_rows`` rows in one
    :class:`~amaranth.lib.memory.Memory` (``buffer_rows * W * C/simd`` words of ``simd``
    elements); the write address simply counts on around the ring, across frames. A writer
    and a reader run side by side, each one beat per cycle:

    - the writer starts an input row only while the ring has a free row: one that no output
      pixel still to come reads (a credit counter, given back as the reader moves past rows);
    - the reader issues the next patch beat only once every input pixel the current output
      pixel reads has been written (it compares the pixels written with the raster index of
      the pixel's last real input), and reads it synchronously; padding is a constant.

    ``buffer_rows = max(S + SH, H - L + F) + E`` with ``S = DH*(KH-1) + 1`` the dilated kernel
    height, ``L = max(0, (OH-1)*SH - top)`` the first row the last output row reads,
    ``F = S - top`` the rows the first output row reads, and ``E = 1`` if an output row takes
    fewer beats than the ``SH`` input rows it advances by (``OW*KH*KW < SH*W``), else 0.
    The first term lets the writer fill the next output row's rows while the current one is
    read; the second lets it write the tail of one frame and the head of the next while the
    last output row is read, so that frames flow back to back. ``E`` covers geometries whose
    rows outrun the reader locally (a stride past the kernel). The formula was checked against
    a beat-level model of the two counters on 14,000 random geometries (H, W up to 12,
    kernels up to 4, strides up to 5, dilations up to 3, every legal padding), all at
    ``cycles_per_frame``. It is not minimal: on 376 such geometries it gave about one row
    more than the least ring that keeps that pace.

    Parameters
    ----------
    in_shape : tuple of int
        ``(H, W, C)``.
    kernel, stride, dilation : tuple of int
        ``(KH, KW)``, ``(SH, SW)``, ``(DH, DW)``.
    padding : tuple of int
        ``(top, left, bottom, right)``; each smaller than the dilated kernel extent along its
        axis (``DH*(KH-1) + 1`` or ``DW*(KW-1) + 1``), so every patch holds an image pixel.
    dtype : DataType
        Type of the elements.
    pad_value : int
        The element that stands for zero outside the image (the input's zero point); must be a
        ``dtype`` value where there is padding.
    simd : int
        Elements per beat in and out; must divide ``C``.
    needed_register : bool
        Keep the count of image pixels the next patch needs in a register, set as the patch moves, instead of
        summing it from the patch's corner on the way to the reader's every counter: a shorter path for a
        faster clock, at a few LUTs per bit of the count (measured on three windows: about 5 on the iCE40, 1
        on the ECP5). Where a patch takes two beats or more (:attr:`precomputed_moves`), the counts of the next
        patch along the row and of the next row's first patch are registers as well, so the register's next value
        is a choice among registers and no sum lies between the corner and the count. The reader issues on the
        count's compares registered a cycle ahead (:attr:`latency` 3), the rows it frees go back to the writer's
        credit a cycle later, from a register, and a register knows the frame's last beat: the digits CNN's second
        window on the UP5K had 21-23 ns from the count through the compare and the issue, and from the issue
        through the reader's counters, into the credit and the written count.
    address_register : bool
        Read the ring at an address held in a register, moved with the reader's counters (each move from the
        address before or a corner's, plus a constant), with its padding flag, instead of summed from the
        counters on the way into the read: where the ring is a LUT RAM read without a register before it, two
        carry chains and the read are one path (the digits CNN's pool window on the ECP5-85F, 10.1 ns).
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(simd * dtype.bitwidth)))
        The image, element ``j`` of a beat at bit ``j * dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(simd * dtype.bitwidth)))
        The patches, packed likewise.

    Attributes
    ----------
    in_elems, out_elems : int
        ``simd``.
    in_width, out_width : int
        ``dtype.bitwidth``.
    out_shape : tuple of int
        ``(OH, OW, KH*KW*C)``.
    in_count, out_count : int
        Elements per frame: ``H*W*C`` and ``OH*OW*KH*KW*C``.
    buffer_rows : int
        Image rows the ring holds (see above).
    cycles_per_frame : int
        ``max(in_count, out_count) // simd``: with the input always valid and the output
        always ready, frames after the first leave one every that many cycles.
    latency : int
        2 (3 with ``needed_register``): cycles from the cycle that accepts the last input beat an output pixel
        needs (when the reader waits for it) to the cycle in which that pixel's first beat is valid.
    precomputed_moves : bool
        With ``needed_register``, whether the counts the corner's next moves set are summed a cycle ahead, in
        registers: where a patch takes two beats or more (``KH*KW*C/simd >= 2``), so the corner never moves two
        cycles running.
    """

    def __init__(self, *, in_shape: tuple[int, int, int], kernel: tuple[int, int],
                 stride: tuple[int, int] = (1, 1),
                 padding: tuple[int, int, int, int] = (0, 0, 0, 0),
                 dilation: tuple[int, int] = (1, 1), dtype: DataType, pad_value: int = 0,
                 simd: int, needed_register: bool = False, address_register: bool = False, name: str = "swg"):
        self.needed_register, self.address_register = bool(needed_register), bool(address_register)
        self.name = name
        h, w, c = _positive_ints(name, "in_shape", in_shape, 3)
        kh, kw = _positive_ints(name, "kernel", kernel, 2)
        sh, sw = _positive_ints(name, "stride", stride, 2)
        dh, dw = _positive_ints(name, "dilation", dilation, 2)
        top, left, bottom, right = _positive_ints(name, "padding", padding, 4, minimum=0)
        extent_h, extent_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
        for side, pad, extent in (("top", top, extent_h), ("bottom", bottom, extent_h),
                                  ("left", left, extent_w), ("right", right, extent_w)):
            if pad >= extent:
                raise ValueError(f"node {name!r}: {side} padding must be smaller than the "
                                 f"dilated kernel extent {extent}, not {pad}")
        oh = _output_size(h, top, bottom, kh, sh, dh)
        ow = _output_size(w, left, right, kw, sw, dw)
        if oh < 1 or ow < 1:
            raise ValueError(f"node {name!r}: the dilated kernel {extent_h}x{extent_w} does not "
                             f"fit the padded image {h + top + bottom}x{w + left + right}")
        check_channel_fold(name, "channels", simd, c)
        if any(padding) and not dtype.contains(pad_value):
            raise ValueError(f"node {name!r}: pad_value must be a {dtype} value, not "
                             f"{pad_value!r}")

        self._h, self._w, self._c = h, w, c
        self._kh, self._kw, self._sh, self._sw, self._dh, self._dw = kh, kw, sh, sw, dh, dw
        self._top, self._left = top, left
        self._oh, self._ow = oh, ow
        self._dtype = dtype
        self._pad_value = int(pad_value) if any(padding) else 0
        self._simd = simd
        self._cf = c // simd
        self.precomputed_moves = self.needed_register and kh * kw * self._cf >= 2

        last_row_first = max(0, (oh - 1) * sh - top)
        first_row_rows = extent_h - top
        writer_slower = 1 if ow * kh * kw < sh * w else 0
        self.buffer_rows = max(extent_h + sh, h - last_row_first + first_row_rows) + writer_slower
        self._last_row_first = last_row_first

        self.in_elems = self.out_elems = simd
        self.in_width = self.out_width = dtype.bitwidth
        self.out_shape = (oh, ow, kh * kw * c)
        self.in_count = h * w * c
        self.out_count = oh * ow * kh * kw * c
        self.cycles_per_frame = max(self.in_count, self.out_count) // simd
        self.latency = 3 if self.needed_register else 2
        super().__init__({
            "i": In(stream.Signature(unsigned(simd * self.in_width))),
            "o": Out(stream.Signature(unsigned(simd * self.out_width))),
        })

    @property
    def in_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)``: the image the ring buffers rows of."""
        return self._h, self._w, self._c

    @property
    def kernel(self) -> tuple[int, int]:
        """``(KH, KW)``: the patch's rows and columns of pixels."""
        return self._kh, self._kw

    @property
    def stride(self) -> tuple[int, int]:
        """``(SH, SW)``: the pixels a patch moves by along each axis."""
        return self._sh, self._sw

    @property
    def dilation(self) -> tuple[int, int]:
        """``(DH, DW)``: the pixels between taps of a patch along each axis."""
        return self._dh, self._dw

    @property
    def padding_before(self) -> tuple[int, int]:
        """``(top, left)``: the padding rows and columns before the image, where patches start."""
        return self._top, self._left

    def elaborate(self, platform):
        """The ring, its writer, the reader's loop nest and the output register. One long function: the
        writer and the reader share the ring's credit and fill counts, and the reader's counters all
        move in the one ``If`` chain that walks a patch; apart they would pass a dozen signals around."""
        m = Module()
        h, w, cf = self._h, self._w, self._cf
        kh, kw, sh, sw, dh, dw = self._kh, self._kw, self._sh, self._sw, self._dh, self._dw
        top, left = self._top, self._left
        row_beats = w * cf
        ring = self.buffer_rows * row_beats
        extent_h, extent_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1

        m.submodules.ring = ring_mem = Memory(shape=unsigned(self._simd * self.in_width),
                                              depth=ring, init=[])
        write = ring_mem.write_port()
        read = ring_mem.read_port(domain="sync")

        def ring_add(value, step):
            """``(value + step) mod ring`` for ``value`` in the ring and a constant ``step``."""
            total = value + (step % ring)
            return Mux(total >= ring, total - ring, total)

        # Rows the writer may still start, and image pixels written since the reader's frame
        # began: past the frame's end when the writer is a frame ahead, below zero when the
        # reader has finished a frame whose last rows no patch reads before they arrive.
        credit = Signal(range(self.buffer_rows + h + sh + 1), init=self.buffer_rows)
        written = Signal(range(-h * w, (h + self.buffer_rows) * w + 1))

        # Writer.
        w_cf = Signal(range(cf))
        w_col = Signal(range(w))
        w_addr = Signal(range(ring))
        row_start = Signal()
        take = Signal()
        m.d.comb += [
            row_start.eq((w_cf == 0) & (w_col == 0)),
            self.i.ready.eq(~row_start | (credit != 0)),
            take.eq(self.i.valid & self.i.ready),
            write.addr.eq(w_addr),
            write.data.eq(self.i.payload),
            write.en.eq(take),
        ]
        pixel_written = Signal()
        m.d.comb += pixel_written.eq(take & (w_cf == cf - 1))
        with m.If(take):
            m.d.sync += w_addr.eq(Mux(w_addr == ring - 1, 0, w_addr + 1))
            with m.If(w_cf == cf - 1):
                m.d.sync += [w_cf.eq(0), w_col.eq(Mux(w_col == w - 1, 0, w_col + 1))]
            with m.Else():
                m.d.sync += w_cf.eq(w_cf + 1)

        # Reader: loop counters, and where they point. r, c: image row and column of the beat;
        # r0, c0: the patch's top-left corner; addresses are ring beat addresses.
        # r, c, r0, c0 are signed even without padding: no comparison with 0 is constant.
        # Signed even without padding, so that comparisons with 0 are not constant.
        cf_n = Signal(range(cf))
        kw_n = Signal(range(kw))
        kh_n = Signal(range(kh))
        ow_n = Signal(range(self._ow))
        oh_n = Signal(range(self._oh))
        r0 = Signal(range(-top - 1, h + 1), init=-top)
        r = Signal(range(-top - 1, h + extent_h), init=-top)
        c0 = Signal(range(-left - 1, w + 1), init=-left)
        c = Signal(range(-left - 1, w + extent_w), init=-left)
        r0_pixels = Signal(range(-top * w, (h + 1) * w + 1), init=-top * w)
        base_addr = Signal(range(ring))
        top_addr = Signal(range(ring), init=(-top * row_beats) % ring)
        row_addr = Signal(range(ring), init=(-top * row_beats) % ring)
        col_beat = Signal(range(-left * cf, (w + extent_w) * cf), init=-left * cf)
        c0_beat = Signal(range(-left * cf, (w + 1) * cf), init=-left * cf)

        # The raster index + 1 of the last image pixel the current output pixel reads. With needed_register
        # it is a register, set as the patch's corner moves, so that the compare the reader issues on does not
        # wait on the sums that give it (on the UP5K those held the digits CNN below 26 MHz).
        def needed_of(r0, c0, r0_pixels):
            last_row, last_col = r0 + (extent_h - 1), c0 + (extent_w - 1)
            return (Mux(last_row >= h - 1, (h - 1) * w, r0_pixels + (extent_h - 1) * w)
                    + Mux(last_col >= w - 1, w - 1, last_col) + 1)

        def needed_ahead(down: int, right: int):
            """needed_of the corner ``down`` rows and ``right`` columns past the current one (``right`` None: the
            row's first column), with each clamp comparing the corner's own register with a constant beside the
            sum it selects, not after it: two carry chains deep where needed_of is four."""
            row_part = Mux(r0 >= h - extent_h - down, (h - 1) * w, r0_pixels + (down + extent_h - 1) * w)
            if right is None:
                return row_part + (min(extent_w - left, w))
            return row_part + Mux(c0 >= w - extent_w - right, w, c0 + (right + extent_w))

        first_row, first_col = extent_h - 1 - top, extent_w - 1 - left
        # needed_of(-top, -left, -top * w): the first patch of a frame.
        needed_first = ((h - 1) * w if first_row >= h - 1 else (extent_h - 1 - top) * w) + min(first_col, w - 1) + 1
        if self.needed_register:
            needed = Signal(needed_range(h, w, top, left), init=needed_first)
        else:
            needed = needed_of(r0, c0, r0_pixels)
        # Where a patch takes two beats or more, the counts of the next patch along the row and of the next row's
        # first are registers too, summed each cycle from the corner as it stands: the corner moved at least a
        # cycle before the reader moves it again, and needed's next value is a choice of registers.
        if self.precomputed_moves:
            next_col = Signal.like(needed, name="needed_next_col")
            next_row = Signal.like(needed, name="needed_next_row")
            m.d.sync += [next_col.eq(needed_ahead(0, sw)), next_row.eq(needed_ahead(sh, None))]
        else:
            next_col = needed_of(r0, c0 + sw, r0_pixels)
            next_row = needed_of(r0 + sh, -left, r0_pixels + sh * w)

        # Which of the registered compares below the reader reads next: the corner's move, 0 where it stays.
        moved = Signal(range(4))

        def set_needed(value, move: int) -> list:
            return [needed.eq(value), moved.eq(move)] if self.needed_register else []

        advance = Signal()
        issue = Signal()

        def outside(row, down: int, col, right: int):
            """Whether the beat ``down`` rows and ``right`` columns past (``row``, ``col``) is padding, each
            bound compared with the register itself."""
            return (row < -down) | (row >= h - down) | (col < -right) | (col >= w - right)

        # The ring address of the beat the reader points at, unwrapped (row_addr + col_beat + cf_n), and whether
        # it is padding. With address_register both are registers, set as the counters move, each move's address
        # the one before plus a constant or a corner's register plus one: no adder lies between the counters and
        # the ring's read (the digits CNN's pool window on the ECP5-85F took 10.1 ns through two carry chains
        # into a LUT RAM's read, 2026-11-28).
        # The frame's first beat is padding where the image is padded above or to the left.
        first_pad = top > 0 or left > 0
        if self.address_register:
            first_address = (-top * row_beats) % ring - left * cf
            span = range(min(first_address, -left * cf), ring + (w + extent_w + 1) * cf)
            address = Signal(span, init=first_address)
            row_corner = Signal(span, init=first_address, name="row_corner_address")
            top_corner = Signal(span, init=first_address, name="top_corner_address")
            pad = Signal(init=first_pad)
        else:
            address, pad = row_addr + col_beat + cf_n, Signal()
            m.d.comb += pad.eq(outside(r, 0, c, 0))

        def move_address(value, *, row_move=None, top_move=None, pad_value=None) -> list:
            """The address and padding registers' moves with the counters' (none without address_register)."""
            if not self.address_register:
                return []
            moves = [address.eq(value), pad.eq(pad_value)]
            moves += [] if row_move is None else [row_corner.eq(row_move)]
            return moves + ([] if top_move is None else [top_corner.eq(top_move)])

        def wrapped(corner, register, step: int):
            """``corner`` moved as ``ring_add(register, step)`` moves ``register``: ``step`` on, less the ring
            where ``register`` wraps."""
            step %= ring
            return Mux(register >= ring - step, corner + (step - ring), corner + step)
        # With needed_register the reader issues on compares registered a cycle before, one per move the corner can
        # make then (none, along the row, to the next row, to the frame's first patch), so that no carry chain lies
        # between the counts and the reader's counters (22.9 ns on the UP5K). The written count they read is a
        # cycle old, never more than now (the frame's end takes its pixels off in the compare too): a pixel
        # arrives a cycle later to the reader, never too early.
        if self.needed_register:
            reached = [Signal(name=f"reached_{what}") for what in ("here", "col", "row", "first")]
            m.d.sync += [reached[0].eq(written >= needed), reached[1].eq(written >= next_col),
                         reached[2].eq(written >= next_row), reached[3].eq(written - h * w >= needed_first),
                         moved.eq(0)]
            enough = Array(reached)[moved]
        else:
            enough = written >= needed
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            issue.eq(advance & enough),
            # A padding beat's word is replaced below, so with the address a register the ring reads it as it
            # stands, out of the ring or not, without a LUT level between the register and the read.
            read.addr.eq(address if self.address_register else Mux(pad, 0, address)),
            read.en.eq(advance),
        ]

        # The reader frees the rows before the next output row's first row as it moves on.
        freed = Signal(range(h + sh + 1))
        frame_done = Signal()
        with m.If(issue):
            with m.If(cf_n != cf - 1):
                m.d.sync += [cf_n.eq(cf_n + 1), *move_address(address + 1, pad_value=pad)]
            with m.Elif(kw_n != kw - 1):
                m.d.sync += [cf_n.eq(0), kw_n.eq(kw_n + 1), c.eq(c + dw),
                             col_beat.eq(col_beat + dw * cf),
                             *move_address(address + (dw * cf - cf + 1), pad_value=outside(r, 0, c, dw))]
            with m.Elif(kh_n != kh - 1):
                below = wrapped(row_corner, row_addr, dh * row_beats) if self.address_register else None
                m.d.sync += [cf_n.eq(0), kw_n.eq(0), kh_n.eq(kh_n + 1), r.eq(r + dh),
                             row_addr.eq(ring_add(row_addr, dh * row_beats)),
                             c.eq(c0), col_beat.eq(c0_beat),
                             *move_address(below, row_move=below, pad_value=outside(r, dh, c0, 0))]
            with m.Elif(ow_n != self._ow - 1):
                along = top_corner + sw * cf if self.address_register else None
                m.d.sync += [cf_n.eq(0), kw_n.eq(0), kh_n.eq(0), ow_n.eq(ow_n + 1),
                             r.eq(r0), row_addr.eq(top_addr), *set_needed(next_col, 1),
                             c0.eq(c0 + sw), c.eq(c0 + sw),
                             c0_beat.eq(c0_beat + sw * cf), col_beat.eq(c0_beat + sw * cf),
                             *move_address(along, row_move=along, top_move=along, pad_value=outside(r0, 0, c0, sw))]
            with m.Else():
                m.d.sync += [cf_n.eq(0), kw_n.eq(0), kh_n.eq(0), ow_n.eq(0),
                             c0.eq(-left), c.eq(-left),
                             c0_beat.eq(-left * cf), col_beat.eq(-left * cf)]
                with m.If(oh_n != self._oh - 1):
                    next_top = ring_add(top_addr, sh * row_beats)
                    start = wrapped(top_addr - left * cf, top_addr, sh * row_beats) if self.address_register else None
                    m.d.sync += [oh_n.eq(oh_n + 1), r0.eq(r0 + sh), r.eq(r0 + sh),
                                 r0_pixels.eq(r0_pixels + sh * w),
                                 *set_needed(next_row, 2),
                                 top_addr.eq(next_top), row_addr.eq(next_top),
                                 *move_address(start, row_move=start, top_move=start,
                                               pad_value=(r0 < -sh) | (r0 >= h - sh) | (left > 0))]
                    m.d.comb += freed.eq(Mux(r0 + sh <= 0, 0, Mux(r0 < 0, r0 + sh, sh)))
                with m.Else():
                    frame_step = h * row_beats - top * row_beats
                    next_top = ring_add(base_addr, frame_step)
                    start = wrapped(base_addr - left * cf, base_addr, frame_step) if self.address_register else None
                    m.d.sync += [oh_n.eq(0), r0.eq(-top), r.eq(-top), r0_pixels.eq(-top * w),
                                 *set_needed(needed_first, 3),
                                 base_addr.eq(ring_add(base_addr, h * row_beats)),
                                 top_addr.eq(next_top), row_addr.eq(next_top),
                                 *move_address(start, row_move=start, top_move=start,
                                               pad_value=first_pad)]
                    m.d.comb += [freed.eq(h - self._last_row_first), frame_done.eq(1)]

        if self.needed_register:
            freed_later = Signal.like(freed, name="freed_later")
            m.d.sync += freed_later.eq(freed)
            freed = freed_later
            # The frame's last beat known from a register, set as the beat before it issues, not decoded from the
            # reader's five counters on the way from the issue into the written count's adder.
            beats = self.out_count // self._simd
            if beats > 1:
                beat = Signal(range(beats), name="frame_beat")
                last_beat = Signal(name="frame_last_beat")
                with m.If(issue):
                    m.d.sync += [beat.eq(Mux(last_beat, 0, beat + 1)), last_beat.eq(beat == beats - 2)]
                frame_done = issue & last_beat
        m.d.sync += [
            credit.eq(credit - (take & row_start) + freed),
            written.eq(written + pixel_written - Mux(frame_done, h * w, 0)),
        ]

        # Output register: the ring's read register, or the padding word.
        pad_q = Signal()
        with m.If(advance):
            m.d.sync += [self.o.valid.eq(issue), pad_q.eq(pad)]
        pad_bits = int(self._dtype.to_hw(np.array([self._pad_value]))[0])
        pad_word = Const(sum(pad_bits << (j * self.in_width) for j in range(self._simd)),
                         unsigned(self._simd * self.in_width))
        m.d.comb += self.o.payload.eq(Mux(pad_q, pad_word, read.data))
        return m


def needed_range(h: int, w: int, top: int, left: int) -> range:
    """The values :class:`SlidingWindow`'s count of pixels a patch needs takes (its register's range)."""
    return range(-(top + 1) * w - left - 2, (h + 1) * w + 2)


class WindowReduce(wiring.Component):
    """Reduces each window of a patch stream to one value per channel: max or sum pooling.

    Input: ``vectors`` patches per frame, each ``window`` groups of ``channels`` elements in
    ``(k, c)`` order (what :class:`SlidingWindow` emits with ``KH*KW = window``), ``simd``
    per beat. Output: per patch, ``channels`` maxima or sums in channel order, ``simd`` per
    beat. A global pool over an ``H x W`` image is ``window = H*W`` and ``vectors = 1``, fed
    straight from a layer's raster-order output.

    One running value per channel sits in registers that rotate by one group per beat (the
    head holds the group the next beat brings); the beat that brings a window's last
    group for some channels also writes their results to the output register. The stage
    stalls as a whole while its output beat is not taken (``i.ready = ~o.valid | o.ready``).

    Parameters
    ----------
    channels, window, vectors : int
        Channels, groups per window, windows per frame.
    mode : str
        ``"max"`` or ``"sum"``.
    in_dtype, out_dtype : DataType
        Element types. ``out_dtype`` must hold every result: ``in_dtype``'s range for max,
        ``window`` times it for sum (not ``BIPOLAR``).
    simd : int
        Elements per beat in and out; must divide ``channels``.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(simd * in_dtype.bitwidth)))
        Patches, element ``j`` of a beat at bit ``j * in_dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(simd * out_dtype.bitwidth)))
        Results, packed likewise.

    Attributes
    ----------
    in_elems, out_elems : int
        ``simd``.
    in_width, out_width : int
        Bits per element on each side.
    cycles_per_frame : int
        ``vectors * window * channels // simd``: one input beat per cycle.
    latency : int
        1: the result of the beat accepted in one cycle is valid in the next.
    """

    MODES = ("max", "sum")

    def __init__(self, *, channels: int, window: int, mode: str, in_dtype: DataType,
                 out_dtype: DataType, simd: int, vectors: int, name: str = "pool"):
        self.name = name
        for what, value in (("channels", channels), ("window", window), ("vectors", vectors)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"node {name!r}: {what} must be an integer >= 1, not {value!r}")
        if mode not in self.MODES:
            raise ValueError(f"node {name!r}: mode must be one of {', '.join(self.MODES)}, "
                             f"not {mode!r}")
        check_channel_fold(name, "channels", simd, channels)
        if mode == "max":
            lo, hi = in_dtype.min, in_dtype.max
            if out_dtype.bipolar != in_dtype.bipolar or not (out_dtype.min <= lo
                                                             and hi <= out_dtype.max):
                raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the maxima "
                                 f"of {in_dtype} values")
        else:
            lo, hi = window * in_dtype.min, window * in_dtype.max
            if out_dtype.bipolar or not (out_dtype.min <= lo and hi <= out_dtype.max):
                raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the sums "
                                 f"of {window} {in_dtype} values, [{lo}, {hi}]")
        self._channels, self._window, self._vectors = channels, window, vectors
        self._mode = mode
        self._in_dtype, self._out_dtype = in_dtype, out_dtype
        self._simd = simd
        if mode == "max" and in_dtype.bitwidth <= 2:
            # Stored codes order as their values do (a bipolar 1 is +1, a 0 is -1): a max of one- or
            # two-bit codes compares and keeps the codes themselves. Wider ones keep a signed value
            # a bit wider than an unsigned code: with that register bit Yosys puts the compare on the
            # ECP5's carry chain (a UINT3 pool of 16 channels, 4 lanes: 43 LUTs and 68 flip-flops,
            # against 63 and 52 on codes).
            self._value_shape = signed(in_dtype.bitwidth) if in_dtype.signed else unsigned(in_dtype.bitwidth)
        else:
            self._value_shape = signed(max((-lo - 1).bit_length(), hi.bit_length()) + 1)

        self.in_elems = self.out_elems = simd
        self.in_width = in_dtype.bitwidth
        self.out_width = out_dtype.bitwidth
        self.cycles_per_frame = vectors * window * channels // simd
        self.latency = 1
        super().__init__({
            "i": In(stream.Signature(unsigned(simd * self.in_width))),
            "o": Out(stream.Signature(unsigned(simd * self.out_width))),
        })

    @property
    def channels(self) -> int:
        """Channels of a window, each with a running value in registers."""
        return self._channels

    @property
    def window(self) -> int:
        """Groups of ``channels`` elements a running value takes in before its result leaves."""
        return self._window

    @property
    def vectors(self) -> int:
        """Windows per frame."""
        return self._vectors

    @property
    def value_shape(self) -> Shape:
        """Shape of one running value's register."""
        return self._value_shape

    def _value(self, bits):
        """One stored input element as the running values hold it: its code for a max, its true
        value for a sum."""
        if self._in_dtype.bipolar and self._mode == "sum":
            return Mux(bits[0], Const(1, self._value_shape), Const(-1, self._value_shape))
        return bits.as_signed() if self._in_dtype.signed else bits

    def _encode(self, value):
        """One output element's stored bits for a running value (a bipolar one is a max's code)."""
        if self._out_dtype.bipolar:
            return value[0]
        # Extend by the value's own sign: the running value may be narrower than the output element.
        width = value.shape().width
        if width >= self.out_width:
            return value[:self.out_width]
        fill = value[-1] if value.shape().signed else Const(0, 1)
        return Cat(value, fill.replicate(self.out_width - width))

    def elaborate(self, platform):
        m = Module()
        simd, iw = self._simd, self.in_width
        groups = self._channels // simd

        # One count of beats over a window: its first and last groups are ranges of the count.
        # Counting groups and windows apart costs an enable for the second counter, an AND of the
        # handshake with the first counter's wrap, which ABC maps to a LUT7 of mostly constant
        # LUT4s on the ECP5 (CNV-w1a1's second pool: 24 LUTs, 17 with one count).
        beats = groups * self._window
        beat = Signal(range(beats))
        first = beat < groups
        last = beat >= beats - groups
        # The groups arrive in turn, so the running values rotate through registers as they do:
        # the head holds the values of the group the next beat brings, and no multiplexer over
        # the groups reads or decodes a write.
        running = [[Signal(self._value_shape, name=f"running_{g}_{j}") for j in range(simd)]
                   for g in range(groups)]
        advance = Signal()
        take = Signal()
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(advance),
            take.eq(self.i.valid & advance),
        ]

        results = []
        for j in range(simd):
            x = self._value(self.i.payload[j * iw:(j + 1) * iw])
            before = running[0][j]
            # before > x as the sign of a subtraction one bit wider than the values: Yosys maps a
            # compare of narrow values to LUT logic on the ECP5, a subtraction to its carry chain.
            combined = Mux((x - before)[-1], before, x) if self._mode == "max" else before + x
            result = Signal(self._value_shape, name=f"result_{j}")
            m.d.comb += result.eq(Mux(first, x, combined))
            results.append(result)
            with m.If(take):
                m.d.sync += [running[g][j].eq(running[g + 1][j]) for g in range(groups - 1)]
                m.d.sync += running[groups - 1][j].eq(result)

        with m.If(advance):
            m.d.sync += self.o.valid.eq(take & last)
        with m.If(take):
            m.d.sync += [self.o.payload.eq(Cat(*(self._encode(v) for v in results))),
                         beat.eq(Mux(beat == beats - 1, 0, beat + 1))]
        return m
