# amaranth: UnusedElaboratable=no
# (the error tests build stages that are never elaborated)
"""The stitched accelerator in Amaranth's simulator, and its Verilog through Verilator's lint."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from rtl_helpers import assert_verilator_lint, pack, run_stream, unpack
from streamc.datatypes import BIPOLAR, INT, UINT
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.stream import StreamFIFO
from streamc.rtl.top import StreamAccelerator, to_verilog

# Amaranth's Verilog widens and truncates implicitly (WIDTH), writes case statements
# without defaults (CASEINCOMPLETE) and declares zero-width signals as [-1:0] (ASCRANGE).


def two_layers(rng):
    """fc1: 12 -> 12 BIPOLAR, 4 channels per beat; fc2: 12 -> 4 UINT2, 6 elements per beat."""
    w1 = rng.choice([-1, 1], size=(12, 12))
    t1 = rng.integers(-4, 5, size=(12, 1))
    w2 = rng.integers(-4, 4, size=(4, 12))
    t2 = np.sort(rng.integers(-20, 21, size=(4, 3)), axis=1)
    fc1 = MatrixVectorUnit(weights=w1, in_dtype=BIPOLAR, weight_dtype=BIPOLAR, pe=4, simd=3,
                           thresholds=t1, out_dtype=BIPOLAR, name="fc1")
    fc2 = MatrixVectorUnit(weights=w2, in_dtype=BIPOLAR, weight_dtype=INT(3), pe=2, simd=6,
                           thresholds=t2, out_dtype=UINT(2), name="fc2")

    def reference(x):
        h = np.where((x @ w1.T)[:, :, None] >= t1[None], 1, -1)[:, :, 0]
        return ((h @ w2.T)[:, :, None] >= t2[None]).sum(axis=2)

    return fc1, fc2, reference


def axis_ports(top):
    source = SimpleNamespace(valid=top.s_axis_tvalid, ready=top.s_axis_tready,
                             payload=top.s_axis_tdata)
    sink = SimpleNamespace(valid=top.m_axis_tvalid, ready=top.m_axis_tready,
                           payload=top.m_axis_tdata)
    return source, sink


@pytest.mark.parametrize("fifo_depths,in_gap,out_stall", [
    (None, 0.3, 0.4),
    ([0], 0.2, 0.5),
    ([5], 0.0, 0.0),
])
def test_two_mvaus_with_a_width_converter_match_reference(fifo_depths, in_gap, out_stall):
    rng = np.random.default_rng(3)
    fc1, fc2, reference = two_layers(rng)
    top = StreamAccelerator(stages=[fc1, fc2], fifo_depths=fifo_depths)
    assert (top.in_elems, top.in_width, top.out_elems, top.out_width) == (3, 1, 2, 2)

    frames = 4
    x = rng.choice([-1, 1], size=(frames, 12))
    source, sink = axis_ports(top)
    run = run_stream(top, pack(x, BIPOLAR, 3), frames * 2, in_gap=in_gap, out_stall=out_stall,
                     seed=11, source=source, sink=sink)
    np.testing.assert_array_equal(unpack(run.beats, UINT(2), 2).reshape(frames, 4), reference(x))
    if in_gap == out_stall == 0:
        # fc1 and fc2 both take 12 cycles a frame: the chain keeps that pace.
        last_beat_of_frame = run.cycles[1::2]
        assert np.diff(last_beat_of_frame).tolist() == [12] * (frames - 1)


def test_element_widths_must_match():
    w = np.ones((4, 4), dtype=np.int64)
    fc1 = MatrixVectorUnit(weights=w, in_dtype=INT(2), weight_dtype=INT(2), pe=2, simd=2,
                           thresholds=None, out_dtype=INT(5), name="fc1")
    fc2 = MatrixVectorUnit(weights=w, in_dtype=INT(4), weight_dtype=INT(2), pe=2, simd=2,
                           thresholds=None, out_dtype=INT(8), name="fc2")
    with pytest.raises(ValueError, match=r"^stage0_fc1 puts out 5-bit elements but stage1_fc2 "
                                         r"takes 4-bit elements$"):
        StreamAccelerator(stages=[fc1, fc2])


def test_fifo_depths_need_one_entry_per_link():
    fc1, fc2, _ = two_layers(np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^fifo_depths must have one entry per link between "
                                         r"stages \(1\), not 2: \[2, 2\]$"):
        StreamAccelerator(stages=[fc1, fc2], fifo_depths=[2, 2])


def fully_parallel_accumulator():
    """One MVAU with pe = MH and simd = MW: its ROMs have one row and zero-width addresses."""
    weights = np.random.default_rng(1).integers(-2, 2, size=(4, 6))
    return MatrixVectorUnit(weights=weights, in_dtype=UINT(2), weight_dtype=INT(2), pe=4,
                            simd=6, thresholds=None, out_dtype=INT(6), name="fc")


@pytest.mark.parametrize("design", ["two_layers", "two_layers_deep_fifo", "fully_parallel"])
def test_verilog_passes_verilator_lint(tmp_path, design):
    if design == "fully_parallel":
        top = StreamAccelerator(stages=[fully_parallel_accumulator()])
    else:
        fc1, fc2, _ = two_layers(np.random.default_rng(0))
        # The deep FIFO takes the block-RAM-friendly SyncFIFOBuffered path.
        depths = [StreamFIFO.BRAM_MIN_DEPTH] if design == "two_layers_deep_fifo" else None
        top = StreamAccelerator(stages=[fc1, fc2], fifo_depths=depths)
    text = to_verilog(top, name="streamc_top")
    ports = re.search(r"^module streamc_top\(([^)]*)\);", text, re.MULTILINE).group(1)
    assert set(ports.split(", ")) == {"clk", "rst", "s_axis_tdata", "s_axis_tvalid",
                                      "s_axis_tready", "m_axis_tdata", "m_axis_tvalid",
                                      "m_axis_tready"}
    (tmp_path / "streamc_top.v").write_text(text)
    assert_verilator_lint(tmp_path, "streamc_top.v", top="streamc_top")
