"""The baselines the planner is measured against: FINN's ``SetFolding`` (:func:`greedy_for_cycles`) and
every folding tried (:func:`exhaustive_for_cycles`)."""

from __future__ import annotations

import itertools
from dataclasses import fields

import numpy as np

from ..devices import Device
from ..hw import Dataflow
from ..resources import ResourceEstimate
from .cost import (
    RESOURCE_FIELDS,
    Choice,
    Plan,
    as_vector,
    cells,
    device_limits,
    is_chain,
    logic_cells,
    over_limits,
    set_knobs,
)
from .search import Planner, search_budget

#: Largest number of foldings :func:`exhaustive_for_cycles` will try: on a chain (branch and bound
#: visits few of them), and on a branching design (all priced at once, ten numbers each in memory).
EXHAUSTIVE_LIMIT, EXHAUSTIVE_LIMIT_BRANCHING = 100_000_000, 500_000


def _greedy(chain: Planner, cycles: int) -> list[Choice]:
    """FINN's SetFolding: raise each knob (SIMD, then PE) through its divisors until the stage meets
    ``cycles``; Yosys places the ROMs."""
    assignment = []
    for k, knobs in enumerate(chain.knobs):
        values = [1 if knob.folds else knob.values[0] for knob in knobs]
        for position, knob in enumerate(knobs):
            if not knob.folds or chain.node_cycles(k, tuple(values)) <= cycles:
                break
            for value in knob.values:
                values[position] = value
                if chain.node_cycles(k, tuple(values)) <= cycles:
                    break
        assignment.append(tuple(values))
    return assignment


def greedy_for_cycles(dataflow: Dataflow, *, cycles: int, device: Device, fifo_depth: int = 2) -> Plan:
    """FINN-style greedy folding for ``cycles`` per frame (each layer on its own; it may miss the
    target where a stage between layers is slower, and says so in ``Plan.cycles``)."""
    chain = Planner(dataflow, device, fifo_depth, placement=False)
    return chain.plan(_greedy(chain, cycles), device_limits(device))


def greedy_for_budget(dataflow: Dataflow, *, device: Device, budget: float, fifo_depth: int = 2) -> Plan | None:
    """The fastest greedy folding within ``budget`` of the device (None if even the slowest does not fit)."""
    chain = Planner(dataflow, device, fifo_depth, placement=False)
    limits = device_limits(device, budget=budget)
    found = search_budget(chain, limits, lambda cycles: _greedy(chain, cycles))
    return None if found is None else chain.plan(found[0], limits)


def exhaustive_size(dataflow: Dataflow, *, cycles: int | None = None, placement: bool = True) -> int:
    """How many foldings :func:`exhaustive_for_cycles` would try (all of them when ``cycles`` is None)."""
    count = 1
    for stage in dataflow.stages:
        knobs = stage.knobs(placement=placement)
        folded = tuple(getattr(stage, knob.name) for knob in knobs)
        options = list(itertools.product(*(k.values for k in knobs)))
        if cycles is not None:
            options = [c for c in options if set_knobs(stage, knobs, c) or stage.cycles() <= cycles]
            set_knobs(stage, knobs, folded)
        count *= len(options)
    return count


def _exhaustive(chain: Planner, cycles: int, limits: dict[str, int] | None) -> list[Choice] | None:
    """Every folding within ``cycles``, depth first; a branch is dropped only when a lower bound of
    its LUTs (what it has so far plus the least each remaining stage and segment can cost) already
    exceeds the best complete folding's (its logic cells on an iCE40, which LUTs bound from below), so the result
    is the exact optimum."""
    family = chain.device.family
    names = [f.name for f in fields(ResourceEstimate)]
    lut = names.index("lut")
    count = len(chain.foldable)
    options = [[c for c in opts if chain.node_cycles(k, c) <= cycles] for k, opts in enumerate(chain.options)]
    if not all(options):
        return None
    if not chain.chain:
        return _exhaustive_branching(chain, options, cycles, limits)

    def vector(resources: ResourceEstimate) -> tuple[int, ...]:
        return tuple(getattr(resources, name) for name in names)

    def edge(s: int, out_key: Choice, in_key: Choice) -> tuple[int, ...] | None:
        if chain.edge_cycles(s, out_key, in_key) > cycles:
            return None
        return vector(chain.edge(s, out_key, in_key))

    # rest[k][r]: least of resource r that stages k.. and segments k + 1.. can take (segment k is
    # priced with stage k): lower bounds that prune a branch over a limit or above the best LUTs.
    least_edges = []
    for s in range(len(chain.segments)):
        costs = [e for e in (edge(s, *pair) for pair in chain.side_pairs(s)) if e is not None]
        if not costs:
            return None
        least_edges.append(tuple(map(min, zip(*costs))))
    least_nodes = [tuple(map(min, zip(*(vector(chain.node(k, c)) for c in opts)))) for k, opts in enumerate(options)]
    rest = [tuple(sum(v[i] for v in least_nodes[k:] + least_edges[k + 1:]) for i in range(len(names)))
            for k in range(count + 1)]
    bounded = [(names.index(key), limit) for key, limit in (limits or {}).items()]
    best: list = [None, None]     # (lut, ff), assignment

    def visit(k: int, chosen: list[Choice], total: tuple[int, ...]) -> None:
        out_key = chain.out_key(k - 1, chosen[-1]) if k else ()
        if k == count:
            last = edge(count, out_key, ())
            if last is None:
                return
            final = tuple(a + b for a, b in zip(total, last))
            resources = ResourceEstimate(**dict(zip(names, final)))
            if limits and over_limits(resources, limits, family):
                return
            key = (logic_cells(resources, family), resources.ff)
            if best[0] is None or key < best[0]:
                best[0], best[1] = key, list(chosen)
            return
        for choice in options[k]:
            cost = edge(k, out_key, chain.in_key(k, choice))
            if cost is None:
                continue
            partial = tuple(a + b + c for a, b, c in zip(total, cost, vector(chain.node(k, choice))))
            if best[0] is not None and partial[lut] + rest[k + 1][lut] > best[0][0]:
                continue
            if any(partial[i] + rest[k + 1][i] > limit for i, limit in bounded):
                continue
            visit(k + 1, chosen + [choice], partial)

    visit(0, [], (0,) * len(names))
    return best[1]


def _exhaustive_branching(chain: Planner, options: list[list[Choice]], cycles: int,
                          limits: dict[str, int] | None) -> list[Choice] | None:
    """Every folding of a branching design in ``options``, priced at once: an array with an axis per
    stage, to which each stage's and each term's costs are added along the axes of the stages they
    depend on. The first (in the order of ``itertools.product``) of the fewest LUTs, then flip-flops."""
    shape = [len(opts) for opts in options]

    def along(k: int, values: list) -> np.ndarray:
        """``values`` (one per choice of stage ``k``) on the axis of stage ``k``."""
        array = np.array(values)
        return array.reshape(*[-1 if axis == k else 1 for axis in range(len(shape))], *array.shape[1:])

    total, reached = np.zeros((*shape, len(RESOURCE_FIELDS)), dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for k, opts in enumerate(options):
        total = total + along(k, [as_vector(chain.node(k, c)) for c in opts])
        reached = np.maximum(reached, along(k, [chain.node_cycles(k, c) for c in opts]))
    for scope, (resources, term_cycles) in chain.terms().items():
        index = tuple(along(k, chain.positions_of((k, side), options[k])) for k, side in scope)
        total, reached = total + resources[index], np.maximum(reached, term_cycles[index])
    # on an iCE40 the fewest logic cells, and its LUT limit holds them (as the planner's)
    lut, ff = (total[..., RESOURCE_FIELDS.index(key)] for key in ("lut", "ff"))
    used = cells(lut, ff, chain.device.family)
    fits = reached <= cycles
    for key, limit in (limits or {}).items():
        fits &= (used if key == "lut" else total[..., RESOURCE_FIELDS.index(key)]) <= limit
    flat = np.flatnonzero(fits)
    if not len(flat):
        return None
    best = np.unravel_index(flat[np.lexsort((ff.reshape(-1)[flat], used.reshape(-1)[flat]))[0]], shape)
    return [options[k][int(at)] for k, at in enumerate(best)]


def _check_size(dataflow: Dataflow, cycles: int | None, placement: bool) -> None:
    size = exhaustive_size(dataflow, cycles=cycles, placement=placement)
    limit = EXHAUSTIVE_LIMIT if is_chain(dataflow) else EXHAUSTIVE_LIMIT_BRANCHING
    if size > limit:
        raise ValueError(f"{size} foldings to try, more than {limit}")


def exhaustive_for_cycles(dataflow: Dataflow, *, cycles: int, device: Device, fifo_depth: int = 2,
                          limits: dict[str, int] | None = None, placement: bool = True) -> Plan | None:
    """Try every folding whose foldable stages take at most ``cycles``; the one with the fewest LUTs
    (then flip-flops) that reaches ``cycles`` and fits ``limits`` (when given). None if none does.
    With ``placement``, every placement of every ROM too.

    Raises
    ------
    ValueError
        If there are more foldings to try than :data:`EXHAUSTIVE_LIMIT` (a chain) or
        :data:`EXHAUSTIVE_LIMIT_BRANCHING` (a branching design).
    """
    _check_size(dataflow, cycles, placement)
    chain = Planner(dataflow, device, fifo_depth, placement)
    best = _exhaustive(chain, cycles, limits)
    return None if best is None else chain.plan(best, limits or device_limits(device))


def exhaustive_for_budget(dataflow: Dataflow, *, device: Device, budget: float, fifo_depth: int = 2,
                          placement: bool = True) -> Plan | None:
    """The fewest cycles per frame at which some folding fits ``budget``, by trying every folding.

    Raises
    ------
    ValueError
        If there are more foldings in all than :func:`exhaustive_for_cycles` takes.
    """
    _check_size(dataflow, None, placement)
    chain = Planner(dataflow, device, fifo_depth, placement)
    limits = device_limits(device, budget=budget)
    # Whether some folding fits within c cycles only grows with c: the search may bisect.
    found = search_budget(chain, limits, lambda cycles: _exhaustive(chain, cycles, limits))
    return None if found is None else chain.plan(found[0], limits)

