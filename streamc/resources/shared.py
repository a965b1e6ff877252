"""What the resource models of every kernel share: device families, estimates, the spec base class and the
widths Amaranth gives signals."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from ..datatypes import DataType

FAMILIES = ("ice40", "ecp5", "gowin")


def family_of(device: str) -> str:
    """The family (``"ice40"``, ``"ecp5"`` or ``"gowin"``) of a device name such as ``"ice40-up5k"``."""
    family = device.split("-", 1)[0]
    if family not in FAMILIES:
        raise ValueError(f"device must be an iCE40, ECP5 or Gowin device (ice40-*, ecp5-*, gowin-*), not {device!r}")
    return family


def reduce_axes(ufunc: np.ufunc, array: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``ufunc.reduce(array, axis=axes)`` one axis at a time, the outermost first: numpy reduces several axes at
    once element by element, which on a ROM's words with few fields per word (an MVAU's SIMD) is up to twenty
    times slower."""
    for done, axis in enumerate(sorted(axes)):
        array = ufunc.reduce(array, axis=axis - done)
    return array


def bits_of_range(lo: int, hi: int) -> tuple[int, bool]:
    """Width and signedness of the narrowest shape holding ``[lo, hi]`` (as the RTL computes it)."""
    if lo >= 0:
        return max(int(hi).bit_length(), 1), False
    return max((-int(lo) - 1).bit_length(), int(hi).bit_length()) + 1, True


def accumulator_range(weights: np.ndarray, in_dtype: DataType) -> tuple[int, int]:
    """Least and greatest complete dot product of ``weights`` rows with ``in_dtype`` vectors."""
    w = np.asarray(weights, dtype=np.int64)
    lo = np.minimum(w * in_dtype.min, w * in_dtype.max).sum(axis=1)
    hi = np.maximum(w * in_dtype.min, w * in_dtype.max).sum(axis=1)
    return int(lo.min()), int(hi.max())


class KernelSpec:
    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ResourceEstimate:
    """Resources of one kernel or a whole design.

    ``lut`` counts 4-input LUTs as :func:`streamc.synth.synthesize` does (an ECP5 carry cell as
    two); ``lutram`` counts ECP5 ``TRELLIS_DPR16X4`` cells (16 x 4 bits each), which the LUT
    count leaves out, as Yosys' statistics do.
    """

    lut: int = 0
    ff: int = 0
    bram: int = 0
    dsp: int = 0
    spram: int = 0
    lutram: int = 0

    # Field by field in order, the names read once (the planner adds estimates by the hundred thousand).
    def __add__(self, other: "ResourceEstimate") -> "ResourceEstimate":
        return ResourceEstimate(*(getattr(self, name) + getattr(other, name) for name in _ESTIMATE_FIELDS))

    def __sub__(self, other: "ResourceEstimate") -> "ResourceEstimate":
        return ResourceEstimate(*(getattr(self, name) - getattr(other, name) for name in _ESTIMATE_FIELDS))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


_ESTIMATE_FIELDS = tuple(f.name for f in fields(ResourceEstimate))


def twos(n: int) -> int:
    """How many times 2 divides ``n``: the constant low bits of a register holding multiples of ``n``."""
    return (n & -n).bit_length() - 1


def and_luts(inputs: int, family: str) -> int:
    """LUT4s of an AND of ``inputs`` signals: a tree of LUT4s, or on ECP5 up to 7 inputs one
    LUT5 to LUT7 (2 to 8 LUT4s joined by PFUMX and L6MUX cells), which ABC takes for depth."""
    if family == "ecp5" and 4 < inputs <= 7:
        return 2 ** (inputs - 4)
    return max(1, -(-(inputs - 1) // 3))


def log2(n: int) -> int:
    """Bits of a counter of ``n`` values, at least one."""
    return max(1, math.ceil(math.log2(max(n, 2))))


def range_bits(n: int) -> int:
    """Width of an Amaranth ``Signal(range(n))``."""
    return max(0, (n - 1).bit_length())


def known(count: int, otherwise: int) -> int:
    """A spec's ``count``, or ``otherwise`` where it is -1 (not known)."""
    return otherwise if count < 0 else count
