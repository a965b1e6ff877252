"""``streamc`` command line.

Exit status: 0 when the build ran (and, with the ``sim`` step, the hardware matched the model),
1 when simulation found the hardware different from the model, 2 for an error streamc reports
(a bad config, an unsupported model, a failed tool run) and for bad command-line arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .errors import StreamcError

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2


def verification_failure(rtlsim: dict | None) -> str | None:
    """What went wrong in the simulation report, or ``None`` when the hardware matched (or did not run)."""
    if rtlsim is None:
        return None
    problems = []
    if rtlsim["mismatches"]:
        problems.append(f"{rtlsim['mismatches']} hardware outputs differ from the reference over "
                        f"{rtlsim['frames']} frames")
    if rtlsim.get("expected_mismatches"):
        problems.append(f"{rtlsim['expected_mismatches']} of {rtlsim['frames']} frames differ from verify.expected")
    return "; ".join(problems) or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamc", description="Quantized ONNX to streaming Verilog accelerators")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile, simulate and synthesize as a build config says")
    build.add_argument("config", type=Path, help="the build configuration (YAML)")
    build.add_argument("--fresh", action="store_true",
                       help="run every step, even those a previous build in output_dir completed from the same inputs")
    estimate = commands.add_parser("estimate", help="fold and estimate cycles and resources per stage, without RTL")
    estimate.add_argument("config", type=Path, help="the build configuration (YAML)")
    estimate.add_argument("--device", action="append", dest="devices", metavar="DEVICE",
                          help="a device to estimate for (repeatable; default: the config's devices)")
    args = parser.parse_args(argv)

    # Off a terminal (CI logs, pipes) rich assumes 80 columns and would cut the layer names.
    console = Console(width=None if sys.stdout.isatty() else 132)
    # Errors go to stderr unwrapped: one message, one line, whatever the terminal width.
    errors = Console(stderr=True, soft_wrap=True, highlight=False)
    if args.command == "estimate":
        return _estimate(args, console, errors)
    from .build.runner import run_build

    try:
        state = run_build(args.config, console=console, fresh=args.fresh)
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


def _estimate(args, console: Console, errors: Console) -> int:
    from .estimate import run_estimate

    try:
        report = run_estimate(args.config, device_names=args.devices)
    except StreamcError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_ERROR
    console.print(f"predicted {report['predicted_cycles_per_frame']} cycles per frame, "
                  f"{report['predicted_fps']:,.0f} frames/s at {report['clock_mhz']:g} MHz")
    for name, device in report["devices"].items():
        total, budget = device["total"], device["budget"]
        used = ", ".join(f"{key.upper()} {total[key]}/{budget[key]}" for key in ("lut", "ff", "bram", "dsp"))
        verdict = "fits" if device["fits"] else f"does not fit ({', '.join(device['over_budget'])})"
        console.print(f"{escape(name)}: {used}: {verdict}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
