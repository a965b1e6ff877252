# amaranth: UnusedElaboratable=no
# (the error tests build components that are never elaborated)
"""StreamFIFO and WidthConverter in Amaranth's simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rtl_helpers import pack, run_stream, unpack
from streamc.datatypes import UINT
from streamc.rtl.stream import COUNTS_PER_SIDE_MIN_WIDTH, StreamFIFO, WidthConverter, counts_per_side

ELEM = UINT(3)


@pytest.mark.parametrize("in_elems,out_elems", [(4, 6), (6, 4), (3, 1), (1, 3), (2, 2), (2, 6), (6, 2)])
@pytest.mark.parametrize("in_gap,out_stall", [(0.3, 0.4), (0.0, 0.6), (0.6, 0.0)])
def test_width_converter_keeps_every_element_in_order(in_elems, out_elems, in_gap, out_stall):
    n = 2 * 12 * 3  # a multiple of every lcm above
    values = np.random.default_rng(1).integers(0, 8, size=n)
    dut = WidthConverter(elem_width=ELEM.bitwidth, in_elems=in_elems, out_elems=out_elems)
    run = run_stream(dut, pack(values, ELEM, in_elems), n // out_elems,
                     in_gap=in_gap, out_stall=out_stall, seed=in_elems * 10 + out_elems)
    np.testing.assert_array_equal(unpack(run.beats, ELEM, out_elems), values)


@pytest.mark.parametrize("in_elems,out_elems", [(4, 6), (6, 4), (3, 1), (1, 3), (2, 2), (2, 6), (6, 2), (2, 3),
                                                (3, 2), (9, 6), (5, 7), (7, 5), (4, 3)])
def test_width_converter_runs_at_the_slower_side_rate(in_elems, out_elems):
    n = 8 * math.lcm(in_elems, out_elems)
    values = np.arange(n) % 8
    dut = WidthConverter(elem_width=ELEM.bitwidth, in_elems=in_elems, out_elems=out_elems)
    run = run_stream(dut, pack(values, ELEM, in_elems), n // out_elems)
    np.testing.assert_array_equal(unpack(run.beats, ELEM, out_elems), values)
    # The side with more beats moves one per cycle: the first input beat is taken in cycle
    # 0, so the last output leaves in cycle max(input beats, output beats).
    assert run.cycles[-1] == max(n // in_elems, n // out_elems)


def test_width_converter_refuses_zero_elements():
    with pytest.raises(ValueError, match=r"^out_elems must be at least 1, not 0$"):
        WidthConverter(elem_width=3, in_elems=2, out_elems=0)


@pytest.mark.parametrize("two_counts", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 5, StreamFIFO.BRAM_MIN_DEPTH])
def test_fifo_passes_beats_in_order_under_stalls(depth, two_counts):
    beats = [int(b) for b in np.random.default_rng(depth).integers(0, 1 << 10, size=60)]
    run = run_stream(StreamFIFO(width=10, depth=depth, two_counts=two_counts), beats, len(beats),
                     in_gap=0.3, out_stall=0.4, seed=depth)
    assert run.beats == beats


@pytest.mark.parametrize("two_counts", [False, True])
@pytest.mark.parametrize("depth,cycles_per_beat",
                         [(1, 2), (2, 1), (5, 1), (StreamFIFO.BRAM_MIN_DEPTH, 1)])
def test_fifo_throughput(depth, cycles_per_beat, two_counts):
    beats = list(range(40))
    run = run_stream(StreamFIFO(width=6, depth=depth, two_counts=two_counts), beats, len(beats))
    assert run.beats == beats
    assert np.diff(run.cycles).tolist() == [cycles_per_beat] * (len(beats) - 1)


def test_only_wide_fifos_count_their_beats_on_each_side():
    assert not counts_per_side(COUNTS_PER_SIDE_MIN_WIDTH - 1)
    assert counts_per_side(COUNTS_PER_SIDE_MIN_WIDTH)


def test_fifo_refuses_depth_zero():
    with pytest.raises(ValueError, match=r"^FIFO depth must be at least 1, not 0$"):
        StreamFIFO(width=8, depth=0)
