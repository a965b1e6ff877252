"""``streamc`` command line.

Exit status: 0 when the build ran (and, with the ``sim`` step, the hardware matched the model),
1 when simulation found the hardware different from the model, 2 for an error streamc reports
(a bad config, an unsupported model, a failed tool run) and for bad command-line arguments.
``streamc sweep`` exits 0 when the sweep ran, its failed points included (each is a row of sweep.csv).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import StreamcError
from .protocol import DEFAULT_BAUD

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamc", description="Quantized ONNX to streaming Verilog accelerators")
    parser.add_argument("--version", action="version", version=f"streamc {importlib.metadata.version('streamc')}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    # --debug after the subcommand too; SUPPRESS keeps the subcommand from resetting one given before it.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the Python traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True,
                                     parser_class=lambda **kwargs: argparse.ArgumentParser(parents=[debug], **kwargs))
    build = commands.add_parser("build", help="compile, simulate and synthesize as a build config says")
    build.add_argument("config", type=Path, help="the build configuration (YAML)")
    build.add_argument("--fresh", action="store_true",
                       help="run every step, even those a previous build in output_dir completed from the same inputs")
    build.add_argument("--scheduler", metavar="ADDRESS",
                       help="a Dask scheduler, e.g. tcp://HOST:8786, whose workers simulate the verification frames, "
                            "a share each (verify.shards, default one per worker; default: local processes)")
    estimate = commands.add_parser("estimate", help="fold and estimate cycles and resources per stage, without RTL")
    estimate.add_argument("config", type=Path, help="the build configuration (YAML)")
    estimate.add_argument("--device", action="append", dest="devices", metavar="DEVICE",
                          help="a device to estimate for (repeatable; default: the config's devices)")
    sweep = commands.add_parser("sweep", help="build many points of a grid of build-config values on Dask")
    sweep.add_argument("sweep_file", type=Path, help="the sweep file (YAML): base, output_dir, until, grid/points")
    cluster = sweep.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="an existing Dask scheduler, e.g. tcp://HOST:8786 (default: a local cluster)")
    cluster.add_argument("--workers", type=int, metavar="N",
                         help="worker processes of the local cluster (default: one per core)")
    sweep.add_argument("--fresh", action="store_true",
                       help="build every point, even those an earlier run finished from the same inputs")
    run = commands.add_parser("run", help="classify frames on a board, or on its simulation with --sim")
    run.add_argument("config", type=Path, help="the build configuration (YAML) the board's bitstream was built from")
    run.add_argument("frames", type=Path, help="model inputs (.npy), shape (N, *the model's input shape)")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="the board's serial port, e.g. /dev/ttyUSB1")
    where.add_argument("--sim", action="store_true",
                       help="talk to the board shell and accelerator in Verilator instead of a board")
    run.add_argument("--board", help="the board the bitstream is for (checked against the config's board)")
    run.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                     help=f"the UART rate of the bitstream (default {DEFAULT_BAUD})")
    run.add_argument("--output", type=Path, help="save the model outputs to this .npy file")
    run.add_argument("--work-dir", type=Path,
                     help="scratch folder for the design and the Verilator build (default: OUTPUT_DIR/board_run)")
    quantize = commands.add_parser("quantize", help="post-training quantization of a float ONNX model to QONNX "
                                                    "(docs/quantize.md)")
    quantize.add_argument("model", type=Path, help="the float ONNX model")
    quantize.add_argument("--calibration", type=Path, required=True,
                          help="calibration frames (.npy), shape (N, *the model's input shape)")
    quantize.add_argument("--test", type=Path, help="frames (.npy) to compare float and quantized on "
                                                    "(default: the calibration frames)")
    quantize.add_argument("--labels", type=Path, help="labels (.npy) of the frames compared: report accuracy too")
    quantize.add_argument("--bits", choices=["w8a8", "w4a4"], help="weight and activation bits (default w8a8)")
    quantize.add_argument("--constraints", type=Path, help="per-tensor constraints (YAML, docs/quantize.md)")
    quantize.add_argument("--scales", choices=["auto", "pow2", "float"],
                          help="power-of-two scales (8-bit layers requantize with a shift, not a multiply) "
                               "everywhere, nowhere, or auto: wherever they stay within the tolerance of float "
                               "scales (default auto)")
    quantize.add_argument("--pow2", dest="scales", action="store_const", const="pow2", help="--scales pow2")
    quantize.add_argument("--tolerance", type=float,
                          help="percentage points of accuracy auto may lose against float scales (default 0.5)")
    quantize.add_argument("--tolerance-db", type=float,
                          help="without labels: dB of output SQNR auto may lose against float scales (default 3)")
    quantize.add_argument("--device", help="choose each layer's bits from 2, 4, 8 to fit this device "
                                           "(with --target-fps), e.g. ice40-up5k")
    quantize.add_argument("--target-fps", type=float, help="the frame rate the bit-width search plans for")
    quantize.add_argument("--clock-mhz", type=float, default=100.0, help="the clock of that plan (default 100)")
    quantize.add_argument("-o", "--output", type=Path, required=True, help="the QONNX model to write")
    ops = commands.add_parser("ops", help="list every op streamc reads, its dialects and limits (docs/ops.md)")
    ops.add_argument("--markdown", action="store_true", help="print the listing as docs/ops.md holds it")
    args = parser.parse_args(argv)

    # Off a terminal (CI logs, pipes) rich assumes 80 columns and would cut the layer names.
    console = Console(width=None if sys.stdout.isatty() else 132)
    # Errors go to stderr unwrapped: one message, one line, whatever the terminal width.
    errors = Console(stderr=True, soft_wrap=True, highlight=False)
    if args.command == "ops":
        return _ops(args, console)
    if args.command == "estimate":
        return _estimate(args, console, errors)
    if args.command == "run":
        return _run(args, console, errors)
    if args.command == "sweep":
        return _sweep(args, console, errors)
    if args.command == "quantize":
        return _quantize(args, console, errors)
    from .pipeline.runner import run_build
    from .pipeline.verdict import verification_failure

    try:
        state = run_build(args.config, console=console, fresh=args.fresh, scheduler=args.scheduler)
    except StreamcError as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    except OSError as exc:
        # A full disk, a folder without write permission: the system's message names the file.
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    failure = verification_failure(state.rtlsim)
    if failure is not None:
        errors.print(f"[red]verification failed:[/red] {escape(failure)} "
                     f"(see {escape(str(state.folder.reports / 'rtlsim.json'))})")
        return EXIT_MISMATCH
    return EXIT_OK


def _ops(args, console: Console) -> int:
    from .op_catalog import markdown, role_meanings, supported_ops

    if args.markdown:
        sys.stdout.write(markdown())
        return EXIT_OK
    table = Table(title="Ops streamc reads (docs/ops.md)", title_justify="left")
    for column in ("op", "domain", "dialects", "in the design", "limits"):
        table.add_column(column, no_wrap=column != "limits")
    for entry in supported_ops():
        table.add_row(entry.name, "\n".join(entry.domains), ", ".join(entry.dialects), ", ".join(entry.roles),
                      entry.limits)
    console.print(table)
    for role, meaning in role_meanings().items():
        console.print(f"[bold]{role}[/bold]: {meaning}")
    return EXIT_OK


def _estimate(args, console: Console, errors: Console) -> int:
    from .estimate import run_estimate

    try:
        report = run_estimate(args.config, device_names=args.devices)
    except StreamcError as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    console.print(f"predicted {report['predicted_cycles_per_frame']} cycles per frame, "
                  f"{report['predicted_fps']:,.0f} frames/s at {report['clock_mhz']:g} MHz"
                  + (" (clock_mhz auto: chosen)" if report["clock_chosen"] else ""))
    for name, device in report["devices"].items():
        total, budget = device["total"], device["budget"]
        used = ", ".join(f"{key.upper()} {total[key]}/{budget[key]}" for key in ("lut", "ff", "bram", "dsp"))
        if "logic_cells" in device:
            used += f", logic cells {device['logic_cells']}/{budget['lut']}"
        verdict = "fits" if device["fits"] else f"does not fit ({', '.join(device['over_budget'])})"
        console.print(f"{escape(name)}: {used}: {verdict}")
    written = report["written"]
    charts = len(written["files"]) - 2
    console.print(f"Wrote {escape(str(Path(written['folder']) / 'estimate.md'))} (with estimate.json"
                  + (f" and {charts} charts" if charts else "") + " beside it)", soft_wrap=True)
    return EXIT_OK


def _run(args, console: Console, errors: Console) -> int:
    import numpy as np

    from .pipeline.config import load_config
    from .pipeline.folder import BuildFolder
    from .host import run_frames

    try:
        # In the build's folder, marked as streamc's, so that a build into it after this run accepts it.
        work_dir = args.work_dir or BuildFolder(load_config(args.config).output_dir).root / "board_run"
        outputs, board = run_frames(args.config, args.frames, port=args.port, sim=args.sim, baud=args.baud,
                                    board=args.board, work_dir=work_dir)
    except (StreamcError, OSError) as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    flat = outputs.reshape(len(outputs), -1)
    for index, row in enumerate(flat):
        console.print(f"frame {index}: class {int(np.argmax(row))}" if row.size > 1 else f"frame {index}: {row[0]:g}")
    if args.sim:
        for simulated in board.transport.runs:
            console.print(f"simulated {simulated.cycles:,} cycles in {simulated.seconds:.1f} s: sent "
                          f"{simulated.sent} bytes, received {simulated.received}")
    if args.output is not None:
        np.save(args.output, outputs)
    return EXIT_OK


def _sweep(args, console: Console, errors: Console) -> int:
    from .sweep import run_sweep

    try:
        run_sweep(args.sweep_file, scheduler=args.scheduler, workers=args.workers, fresh=args.fresh, console=console)
    except (StreamcError, OSError) as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    return EXIT_OK


def _quantize(args, console: Console, errors: Console) -> int:
    from .ptq import quantize

    try:
        report = quantize(args.model, args.calibration, args.output, test=args.test, labels=args.labels,
                          bits=args.bits, constraints=args.constraints, scales=args.scales,
                          tolerance=args.tolerance, tolerance_db=args.tolerance_db, device=args.device,
                          target_fps=args.target_fps, clock_mhz=args.clock_mhz)
    except (StreamcError, OSError) as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    for line in report.lines():
        console.print(escape(line), soft_wrap=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
