"""The accelerator as a component of a user's Amaranth design: its AXI-Stream style ports as ``lib.stream`` ports."""

from __future__ import annotations

from amaranth.hdl import Module, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AcceleratorComponent"]


class AcceleratorComponent(wiring.Component):
    """A :class:`~streamc.rtl.top.StreamAccelerator` behind ``amaranth.lib.stream`` ports, to be joined to a
    design's own streams with ``wiring.connect``.

    The payloads are the Verilog top's ``s_axis_tdata`` and ``m_axis_tdata``, bit for bit: element ``j``
    of a beat at bits ``[j*w, (j+1)*w)`` (bipolar elements one bit, 1 = +1). It runs in the ``sync``
    domain, reset synchronously as the Verilog top is.

    Members
    -------
    i : In(stream.Signature(unsigned(in_elems * in_width)))
        Input beats: integer codes of the input quantizer.
    o : Out(stream.Signature(unsigned(out_elems * out_width)))
        Output beats of the last stage.
    """

    def __init__(self, accelerator):
        self.accelerator = accelerator
        super().__init__({
            "i": In(stream.Signature(unsigned(accelerator.in_elems * accelerator.in_width))),
            "o": Out(stream.Signature(unsigned(accelerator.out_elems * accelerator.out_width))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.accelerator = top = self.accelerator
        m.d.comb += [
            top.s_axis_tdata.eq(self.i.payload), top.s_axis_tvalid.eq(self.i.valid), self.i.ready.eq(top.s_axis_tready),
            self.o.payload.eq(top.m_axis_tdata), self.o.valid.eq(top.m_axis_tvalid), top.m_axis_tready.eq(self.o.ready),
        ]
        return m
