"""Requantization with correction points: the exact step function of a float-scaled 8-bit layer.

A float32 chain ``round(acc * scale + bias)`` is a requantization except where float32 rounding
lands a step one accumulator value off the line; :func:`fit_corrected` puts those steps back with
correction points. Checked here against the float32 chain itself on every accumulator value, and
in the MatrixVectorUnit's simulation under stalls.
"""

from __future__ import annotations

import numpy as np
import pytest

from rtl_helpers import pack, run_stream, unpack
from streamc.datatypes import INT, UINT
from streamc.requant_fit import fit_corrected, fit_requant
from streamc.resources import MVAUSpec
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.requant import NEVER, Requant, requantize


def float32_codes(acc: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: float = 0.0) -> np.ndarray:
    """What an 8-bit QuantizeLinear after float ops gives: ``acc * scale + mean``, then ``- mean +
    bias`` (as a BatchNorm centres a large value), each op rounded to float32, ties to even,
    saturated to [0, 255]."""
    y = acc.astype(np.float32) * scale.astype(np.float32)
    y = (y + np.float32(mean)).astype(np.float32)
    y = (y + (bias - np.float32(mean)).astype(np.float32)).astype(np.float32)
    return np.clip(np.rint(y), 0, 255).astype(np.int64)


def thresholds_of(codes_of, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per channel and level 1..255, the least accumulator value reaching it (hi + 1 if none),
    read off every accumulator value of the range."""
    thresholds = np.empty((len(lo), 255), np.int64)
    for c in range(len(lo)):
        acc = np.arange(lo[c], hi[c] + 1)
        codes = codes_of(acc, c)
        for level in range(1, 256):
            reached = np.flatnonzero(codes >= level)
            thresholds[c, level - 1] = acc[reached[0]] if len(reached) else hi[c] + 1
    return thresholds


@pytest.fixture(scope="module")
def float_layer():
    """Eight channels of a wide accumulator range with random float32 scales and biases."""
    rng = np.random.default_rng(7)
    lo, hi = np.full(8, -200_000), np.full(8, 400_000)
    scale = (255 / rng.uniform(100_000, 400_000, size=8)).astype(np.float32)
    bias = rng.uniform(-20, 60, size=8).astype(np.float32)

    def codes_of(acc, c):
        return float32_codes(acc, scale[c:c + 1], bias[c:c + 1])

    return codes_of, thresholds_of(codes_of, lo, hi), lo, hi


def test_float32_steps_have_no_exact_requantization_but_a_corrected_one(float_layer):
    codes_of, thresholds, lo, hi = float_layer
    assert fit_requant(thresholds, lo, hi, 0) is None
    requant = fit_corrected(thresholds, lo, hi, 0, max_corrections=16)
    assert requant is not None and 0 < requant.corrections <= 16
    # Every accumulator value of every channel, against the float32 chain itself.
    for c in range(len(lo)):
        acc = np.arange(lo[c], hi[c] + 1)
        one = Requant(multiplier=requant.multiplier[c:c + 1], offset=requant.offset[c:c + 1],
                      shift=requant.shift, rounding=requant.rounding, lo=requant.lo, hi=requant.hi,
                      raise_at=requant.raise_at[c:c + 1], lower_at=requant.lower_at[c:c + 1])
        np.testing.assert_array_equal(requantize(acc[:, None], one)[:, 0], codes_of(acc, c))


def test_too_many_corrections_are_refused(float_layer):
    _, thresholds, lo, hi = float_layer
    assert fit_corrected(thresholds, lo, hi, 0, max_corrections=0) is None


def test_thresholds_off_any_line_get_no_corrected_requantization():
    """Steps placed at random are monotonic but no line: no few corrections make them one."""
    rng = np.random.default_rng(3)
    lo, hi = np.full(2, 0), np.full(2, 100_000)
    thresholds = np.sort(rng.choice(np.arange(1, 100_000), size=(2, 255)), axis=1)
    assert fit_corrected(thresholds, lo, hi, 0, max_corrections=16) is None


def test_requantize_applies_raising_and_lowering_points():
    requant = Requant(multiplier=np.array([1]), offset=np.array([0]), shift=0, rounding="FLOOR", lo=0, hi=10,
                      raise_at=np.array([[3, NEVER]]), lower_at=np.array([[5]]))
    assert requantize(np.arange(8)[:, None], requant)[:, 0].tolist() == [0, 1, 2, 4, 5, 5, 6, 7]


def steering_vectors(weights, targets) -> np.ndarray:
    """An input vector per ``(channel, accumulator)`` target, for weights ``[R | I]``: the coarse
    inputs greedily (largest weight first) and the channel's own identity column the rest exactly."""
    channels = weights.shape[0]
    vectors = []
    for c, acc in targets:
        x = np.zeros(2 * channels, np.int64)
        rest = acc
        for j in np.argsort(-np.abs(weights[c, :channels])):
            if weights[c, j]:
                x[j] = np.clip(round(rest / weights[c, j]), -128, 127)
                rest -= weights[c, j] * x[j]
        assert -128 <= rest <= 127, (c, acc)
        x[channels + c] = rest
        vectors.append(x)
    return np.array(vectors)


@pytest.mark.parametrize("pe,simd,pipelining", [(1, 4, {}), (2, 1, {}), (4, 2, {}),
                                                (4, 2, dict(operand_register=True, tree_every=1)),
                                                (1, 8, dict(operand_register=True, route_register=True)),
                                                (4, 2, dict(operand_register=True, route_register=True,
                                                            tree_every=1))])
def test_mvau_with_corrections_matches_float32_under_stalls(pe, simd, pipelining):
    """A 4x8 INT8 layer whose output stage is a corrected requantization of float32 steps, driven
    onto every correction point and the value below it."""
    rng = np.random.default_rng(pe * 10 + simd)
    weights = np.concatenate([rng.integers(-128, 128, size=(4, 4)), np.eye(4, dtype=np.int64)], axis=1)
    positive, negative = np.clip(weights, 0, None).sum(axis=1), np.clip(weights, None, 0).sum(axis=1)
    acc_lo, acc_hi = positive * -128 + negative * 127, positive * 127 + negative * -128
    scale = (255 / (acc_hi - acc_lo) * rng.uniform(1.0, 1.2, size=4)).astype(np.float32)
    bias = (-acc_lo * scale - rng.uniform(0, 20, size=4)).astype(np.float32)

    def codes_of(acc, c):
        # A large mean: float32 rounds the centred value to ~1/8000, a sixteenth of an accumulator step.
        return float32_codes(acc, scale[c:c + 1], bias[c:c + 1], mean=1024.0)

    thresholds = thresholds_of(codes_of, acc_lo, acc_hi)
    requant = fit_corrected(thresholds, acc_lo, acc_hi, 0, max_corrections=32)
    assert requant is not None and requant.corrections
    dut = MatrixVectorUnit(weights=weights, in_dtype=INT(8), weight_dtype=INT(8), pe=pe, simd=simd,
                           thresholds=None, out_dtype=UINT(8), requant=requant, name="fc", **pipelining)
    points = np.concatenate([requant.raise_at, requant.lower_at], axis=1)
    targets = [(c, int(p) + d) for c in range(4) for p in points[c] if p != NEVER for d in (-1, 0)]
    vectors = np.concatenate([steering_vectors(weights, targets), rng.integers(-128, 128, size=(8, 8))])
    frames = len(vectors)
    run = run_stream(dut, pack(vectors, INT(8), simd), frames * 4 // pe, in_gap=0.3, out_stall=0.4, seed=pe)
    got = unpack(run.beats, UINT(8), pe).reshape(frames, 4)
    acc = vectors @ weights.T
    expected = np.stack([codes_of(acc[:, c], c) for c in range(4)], axis=1)
    np.testing.assert_array_equal(got, expected)
    # The corrections decide: the rounding alone is wrong on some of these inputs.
    plain = Requant(multiplier=requant.multiplier, offset=requant.offset, shift=requant.shift,
                    rounding=requant.rounding, lo=requant.lo, hi=requant.hi)
    assert (requantize(acc, plain) != expected).any()
    assert MVAUSpec.of_unit(dut).rq_corrections == requant.corrections
