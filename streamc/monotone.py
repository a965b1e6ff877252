"""The least integer at which a monotonic test turns true, for many tests at once: a vectorized bisection."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def least_reaching(reached: Callable[[np.ndarray], np.ndarray], low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """For each element, the least integer ``x`` in ``low..high`` with ``reached(x)``, where ``reached`` is
    monotonic (false below some point, true from it on) and taken as true at ``high`` without asking: ``high``
    is the answer where nothing below it reaches. ``reached`` gets an int64 array shaped like ``low`` and answers
    elementwise; it is asked about every element at each of the about log2(high - low) steps."""
    low = np.array(low, np.int64)
    high = np.array(np.broadcast_to(high, low.shape), np.int64)
    while (open_ := low < high).any():
        mid = (low + high) // 2
        yes = reached(mid)
        high = np.where(yes & open_, mid, high)
        low = np.where(~yes & open_, mid + 1, low)
    return low
