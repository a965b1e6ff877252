"""Exact integer datatypes of tensors, named as qonnx names them (INT4, UINT2, BIPOLAR, ...)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DataType:
    """An integer value set ``[min, max]`` and how hardware stores it.

    ``BIPOLAR`` is {-1, +1}, stored in one bit (1 means +1, 0 means -1).
    ``TERNARY`` is {-1, 0, +1}, stored as a 2-bit two's complement number.
    """

    name: str
    min: int
    max: int

    @property
    def bipolar(self) -> bool:
        return self.name == "BIPOLAR"

    @property
    def signed(self) -> bool:
        return self.min < 0 and not self.bipolar

    @property
    def bitwidth(self) -> int:
        if self.bipolar:
            return 1
        if self.min < 0:
            return max(int(-self.min - 1).bit_length(), int(self.max).bit_length()) + 1
        return max(int(self.max).bit_length(), 1)

    def contains(self, values: np.ndarray) -> bool:
        values = np.asarray(values)
        if self.bipolar:
            return bool(np.all(np.abs(values) == 1))
        return bool(np.all((values >= self.min) & (values <= self.max) & (values == np.round(values))))

    def to_hw(self, values: np.ndarray) -> np.ndarray:
        """Values as unsigned bit patterns of ``bitwidth`` bits (two's complement for signed)."""
        values = np.asarray(values).astype(np.int64)
        if self.bipolar:
            return (values > 0).astype(np.uint64)
        return (values & ((1 << self.bitwidth) - 1)).astype(np.uint64)

    def from_hw(self, bits: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`to_hw`: unsigned bit patterns back to integer values."""
        bits = np.asarray(bits).astype(np.int64)
        if self.bipolar:
            return 2 * bits - 1
        if self.signed:
            sign = 1 << (self.bitwidth - 1)
            return (bits ^ sign) - sign
        return bits

    def __str__(self) -> str:
        return self.name


BIPOLAR = DataType("BIPOLAR", -1, 1)
BINARY = DataType("BINARY", 0, 1)
TERNARY = DataType("TERNARY", -1, 1)


def INT(bits: int) -> DataType:
    return DataType(f"INT{bits}", -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def UINT(bits: int) -> DataType:
    return DataType(f"UINT{bits}", 0, (1 << bits) - 1)


def smallest_datatype(lo: int, hi: int) -> DataType:
    """The narrowest INTn/UINTn (or BINARY) holding every integer in ``[lo, hi]``."""
    lo, hi = int(lo), int(hi)
    if lo >= 0:
        return BINARY if hi <= 1 else UINT(max(hi.bit_length(), 1))
    bits = max((-lo - 1).bit_length(), hi.bit_length()) + 1
    return INT(bits)


def datatype_of_values(values: np.ndarray) -> DataType:
    """The exact datatype of a constant integer tensor (BIPOLAR and TERNARY recognised)."""
    values = np.asarray(values)
    uniq = set(np.unique(values).tolist())
    if uniq <= {-1, 1} and -1 in uniq:
        return BIPOLAR
    if uniq <= {-1, 0, 1} and -1 in uniq and 0 in uniq:
        return TERNARY
    if values.size == 0:
        return BINARY
    return smallest_datatype(values.min(), values.max())


def from_name(name: str) -> DataType:
    """Parse a qonnx datatype name such as ``INT4``, ``UINT8``, ``BIPOLAR``."""
    fixed = {"BIPOLAR": BIPOLAR, "BINARY": BINARY, "TERNARY": TERNARY}
    if name in fixed:
        return fixed[name]
    for prefix, make in (("UINT", UINT), ("INT", INT)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return make(int(name[len(prefix):]))
    raise ValueError(f"datatype must be INTn, UINTn, BIPOLAR, BINARY or TERNARY, not {name!r}")
