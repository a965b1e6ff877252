"""Folding: the explicit per-layer folding is checked exactly, the automatic one is minimal."""

import numpy as np
import pytest

from streamc.datatypes import BIPOLAR, INT
from streamc.errors import FoldingError
from streamc.folding import apply_folding, cycle_budget, target_cycles
from streamc.stages import LUTStage, MVAULayer, divisors

SOURCE = "cfg.yaml"


def layer(name: str, mh: int, mw: int) -> MVAULayer:
    return MVAULayer(name=name, source=f"/{name}/MatMul", weights=np.zeros((mh, mw), dtype=np.int64),
                     in_dtype=BIPOLAR, weight_dtype=BIPOLAR, thresholds=None, out_dtype=INT(16), out_bias=0,
                     acc_lo=np.full(mh, -mw), acc_hi=np.full(mh, mw))


@pytest.fixture
def layers():
    return [layer("fc1", 64, 784), layer("fc2", 10, 64)]


def test_divisors():
    assert divisors(1) == [1]
    assert divisors(784) == [1, 2, 4, 7, 8, 14, 16, 28, 49, 56, 98, 112, 196, 392, 784]


def test_apply_folding_sets_every_layer(layers):
    apply_folding(layers, {"fc1": {"pe": 4, "simd": 49}, "fc2": {"pe": np.int64(5), "simd": 64}}, source=SOURCE)
    assert [(l.pe, l.simd, l.cycles()) for l in layers] == [(4, 49, 256), (5, 64, 2)]
    assert type(layers[1].pe) is int


def test_apply_folding_unknown_layer(layers):
    folding = {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 1, "simd": 1}, "fc9": {"pe": 1, "simd": 1}}
    with pytest.raises(FoldingError, match=r"^folding names layer 'fc9', which the model does not have; "
                                           r"layers: fc1, fc2 \(in cfg.yaml\)$"):
        apply_folding(layers, folding, source=SOURCE)


def test_apply_folding_missing_layer(layers):
    with pytest.raises(FoldingError, match=r"^folding has no entry for layer 'fc2' \(in cfg.yaml\); "
                                           r"give pe and simd for every layer: fc1, fc2$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}}, source=SOURCE)


def test_apply_folding_simd_not_dividing(layers):
    with pytest.raises(FoldingError, match=r"^node '/fc1/MatMul' \(MatMul 64x784\): simd=12 does not divide 784; "
                                           r"valid simd: 1, 2, 4, 7, 8, 14, 16, 28, 49, 56, 98, 112, 196, 392, 784 "
                                           r"\(set folding.fc1.simd in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 12}, "fc2": {"pe": 1, "simd": 1}}, source=SOURCE)


def test_apply_folding_pe_not_dividing(layers):
    with pytest.raises(FoldingError, match=r"^node '/fc2/MatMul' \(MatMul 10x64\): pe=4 does not divide 10; "
                                           r"valid pe: 1, 2, 5, 10 \(set folding.fc2.pe in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 4, "simd": 1}}, source=SOURCE)


@pytest.mark.parametrize("value", [0, -2, 2.0, True, "2"])
def test_apply_folding_value_not_a_positive_integer(value, layers):
    with pytest.raises(FoldingError, match=rf"^node '/fc2/MatMul' \(MatMul 10x64\): pe={value!r} is not a positive "
                                           r"integer; valid pe: 1, 2, 5, 10 \(set folding.fc2.pe in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": value, "simd": 1}}, source=SOURCE)


def test_apply_folding_entry_without_pe(layers):
    with pytest.raises(FoldingError, match=r"^node '/fc1/MatMul' \(MatMul 64x784\): folding gives no pe; valid pe: "
                                           r"1, 2, 4, 8, 16, 32, 64 \(set folding.fc1.pe in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"simd": 1}, "fc2": {"pe": 1, "simd": 1}}, source=SOURCE)


def test_refused_folding_leaves_layers_unchanged(layers):
    with pytest.raises(FoldingError):
        apply_folding(layers, {"fc1": {"pe": 2, "simd": 2}, "fc2": {"pe": 3, "simd": 1}}, source=SOURCE)
    assert [(l.pe, l.simd) for l in layers] == [(1, 1), (1, 1)]


@pytest.mark.parametrize(("clock_mhz", "target_fps", "budget"),
                         [(100, 1e6, 100), (2.01, 1, 2_010_000), (100, 3, 33_333_333), (0.3, 0.1, 3_000_000),
                          (100, 1e8, 1), (100, 1.5e8, 0)])
def test_cycle_budget_is_exact_on_decimal_values(clock_mhz, target_fps, budget):
    assert cycle_budget(target_fps=target_fps, clock_mhz=clock_mhz) == budget


def test_impossible_target(layers):
    with pytest.raises(FoldingError, match=r"^target_fps=2e\+08 at clock_mhz=100 leaves less than one cycle per "
                                           r"frame; the fastest streamc pipeline takes 1 cycle per frame, so at most "
                                           r"1e\+08 frames/s at 100 MHz$"):
        target_cycles(target_fps=2e8, clock_mhz=100)


@pytest.mark.parametrize(("key", "kwargs"), [("target_fps", dict(target_fps=0, clock_mhz=100)),
                                             ("clock_mhz", dict(target_fps=10, clock_mhz=float("inf")))])
def test_non_positive_or_infinite_rates(key, kwargs, layers):
    value = kwargs[key]
    with pytest.raises(FoldingError, match=rf"^{key} must be a positive finite number, not {value!r}$"):
        target_cycles(**kwargs)


def test_apply_folding_places_roms(layers):
    apply_folding(layers, {"fc1": {"pe": 1, "simd": 1, "ram_style": "block"},
                           "fc2": {"pe": 1, "simd": 1, "ram_style_thresholds": "distributed"}}, source=SOURCE)
    assert [(l.ram_style, l.ram_style_thresholds) for l in layers] == [("block", "auto"), ("auto", "distributed")]


def test_apply_folding_unknown_placement(layers):
    with pytest.raises(FoldingError, match=r"^node '/fc2/MatMul' \(MatMul 10x64\): ram_style='bram' is not a placement; "
                                           r"valid ram_style: auto, distributed, block "
                                           r"\(set folding.fc2.ram_style in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 1, "simd": 1, "ram_style": "bram"}},
                      source=SOURCE)
    assert [l.ram_style for l in layers] == ["auto", "auto"]


def table(name: str = "act") -> LUTStage:
    return LUTStage(name=name, source="/act/Tanh", table=np.arange(-8, 8), in_dtype=INT(4), out_dtype=INT(4),
                    count=10)


def test_a_lookup_table_takes_its_ram_style_and_keeps_auto_when_not_named(layers):
    named, unnamed = table("act"), table("act2")
    apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 1, "simd": 1}, "act": {"ram_style": "block"}},
                  source=SOURCE, tables=[named, unnamed])
    assert (named.ram_style, unnamed.ram_style) == ("block", "auto")


def test_a_lookup_table_takes_nothing_but_its_ram_style(layers):
    folding = {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 1, "simd": 1}, "act": {"pe": 2, "ram_style": "block"}}
    with pytest.raises(FoldingError, match=r"^lookup table '/act/Tanh' \(INT4 -> INT4\): folding gives pe, but a "
                                           r"lookup table's lanes follow the layer before it; give only ram_style "
                                           r"\(auto, distributed, block\) \(in cfg.yaml\)$"):
        apply_folding(layers, folding, source=SOURCE, tables=[table()])
    folding["act"] = {"ram_style": "bram"}
    with pytest.raises(FoldingError, match=r"^lookup table '/act/Tanh' \(INT4 -> INT4\): ram_style='bram' is not a "
                                           r"placement; valid ram_style: auto, distributed, block "
                                           r"\(set folding.act.ram_style in cfg.yaml\)$"):
        apply_folding(layers, folding, source=SOURCE, tables=[table()])


def test_an_unknown_name_lists_the_lookup_tables_too(layers):
    with pytest.raises(FoldingError, match=r"^folding names layer 'tanh', which the model does not have; "
                                           r"layers: fc1, fc2; lookup tables: act \(in cfg.yaml\)$"):
        apply_folding(layers, {"fc1": {"pe": 1, "simd": 1}, "fc2": {"pe": 1, "simd": 1}, "tanh": {}},
                      source=SOURCE, tables=[table()])


def test_an_explicit_folding_no_device_holds_is_refused_with_the_numbers(tmp_path):
    """TFC-w2a2 fully unrolled needs about a hundred times the UP5K's LUTs: refused at the fold step, before any
    Verilog, naming each device's overflow; the same folding is accepted where a device that holds it is listed."""
    from pathlib import Path

    import yaml

    from streamc.pipeline.runner import run_build

    model = Path(__file__).parent / "models" / "tfc_w2a2.onnx"
    unrolled = {"node_linear": {"pe": 64, "simd": 784}, "node_linear_1": {"pe": 64, "simd": 64},
                "node_linear_2": {"pe": 64, "simd": 64}, "node_linear_3": {"pe": 10, "simd": 64}}
    config = {"model": str(model), "output_dir": str(tmp_path / "out"), "devices": ["ice40-up5k"], "clock_mhz": 30,
              "folding": unrolled, "steps": ["load", "tidy", "streamline", "to_hw", "fold"]}
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(FoldingError, match=r"^folding: the explicit folding needs more than the device has: "
                                           r"ice40-up5k: [\d,]+ LUT of 5,280, [\d,]+ FF of 5,280 \(fold"):
        run_build(tmp_path / "build.yaml")
    # its ROMs take 37 block RAMs of the UP5K's 30, so the ECP5-85F holds it
    folded = {name: {"pe": 1, "simd": 2} for name in unrolled}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump({**config, "folding": folded, "output_dir": str(tmp_path / "o2"),
                                                         "devices": ["ice40-up5k", "ecp5-85f"]}))
    assert run_build(tmp_path / "small.yaml").dataflow.layers[0].simd == 2


def test_folding_json_with_threshold_styles_pastes_back_as_the_same_folding(tmp_path):
    """The residual block's add and average pool search their thresholds where the planner says so; the folding
    the build writes, given back as the config's folding, builds the same design (styles included), and a bad
    style is refused by the config's check."""
    import json
    from pathlib import Path

    import yaml

    from streamc.errors import ConfigError
    from streamc.pipeline.runner import run_build

    model = Path(__file__).parent / "models" / "cnn" / "residual_block.onnx"
    config = {"model": str(model), "output_dir": str(tmp_path / "planned"), "devices": ["ecp5-85f"], "target_fps": 1000,
              "steps": ["load", "tidy", "streamline", "to_hw", "fold"]}
    (tmp_path / "planned.yaml").write_text(yaml.safe_dump(config))
    run_build(tmp_path / "planned.yaml")
    folding = json.loads((tmp_path / "planned" / "reports" / "folding.json").read_text())
    styles = {name: entry["threshold_style"] for name, entry in folding.items() if set(entry) == {"threshold_style"}}
    assert styles and set(styles.values()) <= {"parallel", "search"}
    pinned = {key: value for key, value in config.items() if key != "target_fps"}
    pinned.update(folding=folding, output_dir=str(tmp_path / "pinned"))
    (tmp_path / "pinned.yaml").write_text(yaml.safe_dump(pinned))
    run_build(tmp_path / "pinned.yaml")
    assert json.loads((tmp_path / "pinned" / "reports" / "folding.json").read_text()) == folding
    name = next(iter(styles))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**pinned, "folding": {**folding, name: {"threshold_style": "fast"}}}))
    with pytest.raises(ConfigError, match=f"folding.{name}.threshold_style"):
        run_build(tmp_path / "bad.yaml")
