"""``streamc estimate`` on the digits demo: reports written, cycles as the fold step predicts."""

import json
from pathlib import Path

import pytest

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
    markdown = (reports / "estimate.md").read_text()
    assert "## ice40-up5k (iCE40UP5K): fits" in markdown
    assert "matplotlib is not installed" in markdown or (reports / "estimate_cycles.svg").read_text().startswith("<?xml")


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


def test_charts_read_at_a_glance(tmp_path, monkeypatch):
    """Linear axes from zero, every bar labelled with its value, a title; resources in counts that sum to the total."""
    Figure = pytest.importorskip("matplotlib.figure").Figure
    figures = []
    savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: (figures.append(figure),
                                                                            savefig(figure, *args, **kwargs)))
    assert main(["estimate", str(_config(tmp_path))]) == EXIT_OK
    report = json.loads((tmp_path / "out" / "reports" / "estimate.json").read_text())
    cycles, *devices = figures
    assert len(devices) == len(report["devices"])
    axes = cycles.axes[0]
    assert axes.get_xscale() == "linear" and axes.get_xlim()[0] == 0
    assert axes.get_xlim()[1] > max(report["cycle_budget"], report["predicted_cycles_per_frame"])
    assert "512" in axes.get_title() and [t.get_text() for t in axes.texts] == ["512", "512", "320"]
    for figure, (name, device) in zip(devices, report["devices"].items()):
        assert name in figure.get_suptitle()
        for axes in figure.axes:
            key = axes.get_title(loc="left").split(":")[0].lower()
            assert axes.get_xscale() == "linear" and axes.get_xlim()[0] == 0
            assert sum(int(t.get_text().replace(",", "")) for t in axes.texts) == device["total"][key]
            assert axes.get_title(loc="left").startswith(f"{key.upper()}: {device['total'][key]:,} of ")
