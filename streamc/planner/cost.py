"""The planner's cost model: the design as foldable stages and the segments between them, and the cost
of every choice of each, computed once by the estimate's own code (:mod:`streamc.kernels`).

Also the vocabulary the search and the baselines share: a stage's knobs (:meth:`Stage.knobs`), a
:class:`Plan`, a device's limits.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields

import numpy as np

from .. import kernels
from ..devices import Device
from ..fifo_sizing import INPUT, branch_holds, fifo_depths
from ..folding import fold_streaming_stages
from ..hw import Dataflow
from ..resources import ResourceEstimate, estimate_kernel, family_of, with_placement
from ..stages import Knob, Stage
from ..timing import Clock

LIMITED = ("lut", "ff", "bram", "dsp", "spram")
#: The flip-flop count only breaks ties between foldings with equal LUTs.
FF_WEIGHT = 1e-6


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
    clock_mhz : float or None
        The clock the planner chose with the folding (``clock_mhz: auto``); None where the configuration gave it.
    """

    folding: dict[str, dict[str, int]]
    cycles: int
    resources: ResourceEstimate
    device: str
    fits: bool
    clock_mhz: float | None = None

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


#: An iCE40 logic cell holds a LUT4 and a flip-flop, but a flip-flop shares a cell only with a LUT that drives it
#: alone: the others take a cell each. nextpnr's cells less Yosys' LUT4s, per flip-flop, over 19 UP5K placements with
#: the board shell (2026-11-28): 0.61 by least squares, 0.47 to 0.92 per design; TFC-w1a1 at 128 cycles/frame
#: pipelined for 50 MHz 0.65 (3,206 LUT4s, 3,413 flip-flops: 5,425 cells, over the device's 5,280).
LONE_FLIP_FLOPS = {"ice40": 0.6}


def cells(lut, ff, family: str):
    """The LUT4s and the flip-flops that take a cell of their own: what a share of an iCE40's cells holds (elsewhere
    the LUTs). Numbers or numpy arrays alike."""
    return lut + np.ceil(LONE_FLIP_FLOPS.get(family, 0.0) * np.asarray(ff)).astype(np.int64)


def objective(family: str) -> dict[str, float]:
    """What the planner minimizes, as prices: LUTs, flip-flops breaking ties; on an iCE40 its logic cells."""
    return {"lut": 1.0, "ff": LONE_FLIP_FLOPS.get(family, FF_WEIGHT)}


def logic_cells(resources: ResourceEstimate, family: str) -> int:
    """:func:`cells` of a design."""
    return int(cells(resources.lut, resources.ff, family))


def over_limits(resources: ResourceEstimate, limits: dict[str, int], family: str) -> list[str]:
    """The resources over their limits. On a family whose flip-flops take cells of their own (the iCE40) the LUT
    limit holds the logic cells, named ``"cells"``."""
    over = []
    for key in LIMITED:
        if key == "lut" and family in LONE_FLIP_FLOPS:
            if logic_cells(resources, family) > limits["lut"]:
                over.append("cells")
        elif getattr(resources, key) > limits[key]:
            over.append(key)
    return over


#: Specs, cycles and costs already computed, per dataflow, FIFO depth and clock: the searches of one design
#: (the planner, its baselines, each budget, device and clock tried) share them. Specs and cycles do not
#: depend on the device; costs are kept per device family. Cycles do not depend on the clock either (its
#: registers move with the stall), so every clock shares them. The dataflow is kept to tell a reused id.
_CACHES: dict[tuple, tuple[Dataflow, tuple[dict, ...]]] = {}
_CACHES_KEPT = 16


def _caches_of(dataflow: Dataflow, fifo_depth: int, clock: Clock | None) -> tuple[dict, ...]:
    """The cycle caches (node, edge), then the clock's spec and cost caches."""
    return _cached(dataflow, fifo_depth, "cycles", 2) + _cached(dataflow, fifo_depth, clock, 7)


def _cached(dataflow: Dataflow, fifo_depth: int, clock, count: int) -> tuple[dict, ...]:
    key = (id(dataflow), fifo_depth, clock)
    if key not in _CACHES or _CACHES[key][0] is not dataflow:
        while len(_CACHES) >= _CACHES_KEPT:
            del _CACHES[next(iter(_CACHES))]
        _CACHES[key] = (dataflow, tuple({} for _ in range(count)))
    return _CACHES[key][1]


def is_chain(dataflow: Dataflow) -> bool:
    """Whether every stage reads the one before it, and only it."""
    return all(list(getattr(stage, "sources", [index - 1])) == [index - 1]
               for index, stage in enumerate(dataflow.stages))


class Chain:
    """The design as foldable stages and the segments of other stages between them, with the cost
    of every choice of each (cached: each is computed once, by the estimate's own code).

    When every stage reads the one before it (``chain``), the cost is a sum of per-stage and
    per-segment terms and the search is exact. A design that branches (residual adds, concats) is
    a sum of per-stage terms and of terms over the sides that set the lanes of each stage without
    knobs, link and fork (:meth:`_group_terms`), searched exactly by :meth:`_eliminate`.
    """

    def __init__(self, dataflow: Dataflow, device: Device, fifo_depth: int, placement: bool = True,
                 clock: Clock | None = None):
        self.dataflow, self.clock = dataflow, clock
        self.pipeline()
        # Looked up on the module here, not imported by name: a test prices with a cost model of its own.
        self._stage_spec, self._fold_followers = kernels.stage_spec, fold_streaming_stages
        self._stage_specs, self._link_specs, self._fork_spec = kernels.stage_specs, kernels.link_specs, kernels.fork_spec
        self.dataflow, self.stages, self.device, self.fifo_depth = dataflow, dataflow.stages, device, fifo_depth
        self.chain = is_chain(dataflow)
        self.placement = placement
        self._family, self._dsp = family_of(device.name), device.dsp > 0
        self.foldable = [index for index, stage in enumerate(self.stages) if stage.knobs()]
        self._choice_keys: list[dict[Choice, tuple[Choice, Choice, Choice]]] = [{} for _ in self.foldable]
        self.knobs = [self.stages[index].knobs(placement=placement) for index in self.foldable]
        # Where in a choice the values of its folding, input side and output side are (see _keys_of).
        self._key_positions = [tuple(tuple(i for i, knob in enumerate(knobs) if knob.side in sides)
                                     for sides in (("in", "out", "both"), ("in", "both"), ("out", "both")))
                               for knobs in self.knobs]
        self.options: list[list[Choice]] = [list(itertools.product(*(k.values for k in knobs)))
                                            for knobs in self.knobs]
        bounds = [-1, *self.foldable, len(self.stages)]
        self.segments = [list(range(bounds[k] + 1, bounds[k + 1])) for k in range(len(bounds) - 1)]
        (self._node_cycles, self._edge_cycles, self._node_specs, self._node_cache, self._edge_cache,
         self._term_tables, self._follower_specs, self._priced_kernels, self._builds) = _caches_of(dataflow,
                                                                                                  fifo_depth, clock)
        self._priced_as = (self._family, self._dsp)
        self._node_vectors: dict[tuple[int, int], list[tuple[Choice, Choice, tuple[int, ...]]]] = {}
        self._choice_tables: dict[tuple[int, int], tuple] = {}
        self._groups_within: dict[tuple[int, int], tuple] = {}
        self._k_of = {index: k for k, index in enumerate(self.foldable)}
        self.options = [[choice for choice in options if self._closes(k, choice)]
                        for k, options in enumerate(self.options)]
        # Every combination of a side's knobs' values (the options: all combinations of all knobs' that close).
        self._domains = {(k, side): sorted(itertools.product(*(knob.values for knob in knobs
                                                               if knob.side in (side, "both"))))
                         for k, knobs in enumerate(self.knobs) for side in ("in", "out")}
        self._positions: dict[tuple, int] = {}
        self._edge_vectors: dict[tuple, tuple[int, ...]] = {}
        self._widths: dict[int, tuple[list[int], int]] = {}
        self._readers: dict[int, list[tuple[int, int]]] = {}
        for index, stage in enumerate(self.stages):
            for port, source in enumerate(stage.sources):
                self._readers.setdefault(source, []).append((index, port))
        self._held = branch_holds(self.stages)
        if not self.chain:
            self._groups = self._group_terms()

    def _closes(self, k: int, choice: Choice) -> bool:
        """Whether stage ``k`` at ``choice`` closes at its clock (:meth:`~streamc.stages.Stage.closes`): a folding no
        pipeline register closes is not one to choose."""
        self._set(k, choice)
        return self.stages[self.foldable[k]].closes()

    def pipeline(self) -> None:
        """Pipeline every stage for this chain's clock (before anything is priced, and before building a plan of this
        chain after another chain's clock was tried); without a clock, the stages stay as they are."""
        if self.clock is not None:
            for stage in self.dataflow.stages:
                stage.pipeline_for(self.clock)

    def folded(self, k: int, choice: Choice) -> Choice:
        """The lanes of ``choice``, without where its ROMs go."""
        return self._keys_of(k, choice)[0]

    def _keys_of(self, k: int, choice: Choice) -> tuple[Choice, Choice, Choice]:
        """:meth:`folded`, :meth:`in_key` and :meth:`out_key` of ``choice``, worked out once: the searches
        ask for them hundreds of thousands of times."""
        keys = self._choice_keys[k].get(choice)
        if keys is None:
            keys = self._choice_keys[k][choice] = tuple(tuple(choice[i] for i in at) for at in self._key_positions[k])
        return keys

    def placed(self, k: int, choice: Choice) -> dict[str, str]:
        """Where ``choice`` puts stage ``k``'s ROMs (``{"ram_style": ...}``)."""
        return {knob.name: v for knob, v in zip(self.knobs[k], choice) if not knob.folds}

    # -- keys of the sides a segment sees ------------------------------------------------------------
    def in_key(self, k: int, choice: Choice) -> Choice:
        return self._keys_of(k, choice)[1]

    def out_key(self, k: int, choice: Choice) -> Choice:
        return self._keys_of(k, choice)[2]

    def _set(self, k: int, choice: Choice) -> None:
        set_knobs(self.stages[self.foldable[k]], self.knobs[k], choice)

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
        folded now: per folding of a foldable stage, per lanes of any other. A foldable stage is built
        once per choice of its knobs but those of its input lanes (:func:`streamc.kernels.stage_specs`)."""
        stage = self.stages[index]
        if index in self._k_of:
            k = self._k_of[index]
            key, cache = (k, tuple(getattr(stage, knob.name) for knob in self.knobs[k] if knob.folds)), self._node_specs
            build = (k, tuple(getattr(stage, knob.name) for knob in self.knobs[k] if knob.side in ("out", "both")))
        else:
            key, cache = (index, stage.in_elems, stage.out_elems), self._follower_specs
            build = key
        if key not in cache:
            if build not in self._builds:
                self._builds[build] = self._stage_specs(stage)
            cache[key] = self._builds[build](stage.in_elems)
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
            self._edge_cycles[key] = self._segment_cycles(s)
        return self._edge_cycles[key]

    def edge(self, s: int, out_key: Choice, in_key: Choice) -> ResourceEstimate:
        """What segment ``s`` takes between its neighbours' given sides: its stages and the links into them
        and into the stage after it, each kernel priced once per lanes and ports (:meth:`_price_group`),
        however many segments and neighbours' foldings share it."""
        priced = (s, out_key, in_key, self._priced_as)
        if priced not in self._edge_cache:
            self._segment(s, out_key, in_key)
            self._edge_cache[priced] = self._segment_resources(s)
        return self._edge_cache[priced]

    def edge_within(self, s: int, out_key: Choice, in_key: Choice, cycles: int) -> tuple[int, ...] | None:
        """:meth:`edge_vector` of segment ``s`` if it takes at most ``cycles``, else None. A segment seen for the
        first time is folded once for both its cycles and its resources (folding the followers takes longer
        than either)."""
        key = (s, out_key, in_key)
        if key not in self._edge_cycles:
            self._segment(s, out_key, in_key)
            self._edge_cycles[key] = self._segment_cycles(s)
            priced = (*key, self._priced_as)
            if self._edge_cycles[key] <= cycles and priced not in self._edge_cache:
                self._edge_cache[priced] = self._segment_resources(s)
        return self.edge_vector(s, out_key, in_key) if self._edge_cycles[key] <= cycles else None

    def _segment_cycles(self, s: int) -> int:
        """Cycles of segment ``s``'s stages as they are folded now."""
        return max((self.stages[i].cycles() for i in self.segments[s]), default=0)

    def _segment_resources(self, s: int) -> ResourceEstimate:
        """:meth:`edge` of segment ``s`` as the dataflow is folded now."""
        ends = self.segments[s] + ([self.foldable[s]] if s < len(self.foldable) else [])
        members = [("stage", index) for index in self.segments[s]] + [("link", index, 0) for index in ends]
        vector, _ = self._price_group(members, fifo_depths(self.dataflow, self.fifo_depth, self._held))
        return ResourceEstimate(**dict(zip(RESOURCE_FIELDS, map(int, vector))))

    def edge_vector(self, s: int, out_key: Choice, in_key: Choice) -> tuple[int, ...]:
        """:meth:`edge` as a vector (:func:`as_vector`)."""
        priced = (s, out_key, in_key, self._priced_as)
        if priced not in self._edge_vectors:
            self._edge_vectors[priced] = as_vector(self.edge(s, out_key, in_key))
        return self._edge_vectors[priced]

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
            return total + ResourceEstimate(**dict(zip(RESOURCE_FIELDS, map(int, vector[0])))), max(cycles, int(reached[0]))
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
            self._priced_kernels[key] = as_vector(sum((estimate_kernel(spec, self._family, dsp=self._dsp)
                                                     for spec in specs()), ResourceEstimate()))
        return self._priced_kernels[key]

    def _price_group(self, members: list[tuple], depths: list[list[int]]) -> tuple[np.ndarray, int]:
        """Resources (a vector) and cycles of a group's kernels, the dataflow folded as it is now."""
        total, cycles = np.zeros(len(RESOURCE_FIELDS), dtype=np.int64), 0
        for member in members:
            if member[0] == "stage":
                index = member[1]
                stage = self.stages[index]
                total += self._priced(("stage", index, stage.in_elems, stage.out_elems),
                                      lambda: [self._built(index)[0]])
                cycles = max(cycles, stage.cycles())
            elif member[0] == "link":
                _, index, port = member
                producer, taken, depth = (self._out_port(self.stages[index].sources[port]), self._ports(index)[0][port],
                                          depths[index][port])
                # The converter (the producer's lanes to the port's) and the FIFO after it (the port's lanes, the
                # producer's elements) priced apart: each is shared by links that differ in the other.
                total += self._priced(("convert", producer, taken[0]), lambda: self._link_specs(producer, taken, 0))
                fifo = (taken[0], producer[1])
                total += self._priced(("fifo", fifo, depth), lambda: self._link_specs(fifo, taken, depth))
            else:
                ends = (self._out_port(member[1]), len(self._readers[member[1]]))
                total += self._priced(("fork", *ends), lambda: [self._fork_spec(*ends)])
        return total, cycles

    def terms(self) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
        """Per group of :meth:`_group_terms`, its resources (vectors) and cycles for every combination of
        its sides' keys, indexed as ``_domains`` orders them."""
        if self._priced_as not in self._term_tables:
            tables = {}
            for scope, members in self._groups.items():
                dims = [len(self._domains[entry]) for entry in scope]
                resources, cycles = np.zeros((*dims, len(RESOURCE_FIELDS)), dtype=np.int64), np.zeros(dims, dtype=np.int64)
                for position in np.ndindex(*dims):
                    for (k, side), at in zip(scope, position):
                        self._set_side(k, self._domains[(k, side)][at], side)
                    self._follow()
                    resources[position], cycles[position] = self._price_group(
                        members, fifo_depths(self.dataflow, self.fifo_depth, self._held))
                tables[scope] = (resources, cycles)
            self._term_tables[self._priced_as] = tables
        return self._term_tables[self._priced_as]

    def position(self, entry: tuple[int, str], choice: Choice) -> int:
        """Where ``choice`` of stage ``entry[0]`` puts its side ``entry[1]`` in ``_domains``."""
        return self.positions_of(entry, [choice])[0]

    def positions_of(self, entry: tuple[int, str], choices: list[Choice]) -> list[int]:
        """:meth:`_position` of each of ``choices`` (the searches ask for hundreds of thousands)."""
        known = self._positions
        for choice in choices:
            if (entry, choice) not in known:
                k, side = entry
                known[(entry, choice)] = self._domains[entry].index(
                    (self.in_key if side == "in" else self.out_key)(k, choice))
        return [known[(entry, choice)] for choice in choices]

    def _terms_at(self, assignment: list[Choice], stage: int | None = None,
                  choices: list[Choice] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Resources (vectors) and cycles of the terms of a branching design folded as ``assignment``;
        with ``stage``, of those that depend on it, for each of its ``choices`` (a row each)."""
        count = 1 if choices is None else len(choices)
        total, cycles = np.zeros((count, len(RESOURCE_FIELDS)), dtype=np.int64), np.zeros(count, dtype=np.int64)
        for scope, (resources, reached) in self.terms().items():
            if stage is None or any(k == stage for k, _ in scope):
                position = tuple(np.array(self.positions_of(entry, choices)) if entry[0] == stage
                                 else self.position(entry, assignment[entry[0]]) for entry in scope)
                total += resources[position]
                cycles = np.maximum(cycles, reached[position])
        return total, cycles


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
                    fits=not over_limits(resources, limits, self.device.family))

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



RESOURCE_FIELDS = [f.name for f in fields(ResourceEstimate)]


def as_vector(resources: ResourceEstimate) -> tuple[int, ...]:
    return tuple(getattr(resources, name) for name in RESOURCE_FIELDS)


def set_knobs(stage: Stage, knobs: tuple[Knob, ...], choice: Choice) -> None:
    for knob, value in zip(knobs, choice):
        setattr(stage, knob.name, value)


def lanes_of(stage: Stage) -> str:
    return f"{stage.in_elems} lanes in, {stage.out_elems} out"

