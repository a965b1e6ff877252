"""One sweep point: its build, run where a Dask worker calls :func:`run_point`, and its row of results.

The build is ``streamc build`` of the point's configuration (:func:`streamc.pipeline.runner.run_build`),
its console going to ``build.log`` beside it. Whatever the build raises ends the point, not the sweep:
the row says ``failed`` with the error's first line, and carries the figures the build's reports hold
so far (an estimate survives a failed synthesis; a placement that missed timing still has its fmax).
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from rich.console import Console

from ..errors import StreamcError
from ..pipeline.config import load_config
from ..pipeline.runner import run_build
from ..pipeline.verdict import verification_failure

PASSED, FAILED = "passed", "failed"


def run_point(config_path: str) -> dict:
    """Build the point whose configuration is ``config_path``; returns its row (see :func:`measurements`)
    with ``status``, ``error`` (one line, or None) and ``seconds``."""
    config_path = Path(config_path)
    started = time.perf_counter()
    error = None
    with (config_path.parent / "build.log").open("w") as log:
        console = Console(file=log, width=132, force_terminal=False, color_system=None)
        try:
            state = run_build(config_path, console=console)
            failure = verification_failure(state.rtlsim)
            if failure is not None:
                error = f"verification failed: {failure}"
        except StreamcError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 -- a streamc bug in one point must not end the sweep
            log.write(traceback.format_exc())
            error = f"{type(exc).__name__}: {exc} (a streamc bug; traceback in {log.name})"
    row = measurements(config_path)
    first_line = error.strip().splitlines()[0] if error else None
    return {**row, "status": FAILED if error else PASSED, "error": first_line,
            "seconds": round(time.perf_counter() - started, 2)}


def measurements(config_path: Path) -> dict:
    """What the point's reports say: cycles/frame and frames/s, the first device's LUT/FF/BRAM/DSP (from Yosys
    where the synth step ran, else the estimate), and the fmax and placement seed where the pnr step ran."""
    config = load_config(config_path)
    reports = config.output_dir / "reports"
    device = config.devices[0] if config.devices else None
    row = {"clock_mhz": None if config.clock_mhz == "auto" else config.clock_mhz, "cycles_per_frame": None, "frames_per_second": None, "device": device, "resources_from": None,
           "lut": None, "ff": None, "bram": None, "dsp": None, "fmax_mhz": None, "seed": None}
    estimates = _report(reports / "estimates.json")
    if estimates is not None:
        cycles = estimates["predicted_cycles_per_frame"]
        # The clock the fold step planned for: the config's, or the one it chose (auto).
        row.update(clock_mhz=estimates["clock_mhz"], cycles_per_frame=cycles,
                   frames_per_second=round(estimates["clock_mhz"] * 1e6 / cycles, 1))
        if device in estimates["resources"]:
            row.update(resources_from="estimate", **_resources(estimates["resources"][device]))
    synth = _report(reports / f"synth_{device}.json") if "synth" in config.steps else None
    if synth is not None:
        row.update(resources_from="yosys", **_resources(synth))
    pnr = _report(reports / f"pnr_{config.board}.json") if "pnr" in config.steps else None
    if pnr is not None:
        row.update(fmax_mhz=pnr["fmax_mhz"], seed=pnr["seed"])
    return row


def _resources(report: dict) -> dict:
    return {key: report[key] for key in ("lut", "ff", "bram", "dsp")}


def _report(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
