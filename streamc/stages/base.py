"""What every hardware stage tells the compiler: the protocol the stage kinds implement.

A stage is one kernel of the dataflow graph as the compiler sees it, before and after folding. Each
kind lives in its own module of :mod:`streamc.stages` and answers, for itself, every question the
build asks of a stage; the build never asks which kind a stage is:

==========================  =================================================================
``cycles()``                cycles per frame at its folding
``emulate(*inputs)``        its integer outputs for integer inputs (frames are rows)
``need(port)``              data dependencies: inputs port ``port`` must have taken before the
                            stage can put out output element ``e`` (FIFO sizing)
``knobs(placement)``        what the planner may choose for it (:class:`Knob`); ``()``: nothing
``follow(before, after)``   a stage without knobs takes its lanes from its neighbours
``fit_to(cycles)``          the fewest lanes within ``cycles`` where an explicit folding leaves
                            it out (a vector unit)
``components()``            the Amaranth components the rtl step builds for it, in stream order
``folding()``               its folding as reports show it and a ``folding`` config takes it
``report()``                what ``reports/estimates.json`` says of it besides the common fields
``summary()``               its row of the build summary
``from_record(...)``        a classmethod of each kind in ``STAGE_KINDS`` (``kind`` names the record
                            kind): the stage from the streamline step's record of it, with
                            ``window_of(record)`` the sliding window in front
==========================  =================================================================

The resource model of a stage is the one of the components it builds (:mod:`streamc.resources`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

from ..datatypes import DataType
from ..rtl.placement import RES_TYPES
from ..rtl.requant import Requant, requantize
from .byte_matmul import byte_matmul

#: Thresholds per channel up to which :func:`thresholds_reached` compares level by level (a pass over the
#: values each); more are searched.
COMPARE_LEVELS = 8
#: Values times threshold rows up to which integers are counted by a table of every value's count.
TABLE_ENTRIES = 1 << 16

#: Where the planner may put a ROM (:mod:`streamc.rtl.placement`): Yosys' own choice ("auto") is
#: always one of them, so weighing both finds at least as good a design.
PLACEMENTS = ("distributed", "block")


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


def placement_knobs(roms: list[str], multiplies: bool, placement: bool) -> tuple[Knob, ...]:
    """Where each of a stage's ROMs (attributes ``roms``) and, if it ``multiplies``, its multiplies go;
    without ``placement``, where Yosys puts them (``"auto"``)."""
    knobs = tuple(Knob(name, PLACEMENTS if placement else ("auto",), "none") for name in roms)
    if multiplies:
        knobs += (Knob("res_type", RES_TYPES if placement else ("auto",), "none"),)
    return knobs


def divisors(n: int) -> list[int]:
    return list(_divisors(n))


@cache
def _divisors(n: int) -> tuple[int, ...]:
    # Asked again each time a stage follows its neighbours' lanes, which the planner does thousands of times.
    return tuple(d for d in range(1, n + 1) if n % d == 0)


class Stage(ABC):
    """The protocol of a hardware stage, with what most kinds share (see the module's documentation).

    A kind is a dataclass with at least ``name``, ``source`` (the model's node), ``sources`` (the
    stages it reads, -1 for the hardware input), ``in_dtype``, ``out_dtype``, ``in_count``,
    ``out_count`` (elements per frame), ``in_elems`` and ``out_elems`` (per beat) and
    ``output_stage`` (what its output stage is, for people)."""

    #: The kind's name in reports, summaries and the streamline step's stage records.
    kind: str = ""

    @classmethod
    def window_of(cls, record: dict) -> dict | None:
        """The arguments of :func:`~streamc.stages.window.sliding_window` for the window the stage reads
        through (a convolution's, a pool's), None where it reads its input as it comes."""
        return None

    @abstractmethod
    def cycles(self) -> int:
        """Cycles per frame at the stage's folding."""

    @abstractmethod
    def emulate(self, *inputs: np.ndarray) -> np.ndarray:
        """Its integer outputs for integer inputs, a frame per row."""

    @abstractmethod
    def describe(self) -> str:
        """The stage for people, naming the model's node."""

    @abstractmethod
    def need(self, port: int) -> np.ndarray:
        """For each output element ``e`` of one frame, the inputs port ``port`` must have taken before the
        stage can put it out (not yet made monotonic: :func:`streamc.fifo_sizing.need` does that)."""

    def port_count(self, port: int) -> int:
        """Elements input port ``port`` takes per frame."""
        return self.in_count

    @property
    def input_burst(self) -> int:
        """Beats the stage takes on its first input in one burst, which the FIFO in front must hold."""
        return 0

    @property
    def beat_interval(self) -> float:
        """Cycles the stage needs between two output beats when its inputs are there (one, unless it folds its
        arithmetic over cycles)."""
        return 1

    def knobs(self, *, placement: bool = True) -> tuple[Knob, ...]:
        """What the planner may choose, in the order FINN's greedy pass raises it, then where each ROM and
        the multiplies go (without ``placement``: ``"auto"``); ``()`` for a stage without knobs."""
        return ()

    def follow(self, before: "Stage | None", after: "Stage | None") -> None:
        """A stage without knobs takes its lanes from the stage before it (``None``: the hardware input) and
        the one after it (``None``: the output)."""

    def fit_to(self, cycles: int) -> None:
        """Where an explicit folding does not name the stage: its fewest lanes within ``cycles``."""

    def build_for(self, family: str) -> None:
        """Take the device family (``"ice40"``, ``"ecp5"``, ``"gowin"``) the kernels are built for, with or
        without a clock to pipeline for; kinds whose kernels have no choice that depends on it ignore it."""

    def pipeline_for(self, clock) -> None:
        """Take the clock (a :class:`streamc.timing.Clock`) the kernels' pipeline registers are chosen for;
        kinds whose kernels have no such choice ignore it."""

    def closes(self) -> bool:
        """Whether the stage, at its folding, closes at the clock it is pipelined for where no pipeline register of its
        can make it: a fully unrolled layer's input bits each reach adders all over its graph, on routes that grow
        with the graph (:meth:`streamc.timing.DelayModel.spread_closes`). Without a clock, it does."""
        return True

    def pipeline_at(self, in_elems: int) -> dict:
        """The pipeline registers its first kernel has when it takes ``in_elems`` elements per beat, as fields of
        that kernel's resource spec (the planner prices a kernel built at one count for others)."""
        return {}

    @abstractmethod
    def components(self) -> list:
        """The Amaranth components the rtl step builds for it, in stream order."""

    def folding(self) -> dict:
        return {"elems": self.in_elems}

    def report(self) -> dict:
        return {"kind": type(self).__name__}

    def summary(self) -> dict:
        """The build summary's row: ``shape``, ``weights`` (their type), ``pe`` and ``simd`` as text (empty
        where the stage has none), and the fields ``summary.json`` adds."""
        return {"shape": f"{self.out_count} elements", "weights": "", "pe": str(self.in_elems), "simd": "",
                "fields": {"elems": self.in_elems, "kind": type(self).__name__}}


def activate(acc: np.ndarray, thresholds, requant: Requant | None, out_dtype: DataType, out_bias: int) -> np.ndarray:
    """An output stage on integer accumulators (M, C): requantization, thresholds, or none. Thresholds give
    codes in the narrowest integers that hold them (their reader widens what it computes); the accumulator and
    requantization give int64."""
    if requant is not None:
        return requantize(acc.astype(np.int64, copy=False), requant)
    if thresholds is None:
        return acc.astype(np.int64, copy=False)
    info = np.iinfo(acc.dtype)
    # a threshold beyond the accumulator's type is one no accumulator, or every one, reaches
    within = np.clip(thresholds, info.min + 1, info.max).astype(acc.dtype)
    if out_dtype.bipolar:
        return np.where(thresholds_reached(acc, within, np.int16) > 0, np.int8(1), np.int8(-1))
    dtype = narrowest_integers(min(out_bias, out_dtype.min), max(out_dtype.max, thresholds.shape[1] + out_bias))
    count = thresholds_reached(acc, within, dtype)
    count += dtype.type(out_bias)
    return count


def narrowest_integers(low: int, high: int) -> np.dtype:
    """The narrowest signed numpy integer type holding ``low`` to ``high``."""
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)
                if np.iinfo(t).min <= low and high <= np.iinfo(t).max)


def thresholds_reached(x: np.ndarray, thresholds: np.ndarray, dtype) -> np.ndarray:
    """How many of column ``c``'s thresholds ``thresholds[c]`` each ``x[:, c]`` reaches (``x >= t``), in ``dtype``;
    one row of thresholds serves every column.

    Up to :data:`COMPARE_LEVELS` thresholds, unsorted ones, or float ones differing between columns are compared
    one level at a time; more, sorted (as the streamline step writes them), are searched: floats in their one
    row, integers in a table of every value between the least and the largest (up to :data:`TABLE_ENTRIES`
    entries) or all rows at once, shifted apart per column in one sorted array."""
    levels = thresholds.shape[1]
    shared = len(thresholds) == 1 or bool((thresholds == thresholds[:1]).all())
    if (levels <= COMPARE_LEVELS or (np.diff(thresholds, axis=1) < 0).any()
            or not (shared or np.issubdtype(x.dtype, np.integer))):
        # the first level's compare is the count's start, not an addition to zeros (a pass less)
        count = (x >= thresholds[:, 0]).astype(dtype) if levels else np.zeros(x.shape, dtype)
        for level in range(1, levels):
            count += x >= thresholds[:, level]
        return count
    if not np.issubdtype(x.dtype, np.integer):
        return np.searchsorted(thresholds[0], x, side="right").astype(dtype)
    rows = 1 if shared else len(thresholds)
    low, high = int(x.min(initial=0)), int(x.max(initial=0))
    if (high - low + 1) * rows <= TABLE_ENTRIES:
        # each row's count for every value that occurs, then one lookup per value
        values = np.arange(low, high + 1)
        table = _searched(thresholds[:rows], np.broadcast_to(values, (rows, len(values))).T).T.astype(dtype)
        index = x - low if shared else (x - low) + np.arange(rows) * len(values)
        return table.reshape(-1)[index]
    return _searched(thresholds[:rows], x).astype(dtype)


def _searched(thresholds: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Sorted integer thresholds reached, one row (or a row per column of ``x``) with one ``np.searchsorted``:
    the rows shifted apart in one sorted array."""
    if len(thresholds) == 1:
        return np.searchsorted(thresholds[0], x, side="right")
    levels = thresholds.shape[1]
    low = min(int(thresholds.min()), int(x.min(initial=0)))
    span = max(int(thresholds.max()), int(x.max(initial=0))) - low + 1
    shift = np.arange(len(thresholds), dtype=np.int64) * span
    flat = ((thresholds.astype(np.int64) - low) + shift[:, None]).reshape(-1)
    found = np.searchsorted(flat, (x.astype(np.int64) - low) + shift, side="right")
    return found - shift // span * levels


def integer_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of integer arrays, exactly: byte-sized operands in onnxruntime's u8 x s8 kernels where they are
    exact (:func:`~streamc.stages.byte_matmul.byte_matmul`); else through float32 or float64 BLAS where no partial
    sum can reach 2**24 or 2**53 (every float sum of such integers is exact), else in int64, which numpy multiplies
    without BLAS. In int32 where the bound leaves room below the type's largest value (which :func:`activate`
    clips thresholds to), else int64."""
    low, high = int(a.min(initial=0)), int(a.max(initial=0))
    # from the extremes, not np.abs: the largest magnitude of a narrow type (-128 of int8) has no abs in it
    bound = max(-low, high) * int(np.abs(b).sum(axis=0).max(initial=0))
    out = np.int32 if bound < (1 << 31) - 1 else np.int64
    if (product := byte_matmul(a, b, low, high)) is not None:
        return product.astype(out, copy=False)
    for exact, dtype in ((1 << 24, np.float32), (1 << 53, np.float64)):
        if bound < exact:
            return (a.astype(dtype) @ b.astype(dtype)).astype(out)
    return a.astype(np.int64) @ b.astype(np.int64)


def channel_need(out_count: int, channels: int, window: int) -> np.ndarray:
    """A unit that reduces each channel's window of ``window`` pixels: output ``(pixel, channel)`` needs
    the last pixel of its window up to that channel."""
    pixel, channel = np.divmod(np.arange(out_count), channels)
    return pixel * window * channels + (window - 1) * channels + channel + 1
