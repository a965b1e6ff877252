"""Elementwise ops: arithmetic, comparisons and activations, as onnxruntime's CPU kernels compute them.

Elementwise arithmetic is exact, float16 arithmetic included (onnxruntime computes it in
float32 and rounds once, as numpy does). ``Sum`` and ``Mean`` add left to right in the input
dtype, as onnxruntime does, and ``Mean`` multiplies by the reciprocal count. ``Exp``, ``Tanh``,
``Erf``, ``Softplus`` and ``Pow``, where onnxruntime uses its own approximations, are computed
in float64 and rounded once to the input dtype. ``Sigmoid`` on float32/float16 replays MLAS's
rational approximation with fused multiply-adds and is bit-exact.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from streamc.errors import FrontendError

from .registry import REGISTRY, like, op, optional_input


def _exact_float(function):
    """Elementwise ops numpy computes exactly as onnxruntime does, in the input dtype."""

    def run(attrs, inputs, versions):
        return [function(*inputs)]

    return run


def integer_divide(a, b):
    # C++ integer division truncates toward zero; numpy's // floors
    quotient = a // b
    return quotient + ((a % b != 0) & ((a < 0) != (b < 0))).astype(quotient.dtype)


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return integer_divide(a, b)
    return a / b


def _pow(base, exponent):
    if exponent.size == 1 and base.size != 1 and exponent.reshape(-1)[0] in (2, 3):
        # onnxruntime multiplies out a scalar exponent of 2 or 3, in the base's dtype
        return base * base if exponent.reshape(-1)[0] == 2 else base * base * base
    if np.issubdtype(base.dtype, np.integer):
        return np.power(base, exponent.astype(base.dtype))
    # onnxruntime calls std::pow: libm's powf for float32 (within an ulp of the float64
    # result this rounds, and exact where the result is representable), double otherwise.
    # numpy's own float32 power differs from powf in about 1 of 5 results.
    return np.power(base.astype(np.float64), exponent.astype(np.float64)).astype(base.dtype)


for _name, _function in {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": _divide,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Reciprocal": lambda x: like(1, x) / x,
    "Pow": _pow,
    "Sign": np.sign,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "Not": np.logical_not,
    "Where": np.where,
    "Relu": lambda x: np.maximum(x, like(0, x)),
}.items():
    REGISTRY[_name] = _exact_float(_function)


def _in_float64(function):
    """Transcendental ops: computed in float64, rounded once to the input dtype."""

    def run(attrs, inputs, versions):
        (x,) = inputs
        return [function(x.astype(np.float64)).astype(x.dtype)]

    return run


_erf = np.vectorize(math.erf, otypes=[np.float64])

for _name, _function in {
    "Exp": np.exp,
    "Log": np.log,
    "Tanh": np.tanh,
    "Erf": _erf,
    # onnxruntime evaluates x + log1p(exp(-x)) or log1p(exp(x)) with Eigen's float32 approximations
    "Softplus": lambda x: np.logaddexp(0.0, x),
}.items():
    REGISTRY[_name] = _in_float64(_function)


# MLAS's logistic: Eigen's rational approximation on [-18, 18], evaluated with fused
# multiply-adds (its FMA3 kernel); float16 goes through it in float32
_LOGISTIC_NUMERATOR = np.array(
    [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
     2.48287947061529e-01], dtype=np.float32)
_LOGISTIC_DENOMINATOR = np.array(
    [6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
     1.16817656904453e-01, 9.93151921023180e-01], dtype=np.float32)


def _fused_horner(coefficients: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Horner's scheme in float32 with each step one fused multiply-add (exact in float64)."""
    result = np.full(x.shape, coefficients[0], dtype=np.float32)
    wide_x = x.astype(np.float64)
    for coefficient in coefficients[1:]:
        result = (result.astype(np.float64) * wide_x + np.float64(coefficient)).astype(np.float32)
    return result


def _mlas_logistic(x: np.ndarray) -> np.ndarray:
    value = np.clip(x.astype(np.float32), np.float32(-18.0), np.float32(18.0))
    square = value * value
    numerator = _fused_horner(_LOGISTIC_NUMERATOR, square) * value
    denominator = _fused_horner(_LOGISTIC_DENOMINATOR, square)
    return np.clip(numerator / denominator + np.float32(0.5), np.float32(0.0), np.float32(1.0))


@op("Sigmoid")
def _sigmoid(attrs, inputs, versions):
    (x,) = inputs
    if x.dtype in (np.float32, np.float16):
        return [_mlas_logistic(x).astype(x.dtype)]
    return [1.0 / (1.0 + np.exp(-x.astype(np.float64)))]


@op("Max")
def _max(attrs, inputs, versions):
    return [np.maximum.reduce(np.broadcast_arrays(*inputs))]


@op("Min")
def _min(attrs, inputs, versions):
    return [np.minimum.reduce(np.broadcast_arrays(*inputs))]


@op("Sum")
def _sum_inputs(attrs, inputs, versions):
    # onnxruntime adds the (broadcast) inputs left to right in their dtype, as reduce does
    return [functools.reduce(np.add, inputs)]


@op("Mean")
def _mean_inputs(attrs, inputs, versions):
    total = functools.reduce(np.add, inputs)
    if not np.issubdtype(total.dtype, np.floating):
        raise FrontendError(f"Mean inputs must be floating point, not {total.dtype}")
    # onnxruntime multiplies the sum by the reciprocal of the input count
    return [total * (like(1, total) / like(len(inputs), total))]


@op("LeakyRelu")
def _leaky_relu(attrs, inputs, versions):
    (x,) = inputs
    return [np.where(x >= 0, x, like(attrs.get("alpha", 0.01), x) * x)]


def _hard_sigmoid_of(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    # onnxruntime: alpha * x + beta in the input dtype (two roundings, no fused
    # multiply-add), then min with 1 and max with 0
    linear = like(alpha, x) * x + like(beta, x)
    return np.maximum(np.minimum(linear, like(1, x)), like(0, x))


@op("HardSigmoid")
def _hard_sigmoid(attrs, inputs, versions):
    (x,) = inputs
    return [_hard_sigmoid_of(x, attrs.get("alpha", 0.2), attrs.get("beta", 0.5))]


@op("HardSwish")
def _hard_swish(attrs, inputs, versions):
    (x,) = inputs
    # onnxruntime runs ONNX's function body: x * HardSigmoid(x, alpha=1/6, beta=0.5)
    return [x * _hard_sigmoid_of(x, 1 / 6, 0.5)]


@op("Clip")
def _clip(attrs, inputs, versions):
    x = inputs[0]
    if versions.opset < 11:
        low = attrs.get("min", float(np.finfo(np.float32).min))
        high = attrs.get("max", float(np.finfo(np.float32).max))
    else:
        low, high = optional_input(inputs, 1), optional_input(inputs, 2)
    if low is not None:
        x = np.maximum(x, like(low, x))
    if high is not None:
        # applied last: where min > max, ONNX sets every value to max
        x = np.minimum(x, like(high, x))
    return [x]
