"""The resource model of constant products (:mod:`streamc.rtl.constant_products`): a fully unrolled MVAU's
lanes as a shift-and-add graph.

The planner prices every folding it tries, and da4ml's solver takes seconds to minutes on a layer (a 784 x 64
matrix: 13 CPU minutes), so the graph is not solved here: its adder bits are estimated from the matrix's canonical
signed digits (each nonzero digit past a row's first is an adder before sharing), each adder as wide as an input
times a weight plus half the growth of a row's sum, and common subexpressions taking out a fixed share; weights of
one magnitude (+-1, ternary), whose outputs share far more, by a power law of da4ml's solved adders over their
distinct rows and columns (:func:`one_magnitude_adders`) and a mean width, put on the multi-bit scale
(:data:`MULTI_BIT_SCALE`). One LUT coefficient per family and adder style (merged by Yosys, or kept: the unit's
``keep_adders``) turns those bits into LUT4s (ECP5: LUT4 + 2 CCU2C, as :mod:`streamc.synth` counts them), from
Yosys 0.70 on issue 24's case c (64 -> 10, 4-bit weights and inputs; ``benchmarks/bench_unrolled.py`` prints the
estimate beside Yosys for every case, a and b held out), and one per family for weights of one magnitude
(:data:`ONE_MAGNITUDE_LUTS_PER_SOLVED_BIT`). The fixed share is that of multi-bit weights (2.5 to 3.1
estimated bits per bit of da4ml's graph on cases a-c and the digits MLP's layers; held out, 3-bit weights 16 x 48:
1.02 of Yosys on the iCE40, 0.95 on the ECP5); +-1 weights by the digits erred 2 to 3 times high, and by a count of
adders sharing sums four Russians' way 1.3 to 2.6 times high on the iCE40 (seven +-1 layers with 1- and 2-bit inputs).
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


#: The estimated bits of multi-bit weights per bit of da4ml's solved graph, on case c (10,263 estimated, 4,069 solved;
#: 2.5 to 3.1 over cases a-c and the digits MLP's layers): weights of one magnitude, whose solved bits are estimated
#: directly (:func:`one_magnitude_adders`), are put on that scale, so that :func:`graph_register_bits` reads one.
MULTI_BIT_SCALE = 2.52

#: da4ml's adders for weights of one magnitude, ``a * rows**p * columns**q * density**r`` over the distinct rows and
#: columns (up to sign) and the share of nonzero weights (:func:`one_magnitude_adders`): fitted over 90 solved graphs of
#: weights drawn at random (+-1 and ternary, 4 to 256 rows, 32 to 512 columns, 1-, 2- and 4-bit inputs), within
#: 0.85-1.16 of the solved count on each. Rows sharing sums as da4ml finds them: +-1 8 x 256 solves to 377 adders,
#: where summing groups of inputs once per distinct row (the count this replaced) found 1,272.
ONE_MAGNITUDE_ADDERS = (0.654, 0.84, 0.878, -0.816)

#: The mean output bits of those adders, ``b0 + b1 * input bits + b2 * log2(columns)``, fitted over the same graphs:
#: with the count above, the solved bits within 0.83-1.27 on each; held out, issue 24's case d (64 x 784, +-1, 1-bit
#: inputs) 33,488 estimated against 34,552 solved.
ONE_MAGNITUDE_WIDTH = (2.17, 1.171, 0.067)

#: LUTs per solved bit of weights of one magnitude, ``a + b * input bits`` (the whole MVAU fully unrolled, as
#: :mod:`streamc.synth` counts them, over da4ml's bits of its graph), where Yosys 0.70 was run: the iCE40 merged takes
#: more for wider inputs (Yosys maps two-bit sums into few LUTs), the ECP5 kept fewer (a carry cell's LUTs hold a
#: 1-bit sum's logic badly). Fitted over 15 MVAUs (+-1 and ternary, 16 x 128 to 64 x 784): iCE40 1-bit inputs
#: 1.00-1.18, 2-bit 1.21-1.27, 4-bit 1.41; ECP5 1-bit 1.27-1.41, 2-bit 1.21, 4-bit 1.09-1.10. Elsewhere the multi-bit
#: coefficient's (:data:`LUTS_PER_ADDER_BIT` over :data:`MULTI_BIT_SCALE`), not measured.
ONE_MAGNITUDE_LUTS_PER_SOLVED_BIT = {("ice40", False): (0.98, 0.11), ("ecp5", True): (1.33, -0.055)}


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


def luts_per_adder_bit(family: str, kept: bool, one_magnitude: bool = False, in_bits: int = 1) -> float:
    """LUTs per estimated adder bit of a graph on ``family``, its adders ``kept`` or merged, its weights of
    ``one_magnitude`` or not (:data:`ONE_MAGNITUDE_LUTS_PER_SOLVED_BIT`, by its inputs' ``in_bits``)."""
    if one_magnitude and (family, kept) in ONE_MAGNITUDE_LUTS_PER_SOLVED_BIT:
        a, b = ONE_MAGNITUDE_LUTS_PER_SOLVED_BIT[family, kept]
        return (a + b * in_bits) / MULTI_BIT_SCALE
    return LUTS_PER_ADDER_BIT[family, kept]


def _distinct_up_to_sign(rows: np.ndarray) -> int:
    """The rows of ``rows`` that are not all zero and differ from each other even negated."""
    rows = rows[np.any(rows != 0, axis=1)]
    first = rows[np.arange(len(rows)), np.argmax(rows != 0, axis=1)]
    return len(np.unique(rows * np.sign(first)[:, None], axis=0))


def is_one_magnitude(weights: np.ndarray) -> bool:
    """Whether the nonzero ``weights`` have one magnitude (+-1, ternary, or a power of two times those)."""
    return len(np.unique(np.abs(weights[weights != 0]))) == 1


def one_magnitude_adders(weights: np.ndarray) -> float:
    """da4ml's adders for ``y = W x`` with the ``(MH, MW)`` ``weights`` of one magnitude, estimated
    (:data:`ONE_MAGNITUDE_ADDERS`): the distinct columns' graph, and an adder to sum each column into one equal to it
    (up to sign) before."""
    w = np.asarray(weights, np.int64)
    rows, columns = _distinct_up_to_sign(w), _distinct_up_to_sign(w.T)
    if not columns:
        return 0.0
    a, p, q, r = ONE_MAGNITUDE_ADDERS
    density = np.count_nonzero(w) / w.size
    return a * rows ** p * columns ** q * density ** r + int(np.any(w != 0, axis=0).sum()) - columns


def constant_adder_bits(weights: np.ndarray, in_bits: int, weight_bits: int) -> float:
    """Estimated output bits over the adders of ``y = W x`` for the ``(MH, MW)`` ``weights``, on the scale of
    :data:`LUTS_PER_ADDER_BIT`: multi-bit weights by their digits before sharing, weights of one magnitude by their
    solved graph's estimated adders (:func:`one_magnitude_adders`) and width (:data:`ONE_MAGNITUDE_WIDTH`)."""
    if is_one_magnitude(weights):
        b0, b1, b2 = ONE_MAGNITUDE_WIDTH
        width = b0 + b1 * in_bits + b2 * log2(max(weights.shape[1], 1))
        return one_magnitude_adders(weights) * width * MULTI_BIT_SCALE
    return int(csd_digit_counts(weights).sum()) * (in_bits + weight_bits + log2(max(weights.shape[1], 1)) / 2)
