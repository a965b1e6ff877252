"""``Cast`` and the ONNX data types numpy represents.

``Cast`` from float to integer reproduces onnxruntime's x86-64 result for out-of-range values
too (truncation through int32, then the low bits).
"""

from __future__ import annotations

import numpy as np

from streamc.errors import FrontendError

from .registry import op, required

# ONNX TensorProto.DataType codes numpy represents natively
ONNX_DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}


def onnx_dtype(code: int, op_type: str):
    if code not in ONNX_DTYPES:
        raise FrontendError(
            f"{op_type} to data type {code} is not supported; supported TensorProto codes: "
            + ", ".join(f"{c} ({np.dtype(t).name})" for c, t in ONNX_DTYPES.items())
        )
    return ONNX_DTYPES[code]


def _float_to_integer(x: np.ndarray, dtype) -> np.ndarray:
    """A float to integer conversion as onnxruntime's x86-64 build performs it.

    C++ leaves an out-of-range conversion undefined; onnxruntime truncates toward zero with
    ``cvttss2si`` into int32 (int64 for the 64-bit types), which yields the minimum value
    for NaN and out-of-range inputs, then keeps the low bits: 300.7 -> int8 44, 255.9 ->
    int8 -1, NaN -> 0, 1e10 -> int32 -2147483648.
    """
    target = np.dtype(dtype)
    wide = np.int64 if target.itemsize >= 4 and target != np.int32 else np.int32
    limit = 2.0 ** (np.iinfo(wide).bits - 1)
    truncated = np.trunc(x.astype(np.float64))
    in_range = (truncated >= -limit) & (truncated < limit)
    return np.where(in_range, truncated, -limit).astype(wide).astype(target)


@op("Cast")
def _cast(attrs, inputs, versions):
    (x,) = inputs
    dtype = onnx_dtype(required(attrs, "to", "Cast"), "Cast")
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(dtype, np.integer):
        return [_float_to_integer(x, dtype)]
    # every other pair is what numpy does: round to nearest even into floats (overflowing
    # to infinity, as onnxruntime does), wrap into integers
    with np.errstate(over="ignore"):
        return [x.astype(dtype)]
