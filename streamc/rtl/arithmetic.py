"""Arithmetic the kernels share: the narrowest shape of a range, and sums as trees Yosys keeps."""

from __future__ import annotations

from amaranth.hdl import Shape, Signal, signed, unsigned


def shape_of_range(lo: int, hi: int) -> Shape:
    """The narrowest shape (at least 1 bit) holding every integer in ``[lo, hi]``."""
    if lo >= 0:
        return unsigned(max(hi.bit_length(), 1))
    return signed(max((-lo - 1).bit_length(), hi.bit_length()) + 1)



def tree_levels(count: int) -> int:
    """Adder levels of :func:`adder_tree` over ``count`` values."""
    return max(count - 1, 0).bit_length()


def tree_stages(count: int, every: int) -> int:
    """Pipeline registers :func:`adder_tree` puts on the way from ``count`` values to their sum when it
    registers after every ``every`` levels and after the last (``every`` 0: none)."""
    return -(-tree_levels(count) // every) if every else 0


def adder_tree(m, values, *, every: int = 0, register=None):
    """Sum of ``values`` as a balanced tree, so the depth grows as log2 of their number.

    Each sum of multi-bit values is a signal Yosys keeps. Without that, ``alumacc`` merges the tree
    and the accumulator into one ``$macc``, built as rows of full adders in LUTs: eight 9-bit
    products and a 14-bit accumulator took 282 LUTs on the ECP5 and 166 on the iCE40, against 104
    and 101 as a tree of carry-chain adders. One-bit values (popcounts, threshold counts) take
    fewer LUTs as full adders, so their tree is left to Yosys, unless it is pipelined.

    With ``every`` > 0 the tree is pipelined for the clock: ``register(value)`` (a register that moves
    with the caller's pipeline) follows every ``every`` levels and the last one, so no path crosses
    more than ``every`` adders; :func:`tree_stages` counts the registers on the way. The sums between
    the registers are kept too: left to ``alumacc``, the levels between two registers merged into a
    ``$macc`` of full adders in LUTs (64 lanes of 8-bit products registered every 3 levels: 3965 LUTs on
    the ECP5, 3252 on the iCE40, 4783 on a GW1NR-9, against 3211, 2848 and 3552 kept).
    """
    level = list(values)
    keep = all(len(value) > 1 for value in level)
    depth = 0
    while len(level) > 1:
        pairs = []
        for n in range(0, len(level) - 1, 2):
            total = level[n] + level[n + 1]
            if keep:
                kept = Signal(total.shape(), name="tree_sum", attrs={"keep": 1})
                m.d.comb += kept.eq(total)
                total = kept
            pairs.append(total)
        level = pairs + ([level[-1]] if len(level) % 2 else [])
        depth += 1
        if every and (depth % every == 0 or len(level) == 1):
            level = [register(value) for value in level]
    return level[0]
