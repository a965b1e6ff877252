"""Specs of any kernel: read off a unit or stored data, placed, and estimated with the fitted coefficients."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache

from .coefficients import COEFFICIENTS
from .constant_products import luts_per_adder_bit
from .branch import AddSpec, ConcatSpec, ForkSpec, add_parts, concat_parts, fork_parts
from .lut import LUTSpec, lut_parts
from .memories import Memories
from .mvau import MVAUSpec, MVAUSpecs, mvau_parts
from .shared import KernelSpec, ResourceEstimate
from .stream import ConverterSpec, FIFOSpec, converter_parts, fifo_parts
from .threshold import SEARCH_COEFFICIENTS, ThresholdSpec, threshold_parts
from .vvau import VVAUSpec, vvau_parts
from .window import PoolSpec, WindowSpec, pool_parts, window_parts


@dataclass(frozen=True)
class ChainSpec(KernelSpec):
    """Kernels one hardware stage is built of, each feeding the next directly (a residual add and its
    thresholds, a vector unit and its thresholds): their resources are the sum of theirs."""

    kernels: tuple


def with_placement(spec: "Spec", **styles: str) -> "Spec":
    """``spec`` with its ROMs placed as ``styles`` say (``ram_style="block"``), on each kernel that has them."""
    if isinstance(spec, ChainSpec):
        return ChainSpec(kernels=tuple(with_placement(part, **styles) for part in spec.kernels))
    own = _field_names(type(spec))
    changed = {name: style for name, style in styles.items() if name in own and getattr(spec, name) != style}
    if not changed:
        return spec
    # A copy of its fields with the styles set, not dataclasses.replace: the planner places every folding it prices,
    # and replace runs an MVAU spec's __init__ over its fifty fields (no spec checks anything there: none has a
    # __post_init__): 21.5 us against 4.6 for copy.copy and 1.4 for this (an MVAU spec, 2026-11-28).
    placed = object.__new__(type(spec))
    placed.__dict__.update(spec.__dict__, **changed)
    return placed


@cache
def _field_names(spec_class: type) -> frozenset[str]:
    # Looked up for each placement the planner prices, thousands of times.
    return frozenset(f.name for f in fields(spec_class))


Spec = (MVAUSpec | LUTSpec | WindowSpec | PoolSpec | FIFOSpec | ConverterSpec | VVAUSpec | ThresholdSpec | AddSpec
        | ConcatSpec | ForkSpec | ChainSpec)
_SPEC_OF_KERNEL = {"mvau": MVAUSpec, "lut": LUTSpec, "window": WindowSpec, "pool": PoolSpec, "fifo": FIFOSpec,
                   "convert": ConverterSpec, "vvau": VVAUSpec, "threshold": ThresholdSpec, "add": AddSpec,
                   "concat": ConcatSpec, "fork": ForkSpec}


def specs_of_unit(unit) -> Callable[[int], Spec]:
    """The spec of a constructed kernel for a count of input elements per beat: any count for an MVAU, whose
    SIMD lays out its weight ROM and changes nothing else (:class:`~.mvau.MVAUSpecs`); the unit's own for
    any other kernel, whose build its lanes shape."""
    from ..rtl.mvau import MatrixVectorUnit

    if isinstance(unit, MatrixVectorUnit):
        return MVAUSpecs(unit).at
    spec = spec_of_unit(unit)

    def at(in_elems: int) -> Spec:
        if in_elems != unit.in_elems:
            raise ValueError(f"a {type(unit).__name__} of {unit.in_elems} input lanes is no kernel of {in_elems}: "
                             f"build it again")
        return spec
    return at


def spec_of_unit(unit) -> Spec:
    """The spec of any constructed (not elaborated) kernel streamc generates, read off its parameters."""
    from ..rtl.branch import ChannelConcat, ElementwiseAdd, StreamFork
    from ..rtl.lut import LookupTable
    from ..rtl.mvau import MatrixVectorUnit
    from ..rtl.stream import StreamFIFO, WidthConverter
    from ..rtl.threshold import ThresholdUnit
    from ..rtl.vvau import VectorVectorUnit
    from ..rtl.window import SlidingWindow, WindowReduce

    of_unit = {LookupTable: LUTSpec, WindowReduce: PoolSpec, StreamFIFO: FIFOSpec, WidthConverter: ConverterSpec,
               MatrixVectorUnit: MVAUSpec, SlidingWindow: WindowSpec, VectorVectorUnit: VVAUSpec,
               ThresholdUnit: ThresholdSpec, ElementwiseAdd: AddSpec, ChannelConcat: ConcatSpec, StreamFork: ForkSpec}
    for unit_class, spec_class in of_unit.items():
        if isinstance(unit, unit_class):
            return spec_class.of_unit(unit)
    raise TypeError(f"no resource model for {type(unit).__name__}")


def spec_from_dict(kernel: str, values: dict) -> Spec:
    """Rebuild a spec stored by :meth:`to_dict` (the calibration data)."""
    cls = _SPEC_OF_KERNEL[kernel]
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def _parts(spec: Spec, family: str, dsp: bool) -> tuple[Memories, int, dict[str, float], dict[str, float]]:
    """Memories, DSPs, and the LUT and FF features of one kernel."""
    if isinstance(spec, MVAUSpec):
        return mvau_parts(spec, family, dsp)
    if isinstance(spec, LUTSpec):
        return lut_parts(spec, family)
    if isinstance(spec, WindowSpec):
        return window_parts(spec, family)
    if isinstance(spec, PoolSpec):
        return pool_parts(spec, family)
    if isinstance(spec, FIFOSpec):
        return fifo_parts(spec, family)
    if isinstance(spec, ConverterSpec):
        return converter_parts(spec)
    if isinstance(spec, VVAUSpec):
        return vvau_parts(spec, family, dsp)
    if isinstance(spec, ThresholdSpec):
        return threshold_parts(spec, family)
    if isinstance(spec, AddSpec):
        return add_parts(spec, family, dsp)
    if isinstance(spec, ConcatSpec):
        return concat_parts(spec)
    if isinstance(spec, ForkSpec):
        return fork_parts(spec, family)
    raise TypeError(f"no resource model for {type(spec).__name__}")


def kernel_name(spec: Spec) -> str:
    """The calibration name of a spec's kernel (``"mvau"``, ``"window"``, ...)."""
    return next(name for name, cls in _SPEC_OF_KERNEL.items() if isinstance(spec, cls))


def _coefficients(spec: Spec, family: str) -> dict[str, dict[str, float]]:
    # A searching threshold unit is counted in cells (see its model), the other kernels by the calibration's fit.
    if isinstance(spec, ThresholdSpec) and spec.threshold_style == "search":
        return SEARCH_COEFFICIENTS[family]
    if isinstance(spec, MVAUSpec) and spec.constant_adders >= 0:
        # The adder graph's LUTs are counted outside the fit (its own model, resources.constant_products).
        fitted = COEFFICIENTS[family]["mvau"]
        per_bit = luts_per_adder_bit(family, spec.keep_adders, spec.one_magnitude, spec.in_bits)
        return {**fitted, "lut": {**fitted["lut"], "constant_adders": per_bit}}
    return COEFFICIENTS[family][kernel_name(spec)]


def features(spec: Spec, family: str, what: str) -> dict[str, float]:
    """The features the ``what`` (``"lut"`` or ``"ff"``) model of ``spec``'s kernel is linear in."""
    _, _, lut, ff = _parts(spec, family, True)
    return lut if what == "lut" else ff


def estimate_kernel(spec: Spec, family: str, *, dsp: bool = True) -> ResourceEstimate:
    """Resources of one kernel on a device ``family``; ``dsp=False`` where the flow has no DSPs."""
    if isinstance(spec, ChainSpec):
        return sum((estimate_kernel(part, family, dsp=dsp) for part in spec.kernels), ResourceEstimate())
    memories, dsps, lut_features, ff_features = _parts(spec, family, dsp)
    coefficients = _coefficients(spec, family)
    lut = sum(coefficients["lut"].get(name, 0.0) * value for name, value in lut_features.items())
    ff = sum(coefficients["ff"].get(name, 0.0) * value for name, value in ff_features.items())
    own = ResourceEstimate(lut=round(lut), ff=round(ff), bram=memories.bram, dsp=dsps, lutram=memories.lutram)
    queue = spec.output_queue if isinstance(spec, MVAUSpec) else None
    return own if queue is None else own + estimate_kernel(queue, family, dsp=dsp)
