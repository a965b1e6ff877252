"""The folding planner: PE and SIMD per layer for a throughput target or a share of a device.

Two questions, both answered on the resource models of :mod:`streamc.resources` for one device:

- :func:`plan_for_cycles`: the folding with the fewest LUTs whose every stage takes at most a
  given number of cycles per frame (``target_fps`` at ``clock_mhz``);
- :func:`plan_for_budget`: the fewest cycles per frame whose cheapest folding fits a fraction of
  the device's LUTs, with its block RAM, SPRAM, DSPs and flip-flops.

The design is a chain of foldable stages (those :func:`fold_knobs` gives knobs) with stages
between them whose lanes follow their neighbours (a lookup table keeps its producer's pace, a
sliding window its consumer's). What a stage costs depends on its own folding; what the stages,
FIFOs and width converters between two foldable stages cost depends only on the output side of
the one before (``pe``) and the input side of the one after (``simd``). So the cheapest folding
is a shortest path over the chain (dynamic programming, exact for the LUT count), and every cost
comes from the same code the estimate and the build use. Block RAM and DSP limits couple the
layers; they are met by pricing the resource that overflows and solving again. A design that
branches (a residual add reads two producers) is still a sum of the stages' costs and of terms
that each depend on the lanes of a few stages' sides (a stage without knobs, a link's converter and
FIFO, a fork); its cheapest folding is found exactly by eliminating one stage at a time
(:meth:`_Chain._eliminate`). Once the folding is chosen, lookup tables move into the block RAM it
leaves free where that saves LUTs (:meth:`_Chain.placed_design`).

:func:`greedy_for_cycles` is FINN's ``SetFolding`` (divisors in ascending order, SIMD before PE,
stop at the first that meets the target), and :func:`exhaustive_for_cycles` tries every folding:
the baselines the benchmark and the tests compare with.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np

from . import kernels
from .devices import Device, get_device
from .errors import FoldingError
from .fifo_sizing import INPUT, branch_holds, fifo_depths
from .folding import divisors, fold_streaming_stages, target_cycles
from .hw import Dataflow, MVAULayer, Stage, VVAULayer
from .resources import ResourceEstimate, estimate_kernel, family_of, with_placement

LIMITED = ("lut", "ff", "bram", "dsp", "spram")
#: The flip-flop count only breaks ties between foldings with equal LUTs.
_FF_WEIGHT = 1e-6
#: The first price, in LUTs, of a block RAM, SPRAM, DSP or flip-flop over its limit; how many times it
#: doubles before giving up; how many halvings then look for the least price that still fits.
_START_PRICE, _PRICE_ROUNDS, _BISECTIONS = 8.0, 16, 6
#: Largest number of foldings :func:`exhaustive_for_cycles` will try: on a chain (branch and bound
#: visits few of them), and on a branching design (all priced at once, ten numbers each in memory).
EXHAUSTIVE_LIMIT, EXHAUSTIVE_LIMIT_BRANCHING = 100_000_000, 500_000


@dataclass(frozen=True)
class Knob:
    """One choice a stage makes: attribute ``name`` takes one of ``values``.

    ``side`` says which stream it shapes: ``"in"`` (lanes the stage takes per beat), ``"out"``
    (lanes it gives) or ``"both"``; the stages between two foldable ones depend only on those.
    ``"none"``: a choice that changes only the stage's own resources (where a ROM goes).
    """

    name: str
    values: tuple
    side: Literal["in", "out", "both", "none"]

    @property
    def folds(self) -> bool:
        return self.side != "none"


#: Where the planner may put a ROM (:mod:`streamc.rtl.placement`): Yosys' own choice ("auto") is
#: always one of them, so weighing both finds at least as good a design.
PLACEMENTS = ("distributed", "block")
#: Where it may put a stage's multiplies: where Yosys maps them, or in LUTs.
RES_TYPES = ("auto", "lut")


def fold_knobs(stage: Stage, *, placement: bool = True) -> tuple[Knob, ...]:
    """What ``stage`` can choose: its folding, in the order FINN's greedy pass raises it, then where
    each of its ROMs and its multiplies go (without ``placement``: where Yosys puts them, ``"auto"``);
    ``()`` if nothing.

    The one place that knows which stage kinds fold. Stages without knobs keep the cycles they
    have, or take their lanes from their neighbours (``streamc.folding.fold_streaming_stages``).
    """
    if isinstance(stage, MVAULayer):
        knobs = (Knob("simd", tuple(divisors(stage.mw)), "in"), Knob("pe", tuple(divisors(stage.mh)), "out"))
        roms = ["ram_style"] + (["ram_style_thresholds"] if stage.threshold_rom else [])
        multiplies = not (stage.in_dtype.bipolar or stage.weight_dtype.bipolar)
    elif isinstance(stage, VVAULayer):
        knobs = (Knob("simd", tuple(divisors(stage.channels)), "both"),)
        # Weights all alike (an average) are a constant, not a ROM, and fold into shifts.
        constant = bool(np.all(stage.weights == stage.weights.flat[0]))
        roms = [] if constant else ["ram_style"]
        multiplies = not (constant or stage.in_dtype.bipolar or stage.weight_dtype.bipolar)
    else:
        return ()
    knobs += tuple(Knob(name, PLACEMENTS if placement else ("auto",), "none") for name in roms)
    if multiplies:
        knobs += (Knob("res_type", RES_TYPES if placement else ("auto",), "none"),)
    return knobs


Choice = tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """A folding and what it costs on ``device``.

    Attributes
    ----------
    folding : dict
        ``{stage name: {knob: value}}`` for every foldable stage, as a ``folding`` config takes it.
    cycles : int
        Cycles per frame of the slowest stage.
    resources : ResourceEstimate
        The whole design on ``device``: stages, FIFOs and width converters.
    device : str
    fits : bool
        Whether ``resources`` fit the limits the plan was asked to respect (the whole device when
        none were given).
    """

    folding: dict[str, dict[str, int]]
    cycles: int
    resources: ResourceEstimate
    device: str
    fits: bool

    def fps(self, clock_mhz: float) -> float:
        return clock_mhz * 1e6 / self.cycles


def device_limits(device: Device, *, budget: float = 1.0, reserved: ResourceEstimate | None = None) -> dict[str, int]:
    """What a design may use of ``device``: ``budget`` of its LUTs, all of everything else, less what
    ``reserved`` keeps for other logic (a board shell)."""
    limits = device.budget()
    limits["lut"] = int(budget * device.lut)
    if reserved is not None:
        for key in limits:
            limits[key] = min(limits[key], getattr(device, key) - getattr(reserved, key))
    return limits


def _over(resources: ResourceEstimate, limits: dict[str, int]) -> list[str]:
    return [key for key in LIMITED if getattr(resources, key) > limits[key]]


#: Specs, cycles and costs already computed, per dataflow and FIFO depth: the searches of one design
#: (the planner, its baselines, each budget and device tried) share them. Specs and cycles do not
#: depend on the device; costs are kept per device family. The dataflow is kept to tell a reused id.
_CACHES: dict[tuple[int, int], tuple[Dataflow, tuple[dict, ...]]] = {}
_CACHES_KEPT = 8


def _caches_of(dataflow: Dataflow, fifo_depth: int) -> tuple[dict, ...]:
    key = (id(dataflow), fifo_depth)
    if key not in _CACHES or _CACHES[key][0] is not dataflow:
        while len(_CACHES) >= _CACHES_KEPT:
            del _CACHES[next(iter(_CACHES))]
        _CACHES[key] = (dataflow, tuple({} for _ in range(9)))
    return _CACHES[key][1]


def _is_chain(dataflow: Dataflow) -> bool:
    """Whether every stage reads the one before it, and only it."""
    return all(list(getattr(stage, "sources", [index - 1])) == [index - 1]
               for index, stage in enumerate(dataflow.stages))


class _Chain:
    """The design as foldable stages and the segments of other stages between them, with the cost
    of every choice of each (cached: each is computed once, by the estimate's own code).

    When every stage reads the one before it (``chain``), the cost is a sum of per-stage and
    per-segment terms and the search is exact. A design that branches (residual adds, concats) is
    a sum of per-stage terms and of terms over the sides that set the lanes of each stage without
    knobs, link and fork (:meth:`_group_terms`), searched exactly by :meth:`_eliminate`.
    """

    def __init__(self, dataflow: Dataflow, device: Device, fifo_depth: int, placement: bool = True):
        # Looked up on the module here, not imported by name: a test prices with a cost model of its own.
        self._kernel_rows, self._stage_spec, self._fold_followers = (kernels.kernel_rows, kernels.stage_spec,
                                                                      fold_streaming_stages)
        self._spec_and_ports, self._link_specs, self._fork_spec = (kernels.stage_spec_and_ports,
                                                                   kernels.link_specs, kernels.fork_spec)
        self.dataflow, self.stages, self.device, self.fifo_depth = dataflow, dataflow.stages, device, fifo_depth
        self.chain = _is_chain(dataflow)
        self.placement = placement
        self._family, self._dsp = family_of(device.name), device.dsp > 0
        self.foldable = [index for index, stage in enumerate(self.stages) if fold_knobs(stage)]
        self.knobs = [fold_knobs(self.stages[index], placement=placement) for index in self.foldable]
        self.options: list[list[Choice]] = [list(itertools.product(*(k.values for k in knobs)))
                                            for knobs in self.knobs]
        bounds = [-1, *self.foldable, len(self.stages)]
        self.segments = [list(range(bounds[k] + 1, bounds[k + 1])) for k in range(len(bounds) - 1)]
        (self._node_specs, self._edge_specs, self._node_cycles, self._edge_cycles, self._node_cache,
         self._edge_cache, self._term_tables, self._follower_specs, self._priced_kernels) = _caches_of(dataflow,
                                                                                                       fifo_depth)
        self._priced_as = (self._family, self._dsp)
        self._node_vectors: dict[tuple[int, int], list[tuple[Choice, Choice, tuple[int, ...]]]] = {}
        self._k_of = {index: k for k, index in enumerate(self.foldable)}
        self._domains = {(k, side): sorted({key(k, c) for c in self.options[k]})
                         for k in range(len(self.foldable)) for side, key in (("in", self.in_key), ("out", self.out_key))}
        self._positions: dict[tuple, int] = {}
        if not self.chain:
            self._widths: dict[int, tuple[list[int], int]] = {}
            self._readers: dict[int, list[tuple[int, int]]] = {}
            for index, stage in enumerate(self.stages):
                for port, source in enumerate(stage.sources):
                    self._readers.setdefault(source, []).append((index, port))
            self._groups = self._group_terms()

    def folded(self, k: int, choice: Choice) -> Choice:
        """The lanes of ``choice``, without where its ROMs go."""
        return tuple(v for knob, v in zip(self.knobs[k], choice) if knob.folds)

    def placed(self, k: int, choice: Choice) -> dict[str, str]:
        """Where ``choice`` puts stage ``k``'s ROMs (``{"ram_style": ...}``)."""
        return {knob.name: v for knob, v in zip(self.knobs[k], choice) if not knob.folds}

    # -- keys of the sides a segment sees ------------------------------------------------------------
    def in_key(self, k: int, choice: Choice) -> Choice:
        return tuple(v for knob, v in zip(self.knobs[k], choice) if knob.side in ("in", "both"))

    def out_key(self, k: int, choice: Choice) -> Choice:
        return tuple(v for knob, v in zip(self.knobs[k], choice) if knob.side in ("out", "both"))

    def _set(self, k: int, choice: Choice) -> None:
        _set_knobs(self.stages[self.foldable[k]], self.knobs[k], choice)

    def _set_side(self, k: int, key: Choice, side: str) -> None:
        stage = self.stages[self.foldable[k]]
        values = iter(key)
        for knob in self.knobs[k]:
            if knob.side in (side, "both"):
                setattr(stage, knob.name, next(values))

    # -- costs -----------------------------------------------------------------------------------------
    def node_cycles(self, k: int, choice: Choice) -> int:
        key = (k, self.folded(k, choice))
        if key not in self._node_cycles:
            self._set(k, choice)
            self._node_cycles[key] = self.stages[self.foldable[k]].cycles()
        return self._node_cycles[key]

    def node(self, k: int, choice: Choice) -> ResourceEstimate:
        priced = (k, choice, self._priced_as)
        if priced not in self._node_cache:
            self._set(k, choice)
            # A placement changes the spec's styles only: one spec per folding serves them all.
            spec = with_placement(self._built(self.foldable[k])[0], **self.placed(k, choice))
            self._node_cache[priced] = estimate_kernel(spec, self._family, dsp=self._dsp)
        return self._node_cache[priced]

    def _built(self, index: int):
        """Spec and ports (:func:`streamc.kernels.stage_spec_and_ports`) of stage ``index`` as it is
        folded now: per folding of a foldable stage, per lanes of any other."""
        stage = self.stages[index]
        if index in self._k_of:
            k = self._k_of[index]
            key, cache = (k, tuple(getattr(stage, knob.name) for knob in self.knobs[k] if knob.folds)), self._node_specs
        else:
            key, cache = (index, stage.in_elems, stage.out_elems), self._follower_specs
        if key not in cache:
            cache[key] = self._spec_and_ports(stage)
        return cache[key]

    def _segment(self, s: int, out_key: Choice, in_key: Choice) -> list[Stage]:
        """Segment ``s`` with its neighbours set to the given sides and its own lanes derived."""
        part = [self.stages[i] for i in self.segments[s]]
        if s > 0:
            self._set_side(s - 1, out_key, "out")
            part.insert(0, self.stages[self.foldable[s - 1]])
        if s < len(self.foldable):
            self._set_side(s, in_key, "in")
            part.append(self.stages[self.foldable[s]])
        self._follow()
        return part

    def _follow(self) -> None:
        """Give the stages without knobs their lanes from their neighbours; put the lookup tables back
        where Yosys puts them, as every cost of the search prices them (:meth:`plan` places them)."""
        self._fold_followers(self.dataflow)
        for table in self.dataflow.tables:
            table.ram_style = "auto"

    def edge_cycles(self, s: int, out_key: Choice, in_key: Choice) -> int:
        key = (s, out_key, in_key)
        if key not in self._edge_cycles:
            self._segment(s, out_key, in_key)
            self._edge_cycles[key] = max((self.stages[i].cycles() for i in self.segments[s]), default=0)
        return self._edge_cycles[key]

    def edge(self, s: int, out_key: Choice, in_key: Choice) -> ResourceEstimate:
        key = (s, out_key, in_key)
        if key not in self._edge_specs:
            part = self._segment(s, out_key, in_key)
            ends = {self.stages[self.foldable[k]].name for k in (s - 1, s) if 0 <= k < len(self.foldable)}
            self._edge_specs[key] = [spec for row, spec in self._kernel_rows(part, self.fifo_depth)
                                     if row.name not in ends]
        priced = (*key, self._priced_as)
        if priced not in self._edge_cache:
            self._edge_cache[priced] = sum((estimate_kernel(spec, self._family, dsp=self._dsp)
                                            for spec in self._edge_specs[key]), ResourceEstimate())
        return self._edge_cache[priced]

    def sides(self, s: int, assignment: list[Choice]) -> tuple[Choice, Choice]:
        out_key = self.out_key(s - 1, assignment[s - 1]) if s > 0 else ()
        in_key = self.in_key(s, assignment[s]) if s < len(self.foldable) else ()
        return out_key, in_key

    # -- whole designs -----------------------------------------------------------------------------------
    def evaluate(self, assignment: list[Choice]) -> tuple[ResourceEstimate, int]:
        """Resources and cycles per frame of the design folded as ``assignment``."""
        total, cycles = ResourceEstimate(), 0
        for k, choice in enumerate(assignment):
            total += self.node(k, choice)
            cycles = max(cycles, self.node_cycles(k, choice))
        if not self.chain:
            vector, reached = self._terms_at(assignment)
            return total + ResourceEstimate(**dict(zip(_FIELDS, map(int, vector[0])))), max(cycles, int(reached[0]))
        for s in range(len(self.segments)):
            total += self.edge(s, *self.sides(s, assignment))
            cycles = max(cycles, self.edge_cycles(s, *self.sides(s, assignment)))
        return total, cycles

    # -- a branching design ------------------------------------------------------------------------------
    def _group_terms(self) -> dict[tuple[tuple[int, str], ...], list[tuple]]:
        """Every kernel outside the foldable stages, grouped by the sides of foldable stages that set
        its lanes: ``{((k, "in"), (k2, "out")): [("stage", index) | ("link", index, port) | ("fork", source)]}``.

        A stage without knobs takes its lanes from its first producer and its first consumer
        (:func:`~streamc.folding.fold_streaming_stages`), so from the sides those reach; a link's
        converter and FIFO depend on the lanes at both its ends, a fork on its producer's; the
        accelerator's input comes in as its first reader takes it.
        """
        lanes: dict[int, frozenset] = {}

        def taken(index: int) -> frozenset:
            return frozenset({(self._k_of[index], "in")}) if index in self._k_of else lanes[index]

        def given(index: int) -> frozenset:
            if index == INPUT:
                return taken(self._readers[INPUT][0][0])
            return frozenset({(self._k_of[index], "out")}) if index in self._k_of else lanes[index]

        for index, stage in enumerate(self.stages):
            if index not in self._k_of:
                first = self._readers.get(index, [(None, 0)])[0][0]
                lanes[index] = ((given(stage.sources[0]) if stage.sources[0] != INPUT else frozenset())
                                | (frozenset({(self._k_of[first], "in")}) if first in self._k_of else frozenset()))
        groups: dict[tuple[tuple[int, str], ...], list[tuple]] = {}
        for index, stage in enumerate(self.stages):
            if index not in self._k_of:
                groups.setdefault(tuple(sorted(lanes[index])), []).append(("stage", index))
            for port, source in enumerate(stage.sources):
                groups.setdefault(tuple(sorted(given(source) | taken(index))), []).append(("link", index, port))
        for source, readers in self._readers.items():
            if len(readers) > 1:
                groups.setdefault(tuple(sorted(given(source))), []).append(("fork", source))
        return groups

    def _ports(self, index: int) -> tuple[list[tuple[int, int]], tuple[int, int]]:
        """(elements per beat, bits per element) of stage ``index``'s input ports and output as it is
        folded now: the bits read once off its kernels, the elements off the stage."""
        if index not in self._widths:
            _, ins, out = self._built(index)
            self._widths[index] = ([width for _, width in ins], out[1])
        stage, (ins, out) = self.stages[index], self._widths[index]
        return [(stage.in_elems, width) for width in ins], (stage.out_elems, out)

    def _out_port(self, source: int) -> tuple[int, int]:
        if source == INPUT:
            index, port = self._readers[INPUT][0]
            return self._ports(index)[0][port]
        return self._ports(source)[1]

    def _priced(self, key: tuple, specs) -> tuple[int, ...]:
        """The resources of the kernels ``specs()`` gives, as a vector, once per ``key`` and device family."""
        key = (*key, self._priced_as)
        if key not in self._priced_kernels:
            self._priced_kernels[key] = _vector(sum((estimate_kernel(spec, self._family, dsp=self._dsp)
                                                     for spec in specs()), ResourceEstimate()))
        return self._priced_kernels[key]

    def _price_group(self, members: list[tuple], depths: list[list[int]]) -> tuple[np.ndarray, int]:
        """Resources (a vector) and cycles of a group's kernels, the dataflow folded as it is now."""
        total, cycles = np.zeros(len(_FIELDS), dtype=np.int64), 0
        for member in members:
            if member[0] == "stage":
                index = member[1]
                stage = self.stages[index]
                total += self._priced(("stage", index, stage.in_elems, stage.out_elems),
                                      lambda: [self._built(index)[0]])
                cycles = max(cycles, stage.cycles())
            elif member[0] == "link":
                _, index, port = member
                ends = (self._out_port(self.stages[index].sources[port]), self._ports(index)[0][port], depths[index][port])
                total += self._priced(("link", *ends), lambda: self._link_specs(*ends))
            else:
                ends = (self._out_port(member[1]), len(self._readers[member[1]]))
                total += self._priced(("fork", *ends), lambda: [self._fork_spec(*ends)])
        return total, cycles

    def _terms(self) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
        """Per group of :meth:`_group_terms`, its resources (vectors) and cycles for every combination of
        its sides' keys, indexed as ``_domains`` orders them."""
        if self._priced_as not in self._term_tables:
            held = branch_holds(self.stages)
            tables = {}
            for scope, members in self._groups.items():
                dims = [len(self._domains[entry]) for entry in scope]
                resources, cycles = np.zeros((*dims, len(_FIELDS)), dtype=np.int64), np.zeros(dims, dtype=np.int64)
                for position in np.ndindex(*dims):
                    for (k, side), at in zip(scope, position):
                        self._set_side(k, self._domains[(k, side)][at], side)
                    self._follow()
                    resources[position], cycles[position] = self._price_group(
                        members, fifo_depths(self.dataflow, self.fifo_depth, held))
                tables[scope] = (resources, cycles)
            self._term_tables[self._priced_as] = tables
        return self._term_tables[self._priced_as]

    def _position(self, entry: tuple[int, str], choice: Choice) -> int:
        """Where ``choice`` of stage ``entry[0]`` puts its side ``entry[1]`` in ``_domains``."""
        if (entry, choice) not in self._positions:
            k, side = entry
            self._positions[(entry, choice)] = self._domains[entry].index(
                (self.in_key if side == "in" else self.out_key)(k, choice))
        return self._positions[(entry, choice)]

    def _terms_at(self, assignment: list[Choice], stage: int | None = None,
                  choices: list[Choice] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Resources (vectors) and cycles of the terms of a branching design folded as ``assignment``;
        with ``stage``, of those that depend on it, for each of its ``choices`` (a row each)."""
        count = 1 if choices is None else len(choices)
        total, cycles = np.zeros((count, len(_FIELDS)), dtype=np.int64), np.zeros(count, dtype=np.int64)
        for scope, (resources, reached) in self._terms().items():
            if stage is None or any(k == stage for k, _ in scope):
                position = tuple(np.array([self._position(entry, c) for c in choices]) if entry[0] == stage
                                 else self._position(entry, assignment[entry[0]]) for entry in scope)
                total += resources[position]
                cycles = np.maximum(cycles, reached[position])
        return total, cycles

    def _eliminate(self, cycles: int, prices: dict[str, float]) -> list[Choice] | None:
        """The folding of least priced cost within ``cycles`` of a branching design, exactly: the cost
        is a sum of terms over few stages each, so stages are eliminated one at a time, each replaced
        by the least cost it can add for every combination of the sides its terms share with stages
        still there (the one leaving the smallest table first), then chosen back in reverse order."""
        weights = np.array([prices.get(name, 0.0) for name in _FIELDS])
        count = len(self.foldable)
        choices = [self._placed_cheapest(k, list(weights), cycles) for k in range(count)]
        if not all(choices):
            return None
        # A factor: the (stage, side) entries it depends on and its priced cost per combination of
        # their keys; ("choice") indexes a stage's own choices.
        factors = [([(k, "choice")], np.array([float(np.dot(weights, _vector(self.node(k, c)))) for c in opts]))
                   for k, opts in enumerate(choices)]
        for scope, (resources, reached) in self._terms().items():
            factors.append((list(scope), np.where(reached > cycles, np.inf, resources @ weights)))
        size = {entry: len(self._domains[entry]) for entry in self._domains}
        positions = {(k, side): np.array([self._position((k, side), c) for c in opts])
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
            chosen[k] = int(best[tuple(self._position(entry, choices[entry[0]][chosen[entry[0]]]) for entry in kept)])
        return [choices[k][chosen[k]] for k in range(count)]

    def apply(self, assignment: list[Choice]) -> None:
        """Fold the dataflow's stages as ``assignment`` says, followers included."""
        for k, choice in enumerate(assignment):
            self._set(k, choice)
        self._follow()

    def fastest_assignment(self) -> list[Choice]:
        """Each foldable stage at its fewest cycles (the most lanes among equals)."""
        return [min(options, key=lambda c: (self.node_cycles(k, c), -math.prod(self.folded(k, c))))
                for k, options in enumerate(self.options)]

    def plan(self, assignment: list[Choice], limits: dict[str, int]) -> Plan:
        resources, cycles, styles = self.placed_design(assignment, limits)
        for table in self.dataflow.tables:
            table.ram_style = styles.get(table.name, "auto")
        folding = {self.stages[index].name: {knob.name: value for knob, value in zip(knobs, choice)}
                   for index, knobs, choice in zip(self.foldable, self.knobs, assignment)}
        folding.update({table.name: {"ram_style": table.ram_style} for table in self.dataflow.tables})
        return Plan(folding=folding, cycles=cycles, resources=resources, device=self.device.name,
                    fits=not _over(resources, limits))

    def placed_design(self, assignment: list[Choice], limits: dict[str, int]
                      ) -> tuple[ResourceEstimate, int, dict[str, str]]:
        """Resources and cycles per frame of the design folded as ``assignment`` (the dataflow is
        left so folded) once its lookup tables are placed, and where each goes (``{table: "block"}``
        for those moved): into the block RAM the folding leaves free where that saves LUTs, the
        most LUTs per block RAM first, while no resource goes past ``limits`` (or past what the
        design already takes, if more).

        A table's lanes follow its producer, so it is placed once the folding is chosen: the design
        never takes more LUTs than the folding priced. The tables themselves stay at ``"auto"``;
        :meth:`plan` sets them.
        """
        resources, cycles = self.evaluate(assignment)
        self.apply(assignment)
        if not self.placement:
            return resources, cycles, {}
        moves = []
        for table in self.dataflow.tables:
            spec = self._stage_spec(table)
            here = estimate_kernel(spec, self._family, dsp=self._dsp)
            there = estimate_kernel(with_placement(spec, ram_style="block"), self._family, dsp=self._dsp)
            if there.lut < here.lut:
                moves.append(((here.lut - there.lut) / max(there.bram - here.bram, 1), table.name, here, there))
        styles = {}
        for _, name, here, there in sorted(moves, key=lambda move: -move[0]):
            trial = resources - here + there
            if all(getattr(trial, key) <= max(limits[key], getattr(resources, key)) for key in LIMITED):
                styles[name], resources = "block", trial
        return resources, cycles, styles

    def candidate_cycles(self) -> list[int]:
        """Every cycles-per-frame value some stage takes under some folding, ascending."""
        values = {self.node_cycles(k, c) for k, options in enumerate(self.options) for c in options}
        if self.chain:
            for s in range(len(self.segments)):
                values |= {self.edge_cycles(s, o, i) for o, i in self._side_pairs(s)}
        else:
            for _, reached in self._terms().values():
                values |= set(reached.flat)
        return sorted(v for v in values if v > 0) or [1]

    def _side_pairs(self, s: int) -> list[tuple[Choice, Choice]]:
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
                               f"({_lanes(stage)}), {stage.cycles() / cycles:.3g}x the {cycles} the target allows")
        return max(stage.cycles() for stage in self.stages), reasons

    def cheapest(self, cycles: int, prices: dict[str, float]) -> list[Choice] | None:
        """The folding of least priced cost with every stage within ``cycles`` (None if there is none)."""
        def price(resources: ResourceEstimate) -> float:
            return sum(prices.get(f.name, 0.0) * getattr(resources, f.name) for f in fields(resources))

        if not self.chain:
            return self._eliminate(cycles, prices)
        inf = float("inf")
        count = len(self.foldable)
        if count == 0:
            return [] if self.edge_cycles(0, (), ()) <= cycles else None
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
            for choice in self._placed_cheapest(k, [prices.get(name, 0.0) for name in _FIELDS], cycles):
                in_key, entry = self.in_key(k, choice), (inf, None)
                for out_key, (cost, previous) in ordered:
                    if cost >= entry[0]:
                        break
                    if self.edge_cycles(k, out_key, in_key) > cycles:
                        continue
                    total = cost + price(self.edge(k, out_key, in_key))
                    if total < entry[0]:
                        entry = (total, previous)
                if entry[0] < inf:
                    layer[choice] = (entry[0] + price(self.node(k, choice)), entry[1])
            if not layer:
                return None
            best.append(layer)
        final, last = inf, None
        for choice, (cost, _) in best[-1].items():
            out_key = self.out_key(count - 1, choice)
            if self.edge_cycles(count, out_key, ()) <= cycles:
                total = cost + price(self.edge(count, out_key, ()))
                if total < final:
                    final, last = total, choice
        if last is None:
            return None
        assignment = [last]
        for k in range(count - 1, 0, -1):
            assignment.append(best[k][assignment[-1]][1])
        return assignment[::-1]

    def _placed_cheapest(self, k: int, weights: list[float], cycles: int) -> list[Choice]:
        """Stage ``k``'s choices within ``cycles``, of those that fold it alike the one whose placement
        costs least at ``weights`` (a price per resource): placement changes the stage alone, so the
        others can never be part of the cheapest design."""
        best: dict[Choice, tuple[float, Choice]] = {}
        for folded, choice, vector in self._vectors(k, cycles):
            cost = sum(w * v for w, v in zip(weights, vector))
            if folded not in best or cost < best[folded][0]:
                best[folded] = (cost, choice)
        return [choice for _, choice in best.values()]

    def _vectors(self, k: int, cycles: int) -> list[tuple[Choice, Choice, tuple[int, ...]]]:
        """Each choice of stage ``k`` within ``cycles`` with its lanes and its resources as a vector
        (only those are priced: a stage's spec is built per folding, in milliseconds)."""
        if (k, cycles) not in self._node_vectors:
            self._node_vectors[(k, cycles)] = [(self.folded(k, c), c, _vector(self.node(k, c)))
                                               for c in self.options[k] if self.node_cycles(k, c) <= cycles]
        return self._node_vectors[(k, cycles)]

    def _fits_nowhere(self, cycles: int, limits: dict[str, int]) -> bool:
        """Whether the least each stage can take of some resource within ``cycles``, summed, is already
        over ``limits`` (a bound: the links between stages take something too)."""
        least = [0] * len(_FIELDS)
        for k in range(len(self.options)):
            vectors = [vector for _, _, vector in self._vectors(k, cycles)]
            if not vectors:
                return False
            least = [total + min(v[i] for v in vectors) for i, total in enumerate(least)]
        return any(least[_FIELDS.index(key)] > limit for key, limit in limits.items())

    def cheapest_within(self, cycles: int, limits: dict[str, int]) -> list[Choice] | None:
        """The fewest LUTs within ``cycles`` whose block RAM, SPRAM, DSP and flip-flop counts fit ``limits``.

        LUTs are minimized exactly. A count over its limit gets a price in LUTs, doubled until it
        fits, then bisected down to the least price that still fits (a higher price trades more
        LUTs away than needed). Prices jump past foldings in between (four block RAMs allowed, the
        priced optimum takes six or one), so on a chain the cheapest folding is also repaired one
        stage at a time (:meth:`_repair`). Returns the fitting folding with the fewest LUTs found,
        else the last one tried (which does not fit), or None when no folding reaches ``cycles``.
        """
        prices = {"lut": 1.0, "ff": _FF_WEIGHT}
        if self._fits_nowhere(cycles, limits):
            return self.cheapest(cycles, prices)
        tried = []

        def attempt() -> list[str] | None:
            assignment = self.cheapest(cycles, prices)
            if assignment is None:
                return None
            resources = self.evaluate(assignment)[0]
            tried.append((resources, assignment))
            return [key for key in _over(resources, limits) if key != "lut"]

        over = attempt()
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
        fitting = [(r.lut, r.ff, a) for r, a in tried if not _over(r, limits)]
        return min(fitting)[2] if fitting else tried[-1][1]

    def _around(self, k: int, assignment: list[Choice]) -> tuple[tuple[int, ...], int]:
        """Resources (as a vector) and cycles of what stage ``k``'s choice decides on a chain: the stage
        and the segments on either side of it."""
        parts = [self.node(k, assignment[k]), self.edge(k, *self.sides(k, assignment)),
                 self.edge(k + 1, *self.sides(k + 1, assignment))]
        cycles = max(self.node_cycles(k, assignment[k]), self.edge_cycles(k, *self.sides(k, assignment)),
                     self.edge_cycles(k + 1, *self.sides(k + 1, assignment)))
        return tuple(map(sum, zip(*(_vector(part) for part in parts)))), cycles

    def _moves(self, assignment: list[Choice], cycles: int) -> tuple[list[list[Choice]], np.ndarray]:
        """Each folding one stage's choice away from ``assignment`` (which is within ``cycles``) that
        stays within ``cycles``, and their resources (a row each)."""
        total = np.array(_vector(self.evaluate(assignment)[0]))
        trials, rows = [], [np.zeros((0, len(_FIELDS)), dtype=np.int64)]
        for k in range(len(self.options)):
            others = [(c, v) for _, c, v in self._vectors(k, cycles) if c != assignment[k]]
            if not others:
                continue
            if self.chain:
                before, _ = self._around(k, assignment)
                for choice, _ in others:
                    trial = assignment[:k] + [choice] + assignment[k + 1:]
                    after, reached = self._around(k, trial)
                    if reached <= cycles:
                        trials.append(trial)
                        rows.append((total - np.array(before) + np.array(after))[None])
                continue
            # What changes with stage k's choice: the stage and the terms that depend on it.
            vectors, reached = self._terms_at(assignment, stage=k, choices=[assignment[k]] + [c for c, _ in others])
            vectors = vectors + np.array([_vector(self.node(k, assignment[k]))] + [v for _, v in others])
            within = reached[1:] <= cycles
            rows.append(total - vectors[0] + vectors[1:][within])
            trials += [assignment[:k] + [choice] + assignment[k + 1:] for (choice, _), ok in zip(others, within) if ok]
        return trials, np.concatenate(rows)

    def _repair(self, assignment: list[Choice], cycles: int, limits: dict[str, int]) -> list[Choice] | None:
        """From a folding over ``limits`` (other than LUTs), change one stage at a time, each time the
        one that gives up the fewest LUTs per share of the overflow it removes, until it fits; then
        take the one-stage change that saves most LUTs and still fits, while there is one.
        None if no change reduces the overflow."""
        kept = [(_FIELDS.index(key), limits[key]) for key in LIMITED if key != "lut"]
        lut, ff = _FIELDS.index("lut"), _FIELDS.index("ff")

        def overflow(rows: np.ndarray) -> np.ndarray:
            total = np.zeros(len(rows))
            for i, limit in kept:
                total = total + np.maximum(0, rows[:, i] - limit) / max(limit, 1)
            return total

        resources = np.array(_vector(self.evaluate(assignment)[0]))
        while (over := overflow(resources[None])[0]) > 0:
            trials, rows = self._moves(assignment, cycles)
            left = overflow(rows)
            useful = np.flatnonzero(left < over)
            if not len(useful):
                return None
            # The first of the least (LUTs given up per overflow removed, flip-flops).
            ratio = (rows[useful, lut] - resources[lut]) / (over - left[useful])
            best = useful[np.lexsort((rows[useful, ff], ratio))[0]]
            assignment, resources = trials[best], rows[best]
        while True:
            trials, rows = self._moves(assignment, cycles)
            better = np.flatnonzero((overflow(rows) == 0) & ((rows[:, lut] < resources[lut]) | (
                (rows[:, lut] == resources[lut]) & (rows[:, ff] < resources[ff]))))
            if not len(better):
                return assignment
            best = better[np.lexsort((rows[better, ff], rows[better, lut]))[0]]
            assignment, resources = trials[best], rows[best]


_FIELDS = [f.name for f in fields(ResourceEstimate)]


def _vector(resources: ResourceEstimate) -> tuple[int, ...]:
    return tuple(getattr(resources, name) for name in _FIELDS)


def _set_knobs(stage: Stage, knobs: tuple[Knob, ...], choice: Choice) -> None:
    for knob, value in zip(knobs, choice):
        setattr(stage, knob.name, value)


def _lanes(stage: Stage) -> str:
    return f"{stage.in_elems} lanes in, {stage.out_elems} out"


_UNITS = {"lut": "LUTs", "ff": "flip-flops", "bram": "block RAMs", "dsp": "DSPs", "spram": "SPRAMs"}


def _not_fitting(chain: _Chain, assignment: list[Choice], limits: dict[str, int], what: str) -> FoldingError:
    """Which resources overflow, by how much, and the layer that takes most of the first of them."""
    device = chain.device
    resources, _ = chain.evaluate(assignment)
    over = _over(resources, limits)
    problems = []
    for key in over:
        used, limit, has = getattr(resources, key), limits[key], getattr(device, key)
        allowed = f"{limit} are available" if limit == has else f"{limit} ({limit / has:.0%} of {has}) are allowed"
        problems.append(f"{used} {_UNITS[key]} where {allowed} ({used - limit} over)")
    culprit, alone = "the design", ""
    if chain.foldable:
        k = max(range(len(chain.foldable)), key=lambda k: getattr(chain.node(k, assignment[k]), over[0]))
        culprit = chain.stages[chain.foldable[k]].describe()
        alone = f"; this layer alone takes {getattr(chain.node(k, assignment[k]), over[0])} {_UNITS[over[0]]}"
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
    chain = _Chain(dataflow, device, fifo_depth, placement)
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
        raise _not_fitting(chain, assignment, limits, f"{at}, even folded as cheaply as possible")
    if not plan.fits:
        plan = chain.plan(chain.cheapest(cycles, {"lut": 1.0, "ff": _FF_WEIGHT}), device_limits(device))
    return plan


def _search_budget(chain: _Chain, limits: dict[str, int], fold) -> tuple[list[Choice], int] | None:
    """The fewest cycles per frame at which ``fold(cycles)`` gives a folding within ``limits``."""
    candidates = chain.candidate_cycles()

    def fitting(index: int) -> list[Choice] | None:
        assignment = fold(candidates[index])
        if assignment is None:
            return None
        # With its tables placed: a table moved into block RAM frees LUTs for a faster folding.
        resources, _, _ = chain.placed_design(assignment, limits)
        return None if _over(resources, limits) else assignment

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
                    placement: bool = True, reserved: ResourceEstimate | None = None) -> Plan:
    """The fewest cycles per frame whose cheapest folding fits ``budget`` of ``device``'s LUTs
    (and its block RAM, SPRAM, DSPs and flip-flops, less ``reserved``); ``placement`` as for
    :func:`plan_for_cycles`.

    Raises
    ------
    FoldingError
        If even the slowest, cheapest folding does not fit: the message says which resource, by how
        much, and which layer takes most of it.
    """
    chain = _Chain(dataflow, device, fifo_depth, placement)
    limits = device_limits(device, budget=budget, reserved=reserved)
    found = _search_budget(chain, limits, lambda cycles: chain.cheapest_within(cycles, limits))
    if found is None:
        slowest = chain.candidate_cycles()[-1]
        assignment = chain.cheapest_within(slowest, limits)
        raise _not_fitting(chain, assignment, limits, f"within budget={budget:g}, even folded as cheaply as "
                                                      f"possible (which takes {chain.evaluate(assignment)[1]} cycles "
                                                      f"per frame)")
    return chain.plan(found[0], limits)


# --- Baselines --------------------------------------------------------------------------------------

def _greedy(chain: _Chain, cycles: int) -> list[Choice]:
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
    chain = _Chain(dataflow, device, fifo_depth, placement=False)
    return chain.plan(_greedy(chain, cycles), device_limits(device))


def greedy_for_budget(dataflow: Dataflow, *, device: Device, budget: float, fifo_depth: int = 2) -> Plan | None:
    """The fastest greedy folding within ``budget`` of the device (None if even the slowest does not fit)."""
    chain = _Chain(dataflow, device, fifo_depth, placement=False)
    limits = device_limits(device, budget=budget)
    found = _search_budget(chain, limits, lambda cycles: _greedy(chain, cycles))
    return None if found is None else chain.plan(found[0], limits)


def exhaustive_size(dataflow: Dataflow, *, cycles: int | None = None, placement: bool = True) -> int:
    """How many foldings :func:`exhaustive_for_cycles` would try (all of them when ``cycles`` is None)."""
    count = 1
    for stage in dataflow.stages:
        knobs = fold_knobs(stage, placement=placement)
        folded = tuple(getattr(stage, knob.name) for knob in knobs)
        options = list(itertools.product(*(k.values for k in knobs)))
        if cycles is not None:
            options = [c for c in options if _set_knobs(stage, knobs, c) or stage.cycles() <= cycles]
            _set_knobs(stage, knobs, folded)
        count *= len(options)
    return count


def _exhaustive(chain: _Chain, cycles: int, limits: dict[str, int] | None) -> list[Choice] | None:
    """Every folding within ``cycles``, depth first; a branch is dropped only when a lower bound of
    its LUTs (what it has so far plus the least each remaining stage and segment can cost) already
    exceeds the best complete folding's, so the result is the exact optimum."""
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
        costs = [e for e in (edge(s, *pair) for pair in chain._side_pairs(s)) if e is not None]
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
            if limits and _over(resources, limits):
                return
            key = (resources.lut, resources.ff)
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


def _exhaustive_branching(chain: _Chain, options: list[list[Choice]], cycles: int,
                          limits: dict[str, int] | None) -> list[Choice] | None:
    """Every folding of a branching design in ``options``, priced at once: an array with an axis per
    stage, to which each stage's and each term's costs are added along the axes of the stages they
    depend on. The first (in the order of ``itertools.product``) of the fewest LUTs, then flip-flops."""
    shape = [len(opts) for opts in options]

    def along(k: int, values: list) -> np.ndarray:
        """``values`` (one per choice of stage ``k``) on the axis of stage ``k``."""
        array = np.array(values)
        return array.reshape(*[-1 if axis == k else 1 for axis in range(len(shape))], *array.shape[1:])

    total, reached = np.zeros((*shape, len(_FIELDS)), dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for k, opts in enumerate(options):
        total = total + along(k, [_vector(chain.node(k, c)) for c in opts])
        reached = np.maximum(reached, along(k, [chain.node_cycles(k, c) for c in opts]))
    for scope, (resources, term_cycles) in chain._terms().items():
        index = tuple(along(k, [chain._position((k, side), c) for c in options[k]]) for k, side in scope)
        total, reached = total + resources[index], np.maximum(reached, term_cycles[index])
    fits = reached <= cycles
    for key, limit in (limits or {}).items():
        fits &= total[..., _FIELDS.index(key)] <= limit
    flat = np.flatnonzero(fits)
    if not len(flat):
        return None
    lut, ff = (total[..., _FIELDS.index(key)].reshape(-1)[flat] for key in ("lut", "ff"))
    best = np.unravel_index(flat[np.lexsort((ff, lut))[0]], shape)
    return [options[k][int(at)] for k, at in enumerate(best)]


def _check_size(dataflow: Dataflow, cycles: int | None, placement: bool) -> None:
    size = exhaustive_size(dataflow, cycles=cycles, placement=placement)
    limit = EXHAUSTIVE_LIMIT if _is_chain(dataflow) else EXHAUSTIVE_LIMIT_BRANCHING
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
    chain = _Chain(dataflow, device, fifo_depth, placement)
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
    chain = _Chain(dataflow, device, fifo_depth, placement)
    limits = device_limits(device, budget=budget)
    # Whether some folding fits within c cycles only grows with c: the search may bisect.
    found = _search_budget(chain, limits, lambda cycles: _exhaustive(chain, cycles, limits))
    return None if found is None else chain.plan(found[0], limits)


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
    from .boards import get_board, shell_resources
    from .protocol import FrameFormat

    device = get_device(config.devices[0] if config.devices else "ice40-up5k")

    def plan(reserved: ResourceEstimate | None) -> Plan:
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
