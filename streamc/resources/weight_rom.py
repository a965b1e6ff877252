"""What an MVAU's weight ROM layout decides, for every SIMD of one PE, from the weights read once.

ROM word ``n * SF + s`` holds weight ``(n * PE + j, s * SIMD + k)`` in field ``j * SIMD + k``: a field's
weights over the words are those of the rows ``j`` modulo PE and the columns ``k`` modulo SIMD. So every
question about the fields over the words (which bits vary, which lanes are ever non-zero, which lanes or bit
columns are equal) is answered by reducing the rows once per PE (``(MH, MW)`` to ``(PE, MW)``) and the
columns once per SIMD (``(PE, MW)`` to ``(PE, SIMD)``, from a multiple of it already reduced): the planner asks
for every SIMD of every PE, and all of a PE's SIMDs then cost a few passes over ``(PE, MW)``, not one over
``(MH, MW)`` each.

Equal fields are told apart by a hash linear in the weights over the words, ``sum(u[n] v[s] w[n, s])``
modulo 2**64 with random ``u`` and ``v``: equal fields hash equally, exactly, and two different ones
collide with a probability of about 2**-59.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .memories import differing_bits


class WeightRomColumns:
    """The weight ROM's column analysis of one layer at one PE, for any SIMD.

    Parameters
    ----------
    weights : numpy.ndarray
        The ``(MH, MW)`` integer weights.
    stored : numpy.ndarray
        The same as the ROM stores them: non-negative ``bits``-wide fields.
    pe : int
    bits : int
        The width of a stored weight.
    distinct : bool
        Whether to work out the equal lanes and the live bit columns (only worth it where the ROM may be
        logic: :data:`~.memories.LIVE_BITS_LIMIT`).
    """

    def __init__(self, weights: np.ndarray, stored: np.ndarray, pe: int, bits: int, distinct: bool):
        mh, mw = weights.shape
        nf = mh // pe
        self._pe, self._mw, self._bits, self._distinct = pe, mw, bits, distinct
        rows = stored.reshape(nf, pe, mw)
        # Per SIMD (a count of column classes): the AND and the OR of each field's weights and whether one is
        # not 0, column class k of a SIMD the union of the classes k + i * SIMD of any multiple of it.
        self._reduced = {mw: (np.bitwise_and.reduce(rows, axis=0), np.bitwise_or.reduce(rows, axis=0),
                              np.logical_or.reduce((weights != 0).reshape(nf, pe, mw), axis=0))}
        if distinct:
            u = _direction(nf, "rows")
            # Each lane's weights and each bit column, hashed over the neuron folds.
            self._lane_hash = np.einsum("n,njc->jc", u, weights.astype(np.uint64).reshape(nf, pe, mw))
            planes = (stored.astype(np.uint64)[None] >> np.arange(bits, dtype=np.uint64)[:, None, None]) & np.uint64(1)
            self._bit_hash = np.einsum("n,bnjc->bjc", u, planes.reshape(bits, nf, pe, mw))

    def at(self, simd: int) -> dict[str, int]:
        """``weight_rom_varying`` and ``live_lanes`` of :class:`~.mvau.MVAUSpec`, and with ``distinct``
        ``distinct_lanes`` and ``weight_rom_live``."""
        pe, sf = self._pe, self._mw // simd
        same, any_set, live = self._classes(simd)
        fields = {"weight_rom_varying": differing_bits(same, any_set, self._bits), "live_lanes": int(live.sum())}
        if not self._distinct:
            return fields
        v = _direction(sf, "columns")
        lanes = np.einsum("s,jsk->jk", v, self._lane_hash.reshape(pe, sf, simd))
        # Equal live lanes at the same SIMD position: the distinct hashes of each position's lanes, sorted (a plain
        # sort of 64-bit integers: a fifth of a lexsort of (position, hash) pairs), less the one of its lanes that
        # are never set, which hash to 0 (so does a live lane with a probability of about 2**-59).
        hashes = np.where(live, lanes, 0).T
        hashes.sort(axis=1)
        fields["distinct_lanes"] = _distinct_sorted(hashes) - int((~live).any(axis=0).sum())
        columns = np.einsum("s,bjsk->bjk", v, self._bit_hash.reshape(self._bits, pe, sf, simd))
        varying = ((same ^ any_set).astype(np.uint64)[None] >> np.arange(self._bits, dtype=np.uint64)[:, None, None]) & 1
        fields["weight_rom_live"] = _distinct_sorted(np.sort(columns[varying.astype(bool)])[None])
        return fields

    def _classes(self, simd: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The fields' AND, OR and whether one is not 0 at ``simd``, ``(PE, SIMD)`` each: from the least multiple of
        ``simd`` already reduced, one prime factor of the step at a time (each kept), so that the SIMDs a planner
        asks for cost a few reductions of ``(PE, MW)`` in all, not one each."""
        if simd not in self._reduced:
            multiple = min(m for m in self._reduced if m % simd == 0)
            step = multiple // simd
            factor = next(p for p in range(2, step + 1) if step % p == 0)
            arrays = self._classes(simd * factor)
            self._reduced[simd] = tuple(ufunc.reduce(array.reshape(self._pe, factor, simd), axis=1) for ufunc, array
                                        in zip((np.bitwise_and, np.bitwise_or, np.logical_or), arrays))
        return self._reduced[simd]


def _distinct_sorted(rows: np.ndarray) -> int:
    """The distinct values of each of ``rows`` (sorted), summed over the rows."""
    return int(rows.shape[0] * (rows.shape[1] > 0) + (rows[:, 1:] != rows[:, :-1]).sum())


@cache
def _direction(length: int, axis: str) -> np.ndarray:
    """Random 64-bit factors of the hash along the words' neuron folds (``axis="rows"``) or synapse folds:
    the same for every folding of that many folds, made once."""
    seed = {"rows": 0, "columns": 1}[axis]
    direction = np.random.default_rng(seed).integers(0, 2**64, size=length, dtype=np.uint64, endpoint=False)
    direction.flags.writeable = False
    return direction
