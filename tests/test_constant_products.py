"""Fully unrolled MVAUs: their lanes' constant products as da4ml's shift-and-add graph, bit-exact, no DSPs."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from amaranth.back import verilog
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from rtl_helpers import pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT
from streamc.pipeline.runner import run_build
from streamc.rtl.constant_products import (KEPT_ADDERS, AdderGraph, AdderNode, adder_graph, constant_products,
                                           graph_levels, keeps_adders)
from streamc.resources import estimate_kernel, spec_of_unit
from streamc.resources.constant_products import ONE_MAGNITUDE_ADDERS, one_magnitude_adders
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.synth import synthesize

DIGITS = Path(__file__).parent.parent / "build_configs" / "models"


@pytest.mark.parametrize("w_lo,w_hi,x_shape", [(-8, 7, unsigned(4)), (-3, 3, signed(3)), (-1, 1, unsigned(1)),
                                                (0, 15, signed(2))])
@pytest.mark.parametrize("keep", [False, True])
def test_adder_graph_equals_the_matrix_product_on_random_inputs(w_lo, w_hi, x_shape, keep):
    rng = np.random.default_rng(w_hi)
    weights = rng.integers(w_lo, w_hi + 1, size=(7, 11))
    weights[3] = 0  # a row of zeros is the constant 0
    x_lo, x_hi = (-(1 << x_shape.width - 1), (1 << x_shape.width - 1) - 1) if x_shape.signed else (0, (1 << x_shape.width) - 1)
    m = Module()
    inputs = [Signal(x_shape, name=f"x_{k}") for k in range(11)]
    outputs = [Signal(signed(16), name=f"y_{j}") for j in range(7)]
    graph = adder_graph(weights, x_lo, x_hi, keep=keep)
    m.d.comb += [out.eq(total) for out, total in zip(outputs, constant_products(m, inputs, graph, keep=keep))]
    vectors = rng.integers(x_lo, x_hi + 1, size=(40, 11))
    vectors[0], vectors[1] = x_lo, x_hi
    got = []

    async def bench(ctx):
        for vector in vectors:
            for signal, value in zip(inputs, vector):
                ctx.set(signal, int(value))
            await ctx.delay(1e-9)
            got.append([ctx.get(out) for out in outputs])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(np.array(got), vectors @ weights.T)


# (in_dtype, weight_dtype, thresholds per channel or None, out_dtype, out_bias)
UNITS = {
    "uint4_x_int4_acc": (UINT(4), INT(4), None, INT(12), 0),
    "int3_x_int2_thr": (INT(3), INT(2), 3, INT(2), -2),
    "bipolar_x_bipolar_thr": (BIPOLAR, BIPOLAR, 1, BIPOLAR, 0),
    "bipolar_x_bipolar_acc": (BIPOLAR, BIPOLAR, None, INT(6), 0),
    "int3_x_bipolar_acc": (INT(3), BIPOLAR, None, INT(8), 0),
    "bipolar_x_int3_thr": (BIPOLAR, INT(3), 3, UINT(2), 0),
}


def random_values(rng, dtype, shape):
    return rng.choice([-1, 1], size=shape) if dtype.bipolar else rng.integers(dtype.min, dtype.max + 1, size=shape)


def unrolled_unit(case: str, rng, **kwargs) -> tuple[MatrixVectorUnit, np.ndarray | None]:
    """A 6 x 16 unit of ``case`` (:data:`UNITS`) folded PE = outputs, SIMD = inputs, its weights and thresholds drawn
    from ``rng``, and those thresholds; ``kwargs`` add to its parameters."""
    in_dt, w_dt, n_thr, out_dt, out_bias = UNITS[case]
    weights = random_values(rng, w_dt, (6, 16))
    thresholds = None
    if n_thr:
        reach = int(np.abs(weights).sum(axis=1).max()) * max(abs(in_dt.min), abs(in_dt.max))
        thresholds = np.sort(rng.integers(-reach, reach + 1, size=(6, n_thr)), axis=1)
    unit = MatrixVectorUnit(weights=weights, in_dtype=in_dt, weight_dtype=w_dt, pe=6, simd=16,
                            thresholds=thresholds, out_dtype=out_dt, out_bias=out_bias, name="fc", **kwargs)
    assert unit.constant_weights and unit.adder_graph is not None
    return unit, thresholds


def check_unrolled(unit: MatrixVectorUnit, thresholds, case: str, rng, in_gap: float, out_stall: float):
    """Twelve random vectors through ``unit`` (of ``thresholds``) against numpy; the run."""
    in_dt, _, _, out_dt, out_bias = UNITS[case]
    vectors = random_values(rng, in_dt, (12, 16))
    run = run_stream(unit, pack(vectors, in_dt, 16), 12, in_gap=in_gap, out_stall=out_stall, seed=3)
    expected = acc = vectors @ unit.weights.T
    if thresholds is not None:
        count = (acc[:, :, None] >= thresholds[None]).sum(axis=2)
        expected = np.where(count == 1, 1, -1) if out_dt.bipolar else out_bias + count
    np.testing.assert_array_equal(unpack(run.beats, out_dt, 6).reshape(12, 6), expected)
    return run


@pytest.mark.parametrize("family", sorted(KEPT_ADDERS))
@pytest.mark.parametrize("case", sorted(UNITS))
def test_fully_unrolled_unit_matches_numpy_under_stalls(case, family):
    """With the adders kept or merged as the unit is built for each family."""
    rng = np.random.default_rng(len(case))
    check_unrolled(*unrolled_unit(case, rng, keep_adders=keeps_adders(family)), case, rng, 0.3, 0.4)


@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("case", ["uint4_x_int4_acc", "int3_x_int2_thr", "bipolar_x_bipolar_thr"])
def test_a_pipelined_graph_matches_numpy_under_stalls_and_flows_at_full_rate(case, every):
    """Its levels registered after every ``every``: the same sums, one frame a cycle, the latency the unit gives and
    no more than its spec prices from the depth bound, before solving."""
    rng = np.random.default_rng(every)
    unit, thresholds = unrolled_unit(case, rng, tree_every=every, operand_register=True, flow_control="credit")
    graph = unit.adder_graph
    depth = max(graph.levels[index] for index, _, _ in graph.outputs if index >= 0)
    assert depth <= graph_levels(unit.weights)
    assert unit.graph_stages == -(-depth // every) - 1 > 0
    assert unit.latency <= spec_of_unit(unit).latency
    check_unrolled(unit, thresholds, case, rng, 0.3, 0.4)
    run = check_unrolled(unit, thresholds, case, rng, 0.0, 0.0)
    # At full rate: a frame a cycle, the first after the unit's latency.
    assert np.diff(run.cycles).tolist() == [1] * 11
    assert run.cycles[0] == unit.latency


def test_merged_bits_count_the_sums_yosys_keeps():
    # d = x0 - x1 is read twice, so it stays a sum; s = d + 16 x2 and t = d + x2 are outputs; d enters each
    # sign-extended to its width.
    x = AdderNode(0, -1, False, 0, 0, 15, 0)
    graph = AdderGraph((x, AdderNode(1, -1, False, 0, 0, 15, 0), AdderNode(2, -1, False, 0, 0, 15, 0),
                        AdderNode(0, 1, True, 0, -15, 15, 0), AdderNode(3, 2, False, 4, -15, 255, 0),
                        AdderNode(3, 2, False, 0, -15, 30, 0)), ((4, 0, False), (5, 0, False)))
    assert graph.adder_bits == 5 + 9 + 6
    assert graph.merged_bits == (4 + 4 - 5) + (9 + 4 - 9) + (6 + 4 - 6)


def test_the_graph_solved_for_pipelining_keeps_within_its_levels():
    rng = np.random.default_rng(5)
    for weights, x_hi in ((rng.choice([-1, 1], size=(32, 64)), 1), (rng.integers(-8, 8, size=(16, 32)), 15),
                          (rng.integers(-1, 2, size=(24, 48)), 3)):
        graph = adder_graph(weights, 0, x_hi, pipelined=True)
        assert max(graph.levels[index] for index, _, _ in graph.outputs if index >= 0) <= graph_levels(weights)


@pytest.mark.parametrize("device, family", [("ice40-up5k", "ice40"), ("ecp5-85f", "ecp5")])
def test_the_flip_flops_a_pipelined_graph_adds_are_those_yosys_keeps(tmp_path, device, family):
    rng = np.random.default_rng(8)
    weights = rng.integers(-8, 8, size=(12, 32))
    counted, synthesized = [], []
    for every in (0, 2):
        unit = MatrixVectorUnit(weights=weights, in_dtype=UINT(4), weight_dtype=INT(4), pe=12, simd=32,
                                thresholds=None, out_dtype=INT(16), tree_every=every,
                                keep_adders=keeps_adders(family), name="fc")
        counted.append(estimate_kernel(spec_of_unit(unit), family).ff)
        folder = tmp_path / str(every)
        folder.mkdir()
        (folder / "streamc_top.v").write_text(verilog.convert(unit, name="fc", emit_src=False))
        synthesized.append(synthesize(verilog=folder / "streamc_top.v", top="fc", device=device, workdir=folder).ff)
    # The graph's solved levels are not known to the estimate (GRAPH_REGISTER_SHARE: 0.43 to 0.66 a bit a level).
    added, kept = counted[1] - counted[0], synthesized[1] - synthesized[0]
    assert kept > 0 and abs(added - kept) <= 0.25 * kept, (counted, synthesized)


def test_kept_adders_are_marked_for_yosys():
    m = Module()
    inputs = [Signal(unsigned(4), name=f"x_{k}") for k in range(3)]
    output = Signal(signed(8))
    m.d.comb += output.eq(constant_products(m, inputs, adder_graph(np.array([[3, -5, 7]]), 0, 15), keep=True)[0])
    assert kept_marks(verilog.convert(m, ports=[*inputs, output], emit_src=False)) == {True}


def kept_marks(text: str) -> set[bool]:
    """Whether each adder of a graph in Verilog ``text`` is marked kept (Amaranth writes a wire's attributes on the
    line before it)."""
    lines = text.splitlines()
    return {"keep" in lines[n - 1] for n, line in enumerate(lines) if line.strip().startswith("wire") and "cmvm_" in line}


def test_folded_units_keep_their_rom_fed_lanes():
    unit = MatrixVectorUnit(weights=np.ones((4, 4), np.int64), in_dtype=UINT(4), weight_dtype=INT(4), pe=4, simd=2,
                            thresholds=None, out_dtype=INT(8))
    assert not unit.constant_weights and unit.adder_graph is None


def test_ecp5_maps_no_constant_product_to_a_hard_multiplier(tmp_path):
    """4-bit x 4-bit products, which Yosys put in MULT18X18Ds when they were multiplies."""
    weights = np.random.default_rng(5).integers(-8, 8, size=(8, 12))
    unit = MatrixVectorUnit(weights=weights, in_dtype=UINT(4), weight_dtype=INT(4), pe=8, simd=12,
                            thresholds=None, out_dtype=INT(12))
    (tmp_path / "unit.v").write_text(verilog.convert(unit, name="unit", emit_src=False))
    result = synthesize(verilog=tmp_path / "unit.v", top="unit", device="ecp5-85f", workdir=tmp_path)
    assert result.dsp == 0 and result.lut > 0


@pytest.mark.parametrize("devices, clock_mhz", [([], 30), (["ecp5-85f"], 150)])
def test_fully_unrolled_digits_mlp_is_bit_exact_in_verilator(tmp_path, devices, clock_mhz):
    """Every layer folded PE = outputs, SIMD = inputs: the digits MLP's 3 layers are adder graphs, merged (no device:
    the UP5K's family) or kept and pipelined for 150 MHz (the ECP5's)."""
    verify = {"inputs": str(DIGITS / "digits_frames.npy"), "labels": str(DIGITS / "digits_labels.npy"), "frames": 40}
    folding = {"node_linear": {"pe": 64, "simd": 64}, "node_linear_1": {"pe": 32, "simd": 64},
               "node_linear_2": {"pe": 10, "simd": 32}}
    config = {"model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "out"), "folding": folding,
              "devices": devices, "clock_mhz": clock_mhz, "verify": verify,
              "steps": ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"]}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    state = run_build(tmp_path / "build.yaml")
    report = state.rtlsim
    assert report["frames"] == 40 and report["mismatches"] == 0
    assert kept_marks((tmp_path / "out" / "verilog" / "streamc_top.v").read_text()) == {bool(devices)}
    written = json.loads((tmp_path / "out" / "reports" / "folding.json").read_text())
    # Both pipelined as their clocks ask: the graphs' levels do not fit 33 ns of the UP5K's or 6.7 of the ECP5's.
    assert all(entry["tree_every"] > 0 for entry in written.values())
    assert report["latency_cycles"] == report["predicted_latency_cycles"]


def unrolled_digits_mlp(tmp_path, device: str, steps: list[str], **last_layer) -> None:
    """Writes the config of the digits MLP with its last layer folded PE = outputs, SIMD = inputs (the others folded
    to fit the UP5K), for ``device`` without pipeline registers; ``last_layer`` adds fields to its folding."""
    folding = {"node_linear": {"pe": 1, "simd": 4}, "node_linear_1": {"pe": 1, "simd": 4},
               "node_linear_2": {"pe": 10, "simd": 32, **last_layer}}
    config = {"model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(tmp_path / "out"), "folding": folding,
              "devices": [device], "clock_mhz": 30, "pipelining": "none",
              "steps": ["load", "tidy", "streamline", "to_hw", *steps]}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))


def folding_report(tmp_path) -> dict:
    return json.loads((tmp_path / "out" / "reports" / "folding.json").read_text())


@pytest.mark.parametrize("device,kept", [("ice40-up5k", False), ("ecp5-85f", True)])
def test_the_device_family_picks_the_adder_style(tmp_path, device, kept):
    """Without a clock to pipeline for, too: the family comes from the devices. The folding report gives the style
    of the unrolled layer (only), and its adders in the Verilog are marked kept, or not."""
    unrolled_digits_mlp(tmp_path, device, ["fold", "rtl"])
    run_build(tmp_path / "build.yaml")
    assert {name: entry.get("keep_adders") for name, entry in folding_report(tmp_path).items()} == {
        "node_linear": None, "node_linear_1": None, "node_linear_2": kept}
    assert kept_marks((tmp_path / "out" / "verilog" / "streamc_top.v").read_text()) == {kept}


def test_an_explicit_folding_sets_the_adder_style(tmp_path):
    unrolled_digits_mlp(tmp_path, "ecp5-85f", ["fold"], keep_adders=False)
    run_build(tmp_path / "build.yaml")
    assert folding_report(tmp_path)["node_linear_2"]["keep_adders"] is False


def test_the_estimate_follows_the_adder_style():
    """On the ECP5 a kept graph is carry cells alone, a merged one full adders in LUT4s beside them (issue 24's case c:
    4 LUT4 + 2,021 CCU2C kept, 3,248 + 1,207 merged, 4,046 against 5,662 LUTs as streamc.synth counts them)."""
    weights = np.random.default_rng(12345).integers(-8, 8, size=(10, 64))
    luts = [estimate_kernel(spec_of_unit(MatrixVectorUnit(
        weights=weights, in_dtype=UINT(4), weight_dtype=INT(4), pe=10, simd=64, thresholds=None, out_dtype=INT(14),
        keep_adders=keep)), "ecp5").lut for keep in (False, True)]
    assert luts[1] < 0.8 * luts[0]


def test_the_estimated_adders_of_one_magnitude_share_equal_rows_and_columns():
    """Rows of +-1 that repeat up to sign are one row's graph, each copy a negation at most; a column equal to another
    up to sign is summed into it by one adder first. So 64 copies of one row cost less than half of 64 rows drawn at
    random, and 64 rows drawn at random less than a quarter of their 63 adds each (da4ml: 831 to 852); a lone row's
    columns are all one column (an adder each)."""
    rng = np.random.default_rng(1)
    row = rng.choice([-1, 1], size=(1, 64))
    repeated = one_magnitude_adders(np.repeat(row, 64, axis=0) * rng.choice([-1, 1], size=(64, 1)))
    drawn = one_magnitude_adders(rng.choice([-1, 1], size=(64, 64)))
    assert repeated < drawn / 2 and drawn < 64 * 63 / 4
    assert one_magnitude_adders(row) == pytest.approx(ONE_MAGNITUDE_ADDERS[0] + 63)
    assert one_magnitude_adders(np.zeros((4, 8), np.int64)) == 0
