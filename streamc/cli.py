"""``streamc`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .errors import StreamcError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamc", description="Quantized ONNX to streaming Verilog accelerators")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile, simulate and synthesize as a build config says")
    build.add_argument("config", type=Path, help="the build configuration (YAML)")
    args = parser.parse_args(argv)

    console = Console()
    from .build.runner import run_build

    try:
        state = run_build(args.config, console=console)
    except StreamcError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    sim = state.rtlsim
    if sim is not None and (sim["mismatches"] or sim.get("expected_mismatches")):
        console.print("[red]verification failed: the hardware does not match the model[/red]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
