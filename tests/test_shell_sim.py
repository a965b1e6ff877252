"""The board shell: its frame assembler and result serializer in Amaranth's simulator, and the whole
shell with the digits accelerator in Verilator behind a cocotb UART model."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from amaranth.sim import Simulator

from streamc.pipeline.steps import expected_hw_outputs
from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.host import Board, SimTransport, compile_design
from streamc.protocol import RESULT_BYTE, START_BYTE, FrameFormat
from streamc.rtl.shell import FrameAssembler, ResultSerializer

DIGITS = Path(__file__).parent.parent / "build_configs" / "models"
#: Frames of the digits demo the Verilator test classifies (the 100 of the issue take ~5 s more).
SIM_FRAMES = 20

FORMATS = {
    "two bytes per beat": FrameFormat(in_elems=3, in_width=5, in_beats=4, out_elems=2, out_width=7, out_beats=3),
    "one byte, one beat": FrameFormat(in_elems=8, in_width=1, in_beats=1, out_elems=1, out_width=8, out_beats=1),
    "wide beats": FrameFormat(in_elems=7, in_width=4, in_beats=2, out_elems=3, out_width=10, out_beats=2),
}


def random_bits(rng, frames: int, count: int, width: int) -> np.ndarray:
    return rng.integers(0, 1 << width, size=(frames, count), dtype=np.uint64)


def beats_of(bits: np.ndarray, elems: int, width: int) -> list[int]:
    return [sum(int(e) << (j * width) for j, e in enumerate(row)) for row in bits.reshape(-1, elems)]


def stream_through(dut, inputs: list[int], n_out: int, *, stall_every: int) -> list[int]:
    """Feed ``inputs`` to ``dut.i`` and collect ``n_out`` items of ``dut.o``, refusing every
    ``stall_every``-th cycle on the output and idling every ``stall_every + 1``-th on the input."""
    out = []

    async def produce(ctx):
        for n, item in enumerate(inputs):
            if n % (stall_every + 1) == 0:
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            ctx.set(dut.i.payload, item)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def consume(ctx):
        cycle = 0
        while len(out) < n_out:
            ready = cycle % stall_every != 0
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid and ready:
                out.append(payload)
            cycle += 1
            assert cycle < 10_000, f"only {len(out)} of {n_out} items came out"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(produce)
    sim.add_testbench(consume)
    sim.run()
    return out


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_assembler_turns_protocol_bytes_into_beats(name):
    fmt = FORMATS[name]
    bits = random_bits(np.random.default_rng(1), 3, fmt.n_in, fmt.in_width)
    # Idle bytes before a frame and between frames are dropped; data bytes may equal the start byte.
    frames = fmt.encode(bits)
    noise = bytes([0x00, RESULT_BYTE, 0xFF])
    wire = noise + frames[:fmt.frame_bytes] + noise + frames[fmt.frame_bytes:]
    beats = stream_through(FrameAssembler(frame_format=fmt), list(wire), 3 * fmt.in_beats, stall_every=3)
    assert beats == beats_of(bits, fmt.in_elems, fmt.in_width)


def test_assembler_takes_start_bytes_inside_a_frame_as_data():
    fmt = FORMATS["one byte, one beat"]
    beats = stream_through(FrameAssembler(frame_format=fmt), [START_BYTE, START_BYTE, START_BYTE, 0x17], 2,
                           stall_every=2)
    assert beats == [START_BYTE, 0x17]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_serializer_frames_beats_as_the_host_decodes_them(name):
    fmt = FORMATS[name]
    bits = random_bits(np.random.default_rng(2), 3, fmt.n_out, fmt.out_width)
    data = stream_through(ResultSerializer(frame_format=fmt), beats_of(bits, fmt.out_elems, fmt.out_width),
                          3 * fmt.result_bytes, stall_every=4)
    assert np.array_equal(fmt.decode(bytes(data), 3), bits)


def test_digits_over_the_simulated_uart_match_the_reference(tmp_path):
    config = tmp_path / "digits.yaml"
    config.write_text(yaml.safe_dump({"model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "unused"),
                                      "clock_mhz": 30, "target_fps": 50_000}))
    dataflow, verilog = compile_design(config, tmp_path / "design", verilog=True)
    fmt = FrameFormat.from_dataflow(dataflow)
    transport = SimTransport(accelerator_verilog=verilog, frame_format=fmt, build_dir=tmp_path / "sim",
                             frame_cycles=dataflow.cycles_per_frame())
    board = Board(dataflow=dataflow, transport=transport)
    frames = np.load(DIGITS / "digits_frames.npy")[:SIM_FRAMES]
    model = load_onnx(DIGITS / "digits_mlp.onnx")
    in_name, out_name = model.inputs[0].name, model.outputs[0].name
    reference = execute(model, {in_name: frames})[out_name]

    outputs = board.run(frames)
    assert transport.runs[-1].sent == SIM_FRAMES * fmt.frame_bytes
    assert np.allclose(outputs, reference, rtol=1e-5, atol=1e-5)
    assert np.array_equal(outputs.argmax(axis=1), reference.argmax(axis=1))

    # Bit-exact at the hardware boundary, after a host that lost sync: half a frame, then the resync bytes.
    from streamc.transforms.tidy import tidy
    expected = expected_hw_outputs(dataflow, execute(tidy(model), {in_name: frames[:3]}, keep_all=True))
    codes = dataflow.to_stream_order(np.rint(execute(dataflow.head, {in_name: frames[:3]})[dataflow.hw_input]))
    encoded = fmt.encode(dataflow.stages[0].in_dtype.to_hw(codes))
    transport.write(encoded[:fmt.frame_bytes // 2] + fmt.resync_bytes() + encoded)
    data = transport.read(4 * fmt.result_bytes)
    hw = dataflow.stages[-1].out_dtype.from_hw(fmt.decode(data, 4))
    assert np.array_equal(hw[1:], expected)
