"""The folding planner: PE and SIMD per layer for a throughput target or a share of a device.

Two questions, both answered on the resource models of :mod:`streamc.resources` for one device:

- :func:`plan_for_cycles`: the folding with the fewest LUTs whose every stage takes at most a
  given number of cycles per frame (``target_fps`` at ``clock_mhz``);
- :func:`plan_for_budget`: the fewest cycles per frame whose cheapest folding fits a fraction of
  the device's LUTs, with its block RAM, SPRAM, DSPs and flip-flops;
- :func:`plan_clock_for_budget`: that at each candidate clock, pipelined for it, keeping the most frames per
  second (``clock_mhz: auto``).

The design is a chain of foldable stages (those with knobs, :meth:`~streamc.stages.base.Stage.knobs`) with stages
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
(:meth:`~streamc.planner.search.Planner._eliminate`). Once the folding is chosen, lookup tables move into the block RAM it
leaves free where that saves LUTs (:meth:`~streamc.planner.cost.Chain.placed_design`).

:func:`greedy_for_cycles` is FINN's ``SetFolding`` (divisors in ascending order, SIMD before PE,
stop at the first that meets the target), and :func:`exhaustive_for_cycles` tries every folding:
the baselines the benchmark and the tests compare with.

The package: :mod:`~streamc.planner.cost` (the stages, their choices and what each costs),
:mod:`~streamc.planner.search` (the searches over those costs, and the build's entry point
:func:`plan_folding`), :mod:`~streamc.planner.baselines` (greedy and exhaustive).
"""

from .baselines import (
                        EXHAUSTIVE_LIMIT,
                        EXHAUSTIVE_LIMIT_BRANCHING,
                        exhaustive_for_budget,
                        exhaustive_for_cycles,
                        exhaustive_size,
                        greedy_for_budget,
                        greedy_for_cycles,
)
from .cost import (
                        LIMITED,
                        Chain,
                        Plan,
                        device_limits,
)
from .search import Planner, plan_clock_for_budget, plan_folding, plan_for_budget, plan_for_cycles

__all__ = ["EXHAUSTIVE_LIMIT", "EXHAUSTIVE_LIMIT_BRANCHING", "LIMITED", "Chain", "Plan",
           "Planner", "device_limits", "exhaustive_for_budget", "exhaustive_for_cycles", "exhaustive_size",
           "greedy_for_budget", "greedy_for_cycles", "plan_clock_for_budget", "plan_folding", "plan_for_budget", "plan_for_cycles"]
