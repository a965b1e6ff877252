"""The top module of a board build: the oscillator pad, a PLL to the design clock, and a core on the UART pins.

The core is any component with ``uart_rx`` (in), ``uart_tx`` and ``led`` (out) that runs in the ``sync``
domain: the board shell (:class:`~streamc.rtl.shell.BoardShell`) in a build, or :class:`PinHarness`
where only timing and resources matter.
"""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pll import PLL, ECP5PLLSettings, ICE40PLLSettings

__all__ = ["BOARD_TOP", "PORTS", "BoardTop", "PinHarness", "board_top_verilog"]

BOARD_TOP = "streamc_board_top"
#: The top module's port for each board pin role (as :func:`streamc.boards.constraints` takes them).
PORTS = {"clk": "clk_pad", "uart_rx": "uart_rx", "uart_tx": "uart_tx", "led": "led"}


class PinHarness(wiring.Component):
    """The accelerator's streams on two pins: a stand-in for the board shell when measuring timing.

    Input beats shift in one bit per cycle from ``uart_rx``, the input is valid every cycle that
    ``uart_rx`` was high, and the output is always taken; ``uart_tx`` is the registered parity of the
    output beat, so that no output bit is optimized away. Every path inside the accelerator stays
    as in the shell; the harness adds only single flip-flop stages.

    Parameters
    ----------
    in_bits, out_bits : int
        Widths of the accelerator's ``s_axis_tdata`` and ``m_axis_tdata``.
    accelerator_module : str
        The accelerator's Verilog module name.

    Members
    -------
    uart_rx : In(1)
    uart_tx : Out(1)
    led : Out(1)
        The top bit of a free-running counter.
    """

    def __init__(self, *, in_bits: int, out_bits: int, accelerator_module: str = "streamc_top"):
        self._in_bits, self._out_bits = in_bits, out_bits
        self._module = accelerator_module
        super().__init__({"uart_rx": In(1), "uart_tx": Out(1), "led": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        data, valid = Signal(self._in_bits, name="in_data"), Signal(name="in_valid")
        ready = Signal(name="in_ready")
        out_data, out_valid = Signal(self._out_bits, name="out_data"), Signal(name="out_valid")
        m.d.sync += [data.eq((data << 1) | self.uart_rx), valid.eq(self.uart_rx)]
        m.d.sync += self.uart_tx.eq(out_valid & out_data.xor())
        counter = Signal(24)
        m.d.sync += counter.eq(counter + 1)
        m.d.comb += self.led.eq(counter[-1])
        m.submodules.accelerator = Instance(
            self._module, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"), i_s_axis_tdata=data,
            i_s_axis_tvalid=valid, o_s_axis_tready=ready, o_m_axis_tdata=out_data, o_m_axis_tvalid=out_valid,
            i_m_axis_tready=1)
        return m


class BoardTop(Elaboratable):
    """The PLL and the core, with the board's pins as ports (named as in :data:`PORTS`).

    Parameters
    ----------
    pll : ICE40PLLSettings or ECP5PLLSettings
        The PLL's dividers for the design clock.
    core : wiring.Component
        Has ``uart_rx``, ``uart_tx`` and ``led``; runs in ``sync``.
    led_inverted : bool
        True where the board's LED is active low.
    """

    def __init__(self, *, pll: ICE40PLLSettings | ECP5PLLSettings, core, led_inverted: bool = False):
        self._pll, self._core, self._led_inverted = pll, core, led_inverted
        self.clk_pad, self.uart_rx, self.uart_tx, self.led = (Signal(name=PORTS[role]) for role in PORTS)

    def ports(self) -> list[Signal]:
        return [self.clk_pad, self.uart_rx, self.uart_tx, self.led]

    def elaborate(self, platform) -> Module:
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.submodules.pll = PLL(settings=self._pll, pad=self.clk_pad)
        m.submodules.core = core = self._core
        m.d.comb += [core.uart_rx.eq(self.uart_rx), self.uart_tx.eq(core.uart_tx),
                     self.led.eq(~core.led if self._led_inverted else core.led)]
        return m


def board_top_verilog(top: BoardTop) -> str:
    """Verilog of ``top`` as module :data:`BOARD_TOP`."""
    return verilog.convert(top, name=BOARD_TOP, ports=top.ports(), emit_src=False)
