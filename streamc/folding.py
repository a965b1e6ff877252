"""Choose PE and SIMD per layer: the cheapest folding that meets the throughput target."""

from __future__ import annotations

import math

from .errors import FoldingError
from .hw import MVAULayer


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def cycle_budget(*, target_fps: float, clock_mhz: float) -> int:
    """Cycles one frame may take in the slowest layer to reach ``target_fps`` at ``clock_mhz``."""
    return math.floor(clock_mhz * 1e6 / target_fps)


def fold_for_target(layers: list[MVAULayer], *, target_fps: float, clock_mhz: float) -> None:
    """Give each layer the fewest parallel lanes (PE*SIMD) whose cycles per frame fit the budget.

    Among foldings with equal lanes, the one with fewer PEs wins: each PE costs an accumulator
    and a threshold comparator, a SIMD lane only a multiplier and an adder input.
    """
    budget = cycle_budget(target_fps=target_fps, clock_mhz=clock_mhz)
    if budget < 1:
        raise FoldingError(f"{target_fps:g} frames/s at {clock_mhz:g} MHz leaves less than one cycle per frame; "
                           f"the fastest streamc pipeline takes 1 cycle per frame ({clock_mhz * 1e6:g} frames/s)")
    for layer in layers:
        options = [(pe * simd, pe, simd) for pe in divisors(layer.mh) for simd in divisors(layer.mw)
                   if layer.cycles(pe, simd) <= budget]
        _, layer.pe, layer.simd = min(options)


def apply_folding(layers: list[MVAULayer], folding: dict[str, dict[str, int]], *, source: str) -> None:
    """Take an explicit per-layer folding (``{layer: {pe: .., simd: ..}}``); every layer must be named."""
    names = [layer.name for layer in layers]
    unknown = sorted(set(folding) - set(names))
    if unknown:
        raise FoldingError(f"folding names layer {unknown[0]!r}, which the model does not have; "
                           f"layers: {', '.join(names)} (in {source})")
    for layer in layers:
        if layer.name not in folding:
            raise FoldingError(f"folding has no entry for layer {layer.name!r} (in {source}); "
                               f"give pe and simd for every layer: {', '.join(names)}")
        entry = folding[layer.name]
        for key, size, dim in (("pe", layer.mh, "MH"), ("simd", layer.mw, "MW")):
            value = entry[key]
            if size % value:
                valid = ", ".join(str(d) for d in divisors(size))
                raise FoldingError(f"{layer.describe()}: {key}={value} does not divide {size}; valid {key}: "
                                   f"{valid} (set folding.{layer.name}.{key} in {source})")
        layer.pe, layer.simd = entry["pe"], entry["simd"]
