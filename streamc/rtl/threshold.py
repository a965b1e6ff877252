"""Standalone thresholding: qonnx's MultiThreshold on a stream, FINN's Thresholding kernel."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType
from streamc.errors import FoldingError

from .arithmetic import adder_tree, shape_of_range

__all__ = ["THRESHOLD_STYLES", "ThresholdUnit", "threshold_reference"]

#: How a :class:`ThresholdUnit` finds the count: ``"parallel"`` compares with every threshold at once,
#: ``"search"`` binary-searches the sorted thresholds, one compare per step.
THRESHOLD_STYLES = ("parallel", "search")


def threshold_reference(values: np.ndarray, thresholds: np.ndarray, *, out_dtype: DataType,
                        out_bias: int) -> np.ndarray:
    """What :class:`ThresholdUnit` computes on ``values`` of shape ``(..., channels)``."""
    values = np.asarray(values, dtype=np.int64)
    count = (values[..., None] >= np.asarray(thresholds, dtype=np.int64)).sum(axis=-1)
    if out_dtype.bipolar:
        return np.where(count == 1, 1, -1)
    return out_bias + count


class ThresholdUnit(wiring.Component):
    """Maps each element to ``out_bias`` plus the number of its channel's thresholds it reaches.

    Input and output are channels-last streams of ``channels`` channels, ``elems`` per beat;
    element ``x`` of channel ``c`` becomes ``out_bias + count(x >= thresholds[c, l])`` over
    ``l`` (qonnx ``MultiThreshold``). With a ``BIPOLAR`` output there is one threshold per
    channel and the output is +1 when it is reached, else -1 (as
    :class:`~streamc.rtl.mvau.MatrixVectorUnit` does). A ``BIPOLAR`` input counts as -1/+1.

    Thresholds beyond the input's range are clamped to ``[in_dtype.min, in_dtype.max + 1]``
    (they compare the same) so the comparators are one bit wider than an input at most.
    They are constants wherever every channel group sees the same ones — shared ``(1, L)``
    thresholds, or ``elems = channels`` — and otherwise a ROM
    (:class:`~amaranth.lib.memory.Memory`) of one row of ``elems * L`` thresholds per channel
    group, read in step with the input. ``L`` thresholds cost ``L`` comparators per element.

    Pipeline (stalls as a whole while its output beat is not taken,
    ``i.ready = ~o.valid | o.ready``): accept beat and read the threshold ROM -> operands ->
    compares -> count plus ``out_bias`` into the output register. See :attr:`latency`.

    With ``style="search"`` (FINN's RTL thresholding) each channel's thresholds are sorted (the count
    does not depend on their order) and padded to ``2**b - 1`` with ``in_dtype.max + 1``, which no
    input reaches, ``b = L.bit_length()``; the count is found bit by bit from the top in ``b``
    pipelined steps. Step ``i`` compares each element with one threshold, the one at index
    ``(2*m + 1) * 2**(b-1-i) - 1`` of its channel, where ``m`` holds the ``i`` count bits found so far,
    and appends the result as the next count bit. Step ``i`` of lane ``j`` reads its threshold from a
    ROM of its own (:meth:`search_thresholds`: ``2**i`` words per channel group, the lane's channels
    only; ``2**i`` in all where every group has the same thresholds), addressed by the group and ``m`` as
    the element enters the step (a constant where the words are all one); the element, its group and
    ``m`` travel down the steps. So ``L`` thresholds cost ``b`` comparators per element instead of
    ``L``, and ``b`` ROMs per lane holding ``2**b - 1`` words per channel in all. A ``BIPOLAR`` output
    has no search.

    Parameters
    ----------
    thresholds : numpy.ndarray
        Integer array of shape ``(channels, L)``, or ``(1, L)`` shared by every channel.
    in_dtype, out_dtype : DataType
        Types of the elements in and out; ``out_dtype`` must hold every output,
        ``out_bias + [0, L]``.
    out_bias : int
        Added to the count; unused with a ``BIPOLAR`` output.
    channels : int
        Channels of the stream.
    elems : int
        Elements per beat in and out; must divide ``channels``.
    name : str
        Node name, used in error messages.
    style : str
        One of :data:`THRESHOLD_STYLES`.

    Members
    -------
    i : In(stream.Signature(unsigned(elems * in_dtype.bitwidth)))
        Input elements in channel order, element ``j`` of a beat at bit
        ``j * in_dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(elems * out_dtype.bitwidth)))
        Output elements, packed likewise.

    Attributes
    ----------
    in_elems, out_elems : int
        ``elems``.
    in_width, out_width : int
        ``in_dtype.bitwidth`` and ``out_dtype.bitwidth``.
    compare_shape : amaranth.hdl.Shape
        Shape of the stored thresholds and of the comparisons.
    search_steps : int
        ``b = L.bit_length()``: the steps of a search.
    can_search : bool
        Whether the unit may search: its output is not ``BIPOLAR``.
    latency : int
        Cycles from the cycle that accepts a beat to the cycle in which its output beat is
        first valid: 3, or ``search_steps + 1`` for a search. One beat per cycle passes with no
        stalls, so a frame of ``N`` elements takes ``N // elems`` cycles.
    """

    def __init__(self, *, thresholds: np.ndarray, in_dtype: DataType, out_dtype: DataType,
                 out_bias: int, channels: int, elems: int, name: str = "thresholds",
                 style: str = "parallel"):
        if not isinstance(channels, (int, np.integer)) or channels < 1:
            raise ValueError(f"node {name!r}: channels must be an integer >= 1, "
                             f"not {channels!r}")
        if not isinstance(elems, (int, np.integer)) or elems < 1 or channels % elems:
            divisors = ", ".join(str(d) for d in range(1, channels + 1) if channels % d == 0)
            raise FoldingError(f"node {name!r}: elems={elems!r} does not divide the {channels} "
                               f"channels; valid elems: {divisors}")
        thresholds = np.asarray(thresholds)
        if (thresholds.ndim != 2 or thresholds.shape[0] not in (1, channels)
                or thresholds.shape[1] < 1 or not np.issubdtype(thresholds.dtype, np.integer)):
            raise ValueError(f"node {name!r}: thresholds must be an integer array of shape "
                             f"({channels}, L) or (1, L) with L >= 1, not {thresholds.dtype} "
                             f"of shape {thresholds.shape}")
        n_thr = thresholds.shape[1]
        if style not in THRESHOLD_STYLES:
            raise ValueError(f"node {name!r}: style={style!r} is not a threshold style; valid: "
                             f"{', '.join(THRESHOLD_STYLES)}")
        self.can_search = not out_dtype.bipolar
        if style == "search" and not self.can_search:
            raise ValueError(f"node {name!r}: a BIPOLAR output has one threshold, no search")
        if out_dtype.bipolar:
            if n_thr != 1:
                raise ValueError(f"node {name!r}: a BIPOLAR output needs exactly 1 threshold "
                                 f"per channel, not {n_thr}")
        elif not (out_dtype.min <= out_bias and out_bias + n_thr <= out_dtype.max):
            raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the outputs "
                             f"out_bias + [0, {n_thr}] = [{out_bias}, {out_bias + n_thr}]")
        self.name, self.style = name, style
        self._in_dtype, self._out_dtype = in_dtype, out_dtype
        self._out_bias = int(out_bias)
        self._elems, self._groups = elems, channels // elems
        lo, hi = in_dtype.min, in_dtype.max + 1
        self._thresholds = np.broadcast_to(np.clip(thresholds.astype(np.int64), lo, hi),
                                           (channels, n_thr))
        self.compare_shape = shape_of_range(lo, hi)
        self.search_steps = n_thr.bit_length()

        self.in_elems = self.out_elems = elems
        self.in_width = in_dtype.bitwidth
        self.out_width = out_dtype.bitwidth
        self.latency = self.search_steps + 1 if style == "search" else 3
        super().__init__({
            "i": In(stream.Signature(unsigned(elems * self.in_width))),
            "o": Out(stream.Signature(unsigned(elems * self.out_width))),
        })

    @property
    def thresholds(self) -> np.ndarray:
        """The ``(C, L)`` thresholds the compares read, clamped to the input type's range (and one past)."""
        return self._thresholds

    @property
    def in_dtype(self) -> DataType:
        """Type of the compared input elements."""
        return self._in_dtype

    @property
    def rom_rows(self) -> list[int]:
        """The threshold ROM's words: row ``g``: thresholds ``l`` of channels ``g*elems + j`` at bit ``(j*L + l) * width``."""
        width = self.compare_shape.width
        mask = (1 << width) - 1
        rows = []
        for g in range(self._groups):
            block = self._thresholds[g * self._elems:(g + 1) * self._elems].reshape(-1)
            rows.append(sum((int(t) & mask) << (n * width) for n, t in enumerate(block)))
        return rows

    def search_thresholds(self, step: int) -> np.ndarray:
        """What lane ``j``'s ROM of search step ``step`` holds: ``[j, g, m]`` is the threshold compared
        with an element of channel ``g*elems + j`` whose count so far is ``m`` (``step`` bits), shape
        ``(elems, groups, 2**step)``; padding is ``in_dtype.max + 1``. ``groups`` is ``channels // elems``,
        or 1 where every channel group has the same thresholds (the group then picks no word)."""
        size = (1 << self.search_steps) - 1
        ordered = np.sort(self._thresholds, axis=1).reshape(self._groups, self._elems, -1)
        if (ordered == ordered[:1]).all():
            ordered = ordered[:1]
        padded = np.full((*ordered.shape[:2], size), self._in_dtype.max + 1, dtype=np.int64)
        padded[:, :, :ordered.shape[2]] = ordered
        span = 1 << (self.search_steps - step)
        return padded[:, :, span // 2 - 1::span].transpose(1, 0, 2)

    def _value(self, bits):
        """The true value of one input element, as stored bits."""
        if self._in_dtype.bipolar:
            return Mux(bits[0], Const(1, signed(2)), Const(-1, signed(2)))
        return bits.as_signed() if self._in_dtype.signed else bits

    def _threshold(self, raw):
        return raw.as_signed() if self.compare_shape.signed else raw

    def elaborate(self, platform):
        m = Module()
        # The whole pipeline moves when the output register is empty or being emptied.
        advance = Signal()
        take = Signal()
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(advance),
            take.eq(self.i.valid & advance),
        ]
        group = Signal(range(self._groups))
        with m.If(take):
            m.d.sync += group.eq(Mux(group == self._groups - 1, 0, group + 1))
        last_valid, counts = (self._search if self.style == "search" else self._parallel)(m, advance, take, group)

        # Output register. Assigning to ow-bit signals wraps each value into its to_hw bits.
        out_bits = [Signal(self.out_width, name=f"out_{j}") for j in range(self._elems)]
        m.d.comb += [bits.eq(value) for bits, value in zip(out_bits, counts)]
        with m.If(advance):
            m.d.sync += [self.o.valid.eq(last_valid), self.o.payload.eq(Cat(*out_bits))]
        return m

    def _parallel(self, m, advance, take, group):
        """Every threshold compared at once; the valid bit and the output values before the output register."""
        elems, n_thr = self._elems, self._thresholds.shape[1]
        iw, cw = self.in_width, self.compare_shape.width

        rows = self.rom_rows
        if len(set(rows)) == 1:
            thresholds1 = Const(rows[0], unsigned(elems * n_thr * cw))
        else:
            m.submodules.threshold_rom = threshold_rom = Memory(
                shape=unsigned(elems * n_thr * cw), depth=len(rows), init=rows)
            threshold_read = threshold_rom.read_port(domain="sync")
            m.d.comb += [threshold_read.addr.eq(group), threshold_read.en.eq(advance)]
            thresholds1 = threshold_read.data

        # Stage 1: operands, the input beat with its group's thresholds.
        valid1 = Signal()
        x1 = Signal(elems * iw)
        with m.If(advance):
            m.d.sync += [valid1.eq(take), x1.eq(self.i.payload)]

        # Stage 2: compares, registered to keep them off the count's path.
        valid2 = Signal()
        reached2 = [Signal(n_thr, name=f"reached_{j}") for j in range(elems)]
        with m.If(advance):
            m.d.sync += valid2.eq(valid1)
            for j in range(elems):
                x = self._value(x1[j * iw:(j + 1) * iw])
                for l in range(n_thr):
                    raw = thresholds1[(j * n_thr + l) * cw:(j * n_thr + l + 1) * cw]
                    m.d.sync += reached2[j][l].eq(x >= self._threshold(raw))

        if self._out_dtype.bipolar:
            return valid2, [reached[0] for reached in reached2]
        return valid2, [self._out_bias + adder_tree(m, list(reached)) for reached in reached2]

    def _search(self, m, advance, take, group):
        """The binary search, one pipeline step per count bit; the valid bit and the output values before the
        output register."""
        elems, steps, iw = self._elems, self.search_steps, self.in_width
        # What enters the step: the element's beat, its channel group, and per lane the count bits found so far.
        valid_in, x_in, group_in = take, self.i.payload, group
        found_in = [Const(0, unsigned(0))] * elems
        for step in range(steps):
            valid, x = Signal(name=f"valid_{step}"), Signal(elems * iw, name=f"x_{step}")
            group_at = Signal.like(group, name=f"group_{step}")
            found = [Signal(step, name=f"found_{step}_{j}") for j in range(elems)]
            with m.If(advance):
                m.d.sync += [valid.eq(valid_in), x.eq(x_in), group_at.eq(group_in),
                             *(f.eq(f_in) for f, f_in in zip(found, found_in))]
            table = self.search_thresholds(step)
            found_next = []
            for j in range(elems):
                address = Cat(found_in[j], group_in) if table.shape[1] > 1 else found_in[j]
                threshold = self._step_threshold(m, table[j], step, j, advance, address)
                reached = self._value(x[j * iw:(j + 1) * iw]) >= self._threshold(threshold)
                found_next.append(Cat(reached, found[j]))
            valid_in, x_in, group_in, found_in = valid, x, group_at, found_next
        return valid_in, [self._out_bias + count for count in found_in]

    def _step_threshold(self, m, words: np.ndarray, step: int, lane: int, advance, address):
        """Lane ``lane``'s threshold at search step ``step``: a constant where every word of its ROM is the same,
        else read at ``address`` (group, then count bits) as the element enters the step."""
        shape = self.compare_shape
        words = words.reshape(-1)
        if (words == words[0]).all():
            return Const(int(words[0]), shape).as_unsigned()
        rom = Memory(shape=unsigned(shape.width), depth=len(words),
                     init=[int(w) & ((1 << shape.width) - 1) for w in words])
        m.submodules[f"search_rom_{step}_{lane}"] = rom
        read = rom.read_port(domain="sync")
        m.d.comb += [read.addr.eq(address), read.en.eq(advance)]
        return read.data
