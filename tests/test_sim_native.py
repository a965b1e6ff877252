"""The C++ stream harness against the cocotb testbench: the same outputs, timing and failures.

A tiny stream design (tests/stream_designs.py) whose input is ready one cycle in three, with beats of
90 bits (a Verilator port of 32-bit words) and of 40 bits (a 64-bit integer port), in both engines.
"""

import re

import numpy as np
import pytest
from amaranth.back import verilog

from streamc.errors import BuildError, ConfigError
from stream_designs import AddOnePipeline
from streamc.sim.runner import simulate

ENGINES = ["harness", "cocotb"]
#: (elements per beat, bits per element): 90-bit and 40-bit beats.
SHAPES = [(3, 30), (1, 40)]
ACCEPT_EVERY = 3


def design(folder, *, elems, width, **kwargs):
    path = folder / "design.v"
    component = AddOnePipeline(elems=elems, width=width, accept_every=ACCEPT_EVERY, **kwargs)
    path.write_text(verilog.convert(component, name="streamc_top"))
    return path


def run(path, build_dir, frames, expected, *, elems, width, n_out=None, **kwargs):
    return simulate(verilog=path, top="streamc_top", build_dir=build_dir, in_elems=elems, in_width=width,
                    out_elems=elems, out_width=width, frames=frames, expected=expected,
                    n_out=n_out or frames.shape[1], **kwargs)


def random_frames(count, elems, width, beats=4, seed=3):
    return np.random.default_rng(seed).integers(0, 1 << width, size=(count, beats * elems), dtype=np.uint64)


@pytest.fixture(scope="module", params=SHAPES, ids=lambda shape: f"{shape[0]}x{shape[1]}bit")
def built(request, tmp_path_factory):
    """The design and a build folder holding both engines' builds, once per beat shape."""
    elems, width = request.param
    folder = tmp_path_factory.mktemp(f"add_one_{elems}x{width}")
    return dict(path=design(folder, elems=elems, width=width), build_dir=folder / "build", elems=elems, width=width)


def simulate_built(built, frames, expected, **kwargs):
    return run(built["path"], built["build_dir"], frames, expected, elems=built["elems"], width=built["width"],
               **kwargs)


def test_the_engines_agree_on_outputs_and_timing(built):
    frames = random_frames(40, built["elems"], built["width"])
    expected = (frames + 1) % (1 << built["width"])
    results = {engine: simulate_built(built, frames, expected, engine=engine) for engine in ENGINES}
    for result in results.values():
        assert result.mismatches == 0
        np.testing.assert_array_equal(result.outputs, expected)
    harness, cocotb = results["harness"], results["cocotb"]
    # Four beats of one cycle in three; the first beat's output a cycle after it went in.
    assert harness.measured_cycles_per_frame == cocotb.measured_cycles_per_frame == 4 * ACCEPT_EVERY
    assert harness.latency_cycles == cocotb.latency_cycles == 1
    # The random gaps and stalls follow different sequences but the same probabilities: over 160 beats the
    # runs take about as long.
    assert abs(harness.simulated_cycles - cocotb.simulated_cycles) < 0.1 * cocotb.simulated_cycles


def test_at_full_rate_the_engines_take_the_same_cycles(built):
    frames = random_frames(10, built["elems"], built["width"])
    cycles = {simulate_built(built, frames, None, engine=engine, input_gap_prob=0.0, output_stall_prob=0.0)
              .simulated_cycles for engine in ENGINES}
    assert len(cycles) == 1


def test_random_gaps_and_stalls_happen(built):
    frames = random_frames(40, built["elems"], built["width"])
    full_rate = simulate_built(built, frames, None, input_gap_prob=0.0, output_stall_prob=0.0)
    gaps = simulate_built(built, frames, None, input_gap_prob=0.7, output_stall_prob=0.0)
    stalls = simulate_built(built, frames, None, input_gap_prob=0.0, output_stall_prob=0.9)
    assert gaps.simulated_cycles > full_rate.simulated_cycles
    assert stalls.simulated_cycles > full_rate.simulated_cycles
    for result in (gaps, stalls):
        np.testing.assert_array_equal(result.outputs, full_rate.outputs)


def test_the_seed_decides_the_random_run(built):
    frames = random_frames(40, built["elems"], built["width"])
    cycles = [simulate_built(built, frames, None, seed=seed).simulated_cycles for seed in (1, 1, 2)]
    assert cycles[0] == cycles[1] != cycles[2]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_deadlock_is_reported_with_how_far_it_got(tmp_path, engine):
    elems, width = SHAPES[0]
    path = design(tmp_path, elems=elems, width=width, drop_beat=6)
    with pytest.raises(BuildError) as caught:
        run(path, tmp_path / "build", random_frames(5, elems, width), None, elems=elems, width=width,
            engine=engine, timeout_cycles=500)
    assert re.fullmatch(r"simulation of 'streamc_top' failed after 500 cycles: random gaps and back-pressure, "
                        r"5 frames \(4 came out whole\): did not finish within 500 cycles: 20 of 20 input beats "
                        r"accepted, 19 of 20 output beats received", str(caught.value))


def test_a_deadlock_at_full_rate_names_that_phase(tmp_path):
    elems, width = SHAPES[0]
    # The randomized run's 8 frames pass (beats 0-31); the full-rate run loses one of its beats.
    path = design(tmp_path, elems=elems, width=width, drop_beat=32 + 21)
    with pytest.raises(BuildError, match=r"failed after \d+ cycles: full rate, 8 frames \(7 came out whole\): "
                                         r"did not finish within 400 cycles: 32 of 32 input beats accepted, "
                                         r"31 of 32 output beats received$"):
        run(path, tmp_path / "build", random_frames(8, elems, width), None, elems=elems, width=width,
            timeout_cycles=400)


@pytest.mark.parametrize("engine", ENGINES)
def test_surplus_output_is_reported(built, engine):
    frames = random_frames(5, built["elems"], built["width"])
    with pytest.raises(BuildError, match=r"failed after \d+ cycles: random gaps and back-pressure, 5 frames "
                                         r"\(5 came out whole\): more than the 15 output beats expected arrived$"):
        # The design puts out 4 beats per frame, not the 3 claimed.
        simulate_built(built, frames, None, n_out=3 * built["elems"], engine=engine)


def test_a_top_without_the_stream_ports_is_one_clear_error(tmp_path):
    path = tmp_path / "no_output.v"
    path.write_text("module streamc_top(input clk, input rst, input [7:0] s_axis_tdata, input s_axis_tvalid,\n"
                    "  output s_axis_tready);\n  assign s_axis_tready = 1'b1;\nendmodule\n")
    with pytest.raises(BuildError) as caught:
        run(path, tmp_path / "build", random_frames(2, 1, 8), None, elems=1, width=8)
    message = str(caught.value)
    assert "\n" not in message
    assert re.match(r"Verilator could not build .*no_output\.v \(top 'streamc_top'\): .*error: .*m_axis_t\w+", message)


def test_an_unknown_engine_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^engine must be one of 'harness', 'cocotb', not 'icarus'$"):
        run(tmp_path / "never_built.v", tmp_path / "build", random_frames(2, 1, 8), None, elems=1, width=8,
            engine="icarus")


def test_shards_merge_in_frame_order(built):
    """Three runs of the one built model side by side give the outputs of one run, mismatches counted over
    every shard and the first named by its frame in the whole set, each shard with its own full-rate timing."""
    frames = random_frames(40, built["elems"], built["width"])
    expected = (frames + 1) % (1 << built["width"])
    expected[[21, 33], 0] ^= 1
    whole = simulate_built(built, frames, expected)
    sharded = simulate_built(built, frames, expected, shards=3)
    np.testing.assert_array_equal(sharded.outputs, whole.outputs)
    assert sharded.mismatches == whole.mismatches == 2
    assert sharded.first_mismatch == whole.first_mismatch and sharded.first_mismatch.frame == 21
    assert sharded.measured_cycles_per_frame == whole.measured_cycles_per_frame == 4 * ACCEPT_EVERY
    assert sharded.latency_cycles == whole.latency_cycles


def test_shards_need_the_harness(built):
    frames = random_frames(4, built["elems"], built["width"])
    with pytest.raises(ConfigError, match="shards must be a positive count, and more than 1 only with the harness"):
        simulate_built(built, frames, None, engine="cocotb", shards=2)
    with pytest.raises(ConfigError, match="shards must be a positive count"):
        simulate_built(built, frames, None, shards=0)
