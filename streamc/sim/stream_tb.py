"""cocotb test that streams frames through an AXI-Stream style accelerator top.

Run by :func:`streamc.sim.runner.simulate`, never collected by pytest. The runner writes
the frames (``.npy``) and a small JSON configuration into its build folder and names that
JSON file in ``STREAMC_STREAM_TB_CONFIG``; this test writes the hardware's outputs
(``.npy``) and a result JSON next to them, and the runner compares them with the
expected outputs.

The device under test has ports ``clk``, ``rst`` (synchronous, active high),
``s_axis_tdata``/``s_axis_tvalid``/``s_axis_tready`` and
``m_axis_tdata``/``m_axis_tvalid``/``m_axis_tready``. Element ``j`` of a beat occupies
bits ``[j*width, (j+1)*width)``.

The signals are driven directly rather than through cocotbext-axi's source and sink,
which are several times slower on long runs of test vectors. Every cycle the test drives
new values just after the rising edge, then samples the handshake in the read-only phase
of the same time step, when all combinational paths (``tready`` may depend on
``tvalid``) have settled. A beat transfers on the next rising edge if ``valid`` and
``ready`` were both high at that sample: this is correct on Verilator and event-driven
simulators such as Icarus alike.

Phase 1 sends every frame with random input gaps and random output back-pressure.
Phase 2 re-sends up to 32 frames at full rate to measure steady-state cycles per frame
and the latency of a frame through an empty pipeline.
"""

import json
import os
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

CONFIG_ENV = "STREAMC_STREAM_TB_CONFIG"
FULL_RATE_FRAMES = 32
RESET_CYCLES = 4


@dataclass
class PhaseRecord:
    """What one phase saw: the output beats and the cycle of every handshake."""

    output_beats: list[int] = field(default_factory=list)
    input_cycles: list[int] = field(default_factory=list)
    output_cycles: list[int] = field(default_factory=list)
    cycles: int = 0


class PhaseFailed(Exception):
    """A phase could not complete: a deadlock (cycle budget exhausted) or surplus outputs.

    Parameters
    ----------
    message
        What went wrong.
    output_beats
        Output beats received in the phase before it failed.
    """

    def __init__(self, message: str, *, output_beats: int):
        super().__init__(message)
        self.output_beats = output_beats


def pack_beats(elements: np.ndarray, elems_per_beat: int, width: int) -> list[int]:
    """Pack a flat array of raw element bit patterns into beat integers."""
    beats = elements.reshape(-1, elems_per_beat)
    packed = [0] * len(beats)
    for j in range(elems_per_beat):
        column = beats[:, j].tolist()
        shift = j * width
        for index, value in enumerate(column):
            packed[index] |= value << shift
    return packed


def unpack_beats(beats: list[int], elems_per_beat: int, width: int) -> np.ndarray:
    """Split beat integers into a flat uint64 array of elements, in stream order."""
    mask = (1 << width) - 1
    elements = np.empty((len(beats), elems_per_beat), dtype=np.uint64)
    for j in range(elems_per_beat):
        shift = j * width
        elements[:, j] = [(beat >> shift) & mask for beat in beats]
    return elements.reshape(-1)


class StreamDriver:
    """Drives the input stream and accepts the output stream, one clock cycle at a time.

    Parameters
    ----------
    dut
        The cocotb handle of the top module.
    """

    def __init__(self, dut):
        self._dut = dut
        self._cycle = 0

    @property
    def cycle(self) -> int:
        """Clock cycles driven so far, over all phases."""
        return self._cycle

    async def run_phase(
        self,
        *,
        input_beats: list[int],
        n_output_beats: int,
        rng: random.Random | None,
        input_gap_prob: float,
        output_stall_prob: float,
        timeout_cycles: int,
    ) -> PhaseRecord:
        """Send ``input_beats`` and collect ``n_output_beats``; ``rng=None`` means full rate.

        Raises
        ------
        PhaseFailed
            If the phase has not finished within ``timeout_cycles``, or more output beats arrive
            than expected. A design may put out its last beat before it has taken all its input (a
            strided window does not wait for rows no output reads); the phase then goes on until the
            rest of the input is taken.
        """
        dut = self._dut
        s_tdata, s_tvalid, s_tready = dut.s_axis_tdata, dut.s_axis_tvalid, dut.s_axis_tready
        m_tdata, m_tvalid, m_tready = dut.m_axis_tdata, dut.m_axis_tvalid, dut.m_axis_tready
        clk = dut.clk
        record = PhaseRecord()
        n_inputs = len(input_beats)
        next_input = 0
        holding = False  # a beat is offered and must stay offered until accepted
        valid_high = ready_high = False  # what the signals are driven to, to skip redundant writes
        start = self._cycle
        limit = start + timeout_cycles

        while len(record.output_beats) < n_output_beats or next_input < n_inputs:
            if self._cycle >= limit:
                s_tvalid.value = 0
                m_tready.value = 0
                raise PhaseFailed(
                    f"did not finish within {timeout_cycles} cycles: "
                    f"{next_input} of {n_inputs} input beats accepted, "
                    f"{len(record.output_beats)} of {n_output_beats} output beats received",
                    output_beats=len(record.output_beats),
                )
            # Drive this cycle's values just after the rising edge.
            if not holding and next_input < n_inputs and (rng is None or rng.random() >= input_gap_prob):
                s_tdata.value = input_beats[next_input]
                holding = True
            if holding != valid_high:
                s_tvalid.value = int(holding)
                valid_high = holding
            ready = rng is None or rng.random() >= output_stall_prob
            if ready != ready_high:
                m_tready.value = int(ready)
                ready_high = ready

            # Sample the handshakes once everything has settled; they take effect at the next edge.
            await ReadOnly()
            if ready and m_tvalid.value == 1:
                if len(record.output_beats) == n_output_beats:
                    raise PhaseFailed(f"more than the {n_output_beats} output beats expected arrived",
                                      output_beats=n_output_beats + 1)
                record.output_beats.append(_unsigned(m_tdata.value))
                record.output_cycles.append(self._cycle)
            if holding and s_tready.value == 1:
                record.input_cycles.append(self._cycle)
                next_input += 1
                holding = False

            await RisingEdge(clk)
            self._cycle += 1
        s_tvalid.value = 0
        m_tready.value = 0
        record.cycles = self._cycle - start
        return record


def _unsigned(value) -> int:
    """A sampled bus as an integer: cocotb gives a one-bit port as a ``Logic``, a wider one as a ``LogicArray``."""
    return int(value.to_unsigned()) if hasattr(value, "to_unsigned") else int(value)


def steady_state(record: PhaseRecord, *, out_beats_per_frame: int, n_frames: int) -> tuple[float | None, int]:
    """Median cycles between successive frames' last output beats, and the first frame's latency.

    The latency counts from the cycle the frame's first input beat was accepted to the
    cycle its first output beat was; the first frame goes through an empty pipeline.
    """
    last_beats = [record.output_cycles[(k + 1) * out_beats_per_frame - 1] for k in range(n_frames)]
    gaps = [later - earlier for earlier, later in zip(last_beats, last_beats[1:])]
    cycles_per_frame = float(statistics.median(gaps)) if gaps else None
    latency = record.output_cycles[0] - record.input_cycles[0]
    return cycles_per_frame, latency


@cocotb.test()
async def stream_frames(dut):
    """Stream all frames with gaps and back-pressure, then measure full-rate timing."""
    config_path = Path(os.environ[CONFIG_ENV])
    config = json.loads(config_path.read_text())
    folder = config_path.parent
    frames = np.load(folder / config["frames_file"])
    in_elems, in_width = config["in_elems"], config["in_width"]
    out_elems, out_width = config["out_elems"], config["out_width"]
    n_frames, n_in = frames.shape
    n_out = config["n_out"]
    in_beats_per_frame = n_in // in_elems
    out_beats_per_frame = n_out // out_elems
    n_full_rate = min(n_frames, FULL_RATE_FRAMES)
    input_beats = pack_beats(frames.reshape(-1), in_elems, in_width)

    def budget(frame_count: int) -> int:
        beats = frame_count * (in_beats_per_frame + out_beats_per_frame)
        return config["timeout_cycles"] or 1000 + 50 * beats

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.s_axis_tvalid.value = 0
    dut.s_axis_tdata.value = 0
    dut.m_axis_tready.value = 0
    dut.rst.value = 1
    for _ in range(RESET_CYCLES):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    driver = StreamDriver(dut)
    phases = {}
    for name, frame_count, rng, description in [
        ("randomized", n_frames, random.Random(config["seed"]), "random gaps and back-pressure"),
        ("full_rate", n_full_rate, None, "full rate"),
    ]:
        try:
            phases[name] = await driver.run_phase(
                input_beats=input_beats[: frame_count * in_beats_per_frame],
                n_output_beats=frame_count * out_beats_per_frame,
                rng=rng,
                input_gap_prob=config["input_gap_prob"],
                output_stall_prob=config["output_stall_prob"],
                timeout_cycles=budget(frame_count),
            )
        except PhaseFailed as error:
            frames_out = error.output_beats // out_beats_per_frame
            message = f"{description}, {frame_count} frames ({frames_out} came out whole): {error}"
            result = {"passed": False, "message": message, "cycles": driver.cycle}
            (folder / config["result_file"]).write_text(json.dumps(result))
            raise AssertionError(message) from None

    randomized, full_rate = phases["randomized"], phases["full_rate"]
    np.save(
        folder / config["outputs_file"],
        unpack_beats(randomized.output_beats, out_elems, out_width).reshape(n_frames, n_out),
    )
    np.save(
        folder / config["rerun_outputs_file"],
        unpack_beats(full_rate.output_beats, out_elems, out_width).reshape(n_full_rate, n_out),
    )
    cycles_per_frame, latency = steady_state(full_rate, out_beats_per_frame=out_beats_per_frame, n_frames=n_full_rate)
    result = {
        "passed": True,
        "message": "",
        "cycles": driver.cycle,
        "randomized_cycles": randomized.cycles,
        "full_rate_cycles": full_rate.cycles,
        "cycles_per_frame": cycles_per_frame,
        "latency_cycles": latency,
    }
    (folder / config["result_file"]).write_text(json.dumps(result))
