# amaranth: UnusedElaboratable=no
# (the error and attribute tests build units that are never elaborated)
"""VectorVectorUnit against numpy in Amaranth's simulator, alone and as a depthwise
convolution or average pool behind SlidingWindow and in front of ThresholdUnit."""

from __future__ import annotations


import numpy as np
import pytest
from amaranth.hdl import signed, unsigned

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BINARY, BIPOLAR, INT, TERNARY, UINT
from streamc.errors import FoldingError
from streamc.rtl.threshold import ThresholdUnit, threshold_reference
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.rtl.vvau import VectorVectorUnit, vector_vector_reference
from streamc.rtl.window import SlidingWindow, sliding_window_reference
from test_rtl_top import axis_ports
from test_rtl_window import random_values

# name: (channels C, taps K, in_dtype, weight_dtype, simd, vectors per frame)
CASES = {
    "3x3_int4_x_int3": (4, 9, INT(4), INT(3), 2, 3),
    "3x3_one_channel": (1, 9, UINT(2), INT(2), 1, 4),
    "simd_equals_channels": (6, 4, INT(3), INT(2), 6, 2),
    "1x1": (4, 1, INT(4), INT(4), 2, 3),
    "1x1_simd_equals_channels": (3, 1, UINT(3), INT(3), 3, 3),
    "8x8_global_average": (3, 64, UINT(4), UINT(1), 1, 1),
    "bipolar_x_bipolar": (4, 9, BIPOLAR, BIPOLAR, 2, 2),
    "int4_x_bipolar": (4, 4, INT(4), BIPOLAR, 4, 2),
    "bipolar_x_int3": (2, 9, BIPOLAR, INT(3), 1, 2),
    "uint2_x_ternary": (4, 4, UINT(2), TERNARY, 1, 2),
}


def case_weights(case: str, rng) -> np.ndarray:
    channels, taps, _, weight_dtype, _, _ = CASES[case]
    if case.endswith("average"):
        return np.ones((channels, taps), dtype=np.int64)
    return random_values(rng, weight_dtype, (channels, taps))


def run_case(case: str, *, frames: int, in_gap: float, out_stall: float, seed: int):
    channels, taps, in_dtype, weight_dtype, simd, vectors = CASES[case]
    rng = np.random.default_rng(seed)
    weights = case_weights(case, rng)
    dut = VectorVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                           simd=simd, vectors=vectors, name=case)
    patches = random_values(rng, in_dtype, (frames * vectors, taps * channels))
    run = run_stream(dut, pack(patches, in_dtype, simd), frames * vectors * channels // simd,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    got = unpack(run.beats, dut.out_dtype, simd).reshape(frames * vectors, channels)
    np.testing.assert_array_equal(got, vector_vector_reference(patches, weights))
    return dut, run


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_reference_under_stalls(case):
    run_case(case, frames=3, in_gap=0.3, out_stall=0.4, seed=len(case))


@pytest.mark.parametrize("case", sorted(CASES))
def test_frames_flow_back_to_back_at_the_cycle_model(case):
    channels, taps, _, _, simd, vectors = CASES[case]
    frames = 3
    dut, run = run_case(case, frames=frames, in_gap=0.0, out_stall=0.0, seed=1)
    groups = channels // simd
    assert dut.cycles_per_frame == vectors * taps * groups
    beats = vectors * groups
    last_beat_of_frame = run.cycles[beats - 1::beats]
    assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)
    # Input beat n is taken in cycle n: a vector's groups leave in the cycles right after
    # their last-tap beats, ``latency`` later.
    expected = [v * taps * groups + (taps - 1) * groups + g + dut.latency
                for v in range(frames * vectors) for g in range(groups)]
    assert run.cycles == expected
    assert dut.latency == 3


def test_attributes_describe_the_streams():
    weights = np.zeros((6, 9), dtype=np.int64)
    weights[0, 0], weights[1, 1] = -4, 3
    dut = VectorVectorUnit(weights=weights, in_dtype=UINT(4), weight_dtype=INT(3), simd=3,
                           vectors=25)
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (3, 4, 3, 7)
    assert dut.i.payload.shape().width == 12 and dut.o.payload.shape().width == 21
    assert dut.cycles_per_frame == 25 * 9 * 2
    no_vectors = VectorVectorUnit(weights=weights, in_dtype=UINT(4), weight_dtype=INT(3),
                                  simd=3)
    assert no_vectors.cycles_per_frame == 9 * 2


@pytest.mark.parametrize("weights,in_dtype,weight_dtype,out_dtype,acc_shape", [
    # Channel 0: taps in [0, 3] and [-6, 0]; channel 1: [0, 9] and 0.
    ([[1, -2], [3, 0]], UINT(2), INT(3), INT(5), signed(5)),
    # The partial sum after tap 0 reaches -6, below every complete sum.
    ([[-2, 2]], UINT(2), INT(3), INT(4), signed(4)),
    (np.ones((3, 64), dtype=np.int64), UINT(4), UINT(1), UINT(10), unsigned(10)),
    (np.ones((2, 9), dtype=np.int64), BIPOLAR, BIPOLAR, INT(5), signed(5)),
    ([[1, 1, 1, 1]], BIPOLAR, INT(2), INT(4), signed(4)),
    ([[1, 0], [0, 1]], UINT(1), UINT(1), BINARY, unsigned(1)),
])
def test_out_dtype_is_the_smallest_for_the_actual_weights(weights, in_dtype, weight_dtype,
                                                          out_dtype, acc_shape):
    dut = VectorVectorUnit(weights=np.asarray(weights), in_dtype=in_dtype,
                           weight_dtype=weight_dtype, simd=1)
    assert dut.out_dtype == out_dtype
    assert dut.acc_shape == acc_shape


def test_simd_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'dw1': simd=4 does not divide the 6 "
                                           r"channels; valid simd: 1, 2, 3, 6$"):
        VectorVectorUnit(weights=np.ones((6, 9), dtype=np.int64), in_dtype=INT(4),
                         weight_dtype=INT(2), simd=4, name="dw1")


@pytest.mark.parametrize("changes,message", [
    (dict(weights=np.ones(9, dtype=np.int64)), r"weights must be a non-empty 2-D integer "
                                               r"array of shape \(C, K\), not int64 of shape "
                                               r"\(9,\)"),
    (dict(weights=np.ones((4, 9))), r"weights must be a non-empty 2-D integer array of shape "
                                    r"\(C, K\), not float64 of shape \(4, 9\)"),
    (dict(weights=np.full((4, 9), 2)), r"weights must be INT2 values, found values in "
                                       r"\[2, 2\]"),
    (dict(vectors=0), r"vectors must be an integer >= 1 or None, not 0"),
])
def test_parameters_are_checked(changes, message):
    args = dict(weights=np.ones((4, 9), dtype=np.int64), in_dtype=INT(4), weight_dtype=INT(2),
                simd=2)
    with pytest.raises(ValueError, match=f"^node 'vvau': {message}$"):
        VectorVectorUnit(**{**args, **changes})


# name: (in_shape, kernel, stride, padding, in_dtype, weight_dtype, all-ones weights,
#        simd, thresholds per channel, out_dtype, out_bias)
CHAINS = {
    "depthwise_3x3_pad1": ((5, 6, 4), (3, 3), (1, 1), (1, 1, 1, 1), INT(4), INT(3), False,
                           2, 3, UINT(2), 0),
    "average_pool_2x2_stride2": ((6, 6, 3), (2, 2), (2, 2), (0, 0, 0, 0), UINT(4), UINT(1),
                                 True, 3, 15, UINT(4), 0),
}


def chain(case: str, rng):
    (in_shape, kernel, stride, padding, in_dtype, weight_dtype, average, simd, n_thr,
     out_dtype, out_bias) = CHAINS[case]
    channels, taps = in_shape[2], kernel[0] * kernel[1]
    swg = SlidingWindow(in_shape=in_shape, kernel=kernel, stride=stride, padding=padding,
                        dtype=in_dtype, simd=simd, name="swg")
    oh, ow, _ = swg.out_shape
    weights = (np.ones((channels, taps), dtype=np.int64) if average
               else random_values(rng, weight_dtype, (channels, taps)))
    vvau = VectorVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                            simd=simd, vectors=oh * ow, name="dw")
    if average:
        # Rounded mean: mean >= l - 1/2  <=>  sum >= taps * (2l - 1) / 2, rounded up.
        levels = np.arange(1, n_thr + 1)
        thresholds = -(-(taps * (2 * levels - 1)) // 2)[None, :]
    else:
        reach = int(np.abs(weights).sum(axis=1).max()) * 8
        thresholds = np.sort(rng.integers(-reach, reach + 1, size=(channels, n_thr)), axis=1)
    thr = ThresholdUnit(thresholds=thresholds, in_dtype=vvau.out_dtype, out_dtype=out_dtype,
                        out_bias=out_bias, channels=channels, elems=simd, name="act")
    return [swg, vvau, thr], weights, thresholds


@pytest.mark.parametrize("in_gap,out_stall", [(0.3, 0.4), (0.0, 0.0)])
@pytest.mark.parametrize("case", sorted(CHAINS))
def test_chain_matches_numpy_convolution_and_thresholds(case, in_gap, out_stall):
    in_shape, kernel, stride, padding, in_dtype, *_, simd, _, out_dtype, out_bias = CHAINS[case]
    rng = np.random.default_rng(4)
    stages, weights, thresholds = chain(case, rng)
    top = StreamAccelerator(stages=stages)
    frames = 2
    images = random_values(rng, in_dtype, (frames, *in_shape))
    oh, ow, _ = stages[0].out_shape
    channels = in_shape[2]
    source, sink = axis_ports(top)
    run = run_stream(top, pack(images, in_dtype, simd), frames * oh * ow * channels // simd,
                     in_gap=in_gap, out_stall=out_stall, seed=6, source=source, sink=sink)
    got = unpack(run.beats, out_dtype, simd).reshape(frames, oh, ow, channels)

    # numpy depthwise convolution, independent of the window reference.
    (top_pad, left, bottom, right), (kh, kw), (sh, sw) = padding, kernel, stride
    padded = np.pad(images, ((0, 0), (top_pad, bottom), (left, right), (0, 0)))
    acc = np.zeros((frames, oh, ow, channels), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            acc += (padded[:, dy:dy + sh * oh:sh, dx:dx + sw * ow:sw, :]
                    * weights[:, dy * kw + dx])
    expected = threshold_reference(acc, thresholds, out_dtype=out_dtype, out_bias=out_bias)
    if case.startswith("average"):
        np.testing.assert_array_equal(expected, np.floor(acc / (kh * kw) + 0.5))
    np.testing.assert_array_equal(got, expected)
    if in_gap == out_stall == 0:
        # The window generator sets the pace; the unit and the thresholds keep up with it.
        beats = oh * ow * channels // simd
        assert stages[1].cycles_per_frame == stages[0].cycles_per_frame
        assert run.cycles[2 * beats - 1] - run.cycles[beats - 1] == stages[0].cycles_per_frame


def test_vvau_agrees_with_sliding_window_reference_patches():
    """The (k, c) order the unit expects is the one sliding_window_reference documents."""
    rng = np.random.default_rng(2)
    image = random_values(rng, INT(4), (4, 4, 3))
    weights = random_values(rng, INT(3), (3, 4))
    patches = sliding_window_reference(image, kernel=(2, 2))
    acc = vector_vector_reference(patches, weights)
    direct = sum(image[dy:dy + 3, dx:dx + 3, :] * weights[:, dy * 2 + dx]
                 for dy in range(2) for dx in range(2))
    np.testing.assert_array_equal(acc.reshape(3, 3, 3), direct)


@pytest.mark.parametrize("case", ["3x3_int4_x_int3", "1x1_simd_equals_channels"])
def test_verilog_passes_verilator_lint(tmp_path, case):
    # The 1x1 unit with simd = C has one group and one weight row: a constant, no ROM.
    channels, taps, in_dtype, weight_dtype, simd, vectors = CASES[case]
    weights = case_weights(case, np.random.default_rng(0))
    dut = VectorVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                           simd=simd, vectors=vectors)
    text = to_verilog(StreamAccelerator(stages=[dut]))
    assert ("weight_rom" in text) == (case == "3x3_int4_x_int3")
    (tmp_path / "streamc_top.v").write_text(text)
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")
