"""The files a stream simulation reads and writes in its run folder, the same for either engine.

:func:`streamc.sim.runner.simulate` writes ``config.txt`` and ``frames.bin``; the engine (the C++ harness
``stream_harness.cpp``, which spells these names itself, or the cocotb test :mod:`streamc.sim.stream_tb`)
writes the outputs and ``result.json``, which the runner reads. Beats are little-endian 32-bit words
(:mod:`streamc.sim.beats`), the frames' beats one after another.

``config.txt`` has one ``key value`` line per setting: ``in_words``, ``out_words`` (words per beat),
``in_beats_per_frame``, ``out_beats_per_frame``, ``frames``, ``full_rate_frames``, ``seed`` (0 to
2**64 - 1), ``input_gap_prob``, ``output_stall_prob``, ``randomized_budget``, ``full_rate_budget``
(cycle budgets of the two phases) and ``reset_cycles``.

``result.json`` holds ``phase`` (the last phase run, ``randomized`` or ``full_rate``), ``failure``
(``null``, ``"timeout"`` when the phase's budget ran out, ``"surplus"`` when an output beat came after
the last one expected), ``cycles`` (after reset, both phases), ``inputs_accepted`` and
``outputs_received`` (in the last phase), ``randomized_cycles``, ``full_rate_cycles``,
``frame_end_cycles`` (the cycle of each full-rate frame's last output beat), ``first_input_cycle`` and
``first_output_cycle`` (of the full-rate phase).

While it runs, the C++ harness prints to its log (``sim.log``) a line ``streamc-progress FRAMES CYCLES``
about twice a second and at the end of each phase: the frames that came out whole in the randomized run so
far, and the cycles simulated after reset. The cocotb engine prints none.
"""

import re

from pathlib import Path

CONFIG = "config.txt"
FRAMES = "frames.bin"
OUTPUTS = "outputs.bin"
RERUN_OUTPUTS = "rerun_outputs.bin"
RESULT = "result.json"
LOG = "sim.log"
PROGRESS = "streamc-progress"
_PROGRESS_LINE = re.compile(rf"^{PROGRESS} (\d+) (\d+)$", re.MULTILINE)


def write_config(path: Path, config: dict[str, int | float]) -> None:
    path.write_text("".join(f"{key} {value!r}\n" for key, value in config.items()))


def read_config(path: Path) -> dict[str, int | float]:
    config = {}
    for line in path.read_text().splitlines():
        key, value = line.split()
        config[key] = float(value) if "." in value or "e" in value else int(value)
    return config


def last_progress(log_text: str) -> tuple[int, int] | None:
    """The frames and cycles of the last progress line in ``log_text``, if it has one."""
    lines = _PROGRESS_LINE.findall(log_text)
    return (int(lines[-1][0]), int(lines[-1][1])) if lines else None
