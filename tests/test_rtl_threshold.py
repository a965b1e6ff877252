# amaranth: UnusedElaboratable=no
# (the error tests build units that are never elaborated)
"""ThresholdUnit against numpy in Amaranth's simulator."""

from __future__ import annotations


import numpy as np
import pytest
from amaranth.hdl import signed, unsigned

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BINARY, BIPOLAR, INT, UINT, DataType
from streamc.errors import FoldingError
from streamc.rtl.threshold import ThresholdUnit, threshold_reference
from streamc.rtl.top import StreamAccelerator, to_verilog
from test_rtl_window import random_values

# name: (channels, thresholds per channel L, shared (1, L), in_dtype, out_dtype, out_bias, elems)
CASES = {
    "per_channel_int8_to_uint2": (6, 3, False, INT(8), UINT(2), 0, 2),
    "shared_int8_to_int4": (6, 15, True, INT(8), INT(4), -8, 3),
    "per_channel_to_bipolar": (4, 1, False, INT(5), BIPOLAR, 0, 1),
    "bipolar_in_one_group": (4, 2, False, BIPOLAR, UINT(2), 0, 4),
    "one_channel": (1, 3, False, UINT(4), UINT(2), 0, 1),
    "shared_one_elem_per_beat": (5, 3, True, UINT(3), INT(3), -1, 1),
    "unsigned_in_signed_out": (4, 7, False, UINT(4), INT(4), -4, 2),
}


def random_thresholds(rng, rows: int, n_thr: int, in_dtype: DataType) -> np.ndarray:
    """Sorted thresholds over, and a little past, the input range (clamping is exercised)."""
    return np.sort(rng.integers(in_dtype.min - 3, in_dtype.max + 4, size=(rows, n_thr)), axis=1)


def build(case: str, seed: int = 0):
    channels, n_thr, shared, in_dtype, out_dtype, out_bias, elems = CASES[case]
    rng = np.random.default_rng(seed)
    thresholds = random_thresholds(rng, 1 if shared else channels, n_thr, in_dtype)
    dut = ThresholdUnit(thresholds=thresholds, in_dtype=in_dtype, out_dtype=out_dtype,
                        out_bias=out_bias, channels=channels, elems=elems, name=case)
    return dut, thresholds, rng


def run_case(case: str, *, pixels: int, in_gap: float, out_stall: float, seed: int):
    channels, _, _, in_dtype, out_dtype, out_bias, elems = CASES[case]
    dut, thresholds, rng = build(case, seed)
    values = random_values(rng, in_dtype, (pixels, channels))
    run = run_stream(dut, pack(values, in_dtype, elems), pixels * channels // elems,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    got = unpack(run.beats, out_dtype, elems).reshape(pixels, channels)
    np.testing.assert_array_equal(got, threshold_reference(values, thresholds,
                                                           out_dtype=out_dtype,
                                                           out_bias=out_bias))
    return dut, run


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_reference_under_stalls(case):
    run_case(case, pixels=12, in_gap=0.3, out_stall=0.4, seed=len(case))


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_beat_per_cycle_at_the_documented_latency(case):
    channels, *_, elems = CASES[case]
    dut, run = run_case(case, pixels=6, in_gap=0.0, out_stall=0.0, seed=1)
    # Input beat n is taken in cycle n; its output is valid, and taken, in cycle n + latency.
    assert dut.latency == 3
    assert run.cycles == [n + dut.latency for n in range(6 * channels // elems)]


def test_every_input_value_of_every_channel():
    """All 256 INT8 values through 4 channels with different thresholds, thresholds included."""
    thresholds = np.array([[-128, -1, 0, 127], [-100, -100, 5, 6], [-129, 30, 128, 200],
                           [0, 0, 0, 0]])
    dut = ThresholdUnit(thresholds=thresholds, in_dtype=INT(8), out_dtype=UINT(3), out_bias=0,
                        channels=4, elems=2)
    values = np.repeat(np.arange(-128, 128), 4).reshape(256, 4)
    run = run_stream(dut, pack(values, INT(8), 2), 512, in_gap=0.1, out_stall=0.1, seed=3)
    np.testing.assert_array_equal(unpack(run.beats, UINT(3), 2).reshape(256, 4),
                                  threshold_reference(values, thresholds, out_dtype=UINT(3),
                                                      out_bias=0))


def test_attributes_describe_the_streams():
    dut, *_ = build("per_channel_int8_to_uint2")
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (2, 8, 2, 2)
    assert dut.i.payload.shape().width == 16 and dut.o.payload.shape().width == 4
    # Thresholds clamp to [-128, 128]: one bit more than an INT8.
    assert dut.compare_shape == signed(9)
    bipolar, *_ = build("bipolar_in_one_group")
    assert bipolar.compare_shape == signed(3)
    unsigned_in, *_ = build("one_channel")
    assert unsigned_in.compare_shape == unsigned(5)


def test_elems_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'act1': elems=4 does not divide the 6 "
                                           r"channels; valid elems: 1, 2, 3, 6$"):
        ThresholdUnit(thresholds=np.zeros((6, 1), dtype=np.int64), in_dtype=INT(8),
                      out_dtype=BINARY, out_bias=0, channels=6, elems=4, name="act1")


@pytest.mark.parametrize("changes,message", [
    (dict(thresholds=np.zeros((3, 2), dtype=np.int64)),
     r"thresholds must be an integer array of shape \(6, L\) or \(1, L\) with L >= 1, not "
     r"int64 of shape \(3, 2\)"),
    (dict(thresholds=np.zeros((6, 0), dtype=np.int64)),
     r"thresholds must be an integer array of shape \(6, L\) or \(1, L\) with L >= 1, not "
     r"int64 of shape \(6, 0\)"),
    (dict(thresholds=np.zeros((6, 2))),
     r"thresholds must be an integer array of shape \(6, L\) or \(1, L\) with L >= 1, not "
     r"float64 of shape \(6, 2\)"),
    (dict(out_dtype=BIPOLAR), r"a BIPOLAR output needs exactly 1 threshold per channel, not 2"),
    (dict(out_dtype=UINT(1)), r"out_dtype UINT1 cannot hold the outputs out_bias \+ \[0, 2\] = "
                              r"\[0, 2\]"),
    (dict(out_dtype=INT(2), out_bias=-3), r"out_dtype INT2 cannot hold the outputs out_bias "
                                          r"\+ \[0, 2\] = \[-3, -1\]"),
    (dict(channels=0), r"channels must be an integer >= 1, not 0"),
])
def test_parameters_are_checked(changes, message):
    args = dict(thresholds=np.zeros((6, 2), dtype=np.int64), in_dtype=INT(8),
                out_dtype=UINT(2), out_bias=0, channels=6, elems=2)
    with pytest.raises(ValueError, match=f"^node 'thresholds': {message}$"):
        ThresholdUnit(**{**args, **changes})


@pytest.mark.parametrize("case", ["per_channel_int8_to_uint2", "shared_int8_to_int4"])
def test_verilog_passes_verilator_lint(tmp_path, case):
    # Shared thresholds are constants: no ROM.
    dut, *_ = build(case)
    text = to_verilog(StreamAccelerator(stages=[dut]))
    assert ("threshold_rom" in text) == (case == "per_channel_int8_to_uint2")
    (tmp_path / "streamc_top.v").write_text(text)
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")
