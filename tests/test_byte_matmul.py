"""Byte-sized integer products in onnxruntime (streamc.stages.byte_matmul) against numpy's int64 products."""

import numpy as np
import pytest

from streamc.stages.base import integer_matmul
from streamc.stages.byte_matmul import PAIR_LIMIT, byte_matmul


@pytest.mark.parametrize("dtype, low, high", [(np.int8, -128, 127), (np.int16, -128, 127), (np.int16, 0, 255),
                                              (np.int8, -1, 1), (np.int64, 0, 3)])
@pytest.mark.parametrize("largest", [1, 2, 64, 127])
def test_products_equal_numpy_int64(dtype, low, high, largest):
    rng = np.random.default_rng(largest * 1000 + high)
    for k, n, m in ((1, 1, 1), (7, 3, 5), (300, 64, 40), (784, 10, 17)):
        a = rng.integers(low, high, (m, k), endpoint=True).astype(dtype)
        a[0] = high                     # the extremes, in adjacent pairs
        b = rng.integers(-largest, largest, (n, k), endpoint=True).T
        b[:, 0] = largest
        assert np.array_equal(integer_matmul(a, b), a.astype(np.int64) @ b)


def test_within_the_pair_limit_onnxruntime_computes_it():
    a = np.full((4, 64), 255, np.int16)
    b = np.full((64, 3), 64, np.int64)            # 2 * 255 * 64 = 32,640: within int16
    assert 2 * 255 * 64 <= PAIR_LIMIT
    product = byte_matmul(a, b, 255, 255)
    assert product is not None and (product == 255 * 64 * 64).all()


@pytest.mark.parametrize("weight", [65, -128])
def test_past_the_pair_limit_it_declines(weight):
    # onnxruntime's non-VNNI kernels would saturate each pair of 255 x weight to 32,767
    a = np.full((4, 64), 255, np.int16)
    b = np.full((64, 3), weight, np.int64)
    assert byte_matmul(a, b, 255, 255) is None
    assert np.array_equal(integer_matmul(a, b), a.astype(np.int64) @ b)


def test_codes_or_weights_past_a_byte_decline():
    b = np.ones((8, 2), np.int64)
    assert byte_matmul(np.full((2, 8), 256, np.int16), b, 256, 256) is None
    assert byte_matmul(np.full((2, 8), -129, np.int16), b, -129, -129) is None
    assert byte_matmul(np.ones((2, 8), np.int8), b * 200, 1, 1) is None
