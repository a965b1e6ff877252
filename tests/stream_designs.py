"""Tiny stream designs with the accelerator's AXI-Stream style ports, for the tool-runner tests."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class AddOnePipeline(wiring.Component):
    """Each output element is its input element + 1 (mod 2**width), through one register stage.

    Parameters
    ----------
    drop_beat
        If given, the beat accepted at this index (counting from 0) is swallowed without an
        output, so a consumer waiting for whole frames deadlocks.
    accept_every
        The input is ready only on every ``accept_every``-th cycle (a free-running count), so that a
        beat takes that many cycles at full rate.
    """

    def __init__(self, *, elems: int, width: int, drop_beat: int | None = None, accept_every: int = 1):
        self._elems = elems
        self._width = width
        self._drop_beat = drop_beat
        self._accept_every = accept_every
        super().__init__(
            {
                "s_axis_tdata": In(elems * width),
                "s_axis_tvalid": In(1),
                "s_axis_tready": Out(1),
                "m_axis_tdata": Out(elems * width),
                "m_axis_tvalid": Out(1),
                "m_axis_tready": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        w = self._width
        accepted = Signal(16)
        keep = 1 if self._drop_beat is None else accepted != self._drop_beat
        ready = ~self.m_axis_tvalid | self.m_axis_tready
        if self._accept_every > 1:
            turn = Signal(range(self._accept_every))
            m.d.sync += turn.eq(Mux(turn == self._accept_every - 1, 0, turn + 1))
            ready &= turn == 0
        m.d.comb += self.s_axis_tready.eq(ready)
        with m.If(self.s_axis_tvalid & self.s_axis_tready):
            m.d.sync += [
                accepted.eq(accepted + 1),
                self.m_axis_tvalid.eq(keep),
                *(
                    self.m_axis_tdata[j * w : (j + 1) * w].eq(self.s_axis_tdata[j * w : (j + 1) * w] + 1)
                    for j in range(self._elems)
                ),
            ]
        with m.Elif(self.m_axis_tready):
            m.d.sync += self.m_axis_tvalid.eq(0)
        return m
