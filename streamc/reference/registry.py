"""The op registry the family modules fill, and the attribute and input helpers they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from streamc.errors import FrontendError


@dataclass(frozen=True)
class Versions:
    opset: int
    qonnx_opset: int


OpFunction = Callable[[dict, list, Versions], list]
REGISTRY: dict[str, OpFunction] = {}


def op(*names: str) -> Callable[[OpFunction], OpFunction]:
    def register(function: OpFunction) -> OpFunction:
        for name in names:
            REGISTRY[name] = function
        return function

    return register


def required(attrs: dict, name: str, op_type: str):
    if name not in attrs:
        raise FrontendError(f"{op_type} node requires attribute {name!r}; attributes given: {sorted(attrs)}")
    return attrs[name]


def optional_input(inputs: list, index: int) -> np.ndarray | None:
    return inputs[index] if index < len(inputs) else None


def like(value, array: np.ndarray) -> np.ndarray:
    """A python constant in the array's dtype, so numpy does not promote the result."""
    return np.asarray(value, dtype=array.dtype)


def ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]
