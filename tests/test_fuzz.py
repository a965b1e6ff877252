"""Differential fuzzing, the quick profile: random networks from :mod:`fuzz_networks`.

- streamc's reference executor against the network's independent reference (qonnx's executor, or
  exact_model for the onnxruntime dialects), on many random networks, a few frames each (qonnx's
  executor runs a frame at a time);
- the emulated hardware (:meth:`Dataflow.emulate`) against streamc's executor, bit for bit at the
  hardware boundary, and with the host tail against the independent reference, on many;
- three networks compiled and simulated in Verilator, checked the same way, and their measured
  cycles per frame against the prediction.

A network streamc refuses with a one-line StreamcError is not a failure; hypothesis records the
reason as an event (``pytest --hypothesis-show-statistics``) and a fixed set of benchmark seeds
checks that refusals stay rare. A StreamcError that reports an internal inconsistency ("a streamc
bug") is a failure (:func:`fuzz_networks.refusal_reason`). ``benchmarks/bench_fuzz.py`` is the
long profile.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings

import fuzz_networks as fuzz
from fuzz_networks import ConvLayer, CnnSpec, DenseLayer, NetworkSpec, Quantizer, Weights
from streamc.errors import BuildError, LoweringError, StreamcError

def quick(examples: int) -> settings:
    # The same examples on every run: a CI verdict must not depend on the draw. Fresh random networks
    # are the benchmark's job (benchmarks/bench_fuzz.py --seed N).
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


#: Benchmark seeds simulated here: a 2-D CNN (through the build's sim step), then a float16 Tanh model
#: (checked against exact_model) and a two-layer MLP (against qonnx) sharing one Verilator build.
VERILATOR_SEED = 103
VERILATOR_BATCH_SEEDS = (100, 101)


@quick(25)
@given(fuzz.network_specs())
def test_reference_matches_the_independent_reference(spec):
    # Also the networks streamc refuses to compile: its executor runs them all.
    network = fuzz.build_network(spec, frames=fuzz.QONNX_FRAMES)
    event(f"reference: {network.reference}")
    fuzz.check_reference(network)


@quick(60)
@given(fuzz.network_specs())
def test_emulated_hardware_matches_reference(spec):
    network = fuzz.build_network(spec)
    try:
        compiled = fuzz.check_emulation(network)
    except StreamcError as error:
        event(f"refused: {fuzz.refusal_reason(error)}")
        return
    event(f"family: {spec.family}")
    assert compiled.dataflow.stages


def test_benchmark_seeds_compile_and_rarely_refuse():
    """The first benchmark seeds: every one emulates as its reference computes, or is refused clearly;
    few are refused."""
    refusals = collections.Counter()
    for seed in range(30):
        try:
            fuzz.check_emulation(fuzz.build_network(fuzz.spec_from_seed(seed)))
        except StreamcError as error:
            refusals[fuzz.refusal_reason(error)] += 1
    assert sum(refusals.values()) <= 3, refusals


def test_verilator_matches_reference(tmp_path):
    # The stall pattern the benchmark gives this case (its seed), as `bench_fuzz.py --replay 103` runs it.
    # Strided windows skip input rows; with some stall patterns the last frame's output completes before
    # those rows are taken, which the testbench reports as a failure (benchmark seed 9).
    network = fuzz.build_network(fuzz.spec_from_seed(VERILATOR_SEED))
    report = fuzz.check_verilator(network, tmp_path, seed=VERILATOR_SEED)
    assert report["mismatches"] == 0 and report["frames"] == fuzz.SIM_FRAMES


def test_networks_sharing_a_verilator_build_match_reference(tmp_path):
    networks = [fuzz.build_network(fuzz.spec_from_seed(seed)) for seed in VERILATOR_BATCH_SEEDS]
    reports = fuzz.check_verilator_batch(networks, tmp_path)
    assert [type(report) for report in reports] == [dict, dict], reports
    for report, network in zip(reports, networks):
        assert report["mismatches"] == 0 and report["frames"] == len(network.frames)


def test_an_internal_inconsistency_is_a_failure_not_a_refusal():
    # The message streamc.pipeline.steps.expected_hw_outputs gives when the hardware boundary is wrong.
    bug = BuildError("tensor 'x' of the reference is not an integer multiple of its scale; "
                     "the hardware boundary was derived wrongly (a streamc bug)")
    status, reason = fuzz.outcome(bug)
    assert status == "failed" and "a streamc bug" in reason
    with pytest.raises(fuzz.FuzzFailure):
        fuzz.refusal_reason(bug)
    refusal = LoweringError("node 'conv_3' (Conv): 3-D windows are not supported; 1-D and 2-D are")
    assert fuzz.outcome(refusal) == ("refused", "LoweringError: node '…' (Conv): N-D windows are not supported; "
                                                "N-D and N-D are")
    assert fuzz.outcome(LoweringError("two\nlines"))[0] == "failed"
    assert fuzz.outcome(ValueError("a crash"))[0] == "failed"


@pytest.mark.parametrize("seed", [VERILATOR_SEED, *VERILATOR_BATCH_SEEDS])
def test_a_wrong_output_is_caught_by_the_reference(seed):
    """The comparison with the independent reference fails on an output off by one quantizer step, in each
    network simulated above (both references; exact and inexact outputs)."""
    network = fuzz.build_network(fuzz.spec_from_seed(seed))
    _, outputs = fuzz.compile_network(network).dataflow.emulate(network.frames)
    fuzz.check_against_reference("emulated", network, outputs)
    wrong = outputs.copy()
    flat = wrong.reshape(len(wrong), -1)
    distinct = np.unique(flat[:, 0])
    # the nearest other value the first output takes over the frames: a quantizer step or more away
    step = np.diff(distinct).min() if len(distinct) > 1 else 1
    flat[-1, 0] += step
    with pytest.raises(fuzz.FuzzFailure, match=f"vs {network.reference}"):
        fuzz.check_against_reference("emulated", network, wrong)


def test_specs_are_reproducible_from_their_seed():
    assert fuzz.spec_from_seed(123) == fuzz.spec_from_seed(123)
    network, again = (fuzz.build_network(fuzz.spec_from_seed(123)) for _ in range(2))
    assert network.model.SerializeToString() == again.model.SerializeToString()
    assert np.array_equal(network.frames, again.frames)


def test_benchmark_seeds_cover_the_features():
    specs = [fuzz.spec_from_seed(seed) for seed in range(200)]
    cnns = [s.cnn for s in specs if s.cnn]
    convs = [c for cnn in cnns for c in cnn.convs]
    quantizers = [c.act for c in convs] + [d.act for cnn in cnns for d in cnn.dense if d.act]
    weights = [c.weights for c in convs] + [d.weights for cnn in cnns for d in cnn.dense]
    assert {s.family for s in specs} == {"mlp", "cnn", "dialect"}
    assert {s.dialect[0] for s in specs if s.dialect} == set(fuzz.DIALECTS)
    assert {len(cnn.in_shape) - 1 for cnn in cnns} == {1, 2}
    assert {q.bits for q in quantizers} == set(range(1, 9))
    assert {w.bits for w in weights} == set(range(1, 9))
    assert {q.rounding for q in quantizers} == set(fuzz.ROUNDING_MODES)
    assert {(q.signed, q.narrow) for q in quantizers} == {(True, True), (True, False), (False, False)}
    assert any(w.narrow for w in weights) and any(w.per_channel for w in weights)
    assert any(c.pool for c in convs) and any(c.batchnorm for c in convs)
    assert {c.bias for c in convs} == set(fuzz.CONV_BIAS_SPELLINGS)
    assert any(max(c.strides) == 2 for c in convs) and any(max(c.pads) > 0 for c in convs)
    mlps = [s.mlp for s in specs if s.mlp]
    assert {m.rounding_mode for m in mlps} == set(fuzz.ROUNDING_MODES)
    assert any(m.negative_bn and any(layer.batchnorm for layer in m.layers) for m in mlps)
    assert len({pick for s in specs for pick in s.folding}) > 100


#: The smallest network hypothesis found that lost a convolution's bias (streamline rebuilt the Conv from its
#: codes and weights only): a 1-D convolution (kernel 1) with the bias as the Conv's third input, into a bipolar
#: quantizer, then a dense layer.
CONV_BIAS_INPUT = NetworkSpec(family="cnn", cnn=CnnSpec(
    in_shape=(1, 3), input=Quantizer(bits=3, signed=False),
    convs=(ConvLayer(channels=1, kernel=(1,), strides=(1,), pads=(0, 0), weights=Weights(bits=1),
                     act=Quantizer(bits=1), bias="input"),),
    dense=(DenseLayer(features=1, weights=Weights(bits=1), act=None),)))


def test_conv_bias_input_is_kept():
    fuzz.check_emulation(fuzz.build_network(CONV_BIAS_INPUT))


def test_the_same_bias_as_an_add_is_kept():
    conv = dataclasses.replace(CONV_BIAS_INPUT.cnn.convs[0], bias="add")
    spec = dataclasses.replace(CONV_BIAS_INPUT, cnn=dataclasses.replace(CONV_BIAS_INPUT.cnn, convs=(conv,)))
    fuzz.check_emulation(fuzz.build_network(spec))
