"""streamc from Python: compile a model into an :class:`Accelerator`, predict what its hardware computes,
simulate it in Verilator, synthesize it, or put it in an Amaranth design.

Every method runs the build's own step functions (:mod:`streamc.pipeline.steps`) on one build state, as
``streamc build`` does: one pipeline, the same checks, the same one-line :mod:`streamc.errors`.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console

from .errors import BuildError, ConfigError
from .pipeline.config import FOLDING_MODES, BuildConfig, config_from_mapping, load_config
from .pipeline.runner import run_through, steps_through
from .pipeline.steps import STEP_FUNCTIONS, TOP, BuildState, accelerator_top, folding_of, model_frames
from .pipeline.summary import print_design, print_estimates, print_results
from .pipeline.verdict import verification_failure
from .sweep import SweepResult, run_sweep

__all__ = ["Accelerator", "Simulation", "SweepResult", "compile", "run_sweep"]

def compile(model: str | Path | None = None, *, config: str | Path | None = None, device: str | None = None,
            **keys) -> Accelerator:
    """Compile a model through the fold step: its stages, folding, cycles and resource estimates.

    Parameters
    ----------
    model
        The ONNX file (the ``model`` key).
    config
        A build configuration (YAML) to start from; keywords override its keys, and a keyword giving one
        of ``target_fps``, ``budget`` or ``folding`` replaces the file's choice among them.
    device
        One device, for ``devices=[device]``.
    **keys
        Any key of the build configuration (:class:`~streamc.pipeline.config.BuildConfig`), paths
        relative to the current folder. ``output_dir`` defaults to a new temporary folder. ``steps`` is not
        taken: the methods run the later steps when asked.

    Raises
    ------
    StreamcError
        As ``streamc build`` reports it: a bad key or value, an unsupported model, an unreachable target.
    """
    if device is not None:
        if "devices" in keys:
            raise ConfigError("give device (one device) or devices (a list), not both")
        keys["devices"] = [device]
    if "steps" in keys:
        raise ConfigError("steps: compile runs the steps through fold; write_verilog, simulate and build run the "
                          "others when called")
    if model is not None:
        keys["model"] = model
    raw = load_config(config).model_dump(exclude_unset=True) if config is not None else {}
    if any(key in keys for key in FOLDING_MODES):
        raw = {key: value for key, value in raw.items() if key not in FOLDING_MODES}
    raw.update(keys)
    raw.setdefault("output_dir", tempfile.mkdtemp(prefix="streamc-"))
    # Through fold only: the load step then reads no verification data, which simulate takes as arguments.
    raw["steps"] = steps_through("fold")
    source = f"streamc.compile(config={str(config)!r})" if config is not None else "streamc.compile()"
    built = config_from_mapping(raw, base=Path.cwd(), source=source)
    return Accelerator(run_through(built, Path(config or "."), "fold"))


@dataclass
class Simulation:
    """One Verilator run of :meth:`Accelerator.simulate`.

    Attributes
    ----------
    outputs
        The model's outputs: the simulated hardware's integers through the host tail.
    hardware
        The hardware's output integers, ``(N, out_count)`` in stream order.
    report
        What ``reports/rtlsim.json`` holds: mismatches, measured and predicted cycles/frame, latency, ...
    failure
        How the hardware differs from the model, as ``streamc build`` says it; None when it does not.
    """

    outputs: np.ndarray
    hardware: np.ndarray
    report: dict
    failure: str | None


class Accelerator:
    """A folded design (from :func:`compile`): predict, simulate, write Verilog, build, embed."""

    def __init__(self, state: BuildState):
        self._state = state

    @property
    def config(self) -> BuildConfig:
        return self._state.config

    @property
    def dataflow(self):
        """The :class:`~streamc.hw.Dataflow`: host head, hardware stages, host tail."""
        return self._state.dataflow

    @property
    def stages(self) -> list:
        return self.dataflow.stages

    @property
    def folding(self) -> dict[str, dict]:
        """The folding, as a config's ``folding`` takes it (``compile(..., folding=acc.folding)`` pins it)."""
        return folding_of(self.dataflow)

    @property
    def cycles_per_frame(self) -> int:
        return self.dataflow.cycles_per_frame()

    @property
    def clock_mhz(self) -> float:
        """The clock the design is pipelined and planned for: the config's, or the planner's choice (``"auto"``)."""
        return self._state.clock_mhz

    @property
    def frames_per_second(self) -> float:
        return self.clock_mhz * 1e6 / self.cycles_per_frame

    @property
    def output_dir(self) -> Path:
        return self._state.folder.root

    def estimate(self) -> dict[str, dict]:
        """Estimated resources per device (LUT, FF, BRAM, DSP, ...), as the fold step prices the design."""
        return {device: dict(resources) for device, resources in self._state.resources.items()}

    def encode(self, frames) -> np.ndarray:
        """The host head: model inputs ``(N, *input shape)`` to the integer codes the hardware takes,
        ``(N, in_count)`` in stream order."""
        return self.dataflow.input_codes(self._frames(frames))

    def decode(self, hardware: np.ndarray) -> np.ndarray:
        """The host tail: the hardware's output integers ``(N, out_count)`` to the model's outputs."""
        return self.dataflow.outputs_of(np.asarray(hardware, dtype=np.int64).reshape(len(hardware), -1))

    @property
    def in_beats(self) -> int:
        """Input beats per frame: the first stage's input elements over its elements per beat."""
        first = self.stages[0]
        return first.in_count // first.in_elems

    @property
    def out_beats(self) -> int:
        """Output beats per frame."""
        last = self.stages[-1]
        return last.out_count // last.out_elems

    def input_beats(self, frames) -> list[int]:
        """The input stream of ``frames``: :attr:`in_beats` beats per frame, each the integer ``s_axis_tdata`` (or the
        component's ``i.payload``) carries, element ``j`` at bits ``[j*w, (j+1)*w)``."""
        from .sim.beats import pack_beats

        first = self.stages[0]
        return pack_beats(first.in_dtype.to_hw(self.encode(frames)), first.in_elems, first.in_dtype.bitwidth)

    def outputs_from_beats(self, beats: list[int]) -> np.ndarray:
        """The model's outputs from the accelerator's output beats (:attr:`out_beats` per frame), through the host tail."""
        from .sim.beats import unpack_beats

        last = self.stages[-1]
        elements = unpack_beats(list(beats), last.out_elems, last.out_dtype.bitwidth).astype(np.int64)
        return self.decode(last.out_dtype.from_hw(elements).reshape(-1, last.out_count))

    def predict(self, frames, *, hardware: bool = False) -> np.ndarray:
        """What the accelerator and the host compute for ``frames``, in the hardware's exact integer arithmetic.

        Returns the model's outputs, or with ``hardware`` the hardware's output integers ``(N, out_count)``
        in stream order. Frames go through in cache-sized batches on every core
        (:meth:`~streamc.hw.Dataflow.integers`).
        """
        integers = self.dataflow.integers(self._frames(frames))
        return integers if hardware else self.dataflow.outputs_of(integers)

    def write_verilog(self, folder: str | Path) -> Path:
        """Write the accelerator's Verilog, its ROM files and ``filelist.f`` into ``folder``; returns the
        Verilog file (top module ``streamc_top``, ports as the README describes)."""
        self._verilog()
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        source = self._state.folder.path("verilog", "filelist.f").parent
        for name in (source / "filelist.f").read_text().split() + ["filelist.f"]:
            shutil.copyfile(source / name, folder / name)
        return folder / f"{TOP}.v"

    def simulate(self, frames, *, expected=None, labels=None, check: bool = True,
                 scheduler: str | None = None) -> Simulation:
        """Stream ``frames`` through the Verilog in Verilator, with the build's random input gaps and output
        stalls (``verify`` keys), and judge the outputs as ``streamc build`` does.

        ``expected`` (the model's outputs from your framework) and ``labels`` are compared as
        ``verify.expected`` and ``verify.labels`` are. ``scheduler``: a Dask scheduler's address whose workers
        simulate a share of the frames each (``verify.shards``, default one per worker), as
        ``streamc build --scheduler`` does; by default ``verify.shards`` local processes.

        Raises
        ------
        BuildError
            With ``check``, when the hardware differs from the model (the CLI's verdict line).
        """
        self._verilog()
        state = self._state
        state.frames = self._frames(frames)
        count = len(state.frames)
        state.expected = None if expected is None else np.asarray(expected).reshape(count, -1)
        state.labels = None if labels is None else np.asarray(labels).reshape(-1)[:count]
        state.scheduler = scheduler
        STEP_FUNCTIONS["sim"](state)
        reports = state.folder.reports
        result = Simulation(outputs=np.load(reports / "rtlsim_outputs.npy"),
                            hardware=np.load(reports / "rtlsim_hw_outputs.npy"), report=state.rtlsim,
                            failure=verification_failure(state.rtlsim))
        if check and result.failure is not None:
            raise BuildError(f"verification failed: {result.failure} (see {reports / 'rtlsim.json'})")
        return result

    def build(self, board: str | None = None) -> dict:
        """Synthesize for every device of ``devices`` (Yosys) and, for a ``board`` (or the config's), place,
        route and make its bitstream (nextpnr). Returns ``{"synth": {device: report}, "pnr": report or None}``.

        A ``board`` that :func:`compile` was not given is planned for first: the fold step runs again so that the
        folding leaves the board's shell (UART, frame buffers) room on its device, which may change the folding."""
        if board is not None and board != self.config.board:
            raw = {**self.config.model_dump(exclude_unset=True), "board": board}
            self._state.config = config_from_mapping(raw, base=Path.cwd(), source=f"build(board={board!r})")
            STEP_FUNCTIONS["fold"](self._state)
            self._state.verilog = None
        self._verilog()
        STEP_FUNCTIONS["synth"](self._state)
        if self.config.board is not None:
            STEP_FUNCTIONS["pnr"](self._state)
        return {"synth": self._state.synth, "pnr": self._state.pnr}

    def component(self):
        """The accelerator as an Amaranth ``wiring.Component`` with ``amaranth.lib.stream`` ports ``i`` and ``o``
        (:class:`~streamc.rtl.component.AcceleratorComponent`); a new one on each call."""
        from .rtl.component import AcceleratorComponent

        return AcceleratorComponent(accelerator_top(self.dataflow, self.config.fifo_depth)[0])

    def __repr__(self) -> str:
        text = io.StringIO()
        console = Console(file=text, width=132, force_terminal=False, color_system=None)
        print_design(self._state, console)
        print_estimates(self._state, console)
        print_results(self._state, console)
        return text.getvalue().rstrip("\n")

    def _frames(self, frames) -> np.ndarray:
        return model_frames(np.asarray(frames), self._state.graphs["load"], key="frames")

    def _verilog(self) -> None:
        """The rtl step, once: simulate, build and write_verilog read its Verilog."""
        if self._state.verilog is None:
            STEP_FUNCTIONS["rtl"](self._state)
