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
    # Block RAM and DSP counts as Yosys 0.70 maps this folding (the digits build's synth reports).
    assert report["devices"]["ice40-up5k"]["total"]["bram"] == 11
    assert report["devices"]["ecp5-85f"]["total"]["dsp"] == 13
    assert report["devices"]["ice40-up5k"]["fits"]
    markdown = (reports / "estimate.md").read_text()
    assert "## ice40-up5k (iCE40UP5K): fits" in markdown
    assert "matplotlib is not installed" in markdown or (reports / "estimate_cycles.png").exists()


def test_estimate_for_an_unknown_device(tmp_path, capsys):
    assert main(["estimate", str(_config(tmp_path)), "--device", "ice40-lp1k"]) == EXIT_ERROR
    assert "device must be one of" in capsys.readouterr().err
