"""Requantization: an integer multiply, add and shift that maps an accumulator to a narrow output.

This module is numpy only, so that the compiler can import :class:`Requant` and
:func:`requantize` without building hardware. :class:`~streamc.rtl.mvau.MatrixVectorUnit`
computes exactly :func:`requantize` in its requantization output stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["NEVER", "ROUNDING_MODES", "Requant", "requantize"]

#: How ``v / 2**shift`` becomes an integer: ``FLOOR`` rounds down, ``HALF_UP`` rounds to the
#: nearest with ties up (``floor(x + 1/2)``), ``HALF_EVEN`` to the nearest with ties to even,
#: ``HALF_ODD`` with ties to odd (what rounding half to even and then adding an odd zero point
#: gives, as QuantizeLinear does).
ROUNDING_MODES = ("FLOOR", "HALF_UP", "HALF_EVEN", "HALF_ODD")

# Beyond this magnitude int64 arithmetic could overflow; requantize then uses Python integers.
_INT64_SAFE = 1 << 62
#: A correction point no accumulator reaches: pads :attr:`Requant.raise_at` and ``lower_at``.
NEVER = 1 << 62


@dataclass(frozen=True, eq=False)
class Requant:
    """Per-channel requantization ``clamp(round((acc * multiplier + offset) / 2**shift), lo, hi)``.

    Equality is identity (``eq=False``): element-wise array equality has no single truth value.

    Parameters
    ----------
    multiplier : numpy.ndarray
        Integer array of shape ``(MH,)``, one factor per output channel; may be negative.
    offset : numpy.ndarray
        Integer array of shape ``(MH,)``, added before the shift (bias, zero point and any
        rounding offset folded together).
    shift : int
        Right shift, at least 0, the same for every channel.
    rounding : str
        One of :data:`ROUNDING_MODES`.
    lo, hi : int
        Inclusive clamp bounds of the output, ``lo <= hi``.
    raise_at, lower_at : numpy.ndarray or None
        Integer arrays of shape ``(MH, J)``: the output is one higher from each accumulator value
        in ``raise_at[c]`` on, one lower from each in ``lower_at[c]`` on. A float-scaled layer's
        exact step function is a requantization except at a few steps where float32 rounding
        falls on the other side: these put those steps back (none by default). Padding that
        never applies: :data:`NEVER`.
    """

    multiplier: np.ndarray
    offset: np.ndarray
    shift: int
    rounding: str
    lo: int
    hi: int
    raise_at: np.ndarray | None = None
    lower_at: np.ndarray | None = None

    def __post_init__(self):
        arrays = {}
        for what in ("multiplier", "offset"):
            value = np.asarray(getattr(self, what))
            if value.ndim != 1 or not (np.issubdtype(value.dtype, np.integer) or value.size == 0):
                raise ValueError(f"requant {what} must be a 1-D integer array, not {value.dtype} "
                                 f"of shape {value.shape}")
            arrays[what] = value.astype(np.int64)
        if arrays["multiplier"].shape != arrays["offset"].shape:
            raise ValueError(f"requant multiplier and offset must have the same shape, not "
                             f"{arrays['multiplier'].shape} and {arrays['offset'].shape}")
        if not isinstance(self.shift, (int, np.integer)) or self.shift < 0:
            raise ValueError(f"requant shift must be an integer >= 0, not {self.shift!r}")
        if self.rounding not in ROUNDING_MODES:
            raise ValueError(f"requant rounding must be one of {', '.join(ROUNDING_MODES)}, "
                             f"not {self.rounding!r}")
        if not (isinstance(self.lo, (int, np.integer)) and isinstance(self.hi, (int, np.integer))
                and self.lo <= self.hi):
            raise ValueError(f"requant clamp bounds must be integers with lo <= hi, not "
                             f"lo={self.lo!r}, hi={self.hi!r}")
        for what in ("raise_at", "lower_at"):
            value = getattr(self, what)
            value = np.full((len(arrays["multiplier"]), 0), NEVER) if value is None else np.asarray(value)
            if value.ndim != 2 or value.shape[0] != len(arrays["multiplier"]) or not (
                    np.issubdtype(value.dtype, np.integer) or value.size == 0):
                raise ValueError(f"requant {what} must be an integer array of shape (channels, J), "
                                 f"not {value.dtype} of shape {value.shape}")
            arrays[what] = value.astype(np.int64)
        for what, value in arrays.items():
            object.__setattr__(self, what, value)
        for what in ("shift", "lo", "hi"):
            object.__setattr__(self, what, int(getattr(self, what)))

    @property
    def channels(self) -> int:
        """Number of output channels (``MH``)."""
        return self.multiplier.shape[0]

    @property
    def corrections(self) -> int:
        """Correction points per channel, raising and lowering together."""
        return self.raise_at.shape[1] + self.lower_at.shape[1]

    @property
    def rounding_constant(self) -> int:
        """What to add before a flooring shift; ``HALF_EVEN`` then still needs its tie fix-up.

        ``HALF_UP`` is ``floor((v + 2**(shift-1)) / 2**shift)``. For ``HALF_EVEN``,
        ``u = v + 2**(shift-1) - 1`` floors to the nearest integer with ties down; a tie shows
        as ``u``'s low ``shift`` bits all ones, and is then rounded up where ``u >> shift`` is odd.
        """
        if self.shift == 0 or self.rounding == "FLOOR":
            return 0
        half = 1 << (self.shift - 1)
        return half if self.rounding == "HALF_UP" else half - 1  # HALF_EVEN and HALF_ODD fix ties up after


def requantize(acc: np.ndarray, requant: Requant) -> np.ndarray:
    """The output of a requantization stage for accumulator values ``acc`` (shape ``(..., MH)``).

    Exactly what the hardware computes, in integers: ``v = acc * multiplier + offset``, rounded
    from ``v / 2**shift`` as :attr:`Requant.rounding` says, clamped to ``[lo, hi]``, then raised
    and lowered by the corrections that ``acc`` reaches.

    Returns
    -------
    numpy.ndarray
        int64 array of the shape of ``acc``.
    """
    acc = np.asarray(acc)
    if acc.ndim < 1 or acc.shape[-1] != requant.channels:
        raise ValueError(f"acc must have shape (..., {requant.channels}), not {acc.shape}")
    if not np.issubdtype(acc.dtype, np.integer) and acc.size:
        raise ValueError(f"acc must be an integer array, not {acc.dtype}")
    if acc.size == 0:
        return np.zeros(acc.shape, dtype=np.int64)
    bound = (max(abs(int(acc.min())), abs(int(acc.max())))
             * int(np.abs(requant.multiplier).max()) + int(np.abs(requant.offset).max())
             + (1 << requant.shift))
    # Python integers where int64 could overflow: slower, never wrong.
    kind = np.int64 if bound < _INT64_SAFE else object
    v = (acc.astype(kind) * requant.multiplier.astype(kind) + requant.offset.astype(kind)
         + requant.rounding_constant)
    q = v >> requant.shift
    if requant.rounding in ("HALF_EVEN", "HALF_ODD") and requant.shift > 0:
        low_mask = (1 << requant.shift) - 1
        tie = (v & low_mask) == low_mask
        q = q + (tie & ((q & 1) == (1 if requant.rounding == "HALF_EVEN" else 0)))
    out = np.clip(q, requant.lo, requant.hi).astype(np.int64)
    if requant.corrections:
        acc = acc.astype(np.int64)[..., None]
        out += (acc >= requant.raise_at).sum(axis=-1) - (acc >= requant.lower_at).sum(axis=-1)
    return out
