"""The planner's search: the folding of fewest LUTs within a cycle count (a shortest path over a
chain, elimination over a branching design), resource limits met by pricing what overflows, and the
fewest cycles within a budget."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..devices import Device, get_device
from ..errors import FoldingError
from ..folding import target_cycles
from ..hw import Dataflow
from ..progress import report
from ..resources import ResourceEstimate
from ..rtl.arithmetic import shape_of_range
from ..stages.mvau import MVAULayer
from ..stages.window import WindowStage
from ..timing import CLOCK_CANDIDATES_MHZ, Clock, delay_model
from .cost import (
    LIMITED,
    RESOURCE_FIELDS,
    Chain,
    Choice,
    Plan,
    as_vector,
    device_limits,
    lanes_of,
    logic_cells,
    objective,
    over_limits,
)

#: The first price, in LUTs, of a block RAM, SPRAM, DSP or flip-flop over its limit; how many times it
#: doubles before giving up; how many halvings then look for the least price that still fits.
_START_PRICE, _PRICE_ROUNDS, _BISECTIONS = 8.0, 16, 6


class Planner(Chain):
    """The cost model with the searches over it."""

    def _eliminate(self, cycles: int, prices: dict[str, float]) -> list[Choice] | None:
        """The folding of least priced cost within ``cycles`` of a branching design, exactly: the cost
        is a sum of terms over few stages each, so stages are eliminated one at a time, each replaced
        by the least cost it can add for every combination of the sides its terms share with stages
        still there (the one leaving the smallest table first), then chosen back in reverse order."""
        weights = np.array([prices.get(name, 0.0) for name in RESOURCE_FIELDS])
        count = len(self.foldable)
        choices = [list(self._placed_cheapest(k, list(weights), cycles)) for k in range(count)]
        if not all(choices):
            return None
        # A factor: the (stage, side) entries it depends on and its priced cost per combination of
        # their keys; ("choice") indexes a stage's own choices.
        factors = [([(k, "choice")], np.array([float(np.dot(weights, as_vector(self.node(k, c)))) for c in opts]))
                   for k, opts in enumerate(choices)]
        for scope, (resources, reached) in self.terms().items():
            factors.append((list(scope), np.where(reached > cycles, np.inf, resources @ weights)))
        size = {entry: len(self._domains[entry]) for entry in self._domains}
        positions = {(k, side): np.array(self.positions_of((k, side), opts))
                     for k, opts in enumerate(choices) for side in ("in", "out")}
        positions.update({(k, "choice"): np.arange(len(opts)) for k, opts in enumerate(choices)})

        def shared(k: int) -> list[tuple[int, str]]:
            return sorted({entry for scope, _ in factors if any(v == k for v, _ in scope)
                           for entry in scope if entry[0] != k})

        remaining, trace = set(range(count)), []
        while remaining:
            k = min(remaining, key=lambda k: (math.prod(size[entry] for entry in shared(k)), k))
            remaining.remove(k)
            kept = shared(k)
            total = np.zeros((len(choices[k]), *(size[entry] for entry in kept)))
            rest = []
            for scope, table in factors:
                if not any(v == k for v, _ in scope):
                    rest.append((scope, table))
                    continue
                index = []
                for v, side in scope:
                    shape = [1] * (1 + len(kept))
                    if v == k:
                        shape[0] = -1
                        index.append(positions[(v, side)].reshape(shape))
                    else:
                        shape[1 + kept.index((v, side))] = -1
                        index.append(np.arange(size[(v, side)]).reshape(shape))
                total = total + table[tuple(index)]
            factors = rest + [(kept, total.min(axis=0))]
            trace.append((k, kept, total.argmin(axis=0)))
        if not np.isfinite(sum(float(table) for _, table in factors)):
            return None
        chosen: dict[int, int] = {}
        for k, kept, best in reversed(trace):
            chosen[k] = int(best[tuple(self.position(entry, choices[entry[0]][chosen[entry[0]]]) for entry in kept)])
        return [choices[k][chosen[k]] for k in range(count)]


    def candidate_cycles(self) -> list[int]:
        """Every cycles-per-frame value some stage takes under some folding, ascending."""
        values = {self.node_cycles(k, c) for k, options in enumerate(self.options) for c in options}
        if self.chain:
            for s in range(len(self.segments)):
                values |= {self.edge_cycles(s, o, i) for o, i in self.side_pairs(s)}
        else:
            for _, reached in self.terms().values():
                values |= set(reached.flat)
        return sorted(v for v in values if v > 0) or [1]

    def side_pairs(self, s: int) -> list[tuple[Choice, Choice]]:
        outs = {self.out_key(s - 1, c) for c in self.options[s - 1]} if s > 0 else {()}
        ins = {self.in_key(s, c) for c in self.options[s]} if s < len(self.foldable) else {()}
        return [(o, i) for o in sorted(outs) for i in sorted(ins)]

    def unreachable(self, cycles: int) -> tuple[int, list[str]]:
        """The fewest cycles per frame any folding reaches, and each stage that cannot reach ``cycles``."""
        assignment = self.fastest_assignment()
        self.apply(assignment)
        chosen = dict(zip(self.foldable, assignment))
        reasons = []
        for index, stage in enumerate(self.stages):
            if stage.cycles() <= cycles:
                continue
            if index in chosen:
                k = self.foldable.index(index)
                values = ", ".join(f"{knob.name}={value}" for knob, value in zip(self.knobs[k], chosen[index])
                                   if knob.folds)
                how = f"at its fastest folding ({values})"
                reasons.append(f"{stage.describe()} {how} takes {stage.cycles()} cycles per frame, "
                               f"{stage.cycles() / cycles:.3g}x the {cycles} the target allows")
            else:
                reasons.append(f"{stage.describe()} takes {stage.cycles()} cycles per frame at its fastest "
                               f"({lanes_of(stage)}), {stage.cycles() / cycles:.3g}x the {cycles} the target allows")
        return max(stage.cycles() for stage in self.stages), reasons

    def cheapest(self, cycles: int, prices: dict[str, float]) -> list[Choice] | None:
        """The folding of least priced cost with every stage within ``cycles`` (None if there is none)."""
        if not self.chain:
            return self._eliminate(cycles, prices)
        weights = [prices.get(name, 0.0) for name in RESOURCE_FIELDS]
        inf = float("inf")
        count = len(self.foldable)
        if count == 0:
            return [] if self.edge_cycles(0, (), ()) <= cycles else None
        edge_price = self._edge_prices(weights, cycles)
        # best[k][choice] = (cost of everything up to and including stage k, choice of stage k - 1)
        best: list[dict[Choice, tuple[float, Choice | None]]] = []
        for k in range(count):
            layer: dict[Choice, tuple[float, Choice | None]] = {}
            reachable: dict[Choice, tuple[float, Choice | None]] = {}
            if k:
                for choice, (cost, _) in best[-1].items():
                    key = self.out_key(k - 1, choice)
                    if cost < reachable.get(key, (inf, None))[0]:
                        reachable[key] = (cost, choice)
            else:
                reachable[()] = (0.0, None)
            # Cheapest predecessors first: a segment costs at least nothing, so once the cost so far
            # reaches the best found, no later predecessor can win (and its segment is never priced).
            ordered = sorted(reachable.items(), key=lambda item: item[1][0])
            # The way in depends on a choice's input side alone: found once per side, for all the choices
            # that fold it alike.
            into: dict[Choice, tuple[float, Choice | None]] = {}
            for choice, node_cost in self._placed_cheapest(k, weights, cycles).items():
                in_key = self.in_key(k, choice)
                if in_key not in into:
                    entry = (inf, None)
                    for out_key, (cost, previous) in ordered:
                        if cost >= entry[0]:
                            break
                        total = cost + edge_price(k, out_key, in_key)
                        if total < entry[0]:
                            entry = (total, previous)
                    into[in_key] = entry
                entry = into[in_key]
                if entry[0] < inf:
                    layer[choice] = (entry[0] + node_cost, entry[1])
            if not layer:
                return None
            best.append(layer)
        final, last = inf, None
        for choice, (cost, _) in best[-1].items():
            total = cost + edge_price(count, self.out_key(count - 1, choice), ())
            if total < final:
                final, last = total, choice
        if last is None:
            return None
        assignment = [last]
        for k in range(count - 1, 0, -1):
            assignment.append(best[k][assignment[-1]][1])
        return assignment[::-1]

    def _edge_prices(self, weights: list[float], cycles: int):
        """The priced cost of a segment between its neighbours' sides at ``weights`` (a price per resource),
        infinite past ``cycles``: worked out once per sides, which the shortest path asks for again for
        every choice of a stage that folds its side alike."""
        known: dict[tuple[int, Choice, Choice], float] = {}

        def price(s: int, out_key: Choice, in_key: Choice) -> float:
            key = (s, out_key, in_key)
            if key not in known:
                vector = self.edge_within(s, out_key, in_key, cycles)
                known[key] = float("inf") if vector is None else sum(w * v for w, v in zip(weights, vector))
            return known[key]
        return price

    def _placed_cheapest(self, k: int, weights: list[float], cycles: int) -> dict[Choice, float]:
        """Stage ``k``'s choices within ``cycles``, of those that fold it alike the one whose placement
        costs least at ``weights`` (a price per resource), with that cost: placement changes the stage
        alone, so the others can never be part of the cheapest design."""
        choices, matrix, groups = self._folding_groups(k, cycles)
        if not choices:
            return {}
        # Summed resource by resource, in order: the same float sums as the scalar dot product, so that
        # ties break alike.
        costs = np.zeros(len(choices))
        for column, weight in enumerate(weights):
            costs = costs + weight * matrix[:, column]
        # Per folding (in the order the foldings first come) the first of its least costly choices.
        order = np.lexsort((np.arange(len(choices)), costs, groups))
        first = order[np.flatnonzero(np.diff(groups[order], prepend=-1))]
        return {choices[at]: cost for at, cost in zip(first.tolist(), costs[first].tolist())}

    def _folding_groups(self, k: int, cycles: int) -> tuple[list[Choice], np.ndarray, np.ndarray]:
        """:meth:`_vectors` as arrays: the choices, their resources (a row each) and which folding each has
        (numbered as the foldings first come)."""
        if (k, cycles) not in self._groups_within:
            options = self._vectors(k, cycles)
            numbers: dict[Choice, int] = {}
            self._groups_within[(k, cycles)] = (
                [choice for _, choice, _ in options],
                np.array([vector for _, _, vector in options], dtype=np.float64).reshape(len(options), len(RESOURCE_FIELDS)),
                np.array([numbers.setdefault(folded, len(numbers)) for folded, _, _ in options], dtype=np.int64))
        return self._groups_within[(k, cycles)]

    def _vectors(self, k: int, cycles: int) -> list[tuple[Choice, Choice, tuple[int, ...]]]:
        """Each choice of stage ``k`` within ``cycles`` with its lanes and its resources as a vector
        (only those are priced: a stage's spec is built per folding, in milliseconds)."""
        if (k, cycles) not in self._node_vectors:
            self._node_vectors[(k, cycles)] = [(self.folded(k, c), c, as_vector(self.node(k, c)))
                                               for c in self.options[k] if self.node_cycles(k, c) <= cycles]
        return self._node_vectors[(k, cycles)]

    def _fits_nowhere(self, cycles: int, limits: dict[str, int]) -> bool:
        """Whether the least each stage can take of some resource within ``cycles``, summed, is already
        over ``limits`` (a bound: the links between stages take something too)."""
        least = [0] * len(RESOURCE_FIELDS)
        for k in range(len(self.options)):
            vectors = [vector for _, _, vector in self._vectors(k, cycles)]
            if not vectors:
                return False
            least = [total + min(v[i] for v in vectors) for i, total in enumerate(least)]
        return any(least[RESOURCE_FIELDS.index(key)] > limit for key, limit in limits.items())

    def cheapest_within(self, cycles: int, limits: dict[str, int]) -> list[Choice] | None:
        """The fewest LUTs within ``cycles`` whose block RAM, SPRAM, DSP and flip-flop counts fit ``limits``.

        LUTs are minimized exactly. A count over its limit gets a price in LUTs, doubled until it
        fits, then bisected down to the least price that still fits (a higher price trades more
        LUTs away than needed). Prices jump past foldings in between (four block RAMs allowed, the
        priced optimum takes six or one), so on a chain the cheapest folding is also repaired one
        stage at a time (:meth:`_repair`). Returns the fitting folding with the fewest LUTs found,
        else the last one tried (which does not fit), or None when no folding reaches ``cycles``.
        """
        # On an iCE40 the flip-flops no LUT of their own drives take logic cells: the fewest cells.
        family = self.device.family
        prices = objective(family)
        tried = []

        def attempt() -> list[str] | None:
            assignment = self.cheapest(cycles, prices)
            if assignment is None:
                return None
            resources = self.evaluate(assignment)[0]
            tried.append((resources, assignment))
            over = [key for key in over_limits(resources, limits, family) if key not in ("lut", "cells")]
            # LUTs (cells) are what the search trades away: shown against their limit, not judged here.
            report(f"at {cycles:,} cycles/frame, folding {len(tried)}: {resources.lut:,} of {limits['lut']:,} LUTs"
                   + (f", over on {', '.join(over)}" if over else ""))
            return over

        over = attempt()
        # The bound prices every choice of every stage: only worth it once the cheapest is over.
        if tried and over_limits(tried[0][0], limits, family) and self._fits_nowhere(cycles, limits):
            return tried[0][1]
        priced = set()
        for _ in range(_PRICE_ROUNDS):
            if not over:
                break
            for key in over:
                prices[key] = max(prices.get(key, 0.0) * 2, _START_PRICE)
                priced.add(key)
            over = attempt()
        for key in sorted(priced) if over == [] else []:
            low, high = 0.0, prices[key]
            for _ in range(_BISECTIONS):
                prices[key] = (low + high) / 2
                if attempt():
                    low = prices[key]
                else:
                    high = prices[key]
            prices[key] = high
        if not tried:
            return None
        if len(tried) > 1:
            repaired = self._repair(tried[0][1], cycles, limits)
            if repaired is not None:
                tried.append((self.evaluate(repaired)[0], repaired))
        fitting = [(logic_cells(r, family), r.ff, a) for r, a in tried if not over_limits(r, limits, family)]
        return min(fitting)[2] if fitting else tried[-1][1]

    def _around(self, k: int, assignment: list[Choice]) -> tuple[tuple[int, ...], int]:
        """Resources (as a vector) and cycles of what stage ``k``'s choice decides on a chain: the stage
        and the segments on either side of it."""
        parts = [self.node(k, assignment[k]), self.edge(k, *self.sides(k, assignment)),
                 self.edge(k + 1, *self.sides(k + 1, assignment))]
        cycles = max(self.node_cycles(k, assignment[k]), self.edge_cycles(k, *self.sides(k, assignment)),
                     self.edge_cycles(k + 1, *self.sides(k + 1, assignment)))
        return tuple(map(sum, zip(*(as_vector(part) for part in parts)))), cycles

    def _moves(self, assignment: list[Choice], cycles: int) -> tuple[list[tuple[int, Choice]], np.ndarray]:
        """Each change of one stage's choice away from ``assignment`` (which is within ``cycles``) that
        stays within ``cycles``, as (stage, choice), and the resources of the folding it gives (a row each)."""
        total = np.array(as_vector(self.evaluate(assignment)[0]))
        moves, rows = [], [np.zeros((0, len(RESOURCE_FIELDS)), dtype=np.int64)]
        for k in range(len(self.options)):
            choices, nodes, node_cycles, in_at, out_at = self._choice_table(k, cycles)
            others = np.array([choice != assignment[k] for choice in choices], dtype=bool)
            if not others.any():
                continue
            if self.chain:
                # Only the stage and the segments on either side of it change, between fixed neighbours:
                # each segment priced once per side of the stage that sets it.
                left = self.out_key(k - 1, assignment[k - 1]) if k > 0 else ()
                right = self.in_key(k + 1, assignment[k + 1]) if k + 1 < len(self.foldable) else ()
                before, _ = self._around(k, assignment)
                inward, inward_cycles = self._segment_table(k, [(left, key) for key in self._domains[(k, "in")]], cycles)
                outward, outward_cycles = self._segment_table(k + 1, [(key, right) for key in self._domains[(k, "out")]],
                                                              cycles)
                reached = np.maximum(node_cycles, np.maximum(inward_cycles[in_at], outward_cycles[out_at]))
                kept = np.flatnonzero(others & (reached <= cycles))
                moves += [(k, choices[i]) for i in kept]
                rows.append(total - np.array(before) + nodes[kept] + inward[in_at[kept]] + outward[out_at[kept]])
                continue
            # What changes with stage k's choice: the stage and the terms that depend on it.
            changed = np.flatnonzero(others)
            candidates = [choices[i] for i in changed]
            vectors, reached = self._terms_at(assignment, stage=k, choices=[assignment[k]] + candidates)
            vectors = vectors + np.concatenate([[as_vector(self.node(k, assignment[k]))], nodes[changed]])
            within = reached[1:] <= cycles
            rows.append(total - vectors[0] + vectors[1:][within])
            moves += [(k, choice) for choice, ok in zip(candidates, within) if ok]
        return moves, np.concatenate(rows)

    def _choice_table(self, k: int, cycles: int) -> tuple[list[Choice], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Stage ``k``'s choices within ``cycles`` (:meth:`_vectors`) as arrays for the repair's moves: their
        resources (a row each), cycles, and the position of each one's input and output side among the
        stage's (``_domains``)."""
        if (k, cycles) not in self._choice_tables:
            ins, outs = ({key: at for at, key in enumerate(self._domains[(k, side)])} for side in ("in", "out"))
            options = self._vectors(k, cycles)
            choices = [choice for _, choice, _ in options]
            vectors = np.array([vector for _, _, vector in options], dtype=np.int64)
            self._choice_tables[(k, cycles)] = (
                choices, vectors.reshape(len(options), len(RESOURCE_FIELDS)),
                np.array([self.node_cycles(k, choice) for choice in choices], dtype=np.int64),
                np.array([ins[self.in_key(k, choice)] for choice in choices], dtype=np.int64),
                np.array([outs[self.out_key(k, choice)] for choice in choices], dtype=np.int64))
        return self._choice_tables[(k, cycles)]

    def _segment_table(self, s: int, sides: list[tuple[Choice, Choice]], cycles: int) -> tuple[np.ndarray, np.ndarray]:
        """Resources (a row each) and cycles of segment ``s`` between each of ``sides``: priced only within
        ``cycles``, as every search prices a segment (zeros past them, where no move goes)."""
        vectors = np.zeros((len(sides), len(RESOURCE_FIELDS)), dtype=np.int64)
        for at, pair in enumerate(sides):
            vector = self.edge_within(s, *pair, cycles)
            if vector is not None:
                vectors[at] = vector
        return vectors, np.array([self.edge_cycles(s, *pair) for pair in sides], dtype=np.int64)

    def _repair(self, assignment: list[Choice], cycles: int, limits: dict[str, int]) -> list[Choice] | None:
        """From a folding over ``limits`` (other than LUTs), change one stage at a time, each time the
        one that gives up the fewest LUTs per share of the overflow it removes, until it fits; then
        take the one-stage change that saves most LUTs and still fits, while there is one.
        None if no change reduces the overflow."""
        kept = [(RESOURCE_FIELDS.index(key), limits[key]) for key in LIMITED if key != "lut"]
        lut, ff = RESOURCE_FIELDS.index("lut"), RESOURCE_FIELDS.index("ff")

        def overflow(rows: np.ndarray) -> np.ndarray:
            total = np.zeros(len(rows))
            for i, limit in kept:
                total = total + np.maximum(0, rows[:, i] - limit) / max(limit, 1)
            return total

        resources = np.array(as_vector(self.evaluate(assignment)[0]))
        while (over := overflow(resources[None])[0]) > 0:
            moves, rows = self._moves(assignment, cycles)
            left = overflow(rows)
            useful = np.flatnonzero(left < over)
            if not len(useful):
                return None
            # The first of the least (LUTs given up per overflow removed, flip-flops).
            ratio = (rows[useful, lut] - resources[lut]) / (over - left[useful])
            best = useful[np.lexsort((rows[useful, ff], ratio))[0]]
            assignment, resources = _moved(assignment, *moves[best]), rows[best]
        while True:
            moves, rows = self._moves(assignment, cycles)
            better = np.flatnonzero((overflow(rows) == 0) & ((rows[:, lut] < resources[lut]) | (
                (rows[:, lut] == resources[lut]) & (rows[:, ff] < resources[ff]))))
            if not len(better):
                return assignment
            best = better[np.lexsort((rows[better, ff], rows[better, lut]))[0]]
            assignment, resources = _moved(assignment, *moves[best]), rows[best]


def _moved(assignment: list[Choice], k: int, choice: Choice) -> list[Choice]:
    return assignment[:k] + [choice] + assignment[k + 1:]


_UNITS = {"lut": "LUTs", "ff": "flip-flops", "bram": "block RAMs", "dsp": "DSPs", "spram": "SPRAMs",
          "cells": "logic cells"}


def not_fitting(chain: Planner, assignment: list[Choice], limits: dict[str, int], what: str) -> FoldingError:
    """Which resources overflow, by how much, and the layer that takes most of the first of them."""
    device = chain.device
    # placed, as the plan and the budget's search judge it
    resources = chain.placed_design(assignment, limits)[0]
    over = over_limits(resources, limits, device.family)

    def amount(part: ResourceEstimate, key: str) -> int:
        return logic_cells(part, device.family) if key == "cells" else getattr(part, key)

    problems = []
    for key in over:
        used = amount(resources, key)
        limit, has = (limits["lut"], device.lut) if key == "cells" else (limits[key], getattr(device, key))
        allowed = f"{limit} are available" if limit == has else f"{limit} ({limit / has:.0%} of {has}) are allowed"
        detail = " (LUT4s, and the flip-flops that take a cell of their own)" if key == "cells" else ""
        problems.append(f"{used} {_UNITS[key]}{detail} where {allowed} ({used - limit} over)")
    culprit, alone = "the design", ""
    if chain.foldable:
        k = max(range(len(chain.foldable)), key=lambda k: amount(chain.node(k, assignment[k]), over[0]))
        culprit = chain.stages[chain.foldable[k]].describe()
        alone = f"; this layer alone takes {amount(chain.node(k, assignment[k]), over[0])} {_UNITS[over[0]]}"
    return FoldingError(f"{culprit} does not fit the {device.name} ({device.part}) {what}: the design needs "
                        f"{'; '.join(problems)}{alone}")



def plan_for_cycles(dataflow: Dataflow, *, cycles: int, device: Device, fifo_depth: int = 2,
                    limits: dict[str, int] | None = None, target: str | None = None, placement: bool = True) -> Plan:
    """The folding with the fewest LUTs in which every stage takes at most ``cycles`` per frame.

    Parameters
    ----------
    cycles : int
        Cycles per frame the slowest stage may take.
    device : Device
        Whose resource models price the folding.
    limits : dict, optional
        Resources the design must fit (``device_limits``). None: the fewest LUTs that fit the whole
        device if any folding does, else the fewest LUTs (the plan then says it does not fit).
    target : str, optional
        How the user asked for ``cycles`` (``"target_fps=1e+06 at clock_mhz=100"``), for messages.
    placement : bool
        Whether to choose where each ROM goes (LUTs or block RAM); else Yosys does (``"auto"``).

    Raises
    ------
    FoldingError
        If some stage cannot reach ``cycles`` per frame (the message names each, with its fastest
        folding and cycles), or, with ``limits``, if no folding that reaches it fits.
    """
    chain = Planner(dataflow, device, fifo_depth, placement)
    # Without limits, still the device's: LUTs are not worth block RAMs the device does not have.
    assignment = chain.cheapest_within(cycles, limits or device_limits(device))
    if assignment is None:
        fastest, reasons = chain.unreachable(cycles)
        asked = target or f"{cycles} cycles per frame"
        raise FoldingError(f"{asked} cannot be met: " + "; ".join(reasons)
                           + f". The fastest folding takes {fastest} cycles per frame")
    plan = chain.plan(assignment, limits or device_limits(device))
    if limits and not plan.fits:
        at = f"at {target} ({cycles} cycles per frame)" if target else f"at {cycles} cycles per frame"
        raise not_fitting(chain, assignment, limits, f"{at}, even folded as cheaply as possible")
    if not plan.fits:
        plan = chain.plan(chain.cheapest(cycles, objective(device.family)), device_limits(device))
    return plan


def search_budget(chain: Planner, limits: dict[str, int], fold) -> tuple[list[Choice], int] | None:
    """The fewest cycles per frame at which ``fold(cycles)`` gives a folding within ``limits``."""
    candidates = chain.candidate_cycles()

    probed = []

    def fitting(index: int) -> list[Choice] | None:
        probed.append(candidates[index])
        assignment = fold(candidates[index])
        if assignment is not None:
            # With its tables placed: a table moved into block RAM frees LUTs for a faster folding.
            resources, _, _ = chain.placed_design(assignment, limits)
            assignment = None if over_limits(resources, limits, chain.device.family) else assignment
        report(f"fewest cycles within the budget: {len(probed)} of {len(candidates):,} cycle counts probed, "
               f"{candidates[index]:,} cycles/frame {'fits' if assignment else 'does not fit'}")
        return assignment

    if fitting(len(candidates) - 1) is None:
        return None
    low, high = 0, len(candidates) - 1      # candidates[high] fits
    while low < high:
        middle = (low + high) // 2
        if fitting(middle) is not None:
            high = middle
        else:
            low = middle + 1
    return fitting(high), candidates[high]


def plan_for_budget(dataflow: Dataflow, *, device: Device, budget: float, fifo_depth: int = 2,
                    placement: bool = True, reserved: ResourceEstimate | None = None, clock: Clock | None = None) -> Plan:
    """The fewest cycles per frame whose cheapest folding fits ``budget`` of ``device``'s LUTs
    (and its block RAM, SPRAM, DSPs and flip-flops, less ``reserved``); ``placement`` as for
    :func:`plan_for_cycles`; with ``clock``, every stage pipelined for it first.

    Raises
    ------
    FoldingError
        If even the slowest, cheapest folding does not fit: the message says which resource, by how
        much, and which layer takes most of it.
    """
    chain = Planner(dataflow, device, fifo_depth, placement, clock)
    limits = device_limits(device, budget=budget, reserved=reserved)
    return chain.plan(fastest_within(chain, limits, budget), limits)


def fastest_within(chain: Planner, limits: dict[str, int], budget: float) -> list[Choice]:
    """The folding of :func:`plan_for_budget` on ``chain``, within ``limits`` (``budget`` of the device, for messages).

    Raises
    ------
    FoldingError
        As :func:`plan_for_budget`.
    """
    found = search_budget(chain, limits, lambda cycles: chain.cheapest_within(cycles, limits))
    if found is None:
        slowest = chain.candidate_cycles()[-1]
        assignment = chain.cheapest_within(slowest, limits)
        raise not_fitting(chain, assignment, limits, f"within budget={budget:g}, even folded as cheaply as "
                                                      f"possible (which takes {chain.evaluate(assignment)[1]} cycles "
                                                      f"per frame)")
    return found[0]


def closing_clocks(dataflow: Dataflow, family: str) -> list[float]:
    """The candidate clocks of ``family`` (:data:`~streamc.timing.CLOCK_CANDIDATES_MHZ`) at which the delay model
    says the paths no register splits close: a block RAM's read, one adder level with the design's widest
    accumulator after it, and the control paths (a sliding window's, if the design has one)."""
    width = max((shape_of_range(int(stage.acc_lo.min()), int(stage.acc_hi.max())).width
                 for stage in dataflow.stages if isinstance(stage, MVAULayer)), default=0)
    window = any(isinstance(stage, WindowStage) for stage in dataflow.stages)
    delays = delay_model(family)
    return [mhz for mhz in CLOCK_CANDIDATES_MHZ[family] if delays.closes(1000.0 / mhz, width, window)]


def plan_clock_for_budget(dataflow: Dataflow, *, device: Device, budget: float, fifo_depth: int = 2,
                          placement: bool = True, reserved: ResourceEstimate | None = None,
                          clocks: list[float] | None = None) -> Plan:
    """The clock and folding of the most frames per second within ``budget`` (as :func:`plan_for_budget`): at each
    of ``clocks`` (default: :func:`closing_clocks`) the fastest folding within the budget, pipelined for that clock;
    the plan of the most ``clock / cycles`` is kept, the slower clock among equals (fewer registers), and the
    dataflow is left folded and pipelined as it says (``Plan.clock_mhz``).

    A faster clock never takes fewer cycles (its registers only add to each folding's cost), so the cycles are a
    step function of the clock, and the most frames per second lie at the top of a step. The search plans the
    slowest and fastest clocks and bisects between two planned clocks while their cycles differ and the clocks
    between could beat the best found (the fastest of them over the slower end's cycles). Cycle counts are shared
    between the clocks' plans; specs and costs are priced per clock (:class:`~streamc.planner.cost.Chain`).

    Raises
    ------
    FoldingError
        If the slowest clock has no folding within the budget (its reason), or no clock closes.
    """
    clocks = sorted(clocks if clocks is not None else closing_clocks(dataflow, device.family))
    if not clocks:
        raise FoldingError(f"clock_mhz: auto: none of the {device.family} clocks streamc plans at "
                           f"({CLOCK_CANDIDATES_MHZ[device.family][0]:g} to {CLOCK_CANDIDATES_MHZ[device.family][-1]:g} "
                           f"MHz) closes this design by the delay model; give clock_mhz")

    limits = device_limits(device, budget=budget, reserved=reserved)

    def planned(mhz: float) -> tuple[Planner, list[Choice]]:
        report(f"clock_mhz auto: planning at {mhz:g} MHz")
        chain = Planner(dataflow, device, fifo_depth, placement, Clock(mhz=mhz, family=device.family))
        return chain, fastest_within(chain, limits, budget)

    # Each clock planned: its chain, folding and cycles per frame, or None.
    plans: dict[int, tuple[Planner, list[Choice], int] | None] = {}

    def plan_at(at: int) -> None:
        chain, assignment = planned(clocks[at])
        plans[at] = chain, assignment, chain.evaluate(assignment)[1]

    plan_at(0)    # the slowest clock's FoldingError is the design's

    def cycles(at: int) -> float:
        if at not in plans:
            try:
                plan_at(at)
            except FoldingError:
                plans[at] = None    # its registers leave no folding within the budget
        return plans[at][2] if plans[at] else math.inf

    def best() -> float:
        return max(clocks[at] / cycles(at) for at, plan in plans.items() if plan)

    pending = [(0, len(clocks) - 1)]
    cycles(len(clocks) - 1)
    while pending:
        low, high = pending.pop()
        if high - low <= 1 or cycles(low) == cycles(high) or clocks[high - 1] / cycles(low) <= best():
            continue
        middle = (low + high) // 2
        cycles(middle)
        # The faster half first: its plans raise the bar the slower half must beat.
        pending += [(low, middle), (middle, high)]
    # The most frames/s; among equals the slower clock.
    at = max((at for at, plan in plans.items() if plan), key=lambda at: (clocks[at] / cycles(at), -at))
    report(f"clock_mhz auto: {clocks[at]:g} MHz, {cycles(at):,} cycles/frame ({len(plans)} of {len(clocks)} "
           f"clocks planned)")
    # The dataflow left folded and pipelined as the chosen plan says (the last clock tried may be another).
    chain, assignment, _ = plans[at]
    chain.pipeline()
    return dataclasses.replace(chain.plan(assignment, limits), clock_mhz=clocks[at])


# --- The build's entry point ------------------------------------------------------------------------

def plan_folding(dataflow: Dataflow, config) -> Plan:
    """Fold ``dataflow`` as a build configuration asks (``target_fps`` or ``budget``) and return the plan.

    Costs are those of the first device in ``config.devices`` (iCE40 UP5K if the list is empty).
    With ``target_fps``, the plan must fit that device when the configuration names ``devices``.
    Where the configuration names a board on that device, what its shell takes stays free.

    Raises
    ------
    FoldingError
        If the target cannot be reached (which stage, and how far it is), or the design does not
        fit (which resource, by how much, and the layer that takes most of it).
    """
    from ..boards import get_board, shell_resources
    from ..protocol import FrameFormat

    device = get_device(config.devices[0] if config.devices else "ice40-up5k")

    def plan(reserved: ResourceEstimate | None) -> Plan:
        if config.clock_mhz == "auto":
            return plan_clock_for_budget(dataflow, device=device, budget=config.budget, fifo_depth=config.fifo_depth,
                                         reserved=reserved)
        if config.budget is not None:
            return plan_for_budget(dataflow, device=device, budget=config.budget, fifo_depth=config.fifo_depth,
                                   reserved=reserved)
        cycles = target_cycles(target_fps=config.target_fps, clock_mhz=config.clock_mhz)
        must_fit = "devices" in config.model_fields_set and bool(config.devices)
        return plan_for_cycles(dataflow, cycles=cycles, device=device, fifo_depth=config.fifo_depth,
                               limits=device_limits(device, reserved=reserved) if must_fit else None,
                               target=f"target_fps={config.target_fps:g} at clock_mhz={config.clock_mhz:g}")

    board = get_board(config.board) if config.board else None
    if board is None or board.device != device.name:
        return plan(None)
    # The shell's beat registers grow with the lanes the folding gives the accelerator's ends: planned
    # for the beats of the dataflow as it comes, and once more if the plan's beats need more.
    assumed = shell_resources(board, FrameFormat.from_dataflow(dataflow))
    found = plan(assumed)
    needed = shell_resources(board, FrameFormat.from_dataflow(dataflow))
    if any(getattr(needed, key) > getattr(assumed, key) for key in LIMITED):
        found = plan(needed)
    return found

