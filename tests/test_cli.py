"""``streamc build``: exit 0 on success, 1 on a verification mismatch, 2 with ``error: ...`` for every StreamcError."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamc.pipeline import steps
from streamc.cli import main
from streamc.errors import BuildError

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "build_configs" / "models" / "digits_mlp.onnx"
FRONT_STEPS = "[load, tidy, streamline, to_hw, fold]"


def write_config(tmp_path: Path, body: str, *, model: Path = DIGITS, steps_list: str = FRONT_STEPS) -> Path:
    path = tmp_path / "build.yaml"
    path.write_text(f"model: {model}\noutput_dir: out\nsteps: {steps_list}\n{body}")
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_target_fps_build_folds_and_exits_0(tmp_path, capsys):
    config = write_config(tmp_path, "clock_mhz: 100\ntarget_fps: 1000000\n")
    code, out, err = run(["build", str(config)], capsys)
    assert (code, err) == (0, "")
    folding = json.loads((tmp_path / "out" / "reports" / "folding.json").read_text())
    # 100 cycles per frame: every layer (64x64, 32x64, 10x32) within it, at the planner's choice of lanes
    shapes = {"node_linear": (64, 64), "node_linear_1": (32, 64), "node_linear_2": (10, 32)}
    assert sorted(folding) == sorted(shapes)
    cycles = {name: (mh // f["pe"]) * (mw // f["simd"]) for (name, (mh, mw)), f in
              zip(sorted(shapes.items()), (folding[n] for n in sorted(shapes)))}
    assert max(cycles.values()) <= 100
    assert f"Predicted: {max(cycles.values())} cycles/frame" in out
    assert (tmp_path / "out" / "model_streamline.onnx").is_file()


def test_explicit_folding_build_exits_0(tmp_path, capsys):
    folding = {"node_linear": {"pe": 4, "simd": 8, "ram_style": "block"},
               "node_linear_1": {"pe": 2, "simd": 32, "ram_style_thresholds": "distributed"},
               "node_linear_2": {"pe": 10, "simd": 1}}
    config = write_config(tmp_path, f"folding: {json.dumps(folding)}\n")
    code, _, err = run(["build", str(config)], capsys)
    assert (code, err) == (0, "")
    # The report gives every field, so that it can be pasted back as a config's folding.
    written = json.loads((tmp_path / "out" / "reports" / "folding.json").read_text())
    registers = ("operand_register", "route_register", "tree_every")
    assert {name: {key: value for key, value in entry.items() if key not in registers}
            for name, entry in written.items()} == {
        name: {"ram_style": "auto", "ram_style_thresholds": "auto", "res_type": "auto", **entry}
        for name, entry in folding.items()}
    # With the pipeline registers the clock asked for (100 MHz on the UP5K: the delay model wants them).
    assert all(entry["operand_register"] is True and entry["tree_every"] >= 0 for entry in written.values())


def assert_error(argv, capsys, message: str) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert re.fullmatch(rf"error: {message}\n", err), err


def test_folding_not_dividing(tmp_path, capsys):
    folding = {"node_linear": {"pe": 1, "simd": 3}, "node_linear_1": {"pe": 1, "simd": 1},
               "node_linear_2": {"pe": 1, "simd": 1}}
    config = write_config(tmp_path, f"folding: {json.dumps(folding)}\n")
    assert_error(["build", str(config)], capsys,
                 rf"node 'node_linear' \(MatMul 64x64\): simd=3 does not divide 64; valid simd: 1, 2, 4, 8, 16, 32, 64 "
                 rf"\(set folding.node_linear.simd in {re.escape(str(config))}\)")


def test_folding_unknown_layer(tmp_path, capsys):
    config = write_config(tmp_path, "folding: {fc1: {pe: 1, simd: 1}}\n")
    assert_error(["build", str(config)], capsys,
                 r"folding names layer 'fc1', which the model does not have; layers: node_linear, node_linear_1, "
                 rf"node_linear_2 \(in {re.escape(str(config))}\)")


def test_impossible_target(tmp_path, capsys):
    config = write_config(tmp_path, "clock_mhz: 50\ntarget_fps: 1.0e+8\n")
    assert_error(["build", str(config)], capsys,
                 r"target_fps=1e\+08 at clock_mhz=50 leaves less than one cycle per frame; the fastest streamc "
                 r"pipeline takes 1 cycle per frame, so at most 5e\+07 frames/s at 50 MHz\. The fastest that fits the "
                 r"ice40-up5k takes 128 cycles per frame: 390,625 frames/s at clock_mhz 50 \(ask target_fps: 390625, "
                 r"or budget: 1\.0 for the fastest folding within the device\)")


def test_missing_config(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert_error(["build", str(missing)], capsys, rf"build config '{re.escape(str(missing))}' does not exist")


def test_mistyped_nested_key(tmp_path, capsys):
    config = write_config(tmp_path, "target_fps: 1000\nverify: {frams: 4}\n")
    assert_error(["build", str(config)], capsys,
                 rf"build config '{re.escape(str(config))}': unknown key 'verify.frams' \(did you mean 'frames'\?\)")


def test_python_tag_in_config(tmp_path, capsys):
    marker = tmp_path / "ran"
    config = write_config(tmp_path, f"target_fps: !!python/object/apply:os.system ['touch {marker}']\n")
    assert_error(["build", str(config)], capsys,
                 rf"build config '{re.escape(str(config))}': not valid YAML: line 4, column 13: YAML tag "
                 r"'!!python/object/apply:os.system' is not allowed \(only plain values, lists and mappings\)")
    assert not marker.exists()


def test_missing_model(tmp_path, capsys):
    config = write_config(tmp_path, "target_fps: 1000\n", model=tmp_path / "gone.onnx")
    assert_error(["build", str(config)], capsys, rf"model file '{re.escape(str(tmp_path))}/gone.onnx' does not exist")


def test_truncated_model(tmp_path, capsys):
    model = tmp_path / "cut.onnx"
    model.write_bytes(DIGITS.read_bytes()[:3000])
    config = write_config(tmp_path, "target_fps: 1000\n", model=model)
    assert_error(["build", str(config)], capsys,
                 rf"'{re.escape(str(model))}' is not an ONNX model \(truncated or not protobuf: .*\)")


def save_model(tmp_path: Path, nodes, inputs=("x",), initializers=()) -> Path:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, [1, 4]) for i in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], list(initializers))
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


def test_unsupported_op_message_is_one_unwrapped_line(tmp_path, capsys):
    model = save_model(tmp_path, [helper.make_node("LSTM", ["x"], ["y"], name="rnn")])
    config = write_config(tmp_path, "target_fps: 1000\n", model=model)
    assert_error(["build", str(config)], capsys,
                 r"node 'rnn' has op 'LSTM', which streamc does not support; `streamc ops` lists the supported ops")


def test_two_inputs(tmp_path, capsys):
    model = save_model(tmp_path, [helper.make_node("Add", ["x", "z"], ["y"])], inputs=("x", "z"))
    config = write_config(tmp_path, "target_fps: 1000\n", model=model)
    assert_error(["build", str(config)], capsys,
                 r"the model has 2 graph inputs \('x', 'z'\); streamc compiles models with exactly one input "
                 r"\(initializers listed as inputs do not count\)")


def test_lowering_error_after_load(tmp_path, capsys):
    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
    model = save_model(tmp_path, [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], initializers=[weight])
    config = write_config(tmp_path, "target_fps: 1000\n", model=model)
    code, _, err = run(["build", str(config)], capsys)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "'mm'" in err


def sim_reporting(mismatches: int, expected_mismatches: int | None = None):
    """Stand-in for the rtl and sim steps (no Verilator here): a simulation report as the sim step writes it."""
    def sim(state):
        state.rtlsim = dict(frames=8, mismatches=mismatches, measured_cycles_per_frame=64,
                            predicted_cycles_per_frame=64, latency_cycles=200, end_to_end_max_abs_diff=0.0)
        state.rtlsim.update(end_to_end_differing_frames=[], end_to_end_rtol=2.0 ** -12)
        if expected_mismatches is not None:
            state.rtlsim["expected_mismatches"] = expected_mismatches
            state.rtlsim["expected_differing_frames"] = [dict(frame=2 * k, max_abs_diff=0.5, steps_apart=k + 1)
                                                         for k in range(expected_mismatches)]
    return sim


@pytest.mark.parametrize(("mismatches", "expected_mismatches", "code", "message"), [
    (0, None, 0, ""),
    (0, 0, 0, ""),
    (5, None, 1, "verification failed: 5 hardware outputs differ from the reference over 8 frames"),
    (0, 2, 1, "verification failed: 2 of 8 frames differ from verify.expected (frame: how far apart, 0: 1 steps, "
              "2: 2 steps)"),
    (3, 1, 1, "verification failed: 3 hardware outputs differ from the reference over 8 frames; 1 of 8 frames "
              "differ from verify.expected (frame: how far apart, 0: 1 steps)"),
])
def test_verification_mismatch_exits_1(mismatches, expected_mismatches, code, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(steps.STEP_FUNCTIONS, "rtl", lambda state: None)
    monkeypatch.setitem(steps.STEP_FUNCTIONS, "sim", sim_reporting(mismatches, expected_mismatches))
    config = write_config(tmp_path, "target_fps: 1000\n", steps_list="[load, tidy, streamline, to_hw, fold, rtl, sim]")
    result = run(["build", str(config)], capsys)
    report = tmp_path / "out" / "reports" / "rtlsim.json"
    assert result[0] == code
    assert result[2] == (f"{message} (see {report})\n" if message else "")


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "usage: streamc" in capsys.readouterr().err


def test_run_sim_classifies_frames_over_the_simulated_uart(tmp_path, capsys):
    from streamc.execute import execute
    from streamc.frontend.load import load_onnx

    config = write_config(tmp_path, "target_fps: 50000\nclock_mhz: 30\n")
    frames = np.load(ROOT / "build_configs" / "models" / "digits_frames.npy")[:3]
    np.save(tmp_path / "frames.npy", frames)
    code, out, err = run(["run", str(config), str(tmp_path / "frames.npy"), "--sim",
                          "--output", str(tmp_path / "outputs.npy"), "--work-dir", str(tmp_path / "work")], capsys)
    assert (code, err) == (0, "")
    graph = load_onnx(DIGITS)
    reference = execute(graph, {graph.inputs[0].name: frames})[graph.outputs[0].name]
    outputs = np.load(tmp_path / "outputs.npy")
    assert np.array_equal(outputs.argmax(axis=1), reference.argmax(axis=1))
    assert [f"frame {i}: class {c}" in out for i, c in enumerate(reference.argmax(axis=1))] == [True] * 3


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.fullmatch(r"streamc \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_before_or_after_the_subcommand_raises(where, tmp_path):
    config = tmp_path / "missing.yaml"
    argv = ["--debug", "build", str(config)] if where == "before" else ["build", str(config), "--debug"]
    with pytest.raises(Exception, match="does not exist"):
        main(argv)


def test_estimate_takes_debug(tmp_path):
    with pytest.raises(Exception, match="does not exist"):
        main(["estimate", str(tmp_path / "missing.yaml"), "--debug"])


def test_a_failed_step_leaves_its_summary_and_times(tmp_path, capsys, monkeypatch):
    def short_of_timing(state):
        raise BuildError("timing not met")

    monkeypatch.setitem(steps.STEP_FUNCTIONS, "fold", short_of_timing)
    config = write_config(tmp_path, "target_fps: 1000\n")
    code, out, err = run(["build", str(config)], capsys)
    assert (code, err) == (2, "error: timing not met\n")
    reports = tmp_path / "out" / "reports"
    times = json.loads((reports / "time_per_step.json").read_text())
    assert list(times) == ["load", "tidy", "streamline", "to_hw", "fold"]
    summary = json.loads((reports / "summary.json").read_text())
    assert summary["failed"] == {"step": "fold", "error": "timing not met"}
    assert summary["steps"] == times
    assert re.search(r"^fold +\d+\.\d\d s  failed$", out, re.MULTILINE)
    assert "failed in step fold" in out
    # No design: the fold step that makes it did not complete.
    assert "Predicted" not in out and "stages" not in summary


def test_step_lines_off_a_terminal_name_no_source_line(tmp_path, capsys):
    config = write_config(tmp_path, "target_fps: 1000\n")
    code, out, _ = run(["build", str(config)], capsys)
    assert code == 0
    assert re.match(r"load +\d+\.\d\d s\ntidy ", out), out
    assert ".py:" not in out


def test_printed_output_folder_has_no_dot_dot(tmp_path, capsys):
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "build.yaml"
    config.write_text(f"model: {DIGITS}\noutput_dir: ../out\nsteps: [load]\ntarget_fps: 1000\n")
    code, out, _ = run(["build", str(config)], capsys)
    assert code == 0
    assert f"Outputs: {tmp_path / 'out'} " in out


def test_run_before_the_first_build_leaves_a_folder_build_accepts(tmp_path, capsys, monkeypatch):
    import streamc.host

    def run_frames(config, frames, *, work_dir, **_):
        (work_dir / "design").mkdir(parents=True)
        (work_dir / "design" / "scratch").write_text("")
        return np.zeros((1, 10)), None

    monkeypatch.setattr(streamc.host, "run_frames", run_frames)
    config = write_config(tmp_path, "target_fps: 1000\n", steps_list="[load]")
    np.save(tmp_path / "frames.npy", np.zeros((1, 64), np.float32))
    code, out, err = run(["run", str(config), str(tmp_path / "frames.npy"), "--port", "/dev/null"], capsys)
    assert (code, out, err) == (0, "frame 0: class 0\n", "")
    assert (tmp_path / "out" / "board_run" / "design" / "scratch").is_file()
    code, _, err = run(["build", str(config)], capsys)
    assert (code, err) == (0, "")


def test_a_terminal_shows_the_running_step_with_its_elapsed_time(tmp_path):
    import io

    from rich.console import Console

    from streamc.pipeline.runner import run_build

    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    run_build(write_config(tmp_path, "target_fps: 1000\n", steps_list="[load]"), console=console)
    assert re.search(r"0:00:0\d.*load", console.file.getvalue())
