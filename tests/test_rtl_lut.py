# amaranth: UnusedElaboratable=no
# (the error tests build tables that are never elaborated)
"""LookupTable against numpy in Amaranth's simulator, and its Verilog through Verilator's lint."""

from __future__ import annotations


import numpy as np
import pytest

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, TERNARY, UINT, DataType
from streamc.rtl.lut import LookupTable
from streamc.rtl.top import StreamAccelerator, to_verilog

FRAME_ELEMS = 12


def input_values(in_dtype: DataType) -> np.ndarray:
    """Every value of ``in_dtype``, in table order."""
    if in_dtype.bipolar:
        return np.array([-1, 1])
    return np.arange(in_dtype.min, in_dtype.max + 1)


def tanh_like(rng, in_dtype, out_dtype) -> np.ndarray:
    """A rounded, scaled tanh with random jitter: monotone-ish but with no structure to exploit."""
    x = input_values(in_dtype)
    y = np.round(np.tanh(x / 32.0) * out_dtype.max) + rng.integers(-2, 3, size=x.shape)
    return np.clip(y, out_dtype.min, out_dtype.max).astype(np.int64)


def random_table(rng, in_dtype, out_dtype) -> np.ndarray:
    values = input_values(in_dtype)
    if out_dtype.bipolar:
        return rng.choice([-1, 1], size=values.shape)
    return rng.integers(out_dtype.min, out_dtype.max + 1, size=values.shape)


# (in_dtype, out_dtype, table maker)
CASES = {
    "int8_tanh_int8": (INT(8), INT(8), tanh_like),
    "uint4_int3": (UINT(4), INT(3), random_table),
    "bipolar_int2": (BIPOLAR, INT(2), random_table),
    "ternary_uint5": (TERNARY, UINT(5), random_table),
    "int3_bipolar": (INT(3), BIPOLAR, random_table),
}


def look_up(table, in_dtype, x) -> np.ndarray:
    """numpy reference: index the table by ``x - in_dtype.min`` (BIPOLAR: -1 -> 0, +1 -> 1)."""
    index = (x + 1) // 2 if in_dtype.bipolar else x - in_dtype.min
    return table[index]


def build(case, elems, seed=0):
    in_dtype, out_dtype, make_table = CASES[case]
    rng = np.random.default_rng(seed)
    table = make_table(rng, in_dtype, out_dtype)
    dut = LookupTable(table=table, in_dtype=in_dtype, out_dtype=out_dtype, elems=elems,
                      frame_elems=FRAME_ELEMS, name="act")
    return dut, table, rng


def random_inputs(rng, in_dtype, frames) -> np.ndarray:
    return rng.choice(input_values(in_dtype), size=frames * FRAME_ELEMS)


@pytest.mark.parametrize("elems", [1, 3, 12])
@pytest.mark.parametrize("case", sorted(CASES))
def test_lookup_matches_numpy_under_stalls(case, elems):
    in_dtype, out_dtype, _ = CASES[case]
    dut, table, rng = build(case, elems, seed=elems)
    x = random_inputs(rng, in_dtype, frames=20)
    run = run_stream(dut, pack(x, in_dtype, elems), len(x) // elems, in_gap=0.3,
                     out_stall=0.4, seed=elems)
    np.testing.assert_array_equal(unpack(run.beats, out_dtype, elems), look_up(table, in_dtype, x))


def test_every_entry_of_an_int8_table_is_reached():
    dut, table, _ = build("int8_tanh_int8", 4)
    x = np.arange(-128, 128)
    run = run_stream(dut, pack(x, INT(8), 4), 64, in_gap=0.2, out_stall=0.2)
    np.testing.assert_array_equal(unpack(run.beats, INT(8), 4), table)


@pytest.mark.parametrize("elems", [1, 4])
def test_one_beat_per_cycle(elems):
    dut, table, rng = build("uint4_int3", elems)
    x = random_inputs(rng, UINT(4), frames=3)
    run = run_stream(dut, pack(x, UINT(4), elems), len(x) // elems)
    np.testing.assert_array_equal(unpack(run.beats, INT(3), elems), look_up(table, UINT(4), x))
    assert run.cycles == list(range(dut.latency, dut.latency + len(x) // elems))


def test_attributes_describe_the_streams():
    dut, _, _ = build("int8_tanh_int8", 3)
    assert (dut.in_elems, dut.in_width, dut.out_elems, dut.out_width) == (3, 8, 3, 8)
    assert dut.i.payload.shape().width == 24 and dut.o.payload.shape().width == 24
    assert dut.cycles_per_frame == 4
    assert dut.latency == 1


def test_table_length_follows_the_input_type():
    with pytest.raises(ValueError, match=r"^node 'act': table must be an integer array of 2 entries \(one "
                                         r"per BIPOLAR value\), 1-D or one row per channel, not int64 of "
                                         r"shape \(3,\)$"):
        LookupTable(table=np.array([0, 1, 0]), in_dtype=BIPOLAR, out_dtype=INT(2), elems=1,
                    frame_elems=4, name="act")


def test_table_entries_must_fit_out_dtype():
    with pytest.raises(ValueError, match=r"^node 'lut': table entries must be INT3 values, found "
                                         r"values in \[-4, 4\]$"):
        LookupTable(table=np.array([-4, 4, 0, 0]), in_dtype=UINT(2), out_dtype=INT(3), elems=1,
                    frame_elems=4)


def test_elems_must_divide_the_frame():
    with pytest.raises(ValueError, match=r"^node 'lut': elems=5 must divide frame_elems=12; "
                                         r"valid elems: 1, 2, 3, 4, 6, 12$"):
        LookupTable(table=np.zeros(4, dtype=np.int64), in_dtype=UINT(2), out_dtype=INT(3),
                    elems=5, frame_elems=12)
    with pytest.raises(ValueError, match=r"^node 'lut': elems must be an integer >= 1, not 0$"):
        LookupTable(table=np.zeros(4, dtype=np.int64), in_dtype=UINT(2), out_dtype=INT(3),
                    elems=0, frame_elems=12)


@pytest.mark.parametrize("case,elems", [("int8_tanh_int8", 4), ("bipolar_int2", 1)])
def test_verilog_passes_verilator_lint(tmp_path, case, elems):
    dut, _, _ = build(case, elems)
    (tmp_path / "streamc_top.v").write_text(to_verilog(StreamAccelerator(stages=[dut])))
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")


@pytest.mark.parametrize("style,attribute", [("auto", None), ("distributed", "logic"), ("block", "block")])
def test_ram_style_places_every_lane_s_rom(style, attribute):
    table = np.arange(-128, 128, dtype=np.int64) // 2
    dut = LookupTable(table=table, in_dtype=INT(8), out_dtype=INT(8), elems=2, frame_elems=FRAME_ELEMS,
                      ram_style=style)
    verilog = to_verilog(StreamAccelerator(stages=[dut]))
    found = verilog.count('rom_style = "')
    assert found == (0 if attribute is None else 2)
    assert attribute is None or verilog.count(f'rom_style = "{attribute}"') == 2


def test_an_unknown_ram_style_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^node 'act': ram_style='bram' is not a memory placement; "
                                         r"valid: auto, distributed, block$"):
        LookupTable(table=np.zeros(4, dtype=np.int64), in_dtype=UINT(2), out_dtype=INT(3), elems=1,
                    frame_elems=4, ram_style="bram", name="act")


@pytest.mark.parametrize("elems", [1, 2, 6])
def test_a_table_per_channel_follows_the_channel_of_each_element(elems):
    """Six channels, each its own table (a quantized bias add): element e reads channel e % 6."""
    rng = np.random.default_rng(elems)
    channels = 6
    table = np.stack([tanh_like(rng, INT(4), INT(4)) for _ in range(channels)])
    dut = LookupTable(table=table, in_dtype=INT(4), out_dtype=INT(4), elems=elems, frame_elems=FRAME_ELEMS)
    assert dut.folds == channels // elems
    x = random_inputs(rng, INT(4), frames=10)
    run = run_stream(dut, pack(x, INT(4), elems), len(x) // elems, in_gap=0.3, out_stall=0.4, seed=elems)
    expected = table[np.arange(len(x)) % channels, x - INT(4).min]
    np.testing.assert_array_equal(unpack(run.beats, INT(4), elems), expected)


def test_a_table_per_channel_needs_lanes_that_divide_the_channels():
    table = np.zeros((6, 16), dtype=np.int64)
    with pytest.raises(ValueError, match=r"^node 'lut': elems=4 must divide frame_elems=12 and the 6 channels, "
                                         r"which must divide frame_elems; valid elems: 1, 2, 3, 6$"):
        LookupTable(table=table, in_dtype=INT(4), out_dtype=INT(4), elems=4, frame_elems=12)
    with pytest.raises(ValueError, match=r"^node 'lut': elems=1 must divide frame_elems=9 and the 6 channels"):
        LookupTable(table=table, in_dtype=INT(4), out_dtype=INT(4), elems=1, frame_elems=9)
