"""The build configuration: every mistake a user can make is named, with the key and what is valid."""

import re
from pathlib import Path

import pytest

from streamc.pipeline.config import DEFAULT_STEPS, STEPS, load_config
from streamc.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BASE = "model: models/m.onnx\noutput_dir: ../out\n"


def write(tmp_path: Path, text: str, name: str = "build.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def config_error(path: Path) -> str:
    """The error message after its ``build config '<path>'`` prefix (which is checked)."""
    prefix = f"build config {str(path)!r}"
    with pytest.raises(ConfigError, match=rf"^{re.escape(prefix)}") as info:
        load_config(path)
    return str(info.value)[len(prefix):]


def assert_config_error(path: Path, rest: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(f'build config {str(path)!r}' + rest)}$"):
        load_config(path)


def test_digits_demo_config_loads():
    config = load_config(ROOT / "build_configs" / "digits.yaml")
    assert config.model == ROOT / "build_configs" / "models" / "digits_mlp.onnx"
    assert (config.target_fps is None) != (config.folding is None)
    assert config.steps == list(DEFAULT_STEPS)
    assert config.verify.inputs.is_file() and config.verify.labels.is_file()


def test_paths_are_relative_to_the_config_file(tmp_path, monkeypatch):
    folder = tmp_path / "configs"
    folder.mkdir()
    write(folder, BASE + "target_fps: 1000\nverify: {inputs: f.npy, expected: /data/e.npy, labels: sub/l.npy}\n")
    monkeypatch.chdir(tmp_path)
    config = load_config(Path("configs/build.yaml"))
    assert config.model == folder / "models" / "m.onnx"
    # Without the "..": messages name the folder meant, not configs/../out.
    assert str(config.output_dir) == str(tmp_path / "out")
    assert config.verify.inputs == folder / "f.npy"
    assert config.verify.expected == Path("/data/e.npy")
    assert config.verify.labels == folder / "sub" / "l.npy"


def test_defaults(tmp_path):
    config = load_config(write(tmp_path, BASE + "folding: {fc1: {pe: 2, simd: 4}}\n"))
    assert config.clock_mhz == 100.0 and config.target_fps is None
    assert config.folding["fc1"].pe == 2 and config.folding["fc1"].simd == 4
    assert config.devices == ["ice40-up5k", "ecp5-85f"] and config.fifo_depth == 2
    assert config.verify.inputs is None and config.verify.seed == 0


@pytest.mark.parametrize(("text", "message"), [
    ("target_fps: 1\ntarget_fsp: 2\n", "unknown key 'target_fsp' (did you mean 'target_fps'?)"),
    ("target_fps: 1\nverify:\n  frams: 3\n", "unknown key 'verify.frams' (did you mean 'frames'?)"),
    ("folding: {fc1: {pe: 1, simd: 1, mem: bram}}\n", "unknown key 'folding.fc1.mem'"),
    ("target_fps: 1\nclock: 50\nverify: {sead: 1}\n", "unknown key 'verify.sead' (did you mean 'seed'?); "
                                                      "unknown key 'clock' (did you mean 'clock_mhz'?)"),
])
def test_unknown_keys_are_named(text, message, tmp_path):
    assert_config_error(write(tmp_path, BASE + text), f": {message}")


@pytest.mark.parametrize(("text", "message"), [
    ("target_fps: 1\nclock_mhz: -5\n", "clock_mhz must be a positive number of MHz or auto (with budget), not -5"),
    ("target_fps: 1\nclock_mhz: 0\n", "clock_mhz must be a positive number of MHz or auto (with budget), not 0"),
    ("target_fps: 1\nclock_mhz: '100'\n", "clock_mhz must be a positive number of MHz or auto (with budget), "
                                         "not '100'"),
    ("target_fps: .inf\n", "target_fps: Input should be a finite number, not inf"),
    ("target_fps: fast\n", "target_fps: Input should be a valid number, not 'fast'"),
    ("folding: {fc1: {pe: true, simd: 1}}\n", "folding.fc1.pe: Input should be a valid integer, not True"),
    ("folding: {fc1: {pe: 2.5, simd: 1}}\n", "folding.fc1.pe: Input should be a valid integer, not 2.5"),
    ("folding: {fc1: {pe: 0, simd: 1}}\n", "folding.fc1.pe: Input should be greater than 0, not 0"),
    ("folding: {fc1: {simd: 1}}\n", "folding.fc1.pe: missing (required)"),
    ("folding: {fc1: {pe: 1, simd: 1, ram_style: bram}}\n",
     "folding.fc1.ram_style: Input should be 'auto', 'distributed' or 'block', not 'bram'"),
    ("folding: {act: {ram_style: bram}}\n",
     "folding.act.ram_style: Input should be 'auto', 'distributed' or 'block', not 'bram'"),
    ("folding: {fc1: {pe: 1, simd: 1, ram_stile: block}}\n", "unknown key 'folding.fc1.ram_stile' (did you mean 'ram_style'?)"),
    ("folding: [1, 2]\n", "folding: must be a mapping of keys to values, not [1, 2]"),
    ("target_fps: 1\nverify: 3\n", "verify: must be a mapping of keys to values, not 3"),
    ("target_fps: 1\nsteps: load\n", "steps: must be a list, not 'load'"),
    ("target_fps: 1\nsteps: [load, tidi]\n",
     "steps.1: Input should be 'load', 'tidy', 'streamline', 'to_hw', 'fold', 'rtl', 'sim', 'synth' or 'pnr', not 'tidi'"),
    ("target_fps: 1\ndevices: [ice40]\n",
     "devices.0: Input should be 'ice40-up5k', 'ecp5-85f', 'gowin-gw1nr-9' or 'gowin-gw2a-18', not 'ice40'"),
    ("target_fps: 1\nverify: {input_gap_prob: 1.0}\n", "verify.input_gap_prob: Input should be less than 1, not 1.0"),
    ("target_fps: 1\nverify: {frames: -1}\n", "verify.frames: Input should be greater than 0, not -1"),
    ("target_fps: 1\nfifo_depth: 1.5\n", "fifo_depth: Input should be a valid integer, not 1.5"),
])
def test_wrong_values_are_named(text, message, tmp_path):
    assert_config_error(write(tmp_path, BASE + text), f": {message}")


def test_missing_required_keys(tmp_path):
    assert_config_error(write(tmp_path, "target_fps: 1\n"),
                        ": model: missing (required); output_dir: missing (required)")


def test_path_of_wrong_type(tmp_path):
    assert_config_error(write(tmp_path, "model: 5\noutput_dir: out\ntarget_fps: 1\n"),
                        ": model: must be a path (a string), not 5")


MODES = ("give one of target_fps (the cheapest folding that reaches it), budget (the fastest folding within that "
         "fraction of the first device) or folding (pe and simd per layer); ")


@pytest.mark.parametrize(("body", "given"), [
    ("target_fps: 1\nfolding: {fc1: {pe: 1, simd: 1}}\n", "not target_fps and folding together"),
    ("target_fps: 1\nbudget: 0.5\n", "not target_fps and budget together"),
    ("budget: 0.5\nfolding: {fc1: {pe: 1, simd: 1}}\n", "not budget and folding together"),
    ("", "none is given"),
])
def test_exactly_one_folding_mode(body, given, tmp_path):
    assert_config_error(write(tmp_path, BASE + body), ": " + MODES + given)


def test_budget_is_a_fraction_of_the_first_device(tmp_path):
    config = load_config(write(tmp_path, BASE + "budget: 0.8\ndevices: [ecp5-85f, ice40-up5k]\n"))
    assert config.budget == 0.8 and config.target_fps is None and config.folding is None
    assert config.devices == ["ecp5-85f", "ice40-up5k"]


@pytest.mark.parametrize(("value", "message"), [
    ("0", "budget: Input should be greater than 0, not 0"),
    ("1.5", "budget: Input should be less than or equal to 1, not 1.5"),
    ("'80%'", "budget: Input should be a valid number, not '80%'"),
    (".nan", "budget: Input should be a finite number, not nan"),
])
def test_budget_values(value, message, tmp_path):
    assert_config_error(write(tmp_path, BASE + f"budget: {value}\n"), ": " + message)


def test_budget_needs_a_device(tmp_path):
    assert_config_error(write(tmp_path, BASE + "budget: 0.8\ndevices: []\nsteps: [load]\n"),
                        ": budget is a fraction of the first device in devices, but devices is empty; give at least "
                        "one of ice40-up5k, ecp5-85f")


@pytest.mark.parametrize("steps", ["[load, streamline]", "[tidy]", "[load, load]", "[]"])
def test_steps_must_be_a_prefix(steps, tmp_path):
    assert_config_error(write(tmp_path, BASE + f"target_fps: 1\nsteps: {steps}\n"),
                        ": steps must be a non-empty prefix of the pipeline "
                        f"[load, tidy, streamline, to_hw, fold, rtl, sim, synth, pnr], not {steps}")


@pytest.mark.parametrize("steps", [["load"], list(STEPS[:5]), list(DEFAULT_STEPS)])
def test_prefixes_are_accepted(steps, tmp_path):
    config = load_config(write(tmp_path, BASE + f"target_fps: 1\nsteps: [{', '.join(steps)}]\n"))
    assert config.steps == steps


def test_a_board_adds_the_pnr_step_and_pnr_needs_a_board(tmp_path):
    assert load_config(write(tmp_path, BASE + "target_fps: 1\nboard: icebreaker\n")).steps == list(STEPS)
    assert_config_error(write(tmp_path, BASE + f"target_fps: 1\nsteps: [{', '.join(STEPS)}]\n"),
                        ": steps include pnr but no board is given; give board: one of icebreaker, ulx3s-85f, "
                        "ulx3s-45f, ulx3s-25f, tangnano9k, tangprimer20k")


def test_synth_needs_a_device(tmp_path):
    assert_config_error(write(tmp_path, BASE + "target_fps: 1\ndevices: []\n"),
                        ": devices is empty but steps include synth; give at least one of ice40-up5k, ecp5-85f")
    assert load_config(write(tmp_path, BASE + "target_fps: 1\ndevices: []\nsteps: [load]\n")).devices == []


@pytest.mark.parametrize("key", ["expected", "labels"])
def test_expected_outputs_need_given_inputs(key, tmp_path):
    assert_config_error(write(tmp_path, BASE + f"target_fps: 1\nverify: {{{key}: x.npy}}\n"),
                        f": verify.{key} describes given frames: it needs verify.inputs")


def test_missing_file(tmp_path):
    assert_config_error(tmp_path / "none.yaml", " does not exist")


def test_directory(tmp_path):
    assert_config_error(tmp_path, " is a directory, not a YAML file")


def test_binary_file(tmp_path):
    path = tmp_path / "build.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01")
    assert_config_error(path, " is not UTF-8 text")


def test_empty_file(tmp_path):
    assert_config_error(write(tmp_path, "# nothing yet\n"),
                        " is empty; it needs at least model, output_dir and target_fps or folding")


@pytest.mark.parametrize(("text", "kind"), [("- load\n- tidy\n", "list"), ("just words\n", "str"), ("42\n", "int")])
def test_yaml_that_is_not_a_mapping(text, kind, tmp_path):
    assert_config_error(write(tmp_path, text), f" must be a mapping of keys to values, not a {kind}")


def test_invalid_yaml(tmp_path):
    assert_config_error(write(tmp_path, "model: [a, b\n"),
                        ": not valid YAML: line 2, column 1: expected ',' or ']', but got '<stream end>'")


def test_key_given_twice(tmp_path):
    assert_config_error(write(tmp_path, BASE + "target_fps: 1\ntarget_fps: 2\n"),
                        ": not valid YAML: line 4, column 1: key 'target_fps' is given twice")


def test_python_tags_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "pwned"
    text = BASE + f"target_fps: !!python/object/apply:os.system ['touch {marker}']\n"
    assert_config_error(write(tmp_path, text),
                        ": not valid YAML: line 3, column 13: YAML tag '!!python/object/apply:os.system' is not "
                        "allowed (only plain values, lists and mappings)")
    assert not marker.exists()


@pytest.mark.parametrize("tag", ["!!python/object:pathlib.Path", "!!python/name:os.system", "!custom"])
def test_other_tags_are_refused(tag, tmp_path):
    message = config_error(write(tmp_path, BASE + f"target_fps: {tag} {{}}\n"))
    assert re.fullmatch(rf": not valid YAML: line 3, column 13: YAML tag '{re.escape(tag)}' is not allowed "
                        r"\(only plain values, lists and mappings\)", message)


def test_a_folding_entry_of_ram_style_alone_is_a_lookup_table_s(tmp_path):
    config = load_config(write(tmp_path, BASE + "folding: {fc1: {pe: 2, simd: 4}, act: {ram_style: block}}\n"))
    assert config.folding["act"].model_dump() == {"ram_style": "block"}
    assert config.folding["fc1"].model_dump() == {"pe": 2, "simd": 4, "ram_style": "auto",
                                                  "ram_style_thresholds": "auto", "res_type": "auto",
                                                  "operand_register": None, "route_register": None,
                                                  "tree_every": None, "keep_adders": None}


def test_a_misspelled_key_gets_a_guess(tmp_path):
    body = BASE + "clock_mhs: 30\ntarget_fps: 100\nverify: {input: f.npy}\nfolding_x: 1\n"
    with pytest.raises(ConfigError, match=r": unknown key 'verify.input' \(did you mean 'inputs'\?\); unknown key "
                                          r"'clock_mhs' \(did you mean 'clock_mhz'\?\); unknown key 'folding_x' "
                                          r"\(did you mean 'folding'\?\)$"):
        load_config(write(tmp_path, body))


def test_a_misspelled_folding_key_gets_a_guess(tmp_path):
    body = BASE + "folding: {fc1: {pe: 1, simd: 1, ram_stlye: block}}\n"
    with pytest.raises(ConfigError, match=r": unknown key 'folding.fc1.ram_stlye' \(did you mean 'ram_style'\?\)$"):
        load_config(write(tmp_path, body))


def test_a_key_far_from_every_name_gets_no_guess(tmp_path):
    with pytest.raises(ConfigError, match=r": unknown key 'zzz'$"):
        load_config(write(tmp_path, BASE + "target_fps: 100\nzzz: 1\n"))


@pytest.mark.parametrize("board, devices", [("ulx3s-85f", None), ("icebreaker", "[ecp5-85f]"),
                                            ("ulx3s-85f", "[ice40-up5k, ecp5-85f]")])
def test_a_board_whose_device_is_not_planned_for_is_refused(tmp_path, board, devices):
    body = BASE + f"target_fps: 100\nboard: {board}\n" + (f"devices: {devices}\n" if devices else "")
    with pytest.raises(ConfigError, match=rf"board {board} carries the \S+, but the folding is planned for the first "
                                          r"of devices, \S+; put \S+ first in devices$"):
        load_config(write(tmp_path, body))


@pytest.mark.parametrize("board, devices", [("icebreaker", None), ("ulx3s-85f", "[ecp5-85f, ice40-up5k]")])
def test_a_board_whose_device_comes_first_is_taken(tmp_path, board, devices):
    body = BASE + f"target_fps: 100\nboard: {board}\n" + (f"devices: {devices}\n" if devices else "")
    assert load_config(write(tmp_path, body)).board == board
