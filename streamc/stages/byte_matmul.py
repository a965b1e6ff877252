"""Integer matrix products of byte-sized codes in onnxruntime's ``MatMulInteger``, where it is exact on every CPU.

numpy multiplies integer matrices without BLAS, and float BLAS does 8 products per instruction; onnxruntime's u8 x
s8 kernels do 32 (``vpmaddubsw``) and make predict's first layers about twice as fast. They are exact except on
x86 CPUs without VNNI, where each pair of adjacent u8 x s8 products is summed with saturation to int16 before the
int32 sums: :func:`byte_matmul` takes that path only where no such pair can reach int16's limit, from the bounds of
the operands it is given, so it returns the exact products on any CPU or None.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

#: The largest sum of two u8 x s8 products the non-VNNI kernels keep exactly (int16).
PAIR_LIMIT = (1 << 15) - 1


@dataclass(frozen=True)
class _Weights:
    """A weight matrix (K, N) as ``MatMulInteger`` takes it, with what the exactness bounds need of it."""

    largest: int           # the largest magnitude
    column_sum: int        # the largest sum of magnitudes in a column
    sums: np.ndarray       # each column's sum, for the offset of signed codes
    session: object | None  # None: the weights are not bytes

    @classmethod
    def of(cls, b: np.ndarray) -> "_Weights":
        low, high = int(b.min(initial=0)), int(b.max(initial=0))
        column_sum = int(np.abs(b).sum(axis=0).max(initial=0))
        if low < -128 or high > 127:
            return cls(max(-low, high), column_sum, np.zeros(0), None)
        weights = np.ascontiguousarray(b, dtype=np.int8)
        return cls(max(-low, high), column_sum, weights.sum(axis=0, dtype=np.int32), _session(weights))


#: Prepared weights by the identity of the array holding them (and the view's layout), dropped with that array:
#: a stage's weights are set up once, not at every batch.
_PREPARED: dict[tuple, _Weights] = {}


def byte_matmul(a: np.ndarray, b: np.ndarray, a_low: int, a_high: int) -> np.ndarray | None:
    """``a @ b`` in int32 for integer ``a`` (M, K) with values in ``a_low..a_high`` and integer weights ``b``
    (K, N) that do not change, through ``MatMulInteger``; None where the operands do not fit its exact range:
    ``a`` (offset by 128 if it is signed) and ``b`` each a byte, no pair of products past int16, no sum past
    int32."""
    offset = 0 if a_low >= 0 else 128
    if not (a_low + offset >= 0 and a_high + offset <= 255) or not len(a):
        return None
    weights = _prepared(b)
    codes_high = a_high + offset
    if (weights.session is None or 2 * codes_high * weights.largest > PAIR_LIMIT
            or codes_high * weights.column_sum >= 1 << 31):
        return None
    if a.dtype.itemsize == 1:
        # an int8 plus 128 is its bit pattern with the top bit flipped
        codes = a.view(np.uint8) ^ np.uint8(offset) if offset else a.view(np.uint8)
    else:
        codes = (a + offset).astype(np.uint8)
    product = weights.session.run(None, {"a": np.ascontiguousarray(codes)})[0]
    if offset:
        product -= np.int32(offset) * weights.sums
    return product


def _prepared(b: np.ndarray) -> _Weights:
    owner = b if b.base is None else b.base
    key = (id(owner), b.shape, b.strides, b.__array_interface__["data"][0])
    found = _PREPARED.get(key)
    if found is None:
        found = _PREPARED[key] = _Weights.of(b)
        weakref.finalize(owner, _PREPARED.pop, key, None)
    return found


def _session(weights: np.ndarray):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rows, columns = weights.shape
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "byte_matmul",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, rows])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [None, columns])],
                              [numpy_helper.from_array(weights, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    # the caller runs a batch per core; one thread each
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
