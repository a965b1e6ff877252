"""The top module of a board build: the oscillator pad, a PLL to the design clock, and a core on the UART pins.

The core is any component with ``uart_rx`` (in), ``uart_tx`` and ``led`` (out) that runs in the ``sync``
domain: the board shell (:class:`~streamc.rtl.shell.BoardShell`) in a build.
"""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal

from .pll import PLL, ECP5PLLSettings, GowinPLLSettings, ICE40PLLSettings

__all__ = ["BOARD_TOP", "PORTS", "BoardTop", "board_top_verilog"]

BOARD_TOP = "streamc_board_top"
#: The top module's port for each board pin role (as :func:`streamc.boards.constraints` takes them).
PORTS = {"clk": "clk_pad", "uart_rx": "uart_rx", "uart_tx": "uart_tx", "led": "led"}


class BoardTop(Elaboratable):
    """The PLL and the core, with the board's pins as ports (named as in :data:`PORTS`).

    Parameters
    ----------
    pll : ICE40PLLSettings, ECP5PLLSettings or GowinPLLSettings
        The PLL's dividers for the design clock.
    core : wiring.Component
        Has ``uart_rx``, ``uart_tx`` and ``led``; runs in ``sync``.
    led_inverted : bool
        True where the board's LED is active low.
    """

    def __init__(self, *, pll: ICE40PLLSettings | ECP5PLLSettings | GowinPLLSettings, core, led_inverted: bool = False):
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
