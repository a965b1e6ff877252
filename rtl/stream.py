"""Stream plumbing between kernels: a FIFO and an element-order-preserving width converter.

Every stream here is an :class:`amaranth.lib.stream.Signature` with a plain ``unsigned(N)``
payload (struct payloads trip Yosys' ABC9 mapping, Yosys issue 4349). A payload carries
``elems`` elements of ``elem_width`` bits each, element ``j`` at bits ``[j*w, (j+1)*w)``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFIFO", "WidthConverter"]


class StreamFIFO(wiring.Component):
    """A first-in first-out queue between two streams.

    Shallow queues (``depth < BRAM_MIN_DEPTH``) keep their beats in registers read
    combinationally (:class:`SyncFIFO`): they pass one beat per cycle from depth 2 on.
    Deeper ones use :class:`SyncFIFOBuffered`, whose storage is read synchronously and so
    can become block RAM; at depth 2 that one would pass a beat only every other cycle.

    Parameters
    ----------
    width : int
        Payload width in bits.
    depth : int
        Number of beats it holds, at least 1. Depth 1 passes a beat every other cycle.

    Members
    -------
    i : In(stream.Signature(unsigned(width)))
        Beats to store.
    o : Out(stream.Signature(unsigned(width)))
        Beats in the order they arrived.
    """

    BRAM_MIN_DEPTH = 16

    def __init__(self, *, width: int, depth: int):
        if width < 1:
            raise ValueError(f"FIFO width must be at least 1, not {width!r}")
        if depth < 1:
            raise ValueError(f"FIFO depth must be at least 1, not {depth!r}")
        self._width = width
        self._depth = depth
        super().__init__({
            "i": In(stream.Signature(unsigned(width))),
            "o": Out(stream.Signature(unsigned(width))),
        })

    @property
    def depth(self) -> int:
        return self._depth

    def elaborate(self, platform):
        m = Module()
        if self._depth < self.BRAM_MIN_DEPTH:
            queue = SyncFIFO(width=self._width, depth=self._depth)
        else:
            queue = SyncFIFOBuffered(width=self._width, depth=self._depth)
        m.submodules.queue = queue
        m.d.comb += [
            queue.w_data.eq(self.i.payload),
            queue.w_en.eq(self.i.valid),
            self.i.ready.eq(queue.w_rdy),
            self.o.payload.eq(queue.r_data),
            self.o.valid.eq(queue.r_rdy),
            queue.r_en.eq(self.o.ready),
        ]
        return m


class WidthConverter(wiring.Component):
    """Re-packs a stream of ``in_elems`` elements per beat into beats of ``out_elems`` elements.

    Element order is kept; any pair of counts works (4 -> 6 as well as 6 -> 4). The elements
    wait in a shift buffer of ``in_elems + out_elems - 1`` slots: an output beat leaves from
    the front, an input beat lands right behind what stays. That is the smallest buffer with
    which one beat per cycle flows on the slower side whenever the other side keeps up.
    ``i.ready`` looks at ``o.ready`` in the same cycle, so the buffer may take a beat while
    handing one out; ``o.valid`` depends on registers only.

    Parameters
    ----------
    elem_width : int
        Bits per element.
    in_elems, out_elems : int
        Elements per input beat and per output beat.

    Members
    -------
    i : In(stream.Signature(unsigned(in_elems * elem_width)))
        Input beats.
    o : Out(stream.Signature(unsigned(out_elems * elem_width)))
        Output beats.
    """

    def __init__(self, *, elem_width: int, in_elems: int, out_elems: int):
        for what, value in (("elem_width", elem_width), ("in_elems", in_elems), ("out_elems", out_elems)):
            if value < 1:
                raise ValueError(f"{what} must be at least 1, not {value!r}")
        self.elem_width = elem_width
        self.in_elems = in_elems
        self.out_elems = out_elems
        self.in_width = elem_width
        self.out_width = elem_width
        self.capacity = in_elems + out_elems - 1
        super().__init__({
            "i": In(stream.Signature(unsigned(in_elems * elem_width))),
            "o": Out(stream.Signature(unsigned(out_elems * elem_width))),
        })

    def elaborate(self, platform):
        m = Module()
        w, n_in, n_out, cap = self.elem_width, self.in_elems, self.out_elems, self.capacity

        slots = [Signal(w, name=f"slot{p}") for p in range(cap)]
        count = Signal(range(cap + 1))
        take_out = Signal()
        take_in = Signal()
        kept = Signal(range(cap + 1))

        m.d.comb += [
            self.o.valid.eq(count >= n_out),
            self.o.payload.eq(Cat(*(slots[p] for p in range(n_out)))),
            take_out.eq(self.o.valid & self.o.ready),
            kept.eq(count - Mux(take_out, n_out, 0)),
            self.i.ready.eq(kept + n_in <= cap),
            take_in.eq(self.i.valid & self.i.ready),
        ]
        m.d.sync += count.eq(kept + Mux(take_in, n_in, 0))

        # Input element k lands in slot kept + k. One shifter per bit of an element moves the
        # whole beat into place, and a shifted mask marks the slots it covers: a comparison and
        # a multiplexer per slot and input element would grow as cap * n_in.
        # Signals, not expressions: Amaranth would build a shifter for every use of an expression.
        planes = [Signal(n_in + cap, name=f"landed_bit{b}") for b in range(w)]
        landing = Signal(n_in + cap)
        m.d.comb += [plane.eq(Cat(self.i.payload[k * w + b] for k in range(n_in)) << kept)
                     for b, plane in enumerate(planes)]
        m.d.comb += landing.eq(Const((1 << n_in) - 1, n_in) << kept)
        for p in range(cap):
            shifted = slots[p + n_out] if p + n_out < cap else slots[p]
            arriving = Cat(plane[p] for plane in planes)
            m.d.sync += slots[p].eq(Mux(take_in & landing[p], arriving, Mux(take_out, shifted, slots[p])))
        return m

