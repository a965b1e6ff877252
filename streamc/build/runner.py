"""Run the configured steps in order, timing each, and summarize the build."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from .config import load_config
from .folder import BuildFolder
from .steps import STEP_FUNCTIONS, BuildState
from .summary import print_summary, summary_data


def run_build(config_path: Path, *, console: Console | None = None) -> BuildState:
    """Build what ``config_path`` asks for; returns the final state (see ``state.rtlsim`` for the verdict)."""
    console = console or Console()
    config = load_config(config_path)
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    timings: dict[str, float] = {}
    for name in config.steps:
        start = time.perf_counter()
        with console.status(f"[bold]{name}[/bold]"):
            STEP_FUNCTIONS[name](state)
        timings[name] = round(time.perf_counter() - start, 3)
        console.log(f"{name:<10} {timings[name]:8.2f} s")
    state.folder.write_report("time_per_step", timings)
    state.folder.write_report("summary", summary_data(state, timings))
    print_summary(state, timings, console)
    return state
