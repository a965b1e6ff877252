"""The folding planner: exact costs, never worse than FINN's greedy pass, at the optimum, clear errors."""

import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from resnet_factory import ResNetSpec, make_resnet8

import streamc
from streamc import kernels
from streamc.datatypes import BIPOLAR, INT, DataType
from streamc.devices import get_device
from streamc.errors import FoldingError
from streamc.folding import target_cycles
from streamc.frontend.load import load_onnx
from streamc.hw import Dataflow, to_hw
from streamc.kernels import estimate_design
from streamc.planner import (
    Planner,
    device_limits,
    exhaustive_for_budget,
    exhaustive_for_cycles,
    greedy_for_budget,
    greedy_for_cycles,
    plan_folding,
    plan_for_budget,
    plan_for_cycles,
)
from streamc.resources import LUTSpec, ResourceEstimate
from streamc.planner.cost import logic_cells
from streamc.rtl.placement import RES_TYPES
from streamc.stages import PLACEMENTS, Knob, MVAULayer, Stage, divisors
from streamc.timing import Clock
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).parent.parent
DIGITS = ROOT / "build_configs" / "models" / "digits_mlp.onnx"
TFC = ROOT / "tests" / "models" / "tfc_w1a1.onnx"
DIGITS_CNN = ROOT / "tests" / "models" / "cnn" / "digits_cnn.onnx"
UP5K, ECP5 = get_device("ice40-up5k"), get_device("ecp5-85f")


def dataflow(path: Path):
    return to_hw(streamline(tidy(load_onnx(path))))


@pytest.fixture(scope="module")
def digits():
    return dataflow(DIGITS)


@pytest.fixture(scope="module")
def tfc():
    return dataflow(TFC)


@pytest.fixture(scope="module")
def digits_cnn():
    return dataflow(DIGITS_CNN)


def total(flow, device) -> ResourceEstimate:
    """The estimate's own total for the dataflow as it is folded now."""
    rows = estimate_design(flow.stages, [device], 2)
    return sum((row.resources[device.name] for row in rows), ResourceEstimate())


def chain(*stages) -> Dataflow:
    for index, stage in enumerate(stages):
        stage.sources = [index - 1]
    return Dataflow(head=None, stages=list(stages), tail=None, hw_input="x", hw_output="y")


def layer(name: str, mh: int, mw: int, vectors: int = 1) -> MVAULayer:
    """A binarized layer (bipolar in, weights and out): layers of any sizes chain."""
    return MVAULayer(name=name, source=f"/{name}/MatMul", weights=np.ones((mh, mw), dtype=np.int64),
                     in_dtype=BIPOLAR, weight_dtype=BIPOLAR, thresholds=np.zeros((mh, 1), dtype=np.int64),
                     out_dtype=BIPOLAR, out_bias=0, acc_lo=np.full(mh, -mw), acc_hi=np.full(mh, mw), vectors=vectors)


def test_an_mvau_folds_simd_then_pe_and_other_stages_follow(digits):
    first = digits.stages[0]
    assert first.knobs() == (Knob("simd", tuple(divisors(first.mw)), "in"),
                                 Knob("pe", tuple(divisors(first.mh)), "out"),
                                 Knob("ram_style", PLACEMENTS, "none"), Knob("ram_style_thresholds", PLACEMENTS, "none"),
                                 Knob("res_type", RES_TYPES, "none"))
    assert first.knobs(placement=False)[2:] == (Knob("ram_style", ("auto",), "none"),
                                                Knob("ram_style_thresholds", ("auto",), "none"),
                                                Knob("res_type", ("auto",), "none"))
    assert all(stage.knobs() == () for stage in digits.stages if stage.kind != "mvau")


@pytest.mark.parametrize("device", [UP5K, ECP5], ids=lambda d: d.name)
def test_the_plan_costs_what_the_estimate_says_and_leaves_the_dataflow_folded(digits, device):
    for cycles in (4096, 512, 64):
        plan = plan_for_cycles(digits, cycles=cycles, device=device)
        assert plan.folding == {l.name: {k.name: getattr(l, k.name) for k in l.knobs()} for l in digits.layers}
        assert plan.cycles == digits.cycles_per_frame() <= cycles
        assert plan.resources == total(digits, device)


@pytest.mark.parametrize("device", [UP5K, ECP5], ids=lambda d: d.name)
@pytest.mark.parametrize("cycles", [2048, 256, 49])
def test_never_more_luts_than_greedy_at_equal_throughput(tfc, device, cycles):
    greedy = greedy_for_cycles(tfc, cycles=cycles, device=device)
    plan = plan_for_cycles(tfc, cycles=cycles, device=device)
    assert plan.cycles <= cycles and greedy.cycles <= cycles
    assert plan.resources.lut <= greedy.resources.lut


def test_strictly_better_than_greedy_on_tfc(tfc):
    # Greedy raises SIMD to 196 on the 784-input layer; four PEs of 49 cost fewer adders.
    greedy = greedy_for_cycles(tfc, cycles=256, device=UP5K)
    plan = plan_for_cycles(tfc, cycles=256, device=UP5K)
    assert greedy.folding["node_linear"] == {"simd": 196, "pe": 1, "ram_style": "auto", "ram_style_thresholds": "auto"}
    assert plan.resources.lut < 0.9 * greedy.resources.lut


def test_greedy_is_finns_set_folding():
    flow = chain(layer("fc1", 64, 784), layer("fc2", 10, 64))
    plan = greedy_for_cycles(flow, cycles=100, device=UP5K)
    # fc1: no SIMD alone reaches 100 cycles (784 gives 64), so SIMD stays 784 and PE rises to 1.
    auto = {"ram_style": "auto", "ram_style_thresholds": "auto"}
    assert plan.folding == {"fc1": {"simd": 784, "pe": 1, **auto}, "fc2": {"simd": 8, "pe": 1, **auto}}


@pytest.mark.parametrize("device", [UP5K, ECP5], ids=lambda d: d.name)
def test_a_cnn_with_windows_and_pools(digits_cnn, device):
    for cycles in (4096, 576):
        plan = plan_for_cycles(digits_cnn, cycles=cycles, device=device)
        assert plan.resources == total(digits_cnn, device)        # windows, pools, FIFOs and converters priced
        greedy = greedy_for_cycles(digits_cnn, cycles=cycles, device=device)
        assert plan.cycles <= cycles and plan.resources.lut <= greedy.resources.lut
        best = exhaustive_for_cycles(digits_cnn, cycles=cycles, device=device)
        assert best.resources.lut <= plan.resources.lut <= 1.05 * best.resources.lut


def test_a_sliding_window_that_limits_the_throughput_is_named(digits_cnn):
    # One input channel: the first window gives its 3x3 patches one element per cycle, whatever follows.
    message = ("512 cycles per frame cannot be met: sliding window of '/conv1/Conv' takes 576 cycles per frame at "
               "its fastest (1 lanes in, 1 out), 1.12x the 512 the target allows. The fastest folding takes 576 "
               "cycles per frame")
    name = digits_cnn.stages[0].source
    with pytest.raises(FoldingError, match=f"^{re.escape(message.replace('/conv1/Conv', name))}$"):
        plan_for_cycles(digits_cnn, cycles=512, device=UP5K)


@pytest.mark.parametrize("device", [UP5K, ECP5], ids=lambda d: d.name)
@pytest.mark.parametrize("cycles", [1024, 128, 16])
def test_within_5_percent_of_exhaustive(digits, device, cycles):
    # Within the device where some folding fits (the fewest LUTs would take more DSPs than the ECP5 has).
    best = (exhaustive_for_cycles(digits, cycles=cycles, device=device, limits=device_limits(device))
            or exhaustive_for_cycles(digits, cycles=cycles, device=device))
    plan = plan_for_cycles(digits, cycles=cycles, device=device)
    # what both minimize: LUTs, on an iCE40 its logic cells
    used, least = logic_cells(plan.resources, device.family), logic_cells(best.resources, device.family)
    assert least <= used <= 1.05 * least      # exhaustive is the optimum


@pytest.mark.parametrize(("device", "budget"), [(UP5K, 0.8), (UP5K, 0.3), (ECP5, 0.02)],
                         ids=["up5k-0.8", "up5k-0.3", "ecp5-0.02"])
def test_budget_mode_is_as_fast_as_exhaustive_and_no_slower_than_greedy(digits, device, budget):
    limits = device_limits(device, budget=budget)
    best = exhaustive_for_budget(digits, device=device, budget=budget)
    greedy = greedy_for_budget(digits, device=device, budget=budget)
    plan = plan_for_budget(digits, device=device, budget=budget)
    assert plan.fits and plan.resources.lut <= limits["lut"]
    assert all(getattr(plan.resources, key) <= limits[key] for key in limits)
    assert plan.cycles == best.cycles <= greedy.cycles
    # Balanced: nothing faster than the bottleneck needs, so nothing cheaper reaches the same cycles.
    assert plan.resources.lut == plan_for_cycles(digits, cycles=plan.cycles, device=device, limits=limits).resources.lut


def test_budget_mode_takes_more_lanes_for_more_budget(tfc):
    small = plan_for_budget(tfc, device=UP5K, budget=0.4)
    large = plan_for_budget(tfc, device=UP5K, budget=0.9)
    assert large.cycles < small.cycles
    assert small.resources.lut <= 0.4 * UP5K.lut < large.resources.lut <= 0.9 * UP5K.lut


def test_a_block_ram_limit_is_met_by_pricing_block_ram(tfc):
    # The cheapest folding in LUTs keeps 18 block RAMs; allow 15 and the planner trades LUTs for them,
    # nearly as well as trying every folding (of lanes: with every placement too there are too many).
    # (The first layer's weights alone fill 13 block RAMs: with the other layers', no folding fits 14
    # but by keeping weights in logic, more LUTs than there are.)
    free = plan_for_cycles(tfc, cycles=256, device=UP5K, placement=False)
    limits = dict(device_limits(UP5K), bram=free.resources.bram - 3)
    fitted = plan_for_cycles(tfc, cycles=256, device=UP5K, limits=limits, placement=False)
    best = exhaustive_for_cycles(tfc, cycles=256, device=UP5K, limits=limits, placement=False)
    assert fitted.fits and fitted.resources.bram <= limits["bram"] and fitted.cycles <= 256
    free, best, fitted = (logic_cells(plan.resources, UP5K.family) for plan in (free, best, fitted))
    assert free < best <= fitted <= 1.05 * best


def test_a_layer_is_unrolled_only_at_a_clock_its_routes_across_its_graph_close_at():
    # Within half the ECP5-85F the digits MLP's 64 x 64 layer is unrolled at 60 MHz; at 150 MHz the routes from its
    # two large layers' input registers across their adder graphs would not close (DelayModel.spread_ns), so they are
    # folded.
    flow = dataflow(DIGITS)
    layers = [stage for stage in flow.stages if isinstance(stage, MVAULayer)]

    def unrolled(plan):
        return {stage.name for stage in layers
                if (plan.folding[stage.name]["pe"], plan.folding[stage.name]["simd"]) == (stage.mh, stage.mw)}

    assert layers[0].name in unrolled(plan_for_budget(flow, device=ECP5, budget=0.5,
                                                      clock=Clock(mhz=60, family="ecp5")))
    fast = plan_for_budget(flow, device=ECP5, budget=0.5, clock=Clock(mhz=150, family="ecp5"))
    assert fast.cycles > 1 and not unrolled(fast) & {layers[0].name, layers[1].name}


def test_lookup_tables_move_into_the_block_ram_the_folding_leaves_free():
    flow = dataflow(ROOT / "tests" / "models" / "dialects" / "intop_tanh_int8.onnx")
    (tanh,) = flow.tables
    plan = plan_for_budget(flow, device=ECP5, budget=0.1)
    assert plan.folding[tanh.name] == {"ram_style": "block"} == {"ram_style": tanh.ram_style}
    assert plan.resources == total(flow, ECP5)
    tanh.ram_style = "auto"
    in_logic = total(flow, ECP5)
    assert in_logic.lut > plan.resources.lut and in_logic.bram == plan.resources.bram - tanh.elems
    # Block RAM all taken: the table stays where Yosys puts it (in logic, on the ECP5), and the plan
    # still costs what the estimate says.
    for limit in (plan.resources.bram - tanh.elems, 0):
        limits = dict(device_limits(ECP5), bram=limit)
        tight = plan_for_cycles(flow, cycles=plan.cycles, device=ECP5, limits=limits)
        assert tight.fits and tight.resources.bram <= limit and tight.resources == total(flow, ECP5)
    assert tanh.ram_style == "auto"
    assert greedy_for_cycles(flow, cycles=plan.cycles, device=ECP5).folding[tanh.name] == {"ram_style": "auto"}


def test_a_budget_counts_the_luts_a_table_in_block_ram_frees():
    flow = dataflow(ROOT / "tests" / "models" / "dialects" / "intop_tanh_int8.onnx")
    placed = plan_for_cycles(flow, cycles=16, device=ECP5)
    (tanh,) = flow.tables
    assert tanh.ram_style == "block"
    tanh.ram_style = "auto"
    in_logic = total(flow, ECP5).lut
    assert placed.resources.lut < in_logic
    # A budget that no folding of 16 cycles or fewer fits with the table in logic (the least LUTs at
    # 16 cycles are those): the search counts the LUTs the table frees in block RAM.
    budget = (placed.resources.lut + 1) / ECP5.lut
    assert budget * ECP5.lut < in_logic
    plan = plan_for_budget(flow, device=ECP5, budget=budget)
    assert plan.cycles <= placed.cycles and plan.resources.lut <= budget * ECP5.lut
    assert plan.resources == total(flow, ECP5)


def test_unreachable_target_names_the_layer_and_by_how_much():
    flow = chain(layer("conv", 8, 9, vectors=64), layer("fc", 10, 64))
    message = ("target_fps=1e+07 at clock_mhz=100 cannot be met: node '/conv/MatMul' (MatMul 8x9) at its fastest "
               "folding (simd=9, pe=8) takes 64 cycles per frame, 6.4x the 10 the target allows. The fastest folding "
               "takes 64 cycles per frame")
    with pytest.raises(FoldingError, match=f"^{re.escape(message)}$"):
        plan_for_cycles(flow, cycles=10, device=UP5K, target="target_fps=1e+07 at clock_mhz=100")


@dataclass
class Fixed(Stage):
    """A stage kind without knobs that the planner cannot price: it keeps its cycles."""

    name: str = "mystery"
    count: int = 64
    dtype: DataType = INT(16)
    elems: int = 1
    sources: list = None
    fixed_cycles: int = 500
    in_count = out_count = property(lambda self: self.count)
    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)

    def cycles(self) -> int:
        return self.fixed_cycles

    def describe(self) -> str:
        return "stage 'mystery'"

    def emulate(self, x: np.ndarray) -> np.ndarray:
        return x

    def need(self, port: int) -> np.ndarray:
        return np.arange(self.out_count) + 1

    def components(self) -> list:
        """No hardware: the tests that plan with it price it with a cost model of their own."""
        return []


@pytest.fixture
def stage_only_pricing(monkeypatch):
    """Each stage priced on its own, no FIFOs: a cost model for kinds the estimate cannot price."""
    def specs(stage):
        if isinstance(stage, MVAULayer):
            return real(stage)
        return lambda elems: (LUTSpec(in_bits=1, out_bits=1, elems=elems), [(elems, 1)], (stage.out_elems, 1))

    real = kernels.stage_specs
    monkeypatch.setattr(kernels, "stage_specs", specs)
    monkeypatch.setattr(kernels, "link_specs", lambda producer, port, depth: [])


@pytest.fixture(scope="module")
def residual():
    return dataflow(ROOT / "tests" / "models" / "cnn" / "residual_block.onnx")


@pytest.fixture(scope="module")
def concat():
    return dataflow(ROOT / "tests" / "models" / "cnn" / "concat_block.onnx")


def resnet8(tmp_path_factory, **spec) -> Dataflow:
    path = tmp_path_factory.mktemp("resnet8") / "resnet8.onnx"
    onnx.save(make_resnet8(ResNetSpec(**spec)), path)
    return dataflow(path)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    return resnet8(tmp_path_factory)


@pytest.mark.parametrize("name", ["residual", "concat", "resnet"])
def test_a_branching_design_costs_what_the_estimate_says_for_any_folding(name, request):
    # The planner prices a branching design as a sum of per-stage and per-link terms: for any
    # folding, that sum is the estimate's whole-design total.
    flow = request.getfixturevalue(name)
    rng = np.random.default_rng(7)
    for device in (UP5K, ECP5):
        chain = Planner(flow, device, 2)
        assert not chain.chain
        for _ in range(4):
            assignment = [options[rng.integers(len(options))] for options in chain.options]
            resources, cycles = chain.evaluate(assignment)
            chain.apply(assignment)
            assert resources == total(flow, device) and cycles == flow.cycles_per_frame()


@pytest.mark.parametrize("device", [UP5K, ECP5], ids=lambda d: d.name)
@pytest.mark.parametrize(("name", "cycles"), [("residual", 36864), ("residual", 4608), ("concat", 4608)])
def test_a_branching_design_is_folded_as_well_as_trying_every_folding(name, cycles, device, request):
    # More lanes are not always dearer: on the ECP5 the residual block's fewest LUTs at 36864 cycles
    # take 6 and 8 SIMD lanes where 2 and 4 would do (so every folding within the target is priced).
    flow = request.getfixturevalue(name)
    limits = device_limits(device)
    best = exhaustive_for_cycles(flow, cycles=cycles, device=device, limits=limits, placement=False)
    plan = plan_for_cycles(flow, cycles=cycles, device=device, limits=limits, placement=False)
    assert plan.resources == total(flow, device) and plan.cycles <= cycles
    assert (plan.resources.lut, plan.resources.ff) == (best.resources.lut, best.resources.ff)
    placed = plan_for_cycles(flow, cycles=cycles, device=device, limits=limits)
    greedy = greedy_for_cycles(flow, cycles=cycles, device=device)
    assert placed.resources.lut <= plan.resources.lut <= greedy.resources.lut


# On the UP5K the budget counts logic cells, which its flip-flops take too: half the device is too little.
@pytest.mark.parametrize(("device", "budget"), [(UP5K, 0.6), (ECP5, 0.5)], ids=["ice40-up5k", "ecp5-85f"])
def test_a_branching_design_within_a_budget_is_as_fast_as_trying_every_folding(residual, device, budget):
    plan = plan_for_budget(residual, device=device, budget=budget, placement=False)
    best = exhaustive_for_budget(residual, device=device, budget=budget, placement=False)
    assert plan.cycles == best.cycles and plan.fits and plan.resources == total(residual, device)


def test_resnet8_is_planned_at_a_target_and_within_a_budget_on_the_ecp5(resnet):
    cycles = target_cycles(target_fps=100, clock_mhz=100)
    plan = plan_for_cycles(resnet, cycles=cycles, device=ECP5, limits=device_limits(ECP5))
    assert plan.fits and plan.cycles <= cycles and plan.resources == total(resnet, ECP5)
    greedy = greedy_for_cycles(resnet, cycles=cycles, device=ECP5)
    assert plan.resources.lut < greedy.resources.lut
    fast = plan_for_budget(resnet, device=ECP5, budget=0.5)
    limits = device_limits(ECP5, budget=0.5)
    assert fast.fits and not [key for key in limits if getattr(fast.resources, key) > limits[key]]
    assert fast.cycles < plan.cycles and fast.resources == total(resnet, ECP5)


def test_resnet8_names_what_the_up5k_lacks(resnet, tmp_path_factory):
    # Its weights alone need more block RAM than the UP5K has. A narrower ResNet-8 on 16x16 images fits its LUTs and
    # block RAM, but not its logic cells, which its flip-flops take too (its windows, adds and FIFOs alone take some
    # 4400 LUTs): refused at 100 frames/s and within 90 % of the cells, naming them.
    with pytest.raises(FoldingError, match=r"does not fit the ice40-up5k \(iCE40UP5K\) within budget=0.5, .* block RAMs "
                                           r"where 30 are available"):
        plan_for_budget(resnet, device=UP5K, budget=0.5)
    small = resnet8(tmp_path_factory, widths=(4, 4, 8, 8), image=16, weight_bits=2)
    cycles = target_cycles(target_fps=100, clock_mhz=100)
    with pytest.raises(FoldingError, match=r"needs \d+ logic cells .* where 5280 are available \(\d+ over\)"):
        plan_for_cycles(small, cycles=cycles, device=UP5K, limits=device_limits(UP5K))
    with pytest.raises(FoldingError, match=r"needs \d+ logic cells .* where 4752 \(90% of 5280\) are allowed"):
        plan_for_budget(small, device=UP5K, budget=0.9)


@pytest.mark.usefixtures("stage_only_pricing")
def test_an_unknown_stage_keeps_its_cycles():
    flow = chain(layer("fc1", 64, 64), Fixed(), layer("fc2", 10, 64))
    plan = plan_for_cycles(flow, cycles=512, device=UP5K)
    assert plan.cycles == 512
    message = ("100 cycles per frame cannot be met: stage 'mystery' takes 500 cycles per frame at its fastest (1 lanes "
               "in, 1 out), 5x the 100 the target allows. The fastest folding takes 500 cycles per frame")
    with pytest.raises(FoldingError, match=f"^{re.escape(message)}$"):
        plan_for_cycles(flow, cycles=100, device=UP5K)


def test_a_design_too_large_for_the_device_names_the_resource_and_the_layer(tfc):
    pattern = (r"node '\S+' \(MatMul 64x784\) does not fit the ice40-up5k \(iCE40UP5K\) at 4 cycles per frame, even "
               r"folded as cheaply as possible: the design needs (\d+) logic cells \(LUT4s, and the flip-flops that take "
               r"a cell of their own\) where 5280 are available \((\d+) over\).*; this layer alone takes (\d+) logic cells")
    with pytest.raises(FoldingError, match=f"^{pattern}$") as info:
        plan_for_cycles(tfc, cycles=4, device=UP5K, limits=device_limits(UP5K))
    used, over, alone = (int(v) for v in re.match(pattern, str(info.value)).groups())
    assert used - 5280 == over and 0 < alone < used


def test_a_budget_nothing_fits_says_so(tfc):
    with pytest.raises(FoldingError, match=r"^node '\S+' \(MatMul \d+x\d+\) does not fit the ice40-up5k \(iCE40UP5K\) "
                                           r"within budget=0.05, even folded as cheaply as possible \(which takes \d+ "
                                           r"cycles per frame\): the design needs \d+ logic cells \(LUT4s, and the "
                                           r"flip-flops that take a cell of their own\) where 264 \(5% of 5280\) are "
                                           r"allowed \(\d+ over\); this layer alone takes \d+ logic cells$"):
        plan_for_budget(tfc, device=UP5K, budget=0.05)


def config(**values):
    base = dict(target_fps=None, budget=None, clock_mhz=100.0, devices=["ice40-up5k", "ecp5-85f"], fifo_depth=2, board=None)
    base.update(values)
    return SimpleNamespace(**base, model_fields_set=set(values))


def test_plan_folding_for_a_target_prices_on_the_first_device(digits):
    plan = plan_folding(digits, config(target_fps=1e6, devices=["ecp5-85f"]))
    assert plan.device == "ecp5-85f" and plan.cycles <= 100
    assert plan == plan_for_cycles(digits, cycles=100, device=ECP5)


def test_plan_folding_checks_the_fit_only_for_named_devices(tfc):
    assert not plan_folding(tfc, config(target_fps=25e6)).fits      # default device list: no check
    with pytest.raises(FoldingError, match=r"^node .* does not fit the ice40-up5k \(iCE40UP5K\) at target_fps=2\.5e\+07 "
                                           r"at clock_mhz=100 \(4 cycles per frame\), even folded as cheaply as "
                                           r"possible: .*$"):
        plan_folding(tfc, config(target_fps=25e6, devices=["ice40-up5k"]))


def test_plan_folding_for_a_budget(digits):
    plan = plan_folding(digits, config(budget=0.5, devices=["ice40-up5k"]))
    assert plan == plan_for_budget(digits, device=UP5K, budget=0.5)


def test_plan_folding_refuses_less_than_a_cycle_per_frame(digits):
    with pytest.raises(FoldingError, match=r"^target_fps=2e\+08 at clock_mhz=100 leaves less than one cycle per frame"):
        plan_folding(digits, config(target_fps=2e8))


def test_a_board_shell_keeps_its_share_of_the_device_free(tfc, tmp_path):
    from streamc.boards import get_board, shell_resources
    from streamc.pipeline.config import BuildConfig
    from streamc.protocol import FrameFormat

    common = dict(model=str(TFC), output_dir=str(tmp_path), devices=["ice40-up5k"], budget=0.9)
    alone = plan_folding(tfc, BuildConfig(**common))
    assert alone.resources.bram == UP5K.bram       # the accelerator alone takes every block RAM
    plan = plan_folding(tfc, BuildConfig(**common, board="icebreaker"))
    shell = shell_resources(get_board("icebreaker"), FrameFormat.from_dataflow(tfc))
    assert shell.bram == 1 and shell.lut > 100
    assert plan.resources.bram + shell.bram <= UP5K.bram and plan.resources.lut + shell.lut <= UP5K.lut
    assert device_limits(UP5K, reserved=shell) == dict(device_limits(UP5K), lut=UP5K.lut - shell.lut,
                                                       ff=UP5K.ff - shell.ff, bram=UP5K.bram - 1)


def test_a_target_on_the_ice40_is_held_to_its_logic_cells_as_a_budget_is(tmp_path):
    # Pipelined for 50 MHz, the digits MLP's 64-cycle folding is 4,176 LUTs and 2,544 flip-flops: within the LUTs,
    # over the cells. The advice names the folding a budget search finds.
    with pytest.raises(FoldingError, match=r"\(64 cycles per frame\), even folded as cheaply as possible: the design "
                                           r"needs \d+ logic cells .* where 5280 are available .*The fastest that fits "
                                           r"the ice40-up5k takes 128 cycles per frame"):
        streamc.compile(ROOT / "build_configs" / "models" / "digits_mlp.onnx", device="ice40-up5k", clock_mhz=50,
                        target_fps=781_250, output_dir=tmp_path / "out")
