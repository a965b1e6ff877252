"""Run a long tool with its output going to a log, and report from the log, as it grows, what the tool is doing:
Yosys' passes, nextpnr's packing, placement iterations, the arcs left to route and the fmax it found.

:func:`run_reporting` takes what ``subprocess.run(command, cwd=..., stdout=log, stderr=STDOUT, timeout=...)``
does and behaves the same (the exit status; on timeout the tool killed and :class:`subprocess.TimeoutExpired`
raised); each phase line goes to :func:`streamc.progress.report`, which the build shows beside its step.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .progress import report

#: Seconds between two reads of the log.
POLL_S = 0.5

Phase = Callable[[str], str | None]
_YOSYS_PASS = re.compile(r"^(\d+(?:\.\d+)*)\. Executing (\S+)")
_NEXTPNR = [
    (re.compile(r"^Info: Packing (.+?)\.*$"), "packing {0}"),
    (re.compile(r"^Info:\s+at initial placer iter (\d+), wirelen = (\d+)"),
     "initial placement, iteration {0}, wirelength {1}"),
    (re.compile(r"^Info:\s+at iteration #(\d+), type ALL: .*legal = (\d+)"),
     "analytic placement, iteration {0}, wirelength {1}"),
    (re.compile(r"^Info:\s+at iteration #(\d+): temp = \S+, timing cost = \d+, wirelen = (\d+)"),
     "annealing placement, iteration {0}, wirelength {1}"),
    (re.compile(r"^Info: Routing (\d+) arcs"), "routing {0} arcs"),
    (re.compile(r"^Info:\s+\d+ \|[^|]*\|[^|]*\|\s*(\d+)\|"), "routing, {0} arcs left"),
    (re.compile(r"^Info: Max frequency for clock\s+'([^']+)': ([\d.]+ MHz)"), "timing: {0} at most {1}"),
]


def no_phase(line: str) -> str | None:
    """For a tool whose log names no phases worth showing (a bitstream packer)."""
    return None


def yosys_phase(line: str) -> str | None:
    """``"pass 8.52: ABC9"`` for Yosys' line that starts a pass (``8.52. Executing ABC9 pass.``)."""
    found = _YOSYS_PASS.match(line)
    return f"pass {found[1]}: {found[2]}" if found else None


def nextpnr_phase(line: str) -> str | None:
    """What a line of nextpnr's log says it is doing (packing, placing, routing, timing), if it says."""
    for pattern, text in _NEXTPNR:
        found = pattern.match(line)
        if found:
            return text.format(*(f"{int(group):,}" if group.isdigit() else group for group in found.groups()))
    return None


def run_reporting(command: list[str], *, cwd: Path, log: IO, timeout: float | None, phase: Phase) -> int:
    """Run ``command`` in ``cwd`` with its output in ``log`` (an open file), reporting each line ``phase`` names;
    its exit status.

    Raises
    ------
    subprocess.TimeoutExpired
        After ``timeout`` seconds, the tool killed.
    """
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    deadline = None if timeout is None else time.monotonic() + timeout
    reader = _LogReader(Path(log.name), phase)
    while True:
        try:
            status = process.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            reader.read()
            if deadline is not None and time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise subprocess.TimeoutExpired(command, timeout) from None
    reader.read()
    return status


class LogTail:
    """The whole lines a tool has added to its log since the last read (it may be half way through writing one);
    nothing while the log does not exist yet."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> str:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                text = log.read()
        except FileNotFoundError:
            return ""
        end = text.rfind(b"\n") + 1
        self.offset += end
        return text[:end].decode(errors="replace")


class _LogReader:
    """The latest phase among the lines added to a log since the last read, reported."""

    def __init__(self, path: Path, phase: Phase):
        self.tail, self.phase = LogTail(path), phase

    def read(self) -> None:
        latest = None
        for line in self.tail.read().splitlines():
            latest = self.phase(line) or latest
        if latest is not None:
            report(latest)
