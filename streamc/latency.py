"""How many cycles a frame takes through the empty accelerator: predicted per stage and end to end.

A stage takes at most one beat a cycle on each input port, once its producer has put it out and the link's width
converter and FIFO have passed it on (:func:`link_cycles`). It can put out an output beat once its ports have taken
what that beat needs (the data dependencies :mod:`streamc.fifo_sizing` sizes FIFOs from) and its kernels' pipelines
have carried it through (their ``latency``), and no sooner than ``beat_interval`` cycles after its output beat
before (an MVAU computes a beat in SIMD folds; the other kinds put out a beat a cycle), nor faster than the links it
feeds take beats (:func:`link_pace`; the accelerator's input too). Both are a running maximum: with ``ready[b]`` the
cycle beat ``b`` has what it needs and ``pace`` cycles between beats, beat ``b`` leaves at
``max(ready[j] + (b - j) * pace for j <= b)``, one pass over a frame's beats. The input comes in at full rate, as
fast as its readers take it, as the testbench sends it.

The prediction is compared with what Verilator measures (``latency_cycles`` of a full-rate frame through
the empty pipeline) in ``reports/rtlsim.json``: equal to the cycle on every design the Verilator tests build
(18 designs: TFC and the dialect MLPs, eight CNNs with the residual and concat blocks' forks;
``tests/rtl_helpers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fifo_sizing import need
from .hw import Dataflow

INPUT = -1


@dataclass(frozen=True)
class StageLatency:
    """When a stage's first and last output beats of a frame leave, counted from the frame's first input beat."""

    name: str
    pipeline: int   # cycles through the stage's kernels (their ``latency``)
    first: int      # its first output beat
    last: int       # its last output beat


def pipeline_cycles(stage) -> int:
    """Cycles from a stage's input to its output through its kernels, as the rtl step builds them."""
    return sum(kernel.latency for kernel in stage.components())


def link_cycles(elems: int, port_elems: int, depth: int) -> int:
    """Cycles a link adds between a producer of ``elems`` elements a beat and a port taking ``port_elems``, with a
    FIFO of ``depth`` beats: its width converter's and its FIFO's, as the accelerator's top builds them."""
    from .rtl.top import StreamAccelerator

    return sum(part.latency for _, part in StreamAccelerator.link_parts("link", elems, port_elems, 1, depth))


def link_pace(elems: int, port_elems: int) -> float:
    """Cycles a link needs between two of its producer's beats: a width converter that splits a beat into narrower
    ones hands them out a cycle each before it takes the next (a fork waits for its slowest branch)."""
    return max(1.0, elems / port_elems)


def stage_latencies(dataflow: Dataflow, depths: list[list[int]]) -> list[StageLatency]:
    """Every stage's first and last output beat of a frame through the empty accelerator, in cycles after
    the frame's first input beat, with ``depths`` the FIFO depths of each stage's input ports (as
    :func:`~streamc.fifo_sizing.fifo_depths` gives them)."""
    stages = dataflow.stages
    # the accelerator's input beats are as wide as its first stage's port
    out_elems = {INPUT: stages[0].in_elems, **{index: stage.out_elems for index, stage in enumerate(stages)}}
    pace = {source: 1.0 for source in out_elems}
    for stage in stages:
        for source in stage.sources:
            pace[source] = max(pace[source], link_pace(out_elems[source], stage.in_elems))
    offered = {}

    def leaves(source, own: np.ndarray) -> np.ndarray:
        """When ``source``'s beats leave, ``own`` the cycles it could put them out: no faster than its slowest link
        takes them. A fork offers each beat from the cycle after the one before left, so its faster links take it
        sooner (``offered``)."""
        left = _paced(own, pace[source])
        offered[source] = np.maximum(own, np.concatenate([own[:1], left[:-1] + 1]))
        return left

    leaves(INPUT, np.arange(stages[0].in_count // out_elems[INPUT]))
    rows = []
    for index, stage in enumerate(stages):
        beats = stage.out_count // stage.out_elems
        pipeline = pipeline_cycles(stage)
        ready = np.zeros(beats, np.int64)
        for port, source in enumerate(stage.sources):
            sent = _paced(offered[source], link_pace(out_elems[source], stage.in_elems))
            arrived = (np.repeat(sent, out_elems[source])
                       + link_cycles(out_elems[source], stage.in_elems, depths[index][port]))
            taken = _taken(arrived, stage.port_count(port), stage.in_elems)
            # the inputs the last element of each beat needs, and when the last of them was taken
            needed = need(stage, port)[np.arange(1, beats + 1) * stage.out_elems]
            ready = np.maximum(ready, taken[np.maximum(needed, 1) - 1])
        left = leaves(index, _paced(ready + pipeline, stage.beat_interval))
        rows.append(StageLatency(stage.name, pipeline, int(left[0]), int(left[-1])))
    return rows


def _paced(ready: np.ndarray, interval: float) -> np.ndarray:
    """When each beat goes, ``ready`` the cycle it could at the earliest, at least ``interval`` after the one before."""
    steps = np.arange(len(ready)) * interval
    return np.ceil(steps + np.maximum.accumulate(ready - steps)).astype(np.int64)


def _taken(arrived: np.ndarray, count: int, elems: int) -> np.ndarray:
    """When a port takes each of its ``count`` elements, given when each arrived: a beat of ``elems`` a cycle."""
    elems = elems if count % elems == 0 else 1
    beats = _paced(arrived[elems - 1:count:elems], 1)
    return np.repeat(beats, elems)


def predicted_latency(dataflow: Dataflow, depths: list[list[int]]) -> int:
    """Cycles from a frame's first input beat to its first output beat through the empty accelerator, with the
    links' FIFO ``depths``."""
    return stage_latencies(dataflow, depths)[-1].first
