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

A float-scaled layer (8-bit Brevitas or onnxruntime exports) has no such requantization: float32
rounding puts a few of its 255 steps one accumulator value off the line. :func:`fit_corrected`
then takes the requantization that places the most steps right and puts the others back with
correction points (:attr:`~streamc.rtl.requant.Requant.raise_at`), a compare each instead of 255.
"""

from __future__ import annotations

import numpy as np

from .rtl.requant import NEVER, Requant, requantize

MAX_SHIFT = 30
ROUNDINGS = ("FLOOR", "HALF_EVEN", "HALF_ODD")
#: Shifts a corrected requantization may take: float steps need a multiplier of the range's precision.
MAX_CORRECTED_SHIFT = 40
#: Multipliers tried on each side of a channel's least-squares slope (at most).
MAX_WINDOW = 64


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


def fit_corrected(thresholds: np.ndarray, lo: np.ndarray, hi: np.ndarray, out_bias: int,
                  max_corrections: int) -> Requant | None:
    """A FLOOR requantization plus at most ``max_corrections`` correction points per channel equal
    to ``thresholds`` on ``[lo, hi]``, the fewest found over the shifts tried; None if none has so few.

    Each channel's multiplier is searched near its least-squares slope, its offset is the one
    that places the most steps right (the most stabbed of the levels' offset intervals), and every
    step still off gets a point. The result is checked equal at every step of either function.
    """
    thresholds = np.clip(thresholds.astype(np.int64), lo[:, None], hi[:, None] + 1)
    levels = thresholds.shape[1]
    slopes = [_slope(thresholds[c], int(lo[c]), int(hi[c])) for c in range(len(thresholds))]
    steepest = max((slope[0] for slope in slopes if slope), default=1.0)
    # A multiplier rounded by 1/2 moves the last step by slope * levels / 2 acc values times the
    # multiplier's own 2**shift / slope: under about one multiplier from this shift on.
    first = int(np.clip(np.ceil(np.log2(steepest * steepest * levels)), 0, MAX_CORRECTED_SHIFT))
    best, worse, fits = None, 0, None
    # A channel's fit at one shift is one at the next with its multiplier and offset doubled, the
    # same function: each channel keeps the better of that and a new search, so its corrections
    # never grow, and a channel with none is not searched again. Stop after two shifts without gain.
    for shift in range(max(0, first - 2), MAX_CORRECTED_SHIFT + 1):
        searched = []
        for c in range(len(thresholds)):
            lifted = None if fits is None else (2 * fits[c][0], 2 * fits[c][1], *fits[c][2:])
            found = None
            if lifted is None or lifted[2] or lifted[3]:
                found = _fit_channel(thresholds[c], int(lo[c]), int(hi[c]), out_bias, shift, slopes[c])
            if found is None or (lifted is not None and _size(found) >= _size(lifted)):
                found = lifted
            if found is None or abs(found[0]) * max(abs(int(lo[c])), abs(int(hi[c])) + 1) >= 1 << 61:
                break
            searched.append(found)
        if len(searched) < len(thresholds):
            break  # past exact int64 arithmetic
        fits = searched
        worst = max(map(_size, fits))
        if best is None or worst < best[0]:
            best, worse = (worst, shift, fits), 0
        else:
            worse += 1
        if worst == 0 or worse == 2:
            break
    if best is None or best[0] > max_corrections:
        return None
    _, shift, fits = best
    width_up = max(len(up) for _, _, up, _ in fits)
    width_down = max(len(down) for _, _, _, down in fits)
    requant = Requant(multiplier=np.array([m for m, _, _, _ in fits], np.int64),
                      offset=np.array([b for _, b, _, _ in fits], np.int64), shift=shift, rounding="FLOOR",
                      lo=out_bias, hi=out_bias + levels,
                      raise_at=np.array([up + [NEVER] * (width_up - len(up)) for _, _, up, _ in fits],
                                        np.int64).reshape(len(fits), width_up),
                      lower_at=np.array([down + [NEVER] * (width_down - len(down)) for _, _, _, down in fits],
                                        np.int64).reshape(len(fits), width_down))
    return requant if _equal_at_steps(requant, thresholds, lo, hi, out_bias) else None


def _slope(thresholds: np.ndarray, lo: int, hi: int) -> tuple[float, float] | None:
    """Accumulator values per level, least squares over the steps inside the range, and its standard
    error (None: under three steps inside)."""
    inside = np.flatnonzero((thresholds > lo) & (thresholds <= hi))
    if len(inside) < 3:
        return None
    (slope, _), residual = np.polyfit(inside, thresholds[inside], 1, full=True)[:2]
    if slope <= 0:
        return None
    spread = float(((inside - inside.mean()) ** 2).sum())
    error = np.sqrt(float(residual[0]) / (len(inside) - 2) / spread) if len(residual) else 0.0
    return float(slope), float(error)


def _fit_channel(t, lo, hi, out_bias, shift, slope) -> tuple[int, int, list[int], list[int]] | None:
    """Multiplier, offset and correction points of one channel at ``shift``; ``slope`` as :func:`_slope`
    gives. None where the products would pass int64."""
    reach = (out_bias + 1 + np.arange(len(t), dtype=np.int64)) << shift
    if slope is None:
        candidates = np.array([0], np.int64)
    else:  # four standard errors of the slope each side
        center = (1 << shift) / slope[0]
        window = int(min(MAX_WINDOW, max(2, np.ceil(4 * center * slope[1] / slope[0]))))
        candidates = np.arange(max(0, int(center) - window), int(center) + window + 2, dtype=np.int64)
    if max(abs(lo), abs(hi) + 1) * (int(candidates[-1]) + 1) + int(reach[-1]) + abs(int(reach[0])) >= 1 << 61:
        return None
    always, never = t <= lo, t > hi
    multiplier = candidates[:, None]
    # Level k is placed right for offsets in [low, high]; a level never reached has no low end,
    # one always reached no high end. Each row: the offset in the most intervals.
    low = reach - np.where(always, lo, t) * multiplier
    high = reach - 1 - np.where(never, hi, t - 1) * multiplier
    base = np.minimum(low.min(axis=1), high.min(axis=1))[:, None] - 1
    top = np.maximum(low.max(axis=1), high.max(axis=1))[:, None] + 1
    low = np.where(never, 0, low - base)
    high = np.where(always, top - base, high - base)
    rows = np.arange(len(candidates))[:, None] * (int((top - base).max()) + 1)
    low_sorted, high_sorted = np.sort(low, axis=1) + rows, np.sort(high, axis=1) + rows
    stabbed = (np.searchsorted(low_sorted.ravel(), low_sorted.ravel(), side="right")
               - np.searchsorted(high_sorted.ravel(), low_sorted.ravel(), side="left")).reshape(low.shape)
    best = np.argmax(stabbed, axis=1)
    offsets = np.take_along_axis(low_sorted - rows, best[:, None], axis=1)[:, 0] + base[:, 0]
    offsets = np.where(np.take_along_axis(low_sorted - rows, best[:, None], axis=1)[:, 0] == 0,
                       (high_sorted - rows)[:, 0] + base[:, 0], offsets)
    placed = stabbed[np.arange(len(candidates)), best]
    row = int(np.argmax(placed))
    m, b = int(candidates[row]), int(offsets[row])
    return (m, b, *_corrections(t, lo, hi, reach, m, b))


def _corrections(t, lo, hi, reach, multiplier, offset) -> tuple[list[int], list[int]]:
    """Where the requantization's steps and the thresholds differ: raise at the threshold, lower at
    the requantization's step; points past ``hi`` never apply, and a raise and a lower at the same
    point cancel."""
    steps = _steps(reach, multiplier, offset, lo, hi)
    off = steps != t
    up = sorted(int(p) for p in t[off] if p <= hi)
    down = sorted(int(p) for p in steps[off] if p <= hi)
    for point in set(up) & set(down):
        shared = min(up.count(point), down.count(point))
        for _ in range(shared):
            up.remove(point)
            down.remove(point)
    return up, down


def _size(fit: tuple) -> int:
    """Correction points of a channel's fit (:func:`_fit_channel`)."""
    return len(fit[2]) + len(fit[3])


def _steps(reach: np.ndarray, multiplier: int, offset: int, lo: int, hi: int) -> np.ndarray:
    """The least accumulator in ``[lo, hi]`` at which ``acc * multiplier + offset`` reaches each of
    ``reach`` (``hi + 1``: none)."""
    if multiplier:
        return np.clip(-((offset - reach) // multiplier), lo, hi + 1)
    return np.where(offset >= reach, lo, hi + 1)


def _equal_at_steps(requant: Requant, thresholds, lo, hi, out_bias) -> bool:
    """Both are step functions of the accumulator: equal at the start of every step of either, and at
    ``lo``, they are equal on the whole range."""
    reach = (out_bias + 1 + np.arange(thresholds.shape[1], dtype=np.int64)) << requant.shift
    columns = []
    for c in range(len(thresholds)):
        steps = _steps(reach, int(requant.multiplier[c]), int(requant.offset[c]), int(lo[c]), int(hi[c]))
        points = np.concatenate([[lo[c]], thresholds[c], steps, requant.raise_at[c], requant.lower_at[c]])
        columns.append(np.unique(points[(points >= lo[c]) & (points <= hi[c])]))
    # One column of points per channel, the shorter ones repeating their last point.
    length = max(len(column) for column in columns)
    points = np.stack([np.pad(column, (0, length - len(column)), mode="edge") for column in columns], axis=1)
    expected = out_bias + (points[:, :, None] >= thresholds[None]).sum(axis=2)
    return np.array_equal(requantize(points, requant), expected)
