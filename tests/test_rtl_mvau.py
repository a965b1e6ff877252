# amaranth: UnusedElaboratable=no
# (tests build units only to look at their attributes or errors)
"""MatrixVectorUnit against a numpy reference in Amaranth's simulator."""

from __future__ import annotations

import numpy as np
import pytest

from rtl_helpers import pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT, DataType
from streamc.errors import FoldingError
from streamc.rtl.mvau import MatrixVectorUnit

MH, MW = 8, 12


def random_values(rng, dtype: DataType, shape) -> np.ndarray:
    if dtype.bipolar:
        return rng.choice([-1, 1], size=shape)
    return rng.integers(dtype.min, dtype.max + 1, size=shape)


def random_thresholds(rng, weights, in_dtype, n_thr) -> np.ndarray:
    """Sorted thresholds spread over (and a little past) the reachable accumulator range."""
    reach = int(np.abs(weights).sum(axis=1).max()) * max(abs(in_dtype.min), abs(in_dtype.max))
    return np.sort(rng.integers(-reach - 3, reach + 4, size=(weights.shape[0], n_thr)), axis=1)


def reference(weights, thresholds, out_dtype, out_bias, vectors) -> np.ndarray:
    """qonnx semantics: MatMul, then MultiThreshold with out_bias (BIPOLAR: -1/+1)."""
    acc = vectors @ weights.T
    if thresholds is None:
        return acc
    count = (acc[:, :, None] >= thresholds[None, :, :]).sum(axis=2)
    if out_dtype.bipolar:
        return np.where(count == 1, 1, -1)
    return out_bias + count


# (in_dtype, weight_dtype, thresholds per channel or None, out_dtype, out_bias)
CASES = {
    "bipolar_x_bipolar_thr": (BIPOLAR, BIPOLAR, 1, BIPOLAR, 0),
    "bipolar_x_bipolar_multi_thr": (BIPOLAR, BIPOLAR, 3, UINT(2), 0),
    "bipolar_x_bipolar_acc": (BIPOLAR, BIPOLAR, None, INT(5), 0),
    "int4_x_bipolar_acc": (INT(4), BIPOLAR, None, INT(8), 0),
    "bipolar_x_int3_acc": (BIPOLAR, INT(3), None, INT(7), 0),
    "int2_x_int3_thr": (INT(2), INT(3), 3, INT(2), -2),
    "int2_x_int3_acc": (INT(2), INT(3), None, INT(8), 0),
    "uint2_x_int2_bipolar_out": (UINT(2), INT(2), 1, BIPOLAR, 0),
    "uint2_x_int2_int4_out": (UINT(2), INT(2), 15, INT(4), -8),
}
ALL_FOLDINGS = [(pe, simd) for pe in (1, 2, 8) for simd in (1, 3, 12)]


def build(case: str, pe: int, simd: int, seed: int = 0):
    in_dtype, weight_dtype, n_thr, out_dtype, out_bias = CASES[case]
    rng = np.random.default_rng(seed)
    weights = random_values(rng, weight_dtype, (MH, MW))
    thresholds = None if n_thr is None else random_thresholds(rng, weights, in_dtype, n_thr)
    dut = MatrixVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                           pe=pe, simd=simd, thresholds=thresholds, out_dtype=out_dtype,
                           out_bias=out_bias, name="fc")
    return dut, weights, thresholds, rng


def check_against_reference(case, pe, simd, *, frames, in_gap, out_stall, seed=0):
    dut, weights, thresholds, rng = build(case, pe, simd, seed)
    in_dtype, _, _, out_dtype, out_bias = CASES[case]
    vectors = random_values(rng, in_dtype, (frames, MW))
    run = run_stream(dut, pack(vectors, in_dtype, simd), frames * MH // pe,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    got = unpack(run.beats, out_dtype, pe).reshape(frames, MH)
    np.testing.assert_array_equal(got, reference(weights, thresholds, out_dtype, out_bias, vectors))


@pytest.mark.parametrize("pe,simd", ALL_FOLDINGS)
def test_every_folding_matches_reference_under_stalls(pe, simd):
    check_against_reference("int2_x_int3_thr", pe, simd, frames=3, in_gap=0.3, out_stall=0.4,
                            seed=pe * 100 + simd)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("pe,simd", [(1, 1), (2, 3), (8, 12)])
def test_datatypes_match_reference_under_stalls(case, pe, simd):
    check_against_reference(case, pe, simd, frames=3, in_gap=0.3, out_stall=0.4, seed=7)


@pytest.mark.parametrize("pe,simd", [(1, 1), (2, 3), (8, 12), (1, 12), (8, 1)])
@pytest.mark.parametrize("case", ["bipolar_x_bipolar_thr", "int4_x_bipolar_acc"])
def test_frames_flow_back_to_back_without_bubbles(case, pe, simd):
    frames = 4
    dut, weights, thresholds, rng = build(case, pe, simd)
    in_dtype, _, _, out_dtype, out_bias = CASES[case]
    vectors = random_values(rng, in_dtype, (frames, MW))
    run = run_stream(dut, pack(vectors, in_dtype, simd), frames * MH // pe)
    got = unpack(run.beats, out_dtype, pe).reshape(frames, MH)
    np.testing.assert_array_equal(got, reference(weights, thresholds, out_dtype, out_bias, vectors))

    last_beat_of_frame = run.cycles[MH // pe - 1::MH // pe]
    assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)
    assert dut.cycles_per_frame == (MH // pe) * (MW // simd)
    # The first output beat: the first neuron fold's SF input beats, then the pipeline.
    assert run.cycles[0] == (MW // simd - 1) + dut.latency


def test_attributes_describe_the_streams():
    dut, *_ = build("int2_x_int3_thr", 2, 3)
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (3, 2, 2, 2)
    assert dut.i.payload.shape().width == 6 and dut.o.payload.shape().width == 4
    assert dut.cycles_per_frame == 16
    assert dut.latency == 5


def test_accumulator_is_sized_from_the_weights():
    weights = np.zeros((2, 4), dtype=np.int64)
    weights[0, 0] = 3
    dut = MatrixVectorUnit(weights=weights, in_dtype=UINT(2), weight_dtype=INT(3), pe=1, simd=1,
                           thresholds=None, out_dtype=UINT(4))
    assert dut.acc_shape.width == 4 and not dut.acc_shape.signed  # 0..9


def test_thresholds_are_clamped_before_sizing_the_comparator():
    weights = np.ones((2, 4), dtype=np.int64)
    thresholds = np.array([[-1000, 2, 1000], [0, 1, 5]])
    dut = MatrixVectorUnit(weights=weights, in_dtype=BIPOLAR, weight_dtype=BIPOLAR, pe=1,
                           simd=4, thresholds=thresholds, out_dtype=UINT(2))
    assert dut.acc_shape.width == 3 and not dut.acc_shape.signed  # popcount 0..4, clamp to 5


def test_simd_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'fc1' \(MatMul 64x784\): simd=12 does not "
                                           r"divide 784; valid simd: 1, 2, 4, 7, 8, 14, 16, 28, "
                                           r"49, 56, 98, 112, 196, 392, 784$"):
        MatrixVectorUnit(weights=np.ones((64, 784), dtype=np.int64), in_dtype=BIPOLAR,
                         weight_dtype=BIPOLAR, pe=1, simd=12, thresholds=None,
                         out_dtype=INT(11), name="fc1")


def test_pe_that_does_not_divide_is_a_folding_error():
    with pytest.raises(FoldingError, match=r"^node 'fc' \(MatMul 8x12\): pe=3 does not divide "
                                           r"8; valid pe: 1, 2, 4, 8$"):
        build("int2_x_int3_thr", 3, 1)


def test_weights_outside_their_datatype_are_refused():
    with pytest.raises(ValueError, match=r"^node 'mvau': weights must be INT2 values, found "
                                         r"values in \[-1, 2\]$"):
        MatrixVectorUnit(weights=np.array([[-1, 2]]), in_dtype=INT(2), weight_dtype=INT(2),
                         pe=1, simd=1, thresholds=None, out_dtype=INT(8))


def test_threshold_shape_is_checked():
    with pytest.raises(ValueError, match=r"^node 'mvau': thresholds must be an integer array of "
                                         r"shape \(2, L\) with L >= 1, not int64 of shape "
                                         r"\(3, 1\)$"):
        MatrixVectorUnit(weights=np.ones((2, 2), dtype=np.int64), in_dtype=INT(2),
                         weight_dtype=INT(2), pe=1, simd=1,
                         thresholds=np.zeros((3, 1), dtype=np.int64), out_dtype=UINT(1))


def test_bipolar_output_needs_one_threshold():
    with pytest.raises(ValueError, match=r"^node 'mvau': a BIPOLAR output needs exactly 1 "
                                         r"threshold per channel, not 2$"):
        MatrixVectorUnit(weights=np.ones((2, 2), dtype=np.int64), in_dtype=INT(2),
                         weight_dtype=INT(2), pe=1, simd=1,
                         thresholds=np.zeros((2, 2), dtype=np.int64), out_dtype=BIPOLAR)


def test_output_range_must_fit_out_dtype():
    with pytest.raises(ValueError, match=r"^node 'mvau': out_dtype UINT2 cannot hold the "
                                         r"outputs out_bias \+ \[0, 3\] = \[1, 4\]$"):
        MatrixVectorUnit(weights=np.ones((2, 2), dtype=np.int64), in_dtype=INT(2),
                         weight_dtype=INT(2), pe=1, simd=1,
                         thresholds=np.zeros((2, 3), dtype=np.int64), out_dtype=UINT(2),
                         out_bias=1)
    with pytest.raises(ValueError, match=r"^node 'mvau': out_dtype INT2 cannot hold the "
                                         r"accumulator range \[-4, 2\]$"):
        MatrixVectorUnit(weights=np.ones((2, 2), dtype=np.int64), in_dtype=INT(2),
                         weight_dtype=INT(2), pe=1, simd=1, thresholds=None, out_dtype=INT(2))
