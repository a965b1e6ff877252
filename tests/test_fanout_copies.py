"""The ECP5 flow's copies of flip-flops and LUTs that drive too many inputs (streamc.fanout_copies)."""

import copy
import json

import numpy as np
import pytest
from ecp5_netlists import assert_equal_outputs, ecp5_netlists

from streamc.datatypes import INT, UINT
from streamc.fanout_copies import copy_high_fanout_drivers
from streamc.rtl.mvau import MatrixVectorUnit

CLOCK, ENABLE, REGISTERED = 2, 3, 10
LUT_PORTS = {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"}


def _lut(a, z, init="0101010101010101") -> dict:
    return {"type": "LUT4", "parameters": {"INIT": init}, "port_directions": LUT_PORTS,
            "connections": {"A": [a], "B": ["0"], "C": ["0"], "D": ["0"], "Z": [z]}}


def _netlist(readers: int, inverter: bool = False, mux_reader: bool = False) -> dict:
    """A flip-flop whose output, or (``inverter``) a LUT inverting it, ``readers`` LUTs read; ``mux_reader``
    makes one of them a PFUMX input."""
    cells = {"reg": {"type": "TRELLIS_FF", "parameters": {"GSR": "DISABLED", "CEMUX": "CE"},
                     "port_directions": {"CLK": "input", "CE": "input", "LSR": "input", "DI": "input", "Q": "output"},
                     "connections": {"CLK": [CLOCK], "CE": [ENABLE], "LSR": ["0"], "DI": [4], "Q": [REGISTERED]}}}
    source = REGISTERED
    if inverter:
        cells["not"] = _lut(REGISTERED, 11)
        source = 11
    for n in range(readers):
        cells[f"reader{n:02d}"] = _lut(source, 100 + n, init="1010101010101010")
    if mux_reader:
        cells["mux"] = {"type": "PFUMX", "parameters": {},
                        "port_directions": {"ALUT": "input", "BLUT": "input", "C0": "input", "Z": "output"},
                        "connections": {"ALUT": [source], "BLUT": [100], "C0": [5], "Z": [300]}}
    ports = {"q": {"direction": "output", "bits": [REGISTERED]}}
    return {"modules": {"top": {"attributes": {"top": "1"}, "ports": ports, "cells": cells, "netnames": {}}}}


def _copied(netlist: dict, tmp_path, max_readers: int) -> tuple[int, dict]:
    path = tmp_path / "board.json"
    path.write_text(json.dumps(netlist))
    made = copy_high_fanout_drivers(path, max_readers)
    return made, json.loads(path.read_text())["modules"]["top"]


def _readers_of(cells: dict) -> dict:
    readers = {}
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"][port] == "input":
                for bit in bits:
                    readers.setdefault(bit, []).append(name)
    return readers


def test_a_register_read_by_too_many_inputs_gets_copies_sharing_them(tmp_path):
    made, top = _copied(_netlist(10), tmp_path, max_readers=4)
    cells = top["cells"]
    registers = {name: cell for name, cell in cells.items() if cell["type"] == "TRELLIS_FF"}
    assert made == 2 and len(registers) == 3
    readers = _readers_of(cells)
    shares = sorted(len(readers[cell["connections"]["Q"][0]]) for cell in registers.values())
    assert shares == [2, 4, 4]
    # The copies take the original's inputs and parameters; the module's port stays on the original.
    for cell in registers.values():
        assert {port: bits for port, bits in cell["connections"].items() if port != "Q"} == \
            {"CLK": [CLOCK], "CE": [ENABLE], "LSR": ["0"], "DI": [4]}
        assert cell["parameters"] == {"GSR": "DISABLED", "CEMUX": "CE"}
    assert top["ports"]["q"]["bits"] == [REGISTERED]


def test_an_inverter_is_copied_with_the_register_before_it(tmp_path):
    made, top = _copied(_netlist(20, inverter=True), tmp_path, max_readers=3)
    cells = top["cells"]
    readers = _readers_of(cells)
    drivers = [cell["connections"][port][0] for cell in cells.values() for port in ("Q", "Z") if port in cell["connections"]]
    assert max(len(readers.get(bit, [])) for bit in drivers) <= 3
    inverters = [cell for cell in cells.values() if cell["parameters"].get("INIT") == "0101010101010101"]
    assert len(inverters) == 7 and len([cell for cell in cells.values() if cell["type"] == "TRELLIS_FF"]) == 3
    assert made == 6 + 2


def test_a_reset_is_not_copied(tmp_path):
    netlist = _netlist(0)
    cells = netlist["modules"]["top"]["cells"]
    for n in range(10):
        cells[f"ff{n}"] = {**copy.deepcopy(cells["reg"]), "connections": {"CLK": [CLOCK], "CE": ["1"],
                                                                          "LSR": [REGISTERED], "DI": [5], "Q": [100 + n]}}
    made, top = _copied(copy.deepcopy(netlist), tmp_path, max_readers=4)
    assert made == 0 and top == netlist["modules"]["top"]


def test_a_lut_beside_a_mux_is_not_copied_and_few_readers_change_nothing(tmp_path):
    made, top = _copied(_netlist(10, inverter=True, mux_reader=True), tmp_path, max_readers=4)
    assert made == 0 and top == _netlist(10, inverter=True, mux_reader=True)["modules"]["top"]
    made, top = _copied(_netlist(4), tmp_path, max_readers=4)
    assert made == 0 and top == _netlist(4)["modules"]["top"]


@pytest.mark.parametrize("flow_control", ["stall", "skid", "credit"])
def test_copies_keep_an_mvau_cycle_for_cycle(tmp_path, flow_control):
    """An MVAU of 4 lanes: Yosys' ECP5 netlist and the one with every driver of more than 3 inputs copied are
    equal at every output for 10 cycles from power-up, for any inputs and stalls (a bounded proof by Yosys' SAT
    solver over a miter of the two). Moved by a skid register the pipeline moves on a register's inverse, which the
    copies of its inverter and of the register carry; moved by credits, on no enable at all."""
    rng = np.random.default_rng(3)
    weights = rng.integers(-2, 2, size=(4, 4))
    dut = MatrixVectorUnit(weights=weights, in_dtype=UINT(2), weight_dtype=INT(2), pe=4, simd=2,
                           thresholds=np.sort(rng.integers(-6, 6, size=(4, 1)), axis=1), out_dtype=UINT(1),
                           res_type="lut", operand_register=True, flow_control=flow_control, name="fc")
    _, gate = ecp5_netlists(dut, tmp_path)
    assert copy_high_fanout_drivers(gate, max_readers=3) > 4
    assert_equal_outputs(tmp_path, 10)
