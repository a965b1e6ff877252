"""cocotb test that streams frames through an AXI-Stream style accelerator top: the cocotb engine of
:func:`streamc.sim.runner.simulate` (the C++ harness ``stream_harness.cpp`` is the other, and the default).

Run by :mod:`streamc.sim.cocotb_engine`, never collected by pytest. It reads and writes the files of
:mod:`streamc.sim.run_files` in the folder named by ``STREAMC_STREAM_TB_DIR``.

The device under test has ports ``clk``, ``rst`` (synchronous, active high),
``s_axis_tdata``/``s_axis_tvalid``/``s_axis_tready`` and
``m_axis_tdata``/``m_axis_tvalid``/``m_axis_tready``.

The signals are driven directly rather than through cocotbext-axi's source and sink,
which are several times slower on long runs of test vectors. Every cycle the test drives
new values just after the rising edge, then samples the handshake in the read-only phase
of the same time step, when all combinational paths (``tready`` may depend on
``tvalid``) have settled. A beat transfers on the next rising edge if ``valid`` and
``ready`` were both high at that sample: this is correct on Verilator and event-driven
simulators such as Icarus alike.

Phase 1 sends every frame with random input gaps and random output back-pressure.
Phase 2 re-sends the first frames at full rate, for the runner to measure steady-state cycles per frame
and the latency of a frame through an empty pipeline.
"""

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from . import run_files
from .beats import beats_to_words, words_to_beats

RUN_DIR_ENV = "STREAMC_STREAM_TB_DIR"


@dataclass
class PhaseRecord:
    """What one phase saw: the output beats, the cycle of every handshake, and how it ended."""

    output_beats: list[int] = field(default_factory=list)
    input_cycles: list[int] = field(default_factory=list)
    output_cycles: list[int] = field(default_factory=list)
    inputs_accepted: int = 0
    outputs_received: int = 0
    cycles: int = 0
    failure: str | None = None  # "timeout" or "surplus", as in run_files' result


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

        The phase fails (:attr:`PhaseRecord.failure`) when it has not finished within ``timeout_cycles``,
        or more output beats arrive than expected. A design may put out its last beat before it has taken
        all its input (a strided window does not wait for rows no output reads); the phase then goes on
        until the rest of the input is taken.
        """
        dut = self._dut
        s_tdata, s_tvalid, s_tready = dut.s_axis_tdata, dut.s_axis_tvalid, dut.s_axis_tready
        m_tdata, m_tvalid, m_tready = dut.m_axis_tdata, dut.m_axis_tvalid, dut.m_axis_tready
        clk = dut.clk
        record = PhaseRecord()
        n_inputs = len(input_beats)
        holding = False  # a beat is offered and must stay offered until accepted
        valid_high = ready_high = False  # what the signals are driven to, to skip redundant writes
        start = self._cycle
        limit = start + timeout_cycles

        while record.outputs_received < n_output_beats or record.inputs_accepted < n_inputs:
            if self._cycle >= limit:
                record.failure = "timeout"
                break
            # Drive this cycle's values just after the rising edge.
            if not holding and record.inputs_accepted < n_inputs and (rng is None or rng.random() >= input_gap_prob):
                s_tdata.value = input_beats[record.inputs_accepted]
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
                record.outputs_received += 1
                if record.outputs_received > n_output_beats:
                    record.failure = "surplus"
                    break
                record.output_beats.append(_unsigned(m_tdata.value))
                record.output_cycles.append(self._cycle)
            if holding and s_tready.value == 1:
                record.input_cycles.append(self._cycle)
                record.inputs_accepted += 1
                holding = False

            await RisingEdge(clk)
            self._cycle += 1
        if record.failure is None:  # a failed phase ends the test, maybe in the read-only phase
            s_tvalid.value = 0
            m_tready.value = 0
        record.cycles = self._cycle - start
        return record


def _unsigned(value) -> int:
    """A sampled bus as an integer: cocotb gives a one-bit port as a ``Logic``, a wider one as a ``LogicArray``."""
    return int(value.to_unsigned()) if hasattr(value, "to_unsigned") else int(value)


@cocotb.test()
async def stream_frames(dut):
    """Stream all frames with gaps and back-pressure, then the first ones again at full rate."""
    folder = Path(os.environ[RUN_DIR_ENV])
    config = run_files.read_config(folder / run_files.CONFIG)
    in_words, out_words = config["in_words"], config["out_words"]
    in_beats, out_beats = config["in_beats_per_frame"], config["out_beats_per_frame"]
    n_frames, n_full_rate = config["frames"], config["full_rate_frames"]
    input_beats = words_to_beats(np.fromfile(folder / run_files.FRAMES, dtype="<u4").reshape(-1, in_words))

    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.s_axis_tvalid.value = 0
    dut.s_axis_tdata.value = 0
    dut.m_axis_tready.value = 0
    dut.rst.value = 1
    for _ in range(config["reset_cycles"]):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    driver = StreamDriver(dut)
    randomized = full_rate = await driver.run_phase(
        input_beats=input_beats[: n_frames * in_beats], n_output_beats=n_frames * out_beats,
        rng=random.Random(config["seed"]), input_gap_prob=config["input_gap_prob"],
        output_stall_prob=config["output_stall_prob"], timeout_cycles=config["randomized_budget"])
    phase = "randomized"
    if randomized.failure is None:
        phase = "full_rate"
        full_rate = await driver.run_phase(
            input_beats=input_beats[: n_full_rate * in_beats], n_output_beats=n_full_rate * out_beats, rng=None,
            input_gap_prob=0.0, output_stall_prob=0.0, timeout_cycles=config["full_rate_budget"])
    last = full_rate if phase == "full_rate" else randomized
    if last.failure is None:
        beats_to_words(randomized.output_beats, out_words).tofile(folder / run_files.OUTPUTS)
        beats_to_words(full_rate.output_beats, out_words).tofile(folder / run_files.RERUN_OUTPUTS)
    done = last.failure is None
    result = {
        "phase": phase,
        "failure": last.failure,
        "cycles": driver.cycle,
        "inputs_accepted": last.inputs_accepted,
        "outputs_received": last.outputs_received,
        "randomized_cycles": randomized.cycles,
        "full_rate_cycles": full_rate.cycles if done else 0,
        "frame_end_cycles": [full_rate.output_cycles[(k + 1) * out_beats - 1] for k in range(n_full_rate)] if done else [],
        "first_input_cycle": full_rate.input_cycles[0] if done else 0,
        "first_output_cycle": full_rate.output_cycles[0] if done else 0,
    }
    (folder / run_files.RESULT).write_text(json.dumps(result))
    assert done, f"the {phase} phase failed: {last.failure}"
