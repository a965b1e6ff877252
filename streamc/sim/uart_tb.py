"""cocotb test that talks to a board shell over its UART pins, as the host would.

Run by :class:`streamc.host.SimTransport`, never collected by pytest. The transport writes the bytes to
send (``rx_file``) and a JSON configuration into a run folder and names the JSON file in
``STREAMC_UART_TB_CONFIG``; this test writes every byte the shell sent back (``tx_file``) and a result
JSON beside them.

The device under test has ports ``clk``, ``rst`` (synchronous, active high), ``uart_rx`` and ``uart_tx``.
The UART model sends 8N1 bytes back to back, ``bit_cycles`` clock cycles per bit, with its bit edges
half a clock period away from the rising edges (as an asynchronous line would be, but without a race
against the clock); it receives by waiting for the falling edge of a start bit and sampling each bit
in its middle. It waits on timers and edges, not on every clock cycle, so a long run stays quick.
"""

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, FallingEdge, First, RisingEdge, Timer

CONFIG_ENV = "STREAMC_UART_TB_CONFIG"
CLOCK_PERIOD_NS = 10
RESET_CYCLES = 4


class UARTModel:
    """The host end of a UART line.

    Parameters
    ----------
    tx_line
        The handle the model drives (the device's ``uart_rx``).
    rx_line
        The handle the model listens to (the device's ``uart_tx``).
    bit_ns
        Length of one bit in nanoseconds.
    """

    def __init__(self, *, tx_line, rx_line, bit_ns: int):
        self._tx, self._rx, self._bit_ns = tx_line, rx_line, bit_ns
        self.received = bytearray()
        self.framing_errors = 0
        self.wanted = 0
        self.done = Event()

    async def send(self, data: bytes) -> None:
        """Send ``data`` as 8N1 bytes, back to back."""
        for byte in data:
            for bit in [0, *((byte >> k) & 1 for k in range(8)), 1]:
                self._tx.value = bit
                await Timer(self._bit_ns, unit="ns")

    async def receive_forever(self) -> None:
        """Collect bytes; set :attr:`done` once :attr:`wanted` bytes are in."""
        half = self._bit_ns // 2
        while True:
            await FallingEdge(self._rx)
            await Timer(half, unit="ns")
            if self._rx.value != 0:
                continue  # a glitch, not a start bit
            byte = 0
            for k in range(8):
                await Timer(self._bit_ns, unit="ns")
                byte |= int(self._rx.value) << k
            await Timer(self._bit_ns, unit="ns")
            if self._rx.value != 1:
                self.framing_errors += 1
                continue
            self.received.append(byte)
            if len(self.received) >= self.wanted:
                self.done.set()


@cocotb.test()
async def uart_exchange(dut):
    """Send the rx bytes, collect the expected number of tx bytes, or give up at the cycle budget."""
    config_path = Path(os.environ[CONFIG_ENV])
    config = json.loads(config_path.read_text())
    folder = config_path.parent
    to_send = (folder / config["rx_file"]).read_bytes()
    bit_ns = config["bit_cycles"] * CLOCK_PERIOD_NS

    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.uart_rx.value = 1
    dut.rst.value = 1
    for _ in range(RESET_CYCLES):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)
    start_ns = cocotb.utils.get_sim_time("ns")

    uart = UARTModel(tx_line=dut.uart_rx, rx_line=dut.uart_tx, bit_ns=bit_ns)
    uart.wanted = config["expect_bytes"]
    cocotb.start_soon(uart.receive_forever())
    cocotb.start_soon(uart.send(to_send))
    if uart.wanted:
        await First(uart.done.wait(), Timer(config["timeout_cycles"] * CLOCK_PERIOD_NS, unit="ns"))
    else:
        await Timer(config["timeout_cycles"] * CLOCK_PERIOD_NS, unit="ns")
    cycles = int((cocotb.utils.get_sim_time("ns") - start_ns) // CLOCK_PERIOD_NS)

    (folder / config["tx_file"]).write_bytes(bytes(uart.received))
    result = {"cycles": cycles, "received": len(uart.received), "framing_errors": uart.framing_errors,
              "overrun": int(dut.overrun.value)}
    (folder / config["result_file"]).write_text(json.dumps(result))
