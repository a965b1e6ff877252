"""Elementwise lookup table: any function of one narrow integer, e.g. an int8 tanh or sigmoid, one
table for every channel or one per channel (e.g. a quantized bias add between two quantizers)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType

from .placement import rom_attrs

__all__ = ["LookupTable"]


class LookupTable(wiring.Component):
    """Maps every element of a stream through a table, ``elems`` elements per cycle.

    Each lane has its own ROM of ``2**in_width`` words, read synchronously: the ROM's read
    register is the output register, so a lane costs ``out_width`` flip-flops besides the
    table. Left to itself (``ram_style="auto"``), Yosys' ``synth_ecp5`` builds these ROMs from
    LUT logic (measured: a 256 x 8 table, int8 -> int8, takes about 170 LUT4 and 80 PFU/L6
    muxes per lane; a 16 x 3 table 3 LUT4), and ``synth_ice40`` puts tables of 8-bit words in
    block RAM; the planner may place them either way. The ROM is addressed by the input's
    stored bits directly; its words are laid out so, and words for bit patterns outside
    ``in_dtype`` hold 0.

    With a table per channel, element ``e`` of a frame is in channel ``e % channels``: lane ``j``
    of the ``f``-th beat of a pixel reads channel ``f * elems + j``, so each lane's ROM holds the
    tables of its channels one after the other, and a count of the beats picks one.

    The one pipeline stage stalls while the output beat is not taken: ``i.ready`` is
    ``~o.valid | o.ready``, so the kernel takes one beat per cycle with the consumer ready.

    Parameters
    ----------
    table : numpy.ndarray
        Integer outputs, 1-D: ``table[k]`` is the output for the input value
        ``in_dtype.min + k``, so it has ``in_dtype.max - in_dtype.min + 1`` entries; for a
        ``BIPOLAR`` input two, for -1 and +1. 2-D, ``(channels, entries)``: one such table per
        channel; ``elems`` must then divide ``channels``, and ``channels`` ``frame_elems``.
    in_dtype, out_dtype : DataType
        Types of the input and output elements; every table entry must be an ``out_dtype``
        value.
    elems : int
        Elements per beat, in and out; must divide ``frame_elems``.
    frame_elems : int
        Elements per frame.
    ram_style : str
        Where each lane's ROM goes, one of :data:`streamc.rtl.placement.RAM_STYLES`.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(elems * in_dtype.bitwidth)))
        Input elements, element ``j`` at bit ``j * in_dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(elems * out_dtype.bitwidth)))
        Output elements, element ``j`` at bit ``j * out_dtype.bitwidth``.

    Attributes
    ----------
    in_elems, out_elems : int
        ``elems``.
    in_width, out_width : int
        Bits per element on each side.
    cycles_per_frame : int
        ``frame_elems // elems``.
    folds : int
        Beats per pixel with a table per channel (``channels // elems``), else 1.
    latency : int
        1: an input beat taken in one cycle is valid at the output in the next.
    """

    def __init__(self, *, table: np.ndarray, in_dtype: DataType, out_dtype: DataType,
                 elems: int, frame_elems: int, ram_style: str = "auto", name: str = "lut"):
        table = np.asarray(table)
        entries = 2 if in_dtype.bipolar else in_dtype.max - in_dtype.min + 1
        if table.ndim not in (1, 2) or table.shape[-1:] != (entries,) or not np.issubdtype(table.dtype, np.integer):
            raise ValueError(f"node {name!r}: table must be an integer array of {entries} entries (one per "
                             f"{in_dtype} value), 1-D or one row per channel, not {table.dtype} of shape "
                             f"{table.shape}")
        if not out_dtype.contains(table):
            raise ValueError(f"node {name!r}: table entries must be {out_dtype} values, found "
                             f"values in [{table.min()}, {table.max()}]")
        for what, value in (("elems", elems), ("frame_elems", frame_elems)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"node {name!r}: {what} must be an integer >= 1, not {value!r}")
        channels = table.shape[0] if table.ndim == 2 else 1
        if frame_elems % elems or channels % elems and channels > 1 or frame_elems % channels:
            whole = channels if channels > 1 else frame_elems
            divisors = ", ".join(str(d) for d in range(1, whole + 1) if whole % d == 0)
            raise ValueError(f"node {name!r}: elems={elems} must divide frame_elems={frame_elems}"
                             + (f" and the {channels} channels, which must divide frame_elems" if channels > 1 else "")
                             + f"; valid elems: {divisors}")
        self.name = name
        self.ram_style = ram_style
        self._attrs = rom_attrs(ram_style, name=name, what="ram_style")
        self._table = table.astype(np.int64).reshape(channels, entries)
        self.folds = channels // elems if channels > 1 else 1
        self._in_dtype = in_dtype
        self._out_dtype = out_dtype
        self.in_elems = self.out_elems = int(elems)
        self.in_width = in_dtype.bitwidth
        self.out_width = out_dtype.bitwidth
        self.cycles_per_frame = frame_elems // elems
        self.latency = 1
        super().__init__({
            "i": In(stream.Signature(unsigned(elems * self.in_width))),
            "o": Out(stream.Signature(unsigned(elems * self.out_width))),
        })

    @property
    def rom_words(self) -> list[list[int]]:
        """Each lane's ROM words: at word ``fold << in_width | bits`` the output bit pattern for the
        input stored as ``bits`` in the ``fold``-th beat of a pixel (one fold with one table).

        Patterns outside the input type (e.g. TERNARY's -2) never arrive; their words are 0.
        """
        in_dt = self._in_dtype
        values = in_dt.from_hw(np.arange(1 << self.in_width))
        inside = (values >= in_dt.min) & (values <= in_dt.max)
        index = (values - in_dt.min) // 2 if in_dt.bipolar else values - in_dt.min
        lanes = []
        for lane in range(self.in_elems):
            words = []
            for fold in range(self.folds):
                table = self._table[(fold * self.in_elems + lane) % len(self._table)]
                outputs = np.where(inside, table[np.where(inside, index, 0)], 0)
                words += [int(w) for w in self._out_dtype.to_hw(outputs)]
            lanes.append(words)
        return lanes

    def elaborate(self, platform):
        m = Module()
        iw, ow = self.in_width, self.out_width
        advance = Signal()
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(advance),
        ]
        with m.If(advance):
            m.d.sync += self.o.valid.eq(self.i.valid)

        fold = Signal(range(self.folds))
        if self.folds > 1:
            with m.If(self.i.valid & advance):
                m.d.sync += fold.eq(Mux(fold == self.folds - 1, 0, fold + 1))
        lanes = []
        for j, words in enumerate(self.rom_words):
            rom = Memory(shape=unsigned(ow), depth=len(words), init=words, attrs=self._attrs)
            m.submodules[f"rom_{j}"] = rom
            read = rom.read_port(domain="sync")
            code = self.i.payload[j * iw:(j + 1) * iw]
            m.d.comb += [
                read.addr.eq(Cat(code, fold) if self.folds > 1 else code),
                read.en.eq(advance),
            ]
            lanes.append(read.data)
        m.d.comb += self.o.payload.eq(Cat(*lanes))
        return m
