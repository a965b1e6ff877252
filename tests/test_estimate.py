"""``streamc estimate`` on the digits demo: reports written, cycles as the fold step predicts."""

import json
import math
from pathlib import Path

from streamc.cli import EXIT_ERROR, EXIT_OK, main

DIGITS = Path(__file__).parent.parent / "build_configs"


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "digits.yaml"
    config.write_text(f"model: {DIGITS / 'models' / 'digits_mlp.onnx'}\noutput_dir: {tmp_path / 'out'}\n"
                      "devices: [ice40-up5k, ecp5-85f]\nclock_mhz: 30\ntarget_fps: 50000\n")
    return config


def test_estimate_writes_json_and_markdown(tmp_path):
    assert main(["estimate", str(_config(tmp_path))]) == EXIT_OK
    reports = tmp_path / "out" / "reports"
    report = json.loads((reports / "estimate.json").read_text())
    stages = [k for k in report["kernels"] if k["cycles"] is not None]
    assert report["predicted_cycles_per_frame"] == max(k["cycles"] for k in stages) <= report["cycle_budget"]
    # Block RAM and DSP counts as Yosys 0.70 maps this folding: ROMs in block RAM, multiplies in LUTs
    # (cheaper on the UP5K, whose DSPs take only products of 11 bits or more; the digits build's synth reports).
    assert report["devices"]["ice40-up5k"]["total"]["bram"] == 16
    assert report["devices"]["ecp5-85f"]["total"]["dsp"] == 0
    assert report["devices"]["ice40-up5k"]["fits"]
    # an iCE40's LUT count holds its logic cells: its LUT4s and the flip-flops (0.6 of them) that take a cell alone
    up5k = report["devices"]["ice40-up5k"]
    assert up5k["logic_cells"] == up5k["total"]["lut"] + math.ceil(0.6 * up5k["total"]["ff"])
    assert "logic_cells" not in report["devices"]["ecp5-85f"]
    markdown = (reports / "estimate.md").read_text()
    assert "## ice40-up5k (iCE40UP5K): fits" in markdown
    assert (reports / "estimate_cycles.svg").read_text().startswith("<?xml") and "![estimate_cycles.svg]" in markdown


def test_estimate_for_an_unknown_device(tmp_path, capsys):
    assert main(["estimate", str(_config(tmp_path)), "--device", "ice40-lp1k"]) == EXIT_ERROR
    assert "device must be one of" in capsys.readouterr().err


CNN = Path(__file__).parent / "models" / "cnn"


def _residual_config(tmp_path: Path) -> Path:
    config = tmp_path / "residual.yaml"
    config.write_text(f"model: {CNN / 'residual_block.onnx'}\noutput_dir: {tmp_path / 'out'}\n"
                      "devices: [ice40-up5k, ecp5-85f]\nclock_mhz: 30\ntarget_fps: 1000\n")
    return config


def test_estimate_of_a_residual_block_prices_every_fork_converter_and_fifo(tmp_path):
    from streamc.pipeline.config import load_config
    from streamc.pipeline.folder import BuildFolder
    from streamc.pipeline.steps import STEP_FUNCTIONS, BuildState
    from streamc.fifo_sizing import fifo_depths

    config_path = _residual_config(tmp_path)
    assert main(["estimate", str(config_path)]) == EXIT_OK
    report = json.loads((tmp_path / "out" / "reports" / "estimate.json").read_text())
    kernels = {k["name"]: k for k in report["kernels"]}

    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(tmp_path / "again"), config_path=str(config_path))
    for name in ("load", "tidy", "streamline", "to_hw", "fold"):
        STEP_FUNCTIONS[name](state)
    stages = state.dataflow.stages
    add = next(k for k, stage in enumerate(stages) if type(stage).__name__ == "AddStage")
    assert stages[add].sources[1] == -1     # the skip path: the input, forked to the convolutions and the add
    assert kernels["fork_in"]["kind"] == "StreamFork" and kernels["fork_in"]["folding"] == {"outputs": 2}
    # The skip path's FIFO is as deep as the sizing says, far deeper than the default.
    skip_depth = fifo_depths(state.dataflow, config.fifo_depth)[add][1]
    assert skip_depth > config.fifo_depth
    assert kernels[f"fifo_in_stage{add}_1"]["folding"] == {"depth": skip_depth}
    assert kernels[stages[add].name]["kind"] == "AddStage"
    fifos = [k for k in report["kernels"] if k["kind"] == "StreamFIFO"]
    assert len(fifos) == sum(1 for ports in fifo_depths(state.dataflow, config.fifo_depth) for d in ports if d)
    for device, total in report["devices"].items():
        assert total["total"]["lut"] == sum(k["resources"][device]["lut"] for k in report["kernels"])
    # The fold step reports the same totals as the estimate.
    assert state.resources == {device: d["total"] for device, d in report["devices"].items()}


def test_estimate_leaves_the_builds_own_reports_and_says_where_it_wrote(tmp_path, capsys):
    config = _config(tmp_path)
    with config.open("a") as file:
        file.write("steps: [load, tidy, streamline, to_hw, fold]\n")
    assert main(["build", str(config)]) == EXIT_OK
    out = tmp_path / "out"
    built = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    capsys.readouterr()
    # A different folding than the build's: were the estimate to write the build's reports, they would change.
    config.write_text(config.read_text().replace("target_fps: 50000", "target_fps: 100000"))
    assert main(["estimate", str(config)]) == EXIT_OK
    assert {path: path.read_bytes() for path in built} == built
    written = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()} - \
        {path.relative_to(out).as_posix() for path in built}
    assert written <= {"reports/estimate.json", "reports/estimate.md", "reports/estimate_cycles.svg",
                       "reports/estimate_resources_ice40-up5k.svg", "reports/estimate_resources_ecp5-85f.svg"}
    assert f"Wrote {out / 'reports' / 'estimate.md'} (with estimate.json" in capsys.readouterr().out


def test_charts_read_at_a_glance(tmp_path):
    """Bars from zero on linear axes, every bar labelled with its value, a title; resources in counts that sum to the
    total."""
    from xml.etree import ElementTree

    assert main(["estimate", str(_config(tmp_path))]) == EXIT_OK
    reports = tmp_path / "out" / "reports"
    report = json.loads((reports / "estimate.json").read_text())

    def panels(chart: str) -> list:
        svg = ElementTree.parse(reports / chart).getroot()
        return svg.findall(".//{*}g[@class='panel']")

    def values(panel) -> list[int]:
        return [int(t.text.replace(",", "")) for t in panel.findall("{*}text[@class='value']")]

    def linear_from_zero(panel) -> None:
        bars = panel.findall("{*}rect[@class='bar']")
        assert len({bar.get("x") for bar in bars}) == 1
        widths = [float(bar.get("width")) for bar in bars]
        scale = max(widths) / max(*values(panel), 1)
        assert all(abs(width - value * scale) <= 0.01 for width, value in zip(widths, values(panel)))

    (cycles,) = panels("estimate_cycles.svg")
    linear_from_zero(cycles)
    stage_cycles = [k["cycles"] for k in report["kernels"] if k["cycles"] is not None]
    assert f"{max(stage_cycles):,}" in cycles.find("{*}text[@class='title']").text
    assert values(cycles) == stage_cycles
    for name, device in report["devices"].items():
        svg = ElementTree.parse(reports / f"estimate_resources_{name}.svg").getroot()
        assert name in svg.find("{*}text[@class='heading']").text
        for panel in panels(f"estimate_resources_{name}.svg"):
            title = panel.find("{*}text[@class='title']").text
            key = title.split(":")[0].lower()
            linear_from_zero(panel)
            assert sum(values(panel)) == device["total"][key]
            assert title.startswith(f"{key.upper()}: {device['total'][key]:,} of ")
