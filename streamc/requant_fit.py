"""Find a multiply-add-shift requantization equal to a layer's thresholds, or show there is none.

A layer's exact output function is its thresholds: ``out = out_bias + #{k : acc >= T[c, k]}`` over
the reachable accumulator range ``[lo_c, hi_c]``. A requantization ``g(acc) = clamp(round((acc * M +
B) / 2**s), out_bias, out_bias + L)`` with ``M >= 0`` is monotonic too, so the two are equal on the
range exactly when every level ``v`` is first reached at the same accumulator: ``g(T) >= v`` and
``g(T - 1) < v`` for a threshold inside the range, ``g(lo) >= v`` for a level always reached,
``g(hi) < v`` for one never reached. With ``u = acc * M + B`` each of these reads ``u >= reach`` or
``u <= miss`` at one accumulator value, a half-plane in ``(M, B)``: every pair of a lower and an
upper bound on ``B`` bounds ``M``, and the system is solvable exactly when the resulting ``M``
interval is not empty. The answer is therefore a proof, not a sample. A solution at shift ``s``
doubles into one at ``s + 1``, so the smallest feasible shift is found by bisection.
"""

from __future__ import annotations

import numpy as np

from .rtl.requant import Requant

MAX_SHIFT = 30
ROUNDINGS = ("FLOOR", "HALF_EVEN", "HALF_ODD")


def fit_requant(thresholds: np.ndarray, lo: np.ndarray, hi: np.ndarray, out_bias: int) -> Requant | None:
    """The requantization with the smallest shift equal to ``thresholds`` on ``[lo, hi]``, or None."""
    best = None
    for rounding in ROUNDINGS:
        if _solve(thresholds, lo, hi, out_bias, MAX_SHIFT, rounding) is None:
            continue
        low, high = 0, MAX_SHIFT  # feasible at high, bisect down to the least feasible shift
        while low < high:
            mid = (low + high) // 2
            if _solve(thresholds, lo, hi, out_bias, mid, rounding) is None:
                low = mid + 1
            else:
                high = mid
        if best is None or high < best.shift:
            multiplier, offset = _solve(thresholds, lo, hi, out_bias, high, rounding)
            best = Requant(multiplier=multiplier, offset=offset, shift=high, rounding=rounding,
                           lo=out_bias, hi=out_bias + thresholds.shape[1])
    return best


def _solve(thresholds, lo, hi, out_bias, shift, rounding) -> tuple[np.ndarray, np.ndarray] | None:
    levels = (out_bias + 1 + np.arange(thresholds.shape[1])).astype(np.int64)
    if rounding == "FLOOR":
        reach = levels << shift
        miss = reach - 1
    elif shift == 0:
        return None
    else:  # nearest: v is reached above (2v - 1) / 2, and at it when v has the parity ties go to
        half = (2 * levels - 1) << (shift - 1)
        at_tie = ((levels & 1) == (0 if rounding == "HALF_EVEN" else 1)).astype(np.int64)
        reach, miss = half + 1 - at_tie, half - at_tie
    multipliers, offsets = [], []
    for c in range(thresholds.shape[0]):
        solution = _solve_channel(thresholds[c], int(lo[c]), int(hi[c]), reach, miss)
        if solution is None:
            return None
        multipliers.append(solution[0])
        offsets.append(solution[1])
    return np.array(multipliers, np.int64), np.array(offsets, np.int64)


def _solve_channel(thresholds, lo, hi, reach, miss) -> tuple[int, int] | None:
    t = np.clip(thresholds, lo, hi + 1)
    always, never = t <= lo, t > hi
    # Lower bounds B >= reach - a*M, upper bounds B <= miss - b*M.
    a, r = np.where(always, lo, t)[~never], reach[~never]
    b, m = np.where(never, hi, t - 1)[~always], miss[~always]
    if max(abs(lo), abs(hi) + 1) * (int(np.abs(reach).max()) + 1) >= 1 << 62:
        return None  # beyond exact int64 arithmetic; a smaller shift has been tried first
    diff = b[None, :] - a[:, None]            # M * diff <= m_j - r_i for every pair
    room = m[None, :] - r[:, None]
    if np.any((diff == 0) & (room < 0)):
        return None
    m_low = max(0, int((-((-room[diff < 0]) // diff[diff < 0])).max(initial=0)))
    m_high = int((room[diff > 0] // diff[diff > 0]).min(initial=np.iinfo(np.int64).max))
    if m_low > m_high:
        return None
    multiplier = m_low
    if len(a):
        offset = int((r - a * multiplier).max())
    else:
        offset = int((m - b * multiplier).min())
    return multiplier, offset
