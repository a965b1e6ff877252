"""The quantization constraints a user gives (YAML), in the terms of the MLIR quantization RFC.

Per tensor (a weight initializer, the model input or a kernel's output, by its name in the float model):

- ``uniform``: a fixed type (``UniformQuantizedType``): ``bits``, ``scale``, ``zero_point``, ``signed``;
- ``at_least``: at least ``bits`` bits (``AnyQuantizedType``), the range calibrated;
- ``calibrated``: the range ``min``..``max`` (``CalibratedQuantizedType``), the bits from the defaults;
- ``float``: keep it float (``NoQuantizedType``): the kernels from there on run on the host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ConfigError
from .calibrate import METHODS

BIT_CHOICES = {"w8a8": (8, 8), "w4a4": (4, 4)}
#: ``auto``: power-of-two scales wherever they keep the accuracy (or output SQNR) within the tolerance of
#: float scales (:mod:`streamc.ptq.scales`); ``pow2``: everywhere; ``float``: nowhere.
SCALE_POLICIES = ("auto", "pow2", "float")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Uniform(_Strict):
    kind: Literal["uniform"]
    bits: int = Field(ge=2, le=16)
    scale: float = Field(gt=0)
    zero_point: float = 0.0
    signed: bool = False


class AtLeast(_Strict):
    kind: Literal["at_least"]
    bits: int = Field(ge=2, le=16)


class Calibrated(_Strict):
    kind: Literal["calibrated"]
    min: float
    max: float

    @model_validator(mode="after")
    def _ordered(self):
        if not self.min < self.max:
            raise ValueError(f"min {self.min} must be below max {self.max}")
        return self


class KeepFloat(_Strict):
    kind: Literal["float"]


TensorConstraint = Annotated[Union[Uniform, AtLeast, Calibrated, KeepFloat], Field(discriminator="kind")]


class Constraints(_Strict):
    """Defaults and per-tensor constraints of one quantization."""

    weight_bits: int = Field(8, ge=2, le=16)
    activation_bits: int = Field(8, ge=2, le=16)
    #: Where scales are rounded to powers of two, so that the hardware requantizes an 8-bit layer with a
    #: shift instead of a multiply and corrections (:data:`SCALE_POLICIES`).
    scales: Literal[SCALE_POLICIES] = "auto"  # type: ignore[valid-type]
    #: What ``auto`` may lose against float scales: percentage points of accuracy where labels are given,
    #: else dB of output SQNR (3 dB: the output's quantization noise at most doubled).
    tolerance: float = Field(0.5, ge=0)
    tolerance_db: float = Field(3.0, ge=0)
    method: Literal[METHODS] = "mse"  # type: ignore[valid-type]
    percentile: float = Field(99.99, gt=50, le=100)
    tensors: dict[str, TensorConstraint] = {}

    def bits_for(self, tensor: str, default: int) -> int:
        given = self.tensors.get(tensor)
        return max(default, given.bits) if isinstance(given, AtLeast) else default


def load_constraints(path: Path | None, *, bits: str | None = None, **over) -> Constraints:
    """The constraints of ``path`` (or the defaults), with ``bits`` (``w8a8``/``w4a4``) and the fields
    ``over`` that are not None (``scales``, ``tolerance``, ``tolerance_db``) over them."""
    data = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
    if bits is not None:
        if bits not in BIT_CHOICES:
            raise ConfigError(f"bits {bits!r}: give one of {', '.join(BIT_CHOICES)}")
        data["weight_bits"], data["activation_bits"] = BIT_CHOICES[bits]
    data.update({key: value for key, value in over.items() if value is not None})
    try:
        return Constraints.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{path or 'constraints'}: {where}: {first['msg']}") from None
