"""Progress of the long steps, from a real build of the demo through Verilator: the planner's search and the
frames and cycles simulated, as a rich spinner on a terminal and as plain lines (no ANSI codes) elsewhere."""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml
from rich.console import Console

from streamc.pipeline.runner import run_build
from streamc.progress import report, showing

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "build_configs" / "models"
FRAMES = 100


def _build(folder: Path, *, terminal: bool, fresh: bool = False) -> tuple[str, dict]:
    config = yaml.safe_load((ROOT / "build_configs" / "digits.yaml").read_text())
    config.update(model=str(MODELS / "digits_mlp.onnx"), output_dir=str(folder / "out"),
                  steps=["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
                  verify={"inputs": str(MODELS / "digits_frames.npy"), "frames": FRAMES})
    (folder / "build.yaml").write_text(yaml.safe_dump(config))
    text = io.StringIO()
    state = run_build(folder / "build.yaml", console=Console(file=text, force_terminal=terminal, width=132),
                      fresh=fresh)
    return text.getvalue(), state.rtlsim


def test_the_demo_build_shows_its_search_and_its_frames_and_cycles(tmp_path):
    # The second build reruns every step, reusing the first's Verilator model.
    plain, report_plain = _build(tmp_path, terminal=False)
    shown, report_shown = _build(tmp_path, terminal=True, fresh=True)

    assert "\x1b" not in plain
    lines = plain.splitlines()
    assert f"sim: {FRAMES} of {FRAMES} frames, {report_plain['simulated_cycles']:,} cycles" in lines
    # a step's first report is printed at once (a live display may replace a report shorter than its refresh)
    assert "sim: building the Verilator model, or reusing its last build" in lines
    sim = [line for line in lines if line.startswith("sim: ")]
    assert len(sim) == len(set(sim))
    fold = [line for line in lines if line.startswith("fold: ")]
    assert fold and all(re.fullmatch(r"fold: at [\d,]+ cycles/frame, folding \d+: [\d,]+ .*LUTs.*", line)
                        for line in fold)

    assert "\x1b[" in shown  # a live display, drawn and cleared
    assert f"{FRAMES} of {FRAMES} frames, {report_shown['simulated_cycles']:,} cycles" in shown


def test_plain_lines_come_at_most_one_an_interval_and_the_last_at_the_end():
    text = io.StringIO()
    console = Console(file=text, force_terminal=False)
    with showing(console, "step", interval=3600):
        for count in range(5):
            report(f"{count} done")
    assert text.getvalue().splitlines() == ["step: 0 done", "step: 4 done"]
    report("nobody listens")
    assert text.getvalue().splitlines() == ["step: 0 done", "step: 4 done"]
