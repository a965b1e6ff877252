# amaranth: UnusedElaboratable=no
"""How a stage's thresholds find the count: the planner's knob, "auto", an explicit folding, the cycles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamc.datatypes import INT, UINT
from streamc.devices import get_device
from streamc.errors import FoldingError
from streamc.folding import apply_folding
from streamc.hw import Dataflow
from streamc.kernels import stage_spec
from streamc.planner import plan_for_cycles
from streamc.resources import estimate_kernel
from streamc.stages import VVAULayer
from streamc.timing import Clock

SOURCE = "cfg.yaml"


def average(name: str = "pool", channels: int = 16, taps: int = 9, levels: int = 255, seed: int = 0) -> VVAULayer:
    """An average of ``taps`` UINT8 codes per channel, ``levels`` random thresholds per channel on the sum."""
    rng = np.random.default_rng(seed)
    top = 255 * taps
    thresholds = np.sort(rng.integers(0, top + 1, size=(channels, levels)), axis=1)
    return VVAULayer(name=name, source=f"/{name}/AveragePool", weights=np.ones((channels, taps), dtype=np.int64),
                     in_dtype=UINT(8), weight_dtype=UINT(1), thresholds=thresholds,
                     out_dtype=UINT(levels.bit_length()), out_bias=0, acc_lo=np.zeros(channels, dtype=np.int64),
                     acc_hi=np.full(channels, top), vectors=4)


def alone(stage) -> Dataflow:
    stage.sources = [-1]
    return Dataflow(head=None, stages=[stage], tail=None, hw_input="x", hw_output="y")


def priced(stage, style: str, family: str):
    stage.threshold_style = style
    return estimate_kernel(stage_spec(stage), family)


@pytest.mark.parametrize("device", ["ecp5-85f", "ice40-up5k"])
@pytest.mark.parametrize("levels, cheaper", [(255, "search"), (4, "parallel")])
def test_the_planner_takes_the_cheaper_style(device, levels, cheaper):
    stage = average(levels=levels)
    family = get_device(device).family
    # The premise, from the resource model: which style takes fewer LUTs here.
    search, parallel = priced(stage, "search", family), priced(stage, "parallel", family)
    assert (search.lut < parallel.lut) == (cheaper == "search"), (search, parallel)
    plan = plan_for_cycles(alone(stage), cycles=stage.cycles(1), device=get_device(device), fifo_depth=2)
    assert plan.folding["pool"] == {"simd": 1, "threshold_style": cheaper}
    assert stage.threshold_style == cheaper and stage.components()[-1].style == cheaper


def test_few_or_bipolar_thresholds_offer_no_search():
    assert "threshold_style" in [knob.name for knob in average(levels=4).knobs()]
    assert "threshold_style" not in [knob.name for knob in average(levels=3).knobs()]
    assert [knob.values for knob in average().knobs(placement=False) if knob.name == "threshold_style"] == [("auto",)]


def test_auto_takes_the_cheaper_style_on_the_family_it_is_pipelined_for():
    stage = average()
    assert stage.components()[-1].style == "parallel"  # no family yet
    stage.pipeline_for(Clock(mhz=100, family="ecp5"))
    assert stage.components()[-1].style == "search"
    assert stage.folding()["threshold_style"] == "search" and stage.report()["threshold_style"] == "search"
    small = average(levels=4)
    small.pipeline_for(Clock(mhz=100, family="ecp5"))
    assert small.components()[-1].style == "parallel"


def test_the_style_changes_no_cycles():
    stage = average()
    units = {}
    for style in ("parallel", "search"):
        stage.threshold_style = style
        units[style] = stage.components()[-1]
        assert stage.cycles() == stage.in_count // stage.simd
    # Both take a beat per cycle; only the latency differs.
    assert (units["parallel"].latency, units["search"].latency) == (3, 9)


def test_an_explicit_folding_fixes_the_style_and_leaves_the_others_auto():
    named, unnamed = average("pool"), average("pool2")
    apply_folding([], {"pool": {"threshold_style": "search"}}, source=SOURCE, thresholded=[named, unnamed])
    assert (named.threshold_style, unnamed.threshold_style) == ("search", "auto")
    assert named.folding()["threshold_style"] == "search"


@pytest.mark.parametrize("entry, message", [
    ({"simd": 2}, r"folding gives simd, but its lanes are not chosen there; give only threshold_style "
                  r"\(auto, parallel, search\) \(in cfg.yaml\)"),
    ({"threshold_style": "binary"}, r"threshold_style='binary' is not a threshold style; valid threshold_style: "
                                    r"auto, parallel, search \(set folding.pool.threshold_style in cfg.yaml\)"),
])
def test_an_explicit_threshold_style_is_checked(entry, message):
    stage = average()
    with pytest.raises(FoldingError, match=rf"^node '/pool/AveragePool' \(vector unit 16x9\): {message}$"):
        apply_folding([], {"pool": entry}, source=SOURCE, thresholded=[stage])
    assert stage.threshold_style == "auto"


def test_a_residual_add_resolves_auto_too():
    from streamc.stages.add import AddStage

    rng = np.random.default_rng(0)
    add = AddStage(name="add", source="/add/Add", weights=(1, 1), in_dtypes=(INT(8), INT(8)),
                   thresholds=np.sort(rng.integers(-256, 255, size=(8, 127)), axis=1), out_dtype=UINT(7),
                   out_bias=0, channels=8, count=64)
    assert add.folding()["threshold_style"] == "parallel"
    add.pipeline_for(Clock(mhz=100, family="ecp5"))
    assert add.folding() == {"elems": 1, "threshold_style": "search"}


def test_a_model_whose_pool_the_planner_searches_is_bit_exact_in_verilator(tmp_path):
    """The depthwise block's global average (240 thresholds per channel on a 64-tap sum): the planner takes
    the search on the ECP5, and Verilator's outputs, with the build's input gaps and output stalls, equal the
    model's."""
    import streamc

    models = Path(__file__).parent / "models" / "cnn"
    acc = streamc.compile(models / "depthwise_block.onnx", device="ecp5-85f", clock_mhz=100, target_fps=1000,
                          output_dir=tmp_path)
    pool = next(stage for stage in acc.stages if stage.name == "node_avg_pool2d")
    assert pool.threshold_style == "search" and pool.components()[-1].search_steps == 8
    frames = np.load(models / "depthwise_block_frames.npy")[:4]
    expected = np.load(models / "depthwise_block_expected.npy")[:4]
    sim = acc.simulate(frames, expected=expected)
    assert sim.failure is None and sim.report["mismatches"] == 0
    assert sim.report["measured_cycles_per_frame"] == acc.cycles_per_frame
