"""The stages' emulation arithmetic against its plain numpy definition: threshold counts by search, integer
products through float64."""

from __future__ import annotations

import numpy as np
import pytest

from streamc.stages.base import activate, integer_matmul
from streamc.datatypes import UINT


@pytest.mark.parametrize("seed", range(20))
def test_sorted_thresholds_are_counted_as_every_compare_counts_them(seed):
    rng = np.random.default_rng(seed)
    channels, levels, frames = (int(n) for n in rng.integers(1, 40, size=3))
    thresholds = np.sort(rng.integers(-300, 300, size=(channels, levels)), axis=1)
    acc = rng.integers(-400, 400, size=(frames, channels))
    # Ties on the thresholds themselves, and values past both ends.
    acc[0] = thresholds[:, rng.integers(levels)]
    expected = (acc[:, :, None] >= thresholds[None]).sum(axis=2) + 3
    np.testing.assert_array_equal(activate(acc, thresholds, None, UINT(8), 3), expected)


def test_unsorted_thresholds_are_compared_one_by_one():
    thresholds = np.array([[5, -5, 0]])
    acc = np.array([[-6], [-5], [0], [4], [5]])
    np.testing.assert_array_equal(activate(acc, thresholds, None, UINT(2), 0), [[0], [1], [2], [2], [3]])


@pytest.mark.parametrize("bits", [4, 12, 26, 40])
def test_integer_products_are_exact_whether_or_not_a_float_holds_them(bits):
    # 4 bits: float32; 12 bits: past 2**24, float64; 2**26 * 2**20 * 64 terms passes 2**53: int64.
    rng = np.random.default_rng(bits)
    a = rng.integers(-(1 << bits), 1 << bits, size=(16, 64))
    b = rng.integers(-(1 << min(bits, 20)), 1 << min(bits, 20), size=(64, 8))
    np.testing.assert_array_equal(integer_matmul(a, b), a @ b)
