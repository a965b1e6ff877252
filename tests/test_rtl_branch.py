# amaranth: UnusedElaboratable=no
# (the error tests build kernels that are never elaborated)
"""StreamFork, ElementwiseAdd and ChannelConcat against numpy in Amaranth's simulator."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from rtl_helpers import assert_verilator_lint, pack, StreamRun, unpack
from streamc.datatypes import BINARY, BIPOLAR, INT, TERNARY, UINT, DataType
from streamc.errors import FoldingError
from streamc.rtl.branch import ChannelConcat, ElementwiseAdd, StreamFork
from streamc.rtl.lut import LookupTable
from streamc.rtl.stream import StreamFIFO


def run_ports(dut, sources: list, sinks: list, *, in_gap: float = 0.0,
              out_stall: float | list[float] = 0.0, seed: int = 0,
              max_cycles: int = 2_000) -> list[StreamRun]:
    """Drive several input streams and drain several output streams at once.

    ``sources`` is a list of ``(port, beats)``, ``sinks`` a list of ``(port, count)``. Every
    port has its own random pattern: ``in_gap`` is the chance that a producer idles a cycle
    before a beat, ``out_stall`` (one figure, or one per sink) the chance that a consumer
    holds ``ready`` low in a cycle. Returns a :class:`StreamRun` per sink; cycles count from
    the first clock edge. Every sink is checked to hold a beat, unchanged, until it is taken.
    """
    stalls = out_stall if isinstance(out_stall, list) else [out_stall] * len(sinks)
    results = [StreamRun() for _ in sinks]

    def producer(port, beats, rng):
        async def testbench(ctx):
            for beat in beats:
                while rng.random() < in_gap:
                    ctx.set(port.valid, 0)
                    await ctx.tick()
                ctx.set(port.valid, 1)
                ctx.set(port.payload, beat)
                for _ in range(max_cycles):
                    _, _, ready = await ctx.tick().sample(port.ready)
                    if ready:
                        break
                else:
                    raise AssertionError(f"a beat waited {max_cycles} cycles to be taken")
            ctx.set(port.valid, 0)
        return testbench

    def consumer(port, count, stall, rng, result):
        async def testbench(ctx):
            cycle = 0
            while len(result.beats) < count:
                ready = bool(rng.random() >= stall)
                ctx.set(port.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(port.valid, port.payload)
                if valid and ready:
                    result.beats.append(payload)
                    result.cycles.append(cycle)
                cycle += 1
                assert cycle < max_cycles, f"only {len(result.beats)} of {count} beats"
            ctx.set(port.ready, 0)
        return testbench

    def valid_is_held(port):
        async def testbench(ctx):
            held = None
            async for _, _, valid, ready, payload in ctx.tick().sample(port.valid, port.ready,
                                                                         port.payload):
                if held is not None:
                    assert valid and payload == held, "a port withdrew or changed a beat"
                held = payload if valid and not ready else None
        return testbench

    rngs = np.random.default_rng(seed).spawn(len(sources) + len(sinks))
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for (port, beats), rng in zip(sources, rngs):
        sim.add_testbench(producer(port, beats, rng))
    for (port, count), stall, rng, result in zip(sinks, stalls, rngs[len(sources):], results):
        sim.add_testbench(consumer(port, count, stall, rng, result))
        sim.add_testbench(valid_is_held(port), background=True)
    sim.run()
    return results


def random_values(rng, dtype: DataType, count: int) -> np.ndarray:
    if dtype.bipolar:
        return rng.choice([-1, 1], size=count)
    return rng.integers(dtype.min, dtype.max + 1, size=count)


# ---------------------------------------------------------------- StreamFork

@pytest.mark.parametrize("elems,outputs", [(1, 1), (1, 2), (3, 3), (6, 2)])
def test_fork_copies_every_beat_to_every_output(elems, outputs):
    rng = np.random.default_rng(elems * 10 + outputs)
    dtype = INT(5)
    fork = StreamFork(elem_width=dtype.bitwidth, elems=elems, outputs=outputs)
    x = random_values(rng, dtype, 40 * elems)
    stalls = [0.2, 0.5, 0.7][:outputs]
    runs = run_ports(fork, [(fork.i, pack(x, dtype, elems))],
                     [(port, 40) for port in fork.o], in_gap=0.3, out_stall=stalls, seed=outputs)
    for run in runs:
        np.testing.assert_array_equal(unpack(run.beats, dtype, elems), x)


@pytest.mark.parametrize("outputs", [1, 3])
def test_fork_passes_one_beat_per_cycle(outputs):
    fork = StreamFork(elem_width=4, elems=2, outputs=outputs)
    beats = list(range(0, 250, 10))
    runs = run_ports(fork, [(fork.i, beats)], [(port, len(beats)) for port in fork.o])
    for run in runs:
        assert run.beats == beats
        assert run.cycles == list(range(fork.latency, fork.latency + len(beats)))


def test_fork_attributes_describe_the_streams():
    fork = StreamFork(elem_width=3, elems=4, outputs=2)
    assert (fork.in_elems, fork.out_elems, fork.in_width, fork.out_width) == (4, 4, 3, 3)
    assert (fork.outputs, fork.latency) == (2, 0)
    assert len(fork.o) == 2
    assert fork.i.payload.shape() == unsigned(12) and fork.o[1].payload.shape() == unsigned(12)


def test_fork_parameters_are_checked():
    with pytest.raises(ValueError, match=r"^node 'skip': outputs must be an integer >= 1, "
                                         r"not 0$"):
        StreamFork(elem_width=4, elems=1, outputs=0, name="skip")
    with pytest.raises(FoldingError, match=r"^node 'fork': elems must be an integer >= 1, "
                                           r"not 0$"):
        StreamFork(elem_width=4, elems=0, outputs=2)
    with pytest.raises(ValueError, match=r"^node 'fork': elem_width must be an integer >= 1, "
                                         r"not 0$"):
        StreamFork(elem_width=0, elems=1, outputs=2)


# ---------------------------------------------------------------- ElementwiseAdd

# (a_dtype, b_dtype, a_weight, b_weight, bias, out_dtype)
ADD_CASES = {
    "int4_uint3": (INT(4), UINT(3), 1, -2, 5, INT(6)),
    "bipolar_int8": (BIPOLAR, INT(8), 3, 1, 0, INT(9)),
    "uint4_uint4": (UINT(4), UINT(4), 1, 1, 0, UINT(5)),
    "ternary_binary": (TERNARY, BINARY, -1, 2, 1, UINT(3)),
    "binary_bipolar_to_binary": (BINARY, BIPOLAR, 1, 0, 0, BINARY),
}


def add_reference(case, a, b) -> np.ndarray:
    _, _, a_weight, b_weight, bias, _ = ADD_CASES[case]
    return a_weight * a + b_weight * b + bias


def build_add(case, elems) -> ElementwiseAdd:
    a_dtype, b_dtype, a_weight, b_weight, bias, _ = ADD_CASES[case]
    return ElementwiseAdd(a_dtype=a_dtype, b_dtype=b_dtype, a_weight=a_weight,
                          b_weight=b_weight, bias=bias, elems=elems, name="res")


@pytest.mark.parametrize("case", sorted(ADD_CASES))
def test_add_output_type_holds_exactly_the_possible_sums(case):
    assert build_add(case, 1).out_dtype == ADD_CASES[case][5]


@pytest.mark.parametrize("elems", [1, 2, 5])
@pytest.mark.parametrize("case", sorted(ADD_CASES))
def test_add_matches_numpy_under_stalls(case, elems):
    a_dtype, b_dtype, *_, out_dtype = ADD_CASES[case]
    add = build_add(case, elems)
    rng = np.random.default_rng(elems)
    beats = 30
    a = random_values(rng, a_dtype, beats * elems)
    b = random_values(rng, b_dtype, beats * elems)
    [run] = run_ports(add, [(add.a, pack(a, a_dtype, elems)), (add.b, pack(b, b_dtype, elems))],
                      [(add.o, beats)], in_gap=0.3, out_stall=0.4, seed=elems)
    np.testing.assert_array_equal(unpack(run.beats, out_dtype, elems), add_reference(case, a, b))


@pytest.mark.parametrize("case", ["int4_uint3", "bipolar_int8", "ternary_binary"])
def test_add_reaches_every_pair_of_inputs(case):
    """Every (a, b) pair, the extremes of the sum included, in one run."""
    a_dtype, b_dtype, *_, out_dtype = ADD_CASES[case]
    values = [np.array([-1, 1]) if dt.bipolar else np.arange(dt.min, dt.max + 1)
              for dt in (a_dtype, b_dtype)]
    a, b = (np.array(column) for column in zip(*product(*values)))
    elems = 2 if len(a) % 2 == 0 else 1
    add = build_add(case, elems)
    [run] = run_ports(add, [(add.a, pack(a, a_dtype, elems)), (add.b, pack(b, b_dtype, elems))],
                      [(add.o, len(a) // elems)], in_gap=0.1, out_stall=0.1)
    np.testing.assert_array_equal(unpack(run.beats, out_dtype, elems), add_reference(case, a, b))


def test_add_passes_one_beat_per_cycle_after_its_latency():
    add = build_add("int4_uint3", 3)
    rng = np.random.default_rng(3)
    a, b = random_values(rng, INT(4), 60), random_values(rng, UINT(3), 60)
    [run] = run_ports(add, [(add.a, pack(a, INT(4), 3)), (add.b, pack(b, UINT(3), 3))],
                      [(add.o, 20)])
    np.testing.assert_array_equal(unpack(run.beats, INT(6), 3), add_reference("int4_uint3", a, b))
    assert run.cycles == list(range(add.latency, add.latency + 20))


def test_add_fills_its_stage_while_the_output_is_not_ready():
    """A consumer may wait for valid before it raises ready: the stage must not wait for it."""
    add = build_add("uint4_uint4", 1)
    seen = []

    async def testbench(ctx):
        ctx.set(add.a.payload, 3)
        ctx.set(add.b.payload, 4)
        ctx.set(add.a.valid, 1)
        ctx.set(add.b.valid, 1)
        for _ in range(3):
            _, _, a_ready, b_ready = await ctx.tick().sample(add.a.ready, add.b.ready)
            seen.append((a_ready, b_ready, ctx.get(add.o.valid), ctx.get(add.o.payload)))

    sim = Simulator(add)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    # The pair is taken in cycle 0 and shown from cycle 1; a full stage takes nothing more.
    assert seen == [(1, 1, 1, 7), (0, 0, 1, 7), (0, 0, 1, 7)]


def test_add_waits_for_both_operands():
    """An operand that is always late sets the pace; the other one's beats are not lost."""
    add = build_add("uint4_uint4", 1)
    a = np.arange(16)
    b = np.arange(16)[::-1]
    [run] = run_ports(add, [(add.a, pack(a, UINT(4), 1)), (add.b, pack(b, UINT(4), 1))],
                      [(add.o, 16)], in_gap=0.6, seed=5)
    np.testing.assert_array_equal(unpack(run.beats, UINT(5), 1), np.full(16, 15))


def test_add_attributes_describe_the_streams():
    add = build_add("bipolar_int8", 4)
    assert (add.in_elems, add.out_elems, add.a_width, add.b_width, add.out_width) == (4, 4, 1, 8, 9)
    assert add.latency == 1
    assert add.a.payload.shape() == unsigned(4) and add.o.payload.shape() == unsigned(36)


def test_add_parameters_are_checked():
    with pytest.raises(FoldingError, match=r"^node 'res': elems must be an integer >= 1, "
                                           r"not 0$"):
        ElementwiseAdd(a_dtype=INT(4), b_dtype=INT(4), a_weight=1, b_weight=1, bias=0, elems=0,
                       name="res")
    with pytest.raises(ValueError, match=r"^node 'add': b_weight must be an integer, not 0\.5$"):
        ElementwiseAdd(a_dtype=INT(4), b_dtype=INT(4), a_weight=1, b_weight=0.5, bias=0, elems=1)
    with pytest.raises(TypeError, match=r"^node 'add': a_dtype must be a DataType, "
                                        r"not 'INT4'$"):
        ElementwiseAdd(a_dtype="INT4", b_dtype=INT(4), a_weight=1, b_weight=1, bias=0, elems=1)


# ---------------------------------------------------------------- ChannelConcat

def concat_reference(inputs: list[np.ndarray], channels) -> np.ndarray:
    pixels = len(inputs[0]) // channels[0]
    return np.concatenate([x.reshape(pixels, c) for x, c in zip(inputs, channels)],
                          axis=1).reshape(-1)


@pytest.mark.parametrize("channels,elems", [((2, 3), 1), ((4, 2), 2), ((6, 3, 9), 3),
                                            ((4,), 4), ((8, 8), 8)])
@pytest.mark.parametrize("dtype", [INT(4), BIPOLAR])
def test_concat_matches_numpy_under_stalls(channels, elems, dtype):
    rng = np.random.default_rng(sum(channels) + elems)
    concat = ChannelConcat(channels=channels, dtype=dtype, elems=elems)
    pixels = 12
    inputs = [random_values(rng, dtype, pixels * c) for c in channels]
    [run] = run_ports(concat, [(port, pack(x, dtype, elems)) for port, x in zip(concat.i, inputs)],
                      [(concat.o, pixels * sum(channels) // elems)], in_gap=0.3, out_stall=0.4,
                      seed=elems)
    np.testing.assert_array_equal(unpack(run.beats, dtype, elems),
                                  concat_reference(inputs, channels))


def test_concat_passes_one_beat_per_cycle():
    channels, elems, pixels = (2, 4, 6), 2, 5
    concat = ChannelConcat(channels=channels, dtype=UINT(8), elems=elems)
    inputs = [np.arange(pixels * c) + 100 * k for k, c in enumerate(channels)]
    sources = [(port, pack(x, UINT(8), elems)) for port, x in zip(concat.i, inputs)]
    [run] = run_ports(concat, sources, [(concat.o, pixels * sum(channels) // elems)])
    np.testing.assert_array_equal(unpack(run.beats, UINT(8), elems),
                                  concat_reference(inputs, channels))
    assert run.cycles == list(range(concat.latency, concat.latency + len(run.beats)))


def test_concat_attributes_describe_the_streams():
    concat = ChannelConcat(channels=(6, 3), dtype=INT(3), elems=3)
    assert (concat.in_elems, concat.out_elems, concat.in_width, concat.out_width) == (3, 3, 3, 3)
    assert (concat.channels, concat.out_channels, concat.latency) == ((6, 3), 9, 0)
    assert len(concat.i) == 2 and concat.i[1].payload.shape() == unsigned(9)


def test_concat_elems_must_divide_every_input():
    with pytest.raises(FoldingError, match=r"^node 'cat1': elems=4 does not divide every "
                                           r"input's channels \(8, 12, 6\); valid elems: 1, 2$"):
        ChannelConcat(channels=(8, 12, 6), dtype=INT(4), elems=4, name="cat1")
    with pytest.raises(FoldingError, match=r"^node 'concat': elems=0 does not divide every "
                                           r"input's channels \(4, 6\); valid elems: 1, 2$"):
        ChannelConcat(channels=(4, 6), dtype=INT(4), elems=0)


def test_concat_needs_channels():
    with pytest.raises(ValueError, match=r"^node 'concat': channels must be one or more "
                                         r"integers >= 1, not \(\)$"):
        ChannelConcat(channels=(), dtype=INT(4), elems=1)
    with pytest.raises(ValueError, match=r"^node 'concat': channels must be one or more "
                                         r"integers >= 1, not \(4, 0\)$"):
        ChannelConcat(channels=(4, 0), dtype=INT(4), elems=1)


# ---------------------------------------------------------------- a residual block

class ResidualBlock(wiring.Component):
    """``y = 2*f(x) - x + 3``: a fork, a lookup table ``f`` on one path, a FIFO on the other,
    joined by an ElementwiseAdd; the two paths differ in length."""

    def __init__(self, *, table, dtype: DataType, elems: int, fifo_depth: int):
        self.fork = StreamFork(elem_width=dtype.bitwidth, elems=elems, outputs=2)
        self.f = LookupTable(table=table, in_dtype=dtype, out_dtype=dtype, elems=elems,
                             frame_elems=elems)
        self.skip = StreamFIFO(width=elems * dtype.bitwidth, depth=fifo_depth)
        self.add = ElementwiseAdd(a_dtype=dtype, b_dtype=dtype, a_weight=2, b_weight=-1, bias=3,
                                  elems=elems)
        super().__init__({
            "i": In(stream.Signature(unsigned(elems * dtype.bitwidth))),
            "o": Out(stream.Signature(unsigned(elems * self.add.out_width))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fork = self.fork
        m.submodules.f = self.f
        m.submodules.skip = self.skip
        m.submodules.add = self.add
        wiring.connect(m, wiring.flipped(self.i), self.fork.i)
        wiring.connect(m, self.fork.o[0], self.f.i)
        wiring.connect(m, self.f.o, self.add.a)
        wiring.connect(m, self.fork.o[1], self.skip.i)
        wiring.connect(m, self.skip.o, self.add.b)
        wiring.connect(m, self.add.o, wiring.flipped(self.o))
        return m


def residual_block(elems: int, fifo_depth: int):
    dtype = INT(4)
    table = np.random.default_rng(7).integers(dtype.min, dtype.max + 1, size=16)
    block = ResidualBlock(table=table, dtype=dtype, elems=elems, fifo_depth=fifo_depth)

    def reference(x):
        return 2 * table[x - dtype.min] - x + 3
    return block, dtype, reference


@pytest.mark.parametrize("elems,fifo_depth", [(1, 2), (2, 4), (4, 3)])
def test_residual_block_under_stalls(elems, fifo_depth):
    block, dtype, reference = residual_block(elems, fifo_depth)
    x = random_values(np.random.default_rng(elems), dtype, 40 * elems)
    [run] = run_ports(block, [(block.i, pack(x, dtype, elems))], [(block.o, 40)], in_gap=0.3,
                      out_stall=0.4, seed=elems)
    np.testing.assert_array_equal(unpack(run.beats, block.add.out_dtype, elems), reference(x))


def test_residual_block_passes_one_beat_per_cycle():
    """Both paths have latency 1 (table register, FIFO): the add sees pairs every cycle."""
    block, dtype, reference = residual_block(2, 2)
    x = random_values(np.random.default_rng(1), dtype, 60)
    [run] = run_ports(block, [(block.i, pack(x, dtype, 2))], [(block.o, 30)])
    np.testing.assert_array_equal(unpack(run.beats, block.add.out_dtype, 2), reference(x))
    assert run.cycles == list(range(2, 32))


# ---------------------------------------------------------------- Verilog

def test_verilog_passes_verilator_lint(tmp_path):
    """All three kernels in one design: the residual block and a concat of it with its input."""
    class Design(wiring.Component):
        def __init__(self):
            self.block, _, _ = residual_block(2, 2)
            self.fork = StreamFork(elem_width=4, elems=2, outputs=2)
            self.concat = ChannelConcat(channels=(4, 2), dtype=INT(4), elems=2)
            super().__init__({
                "i": In(stream.Signature(unsigned(8))),
                "y": Out(stream.Signature(unsigned(2 * self.block.add.out_width))),
                "o": Out(stream.Signature(unsigned(8))),
            })

        def elaborate(self, platform):
            m = Module()
            m.submodules.block = self.block
            m.submodules.fork = self.fork
            m.submodules.concat = self.concat
            wiring.connect(m, wiring.flipped(self.i), self.fork.i)
            wiring.connect(m, self.fork.o[0], self.block.i)
            wiring.connect(m, self.block.o, wiring.flipped(self.y))
            wiring.connect(m, self.fork.o[1], self.concat.i[0])
            m.d.comb += [self.concat.i[1].payload.eq(self.i.payload), self.concat.i[1].valid.eq(1)]
            wiring.connect(m, self.concat.o, wiring.flipped(self.o))
            return m

    (tmp_path / "branch.v").write_text(verilog.convert(Design(), name="branch", emit_src=False))
    assert_verilator_lint(tmp_path, "branch.v", top="branch")
