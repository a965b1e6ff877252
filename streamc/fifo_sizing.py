"""FIFO depths that keep a dataflow graph from deadlocking, sized from its data dependencies.

Where a stream forks and its branches meet again (a residual block), the fork pushes each element
into every branch at once, while the join takes from its inputs only in step. If one branch must
take in many elements before it can put out its first (a sliding window needs whole rows), the
other branch must hold them meanwhile, or the fork stalls and the graph deadlocks.

For every stage and input port, ``need[k]`` is the least number of elements the port must have
taken for the stage to put out ``k`` elements, read off the stage's geometry. Along a path from a
fork to a join these compose into ``N_p(k)``: fork elements needed for the join's ``k``-th output
along path ``p``. The fork must have pushed ``max_q N_q(k)`` elements for that output, while path
``p`` has taken no more than ``N_p(k - 1)`` into its stages; the difference is what the FIFO at the
head of path ``p`` must hold. Computed over two frames so that the next frame's head overlapping
this frame's tail is covered. Stages with internal buffers only make the bound safer.
"""

from __future__ import annotations

import math

import numpy as np

from .hw import Dataflow
from .stages import Stage

INPUT = -1
#: Beats of slack on a sized FIFO: the join's own pipeline and the handshake registers.
SLACK = 2
#: Paths from one fork beyond this many are not enumerated (a graph that wide is not built yet).
MAX_PATHS = 4096


def need(stage: Stage, port: int) -> np.ndarray:
    """``need[k]``: elements port ``port`` must have taken before the stage can put out ``k`` (one frame)."""
    return np.concatenate([[0], np.maximum.accumulate(stage.need(port))]).astype(np.int64)


def _two_frames(stage: Stage, port: int) -> np.ndarray:
    one = need(stage, port)
    return np.concatenate([one, stage.port_count(port) + one[1:]])


def fifo_depths(dataflow: Dataflow, minimum: int, held: dict[tuple[int, int], int] | None = None) -> list[list[int]]:
    """Per stage and input port, the FIFO depth in beats: ``minimum`` between stages (none at the input), one
    input vector before an MVAU (it takes its vector in a burst during its first neuron fold), and at
    the head of every branch of a fork what its join needs (see the module's docstring).

    ``held``: :func:`branch_holds` of these stages, if already known (it does not depend on the folding)."""
    stages = dataflow.stages
    depths = [[0 if source == INPUT else minimum for source in stage.sources] for stage in stages]
    for k, stage in enumerate(stages):
        if stage.sources[0] != INPUT:
            depths[k][0] = max(depths[k][0], stage.input_burst)
    for (k, j), elements in (branch_holds(stages) if held is None else held).items():
        depths[k][j] = max(depths[k][j], math.ceil(elements / stages[k].in_elems) + SLACK)
    return depths


def branch_holds(stages: list[Stage]) -> dict[tuple[int, int], int]:
    """Elements the FIFO at the head of each branch of a fork must hold, by (stage, input port): counted
    in elements, so the same for every folding."""
    readers: dict[int, list[tuple[int, int]]] = {}
    for k, stage in enumerate(stages):
        for j, source in enumerate(stage.sources):
            readers.setdefault(source, []).append((k, j))
    held: dict[tuple[int, int], int] = {}
    for heads in readers.values():
        if len(heads) > 1:
            for head, elements in _branch_needs(stages, readers, heads).items():
                held[head] = max(held.get(head, 0), elements)
    return held


def _branch_needs(stages: list[Stage], readers, heads) -> dict[tuple[int, int], int]:
    """Elements the head link of each branch from a fork must hold, for every join the branches meet at."""
    paths: dict[int, list[list[tuple[int, int]]]] = {}   # join stage -> paths ending at one of its ports
    stack = [[head] for head in heads]
    while stack:
        path = stack.pop()
        k = path[-1][0]
        paths.setdefault(k, []).append(path)
        if sum(len(p) for p in paths.values()) > MAX_PATHS:
            raise ValueError(f"more than {MAX_PATHS} paths from one fork; the FIFO sizing does not scale to this graph")
        stack += [path + [reader] for reader in readers.get(k, [])]
    result: dict[tuple[int, int], int] = {}
    for join, arriving in paths.items():
        if len({path[0] for path in arriving}) < 2:
            continue  # reached from one branch of the fork only
        totals = [_compose(stages, path) for path in arriving]
        pushed = np.max(totals, axis=0)
        for path, total in zip(arriving, totals):
            held = int(np.max(pushed[1:] - total[:-1]))
            result[path[0]] = max(result.get(path[0], 0), held)
    return result


def _compose(stages: list[Stage], path: list[tuple[int, int]]) -> np.ndarray:
    """Fork elements needed along ``path`` for each count of the last stage's outputs (two frames)."""
    k, j = path[-1]
    total = _two_frames(stages[k], j)
    for k, j in reversed(path[:-1]):
        total = _two_frames(stages[k], j)[total]
    return total
