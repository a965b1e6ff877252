"""The resource model of constant products (:mod:`streamc.rtl.constant_products`): a fully unrolled MVAU's
lanes as a shift-and-add graph.

The planner prices every folding it tries, and da4ml's solver takes seconds to minutes on a layer (a 784 x 64
matrix: 13 CPU minutes), so the graph is not solved here: its adder bits are estimated from the matrix's canonical
signed digits (each nonzero digit past a row's first is an adder before sharing), each adder as wide as an input
times a weight plus half the growth of a row's sum, and common subexpressions taking out a fixed share; weights of
one magnitude (+-1, ternary), whose outputs share far more, by a count of adders with outputs sharing sums
(:func:`shared_adders`). One LUT coefficient per family and adder style (merged by Yosys, or kept: the unit's
``keep_adders``) turns those bits into LUT4s (ECP5: LUT4 + 2 CCU2C, as :mod:`streamc.synth` counts them), from
Yosys 0.70 on issue 24's case c (64 -> 10, 4-bit weights and inputs; ``benchmarks/bench_unrolled.py`` prints the
estimate beside Yosys for every case, a and b held out). The fixed share is that of multi-bit weights (2.5 to 3.1
estimated bits per bit of da4ml's graph on cases a-c and the digits MLP's layers; held out, 3-bit weights 16 x 48:
1.02 of Yosys on the iCE40, 0.95 on the ECP5); +-1 weights by the digits erred 2 to 3 times high (a 64 -> 32 layer
of a QONNX test model: 16,384 estimated bits for 2,914, its kept graph estimated at 1.97x Yosys' LUTs on the ECP5;
case d 2.89x); the count of shared adders, at :data:`ONE_MAGNITUDE_SCALE` 1.5, gives on the three layers below
0.98, 0.88 and 1.12 of Yosys on the ECP5 (kept), 1.02 and 1.03 on the iCE40 (merged) but 1.60 for the one with
1-bit inputs (Yosys maps their two-bit sums into few LUTs), and case d 40,623 LUTs on the ECP5 against Yosys'
43,795 (``bench_unrolled.py --cases d --families ecp5``).
"""

from __future__ import annotations

from math import log2

import numpy as np

from ..rtl.constant_products import (
    PIPELINED_EXTRA_LEVELS,
    csd_digit_counts,
    graph_stages,
)

#: LUTs per estimated adder bit, with the graph's adders merged by Yosys and kept (``keep_adders``), as
#: :mod:`streamc.synth` counts them: Yosys 0.70 on case c's MVAU over its 10,263 estimated bits (iCE40 5,142 SB_LUT4
#: merged; ECP5 3,248 LUT4 + 2 x 1,207 CCU2C merged, 4 LUT4 + 2 x 2,021 CCU2C kept; Gowin 3,826 LUT1-4 + 2,224 ALU
#: merged, 4 + 3,746 kept); the iCE40 kept (which only a folding asks for) over cases a-c (4,463, 8,581 and 24,507
#: SB_LUT4: 0.435, 0.399, 0.378 a bit). Held out: case b kept on the ECP5 0.94 of Yosys, case a 1.11.
LUTS_PER_ADDER_BIT = {("ice40", False): 0.501, ("ecp5", False): 0.552, ("gowin", False): 0.589,
                      ("ice40", True): 0.41, ("ecp5", True): 0.394, ("gowin", True): 0.365}


#: Weights of one magnitude (+-1, ternary) share far more than the digits count lets the fixed share of
#: :data:`LUTS_PER_ADDER_BIT` take out: their adders are counted with outputs sharing (:func:`shared_adders`), each
#: as wide as an input times a weight and two bits (the mean growth over a tree of sums, half its adders at the
#: leaves, a quarter one level up: the sum of ``l / 2**l``), and this scale brings those bits to the digit count's:
#: the MVAU fully unrolled, its estimate over Yosys 0.70's LUTs with the scale at 1 (ECP5 kept, iCE40 merged) on
#: +-1 weights 32 x 64 with 4-bit inputs 0.66, 0.68, 16 x 128 with 1-bit inputs 0.75, 1.07, ternary 32 x 64 with
#: 2-bit inputs 0.58, 0.69, issue 24's case d on the ECP5 (784 -> 64, +-1) about 0.63.
ONE_MAGNITUDE_SCALE = 1.5


#: Register bits a pipelined graph (:func:`streamc.rtl.constant_products.constant_products` with ``every``) puts in
#: each of its stages, per estimated adder bit (:func:`constant_adder_bits`) a level, taking the solved graph's levels
#: as two more than the fewest (:func:`graph_register_bits`): the values a cut crosses, counted in the solved graphs
#: of 4-bit 64 x 64, 10 x 64 and 12 x 32, +-1 32 x 64 and 16 x 128 with 1-bit inputs, ternary 32 x 64 and 2-bit
#: 32 x 32 weights (their levels one to four more than the fewest), registered after every one to three levels:
#: 0.43 to 0.66, median 0.53.
GRAPH_REGISTER_SHARE = 0.53


def graph_register_bits(adder_bits: float, levels: int, every: int) -> tuple[float, int]:
    """Estimated register bits and stages of a graph of ``adder_bits`` (:func:`constant_adder_bits`) and at most
    ``levels`` levels (:func:`~streamc.rtl.constant_products.graph_levels`), registered after every ``every``: its
    levels taken as two more than the fewest, the middle of what da4ml's solver gave."""
    expected = levels - PIPELINED_EXTRA_LEVELS + 2
    stages = graph_stages(expected, every)
    return GRAPH_REGISTER_SHARE * stages * adder_bits / max(expected, 1), stages


def luts_per_adder_bit(family: str, kept: bool) -> float:
    """LUTs per estimated adder bit of a graph on ``family``, its adders ``kept`` or merged."""
    return LUTS_PER_ADDER_BIT[family, kept]


def shared_adders(weights: np.ndarray) -> int:
    """Adders of ``y = W x`` for the ``(MH, MW)`` integer ``weights`` with outputs sharing sums by the method of four
    Russians: the inputs taken ``k`` at a time, each group's distinct rows (up to sign) summed once (a row's digits
    past its first an adder each), then every output adding its groups' sums; the fewest over ``k`` up to 8."""
    w = np.asarray(weights, np.int64)
    digits = csd_digit_counts(w)
    best = None
    for k in range(1, 9):
        sums, groups_read = 0, []
        for first in range(0, w.shape[1], k):
            group, group_digits = w[:, first:first + k], digits[:, first:first + k]
            read = np.any(group != 0, axis=1)
            groups_read.append(read)
            rows = group[read]
            if len(rows):
                sign = np.sign(rows[np.arange(len(rows)), np.argmax(rows != 0, axis=1)])
                _, distinct = np.unique(rows * sign[:, None], axis=0, return_index=True)
                sums += int(np.maximum(group_digits[read][distinct].sum(axis=1) - 1, 0).sum())
        adds = int(np.maximum(np.sum(groups_read, axis=0) - 1, 0).sum())
        best = sums + adds if best is None else min(best, sums + adds)
    return best


def constant_adder_bits(weights: np.ndarray, in_bits: int, weight_bits: int) -> float:
    """Estimated output bits over the adders of ``y = W x`` for the ``(MH, MW)`` ``weights``, on the scale of
    :data:`LUTS_PER_ADDER_BIT`: multi-bit weights by their digits before sharing, weights of one magnitude by
    :func:`shared_adders` (:data:`ONE_MAGNITUDE_SCALE`)."""
    magnitudes = np.unique(np.abs(weights[weights != 0]))
    if len(magnitudes) == 1:
        return shared_adders(weights) * (in_bits + weight_bits + 2) * ONE_MAGNITUDE_SCALE
    return int(csd_digit_counts(weights).sum()) * (in_bits + weight_bits + log2(max(weights.shape[1], 1)) / 2)
