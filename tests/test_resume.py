"""Resumable builds: a build killed mid-step, run again, ends with the files of a build never interrupted;
a changed input reruns what it affects; files are never seen half-written."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from streamc.pipeline import steps
from streamc.pipeline.folder import BuildFolder, write_atomically
from streamc.pipeline.runner import run_build
from streamc.errors import BuildError

MODELS = Path(__file__).resolve().parents[1] / "build_configs" / "models"
TO_RTL = "[load, tidy, streamline, to_hw, fold, rtl]"
TO_FOLD = "[load, tidy, streamline, to_hw, fold]"
# Files whose bytes depend on the inputs only; the timing reports and the record differ run to run.
DETERMINISTIC = ["model_load.onnx", "model_tidy.onnx", "model_streamline.onnx", "reports/estimates.json",
                 "reports/folding.json", "verilog/filelist.f", "verilog/streamc_top.v"]


def write_config(folder: Path, *, steps_list: str = TO_RTL, clock_mhz: int = 30,
                 model: Path = MODELS / "digits_mlp.onnx") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "build.yaml"
    path.write_text(f"model: {model}\noutput_dir: out\nclock_mhz: {clock_mhz}\ntarget_fps: 50000\n"
                    f"steps: {steps_list}\n")
    return path


def build(config: Path, **options) -> str:
    """Run the build in this process; returns what it printed."""
    output = io.StringIO()
    run_build(config, console=Console(file=output, width=200), **options)
    return output.getvalue()


def files(root: Path) -> dict[str, bytes]:
    """Every file of a build folder but the runner's record (names relative to ``root``)."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and not path.relative_to(root).as_posix().startswith(".streamc/")}


def ran_steps(printed: str) -> list[str]:
    """The steps a build ran, from its progress lines ("fold       0.41 s")."""
    return re.findall(rf"\b({'|'.join(steps.STEP_FUNCTIONS)}) +\d+\.\d\d s\b", printed)


def recorded_steps(out: Path) -> list[str]:
    record = out / ".streamc" / "record.json"
    return [entry["name"] for entry in json.loads(record.read_text())["steps"]] if record.exists() else []


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {name: ((root / name).stat().st_mtime_ns, (root / name).stat().st_ino) for name in DETERMINISTIC}


def test_killed_build_resumes_to_the_same_files(tmp_path):
    reference = write_config(tmp_path / "reference")
    build(reference)
    expected = files(tmp_path / "reference" / "out")
    assert set(DETERMINISTIC) <= set(expected)

    config = write_config(tmp_path / "killed")
    out = tmp_path / "killed" / "out"
    command = [sys.executable, "-m", "streamc.cli", "build", str(config)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # The rtl step takes a second or more (Amaranth elaborates and writes the Verilog): kill it there.
    while "fold" not in recorded_steps(out):
        assert process.poll() is None, process.stderr.read().decode()
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    process.stderr.close()

    assert recorded_steps(out) == ["load", "tidy", "streamline", "to_hw", "fold"]
    killed = files(out)
    assert "reports/summary.json" not in killed
    # Whatever the killed build left under a final name is complete: the same bytes as the reference's.
    partial = {name for name in killed if name.endswith(".partial")}
    assert {name: data for name, data in killed.items() if name not in partial} == \
        {name: expected[name] for name in killed if name not in partial}

    resumed = subprocess.run(command, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("resuming after step fold\n")
    assert ran_steps(resumed.stdout) == ["rtl"]
    after = files(out)
    assert {name: after[name] for name in DETERMINISTIC} == {name: expected[name] for name in DETERMINISTIC}
    assert after.keys() == expected.keys()


def test_unchanged_build_runs_nothing_and_a_changed_one_reruns(tmp_path):
    config = write_config(tmp_path, steps_list=TO_FOLD)
    out = tmp_path / "out"
    build(config)
    before = {name: ((out / name).stat().st_mtime_ns, (out / name).stat().st_ino)
              for name in ("model_load.onnx", "reports/folding.json")}

    printed = build(config)
    assert printed.startswith("resuming after step fold: every step is complete, nothing to run\n")
    assert {name: ((out / name).stat().st_mtime_ns, (out / name).stat().st_ino) for name in before} == before
    assert (out / "reports" / "summary.json").is_file()

    estimates = (out / "reports" / "estimates.json").read_bytes()
    write_config(tmp_path, steps_list=TO_FOLD, clock_mhz=60)
    printed = build(config)
    assert printed.startswith("building from the start: the config changed since the previous build\n")
    assert json.loads((out / "reports" / "estimates.json").read_text())["clock_mhz"] == 60
    assert (out / "reports" / "estimates.json").read_bytes() != estimates


def test_changed_model_reruns_from_the_start(tmp_path):
    model = tmp_path / "model.onnx"
    shutil.copyfile(MODELS / "digits_mlp.onnx", model)
    config = write_config(tmp_path, steps_list="[load, tidy]", model=model)
    build(config)
    shutil.copyfile(MODELS / "digits_mlp_legacy.onnx", model)
    assert build(config).startswith("building from the start: the model changed since the previous build\n")


def test_fresh_runs_every_step(tmp_path):
    config = write_config(tmp_path, steps_list="[load, tidy]")
    build(config)
    printed = build(config, fresh=True)
    assert printed.startswith("building from the start (--fresh)\n")
    assert ran_steps(printed) == ["load", "tidy"]


def test_changed_output_redoes_its_step(tmp_path):
    config = write_config(tmp_path, steps_list=TO_FOLD)
    build(config)
    expected = files(tmp_path / "out")
    (tmp_path / "out" / "reports" / "folding.json").unlink()
    assert build(config).startswith("resuming after step to_hw; redoing step fold: its output "
                                    "'reports/folding.json' is missing\n")
    (tmp_path / "out" / "model_tidy.onnx").write_bytes(b"edited")
    assert build(config).startswith("resuming after step load; redoing step tidy: its output "
                                    "'model_tidy.onnx' changed since it was written\n")
    after = files(tmp_path / "out")
    assert {name: after[name] for name in expected if name in DETERMINISTIC} == \
        {name: data for name, data in expected.items() if name in DETERMINISTIC}


def test_ctrl_c_keeps_the_completed_steps(tmp_path, monkeypatch):
    config = write_config(tmp_path, steps_list=TO_FOLD)
    build(config)

    def interrupted(state):
        raise KeyboardInterrupt

    write_config(tmp_path, steps_list=TO_FOLD, clock_mhz=31)
    monkeypatch.setitem(steps.STEP_FUNCTIONS, "fold", interrupted)
    with pytest.raises(BuildError, match=r"^interrupted during step 'fold'; run the same command to resume "
                                         r"after step to_hw$"):
        build(config)
    out = tmp_path / "out"
    assert recorded_steps(out) == ["load", "tidy", "streamline", "to_hw"]
    # Neither this build nor the complete one before it may look finished now.
    assert not (out / "reports" / "summary.json").exists()
    assert not (out / "reports" / "folding.json").exists()

    monkeypatch.undo()
    assert build(config).startswith("resuming after step to_hw\n")
    assert json.loads((out / "reports" / "estimates.json").read_text())["clock_mhz"] == 31


def test_a_folder_in_use_is_refused(tmp_path):
    config = write_config(tmp_path, steps_list="[load]")
    with BuildFolder(tmp_path / "out").exclusive():
        with pytest.raises(BuildError, match=rf"^output_dir '{re.escape(str(tmp_path / 'out'))}' is in use by another "
                                             r"streamc build; wait for it to end or give another output_dir$"):
            build(config)
    assert "(steps: load " in build(config)  # the folder is free again


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        write_atomically(target, "not bytes")
    assert target.read_text() == "old"
    assert [path.name for path in tmp_path.iterdir()] == ["report.json"]
    write_atomically(target, b"new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_opening_a_folder_removes_leftover_temporaries(tmp_path):
    BuildFolder(tmp_path / "out")
    leftover = tmp_path / "out" / "verilog" / ".streamc_top.v.k2j3h.partial"
    leftover.parent.mkdir()
    leftover.write_text("half a module")
    BuildFolder(tmp_path / "out")
    assert not leftover.exists()
