"""Products of an input vector with a constant matrix, as a graph of shifts and adds.

Where a lane's weights never change (a fully unrolled layer: its weight ROM has one word), ``W x`` needs
no multiplier: each output is a sum of shifted inputs, and outputs share their common partial sums.
da4ml's constant-matrix-vector solver (``da4ml.cmvm``, canonical signed digits with common-subexpression
elimination) finds that graph, solved with each of its two ways of choosing subexpressions and the graph of fewer
bits as it is built kept (:data:`METHODS`: adder bits where every adder is kept, the bits of Yosys' merged sums
where it merges them); this module turns it into Amaranth arithmetic of the narrowest widths, a signal per adder:
shifts and adds, which Yosys never maps to a hard multiplier.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import log2

import numpy as np
from amaranth.hdl import Const, Signal

from ..errors import BuildError
from .arithmetic import shape_of_range

__all__ = ["AdderGraph", "adder_graph", "cmvm_logic", "constant_products", "csd_digit_counts", "graph_levels",
           "graph_stages", "keeps_adders"]

#: Whether :func:`constant_products` keeps every adder on a device family (``keep``): where a carry chain's cell
#: holds the sum bit's LUT (the ECP5's CCU2C, two bits; Gowin's ALU, one), a kept adder is one carry cell a bit,
#: where Yosys' merged sums are full adders in LUT4s beside a shorter chain. Issue 24's count, LUT4 + SB_CARRY on the
#: iCE40, takes the merged sums there: kept, the SB_CARRYs outgrow the LUT4s saved (the MVAU, Yosys 0.70, cases c, b,
#: a: iCE40 4,463 + 3,206, 8,581 + 5,988, 24,507 + 18,539 kept against 5,142 + 1,773, 8,868 + 3,339, 30,267 + 9,869
#: merged; ECP5 4 LUT4 + 2,021 CCU2C kept against 3,248 + 1,207 merged on case c; Gowin 3,750 LUT1-4 and ALU kept
#: against 6,050 merged on case c).
KEPT_ADDERS = {"ice40": False, "ecp5": True, "gowin": True}

#: da4ml's ways of choosing the common subexpression to take next (its solver's ``method0``), its default first.
#: Neither is smaller on every matrix (da4ml 0.6.0's adder bits, wmc against mc: issue 24's cases a 23,277 against
#: 23,192, b 7,814 against 7,727, c 4,069 both, d, the +-1 weights, 37,304 against 34,552), so both are solved.
#: Where Yosys merges the adders, fewer adder bits is not fewer cells (the graph alone on the iCE40, SB_LUT4 +
#: SB_CARRY, wmc against mc: case a 40,124 against 40,180; +-1 weights 256 -> 32 with 1-bit inputs 9,035 against
#: 9,223, whose mc graph has 6,123 adder bits against 6,597), so a merged graph is picked by
#: :attr:`AdderGraph.merged_bits` (there 21,664 against 21,863 and 5,862 against 6,641). Over eight matrices (cases
#: a and c; +-1 256 -> 32, 128 -> 64 and 48 -> 48, 4-bit 32 -> 32, 3-bit 96 -> 24, 2-bit 64 -> 32, with 1- to 4-bit
#: inputs) it picked the smaller on six, missing by 9 cells on 4-bit 32 -> 32 and by 102 (2.6 %) on 2-bit weights
#: with 1-bit inputs; adder bits picked it on three: 95,290 cells in all against 95,707, the smaller each time
#: 95,179.
METHODS = ("wmc", "mc")

#: The adder levels da4ml's solver may add over a graph's fewest (its ``hard_dc``) where the graph is pipelined, so
#: that its depth is bounded before it is solved (:func:`graph_levels`). Fewer cost adders: +-1 weights 64 x 128 with
#: 1-bit inputs, the smaller of both methods' graphs: 6,313 adder bits unbounded (13 levels), 6,558 at 4 (11), 8,578
#: at 2 (9), 9,272 at 0 (7); 4-bit weights 64 x 64: 23,296 unbounded (9 levels), 23,168 at 4 and at 2 (8).
PIPELINED_EXTRA_LEVELS = 4


def csd_digit_counts(weights: np.ndarray) -> np.ndarray:
    """Nonzero digits of each of ``weights`` written in canonical signed digits (no two adjacent nonzero)."""
    w = np.abs(np.asarray(weights, np.int64))
    digits = np.zeros(w.shape, np.int64)
    while w.any():
        odd = w & 1
        digits += odd
        # An odd w ending in binary 11 takes digit -1 (w + 1 carries on), one ending in 01 takes +1.
        w = (w + np.where(odd == 1, np.where(w & 2, 1, -1), 0)) >> 1
    return digits


def graph_stages(levels: int, every: int) -> int:
    """Registers inside a graph of ``levels`` adder levels registered after every ``every`` but the last (its reader
    registers that): :func:`constant_products`."""
    return max(-(-levels // every) - 1, 0) if every else 0


def graph_levels(weights: np.ndarray) -> int:
    """The most adder levels of the pipelined graph of ``y = W x`` (solved with :data:`PIPELINED_EXTRA_LEVELS`): a
    row of ``n`` digits needs ``ceil(log2(n))`` levels at least, da4ml's bound adds those extra."""
    most = int(csd_digit_counts(weights).sum(axis=1).max(initial=0))
    return max(most - 1, 0).bit_length() + PIPELINED_EXTRA_LEVELS



@dataclass(frozen=True)
class AdderNode:
    """One value of the graph: ``value = n * 2**exponent`` with ``n`` in ``[lo, hi]``. A constant (``a`` and
    ``b`` -1, ``n = lo = hi``), an input (``a`` its index, ``b`` -1) or ``n_a * 2**(e_a - exponent) +/- n_b * 2**(e_b + shift - exponent)``."""

    a: int
    b: int
    subtract: bool
    shift: int
    lo: int
    hi: int
    exponent: int

    @property
    def is_input(self) -> bool:
        return self.b < 0 <= self.a

    @property
    def is_constant(self) -> bool:
        return self.a < 0

    @property
    def bits(self) -> int:
        return shape_of_range(self.lo, self.hi).width


@dataclass(frozen=True)
class AdderGraph:
    """``W x`` for ``x`` of ``MW`` integers in ``[x_lo, x_hi]`` as adders: ``outputs[j]`` is
    ``(node, shift, negate)``, output ``j`` being ``(-1 if negate else 1) * node value * 2**shift``; a node
    of -1 is the constant 0 (a row of zeros)."""

    nodes: tuple[AdderNode, ...]
    outputs: tuple[tuple[int, int, bool], ...]

    @property
    def adders(self) -> tuple[AdderNode, ...]:
        """The nodes that add or subtract (the others are inputs and constants)."""
        return tuple(node for node in self.nodes if node.b >= 0)

    @property
    def adder_bits(self) -> int:
        """Output bits over all adders: the carry chain each adder is built on."""
        return sum(node.bits for node in self.adders)

    @property
    def merged_bits(self) -> int:
        """The bits of the graph as Yosys merges it (``keep`` off in :func:`constant_products`): ``alumacc`` merges
        an adder read once into its reader, so each sum that stays (read more than once, or an output) is one
        ``$macc`` of the values it reaches through adders read once, built of a full adder per bit in, past the
        two rows its carry chain adds. A sum's bits in (a signed value's sign-extended to the sum's width) less its
        own, over the sums: unlike :attr:`adder_bits`, blind to how the adders merged into a sum are arranged."""
        readers = [0] * len(self.nodes)
        for node in self.adders:
            readers[node.a] += 1
            readers[node.b] += 1
        for index, _, _ in self.outputs:
            if index >= 0:
                readers[index] += 2  # an output's sum stays, however often an adder reads it
        total = 0
        for n, node in enumerate(self.nodes):
            if node.b < 0 or readers[n] == 1:
                continue
            pending = [node.a, node.b]
            while pending:
                index = pending.pop()
                value = self.nodes[index]
                if value.b >= 0 and readers[index] == 1:
                    pending += [value.a, value.b]
                elif not value.is_constant:
                    total += max(value.bits, node.bits) if value.lo < 0 else value.bits
            total -= node.bits
        return total

    @property
    def levels(self) -> list[int]:
        """Each node's adder levels from the inputs (0 for inputs and constants)."""
        levels = []
        for node in self.nodes:
            levels.append(0 if node.b < 0 else 1 + max(levels[node.a], levels[node.b]))
        return levels

    def stages(self, every: int) -> int:
        """Registers :func:`constant_products` puts on the way from the inputs to the outputs when it registers
        after every ``every`` levels but the last (``every`` 0: none)."""
        levels = self.levels
        return graph_stages(max((levels[index] for index, _, _ in self.outputs if index >= 0), default=0), every)


def adder_graph(weights: np.ndarray, x_lo: int, x_hi: int, *, pipelined: bool = False,
                keep: bool = True) -> AdderGraph:
    """The shift-and-add graph of ``y = W x`` for the ``(MH, MW)`` integer ``weights``: of da4ml's solutions by
    each of :data:`METHODS`, the one of fewest bits as :func:`constant_products` builds it with ``keep``
    (:attr:`~AdderGraph.adder_bits` kept, :attr:`~AdderGraph.merged_bits` merged; the first of those tied);
    ``pipelined``, of at most :func:`graph_levels` levels."""
    extra = PIPELINED_EXTRA_LEVELS if pipelined else -1
    graphs = [_graph_of(cmvm_logic(weights, x_lo, x_hi, method, extra)) for method in METHODS]
    return min(graphs, key=lambda graph: graph.adder_bits if keep else graph.merged_bits)


def _graph_of(logic) -> AdderGraph:
    """The graph of da4ml's solution ``logic`` (a ``da4ml.types.CombLogic``)."""
    nodes = []
    for op in logic.ops:
        exponent = int(log2(op.qint.step))
        lo, hi = round(op.qint.min / op.qint.step), round(op.qint.max / op.qint.step)
        if op.opcode == -1:
            nodes.append(AdderNode(op.id0, -1, False, 0, lo, hi, exponent))
        elif op.opcode == 5:
            value = int(op.data * op.qint.step)
            nodes.append(AdderNode(-1, -1, False, 0, value, value, 0))
        elif op.opcode in (0, 1):
            nodes.append(AdderNode(op.id0, op.id1, op.opcode == 1, int(op.data), lo, hi, exponent))
        else:
            raise BuildError(f"da4ml's solver gave an operation streamc does not build: opcode {op.opcode} ({op}); "
                             "supported: inputs (-1), adds (0), subtracts (1), constants (5)")
    outputs = tuple((int(index), int(shift), bool(negate))
                    for index, shift, negate in zip(logic.out_idxs, logic.out_shifts, logic.out_negs))
    return AdderGraph(tuple(nodes), outputs)


def keeps_adders(family: str | None) -> bool:
    """Whether a fully unrolled layer built for the device ``family`` keeps its adders (:data:`KEPT_ADDERS`;
    ``None``, no family known: merged, as Yosys leaves them)."""
    return KEPT_ADDERS.get(family, False)


def cmvm_logic(weights: np.ndarray, x_lo: int, x_hi: int, method: str = METHODS[0], extra_levels: int = -1):
    """da4ml's solution (a ``da4ml.types.CombLogic``) of ``y = W x`` for ``x`` of integers in ``[x_lo, x_hi]``,
    as da4ml's own flow traces it, its common subexpressions chosen by ``method`` (da4ml's ``method0``; the
    default, da4ml's), at most ``extra_levels`` adder levels deeper than the fewest (da4ml's ``hard_dc``; -1, its
    default: unbounded); cached by the weights' contents (a 784 x 64 matrix takes minutes)."""
    weights = np.ascontiguousarray(weights, dtype=np.int64)
    return _solved(weights.shape, weights.tobytes(), int(x_lo), int(x_hi), method, int(extra_levels))


@lru_cache(maxsize=64)
def _solved(shape: tuple[int, int], raw: bytes, x_lo: int, x_hi: int, method: str, extra_levels: int):
    # da4ml is imported here, so that nothing else pays for loading its solver.
    from da4ml.trace import FixedVariableArray, comb_trace

    mw = shape[1]
    weights = np.frombuffer(raw, dtype=np.int64).reshape(shape)
    x = FixedVariableArray.from_lhs(np.full(mw, x_lo, float), np.full(mw, x_hi, float), np.ones(mw),
                                    solver_options={"method0": method, "hard_dc": extra_levels})
    return comb_trace(x, x @ weights.T.astype(np.float64))


def constant_products(m, inputs: list, graph: AdderGraph, *, keep: bool = False, every: int = 0,
                      register=None) -> list:
    """The outputs of ``graph`` on the Amaranth values ``inputs`` (integers in the graph's input range), its
    adders added to ``m``'s combinational domain, each a signal of its node's narrowest shape.

    Without ``keep`` Yosys' ``alumacc`` merges an adder with a single reader into that reader's sum, a
    ``$macc`` it builds from LUTs and one carry chain: fewer carry cells, more LUTs. ``keep`` marks every
    adder's signal kept, so each is its own carry chain. Which is smaller depends on the family
    (:data:`KEPT_ADDERS`).

    With ``every`` > 0 the graph is pipelined for the clock, as da4ml cuts its own graphs by level: the adders of
    levels ``s * every + 1`` to ``(s + 1) * every`` (:attr:`AdderGraph.levels`) are stage ``s``, and a value read
    in a later stage than its own passes through ``register`` (a register that moves with the caller's pipeline)
    once per stage between, each register shared by its readers; every output is taken in the last stage, which
    the caller registers. :meth:`AdderGraph.stages` counts the registers on the way."""
    levels = graph.levels
    stage = [max(level - 1, 0) // every if every else 0 for level in levels]
    last = graph.stages(every)
    values, delayed = [], {}

    def at(index: int, when: int):
        """Node ``index``'s value as stage ``when`` reads it: registered once per stage after its own (a constant
        as it is)."""
        if graph.nodes[index].is_constant:
            return values[index]
        chain = delayed.setdefault(index, [values[index]])
        while len(chain) <= when - stage[index]:
            chain.append(register(chain[-1]))
        return chain[when - stage[index]]

    for n, node in enumerate(graph.nodes):
        if node.is_constant:
            value = Const(node.lo, shape_of_range(node.lo, node.hi))
        elif node.is_input:
            value = inputs[node.a]
        else:
            a, b = graph.nodes[node.a], graph.nodes[node.b]
            left = at(node.a, stage[n]).shift_left(a.exponent - node.exponent)
            right = at(node.b, stage[n]).shift_left(b.exponent + node.shift - node.exponent)
            value = Signal(shape_of_range(node.lo, node.hi), name=f"cmvm_{n}", attrs={"keep": 1} if keep else {})
            m.d.comb += value.eq(left - right if node.subtract else left + right)
        values.append(value)
    sums = []
    for index, shift, negate in graph.outputs:
        if index < 0:
            sums.append(0)
            continue
        value = at(index, last).shift_left(graph.nodes[index].exponent + shift)
        sums.append(-value if negate else value)
    return sums
