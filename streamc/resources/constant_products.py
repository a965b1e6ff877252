"""The resource model of constant products (:mod:`streamc.rtl.constant_products`): a fully unrolled MVAU's
lanes as a shift-and-add graph.

The planner prices every folding it tries, and da4ml's solver takes seconds to minutes on a layer (a
784 x 64 matrix: 13 CPU minutes), so the graph is not solved here: its adder bits are estimated from the
matrix's canonical signed digits (each nonzero digit past a row's first is an adder before sharing), each
adder as wide as an input times a weight plus half the growth of a row's sum, and common subexpressions
taking out a fixed share. One LUT coefficient per family and adder style (merged by Yosys, or kept: the unit's
``keep_adders``) turns those bits into LUT4s (ECP5: LUT4 + 2 CCU2C, as :mod:`streamc.synth` counts them), from
Yosys 0.70 on issue 24's case c (64 -> 10, 4-bit weights and inputs; ``benchmarks/bench_unrolled.py`` prints the
estimate beside Yosys for every case, a and b held out). The fixed share is that of multi-bit weights (2.5 to 3.1
estimated bits per bit of da4ml's graph on cases a-c and the digits MLP's layers); +-1 weights against multi-bit
inputs share far more (a 64 -> 32 layer of a QONNX test model: 16,384 estimated bits for 2,914, its kept graph
estimated at 1.97x Yosys' LUTs on the ECP5), so there the estimate errs high.
"""

from __future__ import annotations

from math import log2

import numpy as np

#: LUTs per estimated adder bit, with the graph's adders merged by Yosys and kept (``keep_adders``), as
#: :mod:`streamc.synth` counts them: Yosys 0.70 on case c's MVAU over its 10,263 estimated bits (iCE40 5,142 SB_LUT4
#: merged; ECP5 3,248 LUT4 + 2 x 1,207 CCU2C merged, 4 LUT4 + 2 x 2,021 CCU2C kept; Gowin 3,826 LUT1-4 + 2,224 ALU
#: merged, 4 + 3,746 kept); the iCE40 kept (which only a folding asks for) over cases a-c (4,463, 8,581 and 24,507
#: SB_LUT4: 0.435, 0.399, 0.378 a bit). Held out: case b kept on the ECP5 0.94 of Yosys, case a 1.11.
LUTS_PER_ADDER_BIT = {("ice40", False): 0.501, ("ecp5", False): 0.552, ("gowin", False): 0.589,
                      ("ice40", True): 0.41, ("ecp5", True): 0.394, ("gowin", True): 0.365}


def luts_per_adder_bit(family: str, kept: bool) -> float:
    """LUTs per estimated adder bit of a graph on ``family``, its adders ``kept`` or merged."""
    return LUTS_PER_ADDER_BIT[family, kept]


def csd_digits(weights: np.ndarray) -> int:
    """Nonzero digits of ``weights`` written in canonical signed digits (no two adjacent nonzero)."""
    w = np.abs(np.asarray(weights, np.int64))
    digits = 0
    while w.any():
        odd = w & 1
        digits += int(odd.sum())
        # An odd w ending in binary 11 takes digit -1 (w + 1 carries on), one ending in 01 takes +1.
        w = (w + np.where(odd == 1, np.where(w & 2, 1, -1), 0)) >> 1
    return digits


def constant_adder_bits(weights: np.ndarray, in_bits: int, weight_bits: int) -> float:
    """Estimated output bits over the adders of ``y = W x`` for the ``(MH, MW)`` ``weights``, before sharing."""
    mw = weights.shape[1]
    return csd_digits(weights) * (in_bits + weight_bits + log2(max(mw, 1)) / 2)
