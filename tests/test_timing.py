# amaranth: UnusedElaboratable=no
# (tests build units only to price them)
"""Pipelining for the clock: the delay model's choices, the planner's prices of them, their flip-flops in Yosys."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from streamc.datatypes import BIPOLAR, INT, UINT
from streamc.kernels import stage_specs
from streamc.resources import estimate_kernel, spec_of_unit
from streamc.rtl.arithmetic import tree_stages
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.stages import MVAULayer
from streamc.stages.window import sliding_window
from streamc.synth import synthesize
from streamc.timing import DELAYS, Clock, delay_model


def layer(mh=16, mw=64, in_dtype=UINT(4), weight_dtype=INT(4), thresholds=15) -> MVAULayer:
    rng = np.random.default_rng(3)
    weights = rng.integers(weight_dtype.min, weight_dtype.max + 1, size=(mh, mw))
    reach = int(np.abs(weights).sum(axis=1).max()) * in_dtype.max
    return MVAULayer(name="fc", source="fc", weights=weights, in_dtype=in_dtype, weight_dtype=weight_dtype,
                     thresholds=np.sort(rng.integers(-reach, reach, size=(mh, thresholds)), axis=1),
                     out_dtype=UINT(4), out_bias=0, acc_lo=np.full(mh, -reach), acc_hi=np.full(mh, reach))


@pytest.mark.parametrize("family", sorted(DELAYS))
def test_a_faster_clock_asks_for_more_registers(family):
    delays = delay_model(family)
    # Six adder levels of 16-bit sums.
    everies = [delays.tree_every(1000 / mhz, 6, 16) for mhz in (10, 40, 80, 150, 300)]
    assert everies[0] == 0 and everies[-1] >= 1
    # Once pipelined, fewer levels fit between registers as the period shrinks.
    pipelined = [every for every in everies if every]
    assert pipelined == sorted(pipelined, reverse=True)
    assert not delays.operand_register(1000 / 10, multiplies=True)
    assert delays.operand_register(1000 / 300, multiplies=True)
    with pytest.raises(ValueError, match="no delay model for device family 'xilinx'"):
        delay_model("xilinx")


@pytest.mark.parametrize("family", sorted(DELAYS))
def test_the_tree_is_registered_in_even_stages(family):
    # Levels of equal delay here (the growth of later levels: the next test).
    delays = dataclasses.replace(delay_model(family), adder_growth_ns=0.0)
    # A period in which four adder levels of 8-bit sums fit between registers, and not the accumulator after them.
    period = delays.register_ns + 4 * delays.adder_ns + 8 * delays.carry_ns + 0.01
    # Five levels take two stages either way: three and two, not four and one.
    assert delays.tree_every(period, 5, 8) == 3 and tree_stages(32, 3) == tree_stages(32, 4) == 2
    assert delays.tree_every(period, 4, 8) == 4
    assert delays.tree_every(period, 8, 8) == 4
    assert delays.tree_every(period, 9, 8) == 3


def test_later_levels_of_a_tree_take_longer_on_the_ice40():
    # TFC-w1a1's first layer on the UP5K at 40 MHz (SIMD 196: eight levels of a popcount, registered after every four):
    # levels five to eight and the accumulator took 32.2 ns, ten LUTs deep, where its first levels take about four a
    # level. The model now registers that tree after every two levels at 40 MHz.
    delays = delay_model("ice40")
    assert delays.tree_every(25.0, 8, 9) == 2
    # Without the growth the first four levels' delay had put four in a stage.
    assert dataclasses.replace(delays, adder_ns=4.5, adder_growth_ns=0.0).tree_every(25.0, 8, 9) == 4


def test_the_layer_takes_its_registers_from_the_clock_at_every_simd():
    stage = layer()
    stage.simd = 64
    none = {"operand_register": False, "route_register": False, "tree_every": 0}
    assert stage.pipelining() == none
    stage.pipeline_for(Clock(mhz=150, family="ecp5"))
    chosen = stage.pipelining()
    assert chosen["operand_register"] and chosen["route_register"] and chosen["tree_every"] >= 1
    # An explicit folding fixes them; with no first register after the ROM reads there is no second.
    stage.operand_register, stage.tree_every = False, 0
    assert stage.pipelining() == none
    # The slow clock of an iCE40 needs none for few lanes.
    stage.operand_register = stage.tree_every = None
    stage.pipeline_for(Clock(mhz=10, family="ice40"))
    assert stage.pipelining(1) == none


@pytest.mark.parametrize("simd", [1, 4, 16, 64])
def test_the_planner_prices_each_simd_with_the_registers_that_simd_is_built_with(simd):
    # The planner builds a layer once per PE and reads every SIMD's spec off it: the registers, which
    # depend on the SIMD's adder tree, must be those of a unit built at that SIMD.
    stage = layer()
    stage.pipeline_for(Clock(mhz=60, family="ice40"))
    stage.pe, stage.simd = 4, 1
    priced = stage_specs(stage)(simd)[0]
    stage.simd = simd
    built = spec_of_unit(stage.components()[0])
    assert priced == built
    assert built.tree_every == stage.pipelining()["tree_every"]


REGISTERED = dict(operand_register=True, tree_every=1)


# The route register's second words are kept where the weight and threshold ROMs are block RAMs (in logic Yosys moves
# them to the ROMs' addresses).
IN_BLOCK = {**REGISTERED, "ram_style": "block", "ram_style_thresholds": "block"}


@pytest.mark.parametrize("before, after", [({}, REGISTERED), (IN_BLOCK, {**IN_BLOCK, "route_register": True})],
                         ids=["registers", "route register"])
@pytest.mark.parametrize("device, family", [("ice40-up5k", "ice40"), ("ecp5-85f", "ecp5")])
def test_the_flip_flops_the_registers_add_are_those_yosys_keeps(tmp_path, device, family, before, after):
    kwargs = dict(weights=layer(mh=4, mw=16).weights, in_dtype=UINT(4), weight_dtype=INT(4), pe=2, simd=8,
                  thresholds=layer(mh=4, mw=16).thresholds, out_dtype=UINT(4), name="fc")
    counted, synthesized = [], []
    for pipelining in (before, after):
        unit = MatrixVectorUnit(**kwargs, **pipelining)
        counted.append(estimate_kernel(spec_of_unit(unit), family).ff)
        folder = tmp_path / str(len(counted))
        folder.mkdir()
        (folder / "streamc_top.v").write_text(to_verilog(StreamAccelerator(stages=[unit])))
        synthesized.append(synthesize(verilog=folder / "streamc_top.v", device=device, workdir=folder).ff)
    added, kept = counted[1] - counted[0], synthesized[1] - synthesized[0]
    assert kept > 0 and abs(added - kept) <= 0.15 * kept, (counted, synthesized)


def test_the_window_keeps_the_pixels_a_patch_needs_in_a_register_at_a_fast_clock():
    window = sliding_window("w", "conv", (28, 28, 1), (28, 28), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), UINT(4), 0)
    assert not window.needed_register
    window.pipeline_for(Clock(mhz=20, family="ice40"))
    assert not window.needed_register and not window.components()[0].needed_register
    window.pipeline_for(Clock(mhz=50, family="ice40"))
    assert window.needed_register and window.components()[0].needed_register


def test_the_window_reads_its_ring_at_a_registered_address_where_its_lut_ram_read_is_too_long():
    # The ECP5's ring is a LUT RAM read after the address's two adders; the iCE40's a block RAM, its address the
    # read's register: at the clocks only the ECP5 registers the address.
    window = sliding_window("w", "maxpool", (12, 12, 8), (6, 6), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), UINT(4), 0)
    window.elems = 8
    window.pipeline_for(Clock(150.0, "ecp5"))
    assert window.address_register and window.components()[0].address_register
    window.pipeline_for(Clock(50.0, "ice40"))
    assert not window.address_register and not window.components()[0].address_register


def test_a_weight_rom_in_logic_too_deep_for_the_clock_asks_for_the_operand_register():
    # TFC-w1a1's 64 x 64 layers at pe=2, simd=32 on the UP5K: 64 words in logic, four LUT levels at 50 MHz (binary
    # inputs: no multiply that would ask for the register anyway).
    stage = layer(mh=64, mw=64, in_dtype=BIPOLAR)
    stage.pe, stage.simd, stage.ram_style = 2, 32, "distributed"
    stage.pipeline_for(Clock(mhz=50, family="ice40"))
    assert stage.pipelining()["operand_register"] and stage.components()[0].weight_rom_banks == 2
    # The same ROM in block RAM, or in logic at a slow clock, needs none.
    stage.ram_style = "block"
    assert not stage.pipelining()["operand_register"]
    stage.ram_style = "distributed"
    stage.pipeline_for(Clock(mhz=30, family="ice40"))
    assert not stage.pipelining()["operand_register"]


def test_a_block_rams_word_gets_a_second_register_where_its_route_would_not_close():
    # TFC-w1a1 on half the ECP5-85F: a threshold ROM's DP16KD, its output register in the block, into a 7-bit compare
    # took 8.0 ns (5.4 of route). The model asks for the second register at 150 MHz, not at 100, and never where the
    # register after a read stays in the fabric (the iCE40's and the GW1NR-9's block RAMs).
    ecp5 = delay_model("ecp5")
    assert ecp5.route_register(1000 / 150, 7) and not ecp5.route_register(1000 / 100, 7)
    assert not delay_model("ice40").route_register(1000 / 50, 7)
    assert not delay_model("gowin").route_register(1000 / 60, 7)


def test_a_clock_no_hard_multiplier_closes_at_keeps_the_multiplies_in_luts():
    stage = layer()
    res_type = {knob.name: knob.values for knob in stage.knobs()}["res_type"]
    assert "auto" in res_type
    stage.pipeline_for(Clock(mhz=150, family="ecp5"))
    assert {knob.name: knob.values for knob in stage.knobs()}["res_type"] == ("lut",)
    stage.pipeline_for(Clock(mhz=50, family="ecp5"))
    assert {knob.name: knob.values for knob in stage.knobs()}["res_type"] == res_type


def test_a_fast_clock_moves_the_layer_on_a_register_then_on_credits_not_on_its_consumers_ready():
    stage = layer()
    for mhz, family, flow in ((30, "ice40", "stall"), (50, "ice40", "skid"), (75, "ecp5", "stall"),
                              (100, "ecp5", "skid"), (150, "ecp5", "credit")):
        stage.pipeline_for(Clock(mhz=mhz, family=family))
        assert stage.components()[0].flow_control == flow, (mhz, family)


def test_an_ecp5_block_ram_read_does_not_bound_the_clock_its_register_moving_into_the_block():
    # 140 MHz: 7.1 ns of DP16KD clock-to-output after the address register would miss it; with the register after
    # the read in the block's output register (streamc.block_ram_registers) only the control paths bound it.
    ecp5 = delay_model("ecp5")
    assert ecp5.closes(1000 / 140, 10)
    assert not dataclasses.replace(ecp5, memory_output_register=False).closes(1000 / 140, 10)
    assert not delay_model("ice40").memory_output_register


def test_a_register_read_across_an_unrolled_graph_bounds_the_clock_by_the_graphs_size():
    # The digits MLP's 64 x 64 layer unrolled (its graph 20,023 LUTs estimated) closed at 69.6 MHz on half the
    # ECP5-85F, its input register's route across the graph 11.1 ns; its 10 x 32 layer (1,644) is small enough for
    # 150 MHz. No family without a measured spread is bounded by it.
    ecp5 = delay_model("ecp5")
    assert not ecp5.spread_closes(1000 / 150, 20023) and ecp5.spread_closes(1000 / 70, 20023)
    assert ecp5.spread_closes(1000 / 150, 1644) and not ecp5.spread_closes(1000 / 150, 8365)
    assert delay_model("ice40").spread_closes(1000 / 50, 1e6)


def test_the_route_across_an_unrolled_graph_takes_its_share_of_the_first_stage():
    ecp5 = delay_model("ecp5")
    alone = ecp5.tree_every(1000 / 75, 12, 10)
    spread = ecp5.tree_every(1000 / 75, 12, 10, ecp5.spread_route_ns(20023))
    assert 0 < spread < alone
