"""The bad-input corpus (tests/bad_inputs): every broken model, config or data file gets a one-line error.

Each case runs ``streamc.cli.main`` on a copy of its folder, with code generation and the external
tools stubbed out, under a time and memory limit (a case that hangs or allocates terabytes fails
instead of taking the machine with it). See tests/bad_inputs/cases.yaml for what is checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import resource
import shutil
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from streamc.pipeline import steps
from streamc.cli import main

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text())
NOT_CASES = {"cases.yaml", "make_corpus.py", "__pycache__"}
# Only a hang reaches this: the slowest case (the planner proving a model fits no folding) takes seconds,
# and a loaded 2-core machine some ten times that.
TIME_LIMIT_S = 900
MEMORY_HEADROOM = 3 << 30


def _load_make_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_corpus = _load_make_corpus()


class ExternalToolReached(AssertionError):
    """A bad input got as far as the simulator or synthesis: it should have been refused before."""


class CaseTimedOut(AssertionError):
    pass


@pytest.fixture
def no_tools(monkeypatch):
    """Code generation is skipped and reaching the simulator or Yosys fails the case.

    Every input error must surface before them; the verification-data cases list ``rtl`` and ``sim``
    only so that the sim step's own checks of ``verify`` files run.
    """
    import streamc.sim.runner
    import streamc.synth

    def reached(*args, **kwargs):
        raise ExternalToolReached("the build reached an external tool")

    monkeypatch.setitem(steps.STEP_FUNCTIONS, "rtl", lambda state: None)
    monkeypatch.setattr(streamc.sim.runner, "simulate", reached)
    monkeypatch.setattr(streamc.synth, "synthesize", reached)


def _virtual_memory_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


def run_limited(argv: list[str]) -> int:
    """``main(argv)``'s exit code, within TIME_LIMIT_S and a few GB more address space than now."""
    def timed_out(signum, frame):
        raise CaseTimedOut(f"streamc {' '.join(argv)} ran longer than {TIME_LIMIT_S} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _virtual_memory_bytes() + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    previous = signal.signal(signal.SIGALRM, timed_out)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.alarm(TIME_LIMIT_S)
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return exc.code
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, previous)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is: a symlink's target, a file's hash, or a folder."""
    tree = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            tree[key] = f"link {path.readlink()}"
        elif path.is_file():
            tree[key] = f"file {hashlib.sha256(path.read_bytes()).hexdigest()}"
        else:
            tree[key] = "folder"
    return tree


def changes(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def outside(paths: set[str], folder: str) -> set[str]:
    return {p for p in paths if p != folder and not p.startswith(folder + "/")}


def case_params() -> list:
    params = []
    for entry in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=entry["xfail"])] if "xfail" in entry else []
        params.append(pytest.param(entry, id=entry["name"], marks=marks))
    return params


@pytest.mark.parametrize("entry", case_params())
def test_bad_input(entry, tmp_path, monkeypatch, capsys, no_tools):
    work = tmp_path / "work"
    case = work / entry["name"]
    shutil.copytree(CORPUS / entry["name"], case, symlinks=True)
    # Anything the build writes by a relative path lands in the snapshot too.
    monkeypatch.chdir(case)
    output = f"{entry['name']}/{entry.get('output', 'out')}"
    command, config = entry["command"].split()
    before = snapshot(work)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = run_limited([command, str(case / config)])
    err = capsys.readouterr().err

    assert code == entry["exit"], err
    pattern = entry["error"].replace("{case}", re.escape(str(case)))
    assert re.fullmatch(f"error: {pattern}\n", err), err
    assert [str(w.message) for w in caught] == []
    changed = changes(before, snapshot(work))
    assert not outside(changed, output), f"written outside {output}: {sorted(outside(changed, output))}"
    summary = work / output / "reports" / "summary.json"
    # A step that failed leaves the summary of what ran, saying so; a build refused before its steps, none.
    assert not summary.exists() or json.loads(summary.read_text())["failed"]["error"] in err, "a summary not saying it failed"


def test_corpus_covers_the_manifest():
    folders = {p.name for p in CORPUS.iterdir()} - NOT_CASES
    names = [entry["name"] for entry in CASES]
    assert len(names) == len(set(names))
    assert folders == set(names) == set(make_corpus.CASES)
    assert len(names) >= 30


def test_corpus_is_what_make_corpus_writes(tmp_path):
    make_corpus.main(tmp_path)
    committed = {k: v for k, v in snapshot(CORPUS).items()
                 if k.split("/")[0] not in NOT_CASES}
    assert snapshot(tmp_path) == committed


@pytest.mark.parametrize("model", [make_corpus.mlp(), make_corpus.cnn()], ids=["mlp", "cnn"])
def test_the_models_cases_break_build_cleanly(model, tmp_path, capsys, no_tools):
    """Each case breaks one thing in one of these: they must build, so that the one thing is the cause."""
    make_corpus.model_case(tmp_path, model)
    assert run_limited(["build", str(tmp_path / "build.yaml")]) == 0
    assert capsys.readouterr().err == ""
    assert (tmp_path / "out" / "reports" / "summary.json").is_file()


def test_valid_verification_data_reaches_the_simulator(tmp_path, no_tools):
    """The verification-data cases differ from this build only in their broken file."""
    frames = make_corpus.FRAMES
    expected = np.zeros((len(frames), 1, 2), np.float32)
    make_corpus.verify_case(tmp_path, "{inputs: frames.npy, expected: expected.npy, labels: labels.npy}",
                            {"frames.npy": frames, "expected.npy": expected,
                             "labels.npy": np.zeros(len(frames), np.int64)})
    with pytest.raises(ExternalToolReached):
        run_limited(["build", str(tmp_path / "build.yaml")])


def test_snapshot_sees_what_changed_outside_the_output_folder(tmp_path):
    (tmp_path / "case" / "out").mkdir(parents=True)
    (tmp_path / "case" / "model.onnx").write_bytes(b"model")
    before = snapshot(tmp_path)
    (tmp_path / "case" / "out" / "report.json").write_text("{}")
    (tmp_path / "case" / "model.onnx").write_bytes(b"modified")
    (tmp_path / "case" / "pwned").symlink_to("/etc/passwd")
    assert outside(changes(before, snapshot(tmp_path)), "case/out") == {"case/model.onnx", "case/pwned"}
