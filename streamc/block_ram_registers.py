"""Registers after an ECP5 block RAM, moved into the block: its output register (``REGMODE`` ``OUTREG``).

An ECP5 DP16KD read without its output register has 5.8 ns of clock-to-output, with it 0.95 ns (nextpnr's
timing database). Yosys 0.70 maps every block RAM with ``REGMODE`` ``NOREG`` (its memory rules have no output
register) and leaves the register the Verilog puts after the read as flip-flops, so a read closes at 130 MHz at
best. Vendor tools move such a register into the block; this pass does so on Yosys' JSON netlist, before
nextpnr: where every used output bit of a read port drives exactly one flip-flop and nothing else, and those
flip-flops share the port's clock and one enable, with no set or reset, the flip-flops go and the port's output
register takes their place, loading on their enable (``OCE``). The block's read then takes the cycle the
flip-flops took, so the design's behaviour at its ports is unchanged. The MVAU's registers after its ROM reads
have no reset for this reason (:func:`streamc.rtl.mvau._stage_register`).
"""

from __future__ import annotations

from pathlib import Path

from .yosys_netlist import TopNetlist

#: A LUT4 whose output is its input A inverted (``Z = INIT[{D, C, B, A}]``), for an enable a flip-flop inverted.
_INVERTER_INIT = "0101010101010101"


def absorb_output_registers(netlist_path: Path) -> int:
    """Move the flip-flops after each DP16KD read port of the top module in the Yosys JSON netlist at
    ``netlist_path`` into its output register, rewriting the file. Returns the number of read ports moved."""
    netlist = TopNetlist(netlist_path)
    cells, readers = netlist.cells, netlist.readers()
    inverted: dict[int, int] = {}
    moved = 0
    for name in [name for name, cell in cells.items() if cell["type"] == "DP16KD"]:
        block = cells[name]
        for side, outputs, modes in _read_ports(block["parameters"]):
            registers = _registers_after(block, side, outputs, modes, cells, readers)
            if registers is None:
                continue
            enable = _common_enable([cells[ff] for ff in registers.values()])
            if enable is None:
                continue
            if isinstance(enable, tuple):
                if enable[1] not in inverted:
                    inverted[enable[1]] = netlist.new_bit()
                    cells[f"$streamc$oce_not_{enable[1]}"] = {
                        "hide_name": 1, "type": "LUT4", "parameters": {"INIT": _INVERTER_INIT}, "attributes": {},
                        "port_directions": {"A": "input", "B": "input", "C": "input", "D": "input", "Z": "output"},
                        "connections": {"A": [enable[1]], "B": ["0"], "C": ["0"], "D": ["0"],
                                        "Z": [inverted[enable[1]]]}}
                enable = inverted[enable[1]]
            for pin, ff in registers.items():
                block["connections"][pin] = cells.pop(ff)["connections"]["Q"]
            block["connections"][f"OCE{side}"] = [enable]
            for mode in modes:
                block["parameters"][mode] = "OUTREG"
            moved += 1
    netlist.save()
    return moved


def _read_ports(parameters: dict) -> list[tuple[str, list[str], tuple[str, ...]]]:
    """Each read side of a DP16KD: its letter (whose CLK, CE, OCE and RST pins it uses), its data outputs and
    the ``REGMODE`` parameters that set its output register. At 36 bits (pseudo dual port, as nextpnr reads
    ``DATA_WIDTH_A``) port B reads all of ``DOA`` and ``DOB``; else each port reads its own."""
    if int(str(parameters.get("DATA_WIDTH_A", "0")), 2) == 36:
        return [("B", [f"DO{side}{bit}" for side in "AB" for bit in range(18)], ("REGMODE_A", "REGMODE_B"))]
    return [(side, [f"DO{side}{bit}" for bit in range(18)], (f"REGMODE_{side}",)) for side in "AB"]


def _registers_after(block: dict, side: str, outputs: list[str], modes: tuple[str, ...], cells: dict,
                     readers: dict) -> dict[str, str] | None:
    """The flip-flop each used output of the read side drives, by output pin, where they can become its output
    register: the side has none yet and no reset, every used output drives one flip-flop's data input and
    nothing else, each on the side's clock with no set or reset. None otherwise (or where no output is used)."""
    connections = block["connections"]
    clock = connections.get(f"CLK{side}", ["0"])[0]
    if (not isinstance(clock, int) or any(block["parameters"].get(mode, "NOREG") != "NOREG" for mode in modes)
            or connections.get(f"RST{side}", ["0"]) != ["0"]):
        return None
    registers = {}
    for pin in outputs:
        bit = connections.get(pin, ["x"])[0]
        if not isinstance(bit, int) or not readers.get(bit):
            continue
        if len(readers[bit]) != 1:
            return None
        ff_name, port = readers[bit][0]
        ff = cells.get(ff_name)
        if ff is None or ff["type"] != "TRELLIS_FF" or port != "DI":
            return None
        parameters, ff_connections = ff["parameters"], ff["connections"]
        if (ff_connections["CLK"] != [clock] or parameters.get("CLKMUX", "CLK").strip() != "CLK"
                or parameters.get("GSR", "ENABLED") != "DISABLED" or parameters.get("REGSET", "RESET") != "RESET"
                or not _never_set(parameters, ff_connections.get("LSR", ["0"])[0])):
            return None
        registers[pin] = ff_name
    return registers or None


def _never_set(parameters: dict, lsr) -> bool:
    """Whether a TRELLIS_FF's set/reset input never acts."""
    mux = parameters.get("LSRMUX", "LSR").strip()
    return mux == "0" or (mux == "LSR" and lsr == "0") or (mux == "INV" and lsr == "1")


def _common_enable(flip_flops: list[dict]):
    """The enable the flip-flops share, as an output register's ``OCE`` connection: ``"1"``, a net's bit, or
    ``("not", bit)`` for a net they invert. None where they differ or never load."""
    enables = set()
    for ff in flip_flops:
        # Yosys pads a string parameter with spaces to a whole byte ("1 ": the enable tied high).
        mux, ce = ff["parameters"].get("CEMUX", "CE").strip(), ff["connections"].get("CE", ["1"])[0]
        if mux == "1" or (mux == "CE" and ce == "1") or (mux == "INV" and ce == "0"):
            enables.add("1")
        elif mux == "CE" and isinstance(ce, int):
            enables.add(ce)
        elif mux == "INV" and isinstance(ce, int):
            enables.add(("not", ce))
        else:
            return None
    return enables.pop() if len(enables) == 1 else None
