# amaranth: UnusedElaboratable=no
"""Placement: a ROM's ``ram_style`` and a multiply's ``res_type`` reach Yosys, the estimate follows them, the
planner chooses them."""

from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from streamc.datatypes import INT, UINT
from streamc.devices import get_device
from streamc.frontend.load import load_onnx
from streamc.hw import to_hw
from streamc.planner import device_limits, exhaustive_for_cycles, plan_for_cycles
from streamc.planner.cost import logic_cells
from streamc.resources import estimate_kernel, memory_mapping, spec_of_unit
from streamc.rtl.lut import LookupTable
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.placement import multiply
from streamc.rtl.top import to_verilog
from streamc.rtl.vvau import VectorVectorUnit
from streamc.stages import MVAULayer
from streamc.synth import synthesize
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).parent.parent
UP5K, ECP5 = get_device("ice40-up5k"), get_device("ecp5-85f")


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_a_style_overrides_yosys_cost_model(family):
    small = dict(width=16, depth=64, rom=True, family=family)
    large = dict(width=16, depth=1024, rom=True, family=family)
    assert memory_mapping(**small).kind == "logic" and memory_mapping(**large).kind == "bram"
    assert memory_mapping(**small, style="block").kind == "bram"
    assert memory_mapping(**large, style="distributed").kind == "logic"
    # A one-word ROM is a constant: Yosys keeps no memory whatever the attribute says.
    assert memory_mapping(width=16, depth=1, rom=True, family=family, style="block").kind == "logic"


def test_an_unknown_style_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^node 'fc': ram_style='bram' is not a memory placement; "
                                         r"valid: auto, distributed, block$"):
        MatrixVectorUnit(weights=np.ones((4, 4), np.int64), in_dtype=UINT(2), weight_dtype=INT(2), pe=1, simd=1,
                         thresholds=None, out_dtype=INT(8), ram_style="bram", name="fc")
    with pytest.raises(ValueError, match=r"^node 'dw': ram_style='lut' is not a memory placement"):
        VectorVectorUnit(weights=np.ones((4, 9), np.int64), in_dtype=UINT(2), weight_dtype=INT(2), simd=1,
                         ram_style="lut", name="dw")


@pytest.fixture(scope="module")
def tfc():
    return to_hw(streamline(tidy(load_onnx(ROOT / "tests" / "models" / "tfc_w1a1.onnx"))))


@pytest.mark.parametrize("device", ["ice40-up5k", "ecp5-85f"])
def test_yosys_places_the_roms_as_asked_and_the_estimate_counts_them(tfc, device, tmp_path):
    layer = next(stage for stage in tfc.stages if isinstance(stage, MVAULayer) and stage.mh == stage.mw == 64)
    layer.pe, layer.simd = 4, 8
    luts = {}
    for weights, thresholds in (("distributed", "distributed"), ("block", "block")):
        layer.ram_style, layer.ram_style_thresholds = weights, thresholds
        unit = layer.components()[0]
        estimate = estimate_kernel(spec_of_unit(unit), device.split("-")[0])
        work = tmp_path / weights
        work.mkdir()
        (work / "top.v").write_text(to_verilog(unit, name="top"))
        result = synthesize(verilog=work / "top.v", top="top", device=device, workdir=work)
        assert result.bram == estimate.bram
        luts[weights] = result.lut
    # 64 x 64 one-bit weights at 32 per word: 128 words in LUTs, or one or two block RAMs.
    assert luts["distributed"] > 2 * luts["block"]


@pytest.mark.parametrize("device", ["ice40-up5k", "ecp5-85f"])
def test_a_lookup_table_goes_where_its_ram_style_says(device, tmp_path):
    # An int8 tanh, two lanes: each lane's 256 x 8 ROM in logic, or in a block RAM of its own.
    table = np.round(127 * np.tanh(np.arange(-128, 128) / 40)).astype(np.int64)
    luts = {}
    for style in ("distributed", "block"):
        unit = LookupTable(table=table, in_dtype=INT(8), out_dtype=INT(8), elems=2, frame_elems=8, ram_style=style)
        estimate = estimate_kernel(spec_of_unit(unit), device.split("-")[0])
        work = tmp_path / style
        work.mkdir()
        (work / "top.v").write_text(to_verilog(unit, name="top"))
        result = synthesize(verilog=work / "top.v", top="top", device=device, workdir=work)
        assert result.bram == estimate.bram == (2 if style == "block" else 0)
        luts[style] = result.lut
    assert luts["block"] <= 2 < 20 < luts["distributed"]


def test_spare_block_ram_saves_luts_and_none_is_needed_where_there_is_none(tfc):
    auto = plan_for_cycles(tfc, cycles=1024, device=UP5K, limits=device_limits(UP5K), placement=False)
    placed = plan_for_cycles(tfc, cycles=1024, device=UP5K, limits=device_limits(UP5K))
    assert placed.fits and placed.cycles <= 1024
    assert placed.resources.lut < auto.resources.lut and placed.resources.bram > auto.resources.bram
    # Without block RAM, Yosys' own choice puts the large weight ROMs there anyway; the planner keeps them in LUTs.
    none = dict(device_limits(ECP5), bram=0)
    auto_none = plan_for_cycles(tfc, cycles=1024, device=ECP5, placement=False)
    assert auto_none.resources.bram > 0
    in_luts = plan_for_cycles(tfc, cycles=1024, device=ECP5, limits=none)
    assert in_luts.fits and in_luts.resources.bram == 0
    assert {entry["ram_style"] for entry in in_luts.folding.values()} == {"distributed"}


def test_placement_as_good_as_trying_every_one():
    flow = to_hw(streamline(tidy(load_onnx(ROOT / "build_configs" / "models" / "digits_mlp.onnx"))))
    for limits in (device_limits(UP5K), dict(device_limits(UP5K), bram=4)):
        best = exhaustive_for_cycles(flow, cycles=512, device=UP5K, limits=limits)
        plan = plan_for_cycles(flow, cycles=512, device=UP5K, limits=limits)
        # what both minimize on an iCE40: its logic cells
        least, used = (logic_cells(p.resources, UP5K.family) for p in (best, plan))
        assert plan.fits and least <= used <= 1.05 * least


def _values(shape) -> range:
    return range(-(1 << shape.width - 1), 1 << shape.width - 1) if shape.signed else range(1 << shape.width)


@pytest.mark.parametrize(("a_shape", "b_shape"), [(unsigned(3), unsigned(2)), (signed(3), unsigned(4)),
                                                  (unsigned(4), signed(3)), (signed(4), signed(4)),
                                                  (signed(1), signed(2)), (unsigned(1), signed(5))])
def test_a_multiply_in_luts_is_the_product(a_shape, b_shape):
    a, b, product = Signal(a_shape), Signal(b_shape), Signal(signed(12))
    m = Module()
    m.d.comb += product.eq(multiply(a, b, "lut"))
    pairs = [(x, y) for x in _values(a_shape) for y in _values(b_shape)]
    wrong = []

    async def bench(ctx):
        for x, y in pairs:
            ctx.set(a, x)
            ctx.set(b, y)
            if ctx.get(product) != x * y:
                wrong.append((x, y, ctx.get(product)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not wrong


def test_an_unknown_res_type_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^node 'fc': res_type='dsp48' is not a multiplier placement; "
                                         r"valid: auto, lut$"):
        MatrixVectorUnit(weights=np.ones((4, 4), np.int64), in_dtype=UINT(2), weight_dtype=INT(2), pe=1, simd=1,
                         thresholds=None, out_dtype=INT(8), res_type="dsp48", name="fc")


def test_multiplies_in_luts_take_no_dsp_on_the_ecp5(tmp_path):
    flow = to_hw(streamline(tidy(load_onnx(ROOT / "build_configs" / "models" / "digits_mlp.onnx"))))
    layer = flow.stages[0]      # UINT4 inputs times INT4 weights: a MULT18X18D per lane where Yosys maps them
    layer.pe, layer.simd = 2, 2
    found = {}
    for res_type in ("auto", "lut"):
        layer.res_type = res_type
        unit = layer.components()[0]
        estimate = estimate_kernel(spec_of_unit(unit), "ecp5")
        work = tmp_path / res_type
        work.mkdir()
        (work / "top.v").write_text(to_verilog(unit, name="top"))
        result = synthesize(verilog=work / "top.v", top="top", device="ecp5-85f", workdir=work)
        assert (result.dsp, result.bram) == (estimate.dsp, estimate.bram)
        found[res_type] = result
    assert found["auto"].dsp == 4 and found["lut"].dsp == 0 and found["lut"].lut > found["auto"].lut
