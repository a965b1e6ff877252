"""Copies of an ECP5 flip-flop or LUT that drives too many inputs, each copy driving a share of them.

nextpnr neither copies nor buffers a net, so a net read across the device takes as long as its farthest reader:
the MVAU's pipeline enable, read by every register of its datapath and both clock enables of every block RAM, took
9.3 ns from its register to a block RAM on half an ECP5-85F (TFC-w1a1 at 14 cycles per frame). Vendor tools copy
such a driver (Vivado's ``MAX_FANOUT``); Yosys merges equal cells, so this pass does it on Yosys' JSON netlist,
before nextpnr. A TRELLIS_FF or LUT4 whose output has more than :data:`MAX_READERS` cell inputs, none of them a
set/reset, gets copies with its inputs and parameters, its readers split among them in the order of their names (a
kernel's cells share a name prefix, so a share sits together and the placer puts its copy beside it). A copy has
the original's value at every cycle (the same inputs, the same initial value), so the design's behaviour at its
ports is unchanged. A copied LUT's inputs gain readers, so the pass repeats until no net is over the bound: the
enable's register is copied with the inverter after it.
"""

from __future__ import annotations

import copy
from math import ceil
from pathlib import Path

from .yosys_netlist import TOP_PORT, TopNetlist

#: Cell inputs one flip-flop or LUT output drives at most after the pass.
MAX_READERS = 64

#: The cells the pass copies, by their output port.
_COPIED = {"TRELLIS_FF": "Q", "LUT4": "Z"}

#: Cells whose inputs must come from a LUT4 packed beside them: a LUT read by one is never copied.
_PACKED_WITH_LUTS = ("PFUMX", "L6MUX21")

# Nor is a net a flip-flop's set/reset (LSR) reads: the two flip-flops of a slice share one, and a reset's copies
# split the pairs the packer would make (TFC-w1a1 at a tenth of the ECP5-85F, nextpnr seeds 1 and 2: 149.6 and
# 157.4 MHz with the reset copied, 165.5 and 177.6 without, 167.3 and 167.1 with no copies at all).


def copy_high_fanout_drivers(netlist_path: Path, max_readers: int = MAX_READERS) -> int:
    """Copy each TRELLIS_FF and LUT4 of the top module in the Yosys JSON netlist at ``netlist_path`` whose
    output has more than ``max_readers`` cell inputs, rewriting the file. Returns the number of copies made."""
    netlist = TopNetlist(netlist_path)
    made = 0
    while True:
        readers, drivers = netlist.readers(), netlist.drivers()
        over = [(bit, driver) for bit, driver in drivers.items()
                if driver[1] == _COPIED.get(netlist.cells[driver[0]]["type"])
                and sum(reader != TOP_PORT for reader in readers.get(bit, ())) > max_readers
                and not any(netlist.cells[name]["type"] in _PACKED_WITH_LUTS or port == "LSR"
                            for name, port in readers[bit] if (name, port) != TOP_PORT)]
        if not over:
            break
        for bit, (name, output) in over:
            cell_readers = sorted(reader for reader in readers[bit] if reader != TOP_PORT)
            shares = ceil(len(cell_readers) / max_readers)
            size = ceil(len(cell_readers) / shares)
            for k in range(1, shares):
                copied = copy.deepcopy(netlist.cells[name])
                copied_bit = netlist.new_bit()
                copied["connections"][output] = [copied_bit]
                netlist.cells[f"{name}$streamc$copy{made}"] = copied
                for reader, port in cell_readers[k * size:(k + 1) * size]:
                    connection = netlist.cells[reader]["connections"][port]
                    connection[:] = [copied_bit if b == bit else b for b in connection]
                made += 1
    netlist.save()
    return made
