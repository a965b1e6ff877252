"""The top module of a Yosys JSON netlist, for the passes that rewrite it between Yosys and nextpnr.

Cells connect by bit numbers (a net is its bit); a pass reads who reads each bit, adds cells on fresh bits and
writes the file back.
"""

from __future__ import annotations

import json
from pathlib import Path

#: A reader of a net that is no cell: one of the top module's output ports.
TOP_PORT = ("", "top port")


class TopNetlist:
    """The top module of the Yosys JSON netlist at ``path``: its ``cells`` (name -> Yosys' cell dictionary),
    the cells reading each bit (:meth:`readers`), fresh bits for new nets (:meth:`new_bit`)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._netlist = json.loads(self.path.read_text())
        self._top = next(module for module in self._netlist["modules"].values()
                         if int(str(module.get("attributes", {}).get("top", "0")), 2))
        self.cells: dict[str, dict] = self._top["cells"]
        # Past every bit a cell or a port of the module uses (a port may pass a net no cell touches).
        used = [bits for cell in self.cells.values() for bits in cell["connections"].values()]
        used += [port["bits"] for port in self._top.get("ports", {}).values()]
        self._next_bit = 1 + max((bit for bits in used for bit in bits if isinstance(bit, int)), default=1)

    def readers(self) -> dict[int, list[tuple[str, str]]]:
        """Each bit's readers as it stands now: ``(cell name, input port)`` pairs, :data:`TOP_PORT` for an output
        port of the module."""
        readers: dict[int, list[tuple[str, str]]] = {}
        for name, cell in self.cells.items():
            for port, bits in cell["connections"].items():
                if cell["port_directions"].get(port) != "output":
                    for bit in bits:
                        if isinstance(bit, int):
                            readers.setdefault(bit, []).append((name, port))
        for port in self._top.get("ports", {}).values():
            if port["direction"] != "input":
                for bit in port["bits"]:
                    if isinstance(bit, int):
                        readers.setdefault(bit, []).append(TOP_PORT)
        return readers

    def drivers(self) -> dict[int, tuple[str, str]]:
        """The cell output driving each bit that a cell drives: ``(cell name, output port)``."""
        return {bit: (name, port) for name, cell in self.cells.items() for port, bits in cell["connections"].items()
                if cell["port_directions"].get(port) == "output" for bit in bits if isinstance(bit, int)}

    def new_bit(self) -> int:
        """A bit no net uses yet."""
        self._next_bit += 1
        return self._next_bit - 1

    def save(self) -> None:
        self.path.write_text(json.dumps(self._netlist))
