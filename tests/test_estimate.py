"""``streamc estimate`` on the digits demo: reports written, cycles as the fold step predicts."""

import json
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
    markdown = (reports / "estimate.md").read_text()
    assert "## ice40-up5k (iCE40UP5K): fits" in markdown
    assert "matplotlib is not installed" in markdown or (reports / "estimate_cycles.png").exists()


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
