"""A UART (8 data bits, no parity, 1 stop bit; least significant bit first) as byte streams.

Both directions count ``divisor`` clock cycles per bit; :func:`baud_divisor` derives it from the
clock frequency and the baud rate and refuses rates the divider cannot hit closely enough.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from streamc.errors import ConfigError

__all__ = ["MAX_BAUD_ERROR", "MIN_DIVISOR", "UARTReceiver", "UARTTransmitter", "baud_divisor"]

#: Largest relative difference between the rate the divider makes and the rate asked for. Two UARTs
#: each off by this much drift apart by 2 * 2 % * 9.5 bits = 0.38 bit by the stop bit's middle, within
#: the half bit the receiver can take.
MAX_BAUD_ERROR = 0.02
#: The receiver samples a bit half a bit time after its start edge, plus two cycles of synchronizer:
#: with fewer than 4 cycles per bit it would sample the next bit.
MIN_DIVISOR = 4


def baud_divisor(*, clock_hz: float, baud: float) -> int:
    """Clock cycles per bit for ``baud`` bits per second from a ``clock_hz`` clock.

    Raises
    ------
    ConfigError
        If the clock is too slow for the rate (fewer than :data:`MIN_DIVISOR` cycles per bit), or the
        nearest divisor misses the rate by more than :data:`MAX_BAUD_ERROR`.
    """
    if clock_hz <= 0 or baud <= 0:
        raise ConfigError(f"clock and baud rate must be positive, not clock {clock_hz!r} Hz, baud {baud!r}")
    divisor = round(clock_hz / baud)
    if divisor < MIN_DIVISOR:
        raise ConfigError(f"a {clock_hz / 1e6:g} MHz clock cannot run a UART at {baud:.0f} baud: that is "
                          f"{clock_hz / baud:.2f} cycles per bit, and the UART needs at least {MIN_DIVISOR} "
                          f"(at most {clock_hz / MIN_DIVISOR:.0f} baud)")
    error = abs(clock_hz / divisor - baud) / baud
    if error > MAX_BAUD_ERROR:
        raise ConfigError(f"a {clock_hz / 1e6:g} MHz clock divided by {divisor} makes {clock_hz / divisor:.0f} "
                          f"baud, {error:.1%} off {baud:.0f} baud; at most {MAX_BAUD_ERROR:.0%} works: choose "
                          "a baud rate or clock that divide more evenly")
    return divisor


class _Countdown:
    """A bit-time counter that knows it is at zero from a register of its own: the handshake and the
    state machine wait on one flip-flop, not on a compare across the count (on the UP5K that compare,
    on the path into the count's own multiplexer, held the clock below 46 MHz)."""

    def __init__(self, divisor: int):
        self.count = Signal(range(divisor))
        self.zero = Signal(init=1)

    def load(self, value: int) -> list:
        return [self.count.eq(value), self.zero.eq(value == 0)]

    def step(self) -> list:
        return [self.count.eq(self.count - 1), self.zero.eq(self.count == 1)]


def _check_divisor(divisor: int) -> None:
    if not isinstance(divisor, int) or divisor < MIN_DIVISOR:
        raise ConfigError(f"UART divisor must be an integer of at least {MIN_DIVISOR} cycles per bit, "
                          f"not {divisor!r}")


class UARTReceiver(wiring.Component):
    """Receives 8N1 bytes on ``rx`` and offers each on a stream.

    The line is synchronized to the clock with two flip-flops. A falling edge while idle starts a
    byte; the start bit is checked again half a bit later (a shorter low pulse is a glitch and is
    ignored), then each data bit and the stop bit are sampled in their middle. A byte whose stop bit
    is low (a framing error, or a break) is dropped, and the receiver waits for the line to go high.

    A byte is held on ``o`` until taken. If it has not been taken when the next byte's stop bit
    arrives, it is replaced by the new byte and ``overrun`` goes high and stays high until reset:
    a consumer that keeps up (within one byte time) never loses a byte.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR` (see :func:`baud_divisor`).

    Members
    -------
    rx : In(1)
        The serial line, idle high; asynchronous to the clock.
    o : Out(stream.Signature(8))
        The received bytes.
    overrun : Out(1)
        A received byte was lost because ``o`` was not taken in time.
    """

    def __init__(self, *, divisor: int):
        _check_divisor(divisor)
        self._divisor = divisor
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)), "overrun": Out(1)})

    def elaborate(self, platform):
        m = Module()
        divisor = self._divisor
        line = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=1)
        timer = _Countdown(divisor)
        bit = Signal(range(8))
        shift = Signal(8)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.FSM():
            with m.State("idle"):
                with m.If(~line):
                    m.d.sync += timer.load(divisor // 2 - 1)
                    m.next = "start"
            with m.State("start"):
                with m.If(~timer.zero):
                    m.d.sync += timer.step()
                with m.Elif(~line):
                    m.d.sync += [timer.load(divisor - 1), bit.eq(0)]
                    m.next = "data"
                with m.Else():
                    m.next = "idle"
            with m.State("data"):
                with m.If(~timer.zero):
                    m.d.sync += timer.step()
                with m.Else():
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), timer.load(divisor - 1), bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "stop"
            with m.State("stop"):
                with m.If(~timer.zero):
                    m.d.sync += timer.step()
                with m.Elif(line):
                    m.d.sync += [self.o.payload.eq(shift), self.o.valid.eq(1)]
                    with m.If(self.o.valid & ~self.o.ready):
                        m.d.sync += self.overrun.eq(1)
                    m.next = "idle"
                with m.Else():
                    m.next = "break"
            with m.State("break"):
                with m.If(line):
                    m.next = "idle"
        return m


class UARTTransmitter(wiring.Component):
    """Sends each byte of a stream as 8N1 on ``tx``, back to back while bytes keep coming.

    ``i.ready`` is high while the line is idle or in the last cycle of a stop bit; a byte taken
    then starts its start bit on the next cycle. ``tx`` comes straight from a flip-flop, so the pin
    does not glitch.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR` (see :func:`baud_divisor`).

    Members
    -------
    i : In(stream.Signature(8))
        The bytes to send.
    tx : Out(1)
        The serial line, idle high.
    """

    def __init__(self, *, divisor: int):
        _check_divisor(divisor)
        self._divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        divisor = self._divisor
        # Start bit, data, stop bit, shifted out from bit 0; ones shift in, so an idle register is all ones.
        frame = Signal(10, init=(1 << 10) - 1)
        bits_left = Signal(range(11))
        timer = _Countdown(divisor)

        last_cycle = (bits_left == 0) | ((bits_left == 1) & timer.zero)
        m.d.comb += [self.i.ready.eq(last_cycle), self.tx.eq(frame[0])]
        with m.If(self.i.valid & last_cycle):
            m.d.sync += [frame.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))), bits_left.eq(10),
                         timer.load(divisor - 1)]
        with m.Elif(bits_left != 0):
            with m.If(~timer.zero):
                m.d.sync += timer.step()
            with m.Else():
                m.d.sync += [frame.eq(Cat(frame[1:], Const(1, 1))), bits_left.eq(bits_left - 1),
                             timer.load(divisor - 1)]
        return m
