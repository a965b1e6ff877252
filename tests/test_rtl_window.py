# amaranth: UnusedElaboratable=no
# (the error tests build kernels that are never elaborated)
"""SlidingWindow and WindowReduce against numpy references in Amaranth's simulator."""

from __future__ import annotations


import numpy as np
import pytest

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT, DataType
from streamc.errors import FoldingError
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.rtl.window import (SlidingWindow, WindowReduce, sliding_window_reference,
                                window_reduce_reference)
from test_rtl_top import axis_ports


def random_values(rng, dtype: DataType, shape) -> np.ndarray:
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape)
    return rng.integers(dtype.min, dtype.max + 1, size=shape)


# name: (in_shape, kernel, stride, padding, dilation, dtype, pad_value, simd)
WINDOWS = {
    "3x3_pad1": ((5, 6, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), INT(4), 0, 2),
    "3x3_pad1_zero_point": ((5, 6, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), UINT(2), 3, 1),
    "2x2_stride2": ((6, 6, 2), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), BIPOLAR, 0, 2),
    "asymmetric_pad": ((5, 6, 4), (2, 2), (1, 1), (0, 1, 1, 0), (1, 1), INT(4), 3, 4),
    "dilation2": ((6, 5, 2), (3, 3), (1, 1), (2, 1, 0, 2), (2, 2), UINT(2), 0, 1),
    "1d": ((1, 8, 3), (1, 3), (1, 1), (0, 1, 0, 1), (1, 1), INT(4), 0, 3),
    "stride_past_kernel": ((7, 7, 2), (2, 2), (3, 3), (0, 0, 0, 0), (1, 1), INT(4), 0, 2),
    "3x3_stride2_pad1": ((5, 5, 4), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), UINT(2), 0, 2),
    # one beat a patch: the corner moves every cycle, so its counts are not summed ahead
    "1x1_stride2_one_beat": ((6, 5, 2), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), INT(4), 0, 2),
}


def build_window(case: str, needed_register: bool = False, address_register: bool = False) -> SlidingWindow:
    in_shape, kernel, stride, padding, dilation, dtype, pad_value, simd = WINDOWS[case]
    return SlidingWindow(in_shape=in_shape, kernel=kernel, stride=stride, padding=padding,
                         dilation=dilation, dtype=dtype, pad_value=pad_value, simd=simd,
                         needed_register=needed_register, address_register=address_register, name=case)


def expected_patches(case: str, frames: np.ndarray) -> np.ndarray:
    _, kernel, stride, padding, dilation, _, pad_value, _ = WINDOWS[case]
    return np.stack([sliding_window_reference(f, kernel=kernel, stride=stride, padding=padding,
                                              dilation=dilation, pad_value=pad_value)
                     for f in frames])


def run_window(case: str, *, frames: int, in_gap: float, out_stall: float, seed: int, needed_register=False,
               address_register=False):
    dut = build_window(case, needed_register, address_register)
    in_shape, dtype, simd = WINDOWS[case][0], WINDOWS[case][5], WINDOWS[case][7]
    rng = np.random.default_rng(seed)
    images = random_values(rng, dtype, (frames, *in_shape))
    run = run_stream(dut, pack(images, dtype, simd), frames * dut.out_count // simd,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    got = unpack(run.beats, dtype, simd).reshape(frames, *expected_patches(case, images[:1]).shape[1:])
    np.testing.assert_array_equal(got, expected_patches(case, images))
    return dut, run


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_window_matches_reference_under_stalls(case):
    run_window(case, frames=3, in_gap=0.3, out_stall=0.4, seed=len(case))


@pytest.mark.parametrize("address_register", [False, True])
@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_window_with_its_needed_count_in_a_register_matches_reference_under_stalls(case, address_register):
    run_window(case, frames=3, in_gap=0.3, out_stall=0.4, seed=len(case), needed_register=True,
               address_register=address_register)


@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_window_reading_at_a_registered_address_matches_reference_under_stalls(case):
    run_window(case, frames=3, in_gap=0.3, out_stall=0.4, seed=len(case) + 1, address_register=True)


@pytest.mark.parametrize("needed_register", [False, True])
@pytest.mark.parametrize("case", sorted(WINDOWS))
def test_window_frames_flow_back_to_back_at_the_cycle_model(case, needed_register):
    frames = 4
    dut, run = run_window(case, frames=frames, in_gap=0.0, out_stall=0.0, seed=1, needed_register=needed_register,
                          address_register=needed_register)
    beats = dut.out_count // dut.out_elems
    last_beat_of_frame = run.cycles[beats - 1::beats]
    assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)
    assert dut.cycles_per_frame == max(dut.in_count, dut.out_count) // dut.out_elems


def test_window_sums_its_next_counts_ahead_where_a_patch_takes_two_beats():
    assert build_window("3x3_pad1", needed_register=True).precomputed_moves
    assert not build_window("1x1_stride2_one_beat", needed_register=True).precomputed_moves
    assert not build_window("3x3_pad1").precomputed_moves


def random_geometries(count: int, seed: int) -> list[tuple]:
    """Small (in_shape, kernel, stride, padding, dilation, simd) draws over every parameter."""
    rng = np.random.default_rng(seed)
    geometries = []
    while len(geometries) < count:
        h, w = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        kh, kw = (1 if h == 1 else int(rng.integers(1, 4))), int(rng.integers(1, 4))
        sh, sw, dh, dw = (int(v) for v in rng.integers(1, 4, size=4))
        dh, dw = min(dh, 2), min(dw, 2)
        extent_h, extent_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
        padding = tuple(int(rng.integers(0, e)) for e in (extent_h, extent_w, extent_h, extent_w))
        if (h + padding[0] + padding[2] < extent_h) or (w + padding[1] + padding[3] < extent_w):
            continue
        geometries.append(((h, w, 2), (kh, kw), (sh, sw), padding, (dh, dw),
                           int(rng.integers(1, 3))))
    return geometries


@pytest.mark.parametrize("geometry", random_geometries(40, seed=2024), ids=str)
def test_random_geometries_match_reference_at_the_cycle_model(geometry):
    """The ring's size (see SlidingWindow) keeps frames back to back for any geometry."""
    in_shape, kernel, stride, padding, dilation, simd = geometry
    dut = SlidingWindow(in_shape=in_shape, kernel=kernel, stride=stride, padding=padding,
                        dilation=dilation, dtype=INT(3), pad_value=-1, simd=simd, needed_register=simd == 2)
    frames = 4
    images = random_values(np.random.default_rng(0), INT(3), (frames, *in_shape))
    beats = dut.out_count // simd
    run = run_stream(dut, pack(images, INT(3), simd), frames * beats)
    expected = np.stack([sliding_window_reference(f, kernel=kernel, stride=stride,
                                                  padding=padding, dilation=dilation,
                                                  pad_value=-1) for f in images])
    np.testing.assert_array_equal(unpack(run.beats, INT(3), simd).reshape(expected.shape),
                                  expected)
    last_beat_of_frame = run.cycles[beats - 1::beats]
    assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)


def test_window_first_beat_follows_the_pixels_it_needs():
    # 3x3 pad 1 on 5x6: the first patch reads pixels up to (1, 1), raster index 7, i.e. the
    # first 8 pixels of 2 beats each; the last of them is taken in cycle 15.
    dut, run = run_window("3x3_pad1", frames=1, in_gap=0.0, out_stall=0.0, seed=2)
    assert dut.latency == 2
    assert run.cycles[0] == 8 * 2 - 1 + dut.latency


def test_window_issuing_on_registered_compares_is_a_cycle_later():
    # needed_register: the reader sees the pixel the first patch needs a cycle after it arrives.
    dut, run = run_window("3x3_pad1", frames=1, in_gap=0.0, out_stall=0.0, seed=2, needed_register=True)
    assert dut.latency == 3
    assert run.cycles[0] == 8 * 2 - 1 + dut.latency


def test_window_attributes_describe_the_streams():
    dut = build_window("3x3_pad1")
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (2, 4, 2, 4)
    assert dut.out_shape == (5, 6, 36)
    assert (dut.in_count, dut.out_count) == (120, 1080)
    assert dut.cycles_per_frame == 540
    # max(S + SH, H - L + F) + E = max(3 + 1, 5 - 3 + 2) + 0
    assert dut.buffer_rows == 4
    assert dut.i.payload.shape().width == 8 and dut.o.payload.shape().width == 8
    assert build_window("stride_past_kernel").out_shape == (2, 2, 8)


def test_window_simd_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'conv1': simd=3 does not divide the 4 "
                                           r"channels; valid simd: 1, 2, 4$"):
        SlidingWindow(in_shape=(5, 6, 4), kernel=(3, 3), dtype=INT(4), simd=3, name="conv1")


@pytest.mark.parametrize("changes,message", [
    (dict(dtype=BIPOLAR), r"pad_value must be a BIPOLAR value, not 0"),
    (dict(dtype=UINT(2), pad_value=4), r"pad_value must be a UINT2 value, not 4"),
    (dict(padding=(0, 3, 0, 0)), r"left padding must be smaller than the dilated kernel "
                                 r"extent 3, not 3"),
    (dict(kernel=(7, 3), padding=(0, 0, 0, 0)), r"the dilated kernel 7x3 does not fit the "
                                                r"padded image 5x6"),
    (dict(stride=(0, 1)), r"stride must be 2 integers >= 1, not \(0, 1\)"),
])
def test_window_parameters_are_checked(changes, message):
    args = dict(in_shape=(5, 6, 4), kernel=(3, 3), padding=(1, 1, 1, 1), dtype=INT(4), simd=1)
    with pytest.raises(ValueError, match=f"^node 'swg': {message}$"):
        SlidingWindow(**{**args, **changes})


def test_window_without_padding_ignores_pad_value():
    dut = SlidingWindow(in_shape=(4, 4, 1), kernel=(2, 2), stride=(2, 2), dtype=BIPOLAR, simd=1)
    assert dut.out_shape == (2, 2, 4)


# name: (channels, window, mode, in_dtype, out_dtype, simd, vectors)
REDUCTIONS = {
    "max_int4": (4, 9, "max", INT(4), INT(4), 2, 3),
    "max_uint2_simd1": (4, 4, "max", UINT(2), UINT(3), 1, 2),
    "max_bipolar": (6, 4, "max", BIPOLAR, BIPOLAR, 6, 3),
    "sum_int4": (4, 9, "sum", INT(4), INT(8), 4, 2),
    "sum_bipolar_window1": (3, 1, "sum", BIPOLAR, INT(2), 3, 4),
    "sum_uint2": (6, 5, "sum", UINT(2), UINT(4), 3, 2),
}


def build_reduce(case: str) -> WindowReduce:
    channels, window, mode, in_dtype, out_dtype, simd, vectors = REDUCTIONS[case]
    return WindowReduce(channels=channels, window=window, mode=mode, in_dtype=in_dtype,
                        out_dtype=out_dtype, simd=simd, vectors=vectors, name=case)


@pytest.mark.parametrize("stalls", [(0.3, 0.4), (0.0, 0.0)], ids=["stalls", "no_stalls"])
@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_reduce_matches_reference(case, stalls):
    channels, window, mode, in_dtype, out_dtype, simd, vectors = REDUCTIONS[case]
    dut = build_reduce(case)
    frames = 3
    rng = np.random.default_rng(len(case))
    patches = random_values(rng, in_dtype, (frames * vectors, window * channels))
    in_gap, out_stall = stalls
    run = run_stream(dut, pack(patches, in_dtype, simd), frames * vectors * channels // simd,
                     in_gap=in_gap, out_stall=out_stall, seed=5)
    got = unpack(run.beats, out_dtype, simd).reshape(frames * vectors, channels)
    expected = window_reduce_reference(patches, channels=channels, mode=mode)
    np.testing.assert_array_equal(got, expected)
    if stalls == (0.0, 0.0):
        beats = vectors * channels // simd
        last_beat_of_frame = run.cycles[beats - 1::beats]
        assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)
        assert dut.cycles_per_frame == vectors * window * channels // simd
        # The first result: the first channel group's last window position.
        assert run.cycles[0] == (window - 1) * (channels // simd) + dut.latency


def test_reduce_simd_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'pool1': simd=4 does not divide the 6 "
                                           r"channels; valid simd: 1, 2, 3, 6$"):
        WindowReduce(channels=6, window=4, mode="max", in_dtype=INT(4), out_dtype=INT(4),
                     simd=4, vectors=1, name="pool1")


@pytest.mark.parametrize("changes,message", [
    (dict(mode="avg"), r"mode must be one of max, sum, not 'avg'"),
    (dict(out_dtype=INT(7)), r"out_dtype INT7 cannot hold the sums of 9 INT4 values, "
                             r"\[-72, 63\]"),
    (dict(mode="max", out_dtype=UINT(4)), r"out_dtype UINT4 cannot hold the maxima of INT4 "
                                          r"values"),
    (dict(vectors=0), r"vectors must be an integer >= 1, not 0"),
])
def test_reduce_parameters_are_checked(changes, message):
    args = dict(channels=4, window=9, mode="sum", in_dtype=INT(4), out_dtype=INT(8), simd=2,
                vectors=1)
    with pytest.raises(ValueError, match=f"^node 'pool': {message}$"):
        WindowReduce(**{**args, **changes})


def max_pool_chain():
    """A 3x3 stride-2 max pool with padding on a 7x7x4 INT4 image (zero point 0)."""
    swg = SlidingWindow(in_shape=(7, 7, 4), kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1),
                        dtype=INT(4), simd=2, name="pool_swg")
    oh, ow, _ = swg.out_shape
    pool = WindowReduce(channels=4, window=9, mode="max", in_dtype=INT(4), out_dtype=INT(4),
                        simd=2, vectors=oh * ow, name="pool")
    return swg, pool


@pytest.mark.parametrize("in_gap,out_stall", [(0.3, 0.4), (0.0, 0.0)])
def test_max_pool_chain_matches_reference(in_gap, out_stall):
    swg, pool = max_pool_chain()
    top = StreamAccelerator(stages=[swg, pool], fifo_depths=[2])
    frames = 3
    images = random_values(np.random.default_rng(9), INT(4), (frames, 7, 7, 4))
    source, sink = axis_ports(top)
    beats = 4 * 4 * 4 // 2
    run = run_stream(top, pack(images, INT(4), 2), frames * beats, in_gap=in_gap,
                     out_stall=out_stall, seed=3, source=source, sink=sink)
    expected = np.stack([window_reduce_reference(
        sliding_window_reference(f, kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1)),
        channels=4, mode="max") for f in images])
    np.testing.assert_array_equal(unpack(run.beats, INT(4), 2).reshape(expected.shape), expected)
    if in_gap == out_stall == 0:
        assert swg.cycles_per_frame == pool.cycles_per_frame == 288
        last_beat_of_frame = run.cycles[beats - 1::beats]
        assert np.diff(last_beat_of_frame).tolist() == [288] * (frames - 1)


def test_global_sum_pool_of_a_layer_output():
    # A 4x5 image of 6 INT4 channels summed over all 20 pixels: raster order is one window.
    pool = WindowReduce(channels=6, window=20, mode="sum", in_dtype=INT(4), out_dtype=INT(9),
                        simd=3, vectors=1, name="global_pool")
    frames = 3
    images = random_values(np.random.default_rng(4), INT(4), (frames, 4, 5, 6))
    run = run_stream(pool, pack(images, INT(4), 3), frames * 2, in_gap=0.2, out_stall=0.3)
    np.testing.assert_array_equal(unpack(run.beats, INT(9), 3).reshape(frames, 6),
                                  images.sum(axis=(1, 2)))


@pytest.mark.parametrize("in_dtype, out_dtype", [
    (BIPOLAR, BIPOLAR), (UINT(1), UINT(1)), (UINT(2), UINT(4)), (INT(2), INT(4)), (INT(3), INT(3)),
])
def test_max_pool_of_narrow_types(in_dtype, out_dtype):
    # The running values are the stored codes: a bipolar max is the OR of its codes, and a result
    # is zero- or sign-extended by its own type into a wider output.
    pool = WindowReduce(channels=4, window=4, mode="max", in_dtype=in_dtype, out_dtype=out_dtype,
                        simd=2, vectors=3, name="pool")
    assert pool._value_shape.width == in_dtype.bitwidth
    frames = 2
    patches = random_values(np.random.default_rng(7), in_dtype, (frames, 3, 4, 4))  # frame, vector, k, channel
    run = run_stream(pool, pack(patches, in_dtype, 2), frames * 3 * 2, in_gap=0.2, out_stall=0.3)
    np.testing.assert_array_equal(unpack(run.beats, out_dtype, 2).reshape(frames, 3, 4), patches.max(axis=2))


def lint(tmp_path, top) -> None:
    (tmp_path / "streamc_top.v").write_text(to_verilog(top))
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")


@pytest.mark.parametrize("design", ["3x3_pad1", "1d", "max_pool_chain", "sum_bipolar_window1"])
def test_verilog_passes_verilator_lint(tmp_path, design):
    if design == "max_pool_chain":
        stages = list(max_pool_chain())
    elif design in WINDOWS:
        stages = [build_window(design)]
    else:
        stages = [build_reduce(design)]
    lint(tmp_path, StreamAccelerator(stages=stages))
