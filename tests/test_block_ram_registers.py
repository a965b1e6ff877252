"""The ECP5 flow's move of the registers after block RAM reads into the blocks (streamc.block_ram_registers)."""

import copy
import json

import numpy as np
import pytest
from ecp5_netlists import assert_equal_outputs, ecp5_netlists

from streamc.block_ram_registers import absorb_output_registers
from streamc.datatypes import INT, UINT
from streamc.rtl.mvau import MatrixVectorUnit

PINS = {side: [*(f"DI{side}{i}" for i in range(18)), *(f"AD{side}{i}" for i in range(14)),
               *(f"{pin}{side}" for pin in ("CE", "OCE", "CLK", "WE", "RST")), *(f"CS{side}{i}" for i in range(3))]
        for side in "AB"}
CLOCK, ENABLE, RESET = 2, 3, 4


def _netlist(width=36, mux="INV", lsr="0", ff_clock=CLOCK, reader_of_bit=None, second_enable=False) -> dict:
    """A top module with one DP16KD read port (36 bits wide or, else, port B at ``width`` bits) whose outputs
    each drive a TRELLIS_FF, as synth_ecp5 leaves a register after a read; ``reader_of_bit`` adds a LUT4 reading
    that output too."""
    outputs = [f"DO{side}{i}" for side in "AB" for i in range(18)] if width == 36 else [f"DOB{i}" for i in range(width)]
    block = {"type": "DP16KD", "parameters": {"DATA_WIDTH_A": format(width, "032b"), "DATA_WIDTH_B": format(width, "032b"),
                                              "REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
             "port_directions": {**{pin: "input" for side in "AB" for pin in PINS[side]},
                                 **{f"DO{side}{i}": "output" for side in "AB" for i in range(18)}},
             "connections": {**{pin: ["0"] for side in "AB" for pin in PINS[side]},
                             **{f"DO{side}{i}": ["x"] for side in "AB" for i in range(18)},
                             "CLKB": [CLOCK], "CEB": [ENABLE], "OCEB": ["1"]}}
    cells = {"rom": block}
    for n, pin in enumerate(outputs):
        data, q = 100 + n, 200 + n
        block["connections"][pin] = [data]
        cells[f"ff{n}"] = {"type": "TRELLIS_FF",
                           "parameters": {"CEMUX": mux, "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                                          "REGSET": "RESET", "SRMODE": "LSR_OVER_CE"},
                           "port_directions": {"CLK": "input", "CE": "input", "LSR": "input", "DI": "input",
                                               "Q": "output"},
                           "connections": {"CLK": [ff_clock], "CE": [5 if second_enable and n else ENABLE],
                                           "LSR": [lsr], "DI": [data], "Q": [q]}}
    if reader_of_bit is not None:
        cells["lut"] = {"type": "LUT4", "parameters": {"INIT": "1" * 16},
                        "port_directions": {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"},
                        "connections": {"A": [100 + reader_of_bit], "B": ["0"], "C": ["0"], "D": ["0"], "Z": [400]}}
    return {"modules": {"top": {"attributes": {"top": "1"}, "ports": {}, "cells": cells, "netnames": {}}}}


def _absorbed(netlist: dict, tmp_path) -> tuple[int, dict]:
    path = tmp_path / "board.json"
    path.write_text(json.dumps(netlist))
    moved = absorb_output_registers(path)
    return moved, json.loads(path.read_text())["modules"]["top"]["cells"]


@pytest.mark.parametrize("width", [36, 9])
def test_flip_flops_after_a_read_become_its_output_register(tmp_path, width):
    moved, cells = _absorbed(_netlist(width), tmp_path)
    assert moved == 1
    block = cells["rom"]
    assert not [name for name, cell in cells.items() if cell["type"] == "TRELLIS_FF"]
    outputs = [f"DO{side}{i}" for side in "AB" for i in range(18)] if width == 36 else [f"DOB{i}" for i in range(width)]
    assert [block["connections"][pin] for pin in outputs] == [[200 + n] for n in range(len(outputs))]
    modes = ("REGMODE_A", "REGMODE_B") if width == 36 else ("REGMODE_B",)
    assert all(block["parameters"][mode] == "OUTREG" for mode in modes)
    assert width == 36 or block["parameters"]["REGMODE_A"] == "NOREG"
    # The flip-flops loaded on the inverse of their CE net: so does the output register, through an inverter.
    (inverter,) = [cell for cell in cells.values() if cell["type"] == "LUT4"]
    assert inverter["connections"]["A"] == [ENABLE] and inverter["parameters"]["INIT"] == "0101010101010101"
    assert block["connections"]["OCEB"] == inverter["connections"]["Z"]


def test_an_enable_taken_as_it_is_needs_no_inverter(tmp_path):
    moved, cells = _absorbed(_netlist(mux="CE"), tmp_path)
    assert moved == 1 and cells["rom"]["connections"]["OCEB"] == [ENABLE]
    assert not [cell for cell in cells.values() if cell["type"] == "LUT4"]


@pytest.mark.parametrize("change", [dict(lsr=RESET), dict(ff_clock=7), dict(reader_of_bit=3),
                                    dict(second_enable=True)],
                         ids=["reset", "another clock", "output read by logic too", "two enables"])
def test_registers_that_are_not_the_reads_alone_stay(tmp_path, change):
    netlist = _netlist(**change)
    moved, cells = _absorbed(copy.deepcopy(netlist), tmp_path)
    assert moved == 0 and cells == netlist["modules"]["top"]["cells"]


def _abstract_dp16kd(parameters: set[str]) -> str:
    """A DP16KD for the equivalence check: each read port's latch takes a function of its address on CE, and its
    output register, with REGMODE OUTREG, the latch on OCE (Lattice's description of the block; the contents do
    not matter to the check, the same in both netlists). 36 bits wide, port B reads all 36. It takes every
    parameter the netlist sets (``parameters``)."""
    def bus(prefix, bits):
        return "{" + ", ".join(f"{prefix}{i}" for i in reversed(range(bits))) + "}"
    inputs = ", ".join(pin for side in "AB" for pin in PINS[side])
    outputs = ", ".join(f"DO{side}{i}" for side in "AB" for i in range(18))
    lines = [f"module DP16KD(input {inputs}, output {outputs});",
             *(f"  parameter {name} = 0;" for name in sorted(parameters - {"REGMODE_A", "REGMODE_B"})),
             '  parameter REGMODE_A = "NOREG"; parameter REGMODE_B = "NOREG";']
    for side in "AB":
        lines += [f"  wire [13:0] ad{side} = {bus('AD' + side, 14)};",
                  f"  reg [35:0] latch{side} = 0, out{side} = 0;",
                  f"  always @(posedge CLK{side}) if (CE{side}) latch{side} <= "
                  f"{{ad{side}, ad{side} ^ 14'h2a5b, ad{side}[7:0] + 8'h3c}};",
                  f"  always @(posedge CLK{side}) if (OCE{side}) out{side} <= latch{side};",
                  f"  wire [35:0] read{side} = REGMODE_{side} == \"OUTREG\" ? out{side} : latch{side};"]
    lines += ["  assign {" + ", ".join([bus("DOB", 18)[1:-1], bus("DOA", 18)[1:-1]]) + "} = DATA_WIDTH_A == 36 ? readB "
              ": {readB[17:0], readA[17:0]};", "endmodule", ""]
    return "\n".join(lines)


@pytest.mark.parametrize("flow_control", ["stall", "skid", "credit"], ids=["enable", "inverted enable", "no enable"])
def test_the_moved_registers_keep_an_mvau_cycle_for_cycle(tmp_path, flow_control):
    """An MVAU with its weight and threshold ROMs in block RAM, read through registers: Yosys' ECP5 netlist and the
    one with those registers moved into the blocks are equal at every output for 12 cycles from power-up, for
    any inputs and stalls (a bounded proof by Yosys' SAT solver over a miter of the two), the blocks modelled
    abstractly. 12 cycles take an output beat, a stall and the beats after it; the check fails with the
    output registers loading every cycle, or with the inverted enable not inverted. Moved by a skid register the
    registers load on a net Yosys inverts into their enable; moved by credits they load every cycle."""
    rng = np.random.default_rng(7)
    weights = rng.integers(-2, 2, size=(4, 2))
    dut = MatrixVectorUnit(weights=weights, in_dtype=UINT(2), weight_dtype=INT(2), pe=1, simd=2,
                           thresholds=np.sort(rng.integers(-6, 6, size=(4, 1)), axis=1), out_dtype=UINT(1),
                           ram_style="block", ram_style_thresholds="block", res_type="lut", operand_register=True,
                           flow_control=flow_control, name="fc")
    netlist, gate = ecp5_netlists(dut, tmp_path)
    blocks = [cell for cell in netlist["modules"]["mvau"]["cells"].values() if cell["type"] == "DP16KD"]
    assert len(blocks) == 2 and absorb_output_registers(gate) == 2   # the weight ROM and the threshold ROM
    inverters = [name for name in json.loads(gate.read_text())["modules"]["mvau"]["cells"] if "oce_not" in name]
    assert len(inverters) == (flow_control == "skid")
    (tmp_path / "dp16kd.v").write_text(_abstract_dp16kd({name for cell in blocks for name in cell["parameters"]}))
    assert_equal_outputs(tmp_path, 12, models=("dp16kd.v",))
