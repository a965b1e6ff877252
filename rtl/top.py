"""The stitched accelerator: kernels in a chain, joined by FIFOs and width converters."""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import Module, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import StreamFIFO, WidthConverter

__all__ = ["StreamAccelerator", "to_verilog"]

DEFAULT_FIFO_DEPTH = 2


class StreamAccelerator(wiring.Component):
    """A chain of stream kernels behind AXI-Stream style ports.

    Between stage ``k`` and stage ``k + 1`` come a :class:`WidthConverter`, where stage ``k``
    puts out a different number of elements per beat than stage ``k + 1`` takes, and then a
    :class:`StreamFIFO` at stage ``k + 1``'s beat width. The element widths must match.

    Parameters
    ----------
    stages : list of wiring.Component
        Kernels in stream order. Each has ``i`` and ``o`` stream members and the attributes
        ``in_elems``, ``in_width``, ``out_elems``, ``out_width``; a ``name`` attribute, if
        present, names it in errors and in the Verilog hierarchy.
    fifo_depths : list of int or None
        Depth of the FIFO after each stage but the last (``len(stages) - 1`` entries);
        0 joins two stages directly. ``None`` puts a FIFO of depth 2 everywhere.

    Members
    -------
    s_axis_tdata : In(unsigned(in_elems * in_width))
    s_axis_tvalid : In(1)
    s_axis_tready : Out(1)
        Input beats, packed as the first stage takes them.
    m_axis_tdata : Out(unsigned(out_elems * out_width))
    m_axis_tvalid : Out(1)
    m_axis_tready : In(1)
        Output beats, packed as the last stage puts them out.

    Attributes
    ----------
    in_elems, in_width, out_elems, out_width : int
        Elements per beat and bits per element of the first stage's input and of the last
        stage's output.
    """

    def __init__(self, *, stages: list, fifo_depths: list[int] | None = None):
        if not stages:
            raise ValueError("an accelerator needs at least one stage, not an empty list")
        if fifo_depths is None:
            fifo_depths = [DEFAULT_FIFO_DEPTH] * (len(stages) - 1)
        if len(fifo_depths) != len(stages) - 1:
            raise ValueError(f"fifo_depths must have one entry per link between stages "
                             f"({len(stages) - 1}), not {len(fifo_depths)}: {fifo_depths!r}")
        for depth in fifo_depths:
            if depth < 0:
                raise ValueError(f"FIFO depths must be 0 (no FIFO) or more, not {depth!r}")

        self._chain = [stages[0]]
        self._names = [_stage_name(0, stages[0])]
        for k, (stage, depth) in enumerate(zip(stages[1:], fifo_depths), start=1):
            before = stages[k - 1]
            if before.out_width != stage.in_width:
                raise ValueError(
                    f"{_stage_name(k - 1, before)} puts out "
                    f"{before.out_width}-bit elements but {_stage_name(k, stage)} takes "
                    f"{stage.in_width}-bit elements")
            if before.out_elems != stage.in_elems:
                self._append(f"convert{k - 1}_{k}", WidthConverter(
                    elem_width=stage.in_width, in_elems=before.out_elems,
                    out_elems=stage.in_elems))
            # The FIFO sits on the consumer's side of the converter: a consumer that takes its
            # input in bursts (an MVAU's first neuron fold) then finds whole beats waiting,
            # instead of waiting for the converter to gather them at the producer's pace.
            if depth:
                self._append(f"fifo{k - 1}_{k}", StreamFIFO(
                    width=stage.in_elems * stage.in_width, depth=depth))
            self._append(_stage_name(k, stage), stage)

        first, last = stages[0], stages[-1]
        self.in_elems, self.in_width = first.in_elems, first.in_width
        self.out_elems, self.out_width = last.out_elems, last.out_width
        super().__init__({
            "s_axis_tdata": In(unsigned(self.in_elems * self.in_width)),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "m_axis_tdata": Out(unsigned(self.out_elems * self.out_width)),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
        })

    def _append(self, name: str, component) -> None:
        self._chain.append(component)
        self._names.append(name)

    def elaborate(self, platform):
        m = Module()
        for name, component in zip(self._names, self._chain):
            m.submodules[name] = component
        for before, after in zip(self._chain, self._chain[1:]):
            wiring.connect(m, before.o, after.i)

        first, last = self._chain[0], self._chain[-1]
        m.d.comb += [
            first.i.payload.eq(self.s_axis_tdata),
            first.i.valid.eq(self.s_axis_tvalid),
            self.s_axis_tready.eq(first.i.ready),
            self.m_axis_tdata.eq(last.o.payload),
            self.m_axis_tvalid.eq(last.o.valid),
            last.o.ready.eq(self.m_axis_tready),
        ]
        return m


def _stage_name(index: int, stage) -> str:
    return f"stage{index}_{getattr(stage, 'name', type(stage).__name__)}"


def to_verilog(top: StreamAccelerator, *, name: str = "streamc_top") -> str:
    """Verilog of ``top`` as module ``name``, with ports ``clk``, ``rst`` and the AXI-Stream six.

    Source-location attributes are left out so that the text does not depend on where
    streamc is installed.
    """
    return verilog.convert(top, name=name, emit_src=False)
