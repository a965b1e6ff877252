"""Stream plumbing for graphs that branch and join: fork, elementwise add, channel concat.

A residual block forks one stream into two paths and adds them back together; a dense or
inception block concatenates paths on the channel axis. Every stream here is an
:class:`amaranth.lib.stream.Signature` with a plain ``unsigned(elems * width)`` payload,
element ``j`` at bits ``[j*width, (j+1)*width)``, stored as :meth:`DataType.to_hw` stores it.

A fork moves only when every branch takes its beat and a join only when every input has
one, so in a reconvergent graph the shorter path must hold every beat the fork sends it
while the longer path has not yet produced the matching beat. Hold fewer and the fork
stalls: throughput drops, or, where the longer path needs many input beats before its first
output (a sliding window waits for rows), the block deadlocks. A FIFO on the shorter path
provides the room.
"""

from __future__ import annotations

import math

import numpy as np
from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType, smallest_datatype
from streamc.errors import FoldingError

__all__ = ["StreamFork", "ElementwiseAdd", "ChannelConcat"]


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_elems(name: str, elems) -> None:
    if not _is_int(elems) or elems < 1:
        raise FoldingError(f"node {name!r}: elems must be an integer >= 1, not {elems!r}")


class StreamFork(wiring.Component):
    """Copies every input beat to each of ``outputs`` streams, in order, exactly once.

    The outputs need not take a beat in the same cycle. A flag per output records that it
    has taken the current beat; that output then shows no beat until the next one, and the
    input beat is accepted in the cycle in which the last output still owing takes it. A
    stalled branch so holds back the input, never makes another branch see a beat twice.

    Cycle model: combinational, latency 0. ``o[k].valid`` is ``i.valid`` unless output ``k``
    has taken the beat already, so it depends on no ``ready``; ``i.ready`` depends on the
    outputs' ``ready`` in the same cycle. With the input valid and every output ready, one
    beat passes per cycle; in general the input advances in the cycle the slowest output
    takes the beat.

    Parameters
    ----------
    elem_width : int
        Bits per element.
    elems : int
        Elements per beat.
    outputs : int
        Number of output streams, at least 1.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(elems * elem_width)))
        Input beats.
    o : Out(stream.Signature(unsigned(elems * elem_width))).array(outputs)
        One copy of the input stream per output, ``o[0]`` to ``o[outputs - 1]``.

    Attributes
    ----------
    in_elems, out_elems : int
        ``elems``.
    in_width, out_width : int
        ``elem_width``.
    outputs : int
        Number of output streams.
    latency : int
        0: a beat is valid at the outputs in the cycle it is valid at the input.
    """

    def __init__(self, *, elem_width: int, elems: int, outputs: int, name: str = "fork"):
        if not _is_int(elem_width) or elem_width < 1:
            raise ValueError(f"node {name!r}: elem_width must be an integer >= 1, "
                             f"not {elem_width!r}")
        _check_elems(name, elems)
        if not _is_int(outputs) or outputs < 1:
            raise ValueError(f"node {name!r}: outputs must be an integer >= 1, not {outputs!r}")
        self.name = name
        self.in_elems = self.out_elems = int(elems)
        self.in_width = self.out_width = int(elem_width)
        self.outputs = int(outputs)
        self.latency = 0
        payload = unsigned(self.in_elems * self.in_width)
        super().__init__({
            "i": In(stream.Signature(payload)),
            "o": Out(stream.Signature(payload)).array(self.outputs),
        })

    def elaborate(self, platform):
        m = Module()
        taken = Signal(self.outputs)
        accept = Signal()
        m.d.comb += [
            self.i.ready.eq(Cat(taken[k] | out.ready for k, out in enumerate(self.o)).all()),
            accept.eq(self.i.valid & self.i.ready),
        ]
        for k, out in enumerate(self.o):
            m.d.comb += [
                out.payload.eq(self.i.payload),
                out.valid.eq(self.i.valid & ~taken[k]),
            ]
            with m.If(accept):
                m.d.sync += taken[k].eq(0)
            with m.Elif(out.valid & out.ready):
                m.d.sync += taken[k].eq(1)
        return m


def _element_value(bits, dtype: DataType):
    """The integer an element's stored bits stand for (BIPOLAR: 0 is -1, 1 is +1)."""
    if dtype.bipolar:
        return Mux(bits, 1, -1)
    return bits.as_signed() if dtype.signed else bits.as_unsigned()


def _corners(dtype: DataType, weight: int) -> tuple[int, int]:
    products = (weight * dtype.min, weight * dtype.max)
    return min(products), max(products)


class ElementwiseAdd(wiring.Component):
    """The integer residual add ``y = a_weight*a + b_weight*b + bias``, element by element.

    A beat of ``a`` and a beat of ``b`` are taken together, in a cycle in which both are
    valid, and make one output beat. ``BIPOLAR`` inputs count as -1 and +1. The output is the
    exact sum in ``out_dtype``, the narrowest type that holds every sum the input types allow.

    Cycle model: one pipeline stage, latency 1. The stage takes a pair whenever it is empty or
    its beat is being taken (``a.ready = (~o.valid | o.ready) & b.valid``, likewise
    ``b.ready``), so one beat per cycle passes with both inputs valid and the output ready.
    ``o.valid`` is a register.

    Parameters
    ----------
    a_dtype, b_dtype : DataType
        Types of the elements of ``a`` and ``b``.
    a_weight, b_weight, bias : int
        Integer coefficients of the sum.
    elems : int
        Elements per beat, on every port.
    name : str
        Node name, used in error messages.

    Members
    -------
    a : In(stream.Signature(unsigned(elems * a_dtype.bitwidth)))
        First operand.
    b : In(stream.Signature(unsigned(elems * b_dtype.bitwidth)))
        Second operand.
    o : Out(stream.Signature(unsigned(elems * out_dtype.bitwidth)))
        The sums.

    Attributes
    ----------
    in_elems, out_elems : int
        ``elems``.
    a_width, b_width, out_width : int
        Bits per element of ``a``, ``b`` and ``o``.
    out_dtype : DataType
        Type of the sums: ``smallest_datatype`` of the least and greatest possible sum.
    latency : int
        1: a pair taken in one cycle is valid at the output in the next.
    """

    def __init__(self, *, a_dtype: DataType, b_dtype: DataType, a_weight: int, b_weight: int,
                 bias: int, elems: int, name: str = "add"):
        for what, value in (("a_dtype", a_dtype), ("b_dtype", b_dtype)):
            if not isinstance(value, DataType):
                raise TypeError(f"node {name!r}: {what} must be a DataType, not {value!r}")
        for what, value in (("a_weight", a_weight), ("b_weight", b_weight), ("bias", bias)):
            if not _is_int(value):
                raise ValueError(f"node {name!r}: {what} must be an integer, not {value!r}")
        _check_elems(name, elems)
        self.name = name
        self._a_dtype, self._b_dtype = a_dtype, b_dtype
        self._a_weight, self._b_weight, self._bias = int(a_weight), int(b_weight), int(bias)
        (a_lo, a_hi), (b_lo, b_hi) = _corners(a_dtype, a_weight), _corners(b_dtype, b_weight)
        self.out_dtype = smallest_datatype(a_lo + b_lo + bias, a_hi + b_hi + bias)
        self.in_elems = self.out_elems = int(elems)
        self.a_width = a_dtype.bitwidth
        self.b_width = b_dtype.bitwidth
        self.out_width = self.out_dtype.bitwidth
        self.latency = 1
        super().__init__({
            "a": In(stream.Signature(unsigned(self.in_elems * self.a_width))),
            "b": In(stream.Signature(unsigned(self.in_elems * self.b_width))),
            "o": Out(stream.Signature(unsigned(self.out_elems * self.out_width))),
        })

    @property
    def a_dtype(self) -> DataType:
        """Type of the elements on input ``a``."""
        return self._a_dtype

    @property
    def b_dtype(self) -> DataType:
        """Type of the elements on input ``b``."""
        return self._b_dtype

    @property
    def a_weight(self) -> int:
        """The constant each ``a`` element is multiplied by before the sum."""
        return self._a_weight

    @property
    def b_weight(self) -> int:
        """The constant each ``b`` element is multiplied by before the sum."""
        return self._b_weight

    def elaborate(self, platform):
        m = Module()
        aw, bw, ow = self.a_width, self.b_width, self.out_width
        advance = Signal()
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            self.a.ready.eq(advance & self.b.valid),
            self.b.ready.eq(advance & self.a.valid),
        ]
        with m.If(advance):
            m.d.sync += self.o.valid.eq(self.a.valid & self.b.valid)
            for j in range(self.in_elems):
                a = _element_value(self.a.payload[j * aw:(j + 1) * aw], self._a_dtype)
                b = _element_value(self.b.payload[j * bw:(j + 1) * bw], self._b_dtype)
                total = self._a_weight * a + self._b_weight * b + self._bias
                # out_dtype holds every sum, so its low bits are its two's complement form.
                m.d.sync += self.o.payload[j * ow:(j + 1) * ow].eq(total)
        return m


class ChannelConcat(wiring.Component):
    """Concatenates channels-last streams on the channel axis.

    For every pixel the output carries ``channels[0] // elems`` beats from ``i[0]``, then
    ``channels[1] // elems`` beats from ``i[1]``, and so on, then the next pixel. The
    component does not count pixels: it goes round the inputs for as long as beats come.

    Cycle model: combinational, latency 0. A counter selects the input whose turn it is;
    ``o.valid`` is that input's ``valid`` and its ``ready`` is ``o.ready``, the other inputs
    see ``ready`` low. One beat per cycle passes while the selected input is valid and the
    output ready, with no bubble between inputs or pixels.

    Parameters
    ----------
    channels : tuple of int
        Channels of each input, one entry per input; each a multiple of ``elems``.
    dtype : DataType
        Type of the elements, on every port.
    elems : int
        Elements per beat, on every port.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(elems * dtype.bitwidth))).array(len(channels))
        The inputs, ``i[0]`` first.
    o : Out(stream.Signature(unsigned(elems * dtype.bitwidth)))
        The concatenation.

    Attributes
    ----------
    in_elems, out_elems : int
        ``elems``.
    in_width, out_width : int
        ``dtype.bitwidth``.
    channels : tuple of int
        Channels of each input.
    out_channels : int
        ``sum(channels)``.
    latency : int
        0: a beat is valid at the output in the cycle it is valid at its input.
    """

    def __init__(self, *, channels: tuple[int, ...], dtype: DataType, elems: int,
                 name: str = "concat"):
        channels = tuple(channels) if isinstance(channels, (tuple, list)) else (channels,)
        if not channels or not all(_is_int(c) and c >= 1 for c in channels):
            raise ValueError(f"node {name!r}: channels must be one or more integers >= 1, "
                             f"not {channels!r}")
        if not isinstance(dtype, DataType):
            raise TypeError(f"node {name!r}: dtype must be a DataType, not {dtype!r}")
        channels = tuple(int(c) for c in channels)
        common = math.gcd(*channels)
        if not _is_int(elems) or elems < 1 or common % elems:
            divisors = ", ".join(str(d) for d in range(1, common + 1) if common % d == 0)
            raise FoldingError(f"node {name!r}: elems={elems!r} does not divide every input's "
                               f"channels {channels}; valid elems: {divisors}")
        self.name = name
        self.channels = channels
        self.out_channels = sum(channels)
        self.in_elems = self.out_elems = int(elems)
        self.in_width = self.out_width = dtype.bitwidth
        self.latency = 0
        payload = unsigned(self.in_elems * self.in_width)
        super().__init__({
            "i": In(stream.Signature(payload)).array(len(channels)),
            "o": Out(stream.Signature(payload)),
        })

    def elaborate(self, platform):
        m = Module()
        beats = [c // self.in_elems for c in self.channels]
        inputs = len(beats)
        turn = Signal(range(inputs))
        beat = Signal(range(max(beats)))
        valids = Array(port.valid for port in self.i)
        payloads = Array(port.payload for port in self.i)
        last_beats = Array(beats)
        m.d.comb += [
            self.o.valid.eq(valids[turn]),
            self.o.payload.eq(payloads[turn]),
        ]
        for k, port in enumerate(self.i):
            m.d.comb += port.ready.eq(self.o.ready & (turn == k))
        with m.If(self.o.valid & self.o.ready):
            with m.If(beat == last_beats[turn] - 1):
                m.d.sync += [
                    beat.eq(0),
                    turn.eq(Mux(turn == inputs - 1, 0, turn + 1)),
                ]
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        return m
