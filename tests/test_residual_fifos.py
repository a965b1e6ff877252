"""A residual block deadlocks with shallow FIFOs and flows with the sized ones (Amaranth's simulator)."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from rtl_helpers import pack, unpack

from streamc.datatypes import INT, UINT
from streamc.fifo_sizing import fifo_depths
from streamc.hw import Dataflow
from streamc.ir import Graph
from streamc.rtl.top import StreamAccelerator
from streamc.stages import AddStage, MVAULayer, WindowStage

HEIGHT, WIDTH, CHANNELS = 6, 6, 2


def residual_block() -> Dataflow:
    """x -> 3x3 window -> MVAU -> add(., x): the skip path must hold two image rows while the window fills."""
    rng = np.random.default_rng(1)
    weights = rng.integers(-2, 2, size=(CHANNELS, 9 * CHANNELS))
    lo = np.minimum(weights * 0, weights * 3).sum(axis=1)
    hi = np.maximum(weights * 0, weights * 3).sum(axis=1)
    stages = [
        WindowStage(name="window", source="conv", in_shape=(HEIGHT, WIDTH, CHANNELS), out_shape=(HEIGHT, WIDTH),
                    kernel=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1), dilations=(1, 1), dtype=UINT(2),
                    pad_value=0, sources=[-1]),
        MVAULayer(name="conv", source="conv", weights=weights, in_dtype=UINT(2), weight_dtype=INT(2),
                  thresholds=np.sort(rng.integers(-4, 5, size=(CHANNELS, 3)), axis=1), out_dtype=UINT(2),
                  out_bias=0, acc_lo=lo, acc_hi=hi, vectors=HEIGHT * WIDTH, sources=[0]),
        AddStage(name="add", source="add", weights=(1, 1), in_dtypes=(UINT(2), UINT(2)),
                 thresholds=np.array([[1, 3, 5]]), out_dtype=UINT(2), out_bias=0, channels=CHANNELS,
                 count=HEIGHT * WIDTH * CHANNELS, sources=[1, -1]),
    ]
    empty = Graph(nodes=[], constants={}, inputs=[], outputs=[])
    return Dataflow(head=empty, stages=stages, tail=empty, hw_input="x", hw_output="y")


def simulate(dataflow: Dataflow, depths: list[list[int]], frames: np.ndarray, max_cycles: int = 6000) -> np.ndarray:
    """The block's outputs within ``max_cycles``, with random input gaps and output stalls."""
    components = [kernel for stage in dataflow.stages for kernel in stage.components()]
    sources = [[-1], [0], [1, -1], [2]]   # the add stage is two kernels in a row: add, then thresholds
    top = StreamAccelerator(stages=components, sources=sources, fifo_depths=[*depths, [0]])
    beats = pack(frames.reshape(-1), UINT(2), 1)
    rng = np.random.default_rng(3)
    outputs = []

    async def bench(ctx):
        sent, offer = 0, False
        for _ in range(max_cycles):
            # a beat once offered stays offered until taken
            offer = offer or (sent < len(beats) and rng.random() >= 0.2)
            ctx.set(top.s_axis_tvalid, offer)
            ctx.set(top.s_axis_tdata, beats[sent] if offer else 0)
            ready = rng.random() >= 0.2
            ctx.set(top.m_axis_tready, ready)
            _, _, taken, valid, payload = await ctx.tick().sample(top.s_axis_tready, top.m_axis_tvalid,
                                                                  top.m_axis_tdata)
            if offer and taken:
                sent, offer = sent + 1, False
            if valid and ready:
                outputs.append(payload)
            if len(outputs) == frames.size:
                return

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return unpack(outputs, UINT(2), 1)


@pytest.fixture(scope="module")
def block():
    dataflow = residual_block()
    for stage in dataflow.stages:
        stage.elems = 1
    frames = np.random.default_rng(2).integers(0, 4, size=(3, HEIGHT * WIDTH * CHANNELS))
    expected = frames
    for stage in dataflow.stages:
        expected = stage.emulate(*([expected] if len(stage.sources) == 1 else [expected, frames]))
    return dataflow, frames, expected


def test_sized_fifos_let_the_block_flow(block):
    dataflow, frames, expected = block
    depths = fifo_depths(dataflow, 2)
    # the skip link holds what the window takes in before its first patch: a row and two pixels
    assert depths[2][1] >= (WIDTH + 2) * CHANNELS
    assert np.array_equal(simulate(dataflow, depths, frames), expected.reshape(-1))


def test_shallow_fifos_deadlock_the_block(block):
    dataflow, frames, _ = block
    shallow = [[0], [2], [2, 2]]
    outputs = simulate(dataflow, shallow, frames)
    assert len(outputs) < 2 * CHANNELS  # stuck before the first pixel's channels are out
