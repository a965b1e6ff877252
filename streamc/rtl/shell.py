"""The board shell: the accelerator behind a UART, speaking the framing protocol of ``docs/board_protocol.md``.

::

    uart_rx -> UARTReceiver -> byte FIFO -> FrameAssembler -> accelerator
    accelerator -> ResultSerializer -> UARTTransmitter -> uart_tx

The accelerator is instantiated from its Verilog, as a black box named ``streamc_top`` (what ``streamc
build`` writes to ``verilog/streamc_top.v``): the shell's Verilog needs that file beside it in synthesis and
simulation. This keeps the shell independent of the model — it needs only the stream geometry in a
:class:`~streamc.protocol.FrameFormat` — and a board build reuses the accelerator Verilog that simulation
verified, instead of elaborating the accelerator a second time.
"""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import Cat, ClockSignal, Instance, Module, ResetSignal, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from streamc.protocol import RESULT_BYTE, START_BYTE, FrameFormat

from .stream import StreamFIFO
from .uart import UARTReceiver, UARTTransmitter, baud_divisor

__all__ = ["ACCELERATOR_MODULE", "BoardShell", "FrameAssembler", "ResultSerializer", "SHELL_MODULE",
           "shell_verilog"]

ACCELERATOR_MODULE = "streamc_top"
SHELL_MODULE = "streamc_board"
#: Bytes the shell buffers between the UART receiver and the frame assembler: slack for the cycles the
#: accelerator holds its input back (the receiver itself holds one byte for one byte time).
RX_FIFO_DEPTH = 16
#: Heartbeat LED half-period.
HEARTBEAT_HZ = 1


class FrameAssembler(wiring.Component):
    """Turns protocol bytes into the accelerator's input beats.

    Idle, it drops every byte but :data:`~streamc.protocol.START_BYTE`. After a start byte it takes the
    frame's ``frame_format.in_beats * frame_format.in_beat_bytes`` data bytes whatever their values,
    each beat's bytes least significant first, puts out each beat as soon as its last byte is in, and
    after the frame's last byte is idle again. While a beat waits for ``o.ready``, no byte is taken.

    A data byte is held a cycle in a register of its own before it shifts into the beat, so that the beat's
    enable is a flip-flop, which can be copied beside the beat's bits (:mod:`streamc.fanout_copies`) wherever the
    accelerator's first stage pulls them: through the byte FIFO's valid, the enable of the digits MLP's 256-bit beat
    on half an ECP5-85F took 9.9 ns. A byte every other cycle is still far faster than the UART.

    Parameters
    ----------
    frame_format : FrameFormat

    Members
    -------
    i : In(stream.Signature(8))
        Bytes from the UART.
    o : Out(stream.Signature(unsigned(in_elems * in_width)))
        Input beats of the accelerator.
    """

    def __init__(self, *, frame_format: FrameFormat):
        self._format = frame_format
        super().__init__({"i": In(stream.Signature(8)),
                          "o": Out(stream.Signature(unsigned(frame_format.in_beat_bits)))})

    def elaborate(self, platform):
        m = Module()
        fmt = self._format
        beat = Signal(8 * fmt.in_beat_bytes)
        byte_index = Signal(range(fmt.in_beat_bytes))
        beat_index = Signal(range(fmt.in_beats))
        m.d.comb += self.o.payload.eq(beat[:fmt.in_beat_bits])
        byte = Signal(8)
        # Set only in the data state, so that it alone enables the beat.
        held = Signal()
        last_byte, last_beat = byte_index == fmt.in_beat_bytes - 1, beat_index == fmt.in_beats - 1
        m.d.sync += held.eq(0)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(held):
            # The first byte shifts down to the bottom: bytes arrive least significant first.
            m.d.sync += [beat.eq(Cat(beat[8:], byte)), byte_index.eq(byte_index + 1)]
            with m.If(last_byte):
                m.d.sync += [self.o.valid.eq(1), byte_index.eq(0), beat_index.eq(beat_index + 1)]

        with m.FSM():
            with m.State("idle"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & (self.i.payload == START_BYTE)):
                    m.d.sync += [byte_index.eq(0), beat_index.eq(0)]
                    m.next = "data"
            with m.State("data"):
                # A byte waits for the beat before it to leave and for the byte before it to shift in.
                m.d.comb += self.i.ready.eq(~self.o.valid & ~held)
                with m.If(self.i.valid & self.i.ready):
                    m.d.sync += [byte.eq(self.i.payload), held.eq(1)]
                with m.If(held & last_byte & last_beat):
                    m.next = "idle"
        return m


class ResultSerializer(wiring.Component):
    """Turns the accelerator's output beats into protocol bytes.

    Before the first beat of every frame (every ``frame_format.out_beats`` beats) it sends
    :data:`~streamc.protocol.RESULT_BYTE`; each beat goes out as ``frame_format.out_beat_bytes`` bytes, least
    significant first, the unused top bits of the last byte zero.

    Parameters
    ----------
    frame_format : FrameFormat

    Members
    -------
    i : In(stream.Signature(unsigned(out_elems * out_width)))
        Output beats of the accelerator.
    o : Out(stream.Signature(8))
        Bytes for the UART.
    """

    def __init__(self, *, frame_format: FrameFormat):
        self._format = frame_format
        super().__init__({"i": In(stream.Signature(unsigned(frame_format.out_beat_bits))),
                          "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        fmt = self._format
        held = Signal(8 * fmt.out_beat_bytes)
        byte_index = Signal(range(fmt.out_beat_bytes))
        beat_index = Signal(range(fmt.out_beats))

        with m.FSM():
            with m.State("wait"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += [held.eq(self.i.payload), byte_index.eq(0)]
                    with m.If(beat_index == 0):
                        m.next = "header"
                    with m.Else():
                        m.next = "bytes"
            with m.State("header"):
                m.d.comb += [self.o.payload.eq(RESULT_BYTE), self.o.valid.eq(1)]
                with m.If(self.o.ready):
                    m.next = "bytes"
            with m.State("bytes"):
                m.d.comb += [self.o.payload.eq(held.word_select(byte_index, 8)), self.o.valid.eq(1)]
                with m.If(self.o.ready):
                    m.d.sync += byte_index.eq(byte_index + 1)
                    with m.If(byte_index == fmt.out_beat_bytes - 1):
                        with m.If(beat_index == fmt.out_beats - 1):
                            m.d.sync += beat_index.eq(0)
                        with m.Else():
                            m.d.sync += beat_index.eq(beat_index + 1)
                        m.next = "wait"
        return m


class BoardShell(wiring.Component):
    """The accelerator between a UART receiver and transmitter, with a heartbeat LED.

    Runs in the ``sync`` domain; the accelerator gets that domain's clock and reset on its ``clk`` and
    ``rst`` ports. A board build wraps this component in a platform top that makes the ``sync`` domain
    (from a PLL at ``clock_hz``), connects ``uart_rx``/``uart_tx`` to the board's UART pins and ``led`` to
    an LED, and adds the accelerator's Verilog (module ``accelerator_module``) to the sources.

    Parameters
    ----------
    frame_format : FrameFormat
        The accelerator's stream geometry (:meth:`FrameFormat.from_dataflow`).
    clock_hz : float
        Frequency of the ``sync`` clock.
    baud : float
        UART rate; ``clock_hz / baud`` must be at least 4 and within 2 % of an integer ratio
        (:func:`~streamc.rtl.uart.baud_divisor`).
    accelerator_module : str
        Name of the accelerator's Verilog module.

    Members
    -------
    uart_rx : In(1)
        Serial data from the host, idle high.
    uart_tx : Out(1)
        Serial data to the host, idle high.
    led : Out(1)
        Toggles every ``1 / (2 * HEARTBEAT_HZ)`` seconds while the clock runs.
    overrun : Out(1)
        Sticky: a received byte was lost (the host sent faster than the accelerator took frames).

    Attributes
    ----------
    divisor : int
        Clock cycles per UART bit.
    """

    def __init__(self, *, frame_format: FrameFormat, clock_hz: float, baud: float,
                 accelerator_module: str = ACCELERATOR_MODULE):
        self.divisor = baud_divisor(clock_hz=clock_hz, baud=baud)
        self._format = frame_format
        self._clock_hz = clock_hz
        self._accelerator_module = accelerator_module
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "led": Out(1), "overrun": Out(1)})

    def elaborate(self, platform):
        m = Module()
        fmt = self._format
        m.submodules.rx = rx = UARTReceiver(divisor=self.divisor)
        m.submodules.rx_fifo = rx_fifo = StreamFIFO(width=8, depth=RX_FIFO_DEPTH)
        m.submodules.assembler = assembler = FrameAssembler(frame_format=fmt)
        m.submodules.serializer = serializer = ResultSerializer(frame_format=fmt)
        m.submodules.tx = tx = UARTTransmitter(divisor=self.divisor)
        m.d.comb += [rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx), self.overrun.eq(rx.overrun)]
        wiring.connect(m, rx.o, rx_fifo.i)
        wiring.connect(m, rx_fifo.o, assembler.i)
        wiring.connect(m, serializer.o, tx.i)
        m.submodules.accelerator = Instance(
            self._accelerator_module,
            i_clk=ClockSignal("sync"),
            i_rst=ResetSignal("sync"),
            i_s_axis_tdata=assembler.o.payload,
            i_s_axis_tvalid=assembler.o.valid,
            o_s_axis_tready=assembler.o.ready,
            o_m_axis_tdata=serializer.i.payload,
            o_m_axis_tvalid=serializer.i.valid,
            i_m_axis_tready=serializer.i.ready,
        )

        half_period = max(1, round(self._clock_hz / (2 * HEARTBEAT_HZ)))
        heartbeat = Signal(range(half_period))
        with m.If(heartbeat == half_period - 1):
            m.d.sync += [heartbeat.eq(0), self.led.eq(~self.led)]
        with m.Else():
            m.d.sync += heartbeat.eq(heartbeat + 1)
        return m


def shell_verilog(*, frame_format: FrameFormat, clock_hz: float, baud: float,
                  accelerator_module: str = ACCELERATOR_MODULE, name: str = SHELL_MODULE) -> str:
    """Verilog of a :class:`BoardShell` as module ``name``, with ports ``clk``, ``rst`` (synchronous, active
    high), ``uart_rx``, ``uart_tx``, ``led`` and ``overrun``; it instantiates ``accelerator_module``, whose
    Verilog must be compiled with it."""
    shell = BoardShell(frame_format=frame_format, clock_hz=clock_hz, baud=baud, accelerator_module=accelerator_module)
    return verilog.convert(shell, name=name, emit_src=False)
