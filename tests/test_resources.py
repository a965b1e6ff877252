"""The resource models against the stored Yosys calibration data (no Yosys run here).

The calibration designs are split in two (the rule is :func:`calibrate_resources.held_out_keys`, and
:func:`test_held_out_designs_follow_the_rule` restates it): in each kernel kind, the designs ordered by the
SHA-1 of their key (``calibrate_resources.key_of``, the same on both devices) and the first
``max(1, round(0.2 * n))`` of the kind's ``n`` are held out; the fit sees only the others. The training
designs are held to +-15 % one by one (``KNOWN_OFF`` lists those that miss); the held-out ones, an
out-of-sample figure, by the share within +-15 % (``HELD_OUT_BARS``).
"""

import hashlib
import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from streamc import resources
from streamc.datatypes import from_name
from streamc.devices import DEVICES, get_device
from streamc.errors import ConfigError

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
CALIBRATION = BENCHMARKS / "calibration"
#: The Gowin family's designs (a sweep without its slowest designs) are checked in tests/test_gowin.py.
CALIBRATED_DEVICES = ("ice40-up5k", "ecp5-85f")
RECORDS_BY_DEVICE = {device: json.loads((CALIBRATION / f"{device}.json").read_text()) for device in CALIBRATED_DEVICES}
RECORDS = [record for device in CALIBRATED_DEVICES for record in RECORDS_BY_DEVICE[device]]


def _calibration_script():
    # The fit and its split live in the benchmark script, which is not a package: loaded by path.
    spec = importlib.util.spec_from_file_location("calibrate_resources", BENCHMARKS / "calibrate_resources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


calibrate = _calibration_script()
HELD_OUT_KEYS = calibrate.held_out_keys(RECORDS)
TRAINING = [record for record in RECORDS if not calibrate.is_held_out(record, HELD_OUT_KEYS)]
HELD_OUT = [record for record in RECORDS if calibrate.is_held_out(record, HELD_OUT_KEYS)]

# Training designs whose LUT or FF estimate is outside +-15 % (benchmarks/calibrate_resources.py prints the
# table; 33 of 614): width converters with a ring (no ratio between the widths) on the ECP5 (ABC9 maps
# their read multiplexers and handshake tables into LUT5-LUT7 for depth, unevenly: 163 LUTs for 3 bits 10 -> 4,
# 48 for 3 bits 6 -> 4), requantizing tables read from a ROM kept in logic, a narrow residual add that Yosys
# folds into a few LUTs, some small MVAUs, and ECP5 designs where ABC's depth-first mapping varies with size
# (FIFOs of 300 and 384 words in LUT RAM, a 5-output fork). Strict: fixing one fails here. Held-out designs are not
# listed: their misses count against HELD_OUT_BARS.
KNOWN_OFF = {
    ('ice40-up5k', 'mvau', 64, 256, 4, 64, 'BIPOLAR', 'BIPOLAR'),
    ('ice40-up5k', 'mvau', 32, 64, 1, 4, 'INT8', 'INT8'),
    ('ice40-up5k', 'mvau', 32, 392, 8, 28, 'BIPOLAR', 'BIPOLAR'),
    ('ice40-up5k', 'mvau', 10, 32, 5, 1, 'UINT2'),
    ('ice40-up5k', 'lut', 'INT8', 'UINT4', '2'),
    ('ice40-up5k', 'lut', 'UINT8', 'UINT4', '1', '0.05'),
    ('ice40-up5k', 'add', 'INT3', 'INT4', '5', '1', '4'),
    # A 32-bit FIFO of four beats in flip-flops: its four-way read multiplexers took 116 LUTs, 96 estimated (0.83;
    # 0.88 before the wide FIFOs' counts per side joined the fit, whose five-way ones take fewer LUTs a way).
    ('ice40-up5k', 'fifo', '32', '4'),
    ('ecp5-85f', 'mvau', 16, 16, 2, 2, 'INT4', 'lut'),
    ('ecp5-85f', 'mvau', 64, 16, 1, 16, 'UINT2', 'UINT2'),
    ('ecp5-85f', 'mvau', 32, 64, 2, 16, 'BIPOLAR', 'BIPOLAR'),
    ('ecp5-85f', 'mvau', 384, 768, 1, 8, 'BIPOLAR', 'BIPOLAR', 'block', 'block'),
    ('ecp5-85f', 'mvau', 10, 256, 2, 32, 'BIPOLAR', 'block'),
    # Signed LUT multiplies made the critical stage by a registered tree: abc9 maps them for depth in PFUMX/L6MUX21
    # wide LUTs (893 LUTs unregistered, 1323 here), which UINT4 inputs on the ECP5 do not show.
    ('ecp5-85f', 'mvau', 16, 64, 2, 8, 'INT4', 'lut', 'block', 2),
    # The same design's 920 LUTs on the iCE40 are its unregistered count too: the model's signed LUT multiply, not the
    # tree registers (779 estimated, 0.85).
    ('ice40-up5k', 'mvau', 16, 64, 2, 8, 'INT4', 'lut', 'block', 2),
    ('ecp5-85f', 'lut', 'UINT8', 'UINT8', '1', '0.37', '3'),
    ('ecp5-85f', 'lut', 'INT8', 'INT8', '1', '0.8', '-2'),
    ('ecp5-85f', 'lut', 'INT8', 'UINT8', '2', '1.3', '128'),
    ('ecp5-85f', 'lut', 'INT8', 'INT8', '1', '0.5'),
    ('ecp5-85f', 'lut', 'UINT6', 'UINT6', '4', '0.7', '5'),
    ('ecp5-85f', 'lut', 'UINT8', 'UINT8', '1', '2.0', '-224'),
    ('ecp5-85f', 'lut', 'UINT8', 'UINT8', '1', '1.8', '-200'),
    ('ecp5-85f', 'lut', 'INT8', 'INT8', '1', '0.8', '-2', 'distributed'),
    ('ecp5-85f', 'window', '[11, 9, 6]', '[3, 3]', '[2, 2]', '[0, 0, 0, 0]', 'UINT8', '1'),
    ('ecp5-85f', 'pool', '12', '2', '8', 'UINT2', '12'),
    ('ecp5-85f', 'pool', '48', '9', '9', 'BIPOLAR', '1'),
    ('ecp5-85f', 'fifo', '1', '384'),
    ('ecp5-85f', 'fifo', '2', '300'),
    ('ecp5-85f', 'convert', '4', '4', '3'),
    ('ecp5-85f', 'convert', '4', '3', '4'),
    ('ecp5-85f', 'convert', '8', '3', '2'),
    ('ecp5-85f', 'convert', '3', '10', '4'),
    ('ecp5-85f', 'threshold', '16', '4', 'INT5', 'UINT2', 'True'),
    ('ecp5-85f', 'fork', '2', '2', '5'),
}

# The least share of the held-out designs (all three devices) within +-15 %, per resource and for LUT and FF
# together. Measured with the shipped coefficients (2026-11-29): LUT 87.9 %, FF 99.1 %, both 87.0 % of 223; the
# bars sit at or just below, so a refit or model change that loses accuracy out of sample fails.
HELD_OUT_BARS = {"lut": 0.87, "ff": 0.99, "both": 0.87}


def _key(record):
    p = record["params"]
    if record["kernel"] == "mvau":
        output = tuple(p[k] for k in ("out_dtype", "rounding") if k in p)
        placed = tuple(p[k] for k in ("res_type", "ram_style", "ram_style_thresholds", "tree_every") if k in p)
        return (record["device"], "mvau", p["mh"], p["mw"], p["pe"], p["simd"], p["in_dtype"], *output, *placed)
    return (record["device"], record["kernel"], *(str(v) for v in p.values()))


def _estimate(record):
    spec = resources.spec_from_dict(record["kernel"], record["spec"])
    return resources.estimate_kernel(spec, resources.family_of(record["device"]))


# A one-bit RAM deeper than one iCE40 block: Yosys puts a 4608 x 1 ring in two blocks, where the model counts
# three of 2048 x 2 (how memory_libmap packs it is not modelled yet). Strict: fixing it fails here.
BLOCKS_KNOWN_OFF = {
    ('ice40-up5k', 'window', '[12, 12, 96]', '[2, 2]', '[2, 2]', '[0, 0, 0, 0]', 'BIPOLAR', '1'),
}


# Block RAMs, DSPs and LUT RAM are counted, not fitted: every design, held out or not.
@pytest.mark.parametrize("record", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="known off"))
                                    if _key(r) in BLOCKS_KNOWN_OFF else r for r in RECORDS],
                         ids=[str(_key(r)) for r in RECORDS])
def test_block_ram_dsp_and_lut_ram_are_exact(record):
    estimate = _estimate(record)
    assert (estimate.bram, estimate.dsp, estimate.lutram) == (
        record["bram"], record["dsp"], record["cells"].get("TRELLIS_DPR16X4", 0))


@pytest.mark.parametrize("record", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason="known off"))
                                    if _key(r) in KNOWN_OFF else r for r in TRAINING],
                         ids=[str(_key(r)) for r in TRAINING])
def test_training_designs_lut_and_ff_within_15_percent(record):
    estimate = _estimate(record)
    assert estimate.lut == pytest.approx(record["lut"], rel=0.15, abs=2)
    assert estimate.ff == pytest.approx(record["ff"], rel=0.15, abs=2)


def test_known_off_lists_only_training_designs():
    assert KNOWN_OFF <= {_key(record) for record in TRAINING}


def test_held_out_designs_within_15_percent_at_the_bar():
    ok = {what: [calibrate.within(getattr(_estimate(r), what), r[what]) for r in HELD_OUT] for what in ("lut", "ff")}
    ok["both"] = [lut and ff for lut, ff in zip(ok["lut"], ok["ff"])]
    shares = {what: sum(hits) / len(HELD_OUT) for what, hits in ok.items()}
    assert all(shares[what] >= bar for what, bar in HELD_OUT_BARS.items()), shares


def test_held_out_designs_follow_the_rule():
    by_kind: dict[str, set[str]] = {}
    for record in RECORDS:
        by_kind.setdefault(record["kernel"], set()).add(calibrate.key_of(record["kernel"], record["params"]))
    for kind, keys in by_kind.items():
        ordered = sorted(keys, key=lambda key: hashlib.sha1(key.encode()).hexdigest())
        count = max(1, round(0.2 * len(keys)))
        assert set(ordered[:count]) == HELD_OUT_KEYS & keys, kind
    # Every kind has held-out designs on every device, about a fifth of them.
    for device in CALIBRATED_DEVICES:
        for kind in by_kind:
            of_kind = [r for r in RECORDS_BY_DEVICE[device] if r["kernel"] == kind]
            held = [r for r in of_kind if calibrate.is_held_out(r, HELD_OUT_KEYS)]
            assert 1 <= len(held) and len(held) / len(of_kind) <= 0.25, (device, kind)


def _flat(coefficients: dict) -> dict:
    return {(family, kernel, what, name): value for family, kernels in coefficients.items()
            for kernel, whats in kernels.items() for what, values in whats.items() for name, value in values.items()}


def test_shipped_coefficients_are_the_fit_of_the_training_designs_alone():
    families = {resources.family_of(device) for device in CALIBRATED_DEVICES}
    shipped = _flat({family: resources.COEFFICIENTS[family] for family in families})
    assert _flat(calibrate.fit(list(CALIBRATED_DEVICES), RECORDS_BY_DEVICE)) == pytest.approx(shipped, abs=2e-4)
    # Held-out designs whose counts were three times what Yosys gave do not move the fit: it never sees them.
    skewed = {device: [dict(r, lut=3 * r["lut"], ff=3 * r["ff"]) if calibrate.is_held_out(r, HELD_OUT_KEYS) else r
                       for r in records] for device, records in RECORDS_BY_DEVICE.items()}
    assert _flat(calibrate.fit(list(CALIBRATED_DEVICES), skewed)) == pytest.approx(shipped, abs=2e-4)


@pytest.mark.parametrize("width, depth, rom, family, expected", [
    (16, 256, True, "ice40", resources.MemoryMapping("bram", 1, "SB_RAM40_4K")),   # 256 bits of logic cost > 64
    (16, 64, True, "ice40", resources.MemoryMapping("logic")),                      # 64 is not cheaper than 64
    (32, 128, True, "ice40", resources.MemoryMapping("bram", 2, "SB_RAM40_4K")),
    (8, 16, False, "ice40", resources.MemoryMapping("bram", 1, "SB_RAM40_4K")),     # a RAM costs a bit per bit in logic
    # Ties with a DP16KD: LUT RAM comes first.
    (8, 168, False, "ecp5", resources.MemoryMapping("lutram", 22, "TRELLIS_DPR16X4", 11)),
    (64, 64, False, "ecp5", resources.MemoryMapping("bram", 2, "PDPW16KD")),        # 36 bits wide
    # CNV-w1a1's node_linear_1 at a 20 % ECP5 budget: 16 banks of 2,048 words, 8 bits each packed
    # nine to a block (Yosys built 15 blocks and a 16-input read multiplexer).
    (8, 32768, True, "ecp5", resources.MemoryMapping("bram", 15, "DP16KD", 16)),
])
def test_memory_mapping(width, depth, rom, family, expected):
    assert resources.memory_mapping(width=width, depth=depth, rom=rom, family=family) == expected


@pytest.mark.parametrize("a, b, result, family, expected", [
    (4, 4, 8, "ice40", 0), (8, 8, 16, "ice40", 1), (19, 9, 26, "ice40", 2), (4, 4, 8, "ecp5", 1),
    (1, 8, 9, "ecp5", 0), (8, 8, 16, "ice40", 1),
])
def test_dsp_count(a, b, result, family, expected):
    assert resources.dsp_count(a, b, result, family) == expected


def test_no_dsp_without_hard_multipliers():
    assert resources.dsp_count(8, 8, 16, "ice40", dsp=False) == 0


def test_every_device_names_its_sources():
    for device in DEVICES.values():
        assert set(device.sources) == {"lut", "ff", "bram", "spram", "dsp"}


def test_unknown_device():
    with pytest.raises(ConfigError, match=r"^device must be one of ecp5-25f, ecp5-45f, ecp5-85f, gowin-gw1nr-9, "
                                          r"gowin-gw2a-18, ice40-hx8k, ice40-up5k, not 'ice40-lp1k'$"):
        get_device("ice40-lp1k")


def test_table_pieces_follow_the_contents():
    rng = np.random.default_rng(1)
    # Random contents: every 16-word piece of every bit differs, and every select is needed.
    assert resources.table_pieces(list(rng.integers(0, 256, 256)), 8) == (8 * 16, 8 * 15)
    # A constant bit costs nothing; a bit that is one address bit is one piece and no select.
    assert resources.table_pieces([0] * 256, 8) == (0, 0)
    assert resources.table_pieces([(k >> 2) & 1 for k in range(256)], 1) == (1, 0)
    # A step (the top bit of a monotone table): one piece where it changes, a select per level.
    leaves, selects = resources.table_pieces([int(k >= 100) for k in range(256)], 1)
    assert leaves == 1 and selects == 4


def test_a_monotone_table_costs_less_than_a_random_one():
    from streamc.rtl.lut import LookupTable

    codes = np.arange(-128, 128)
    tables = {"ramp": np.clip(np.round(codes * 0.5) + 3, -128, 127),
              "random": np.random.default_rng(2).integers(-128, 128, 256)}
    costs = {name: resources.estimate_kernel(resources.spec_of_unit(LookupTable(
        table=table.astype(np.int64), in_dtype=from_name("INT8"), out_dtype=from_name("INT8"), elems=1,
        frame_elems=16)), "ecp5").lut for name, table in tables.items()}
    assert costs["ramp"] < costs["random"] / 3


def _weight_rom_reference(unit) -> tuple[int, int]:
    """Live and varying bit columns of an MVAU's weight ROM, from the words the unit stores."""
    rows, width = unit.weight_rom_rows, unit.in_elems * unit.out_elems * unit.weight_dtype.bitwidth
    columns = [{(row >> bit) & 1 for row in rows} for bit in range(width)]
    return resources.rom_live_bits(rows, width), sum(len(column) > 1 for column in columns)


@pytest.mark.parametrize("seed", range(6))
def test_an_mvau_spec_at_any_simd_is_read_off_one_unit_per_pe(seed):
    # The planner builds a layer once per PE and reads every SIMD's spec off that unit (MVAUSpecs): the
    # same spec as the unit built at that SIMD, its weight ROM's columns as the unit lays out its words.
    from streamc.rtl.mvau import MatrixVectorUnit

    rng = np.random.default_rng(seed)
    in_dt, w_dt = (from_name(name) for name in rng.choice(["BIPOLAR", "UINT2", "INT2", "INT3"], 2))
    mh, mw = int(rng.choice([4, 6, 8])), int(rng.choice([6, 8, 12]))
    values = np.array([-1, 1]) if w_dt.bipolar else np.arange(w_dt.min, w_dt.max + 1)
    # Few distinct rows and columns, and zero columns, so that lanes and ROM columns repeat.
    weights = rng.choice(values, (3, 4))[rng.integers(0, 3, mh)][:, rng.integers(0, 4, mw)]
    if not w_dt.bipolar:
        weights[:, rng.integers(0, mw)] = 0
    levels = 1 if rng.integers(2) else 3
    thresholds = np.sort(rng.integers(-mw * 4, mw * 4, (mh, levels)), axis=1)
    out_dt = from_name("BIPOLAR" if levels == 1 else "UINT2")

    def unit(pe, simd):
        return MatrixVectorUnit(weights=weights, in_dtype=in_dt, weight_dtype=w_dt, pe=pe, simd=simd,
                                thresholds=thresholds, out_dtype=out_dt)

    for pe in (d for d in range(1, mh + 1) if mh % d == 0):
        specs = resources.MVAUSpecs(unit(pe, mw))
        for simd in (d for d in range(1, mw + 1) if mw % d == 0):
            built = unit(pe, simd)
            spec = specs.at(simd)
            assert spec == resources.MVAUSpec.of_unit(built)
            assert (spec.weight_rom_live, spec.weight_rom_varying) == _weight_rom_reference(built)
            assert (spec.live_lanes, spec.distinct_lanes) == _lanes_reference(weights, pe, simd)


def _lanes_reference(weights: np.ndarray, pe: int, simd: int) -> tuple[int, int]:
    """Lanes whose weight is not 0 in some word, and of those the distinct ones at each SIMD position, from each
    lane's weights over the ROM's words (lane ``(j, k)`` holds weight ``(n * PE + j, s * SIMD + k)``)."""
    lanes = {(j, k): tuple(weights[j::pe, k::simd].ravel()) for j in range(pe) for k in range(simd)}
    live = {lane: words for lane, words in lanes.items() if any(words)}
    return len(live), len({(k, words) for (_, k), words in live.items()})


def test_correction_points_are_priced_by_the_rom_columns_that_vary():
    # Channels that share their correction points, padded with one never reached: Yosys keeps only the ROM's
    # varying columns (onnxruntime's u8 MLP's first layer: 818 LUTs estimated against Yosys' 885 on the UP5K
    # with them, 1,628 with every column of its 200 counted; benchmarks/bench_estimates.py).
    from dataclasses import replace

    from streamc.rtl.mvau import MatrixVectorUnit
    from streamc.rtl.requant import NEVER, Requant

    weights = np.random.default_rng(0).integers(-8, 8, (8, 16))
    requant = Requant(multiplier=np.full(8, 977), offset=np.full(8, 5000), shift=7, rounding="HALF_EVEN",
                      lo=-128, hi=127, raise_at=np.array([[40, 90, NEVER]] * 7 + [[40, 91, 300]]),
                      lower_at=np.array([[39, 89]] * 8))
    unit = MatrixVectorUnit(weights=weights, in_dtype=from_name("INT4"), weight_dtype=from_name("INT4"), pe=2,
                            simd=4, thresholds=None, out_dtype=from_name("INT8"), requant=requant)
    spec = resources.MVAUSpec.of_unit(unit)
    rows, width = unit.correction_rom_rows, 2 * 5 * unit.acc_shape.width
    columns = [{(row >> bit) & 1 for row in rows} for bit in range(width)]
    assert spec.rq_correction_live == resources.rom_live_bits(rows, width) > 0
    assert spec.rq_correction_varying == sum(len(column) > 1 for column in columns) < width
    every_column = replace(spec, rq_correction_live=-1, rq_correction_varying=-1)
    for family in ("ice40", "ecp5"):
        priced, whole = (resources.estimate_kernel(s, family) for s in (spec, every_column))
        assert priced.lut < whole.lut and priced.ff < whole.ff


def _weights_and_thresholds(seed: int, low: int, high: int, shape: tuple[int, int]):
    """Random weights in ``low..high - 1`` and three sorted thresholds a channel, drawn in that order."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(low, high, shape)
    return weights, np.sort(rng.integers(-40, 40, (shape[0], 3)), axis=1)


def _mvau_flip_flops(weights, thresholds, in_type: str, weight_type: str, family: str, **options):
    """An MVAU of 4 PEs and 8 lanes with 2-bit outputs, and its estimated flip-flops on ``family``."""
    from streamc.rtl.mvau import MatrixVectorUnit

    unit = MatrixVectorUnit(weights=weights, in_dtype=from_name(in_type), weight_dtype=from_name(weight_type), pe=4,
                            simd=8, thresholds=thresholds, out_dtype=from_name("UINT2"), **options)
    return unit, resources.estimate_kernel(resources.spec_of_unit(unit), family).ff


def test_an_mvau_counts_the_skid_register_of_its_flow_control():
    # Yosys 0.70 on this MVAU (4 PEs, 2-bit outputs) inside a one-stage accelerator: 376 and 385 flip-flops on the
    # UP5K, 312 and 321 on the ECP5-85F, moved by its consumer's ready and by a skid register: that register and
    # its valid bit.
    weights, thresholds = _weights_and_thresholds(1, -2, 2, (16, 32))
    for family in ("ice40", "ecp5"):
        (_, with_skid), (_, without) = (_mvau_flip_flops(weights, thresholds, "UINT2", "INT2", family, flow_control=flow)
                                        for flow in ("skid", "stall"))
        assert 8 <= with_skid - without <= 10


def test_an_mvau_moved_by_credits_counts_its_output_queue():
    # Yosys 0.70 on this MVAU alone (4 PEs, 2-bit outputs, a register after every adder level), moved by its
    # consumer's ready and by credits (a queue of 4 beats): 444 and 467 LUTs, 505 and 507 flip-flops on the
    # ECP5-85F (the queue in two LUT RAMs); 629 and 681 LUTs, 569 and 603 flip-flops on the UP5K (in flip-flops).
    weights, thresholds = _weights_and_thresholds(1, -2, 2, (16, 32))
    from streamc.rtl.mvau import MatrixVectorUnit

    def estimate(flow: str, family: str):
        unit = MatrixVectorUnit(weights=weights, in_dtype=from_name("UINT2"), weight_dtype=from_name("INT2"), pe=4,
                                simd=8, thresholds=thresholds, out_dtype=from_name("UINT2"), tree_every=1,
                                flow_control=flow)
        return unit, resources.estimate_kernel(resources.spec_of_unit(unit), family)

    (unit, ecp5), (_, ecp5_stall) = estimate("credit", "ecp5"), estimate("stall", "ecp5")
    assert unit.queue_depth == 4
    assert ecp5.lutram - ecp5_stall.lutram == 2
    assert 10 <= ecp5.lut - ecp5_stall.lut <= 35
    (_, ice40), (_, ice40_stall) = estimate("credit", "ice40"), estimate("stall", "ice40")
    assert 25 <= ice40.ff - ice40_stall.ff <= 45
    assert 35 <= ice40.lut - ice40_stall.lut <= 70


def test_an_mvau_counts_the_registers_of_its_split_multiplies():
    # Yosys 0.70 on this MVAU (32 lanes of UINT4 x INT4 in LUTs) inside a one-stage accelerator, ECP5-85F: 873
    # flip-flops, 1,326 with multiply_register (the first partial sums of each lane's multiply and the control).
    weights, thresholds = _weights_and_thresholds(1, -8, 8, (16, 32))
    (split, with_split), (whole, without) = (
        _mvau_flip_flops(weights, thresholds, "UINT4", "INT4", "ecp5", res_type="lut", operand_register=True, tree_every=2,
                         multiply_register=registered) for registered in (True, False))
    assert split.product_stage and not whole.product_stage
    assert 400 <= with_split - without <= 500


def test_an_mvau_counts_the_registers_of_its_weight_rom_banks():
    # Yosys 0.70 on this MVAU (a 128-word weight ROM in logic, four banks with operand_register) inside a
    # one-stage accelerator: 493 and 852 flip-flops on the ECP5-85F, 514 and 873 on the UP5K, without and with
    # operand_register: each bank's word, the bank number, the operand stage and the word it selects.
    weights, thresholds = _weights_and_thresholds(2, -2, 2, (64, 64))
    for family in ("ice40", "ecp5"):
        (banked, with_banks), (whole, without) = (
            _mvau_flip_flops(weights, thresholds, "UINT2", "INT2", family, res_type="lut", ram_style="distributed",
                             operand_register=registered, tree_every=2) for registered in (True, False))
        assert banked.weight_rom_banks == 4 and whole.weight_rom_banks == 1
        assert 320 <= with_banks - without <= 400


def test_a_sliding_window_counts_the_registers_of_needed_register():
    # Yosys 0.70 on this window (12 x 12 x 8 UINT4, 3 x 3, padded, 4 lanes) inside a one-stage accelerator,
    # ECP5-85F: 113 flip-flops, 163 with needed_register (the count and its next moves, the registered compares
    # and the move that picks one, the freed rows a cycle later, the frame's beat count and last-beat flag), 173
    # with address_register too (the ring's read address and padding flag, 2026-11-28).
    from streamc.rtl.window import SlidingWindow

    def flip_flops(registered: bool, address: bool = False) -> int:
        unit = SlidingWindow(in_shape=(12, 12, 8), kernel=(3, 3), padding=(1, 1, 1, 1), dtype=from_name("UINT4"),
                             simd=4, needed_register=registered, address_register=address, name="w")
        return resources.estimate_kernel(resources.spec_of_unit(unit), "ecp5").ff

    assert 40 <= flip_flops(True) - flip_flops(False) <= 60
    assert 5 <= flip_flops(True, address=True) - flip_flops(True) <= 15


@pytest.mark.parametrize("in_type,weight_type", [("UINT2", "INT2"), ("BIPOLAR", "BIPOLAR"), ("BIPOLAR", "INT3"),
                                                 ("INT4", "BIPOLAR"), ("UINT4", "INT4")])
def test_an_mvau_spec_knows_its_units_latency_and_output_queue(in_type, weight_type):
    # The planner prices a queue per SIMD from the spec alone: its latency must be the unit's, at every pipelining;
    # a pipelined adder graph's (16 x 16, fully unrolled) is bounded before it is solved, so the spec's is at least the
    # unit's there.
    from streamc.rtl.mvau import MatrixVectorUnit

    rng = np.random.default_rng(0)
    in_dt, w_dt = from_name(in_type), from_name(weight_type)
    for (pe, simd), tree_every, operand, split, res_type, levels, style in itertools.product(
            [(2, 4), (16, 16), (1, 1)], [0, 1, 2], [False, True], [False, True], ["auto", "lut"], [0, 3],
            ["auto", "distributed"]):
        weights = rng.integers(w_dt.min, w_dt.max + 1, (16, 16))
        weights = np.where(weights >= 0, 1, -1) if w_dt.bipolar else weights
        thresholds = np.sort(rng.integers(-10, 10, (16, levels)), axis=1) if levels else None
        unit = MatrixVectorUnit(weights=weights, in_dtype=in_dt, weight_dtype=w_dt, pe=pe, simd=simd,
                                thresholds=thresholds, out_dtype=from_name("UINT2" if levels else "INT16"),
                                tree_every=tree_every, operand_register=operand, multiply_register=split,
                                res_type=res_type, ram_style=style, flow_control="credit")
        spec = resources.spec_of_unit(unit)
        if unit.constant_weights and tree_every:
            assert spec.latency >= unit.latency and spec.queue_depth >= unit.queue_depth > 1
        else:
            assert (spec.latency, spec.queue_depth) == (unit.latency, unit.queue_depth) > (0, 1)
