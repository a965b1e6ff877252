# amaranth: UnusedElaboratable=no
# (tests build units only to look at their attributes or errors)
"""MatrixVectorUnit against a numpy reference in Amaranth's simulator."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import signed, unsigned

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT, DataType
from streamc.errors import FoldingError
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.requant import ROUNDING_MODES, Requant, requantize
from streamc.resources import MVAUSpec
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.synth import synthesize

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
    "bipolar_x_int3_thr": (BIPOLAR, INT(3), 3, INT(2), -2),
    "uint2_x_bipolar_thr": (UINT(2), BIPOLAR, 3, UINT(2), 0),
    "uint3_x_bipolar_acc": (UINT(3), BIPOLAR, None, INT(8), 0),
    "int2_x_int3_thr": (INT(2), INT(3), 3, INT(2), -2),
    "int2_x_int3_acc": (INT(2), INT(3), None, INT(8), 0),
    "uint2_x_int2_bipolar_out": (UINT(2), INT(2), 1, BIPOLAR, 0),
    "uint2_x_int2_int4_out": (UINT(2), INT(2), 15, INT(4), -8),
}
ALL_FOLDINGS = [(pe, simd) for pe in (1, 2, 8) for simd in (1, 3, 12)]


def build(case: str, pe: int, simd: int, seed: int = 0, res_type: str = "auto", **pipelining):
    in_dtype, weight_dtype, n_thr, out_dtype, out_bias = CASES[case]
    rng = np.random.default_rng(seed)
    weights = random_values(rng, weight_dtype, (MH, MW))
    thresholds = None if n_thr is None else random_thresholds(rng, weights, in_dtype, n_thr)
    dut = MatrixVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                           pe=pe, simd=simd, thresholds=thresholds, out_dtype=out_dtype,
                           out_bias=out_bias, res_type=res_type, name="fc", **pipelining)
    return dut, weights, thresholds, rng


def check_against_reference(case, pe, simd, *, frames, in_gap, out_stall, seed=0, res_type="auto", **pipelining):
    dut, weights, thresholds, rng = build(case, pe, simd, seed, res_type, **pipelining)
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


@pytest.mark.parametrize("case", ["int2_x_int3_thr", "uint2_x_int2_int4_out", "int2_x_int3_acc"])
def test_multiplies_in_luts_match_reference(case):
    check_against_reference(case, 2, 3, frames=3, in_gap=0.3, out_stall=0.4, seed=11, res_type="lut")


def test_a_signed_input_is_multiplied_as_offset_binary_so_a_zero_point_needs_no_per_channel_thresholds():
    # onnxruntime's int8 activations have zero point -128: W (x + 128) >= t is W x >= t - 128 sum(w), a
    # different threshold in every channel. The lanes multiply x + 128 (its top bit flipped), so the unit
    # compares the same t in every channel (one ROM word), and its products are unsigned by signed.
    rng = np.random.default_rng(5)
    weights = random_values(rng, INT(8), (MH, MW))
    t = np.sort(rng.integers(0, 255 * 127 * MW // 8, 7))
    thresholds = t[None, :] - 128 * weights.sum(axis=1)[:, None]
    dut = MatrixVectorUnit(weights=weights, in_dtype=INT(8), weight_dtype=INT(8), pe=2, simd=3,
                           thresholds=thresholds, out_dtype=UINT(3), res_type="lut", name="fc")
    assert len(set(dut.threshold_rom_rows)) == 1
    assert not dut.lanes_multiply_signed_input
    vectors = random_values(rng, INT(8), (4, MW))
    vectors[0] = -128
    vectors[1] = 127
    run = run_stream(dut, pack(vectors, INT(8), 3), 4 * MH // 2, in_gap=0.3, out_stall=0.4, seed=5)
    np.testing.assert_array_equal(unpack(run.beats, UINT(3), 2).reshape(4, MH),
                                  reference(weights, thresholds, UINT(3), 0, vectors))


PIPELININGS = [dict(operand_register=True), dict(tree_every=1), dict(tree_every=2, operand_register=True),
               dict(tree_every=3), dict(tree_every=2, flow_control="skid"),
               dict(tree_every=1, operand_register=True, flow_control="credit"),
               dict(multiply_register=True, res_type="lut"),
               dict(multiply_register=True, res_type="lut", tree_every=1, operand_register=True),
               dict(operand_register=True, route_register=True, tree_every=1),
               dict(operand_register=True, route_register=True, flow_control="credit")]


@pytest.mark.parametrize("pipelining", PIPELININGS, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_pipelined_units_match_reference_under_stalls(case, pipelining):
    # Every output stage (accumulator, thresholds, one bipolar threshold) behind the extra registers,
    # with operands one or several levels of adders each.
    for pe, simd in ((2, 3), (8, 12)):
        check_against_reference(case, pe, simd, frames=3, in_gap=0.3, out_stall=0.4, seed=13, **pipelining)


@pytest.mark.parametrize("pe,simd", [(1, 1), (2, 3), (8, 12), (1, 12), (8, 1)])
@pytest.mark.parametrize("case, pipelining", [("bipolar_x_bipolar_thr", {}), ("int4_x_bipolar_acc", {}),
                                              ("uint2_x_int2_int4_out", dict(tree_every=1)),
                                              ("int2_x_int3_acc", dict(tree_every=2, operand_register=True)),
                                              ("uint2_x_int2_int4_out", dict(flow_control="skid")),
                                              ("int2_x_int3_thr", dict(tree_every=1, flow_control="credit")),
                                              ("int2_x_int3_thr", dict(operand_register=True, route_register=True)),
                                              ("bipolar_x_bipolar_thr", dict(flow_control="credit"))])
def test_frames_flow_back_to_back_without_bubbles(case, pipelining, pe, simd):
    frames = 4
    dut, weights, thresholds, rng = build(case, pe, simd, **pipelining)
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


@pytest.mark.parametrize("case, chained", [("int2_x_int3_acc", True), ("bipolar_x_bipolar_acc", False)])
def test_sums_of_wide_products_are_built_on_carry_chains(tmp_path, case, chained):
    # What the resource model assumes (resources.mvau.mvau_parts): each sum of the adder tree of
    # multi-bit products is a carry-chain adder, where one Yosys macc would build full adders in
    # LUTs with a single chain at its end; XNOR popcounts are left to Yosys.
    dut, *_ = build(case, 1, 12)
    (tmp_path / "streamc_top.v").write_text(to_verilog(StreamAccelerator(stages=[dut])))
    result = synthesize(verilog=tmp_path / "streamc_top.v", top="streamc_top", device="ice40-up5k",
                        workdir=tmp_path)
    # Eleven adders at least a product wide, against a macc's one accumulator-wide chain.
    product_bits = MVAUSpec.of_unit(dut).product_bits
    assert (result.cells.get("SB_CARRY", 0) >= 11 * product_bits) == chained


def test_thresholds_wider_than_one_memory_are_split_over_several(monkeypatch):
    import streamc.rtl.mvau as mvau

    # 8 lanes of 15 thresholds of 9 bits need 1080-bit rows; with 300-bit memories that is 4 ROMs of 2 lanes.
    monkeypatch.setattr(mvau, "MAX_MEMORY_WIDTH", 300)
    dut, weights, thresholds, rng = build("uint2_x_int2_int4_out", 8, 3)
    vectors = random_values(rng, UINT(2), (3, MW))
    run = run_stream(dut, pack(vectors, UINT(2), 3), 3 * MH // 8, in_gap=0.2, out_stall=0.2)
    got = unpack(run.beats, INT(4), 8).reshape(3, MH)
    np.testing.assert_array_equal(got, reference(weights, thresholds, INT(4), -8, vectors))
    assert dut.acc_shape.width * 15 * 2 <= 300 < dut.acc_shape.width * 15 * 3


BANKED = dict(operand_register=True, ram_style="distributed")


@pytest.mark.parametrize("pe,simd,banks", [(1, 1, 3), (1, 2, 2), (1, 4, 1)])
@pytest.mark.parametrize("case", ["bipolar_x_bipolar_thr", "int2_x_int3_acc"])
def test_weight_rom_in_logic_read_from_registered_banks_matches_reference(case, pe, simd, banks):
    # 96 words in three banks, 48 in a full bank and a half one, and 24 in one ROM, under stalls and back to back
    # (which checks the latency the first beat takes)
    dut = build(case, pe, simd, **BANKED)[0]
    # Binary lanes take the bank registers for their operand register; multiplying ones keep it as well.
    multiplies = case == "int2_x_int3_acc"
    assert dut.weight_rom_banks == banks and dut.operand_stage == (banks == 1 or multiplies)
    assert dut.latency == build(case, pe, simd)[0].latency + dut.operand_stage
    check_against_reference(case, pe, simd, frames=3, in_gap=0.3, out_stall=0.4, seed=17, **BANKED)
    test_frames_flow_back_to_back_without_bubbles(case, BANKED, pe, simd)


def test_weight_rom_is_banked_only_in_logic_behind_the_operand_register():
    assert build("int2_x_int3_acc", 1, 1, ram_style="distributed")[0].weight_rom_banks == 1
    assert build("int2_x_int3_acc", 1, 1, operand_register=True, ram_style="block")[0].weight_rom_banks == 1


def test_attributes_describe_the_streams():
    dut, *_ = build("int2_x_int3_thr", 2, 3)
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (3, 2, 2, 2)
    assert dut.i.payload.shape().width == 6 and dut.o.payload.shape().width == 4
    assert dut.cycles_per_frame == 16
    assert dut.latency == 5


def test_pipelining_adds_the_registers_it_says():
    # 12 products: 4 adder levels; 15 thresholds: 4 levels of their count.
    assert build("uint2_x_int2_int4_out", 2, 12)[0].latency == 5
    assert build("uint2_x_int2_int4_out", 2, 12, tree_every=1)[0].latency == 5 + 4 + 4
    assert build("uint2_x_int2_int4_out", 2, 12, tree_every=3, operand_register=True)[0].latency == 5 + 1 + 2 + 2
    assert build("int2_x_int3_acc", 2, 1, tree_every=1)[0].latency == 4
    # A multiply in LUTs split in two; none where Yosys maps it, or where an operand is BIPOLAR.
    assert build("uint2_x_int2_int4_out", 2, 12, res_type="lut", multiply_register=True)[0].latency == 5 + 1
    assert build("uint2_x_int2_int4_out", 2, 12, multiply_register=True)[0].latency == 5
    assert build("bipolar_x_bipolar_thr", 2, 12, res_type="lut", multiply_register=True)[0].latency == 5
    with pytest.raises(ValueError, match="tree_every must be 0"):
        build("int2_x_int3_acc", 2, 3, tree_every=-1)


@pytest.mark.parametrize("pe,simd", [(1, 1), (8, 1), (2, 3), (8, 12)])
def test_credits_lose_no_beat_when_the_output_stalls_for_long(pe, simd):
    # The consumer takes a beat in one cycle of seven: the queue fills, every beat on the way must still fit.
    check_against_reference("int2_x_int3_thr", pe, simd, frames=4, in_gap=0.1, out_stall=0.85, seed=3,
                            tree_every=1, operand_register=True, flow_control="credit")


@pytest.mark.parametrize("flow_control", ["skid", "credit"])
def test_the_flow_control_keeps_the_latency(flow_control):
    assert build("uint2_x_int2_int4_out", 2, 3, flow_control=flow_control)[0].latency == \
        build("uint2_x_int2_int4_out", 2, 3)[0].latency


def test_the_route_register_adds_two_stages_where_the_weights_may_be_a_block_ram_and_needs_the_operand_register():
    # The output stage's ROMs are read a stage earlier instead: only the weight ROM's address and word, registered
    # once more, are stages.
    for ram_style, stage in (("block", 2), ("auto", 2), ("distributed", 0)):
        registered = build("uint2_x_int2_int4_out", 2, 3, operand_register=True, ram_style=ram_style)[0]
        routed = build("uint2_x_int2_int4_out", 2, 3, operand_register=True, route_register=True,
                       ram_style=ram_style)[0]
        assert (routed.route_stage, routed.latency) == (bool(stage), registered.latency + stage)
    with pytest.raises(ValueError, match="route_register is a second register after a ROM's read and needs "
                                         "operand_register"):
        build("uint2_x_int2_int4_out", 2, 3, route_register=True)


def test_an_unknown_flow_control_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="flow_control must be one of stall, skid, credit, not 'fast'"):
        build("uint2_x_int2_int4_out", 2, 3, flow_control="fast")


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


# --- Requantization output stage -------------------------------------------------------

SHIFT = 6

# (in_dtype, weight_dtype, out_dtype, lo, hi)
REQUANT_CASES = {
    "int4_x_int3_to_int8": (INT(4), INT(3), INT(8), -128, 127),
    "uint4_x_int4_to_uint8": (UINT(4), INT(4), UINT(8), 0, 255),
    "bipolar_x_bipolar_to_int4": (BIPOLAR, BIPOLAR, INT(4), -8, 7),
    "int2_x_bipolar_to_int8_narrow_clamp": (INT(2), BIPOLAR, INT(8), -20, 100),
    "bipolar_x_int3_to_uint8": (BIPOLAR, INT(3), UINT(8), 0, 255),
}


def random_requant(rng, weights, in_dtype, rounding, lo, hi, *, ties) -> Requant:
    """Factors of both signs that spread typical sums a little past [lo, hi], so both clamp
    bounds are hit. With ``ties`` every factor and offset is a multiple of ``2**(SHIFT-1)``,
    so about half of all ``v / 2**SHIFT`` are exactly halfway between two integers."""
    samples = random_values(rng, in_dtype, (256, weights.shape[1])) @ weights.T
    spread = np.maximum(samples.std(axis=0), 1.0)
    factor = (hi - lo) / 2.5 / spread * 2 ** SHIFT
    sign = rng.choice([-1, 1], size=weights.shape[0])
    center = ((lo + hi) // 2) << SHIFT
    half = 1 << (SHIFT - 1)
    if ties:
        multiplier = sign * np.maximum(np.round(factor / half), 1).astype(np.int64) * half
        offset = center + rng.integers(-4, 5, size=weights.shape[0]) * half
    else:
        multiplier = sign * (np.round(factor).astype(np.int64) + rng.integers(0, 7, size=factor.shape))
        offset = center + rng.integers(-4 << SHIFT, 4 << SHIFT, size=weights.shape[0])
    return Requant(multiplier=multiplier, offset=offset, shift=SHIFT, rounding=rounding,
                   lo=lo, hi=hi)


def build_requant(case, pe, simd, rounding, *, ties, seed=0, **pipelining):
    in_dtype, weight_dtype, out_dtype, lo, hi = REQUANT_CASES[case]
    rng = np.random.default_rng(seed)
    weights = random_values(rng, weight_dtype, (MH, MW))
    requant = random_requant(rng, weights, in_dtype, rounding, lo, hi, ties=ties)
    dut = MatrixVectorUnit(weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                           pe=pe, simd=simd, thresholds=None, out_dtype=out_dtype,
                           requant=requant, name="fc", **pipelining)
    return dut, weights, requant, rng


def check_requant(case, pe, simd, rounding, *, ties, frames, in_gap, out_stall, seed=0, **pipelining):
    """Runs the unit and compares with :func:`requantize`; returns the accumulators it saw."""
    dut, weights, requant, rng = build_requant(case, pe, simd, rounding, ties=ties, seed=seed, **pipelining)
    in_dtype, _, out_dtype, _, _ = REQUANT_CASES[case]
    vectors = random_values(rng, in_dtype, (frames, MW))
    run = run_stream(dut, pack(vectors, in_dtype, simd), frames * MH // pe,
                     in_gap=in_gap, out_stall=out_stall, seed=seed)
    expected = requantize(vectors @ weights.T, requant)
    np.testing.assert_array_equal(unpack(run.beats, out_dtype, pe).reshape(frames, MH), expected)
    return vectors @ weights.T, requant, expected


def exact_ties(acc, requant) -> int:
    v = acc * requant.multiplier + requant.offset
    return int(np.count_nonzero(v % (1 << requant.shift) == 1 << (requant.shift - 1)))


@pytest.mark.parametrize("ties", [False, True], ids=["general", "ties"])
@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("case", sorted(REQUANT_CASES))
def test_requant_matches_requantize_under_stalls(case, rounding, ties):
    acc, requant, expected = check_requant(case, 2, 3, rounding, ties=ties, frames=8,
                                           in_gap=0.3, out_stall=0.4, seed=5)
    # The cases exercise what they are named for.
    lo, hi = REQUANT_CASES[case][3:]
    assert (expected == lo).any() and (expected == hi).any()
    assert (requant.multiplier < 0).any() and (requant.multiplier > 0).any()
    if ties:
        assert exact_ties(acc, requant) >= acc.size // 4


@pytest.mark.parametrize("pe,simd", ALL_FOLDINGS)
def test_requant_every_folding_matches_requantize(pe, simd):
    check_requant("int4_x_int3_to_int8", pe, simd, "HALF_EVEN", ties=True, frames=3,
                  in_gap=0.3, out_stall=0.4, seed=pe * 100 + simd)


@pytest.mark.parametrize("pipelining", PIPELININGS, ids=str)
def test_pipelined_requant_matches_requantize_under_stalls(pipelining):
    for pe, simd in ((2, 3), (4, 12)):
        check_requant("int4_x_int3_to_int8", pe, simd, "HALF_EVEN", ties=True, frames=3, in_gap=0.3,
                      out_stall=0.4, seed=pe + simd, **pipelining)


@pytest.mark.parametrize("pe,simd", [(1, 1), (2, 3), (8, 12), (8, 1)])
def test_requant_frames_flow_back_to_back_without_bubbles(pe, simd):
    frames = 4
    dut, weights, requant, rng = build_requant("uint4_x_int4_to_uint8", pe, simd, "HALF_UP",
                                               ties=False)
    vectors = random_values(rng, UINT(4), (frames, MW))
    run = run_stream(dut, pack(vectors, UINT(4), simd), frames * MH // pe)
    got = unpack(run.beats, UINT(8), pe).reshape(frames, MH)
    np.testing.assert_array_equal(got, requantize(vectors @ weights.T, requant))
    last_beat_of_frame = run.cycles[MH // pe - 1::MH // pe]
    assert np.diff(last_beat_of_frame).tolist() == [dut.cycles_per_frame] * (frames - 1)
    assert dut.cycles_per_frame == (MH // pe) * (MW // simd)
    assert run.cycles[0] == (MW // simd - 1) + dut.latency
    assert dut.latency == 6


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
def test_requant_every_input_of_a_small_layer(rounding):
    """All 4**3 input vectors of a 2x3 layer: every reachable accumulator, the extremes too,
    through constants at the edge of their widths (no overflow anywhere)."""
    weights = np.array([[3, 3, 3], [-4, 3, -4]])
    requant = Requant(multiplier=np.array([-1000, 977]), offset=np.array([-2 ** 13, 5000]),
                      shift=7, rounding=rounding, lo=-50, hi=60)
    dut = MatrixVectorUnit(weights=weights, in_dtype=INT(2), weight_dtype=INT(3), pe=2, simd=1,
                           thresholds=None, out_dtype=INT(7), requant=requant)
    vectors = np.array(np.meshgrid(*[np.arange(-2, 2)] * 3)).reshape(3, -1).T
    run = run_stream(dut, pack(vectors, INT(2), 1), len(vectors), out_stall=0.2)
    expected = requantize(vectors @ weights.T, requant)
    np.testing.assert_array_equal(unpack(run.beats, INT(7), 2).reshape(-1, 2), expected)
    assert (expected == -50).any() and (expected == 60).any()


def test_requant_shapes_are_the_narrowest_exact_ones():
    # Sums: channel 0 in [0, 6], channel 1 in [0, 6]; factors 5 and -3.
    requant = Requant(multiplier=np.array([5, -3]), offset=np.array([2, -1]), shift=1,
                      rounding="FLOOR", lo=-10, hi=15)
    dut = MatrixVectorUnit(weights=np.ones((2, 2), dtype=np.int64), in_dtype=UINT(2),
                           weight_dtype=INT(2), pe=1, simd=1, thresholds=None,
                           out_dtype=INT(5), requant=requant)
    assert dut.multiplier_shape == signed(4)  # [-3, 5]
    assert dut.product_shape == signed(6)  # [0, 30] and [-18, 0]
    assert dut.sum_shape == signed(7)  # [2, 32] and [-19, -1]
    assert dut.acc_shape == unsigned(3)


def test_requant_of_xnor_popcount_is_sized_in_the_popcount_domain():
    # acc = 2 pc - 4 with pc in [0, 4]: factor 2m = 6, offset o - 4m + rounding constant.
    requant = Requant(multiplier=np.array([3]), offset=np.array([0]), shift=2,
                      rounding="HALF_UP", lo=-3, hi=3)
    dut = MatrixVectorUnit(weights=np.ones((1, 4), dtype=np.int64), in_dtype=BIPOLAR,
                           weight_dtype=BIPOLAR, pe=1, simd=4, thresholds=None,
                           out_dtype=INT(3), requant=requant)
    assert dut.multiplier_shape == unsigned(3)  # 6
    assert dut.product_shape == unsigned(5)  # [0, 24]
    assert dut.sum_shape == signed(5)  # [-10, 14]


def small_requant(**changes) -> Requant:
    fields = dict(multiplier=np.array([1, -1]), offset=np.array([0, 0]), shift=1,
                  rounding="FLOOR", lo=-8, hi=7)
    return Requant(**{**fields, **changes})


def small_unit(**changes):
    args = dict(weights=np.ones((2, 2), dtype=np.int64), in_dtype=INT(2), weight_dtype=INT(2),
                pe=1, simd=1, thresholds=None, out_dtype=INT(4), requant=small_requant())
    return MatrixVectorUnit(**{**args, **changes})


def test_requant_and_thresholds_exclude_each_other():
    with pytest.raises(ValueError, match=r"^node 'mvau': thresholds and requant are alternative "
                                         r"output stages; give one of them, not both$"):
        small_unit(thresholds=np.zeros((2, 1), dtype=np.int64))


def test_requant_needs_one_factor_per_channel():
    with pytest.raises(ValueError, match=r"^node 'mvau': requant must have one multiplier and "
                                         r"offset per output channel \(2\), not 3$"):
        small_unit(requant=small_requant(multiplier=np.array([1, 2, 3]),
                                         offset=np.array([0, 0, 0])))


def test_requant_bounds_must_fit_out_dtype():
    with pytest.raises(ValueError, match=r"^node 'mvau': out_dtype UINT8 cannot hold the "
                                         r"requantized outputs \[lo, hi\] = \[-8, 7\]$"):
        small_unit(out_dtype=UINT(8))
    with pytest.raises(ValueError, match=r"^node 'mvau': out_dtype INT4 cannot hold the "
                                         r"requantized outputs \[lo, hi\] = \[0, 8\]$"):
        small_unit(requant=small_requant(lo=0, hi=8))


def test_requant_output_cannot_be_bipolar():
    with pytest.raises(ValueError, match=r"^node 'mvau': a requantized output cannot be BIPOLAR; "
                                         r"use one threshold per channel instead$"):
        small_unit(out_dtype=BIPOLAR, requant=small_requant(lo=-1, hi=1))


def test_requant_refuses_an_out_bias():
    with pytest.raises(ValueError, match=r"^node 'mvau': out_bias applies to thresholds only; "
                                         r"with requant it must be 0, not 3$"):
        small_unit(out_bias=3)


@pytest.mark.parametrize("changes,message", [
    (dict(shift=-1), r"requant shift must be an integer >= 0, not -1"),
    (dict(rounding="NEAREST"), r"requant rounding must be one of FLOOR, HALF_UP, HALF_EVEN, "
                               r"HALF_ODD, not 'NEAREST'"),
    (dict(lo=3, hi=2), r"requant clamp bounds must be integers with lo <= hi, not lo=3, hi=2"),
    (dict(offset=np.array([0])), r"requant multiplier and offset must have the same shape, "
                                 r"not \(2,\) and \(1,\)"),
    (dict(multiplier=np.array([0.5, 1.0])), r"requant multiplier must be a 1-D integer array, "
                                            r"not float64 of shape \(2,\)"),
])
def test_requant_parameters_are_checked(changes, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        small_requant(**changes)


def fraction_reference(acc: int, m: int, o: int, shift: int, rounding: str, lo: int, hi: int) -> int:
    x = Fraction(acc * m + o, 2 ** shift)
    if rounding == "FLOOR":
        q = math.floor(x)
    elif rounding == "HALF_UP":
        q = math.floor(x + Fraction(1, 2))
    elif rounding == "HALF_EVEN":
        q = round(x)  # Fraction rounds halves to even
    else:
        q = round(x) if x - math.floor(x) != Fraction(1, 2) else math.floor(x) | 1
    return min(max(q, lo), hi)


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("shift", [0, 1, 2, 3, 5])
def test_requantize_equals_exact_rational_rounding_exhaustively(rounding, shift):
    acc = np.arange(-24, 25)
    multipliers = np.arange(-6, 7)
    offsets = np.arange(-9, 10)
    lo, hi = -30, 25
    for o in offsets:
        requant = Requant(multiplier=multipliers, offset=np.full_like(multipliers, o),
                          shift=shift, rounding=rounding, lo=lo, hi=hi)
        got = requantize(np.repeat(acc[:, None], len(multipliers), axis=1), requant)
        expected = [[fraction_reference(int(a), int(m), int(o), shift, rounding, lo, hi)
                     for m in multipliers] for a in acc]
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
def test_requantize_is_exact_beyond_int64_products(rounding):
    acc = np.array([[2 ** 40 + 3, -(2 ** 40) - 1], [-5, 7]])
    requant = Requant(multiplier=np.array([2 ** 30 + 1, -(2 ** 30) + 3]),
                      offset=np.array([2 ** 45, -(2 ** 44)]), shift=50, rounding=rounding,
                      lo=-(2 ** 40), hi=2 ** 40)
    expected = [[fraction_reference(int(acc[r, c]), int(requant.multiplier[c]),
                                    int(requant.offset[c]), 50, rounding, requant.lo, requant.hi)
                 for c in range(2)] for r in range(2)]
    np.testing.assert_array_equal(requantize(acc, requant), expected)


@pytest.mark.parametrize("pe", [2, MH])
def test_requant_verilog_passes_verilator_lint(tmp_path, pe):
    # pe = MH: one neuron fold, so the constant ROMs have one row and zero-width addresses.
    dut, *_ = build_requant("int4_x_int3_to_int8", pe, 3, "HALF_EVEN", ties=False)
    (tmp_path / "streamc_top.v").write_text(to_verilog(StreamAccelerator(stages=[dut])))
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")
