# amaranth: UnusedElaboratable=no
# (the error tests build units that are never elaborated)
"""The ThresholdUnit's binary search against threshold_reference in Amaranth's simulator."""

from __future__ import annotations

import numpy as np
import pytest

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT, DataType
from streamc.rtl.threshold import ThresholdUnit, threshold_reference
from streamc.rtl.top import StreamAccelerator, to_verilog
from test_rtl_window import random_values

# name: (channels, thresholds per channel L, shared (1, L), in_dtype, out_dtype, out_bias, elems)
CASES = {
    "int8_255_per_channel_groups": (6, 255, False, INT(8), UINT(8), 0, 2),
    "int8_255_shared_one_lane": (3, 255, True, INT(8), INT(9), -128, 1),
    "wide_in_100_per_channel": (4, 100, False, INT(12), UINT(7), 0, 1),
    "uint4_15_all_lanes": (4, 15, False, UINT(4), UINT(4), 0, 4),
    "uint4_16_thresholds_five_steps": (6, 16, False, UINT(4), UINT(5), 0, 3),
    "one_threshold": (5, 1, False, INT(5), UINT(1), 0, 5),
    "three_thresholds_signed_out": (2, 3, False, INT(6), INT(3), -2, 1),
    "bipolar_in": (4, 2, False, BIPOLAR, UINT(2), 0, 2),
}


def random_thresholds(rng, rows: int, n_thr: int, in_dtype: DataType) -> np.ndarray:
    """Unsorted thresholds with duplicates, over and well past the input range: the unit sorts and clamps."""
    span = in_dtype.max - in_dtype.min
    drawn = rng.integers(in_dtype.min - span // 4 - 2, in_dtype.max + span // 4 + 3, size=(rows, n_thr))
    # Some rows repeat a few values many times, as trained thresholds do at the clip.
    repeat = rng.random((rows, n_thr)) < 0.3
    return np.where(repeat, drawn[:, :1], drawn)


def build(case: str, seed: int):
    channels, n_thr, shared, in_dtype, out_dtype, out_bias, elems = CASES[case]
    rng = np.random.default_rng(seed)
    thresholds = random_thresholds(rng, 1 if shared else channels, n_thr, in_dtype)
    dut = ThresholdUnit(thresholds=thresholds, in_dtype=in_dtype, out_dtype=out_dtype, out_bias=out_bias,
                        channels=channels, elems=elems, name=case, style="search")
    return dut, thresholds, rng


def run_case(case: str, *, pixels: int, in_gap: float, out_stall: float, seed: int):
    channels, _, _, in_dtype, out_dtype, out_bias, elems = CASES[case]
    dut, thresholds, rng = build(case, seed)
    values = random_values(rng, in_dtype, (pixels, channels))
    # Half the inputs at a threshold or next to one, where the input type holds them.
    near = np.clip(np.concatenate([thresholds.reshape(-1) + d for d in (-1, 0, 1)]), in_dtype.min, in_dtype.max)
    if not in_dtype.bipolar:
        values[: pixels // 2] = rng.choice(near, size=(pixels // 2, channels))
    run = run_stream(dut, pack(values, in_dtype, elems), pixels * channels // elems,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    got = unpack(run.beats, out_dtype, elems).reshape(pixels, channels)
    np.testing.assert_array_equal(got, threshold_reference(values, thresholds, out_dtype=out_dtype,
                                                           out_bias=out_bias))
    return dut, run


@pytest.mark.parametrize("case", sorted(CASES))
def test_search_matches_reference_under_stalls(case):
    run_case(case, pixels=40, in_gap=0.3, out_stall=0.4, seed=len(case))


@pytest.mark.parametrize("case", ["int8_255_per_channel_groups", "uint4_16_thresholds_five_steps", "one_threshold"])
def test_search_takes_one_beat_per_cycle_at_its_latency(case):
    channels, n_thr, *_, elems = CASES[case]
    dut, run = run_case(case, pixels=6, in_gap=0.0, out_stall=0.0, seed=1)
    assert dut.search_steps == n_thr.bit_length()
    assert dut.latency == dut.search_steps + 1
    assert run.cycles == [n + dut.latency for n in range(6 * channels // elems)]


def test_every_input_value_against_sorted_padded_thresholds():
    """All INT8 values through channels whose thresholds are out of order, repeated, and past both ends."""
    thresholds = np.array([[127, -128, 0, -1, 5], [-100, -100, -100, 6, 5], [-129, 300, 128, 200, -500],
                           [0, 0, 0, 0, 0]])
    dut = ThresholdUnit(thresholds=thresholds, in_dtype=INT(8), out_dtype=UINT(3), out_bias=0, channels=4,
                        elems=2, style="search")
    values = np.repeat(np.arange(-128, 128), 4).reshape(256, 4)
    run = run_stream(dut, pack(values, INT(8), 2), 512, in_gap=0.2, out_stall=0.2, seed=3)
    np.testing.assert_array_equal(unpack(run.beats, UINT(3), 2).reshape(256, 4),
                                  threshold_reference(values, thresholds, out_dtype=UINT(3), out_bias=0))


def test_search_thresholds_are_each_steps_probes():
    # 5 thresholds pad to 7: step 0 probes index 3, step 1 indices 1 and 5, step 2 indices 0, 2, 4, 6.
    thresholds = np.array([[50, 10, 40, 20, 30], [1, 2, 3, 4, 5]])
    dut = ThresholdUnit(thresholds=thresholds, in_dtype=INT(8), out_dtype=UINT(3), out_bias=0, channels=2,
                        elems=1, style="search")
    assert dut.search_thresholds(0).tolist() == [[[40], [4]]]
    assert dut.search_thresholds(1).tolist() == [[[20, 128], [2, 128]]]
    assert dut.search_thresholds(2).tolist() == [[[10, 30, 50, 128], [1, 3, 5, 128]]]


@pytest.mark.parametrize("changes,message", [
    (dict(style="binary"), r"style='binary' is not a threshold style; valid: parallel, search"),
    (dict(out_dtype=BIPOLAR, thresholds=np.zeros((4, 1), dtype=np.int64)),
     r"a BIPOLAR output has one threshold, no search"),
])
def test_search_parameters_are_checked(changes, message):
    args = dict(thresholds=np.zeros((4, 2), dtype=np.int64), in_dtype=INT(8), out_dtype=UINT(2), out_bias=0,
                channels=4, elems=2, style="search")
    with pytest.raises(ValueError, match=f"^node 'thresholds': {message}$"):
        ThresholdUnit(**{**args, **changes})


def test_search_verilog_passes_verilator_lint(tmp_path):
    dut, *_ = build("int8_255_per_channel_groups", 0)
    text = to_verilog(StreamAccelerator(stages=[dut]))
    # Lane 1's last step: 3 groups of 128 probes.
    assert "search_rom_7_1" in text and "threshold_rom" not in text
    (tmp_path / "streamc_top.v").write_text(text)
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")


# name: (channels, L, shared, in_dtype, out_dtype, elems); thresholds drawn sorted from the middle of the input range.
SYNTHESIZED = {
    "int8_15_two_lanes": (8, 15, False, INT(8), UINT(4), 2),
    "int12_255_one_lane": (16, 255, False, INT(12), UINT(8), 1),
    "int10_127_shared": (32, 127, True, INT(10), UINT(7), 2),
}


@pytest.mark.parametrize("device, family", [("ice40-up5k", "ice40"), ("ecp5-85f", "ecp5")])
@pytest.mark.parametrize("design", sorted(SYNTHESIZED))
def test_the_search_model_against_yosys(tmp_path, design, device, family):
    """The search's estimate against Yosys for the unit as its own top module (as the calibration synthesizes a
    threshold unit): block RAMs exact, flip-flops within 15 %, LUTs within 20 % (the model came out 0.81 to 1.11
    of Yosys' LUTs on the iCE40, 0.81 to 1.14 on the ECP5, over these and seven more designs:
    :data:`streamc.resources.threshold.SEARCH_COEFFICIENTS`)."""
    from amaranth.back import verilog

    from streamc.resources import estimate_kernel, spec_of_unit
    from streamc.synth import synthesize

    channels, n_thr, shared, in_dtype, out_dtype, elems = SYNTHESIZED[design]
    rng = np.random.default_rng(0)
    thresholds = np.sort(rng.integers(in_dtype.min // 2, in_dtype.max // 2, size=(1 if shared else channels, n_thr)),
                         axis=1)
    unit = ThresholdUnit(thresholds=thresholds, in_dtype=in_dtype, out_dtype=out_dtype, out_bias=0,
                         channels=channels, elems=elems, style="search")
    estimate = estimate_kernel(spec_of_unit(unit), family)
    (tmp_path / "k.v").write_text(verilog.convert(unit, name="k", emit_src=False))
    result = synthesize(verilog=tmp_path / "k.v", top="k", device=device, workdir=tmp_path)
    assert estimate.bram == result.bram
    assert abs(estimate.ff - result.ff) <= 0.15 * result.ff, (estimate, result.ff)
    assert abs(estimate.lut - result.lut) <= 0.20 * result.lut, (estimate, result.lut)
