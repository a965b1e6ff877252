"""Stream plumbing between kernels: a FIFO and an element-order-preserving width converter.

Every stream here is an :class:`amaranth.lib.stream.Signature` with a plain ``unsigned(N)``
payload (struct payloads trip Yosys' ABC9 mapping, Yosys issue 4349). A payload carries
``elems`` elements of ``elem_width`` bits each, element ``j`` at bits ``[j*w, (j+1)*w)``.
"""

from __future__ import annotations

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["COUNTS_PER_SIDE_MIN_WIDTH", "StreamFIFO", "WidthConverter", "conversion_structure", "counts_per_side",
           "reads_buffered"]


class StreamFIFO(wiring.Component):
    """A first-in first-out queue between two streams.

    Shallow queues (``depth < BRAM_MIN_DEPTH``, or any depth not ``buffered``) keep their beats in a memory read
    combinationally (LUT RAM or registers): they pass one beat per cycle from depth 2 on. Their ready and valid are
    registers. A narrow one counts its beats once, as Amaranth's :class:`SyncFIFO` does; in a wide one the
    write side and the read side each keep a count, and each side's ready or valid is loaded from its own
    (:func:`counts_per_side`). Deeper queues use :class:`SyncFIFOBuffered`, whose storage is read
    synchronously and so can become block RAM; at depth 2 that one would pass a beat only every
    other cycle.

    Parameters
    ----------
    width : int
        Payload width in bits.
    depth : int
        Number of beats it holds, at least 1. Depth 1 passes a beat every other cycle.
    two_counts : bool or None
        Whether a shallow queue counts its beats on each side; ``None``: as :func:`counts_per_side`
        says for its width.
    buffered : bool or None
        Whether the storage is read through a register (:class:`SyncFIFOBuffered`, which can be block RAM, two
        cycles into an empty queue); ``None``: from depth :attr:`BRAM_MIN_DEPTH` on.

    Members
    -------
    i : In(stream.Signature(unsigned(width)))
        Beats to store.
    o : Out(stream.Signature(unsigned(width)))
        Beats in the order they arrived.
    """

    BRAM_MIN_DEPTH = 16

    def __init__(self, *, width: int, depth: int, two_counts: bool | None = None, buffered: bool | None = None):
        if width < 1:
            raise ValueError(f"FIFO width must be at least 1, not {width!r}")
        if depth < 1:
            raise ValueError(f"FIFO depth must be at least 1, not {depth!r}")
        self._width = width
        self._depth = depth
        self._two_counts = counts_per_side(width) if two_counts is None else two_counts
        self._buffered = reads_buffered(depth, buffered)
        super().__init__({
            "i": In(stream.Signature(unsigned(width))),
            "o": Out(stream.Signature(unsigned(width))),
        })

    @property
    def width(self) -> int:
        """Bits of one queued beat."""
        return self._width

    @property
    def depth(self) -> int:
        """Beats the queue holds."""
        return self._depth

    @property
    def buffered(self) -> bool:
        """Whether the storage is read through a register."""
        return self._buffered

    @property
    def latency(self) -> int:
        """Cycles from the cycle a beat is taken to the first in which it is offered, into an empty queue: one
        through registers, two through the buffered queue's storage and its output register."""
        return 2 if self._buffered else 1

    def elaborate(self, platform):
        m = Module()
        if not self._buffered:
            self._shallow_queue(m)
            return m
        m.submodules.queue = queue = SyncFIFOBuffered(width=self._width, depth=self._depth)
        m.d.comb += [
            queue.w_data.eq(self.i.payload),
            queue.w_en.eq(self.i.valid),
            self.i.ready.eq(queue.w_rdy),
            self.o.payload.eq(queue.r_data),
            self.o.valid.eq(queue.r_rdy),
            queue.r_en.eq(self.o.ready),
        ]
        return m

    def _shallow_queue(self, m) -> None:
        """Storage read combinationally, a pointer per side, and one count of the beats queued, or one per side:
        both take both sides' moves, so they are always equal. Ready and valid are registers, loaded from their
        side's count's next value: the other side's move reaches them through one route, and each side's logic
        reads a flip-flop it can sit beside (the digits MLP on half an ECP5-85F took 8.8 ns from an MVAU's output
        queue's count through its valid and the width converter after it into the unit's credits)."""
        depth = self._depth
        m.submodules.storage = storage = Memory(shape=unsigned(self._width), depth=depth, init=[])
        write, read = storage.write_port(), storage.read_port(domain="comb")
        produce, consume = Signal(range(depth)), Signal(range(depth))
        written, taken = Signal(), Signal()
        m.d.comb += [
            written.eq(self.i.valid & self.i.ready),
            taken.eq(self.o.valid & self.o.ready),
            write.addr.eq(produce),
            write.data.eq(self.i.payload),
            write.en.eq(written),
            read.addr.eq(consume),
            self.o.payload.eq(read.data),
        ]
        for pointer, moves in ((produce, written), (consume, taken)):
            with m.If(moves):
                m.d.sync += pointer.eq(Mux(pointer == depth - 1, 0, pointer + 1))

        write_after = _beats_queued(m, depth, written, taken, "write" if self._two_counts else "both")
        read_after = _beats_queued(m, depth, written, taken, "read") if self._two_counts else write_after
        ready, valid = Signal(init=1, name="ready"), Signal(name="valid")
        m.d.sync += [ready.eq(write_after != depth), valid.eq(read_after != 0)]
        m.d.comb += [self.i.ready.eq(ready), self.o.valid.eq(valid)]


def _beats_queued(m, depth: int, written, taken, side: str) -> Signal:
    """A count of the beats a queue of ``depth`` holds, kept in ``m``'s sync domain; its next value."""
    level = Signal(range(depth + 1), name=f"level_{side}")
    after = Signal(range(depth + 1), name=f"after_{side}")
    m.d.comb += after.eq(level + Cat(written ^ taken, taken & ~written).as_signed())
    m.d.sync += level.eq(after)
    return after


def reads_buffered(depth: int, buffered: bool | None = None) -> bool:
    """Whether a :class:`StreamFIFO` of ``depth`` beats reads its storage through a register: ``buffered`` where
    given, else from :attr:`StreamFIFO.BRAM_MIN_DEPTH` beats on (a queue that deep is block RAM's)."""
    return depth >= StreamFIFO.BRAM_MIN_DEPTH if buffered is None else buffered


#: The narrowest shallow FIFO that keeps a count of its beats on each side (:func:`counts_per_side`).
COUNTS_PER_SIDE_MIN_WIDTH = 64


def counts_per_side(width: int) -> bool:
    """Whether a shallow :class:`StreamFIFO` of ``width``-bit beats keeps a count of its beats on each side. A wide
    one's storage spreads its producer's and its consumer's ends apart, and one count then sits beside one of them:
    the first link of the digits MLP on half an ECP5-85F (128 bits) ran its write enable from the converter out to
    the count beside the consumer and back, 10.0 ns. Two counts cost LUTs (each next value reads both sides' moves;
    Yosys, 128 bits, ECP5: 24 LUTs against 18 at depth 2, 32 against 23 at depth 4), so narrow FIFOs keep one."""
    return width >= COUNTS_PER_SIDE_MIN_WIDTH


def conversion_structure(in_elems: int, out_elems: int) -> str:
    """How :class:`WidthConverter` converts ``in_elems`` to ``out_elems`` elements per beat:
    ``"gather"`` (``out_elems`` a multiple of ``in_elems``), ``"split"`` (``in_elems`` a multiple of
    ``out_elems``) or ``"ring"`` (any other pair)."""
    if out_elems % in_elems == 0:
        return "gather"
    if in_elems % out_elems == 0:
        return "split"
    return "ring"


class WidthConverter(wiring.Component):
    """Re-packs a stream of ``in_elems`` elements per beat into beats of ``out_elems`` elements.

    Element order is kept; any pair of counts works (4 -> 6 as well as 6 -> 4). One beat per
    cycle flows on the slower side whenever the other side keeps up; ``i.ready`` looks at
    ``o.ready`` in the same cycle, so the converter may take a beat while handing one out;
    ``o.valid`` depends on registers only. How it is built depends on the ratio:

    - ``out_elems`` a multiple of ``in_elems`` (gathering, as FINN converts): a shift register of
      one output beat takes each input beat at its top; the beat leaves once it is full (a
      one-hot phase counts the input beats).
    - ``in_elems`` a multiple of ``out_elems`` (splitting): a register holds one input beat, whose
      bottom part leaves and the rest shifts down; a count of the parts left says when it is done.
    - Any other pair: a ring of ``lcm(in_elems, out_elems)`` slots, each input beat landing on a
      boundary of ``in_elems`` slots and each output beat read from one of ``out_elems``: no
      data multiplexer on the way in, one of ``lcm / out_elems`` ways per output bit on the way
      out. A ring of the fewest slots (``in_elems + out_elems - 1``) with a barrel shifter into
      them saves flip-flops, but Yosys maps its shifters unevenly (4 bits 6 -> 9: 159 LUTs on the
      iCE40, 367 on the ECP5; the ring 50 and 68). The price is on the iCE40, where a slot's
      flip-flop, loaded with no LUT before it, takes a logic cell of its own: over 14 pairs the
      ring takes 1,388 logic cells after packing against the shift buffer's 960 (4 bits 2 -> 3:
      53 against 31; 6 -> 9: 124 against 161), while on the ECP5 the ring takes 593 LUTs against
      1,161 over the 10 pairs both were synthesized for.

    All three are regular, so their size follows from the widths alone (:mod:`streamc.resources`
    counts them so).

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
        #: Cycles from taking the input beat that completes (or starts) an output beat to offering it: ``o.valid``
        #: comes from registers only.
        self.latency = 1
        super().__init__({
            "i": In(stream.Signature(unsigned(in_elems * elem_width))),
            "o": Out(stream.Signature(unsigned(out_elems * elem_width))),
        })

    @property
    def structure(self) -> str:
        """``"gather"``, ``"split"`` or ``"ring"``: how :meth:`elaborate` builds it."""
        return conversion_structure(self.in_elems, self.out_elems)

    def elaborate(self, platform):
        m = Module()
        {"gather": self._gather, "split": self._split, "ring": self._ring}[self.structure](m)
        return m

    def _gather(self, m: Module) -> None:
        beats = self.out_elems // self.in_elems
        in_bits = self.in_elems * self.elem_width
        gathered = Signal(self.out_elems * self.elem_width)
        # One-hot: bit k set while k beats of the next output are in. It rotates with each input
        # beat, a register enable and no logic; a binary count would need an adder and a compare,
        # which ECP5's mapping sizes unevenly with the count's width.
        phase = Signal(beats, init=1)
        full = Signal()
        take_in = Signal()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.eq(gathered),
            self.i.ready.eq(~full | self.o.ready),
            take_in.eq(self.i.valid & self.i.ready),
        ]
        # What is gathered shifts down a beat and the new one enters at the top: after ``beats``
        # beats the first sits at the bottom.
        with m.If(take_in):
            m.d.sync += [gathered.eq(Cat(gathered[in_bits:], self.i.payload)),
                         phase.eq(Cat(phase[-1], phase[:-1]))]
        with m.If(take_in & phase[-1]):
            m.d.sync += full.eq(1)
        with m.Elif(self.o.ready):
            m.d.sync += full.eq(0)

    def _split(self, m: Module) -> None:
        beats = self.in_elems // self.out_elems
        out_bits = self.out_elems * self.elem_width
        held = Signal(self.in_elems * self.elem_width)
        full = Signal()
        # Set while the held beat has parts left after the one at the bottom: a register, so
        # that each held bit chooses between loading and shifting on one flip-flop's output
        # (ABC's mapping would otherwise copy the handshake logic into every bit's LUT).
        more = Signal()
        # Parts left after the next one (none to count when a beat has two parts); it runs past
        # zero on the last part, which is why ``more`` also looks at itself.
        rest = Signal(range(beats - 1))
        take_in = Signal()
        take_out = Signal()
        # The held beat shifts down a part as each part leaves from the bottom: a flip-flop
        # enable and a two-way choice per held bit, the same for every ratio (selecting the part
        # by a count builds a wide multiplexer per output bit, which maps unevenly).
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.eq(held[:out_bits]),
            take_out.eq(full & self.o.ready),
            self.i.ready.eq(~full | (~more & self.o.ready)),
            take_in.eq(self.i.valid & self.i.ready),
        ]
        # What is held is free to change once the last part leaves: loading whatever the input
        # shows then is harmless, so only ``more`` chooses. The top part is never read after a
        # shift, so it only loads. A load while the last part leaves wins over the shift.
        with m.If(take_in | take_out):
            m.d.sync += [held[:-out_bits].eq(Mux(more, held[out_bits:], self.i.payload[:-out_bits])),
                         full.eq(take_in | more),
                         more.eq(take_in | (more & (rest != 0))),
                         rest.eq(Mux(take_in, beats - 2, rest - 1))]
        with m.If(take_in):
            m.d.sync += held[-out_bits:].eq(self.i.payload[-out_bits:])

    def _ring(self, m: Module) -> None:
        w, n_in, n_out = self.elem_width, self.in_elems, self.out_elems
        size = math.lcm(n_in, n_out)
        in_beats, out_beats = size // n_in, size // n_out
        slots = [Signal(w, name=f"slot{p}") for p in range(size)]
        # Input beat t of a turn of the ring fills slots [t * n_in, (t + 1) * n_in), output beat u
        # reads [u * n_out, (u + 1) * n_out): a slot only loads (a flip-flop enable, no data
        # multiplexer), and each output bit picks one of ``out_beats`` slots.
        write_beat = Signal(range(in_beats))
        read_beat = Signal(range(out_beats))
        # Set by a write that fills the ring: the beats then point at the same slot as when empty.
        last_filled = Signal()
        take_out = Signal()
        take_in = Signal()

        # The elements held follow from the two beats (and the flag): so does whether a beat can
        # leave or land, a function of a few bits, given as a table. Every state of the registers
        # is consistent (the handshake proof's induction needs that); beat numbers past the ring,
        # unreachable, offer nothing and take nothing.
        state = Cat(read_beat, write_beat, last_filled)
        valid, ready_idle, ready_taking = 0, 0, 0
        for u in range(out_beats):
            for t in range(in_beats):
                for full in (0, 1):
                    index = u | t << len(read_beat) | full << (len(read_beat) + len(write_beat))
                    held = (t * n_in - u * n_out) % size or (size if full else 0)
                    valid |= (held >= n_out) << index
                    ready_idle |= (held + n_in <= size) << index
                    ready_taking |= (held >= n_out and held - n_out + n_in <= size) << index

        def lookup(table: int):
            return Const(table, 1 << len(state)).bit_select(state, 1)

        m.d.comb += [
            self.o.valid.eq(lookup(valid)),
            take_out.eq(self.o.valid & self.o.ready),
            # Room a read frees lets a beat land in the same cycle: after a stall the input waits
            # one cycle at most.
            self.i.ready.eq(Mux(take_out, lookup(ready_taking), lookup(ready_idle))),
            take_in.eq(self.i.valid & self.i.ready),
        ]
        with m.If(take_in):
            m.d.sync += write_beat.eq(Mux(write_beat == in_beats - 1, 0, write_beat + 1))
        with m.If(take_out):
            m.d.sync += read_beat.eq(Mux(read_beat == out_beats - 1, 0, read_beat + 1))
        # Held elements come back to a multiple of the ring only empty or full: full after a write
        # alone, or after a write and a read together when a write adds more than a read takes.
        with m.If(take_in | take_out):
            m.d.sync += last_filled.eq(take_in & (~take_out | (n_in > n_out)))

        for t in range(in_beats):
            with m.If(take_in & (write_beat == t)):
                m.d.sync += [slots[t * n_in + k].eq(self.i.payload[k * w:(k + 1) * w]) for k in range(n_in)]
        beats = [Cat(slots[u * n_out:(u + 1) * n_out]) for u in range(out_beats)]
        m.d.comb += self.o.payload.eq(Array(beats)[read_beat])
