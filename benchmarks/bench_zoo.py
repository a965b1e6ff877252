"""Plan the model zoo (the networks users bring) for each device: time, cycles per frame, resources.

Run: python benchmarks/bench_zoo.py [--verilator] [--models PATTERN] [--devices DEVICE ...]
                                    [--timeout SECONDS]

For each model of ``tests/models/zoo`` (made by its ``make_zoo.py``) and each device, two plans:
at the model's ``target_fps`` (the cheapest folding that reaches it) and at ``budget: 0.5`` (the
fastest folding within half the device). Each row is one run of ``streamc estimate``'s
computation (``streamc.estimate.run_estimate``: the front end, the planner, the resource estimate
and its report with charts), timed once (no median: some take minutes), in a child process killed
after ``--timeout`` seconds; ``fold s`` is the planner's own share (the ``fold`` step, timed). A model streamc refuses shows the refusal's first line instead of figures (its
seconds: the front end and the planner until it refused).

With ``--verilator``, every row that planned is also built to RTL and simulated for 4 frames
(``streamc.pipeline.runner.run_build``, steps up to ``sim``, ``verify`` with the zoo's frames and
expected outputs): ``mismatches`` counts frames whose hardware output differs from streamc's own
reference, ``expected_mismatches`` those whose end-to-end output differs from the recorded
expected outputs (qonnx's executor, or the exact reference for the QDQ model).
"""

from __future__ import annotations

import argparse
import fnmatch
import multiprocessing
import tempfile
import time
import traceback
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "models" / "zoo"
#: Frames per second each model is planned for with ``target_fps``: what its application asks of
#: an edge accelerator (an image or a keyword a few times a second, a collider trigger much faster).
TARGET_FPS = {
    "mobilenet_v1_w025": 100, "resnet8": 100, "resnet8_ort_qdq": 100, "ds_cnn": 100,
    "autoencoder": 1_000, "jet_tagging_mlp": 100_000,
    # issue 24's 8-bit autoencoder: 1,000 cycles per frame at the ECP5's 100 MHz
    "autoencoder_8bit": 100_000, "autoencoder_8bit_qcdq": 100_000,
}
#: Clock each device is planned at: the iCEBreaker's UP5K closes timing near 30 MHz, the ECP5 near 100.
CLOCK_MHZ = {"ice40-up5k": 30, "ecp5-85f": 100}
DEVICES = tuple(CLOCK_MHZ)
BUDGET = 0.5
VERILATOR_FRAMES = 4
RESOURCES = ("lut", "ff", "bram", "dsp")


def _config(folder: Path, model: str, device: str, mode: dict, verify: bool) -> Path:
    config = {"model": str(ZOO / f"{model}.onnx"), "output_dir": str(folder / "out"), "devices": [device],
              "clock_mhz": CLOCK_MHZ[device], **mode}
    if verify:
        config["steps"] = ["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"]
        config["verify"] = {"inputs": str(ZOO / f"{model}_frames.npy"),
                            "expected": str(ZOO / f"{model}_expected.npy"), "frames": VERILATOR_FRAMES}
    path = folder / "build.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _first_line(exc: BaseException) -> str:
    from streamc.errors import StreamcError

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if isinstance(exc, StreamcError) else f"{type(exc).__name__}: {text}"


def _estimate_child(config_path: str, device: str, results) -> None:
    """Runs in a child process, so that a planner that runs on can be stopped."""
    start, fold = time.perf_counter(), {}
    try:
        from streamc.estimate import run_estimate

        _timing_fold(fold)
        start = time.perf_counter()  # the imports are not the planner's time
        report = run_estimate(Path(config_path))
        seconds = time.perf_counter() - start
        totals = report["devices"][device]
        results.put({"seconds": seconds, "fold_seconds": fold.get("fold"),
                     "cycles": report["predicted_cycles_per_frame"],
                     **{key: totals["total"][key] for key in RESOURCES}, "fits": totals["fits"],
                     "over": totals["over_budget"]})
    except BaseException as exc:  # noqa: BLE001 - the line is the result
        # how long the planner searched before refusing is part of the answer
        results.put({"error": _first_line(exc), "seconds": time.perf_counter() - start, "fold_seconds": fold.get("fold"),
                     "trace": traceback.format_exc()})


def _timing_fold(seconds: dict) -> None:
    """Time the build's ``fold`` step (the planner) wherever it runs in this process, into ``seconds``."""
    from streamc.pipeline.steps import STEP_FUNCTIONS

    fold = STEP_FUNCTIONS["fold"]

    def timed(state):
        start = time.perf_counter()
        try:
            fold(state)
        finally:
            seconds["fold"] = time.perf_counter() - start

    STEP_FUNCTIONS["fold"] = timed


def _verilator_child(config_path: str, results) -> None:
    try:
        from rich.console import Console

        from streamc.pipeline.runner import run_build

        start = time.perf_counter()
        report = run_build(Path(config_path), console=Console(quiet=True), fresh=True).rtlsim
        results.put({"sim_seconds": time.perf_counter() - start, "mismatches": report["mismatches"],
                     "expected_mismatches": report.get("expected_mismatches"),
                     "cycles_measured": report.get("measured_cycles_per_frame")})
    except BaseException as exc:  # noqa: BLE001
        results.put({"sim_error": _first_line(exc)})


def _in_child(target, args: tuple, timeout: float) -> dict:
    """``target(*args, queue)`` in a child process; a dict saying so if it runs past ``timeout`` seconds."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = time.perf_counter()
    process = context.Process(target=target, args=(*args, results))
    process.start()
    try:
        return results.get(timeout=timeout)
    except Exception:  # queue.Empty: still running, or died without a word
        alive = process.is_alive()
        if alive:
            process.kill()
        return {"timeout": f"stopped after {time.perf_counter() - start:.0f} s" if alive
                else f"died with exit code {process.exitcode}"}
    finally:
        process.join()


def run(models: list[str], devices: list[str], verilator: bool, timeout: float) -> list[dict]:
    rows = []
    for model in models:
        for device in devices:
            for label, mode in ((f"{TARGET_FPS[model]:,} fps", {"target_fps": TARGET_FPS[model]}),
                                (f"budget {BUDGET}", {"budget": BUDGET})):
                with tempfile.TemporaryDirectory() as scratch:
                    row = {"model": model, "device": device, "plan": label}
                    row.update(_in_child(_estimate_child, (str(_config(Path(scratch), model, device, mode, False)),
                                                           device), timeout))
                    if verilator and "cycles" in row:
                        config = _config(Path(scratch), model, device, mode, True)
                        row.update(_in_child(_verilator_child, (str(config),), timeout * 4))
                rows.append(row)
                print(_line(row, verilator), flush=True)
    return rows


HEADER = ["model", "device", "plan", "estimate s", "fold s", "cycles/frame", "LUT", "FF", "BRAM", "DSP", "fits"]
SIM_HEADER = ["sim s", "mismatches", "expected mismatches"]


def _cells(row: dict, verilator: bool) -> list[str]:
    cells = [row["model"], row["device"], row["plan"]]
    if "cycles" in row:
        fits = "yes" if row["fits"] else f"no ({', '.join(row['over'])})"
        fold = f"{row['fold_seconds']:.1f}" if row.get("fold_seconds") is not None else "-"
        cells += [f"{row['seconds']:.1f}", fold, f"{row['cycles']:,}", *(f"{row[key]:,}" for key in RESOURCES), fits]
    else:
        failure = row.get("error") or row.get("timeout")
        seconds = f"{row['seconds']:.1f}" if "seconds" in row else ""
        fold = f"{row['fold_seconds']:.1f}" if row.get("fold_seconds") is not None else ""
        cells += [seconds, fold, f"**{failure}**"] + [""] * 5
    if verilator:
        if "mismatches" in row:
            cells += [f"{row['sim_seconds']:.0f}", str(row["mismatches"]), str(row["expected_mismatches"])]
        else:
            cells += [row.get("sim_error") or row.get("timeout", "") if "cycles" in row else "", "", ""]
    return cells


def _line(row: dict, verilator: bool) -> str:
    return "| " + " | ".join(_cells(row, verilator)) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verilator", action="store_true", help=f"also simulate {VERILATOR_FRAMES} frames in Verilator")
    parser.add_argument("--models", default="*", help="fnmatch pattern over the zoo's model names")
    parser.add_argument("--devices", nargs="+", default=list(DEVICES), choices=DEVICES)
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before a plan is stopped (the Verilator run gets four times as long)")
    args = parser.parse_args()
    models = [name for name in TARGET_FPS if fnmatch.fnmatch(name, args.models)]
    if not models:
        parser.error(f"no zoo model matches {args.models!r}; the zoo has {', '.join(TARGET_FPS)}")
    header = HEADER + (SIM_HEADER if args.verilator else [])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    rows = run(models, args.devices, args.verilator, args.timeout)
    print(f"\n{sum('cycles' in row for row in rows)} of {len(rows)} plans made; each timed once "
          f"(front end, planner, estimate).")


if __name__ == "__main__":
    main()
