"""The UART: the baud divider, and the receiver and transmitter in Amaranth's simulator against a line model."""

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from streamc.errors import ConfigError
from streamc.rtl.uart import UARTReceiver, UARTTransmitter, baud_divisor


@pytest.mark.parametrize(("clock_hz", "baud", "divisor"), [
    (12e6, 115_200, 104),       # iCEBreaker oscillator: 115385 baud, 0.16 % fast
    (30e6, 115_200, 260),
    (100e6, 115_200, 868),
    (100e6, 25e6, 4),           # the simulations' rate
])
def test_divisor_is_the_nearest_ratio(clock_hz, baud, divisor):
    assert baud_divisor(clock_hz=clock_hz, baud=baud) == divisor


def test_divisor_must_hit_the_rate_within_two_percent():
    with pytest.raises(ConfigError, match=r"^a 25 MHz clock divided by 8 makes 3125000 baud, 4\.2% off "
                                          r"3000000 baud; at most 2% works: choose a baud rate or clock "
                                          r"that divide more evenly$"):
        baud_divisor(clock_hz=25e6, baud=3_000_000)


def test_divisor_needs_four_cycles_per_bit():
    with pytest.raises(ConfigError, match=r"^a 12 MHz clock cannot run a UART at 4000000 baud: that is 3\.00 "
                                          r"cycles per bit, and the UART needs at least 4 \(at most 3000000 baud\)$"):
        baud_divisor(clock_hz=12e6, baud=4e6)


def test_divisor_must_be_an_integer_of_four_or_more():
    with pytest.raises(ConfigError, match=r"^UART divisor must be an integer of at least 4 cycles per bit, not 3$"):
        UARTReceiver(divisor=3)
    with pytest.raises(ConfigError, match=r"^UART divisor must be an integer of at least 4 cycles per bit, not 4\.5$"):
        UARTTransmitter(divisor=4.5)


def line_events(data: bytes, bit_ticks: float, start: float = 0.0) -> list[tuple[int, int]]:
    """Line levels for 8N1 ``data``: (cycle, level) pairs, bit edges ``bit_ticks`` cycles apart from ``start``."""
    events, t = [], start
    for byte in data:
        for bit in [0, *((byte >> k) & 1 for k in range(8)), 1]:
            events.append((round(t), bit))
            t += bit_ticks
    return events


def run_receiver(divisor: int, events: list[tuple[int, int]], *, take=lambda cycle: True, cycles: int):
    """Apply line ``events`` (cycle, level) to a receiver; collect the bytes it offers while ``take(cycle)``."""
    dut = UARTReceiver(divisor=divisor)
    received, overrun = [], []

    async def bench(ctx):
        pending = list(events)
        for cycle in range(cycles):
            while pending and pending[0][0] <= cycle:
                ctx.set(dut.rx, pending.pop(0)[1])
            ctx.set(dut.o.ready, take(cycle))
            await ctx.tick()
        overrun.append(ctx.get(dut.overrun))

    async def monitor(ctx):
        async for _, _, valid, ready, payload in ctx.tick().sample(dut.o.valid, dut.o.ready, dut.o.payload):
            if valid and ready:
                received.append(payload)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_testbench(monitor, background=True)
    sim.run()
    return bytes(received), bool(overrun[0])


DATA = bytes([0x00, 0xFF, 0xA5, 0x5A, 0x01, 0x80, 0x3C])


@pytest.mark.parametrize("rate_error", [-0.02, 0.0, 0.02])
@pytest.mark.parametrize("divisor", [4, 16])
def test_receiver_takes_bytes_from_a_line_off_by_two_percent(divisor, rate_error):
    bit_ticks = divisor * (1 + rate_error)
    events = line_events(DATA, bit_ticks, start=3.3)
    received, overrun = run_receiver(divisor, events, cycles=round(12 * len(DATA) * bit_ticks))
    assert received == DATA
    assert not overrun


def test_receiver_ignores_a_glitch_and_drops_a_byte_without_stop_bit():
    divisor = 16
    glitch = [(10, 0), (13, 1)]                     # shorter than half a bit
    bad = line_events(b"\x55", divisor, start=40)
    bad[-1] = (bad[-1][0], 0)                       # stop bit low: a framing error ...
    bad.append((bad[-1][0] + 3 * divisor, 1))       # ... the line stays low (a break), then recovers
    good = line_events(b"\x42", divisor, start=bad[-1][0] + 2 * divisor)
    received, _ = run_receiver(divisor, glitch + bad + good, cycles=good[-1][0] + 3 * divisor)
    assert received == b"\x42"


def test_receiver_flags_an_overrun_and_keeps_the_newest_byte():
    divisor = 4
    events = line_events(b"\x11\x22\x33", divisor, start=2)
    ends = [round(2 + 10 * divisor * k) for k in (1, 2, 3)]
    # Take nothing until the third byte is in: the first two are replaced.
    received, overrun = run_receiver(divisor, events, take=lambda cycle: cycle > ends[2] + divisor,
                                     cycles=ends[2] + 3 * divisor)
    assert received == b"\x33"
    assert overrun


def test_transmitter_sends_back_to_back_and_a_receiver_gets_every_byte():
    divisor = 5
    m = Module()
    m.submodules.tx = tx = UARTTransmitter(divisor=divisor)
    m.submodules.rx = rx = UARTReceiver(divisor=divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    received, edges = [], []

    async def send(ctx):
        for byte in DATA:
            ctx.set(tx.i.payload, byte)
            ctx.set(tx.i.valid, 1)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)

    async def receive(ctx):
        ctx.set(rx.o.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(rx.o.valid, rx.o.payload):
            if valid:
                received.append(payload)
            if len(received) == len(DATA):
                return

    async def watch_line(ctx):
        cycle, level = 0, 1
        async for _, _, line in ctx.tick().sample(tx.tx):
            if line != level:
                edges.append(cycle)
                level = line
            cycle += 1

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(send)
    sim.add_testbench(receive)
    sim.add_testbench(watch_line, background=True)
    sim.run_until(1e-6 * divisor * 10 * (len(DATA) + 3))
    assert bytes(received) == DATA
    # Every level lasts a whole number of bits, and the bytes follow each other without idle time.
    assert all((later - earlier) % divisor == 0 for earlier, later in zip(edges, edges[1:]))
    assert edges[-1] - edges[0] < 10 * divisor * len(DATA)
