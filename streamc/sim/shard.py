"""One shard of a stream simulation: its share of the frames through a built model, in a run folder of its own.

:func:`streamc.sim.runner.simulate` cuts the frames into shards (one, unsharded) and runs each here, in local
processes or as a task on a Dask worker (:mod:`streamc.sim.cluster_shards`); a :class:`Shard` carries all a
run needs, so any machine with the built model can run it. While the engine runs, its log is read for the
progress lines the C++ harness prints (:data:`streamc.sim.run_files.PROGRESS`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streamc.errors import BuildError
from streamc.rtl.rom_files import copy_rom_files
from streamc.tool_phases import LogTail

from . import run_files
from .beats import unpack_words
from .toolchain import last_line

_PHASES = {"randomized": "random gaps and back-pressure", "full_rate": "full rate"}
#: Seconds between two reads of a running engine's log for its progress lines.
POLL_S = 0.25


@dataclass(frozen=True)
class Geometry:
    """The frames and beats of the two phases of a run."""

    frames: int
    in_beats: int
    out_beats: int
    full_rate_frames: int
    timeout_cycles: int | None

    def frame_count(self, phase: str) -> int:
        return self.frames if phase == "randomized" else self.full_rate_frames

    def budget(self, phase: str) -> int:
        """The phase's cycle budget: by default 1000 + 50 per beat."""
        return self.timeout_cycles or 1000 + 50 * self.frame_count(phase) * (self.in_beats + self.out_beats)

    def failure(self, result: dict) -> str:
        """What went wrong in the failed phase of an engine's ``result``, and how far it got."""
        phase = result["phase"]
        frames = self.frame_count(phase)
        inputs, outputs = frames * self.in_beats, frames * self.out_beats
        if result["failure"] == "timeout":
            detail = (f"did not finish within {self.budget(phase)} cycles: {result['inputs_accepted']} of {inputs} "
                      f"input beats accepted, {result['outputs_received']} of {outputs} output beats received")
        else:
            detail = f"more than the {outputs} output beats expected arrived"
        whole = result["outputs_received"] // self.out_beats
        return f"{_PHASES[phase]}, {frames} frames ({whole} came out whole): {detail}"


@dataclass(frozen=True)
class Shard:
    """A share of the frames as its run folder needs them.

    Attributes
    ----------
    index
        The shard's place among all (0 when unsharded).
    first_frame, last_frame
        Its frames' positions in the whole set.
    words
        Its input beats, packed (:func:`streamc.sim.beats.pack_words`).
    config
        What ``config.txt`` holds for it (:mod:`streamc.sim.run_files`).
    geometry
        Its phases' frames and beats, for the messages of a failed run.
    out_elems, out_width, n_out
        How the output words unpack: elements per beat, bits per element, elements per frame.
    """

    index: int
    first_frame: int
    last_frame: int
    words: np.ndarray
    config: dict
    geometry: Geometry
    out_elems: int
    out_width: int
    n_out: int


@dataclass
class ShardOutput:
    """What one shard's run produced: its raw outputs (randomized run and full-rate re-run) and ``result.json``."""

    outputs: np.ndarray
    rerun_outputs: np.ndarray
    result: dict


#: Called with a shard's frames simulated so far (whole output frames of its randomized run) and cycles.
Progress = Callable[[int, int], None]


def run_shard(shard: Shard, run, built, *, top: str, verilog: Path, run_dir: Path, timeout_s: float | None,
              progress: Progress | None = None, sharded: bool = False) -> ShardOutput:
    """``shard`` through the model ``built`` with the engine's ``run`` in ``run_dir`` (the ROM files copied
    there from beside ``verilog``); ``sharded`` names the shard in error messages.

    Raises
    ------
    BuildError
        If the run ends without a result or fails (a deadlock that exhausts the cycle budget, a surplus beat).
    """
    where = f" (shard {shard.index}: frames {shard.first_frame}-{shard.last_frame})" if sharded else ""
    _prepare_run(run_dir, verilog=verilog, words=shard.words, config=shard.config)
    with _following(run_dir / run_files.LOG, progress):
        log_path, _ = run(built, top=top, run_dir=run_dir, timeout_s=timeout_s)
    result_path = run_dir / run_files.RESULT
    if not result_path.exists():
        raise BuildError(f"simulation of {top!r} ended without a result{where}: {last_line(log_path)}; "
                         f"see {log_path}")
    result = json.loads(result_path.read_text())
    if result["failure"] is not None:
        raise BuildError(f"simulation of {top!r} failed after {result['cycles']} cycles{where}: "
                         f"{shard.geometry.failure(result)}")

    def outputs_of(name: str) -> np.ndarray:
        words = np.fromfile(run_dir / name, dtype="<u4")
        return unpack_words(words, shard.out_elems, shard.out_width).reshape(-1, shard.n_out)

    return ShardOutput(outputs_of(run_files.OUTPUTS), outputs_of(run_files.RERUN_OUTPUTS), result)


def _prepare_run(run_dir: Path, *, verilog: Path, words: np.ndarray, config: dict) -> None:
    """The run folder with the input beats, the configuration and the ROM files, and no earlier run's results."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (run_files.OUTPUTS, run_files.RERUN_OUTPUTS, run_files.RESULT, run_files.LOG):
        (run_dir / name).unlink(missing_ok=True)
    # The model reads its ROM files when it starts, from the folder it runs in.
    copy_rom_files(verilog, run_dir)
    words.tofile(run_dir / run_files.FRAMES)
    run_files.write_config(run_dir / run_files.CONFIG, config)


class _following:
    """While the block runs, pass each progress line the engine writes to ``log_path`` to ``progress``; the
    last ones once more after it, so a run shorter than the poll still reports its end."""

    def __init__(self, log_path: Path, progress: Progress | None):
        self.tail, self.progress = LogTail(log_path), progress
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        if self.progress is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.progress is not None:
            self.stop.set()
            self.thread.join()
            self._read()

    def _poll(self) -> None:
        while not self.stop.wait(POLL_S):
            self._read()

    def _read(self) -> None:
        counts = run_files.last_progress(self.tail.read())
        if counts is not None:
            self.progress(*counts)
