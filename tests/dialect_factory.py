"""Small random models of every quantized-ONNX dialect streamc compiles, written with onnx.helper.

Each maker takes a seed and returns a :class:`DialectCase`: the model, input frames, which
reference executor defines its outputs, whether that reference is exact, and what output stage
each hardware stage must get where the model determines it. Features that must all be covered
(rounding modes, element types, scale granularity) are picked by ``seed`` modulo their count, the
rest at random, so that consecutive seeds cover every variant.

Scales are powers of two unless a case asks for float rounding on purpose: then every product
``acc * scale`` is exact in float32, and biases in half steps of the accumulator scale put
``acc * scale`` on ``k + 0.5``, where the rounding modes differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QONNX_DOMAIN = "qonnx.custom_op.general"
#: qonnx 1.0 accepts these (streamc.reference implements each as qonnx does).
ROUNDING_MODES = ("ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN")
#: Modes whose steps are ``floor`` or ``round half to even`` of an affine function of the
#: accumulator, which a multiply-add-shift requantization reproduces exactly at power-of-two scales.
#: qonnx's HALF_UP/HALF_DOWN round ties away from/towards zero and UP/DOWN widen the step at zero.
AFFINE_ROUNDING = frozenset({"ROUND", "HALF_EVEN", "CEIL", "FLOOR"})
#: onnxruntime 1.31 reads up to IR 10 for these opsets.
IR_VERSION = 10
FRAMES = 256

#: Output stage expectations, one per hardware stage.
THRESHOLDS = "thresholds"          # comparators, never a requantization
REQUANT_IF_MANY = "requant-if-many"  # a requantization exactly when more than 15 thresholds remain
TABLE = "table"
ACCUMULATOR = "accumulator"
UNDETERMINED = None                # thresholds or requantization, as the proof finds


@dataclass
class DialectCase:
    """A model with its frames and what the compiled hardware must compute.

    ``reference`` is ``"qonnx"`` (qonnx's executor, and streamc's), ``"onnxruntime"`` or
    ``"streamc"`` (ONNX semantics where onnxruntime departs from them). ``exact`` says whether the
    hardware must equal the reference bit for bit (integer outputs, power-of-two float tails) or
    within one ulp of the largest output.
    """

    name: str
    dialect: str
    model: onnx.ModelProto
    frames: np.ndarray
    reference: str
    exact: bool
    stages: list[str | None]
    features: set[str] = field(default_factory=set)


class _Builder:
    """onnx.helper with generated names: ``constant`` and ``node`` return the tensor they make."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def constant(self, value, hint: str, dtype=np.float32) -> str:
        self._count += 1
        name = f"{hint}_{self._count}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op_type: str, inputs: list[str], hint: str, *, domain: str = "", **attrs) -> str:
        self._count += 1
        output = f"{hint}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def model(self, in_type: int, in_features: int, out_type: int, out_features: int, *, opset: int = 13,
              qonnx_opset: int | None = None, batch=1) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(self.nodes, self.name,
                                  [helper.make_tensor_value_info("input", in_type, [batch, in_features])],
                                  [helper.make_tensor_value_info("output", out_type, [batch, out_features])],
                                  initializer=self.initializers)
        opsets = [helper.make_opsetid("", opset)]
        if qonnx_opset is not None:
            opsets.append(helper.make_opsetid(QONNX_DOMAIN, qonnx_opset))
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


def _widths(rng, count: int) -> list[int]:
    return [int(v) for v in rng.integers(4, 25, size=count)]


def _pow2(rng, low: int, high: int, size=None) -> np.ndarray:
    return (2.0 ** rng.integers(low, high + 1, size=size)).astype(np.float32)


def _is_pow2(values) -> bool:
    exponents = np.log2(np.abs(np.asarray(values, np.float64)))
    return bool(np.all(exponents == np.round(exponents)))


def _float_frames(rng, lo: float, hi: float, scale: float, features: int) -> np.ndarray:
    """Uniform frames a little beyond the quantizer's range, a quarter of them on rounding ties."""
    span = hi - lo
    uniform = rng.uniform(lo - 0.1 * span - scale, hi + 0.1 * span + scale, size=(FRAMES, features))
    ties = (rng.integers(int(np.floor(lo / scale)) - 1, int(np.ceil(hi / scale)) + 1, size=(FRAMES, features)) + 0.5)
    pick = rng.random((FRAMES, features)) < 0.25
    return np.where(pick, ties * scale, uniform).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# QONNX
# ------------------------------------------------------------------------------------------------

def _quant(b: _Builder, x: str, scale, zero_point, bits, *, signed: int, narrow: int, rounding: str = "ROUND") -> str:
    inputs = [x, b.constant(scale, "scale"), b.constant(zero_point, "zero_point"), b.constant(bits, "bit_width")]
    return b.node("Quant", inputs, "quant", domain=QONNX_DOMAIN, signed=signed, narrow=narrow, rounding_mode=rounding)


def _qonnx_weights(b: _Builder, rng, fan_in: int, fan_out: int, features: set) -> tuple[str, np.ndarray, bool]:
    """A quantized (fan_in, fan_out) weight: returns the tensor, its scale (per column) and whether it is a power of two."""
    kind = rng.choice(["quant", "quant", "quant", "bipolar"])
    per_channel = bool(rng.random() < 0.5)
    exact_scale = bool(rng.random() < 0.7)
    shape = (1, fan_out) if per_channel else ()
    scale = _pow2(rng, -4, -1, shape) if exact_scale else rng.uniform(0.01, 0.3, size=shape).astype(np.float32)
    features.add(f"weight-scale-{'per-channel' if per_channel else 'per-tensor'}")
    features.add("weight-scale-pow2" if exact_scale else "weight-scale-float")
    values = rng.normal(size=(fan_in, fan_out)).astype(np.float32) * scale * 3
    if kind == "bipolar":
        features.add("weight-bipolar")
        out = b.node("BipolarQuant", [b.constant(values, "float_weights"), b.constant(scale, "scale")], "weights",
                     domain=QONNX_DOMAIN)
        return out, np.broadcast_to(scale.reshape(-1), (fan_out,)), exact_scale
    bits = int(rng.integers(1, 9))
    narrow = int(rng.random() < 0.5)
    zero_point = float(rng.integers(-1, 2)) if bits > 2 and rng.random() < 0.25 else 0.0
    features.add(f"weight-bits-{bits}")
    out = _quant(b, b.constant(values, "float_weights"), scale, zero_point, bits, signed=1, narrow=narrow)
    return out, np.broadcast_to(scale.reshape(-1), (fan_out,)), exact_scale


def _activation(rng, seed: int, layer: int) -> dict:
    """The activation quantizer after a hidden layer, cycling through the variants with the seed."""
    variant = (seed + layer) % 5
    rounding = ROUNDING_MODES[(seed // 5 + layer) % len(ROUNDING_MODES)]
    if variant == 0:
        return dict(kind="bipolar")
    if variant == 1:
        return dict(kind="trunc", version=1 + (seed // 3) % 2, rounding=rounding)  # one version per model
    bits = [int(rng.integers(1, 5)), 8, 7.5 if seed % 2 else int(rng.integers(5, 8))][variant - 2]
    signed = int(rng.random() < 0.5)
    if signed and bits == 1:
        bits = 2  # 1-bit signed Quant is bipolar, covered by BipolarQuant and the weights
    narrow = int(rng.random() < 0.3) if bits >= 2 else 0
    zero_point = float(rng.integers(1, 4)) if not signed and bits >= 3 and rng.random() < 0.5 else 0.0
    return dict(kind="quant", bits=bits, signed=signed, narrow=narrow, zero_point=zero_point, rounding=rounding)


def qonnx_case(seed: int) -> DialectCase:
    """Quant/BipolarQuant input, 1-3 MatMul layers with bias, BatchNorm, Relu, Quant/BipolarQuant/Trunc
    activations, and a float tail (Mul, Add) after the last MatMul or its quantizer."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"qonnx_{seed}")
    features: set[str] = set()
    n_layers = int(rng.integers(1, 4))
    widths = _widths(rng, n_layers + 1)
    # input quantizer
    if seed % 4 == 3:
        in_scale, in_zero, in_lo, in_hi = np.float32(0.5), 0.0, -1, 1
        x = b.node("BipolarQuant", ["input", b.constant(in_scale, "scale")], "input_quant", domain=QONNX_DOMAIN)
        features.add("input-bipolar")
    else:
        bits = int(rng.integers(2, 9))
        signed = seed % 2
        in_zero = float(rng.integers(1, 2 ** (bits - 1))) if not signed and rng.random() < 0.5 else 0.0
        in_scale = _pow2(rng, -4, -1)
        x = _quant(b, "input", in_scale, in_zero, bits, signed=signed, narrow=0, rounding="ROUND")
        in_lo, in_hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
        features.add("input-zero-point" if in_zero else "input-quant")
    frames = _float_frames(rng, (in_lo - in_zero) * in_scale, (in_hi - in_zero) * in_scale, float(in_scale), widths[0])
    stages: list[str | None] = []
    all_exact = True
    x_scale = np.float32(in_scale)
    for layer in range(n_layers):
        fan_in, fan_out = widths[layer], widths[layer + 1]
        weights, w_scale, exact = _qonnx_weights(b, rng, fan_in, fan_out, features)
        exact &= _is_pow2(x_scale)
        acc = b.node("MatMul", [x, weights], "matmul")
        acc_scale = (x_scale * w_scale).astype(np.float32)
        last = layer == n_layers - 1
        act = _activation(rng, seed, layer) if not last or rng.random() < 0.4 else None
        if act is not None and act["kind"] == "trunc":
            if x_scale != np.float32(in_scale) or not exact or np.unique(w_scale).size != 1 or in_zero:
                act = dict(act, kind="quant", bits=4, signed=1, narrow=0, zero_point=0.0)  # Trunc needs one exact scale
            else:
                x, x_scale = _trunc(b, rng, acc, float(acc_scale[0]), act, features)
                stages.append(REQUANT_IF_MANY if act["rounding"] in AFFINE_ROUNDING else UNDETERMINED)
                continue
        # Float rounding only in the last MatMul's products: no further rounding op after an inexact one.
        plain_end = act is None and not exact
        if (rng.random() < 0.6 or not exact) and not plain_end:
            # half steps of a power-of-two accumulator scale put ties on purpose; with a float scale
            # they would be ties in exact arithmetic only, which float32 resolves differently depending
            # on the order of operations (the model's MatMul sums products, the hardware scales acc)
            steps = rng.integers(-8, 9, size=fan_out) * 0.5 if exact else rng.uniform(-4, 4, size=fan_out)
            bias = (steps * acc_scale).astype(np.float32)
            acc = b.node("Add", [acc, b.constant(bias, "bias")], "bias")
            features.add("bias")
        batchnorm = rng.random() < 0.35 and not plain_end
        if batchnorm:
            gamma = rng.uniform(0.5, 2.0, size=fan_out) * np.where(rng.random(fan_out) < 0.4, -1, 1)
            spread = float(np.abs(acc_scale).max()) * fan_in ** 0.5
            params = [gamma, rng.normal(size=fan_out) * spread, rng.normal(size=fan_out) * spread,
                      rng.uniform(0.5, 2.0, size=fan_out) * spread ** 2]
            acc = b.node("BatchNormalization", [acc] + [b.constant(p, n) for p, n in zip(params, "gbmv")],
                         "batchnorm", epsilon=1e-5)
            features.add("batchnorm-negative" if (gamma < 0).any() else "batchnorm")
        if rng.random() < 0.4:
            acc = b.node("Relu", [acc], "relu")
            features.add("relu")
        if act is None:
            stages.append(ACCUMULATOR)
            all_exact &= exact
            x = acc
            break
        x, x_scale, stage = _activation_quant(b, rng, acc, act, acc_scale, exact, features)
        affine = exact and not batchnorm and act.get("rounding") in AFFINE_ROUNDING
        stages.append(stage if stage == THRESHOLDS or affine else UNDETERMINED)
    # a power-of-two Mul keeps exact values exact and scales an inexact one's error with its ulp
    out_features = widths[len(stages)]
    tail = b.node("Mul", [x, b.constant(_pow2(rng, -2, 2, out_features), "tail_scale")], "tail_mul")
    if all_exact:
        tail = b.node("Add", [tail, b.constant(rng.integers(-4, 5, out_features) / 4, "tail_bias")], "tail_add")
    features.add("float-tail-exact" if all_exact else "float-tail-rounded")
    qonnx_opset = 2 if "trunc-v2" in features else 1
    model = b.model(TensorProto.FLOAT, widths[0], TensorProto.FLOAT, widths[len(stages)], qonnx_opset=qonnx_opset)
    return DialectCase(b.name, "qonnx", model, frames, "qonnx", all_exact, stages, features)


def _activation_quant(b: _Builder, rng, x: str, act: dict, acc_scale, exact: bool, features) -> tuple[str, np.float32, str]:
    # the step from one code to the next is 2, 4 or 8 accumulator steps (of the largest channel scale),
    # or a float ratio where the accumulator scale is a float (no exact ties, see the bias)
    ratio = 2.0 ** rng.integers(1, 4) if exact else rng.uniform(1.5, 6.0)
    scale = np.float32(float(np.max(acc_scale)) * ratio)
    if act["kind"] == "bipolar":
        features.add("act-bipolar")
        return b.node("BipolarQuant", [x, b.constant(scale, "scale")], "act", domain=QONNX_DOMAIN), scale, THRESHOLDS
    bits = act["bits"]
    features.update({f"act-bits-{bits}", f"rounding-{act['rounding']}", f"act-{'signed' if act['signed'] else 'unsigned'}"})
    if act["narrow"]:
        features.add("act-narrow")
    if act["zero_point"]:
        features.add("act-zero-point")
    out = _quant(b, x, scale, act["zero_point"], bits, signed=act["signed"], narrow=act["narrow"],
                 rounding=act["rounding"])
    return out, scale, THRESHOLDS if bits <= 4 else REQUANT_IF_MANY


def _trunc(b: _Builder, rng, acc: str, acc_scale: float, act: dict, features) -> tuple[str, np.float32]:
    """Trunc on the accumulator: drop 1-4 low bits (qonnx Trunc version 1 keeps the scale, version 2
    takes an output scale and clips to its output bit width)."""
    dropped = int(rng.integers(1, 5))
    in_bits = 16.0
    rounding = act["rounding"]
    features.update({f"trunc-v{act['version']}", f"trunc-rounding-{rounding}"})
    scale = b.constant(acc_scale, "trunc_scale")
    zero = b.constant(0.0, "trunc_zero")
    if act["version"] == 1:
        inputs = [acc, scale, zero, b.constant(in_bits, "in_bits"), b.constant(in_bits - dropped, "out_bits")]
        return b.node("Trunc", inputs, "trunc", domain=QONNX_DOMAIN, rounding_mode=rounding), np.float32(acc_scale)
    out_scale = np.float32(acc_scale * 2 ** dropped)
    out_bits = float(rng.integers(2, 9))
    inputs = [acc, scale, zero, b.constant(in_bits, "in_bits"), b.constant(out_scale, "out_scale"),
              b.constant(out_bits, "out_bits")]
    signed = int(rng.random() < 0.7)
    return b.node("Trunc", inputs, "trunc", domain=QONNX_DOMAIN, rounding_mode=rounding, signed=signed,
                  narrow=int(rng.random() < 0.3)), out_scale


# ------------------------------------------------------------------------------------------------
# QCDQ, onnxruntime QDQ and QOperator
# ------------------------------------------------------------------------------------------------

_STORAGE = {"int8": (np.int8, TensorProto.INT8), "uint8": (np.uint8, TensorProto.UINT8)}


def _int_weights(rng, fan_in: int, fan_out: int, per_column: bool, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes (fan_in, fan_out) and their scale: one, or one per column (output channel)."""
    codes = rng.integers(-127, 128, size=(fan_in, fan_out)).astype(np.int8)
    shape = (fan_out,) if per_column else ()
    scale = _pow2(rng, -9, -5, shape) if exact else rng.uniform(0.002, 0.02, size=shape).astype(np.float32)
    return codes, scale


def _clip_range(rng, storage: str, seed: int) -> tuple[int, int]:
    """Integer Clip bounds narrower than 8 bits: symmetric, or any sub-range."""
    bits = int(rng.integers(2, 8))
    if seed % 3 == 0:
        return (-(2 ** (bits - 1)) + 1, 2 ** (bits - 1) - 1) if storage == "int8" else (0, 2 ** bits - 1)
    info = np.iinfo(_STORAGE[storage][0])
    lo = int(rng.integers(info.min, info.max - 2 ** bits + 2))
    return lo, lo + 2 ** bits - 1


def qcdq_case(seed: int) -> DialectCase:
    """QuantizeLinear -> Clip -> DequantizeLinear activations, DequantizeLinear (per-axis) weights,
    MatMul, float bias, Relu; the last layer ends in a float Add or in another QCDQ."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"qcdq_{seed}")
    storage = ["int8", "uint8"][seed % 2]
    np_type = _STORAGE[storage][0]
    features = {f"qcdq-{storage}"}
    n_layers = int(rng.integers(1, 4))
    widths = _widths(rng, n_layers + 1)

    def qcdq(x: str, scale, exact: bool) -> tuple[str, int, int, str]:
        lo, hi = _clip_range(rng, storage, seed + len(b.nodes))
        zero = int(rng.integers(lo, hi + 1)) if rng.random() < 0.5 else int(np.clip(0, lo, hi))
        features.add("clip-symmetric" if lo == -hi else "clip-asymmetric")
        s, z = b.constant(scale, "scale"), b.constant(zero, "zero_point", np_type)
        codes = b.node("QuantizeLinear", [x, s, z], "quantize")
        clipped = b.node("Clip", [codes, b.constant(lo, "clip_lo", np_type), b.constant(hi, "clip_hi", np_type)], "clip")
        levels = hi - lo
        # QuantizeLinear rounds half to even before it adds the zero point: with an odd zero point the
        # ties go to odd codes, which the requantization (half to even on the code) cannot express
        affine = exact and zero % 2 == 0
        stage = THRESHOLDS if levels <= 15 else REQUANT_IF_MANY if affine else UNDETERMINED
        return b.node("DequantizeLinear", [clipped, s, z], "dequantize"), lo - zero, hi - zero, stage

    in_scale = _pow2(rng, -6, -3)
    x, lo, hi, _ = qcdq("input", in_scale, True)
    frames = _float_frames(rng, lo * float(in_scale), hi * float(in_scale), float(in_scale), widths[0])
    stages, exact_out, x_scale = [], True, in_scale
    for layer in range(n_layers):
        per_column, exact = bool(rng.random() < 0.5), bool(rng.random() < 0.6) and _is_pow2(x_scale)
        features.update({f"weights-{'per-axis' if per_column else 'per-tensor'}", f"scale-{'pow2' if exact else 'float'}"})
        codes, w_scale = _int_weights(rng, widths[layer], widths[layer + 1], per_column, exact)
        weights = b.node("DequantizeLinear", [b.constant(codes, "weights", np.int8), b.constant(w_scale, "w_scale"),
                                              b.constant(np.zeros(w_scale.shape, np.int8), "w_zero", np.int8)],
                         "dequantize_weights", axis=1)
        acc = b.node("MatMul", [x, weights], "matmul")
        acc_scale = np.max(x_scale * w_scale)
        last = layer == n_layers - 1
        if last and rng.random() < 0.5:
            stages.append(ACCUMULATOR)
            exact_out = exact
            if exact:  # float rounding in the MatMul only: no bias after an inexact one (see qonnx_case)
                acc = b.node("Add", [acc, b.constant(rng.integers(-8, 9, widths[-1]) * 0.5 * acc_scale, "bias")], "bias")
            x = acc
            break
        steps = rng.integers(-8, 9, widths[layer + 1]) * 0.5 if exact else rng.uniform(-4, 4, widths[layer + 1])
        acc = b.node("Add", [acc, b.constant(steps * acc_scale, "bias")], "bias")
        if rng.random() < 0.5:
            acc = b.node("Relu", [acc], "relu")
            features.add("relu")
        x_scale = np.float32(acc_scale * (2.0 ** rng.integers(1, 4) if exact else rng.uniform(1.5, 6)))
        x, _, _, stage = qcdq(acc, x_scale, exact)
        stages.append(stage)
    model = b.model(TensorProto.FLOAT, widths[0], TensorProto.FLOAT, widths[len(stages)], batch="N")
    return DialectCase(b.name, "qcdq", model, frames, "onnxruntime", exact_out, stages, features)


def qdq_case(seed: int) -> DialectCase:
    """As onnxruntime's quantize_static writes QDQ: Q/DQ on activations, DQ int8 weights and int32
    bias (scale input scale x weight scale), MatMul, Add, Relu, Q/DQ at the output."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"qdq_{seed}")
    storage = ["uint8", "int8"][seed % 2]
    np_type = _STORAGE[storage][0]
    features = {f"qdq-{storage}"}
    n_layers = int(rng.integers(1, 4))
    widths = _widths(rng, n_layers + 1)
    info = np.iinfo(np_type)

    def qdq(x: str, scale, zero) -> str:
        s, z = b.constant(scale, "scale"), b.constant(zero, "zero_point", np_type)
        return b.node("DequantizeLinear", [b.node("QuantizeLinear", [x, s, z], "quantize"), s, z], "dequantize")

    in_scale, in_zero = np.float32(rng.uniform(0.005, 0.05)), int(rng.integers(info.min, info.max + 1) // 2)
    x = qdq("input", in_scale, in_zero)
    frames = _float_frames(rng, (info.min - in_zero) * in_scale, (info.max - in_zero) * in_scale, float(in_scale),
                           widths[0])
    x_scale = in_scale
    for layer in range(n_layers):
        per_column = bool(rng.random() < 0.5)
        features.add(f"weights-{'per-column' if per_column else 'per-tensor'}")
        codes, w_scale = _int_weights(rng, widths[layer], widths[layer + 1], per_column, False)
        weights = b.node("DequantizeLinear", [b.constant(codes, "weights", np.int8), b.constant(w_scale, "w_scale"),
                                              b.constant(np.zeros(w_scale.shape, np.int8), "w_zero", np.int8)],
                         "dequantize_weights", axis=1)
        acc = b.node("MatMul", [x, weights], "matmul")
        bias_scale = (x_scale * w_scale).astype(np.float32)
        bias = b.node("DequantizeLinear", [b.constant(rng.integers(-2000, 2001, widths[layer + 1]), "bias", np.int32),
                                           b.constant(bias_scale, "bias_scale"),
                                           b.constant(np.zeros(bias_scale.shape, np.int32), "bias_zero", np.int32)],
                      "dequantize_bias", axis=0)
        acc = b.node("Add", [acc, bias], "bias")
        relu = layer < n_layers - 1 and rng.random() < 0.6
        if relu:
            acc = b.node("Relu", [acc], "relu")
            features.add("relu")
        x_scale = np.float32(np.max(bias_scale) * rng.uniform(8, 40))
        zero = info.min if relu and storage == "uint8" else int(rng.integers(-20, 21)) + (128 if storage == "uint8" else 0)
        x = qdq(acc, x_scale, zero)
    model = b.model(TensorProto.FLOAT, widths[0], TensorProto.FLOAT, widths[-1], batch="N")
    return DialectCase(b.name, "qdq", model, frames, "onnxruntime", True, [UNDETERMINED] * n_layers, features)


def qoperator_case(seed: int) -> DialectCase:
    """QuantizeLinear, a chain of QLinearMatMul (per-tensor or per-column weight scales), DequantizeLinear."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"qoperator_{seed}")
    storage = ["uint8", "int8"][seed % 2]
    np_type = _STORAGE[storage][0]
    features = {f"qoperator-{storage}"}
    n_layers = int(rng.integers(1, 4))
    widths = _widths(rng, n_layers + 1)

    def zero_point():
        return b.constant(int(rng.integers(-20, 21)) + (128 if storage == "uint8" else 0), "zero_point", np_type)

    scale, zero = b.constant(rng.uniform(0.005, 0.05), "scale"), zero_point()
    x = b.node("QuantizeLinear", ["input", scale, zero], "quantize")
    in_scale = float(numpy_helper.to_array(b.initializers[-2]))
    frames = _float_frames(rng, -128 * in_scale, 128 * in_scale, in_scale, widths[0])
    for layer in range(n_layers):
        per_column = bool(rng.random() < 0.5)
        features.add(f"weights-{'per-column' if per_column else 'per-tensor'}")
        codes, w_scale = _int_weights(rng, widths[layer], widths[layer + 1], per_column, False)
        y_scale, y_zero = b.constant(rng.uniform(0.02, 0.2), "y_scale"), zero_point()
        x = b.node("QLinearMatMul", [x, scale, zero, b.constant(codes, "weights", np.int8), b.constant(w_scale, "w_scale"),
                                     b.constant(np.zeros(w_scale.shape, np.int8), "w_zero", np.int8), y_scale, y_zero],
                   "qlinear_matmul")
        scale, zero = y_scale, y_zero
    b.node("DequantizeLinear", [x, scale, zero], "dequantize")
    model = b.model(TensorProto.FLOAT, widths[0], TensorProto.FLOAT, widths[-1], batch="N")
    return DialectCase(b.name, "qoperator", model, frames, "onnxruntime", True, [UNDETERMINED] * n_layers, features)


# ------------------------------------------------------------------------------------------------
# Integer operators ("Pre-Quantized Deep Learning Models Codified in ONNX")
# ------------------------------------------------------------------------------------------------

def _integer_layer(b: _Builder, rng, x: str, fan_in: int, fan_out: int, in_storage: str, features: set,
                   *, a_zero: int = 0) -> tuple[str, float]:
    """MatMulInteger -> Add(int32 bias) -> Cast(float); returns the float accumulator and its magnitude."""
    codes = rng.integers(-127, 128, size=(fan_in, fan_out)).astype(np.int8)
    inputs = [x, b.constant(codes, "weights", np.int8)]
    if a_zero:
        inputs.append(b.constant(a_zero, "a_zero", _STORAGE[in_storage][0]))
        features.add("a-zero-point")
    product = b.node("MatMulInteger", inputs, "accumulator")
    bias = rng.integers(-3000, 3001, size=fan_out)
    biased = b.node("Add", [product, b.constant(bias, "bias", np.int32)], "biased")
    return b.node("Cast", [biased], "wide", to=TensorProto.FLOAT), 127.0 * 64 * fan_in ** 0.5


def _rescale(b: _Builder, rng, x: str, multiplier: float, features: set, dtype=np.float32) -> str:
    """One float Mul, or two: an integer scale (as float) and a 2^-N shift, as the paper writes them."""
    if rng.random() < 0.5:
        features.add("one-mul")
        return b.node("Mul", [x, b.constant(multiplier, "multiplier", dtype)], "scaled")
    shift = int(rng.integers(8, 17))
    features.add("two-muls")
    scaled = b.node("Mul", [x, b.constant(round(multiplier * 2 ** shift), "quant_scale", dtype)], "scaled")
    return b.node("Mul", [scaled, b.constant(2.0 ** -shift, "quant_shift", dtype)], "shifted")


def _int_frames(rng, storage: str, features: int) -> np.ndarray:
    info = np.iinfo(_STORAGE[storage][0])
    return rng.integers(info.min, info.max + 1, size=(FRAMES, features)).astype(_STORAGE[storage][0])


def intop_case(seed: int) -> DialectCase:
    """MatMulInteger -> Add(int32) -> Cast -> Mul (one or two) -> [Relu] -> QuantizeLinear(1, zp), 1-3 layers."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"intop_{seed}")
    in_storage = ["int8", "uint8"][seed % 2]
    features = {f"input-{in_storage}"}
    n_layers = int(rng.integers(1, 4))
    widths = _widths(rng, n_layers + 1)
    x, storage = "input", in_storage
    for layer in range(n_layers):
        a_zero = 128 if storage == "uint8" and rng.random() < 0.7 else 0
        wide, reach = _integer_layer(b, rng, x, widths[layer], widths[layer + 1], storage, features, a_zero=a_zero)
        y = _rescale(b, rng, wide, float(rng.uniform(60, 200) / reach), features)
        storage = ["int8", "uint8"][(seed // 2 + layer) % 2]
        if rng.random() < 0.5:
            y = b.node("Relu", [y], "relu")
            features.add("relu")
        zero = 0 if storage == "int8" or rng.random() < 0.5 else 128
        x = b.node("QuantizeLinear", [y, b.constant(1.0, "unit_scale"), b.constant(zero, "zero_point",
                                                                                   _STORAGE[storage][0])], "quantized")
        features.add(f"output-{storage}")
    model = b.model(_STORAGE[in_storage][1], widths[0], _STORAGE[storage][1], widths[-1], batch="N")
    return DialectCase(b.name, "intop", model, _int_frames(rng, in_storage, widths[0]), "onnxruntime", True,
                       [UNDETERMINED] * n_layers, features)


def tanh_int8_case(seed: int) -> DialectCase:
    """Figure 4: int8 codes -> DequantizeLinear (another scale) -> Tanh -> QuantizeLinear, between two
    layers; on odd seeds a float bias per channel is added before the Tanh (a table per channel)."""
    rng = np.random.default_rng(seed)
    b = _Builder(f"tanh_int8_{seed}")
    features = {"tanh-int8"}
    widths = _widths(rng, 3)
    wide, reach = _integer_layer(b, rng, "input", widths[0], widths[1], "int8", features)
    codes = b.node("QuantizeLinear", [_rescale(b, rng, wide, float(rng.uniform(60, 200) / reach), features),
                                      b.constant(1.0, "unit_scale"), b.constant(0, "zero_point", np.int8)], "quantized")
    tanh_in = b.node("DequantizeLinear", [codes, b.constant(rng.uniform(2, 5) / 127, "x_scale"),
                                          b.constant(0, "x_zero", np.int8)], "tanh_input")
    if seed % 2:
        features.add("tanh-bias-per-channel")
        tanh_in = b.node("Add", [tanh_in, b.constant(rng.uniform(-0.5, 0.5, size=widths[1]), "tanh_bias")], "biased")
    hidden = b.node("QuantizeLinear", [b.node("Tanh", [tanh_in], "tanh"), b.constant(1 / 127, "y_scale"),
                                       b.constant(0, "y_zero", np.int8)], "hidden")
    wide, reach = _integer_layer(b, rng, hidden, widths[1], widths[2], "int8", features)
    b.node("QuantizeLinear", [_rescale(b, rng, wide, float(rng.uniform(60, 200) / reach), features),
                              b.constant(1.0, "unit_scale"), b.constant(0, "zero_point", np.int8)], "quantized")
    model = b.model(TensorProto.INT8, widths[0], TensorProto.INT8, widths[2], batch="N")
    return DialectCase(b.name, "tanh-int8", model, _int_frames(rng, "int8", widths[0]), "onnxruntime", True,
                       [UNDETERMINED, TABLE, UNDETERMINED], features)


def fp16_case(seed: int) -> DialectCase:
    """Figures 5 and 6: Cast(float16) -> Tanh or Sigmoid -> QuantizeLinear(float16 scale), between two layers.

    The reference is streamc's executor (ONNX semantics): onnxruntime drops the Cast pair it wraps
    around its float32-only Tanh/Sigmoid kernels, so it never rounds to float16 as the model asks.
    """
    rng = np.random.default_rng(seed)
    b = _Builder(f"fp16_{seed}")
    function = ["Tanh", "Sigmoid"][seed % 2]
    features = {f"fp16-{function.lower()}"}
    widths = _widths(rng, 3)
    wide, reach = _integer_layer(b, rng, "input", widths[0], widths[1], "int8", features)
    half = b.node("Cast", [_rescale(b, rng, wide, float(rng.uniform(2, 6) / reach), features)], "half",
                  to=TensorProto.FLOAT16)
    storage = "int8" if function == "Tanh" else "uint8"
    levels = 127 if function == "Tanh" else 255
    hidden = b.node("QuantizeLinear", [b.node(function, [half], function.lower()),
                                       b.constant(1 / levels, "y_scale", np.float16),
                                       b.constant(0, "y_zero", _STORAGE[storage][0])], "hidden")
    wide, reach = _integer_layer(b, rng, hidden, widths[1], widths[2], storage, features)
    b.node("QuantizeLinear", [_rescale(b, rng, wide, float(rng.uniform(60, 200) / reach), features),
                              b.constant(1.0, "unit_scale"), b.constant(0, "zero_point", np.int8)], "quantized")
    model = b.model(TensorProto.INT8, widths[0], TensorProto.INT8, widths[2], opset=19, batch="N")
    return DialectCase(b.name, "fp16", model, _int_frames(rng, "int8", widths[0]), "streamc", True,
                       [UNDETERMINED, UNDETERMINED], features)


MAKERS = {"qonnx": qonnx_case, "qcdq": qcdq_case, "qdq": qdq_case, "qoperator": qoperator_case,
          "intop": intop_case, "tanh-int8": tanh_int8_case, "fp16": fp16_case}
