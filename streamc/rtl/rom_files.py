"""Memory contents in ``$readmemh`` files beside the Verilog, instead of inline in it.

Amaranth's Verilog back end writes a memory's initial contents as one assignment per row: a
network's weights made a 57 MB ``streamc_top.v`` that Verilator needed gigabytes and minutes to
compile. :class:`RomFiles` instead has each memory of at least ``min_bits`` bits read its rows with
``$readmemh`` from a file of its own, named after the memory's place in the hierarchy (Yosys,
Verilator, Vivado and Quartus all read these, and Yosys infers block RAM and LUT ROMs from them as
from inline contents). The file names are bare: a tool finds them in its working directory (Yosys
also in the Verilog's folder), so whoever runs a tool elsewhere copies them there
(:func:`copy_rom_files`).

This module imports nothing of Amaranth: the simulation and the synthesis use its file helpers.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from streamc.errors import ConfigError

__all__ = ["MIN_FILE_BITS", "RomFiles", "copy_rom_files", "hex_rows", "rom_files"]

#: Memories smaller than this stay inline: a file per 16-entry table would only clutter the folder,
#: and a few hundred bits of text cost Verilator nothing.
MIN_FILE_BITS = 1024

#: The attribute that marks a memory in the RTLIL, through Yosys' ``write_verilog``, up to
#: :meth:`RomFiles.rewrite`, which replaces it by the ``$readmemh`` call.
_MARK = "streamc_rom_file"
_MARKED = re.compile(rf'^[ \t]*\(\* {_MARK} = "(\d+)" \*\)\n', re.MULTILINE)
# Yosys' declaration of a memory: `reg [7:0] rom [255:0];` (no width range for one bit), the name
# plain or escaped (`\a$b `).
_DECLARATION = re.compile(r"^([ \t]*)reg (?:\[[^\]]*\] )?(\\\S+ |[A-Za-z_][\w$]*) \[(\d+):(\d+)\];\n", re.MULTILINE)
_ATTRIBUTES = re.compile(r"(?:[ \t]*\(\*.*\*\)\n)*")
# What Yosys writes for the empty initialization the memory keeps in the RTLIL (see ``to_verilog``).
_EMPTY_INITIAL = re.compile(r"[ \t]*initial begin\n[ \t]*end\n")
_READMEM = re.compile(r'\$readmemh\("([^"\\]+)"')
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


class RomFiles:
    """The memories of one Verilog conversion that go to files, and those files' contents.

    Attributes
    ----------
    files : dict of str to bytes
        File name (``<module>.<memory>.hex``) to its ``$readmemh`` text, in the order the memories
        were met.
    """

    def __init__(self, *, min_bits: int = MIN_FILE_BITS):
        self.min_bits = min_bits
        self.files: dict[str, bytes] = {}
        self._rows: list[tuple[str, int]] = []   # per mark: file name, rows

    def take(self, module: str, memory: str, width: int, rows) -> str | None:
        """The mark for the memory ``memory`` of module ``module`` if it goes to a file (its
        contents written now), else None: the memory keeps its contents inline."""
        if width * len(rows) < self.min_bits:
            return None
        name = _file_name(f"{module}.{memory.removeprefix(chr(92))}", self.files)
        self.files[name] = hex_rows(rows, width)
        self._rows.append((name, len(rows)))
        return str(len(self._rows) - 1)

    @staticmethod
    def mark(memory, mark: str) -> None:
        """Put ``mark`` on an RTLIL memory (Amaranth's ``rtlil.Memory``) as the attribute ``rewrite`` finds."""
        memory.attribute(_MARK, mark)

    def rewrite(self, verilog: str) -> str:
        """``verilog`` with each marked memory's attribute replaced by a ``$readmemh`` of its file
        after its declaration; addresses are given, as the declaration's range runs downwards."""
        pieces, at = [], 0
        for found in _MARKED.finditer(verilog):
            declaration = _DECLARATION.match(verilog, _ATTRIBUTES.match(verilog, found.end()).end())
            if declaration is None:
                raise ValueError(f"no memory declaration follows the mark {found.group(0).strip()!r}")
            name, rows = self._rows[int(found.group(1))]
            indent, memory = declaration.group(1), declaration.group(2)
            pieces += [verilog[at:found.start()], verilog[found.end():declaration.end()],
                       f'{indent}initial $readmemh("{name}", {memory}, 0, {rows - 1});\n']
            empty = _EMPTY_INITIAL.match(verilog, declaration.end())
            at = declaration.end() if empty is None else empty.end()
        if len(pieces) // 3 != len(self._rows):
            raise ValueError(f"{len(self._rows)} memories were marked for ROM files, but the Verilog names "
                             f"{len(pieces) // 3}")
        return "".join(pieces) + verilog[at:]


def _file_name(path: str, taken) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", path)
    name, n = f"{stem}.hex", 1
    while name in taken:
        name, n = f"{stem}_{n}.hex", n + 1
    return name


def hex_rows(rows, width: int) -> bytes:
    """``rows`` (integers; negative ones as ``width``-bit two's complement) as ``$readmemh`` text: one
    row a line, ``ceil(width / 4)`` lower-case hex digits, the most significant first."""
    digits = -(-width // 4)
    if not len(rows):
        return b""
    mask, size = (1 << width) - 1, -(-width // 8)
    # One bytes object per row is the only per-row Python work; the digits are numpy's.
    raw = np.frombuffer(b"".join((row & mask).to_bytes(size, "big") for row in rows), dtype=np.uint8)
    nibbles = np.stack([raw >> 4, raw & 15], axis=-1).reshape(len(rows), 2 * size)[:, 2 * size - digits:]
    text = np.empty((len(rows), digits + 1), dtype=np.uint8)
    text[:, :digits] = _HEX_DIGITS[nibbles]
    text[:, digits] = ord("\n")
    return text.tobytes()


def rom_files(verilog: str | Path) -> list[str]:
    """The file names the Verilog (its text, or its path) reads with ``$readmemh``, each once, in order."""
    text = Path(verilog).read_text() if isinstance(verilog, Path) else verilog
    return list(dict.fromkeys(_READMEM.findall(text)))


def copy_rom_files(verilog: Path, folder: Path) -> list[str]:
    """Copy the ROM files ``verilog`` reads from its folder into ``folder`` (where a tool will run);
    returns their names.

    Raises
    ------
    ConfigError
        If one of them is not beside ``verilog``: a tool would otherwise read no contents (Verilator
        only warns).
    """
    verilog, folder = Path(verilog), Path(folder)
    names = rom_files(verilog)
    if names:
        folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        source, target = verilog.parent / name, folder / name
        if not source.is_file():
            raise ConfigError(f"{verilog} reads its memory contents from {name}, which is not in {verilog.parent}")
        if source.resolve() != target.resolve():
            shutil.copyfile(source, target)
    return names
