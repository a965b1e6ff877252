"""Make one small model of every quantized-ONNX dialect streamc reads, with reference outputs.

Run from the repository root with the ``models`` extra installed (takes about two minutes)::

    python tests/models/dialects/make_dialect_models.py

Everything is deterministic: fixed seeds, one torch thread, deterministic algorithms.
Writes, next to this script:

* ``frames.npy``: the first 64 scikit-learn digits, float32 (64, 64) in [0, 1];
  ``frames_int8.npy``: the same frames as int8, ``round(frame * 127)``.
* ``qcdq_digits.onnx`` / ``qonnx_digits.onnx``: the demo network of
  ``build_configs/models/make_digits_mlp.py``, retrained with its own code and seed, exported
  by Brevitas as QCDQ and as QONNX (the same weights; the QONNX export is checked to equal
  ``build_configs/models/digits_mlp.onnx``).
* ``ort_qdq_mlp.onnx``, ``ort_qdq_s8_mlp.onnx``, ``ort_qoperator_mlp.onnx``: a float 64-32-10
  MLP (scikit-learn) quantized by ``onnxruntime.quantization.quantize_static``.
* ``intop_*.onnx``: the integer-operator patterns of "Pre-Quantized Deep Learning Models
  Codified in ONNX" (figures 1, 2, 4, 5, 6) over the same MLP, written with onnx.helper.
* ``qonnx_attrs_*.onnx``: QONNX MLPs exercising the attributes and ops of QONNX's Quant,
  BipolarQuant and Trunc.
* ``<name>_expected.npy`` for each model: onnxruntime's outputs (graph optimizations off, so
  that the model's own semantics are recorded), or qonnx's for models with QONNX ops;
  ``models.json``: each model's node list, input and output types, and its reference executor.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "models"))
sys.path.insert(0, str(REPO / "build_configs" / "models"))
from qonnx_reference import execute_frames  # noqa: E402

FRAME_COUNT = 64
SEED = 64
QONNX_DOMAIN = "qonnx.custom_op.general"
# onnxruntime 1.31 reads models up to IR version 10 of the opsets used here
IR_VERSION = 10
ROUNDING_MODES = ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]


# ----------------------------------------------------------------------------------------
# Running and saving
# ----------------------------------------------------------------------------------------

def run_onnxruntime(model: onnx.ModelProto, feed: np.ndarray, *, optimized: bool = False) -> np.ndarray:
    """All frames at once, or one at a time where the model's batch dimension is fixed."""
    options = onnxruntime.SessionOptions()
    if not optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    if session.get_inputs()[0].shape[0] == 1:
        return np.concatenate([session.run(None, {name: feed[i:i + 1]})[0] for i in range(len(feed))])
    return session.run(None, {name: feed})[0]


def _type_name(value_info) -> str:
    return TensorProto.DataType.Name(value_info.type.tensor_type.elem_type)


def run_onnxruntime_split(model: onnx.ModelProto, feed: np.ndarray, tensor_name: str) -> np.ndarray:
    """Run the model as two models cut at ``tensor_name``, which is then a graph output and input.

    onnxruntime's CPU provider has no float16 Tanh or Sigmoid kernel: it wraps them in
    Casts to float32 and then removes the pair Cast(float32 -> float16) -> Cast(float16 ->
    float32), so the op sees the unrounded float32 value, whatever the optimization level.
    Cutting the graph at the float16 tensor keeps the rounding the model asks for.
    """
    with tempfile.TemporaryDirectory() as scratch:
        whole = Path(scratch) / "whole.onnx"
        onnx.save(model, whole)
        parts = []
        for index, (inputs, outputs) in enumerate([([model.graph.input[0].name], [tensor_name]),
                                                   ([tensor_name], [model.graph.output[0].name])]):
            part = Path(scratch) / f"part{index}.onnx"
            onnx.utils.extract_model(str(whole), str(part), inputs, outputs, check_model=False)
            parts.append(finish(onnx.load(part)))
    return run_onnxruntime(parts[1], run_onnxruntime(parts[0], feed))


def save(name: str, model: onnx.ModelProto, feed: np.ndarray, catalogue: dict, *, executor: str,
         split_at: str | None = None) -> None:
    """Check, save, run with ``executor`` (cut at ``split_at`` if given) and record the model."""
    onnx.checker.check_model(model)
    onnx.save(model, HERE / f"{name}.onnx")
    if executor == "qonnx":
        expected = execute_frames(model, feed)
    elif split_at:
        expected = run_onnxruntime_split(model, feed, split_at)
    else:
        expected = run_onnxruntime(model, feed)
    np.save(HERE / f"{name}_expected.npy", expected)
    entry = {
        "executor": executor,
        "input": f"{'frames_int8' if feed.dtype == np.int8 else 'frames'}.npy",
        "input_type": _type_name(model.graph.input[0]),
        "output_type": _type_name(model.graph.output[0]),
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "nodes": [node.op_type for node in model.graph.node],
    }
    if executor == "onnxruntime":
        optimized = run_onnxruntime(model, feed, optimized=True)
        entry["optimized_onnxruntime_differs_in"] = int(np.count_nonzero(optimized != expected))
    if split_at:
        entry["split_at"] = split_at
        entry["uncut_onnxruntime_differs_in"] = int(np.count_nonzero(run_onnxruntime(model, feed) != expected))
    catalogue[name] = entry
    print(f"{name}: {len(model.graph.node)} nodes, {(HERE / f'{name}.onnx').stat().st_size} bytes")


def finish(model: onnx.ModelProto) -> onnx.ModelProto:
    model.ir_version = IR_VERSION
    return model


# ----------------------------------------------------------------------------------------
# 1. The demo network as QCDQ and QONNX (Brevitas)
# ----------------------------------------------------------------------------------------

def train_digits_network():
    """The demo network, trained exactly as make_digits_mlp.main does."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    import make_digits_mlp as demo

    torch.manual_seed(demo.SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    frames = (digits.data / demo.PIXEL_MAX).astype(np.float32)
    labels = digits.target.astype(np.int64)
    train_index, _ = train_test_split(
        np.arange(len(frames)), test_size=demo.TEST_FRACTION, random_state=demo.SEED, stratify=labels)
    model = demo.build_model()
    demo.train(model, torch.from_numpy(frames[train_index]), torch.from_numpy(labels[train_index]))
    return model


def make_brevitas_models(frames: np.ndarray, catalogue: dict) -> None:
    import torch
    from brevitas.export import export_onnx_qcdq, export_qonnx

    model = train_digits_network()
    example = torch.zeros(1, 64)
    names = dict(input_names=["global_in"], output_names=["global_out"])
    with tempfile.TemporaryDirectory() as scratch:
        qonnx_model = export_qonnx(model, args=example, export_path=f"{scratch}/qonnx.onnx", dynamo=True,
                                   optimize=True, **names)
        # the TorchScript QCDQ exporter returns nothing; its file is the result
        export_onnx_qcdq(model, args=example, export_path=f"{scratch}/qcdq.onnx", dynamo=False, **names)
        qcdq_model = onnx.load(f"{scratch}/qcdq.onnx")
    demo_model = onnx.load(REPO / "build_configs" / "models" / "digits_mlp.onnx")
    demo_weights = {t.name: numpy_helper.to_array(t) for t in demo_model.graph.initializer}
    same = all(np.array_equal(numpy_helper.to_array(t), demo_weights.get(t.name)) for t in qonnx_model.graph.initializer)
    if not same:
        raise SystemExit("retraining did not reproduce build_configs/models/digits_mlp.onnx's initializers")
    save("qonnx_digits", finish(qonnx_model), frames, catalogue, executor="qonnx")
    save("qcdq_digits", finish(qcdq_model), frames, catalogue, executor="onnxruntime")


# ----------------------------------------------------------------------------------------
# 2. A float MLP quantized by onnxruntime
# ----------------------------------------------------------------------------------------

def train_float_mlp():
    """A 64-32-10 ReLU MLP on all digits: (W1 (64, 32), b1, W2 (32, 10), b2), float32."""
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    classifier = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=SEED)
    classifier.fit(digits.data / 16.0, digits.target)
    return [p.astype(np.float32) for pair in zip(classifier.coefs_, classifier.intercepts_) for p in pair]


def tensor(name: str, elem_type: int, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def float_mlp_model(weights) -> onnx.ModelProto:
    w1, b1, w2, b2 = weights
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["hidden_product"]),
        helper.make_node("Add", ["hidden_product", "b1"], ["hidden_sum"]),
        helper.make_node("Relu", ["hidden_sum"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "w2"], ["logit_product"]),
        helper.make_node("Add", ["logit_product", "b2"], ["logits"]),
    ]
    initializers = [numpy_helper.from_array(a, n) for a, n in zip(weights, ["w1", "b1", "w2", "b2"])]
    graph = helper.make_graph(nodes, "float_mlp", [tensor("input", TensorProto.FLOAT, ["N", 64])],
                              [tensor("logits", TensorProto.FLOAT, ["N", 10])], initializer=initializers)
    return finish(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


class FramesReader:
    """onnxruntime's calibration data reader over the digits frames, one frame a batch."""

    def __init__(self, frames: np.ndarray):
        self._frames = iter(frames[i:i + 1] for i in range(len(frames)))

    def get_next(self):
        frame = next(self._frames, None)
        return None if frame is None else {"input": frame}


def make_onnxruntime_models(weights, frames: np.ndarray, calibration: np.ndarray, catalogue: dict) -> None:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    variants = [
        ("ort_qdq_mlp", QuantFormat.QDQ, QuantType.QUInt8, None),
        ("ort_qdq_s8_mlp", QuantFormat.QDQ, QuantType.QInt8, None),
        # QOperator turns Add into com.microsoft's QLinearAdd: only the MatMuls are quantized,
        # which keeps every node in the standard domain
        ("ort_qoperator_mlp", QuantFormat.QOperator, QuantType.QUInt8, ["MatMul"]),
    ]
    with tempfile.TemporaryDirectory() as scratch:
        float_path = Path(scratch) / "float_mlp.onnx"
        onnx.save(float_mlp_model(weights), float_path)
        for name, quant_format, activation_type, op_types in variants:
            quantized_path = Path(scratch) / f"{name}.onnx"
            quantize_static(float_path, quantized_path, FramesReader(calibration), quant_format=quant_format,
                            activation_type=activation_type, weight_type=QuantType.QInt8,
                            op_types_to_quantize=op_types, per_channel=False)
            save(name, finish(onnx.load(quantized_path)), frames, catalogue, executor="onnxruntime")


# ----------------------------------------------------------------------------------------
# 3. Integer-operator models ("Pre-Quantized Deep Learning Models Codified in ONNX")
# ----------------------------------------------------------------------------------------

INPUT_SCALE = np.float32(1 / 127)  # frames_int8 = round(frame * 127)
SHIFT_BITS = 16


def symmetric_int8(weights: np.ndarray) -> tuple[np.ndarray, np.float32]:
    scale = np.float32(np.abs(weights).max() / 127)
    return np.clip(np.round(weights / scale), -127, 127).astype(np.int8), scale


def integer_multiplier(multiplier: float) -> tuple[np.float32, np.float32]:
    """Quant_scale (an integer stored as float) and Quant_shift (2**-N), the paper's two Muls."""
    return np.float32(round(multiplier * 2**SHIFT_BITS)), np.float32(2.0**-SHIFT_BITS)


class IntegerGraph:
    """Builds the paper's layer patterns node by node."""

    def __init__(self):
        self.nodes, self.initializers = [], []
        self._count = 0

    def constant(self, value: np.ndarray, hint: str) -> str:
        self._count += 1
        name = f"{hint}_{self._count}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type: str, inputs: list[str], hint: str, **attrs) -> str:
        self._count += 1
        output = f"{hint}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output

    def accumulate(self, x: str, w_int8: np.ndarray, bias_int32: np.ndarray, cast_to: int) -> str:
        """MatMulInteger -> Add(int32 bias) -> Cast."""
        product = self.node("MatMulInteger", [x, self.constant(w_int8, "weights")], "accumulator")
        biased = self.node("Add", [product, self.constant(bias_int32, "bias")], "biased")
        return self.node("Cast", [biased], "wide", to=cast_to)

    def rescale_two_muls(self, x: str, multiplier: float, dtype=np.float32) -> str:
        quant_scale, quant_shift = integer_multiplier(multiplier)
        scaled = self.node("Mul", [x, self.constant(quant_scale.astype(dtype), "quant_scale")], "scaled")
        return self.node("Mul", [scaled, self.constant(quant_shift.astype(dtype), "quant_shift")], "shifted")

    def rescale_one_mul(self, x: str, multiplier: float, dtype=np.float32) -> str:
        quant_scale, quant_shift = integer_multiplier(multiplier)
        combined = np.asarray(quant_scale * quant_shift, dtype=dtype)
        return self.node("Mul", [x, self.constant(combined, "quant_multiplier")], "scaled")

    def quantize(self, x: str, scale, zero_point: np.ndarray) -> str:
        return self.node("QuantizeLinear", [x, self.constant(scale, "y_scale"),
                                            self.constant(zero_point, "y_zero_point")], "quantized")

    def model(self, name: str, output: str, output_type: int, opset: int) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        graph = helper.make_graph(self.nodes, name, [tensor("input", TensorProto.INT8, ["N", 64])],
                                  [tensor("output", output_type, ["N", 10])], initializer=self.initializers)
        return finish(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def calibrated_layers(weights, frames: np.ndarray):
    """Per layer: int8 weights, int32 bias, and the float ranges the requantization maps."""
    w1, b1, w2, b2 = weights
    q1, s1 = symmetric_int8(w1)
    q2, s2 = symmetric_int8(w2)
    hidden = frames @ w1 + b1
    logits = np.maximum(hidden, 0) @ w2 + b2
    return {
        "w1": q1, "b1": np.round(b1 / (INPUT_SCALE * s1)).astype(np.int32), "s1": s1,
        "w2": q2, "w2_scale": s2, "b2": b2, "hidden_range": float(np.abs(hidden).max()),
        "logit_range": float(np.abs(logits).max()),
    }


def second_layer(graph: IntegerGraph, x: str, layers: dict, x_scale: float) -> str:
    """The int8 logits layer (figure 1's pattern) on int8 or uint8 activations of scale x_scale."""
    bias = np.round(layers["b2"] / (x_scale * layers["w2_scale"])).astype(np.int32)
    wide = graph.accumulate(x, layers["w2"], bias, TensorProto.FLOAT)
    logit_scale = layers["logit_range"] / 127
    rescaled = graph.rescale_two_muls(wide, x_scale * layers["w2_scale"] / logit_scale)
    return graph.quantize(rescaled, np.float32(1.0), np.int8(0))


def make_integer_models(weights, frames: np.ndarray, frames_int8: np.ndarray, catalogue: dict) -> None:
    layers = calibrated_layers(weights, frames)
    accumulator_scale = INPUT_SCALE * layers["s1"]

    # figure 1: two layers without activation, rescaled with two Muls
    graph = IntegerGraph()
    wide = graph.accumulate("input", layers["w1"], layers["b1"], TensorProto.FLOAT)
    hidden_scale = layers["hidden_range"] / 127
    hidden = graph.quantize(graph.rescale_two_muls(wide, accumulator_scale / hidden_scale), np.float32(1.0), np.int8(0))
    second_layer(graph, hidden, layers, hidden_scale)
    save("intop_fc", graph.model("intop_fc", "output", TensorProto.INT8, 13), frames_int8, catalogue,
         executor="onnxruntime")

    # figure 2: ReLU on the rescaled float value, one Mul, before the rounding QuantizeLinear
    graph = IntegerGraph()
    wide = graph.accumulate("input", layers["w1"], layers["b1"], TensorProto.FLOAT)
    relu = graph.node("Relu", [graph.rescale_one_mul(wide, accumulator_scale / hidden_scale)], "relu")
    hidden = graph.quantize(relu, np.float32(1.0), np.int8(0))
    second_layer(graph, hidden, layers, hidden_scale)
    save("intop_fc_relu", graph.model("intop_fc_relu", "output", TensorProto.INT8, 13), frames_int8, catalogue,
         executor="onnxruntime")

    # figure 4: int8 tanh. The rescale maps tanh's input range [-4, 4] onto int8, the
    # DequantizeLinear brings it back to float, Tanh in float32, y_scale maps [-1, 1] onto int8
    tanh_input_scale = np.float32(4 / 127)
    tanh_output_scale = np.float32(1 / 127)
    graph = IntegerGraph()
    wide = graph.accumulate("input", layers["w1"], layers["b1"], TensorProto.FLOAT)
    tanh_input = graph.quantize(graph.rescale_two_muls(wide, accumulator_scale / tanh_input_scale),
                                np.float32(1.0), np.int8(0))
    real = graph.node("DequantizeLinear", [tanh_input, graph.constant(tanh_input_scale, "x_scale"),
                                           graph.constant(np.int8(0), "x_zero_point")], "tanh_input")
    hidden = graph.quantize(graph.node("Tanh", [real], "tanh"), tanh_output_scale, np.int8(0))
    second_layer(graph, hidden, layers, tanh_output_scale)
    save("intop_tanh_int8", graph.model("intop_tanh_int8", "output", TensorProto.INT8, 13), frames_int8, catalogue,
         executor="onnxruntime")

    # figure 5: fp16 tanh. The int32 accumulator goes to float32 (a float16 would overflow
    # above 65504), is rescaled onto tanh's narrow input range [-3, 3] in units, then
    # converted to float16 for Tanh; QuantizeLinear (opset 19) takes the float16 directly
    graph = IntegerGraph()
    wide = graph.accumulate("input", layers["w1"], layers["b1"], TensorProto.FLOAT)
    rescaled = graph.rescale_two_muls(wide, accumulator_scale * 3 / layers["hidden_range"])
    half = graph.node("Cast", [rescaled], "half", to=TensorProto.FLOAT16)
    tanh = graph.node("Tanh", [half], "tanh")
    hidden = graph.quantize(tanh, np.float16(1 / 127), np.int8(0))
    second_layer(graph, hidden, layers, float(np.float16(1 / 127)))
    save("intop_tanh_fp16", graph.model("intop_tanh_fp16", "output", TensorProto.INT8, 19), frames_int8, catalogue,
         executor="onnxruntime", split_at=half)

    # figure 6: fp16 sigmoid, one Mul, uint8 output (sigmoid is positive)
    graph = IntegerGraph()
    wide = graph.accumulate("input", layers["w1"], layers["b1"], TensorProto.FLOAT)
    rescaled = graph.rescale_one_mul(wide, accumulator_scale * 6 / layers["hidden_range"])
    half = graph.node("Cast", [rescaled], "half", to=TensorProto.FLOAT16)
    sigmoid = graph.node("Sigmoid", [half], "sigmoid")
    hidden = graph.quantize(sigmoid, np.float16(1 / 255), np.uint8(0))
    second_layer(graph, hidden, layers, float(np.float16(1 / 255)))
    save("intop_sigmoid_fp16", graph.model("intop_sigmoid_fp16", "output", TensorProto.INT8, 19), frames_int8,
         catalogue, executor="onnxruntime", split_at=half)


# ----------------------------------------------------------------------------------------
# 4. QONNX attribute models
# ----------------------------------------------------------------------------------------

class QonnxGraph(IntegerGraph):
    def quant(self, x: str, scale, zero_point, bit_width, *, signed: int, narrow: int, rounding_mode="ROUND"):
        inputs = [x, self.constant(np.asarray(scale, np.float32), "scale"),
                  self.constant(np.asarray(zero_point, np.float32), "zero_point"),
                  self.constant(np.asarray(bit_width, np.float32), "bit_width")]
        self._count += 1
        output = f"quant_{self._count}"
        self.nodes.append(helper.make_node("Quant", inputs, [output], name=output, domain=QONNX_DOMAIN,
                                           signed=signed, narrow=narrow, rounding_mode=rounding_mode))
        return output

    def qonnx_node(self, op_type: str, inputs: list[str], hint: str, **attrs) -> str:
        self._count += 1
        output = f"{hint}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, domain=QONNX_DOMAIN, **attrs))
        return output

    def weights(self, values: np.ndarray, **quant) -> str:
        return self.quant(self.constant(values, "float_weights"), **quant)

    def model(self, name: str, output: str, qonnx_opset: int = 1) -> onnx.ModelProto:
        self.nodes[-1].output[0] = "output"
        # qonnx's executor needs the fixed shape of one frame
        graph = helper.make_graph(self.nodes, name, [tensor("input", TensorProto.FLOAT, [1, 64])],
                                  [tensor("output", TensorProto.FLOAT, [1, 10])], initializer=self.initializers)
        opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, qonnx_opset)]
        return finish(helper.make_model(graph, opset_imports=opsets))


def qonnx_mlp(weights, *, input_quant: dict, w1_quant: dict, hidden: callable, w2_quant: dict,
              qonnx_opset: int = 1, name: str) -> onnx.ModelProto:
    """input Quant -> MatMul(Quant(W1)) -> Add(b1) -> hidden(graph, x) -> MatMul(Quant(W2)) -> Add(b2)."""
    w1, b1, w2, b2 = weights
    graph = QonnxGraph()
    x = graph.quant("input", **input_quant)
    product = graph.node("MatMul", [x, graph.weights(w1, **w1_quant)], "product")
    x = hidden(graph, graph.node("Add", [product, graph.constant(b1, "b1")], "hidden_sum"))
    product = graph.node("MatMul", [x, graph.weights(w2, **w2_quant)], "product")
    graph.node("Add", [product, graph.constant(b2, "b2")], "logits")
    return graph.model(name, "output", qonnx_opset)


UINT4_INPUT = dict(scale=1 / 15, zero_point=0, bit_width=4, signed=0, narrow=0)


def int_weights(values: np.ndarray, bits: int, *, per_channel=False, narrow=1, zero_point=0.0):
    reach = np.abs(values).max(axis=0, keepdims=True) if per_channel else np.abs(values).max()
    scale = (reach / (2 ** (bits - 1) - 1)).astype(np.float32)
    return dict(scale=scale, zero_point=zero_point, bit_width=bits, signed=1, narrow=narrow)


def relu_quant(bits, scale, *, rounding_mode="ROUND", zero_point=0.0):
    def hidden(graph, x):
        relu = graph.node("Relu", [x], "relu")
        return graph.quant(relu, scale, zero_point, bits, signed=0, narrow=0, rounding_mode=rounding_mode)
    return hidden


def make_qonnx_models(weights, frames: np.ndarray, catalogue: dict) -> None:
    w1, _, w2, _ = weights
    hidden_scale = np.float32(0.25)

    for mode in ROUNDING_MODES:
        name = f"qonnx_attrs_round_{mode.lower()}"
        model = qonnx_mlp(weights, input_quant=UINT4_INPUT, w1_quant=int_weights(w1, 4),
                          hidden=relu_quant(4, hidden_scale, rounding_mode=mode), w2_quant=int_weights(w2, 4),
                          name=name)
        save(name, model, frames, catalogue, executor="qonnx")

    # narrow signed weights with per-output-channel scales, unsigned narrow activation
    model = qonnx_mlp(
        weights, input_quant=dict(UINT4_INPUT, narrow=1), w1_quant=int_weights(w1, 3, per_channel=True),
        hidden=lambda g, x: g.quant(g.node("Relu", [x], "relu"), hidden_scale, 0, 3, signed=0, narrow=1),
        w2_quant=int_weights(w2, 5, per_channel=True), name="qonnx_attrs_narrow_per_channel")
    save("qonnx_attrs_narrow_per_channel", model, frames, catalogue, executor="qonnx")

    # a signed activation of 7.5 bits (qonnx's bounds are then non-integer)
    model = qonnx_mlp(
        weights, input_quant=UINT4_INPUT, w1_quant=int_weights(w1, 8),
        hidden=lambda g, x: g.quant(x, np.float32(1 / 16), 0, 7.5, signed=1, narrow=0),
        w2_quant=int_weights(w2, 8), name="qonnx_attrs_bitwidth_7p5")
    save("qonnx_attrs_bitwidth_7p5", model, frames, catalogue, executor="qonnx")

    # 1-bit signed Quant weights (qonnx makes them bipolar) and a BipolarQuant activation
    def bipolar(graph, x):
        return graph.qonnx_node("BipolarQuant", [x, graph.constant(np.float32(1.0), "scale")], "bipolar")

    model = qonnx_mlp(
        weights, input_quant=UINT4_INPUT, w1_quant=dict(scale=np.float32(np.abs(w1).mean()), zero_point=0,
                                                        bit_width=1, signed=1, narrow=0),
        hidden=bipolar, w2_quant=int_weights(w2, 2), name="qonnx_attrs_bipolar")
    save("qonnx_attrs_bipolar", model, frames, catalogue, executor="qonnx")

    # nonzero zero points on the input, the weights and the hidden activation
    model = qonnx_mlp(
        weights, input_quant=dict(UINT4_INPUT, zero_point=3.0, scale=1 / 12),
        w1_quant=int_weights(w1, 4, narrow=0, zero_point=1.0),
        hidden=relu_quant(4, hidden_scale, zero_point=2.0), w2_quant=int_weights(w2, 4, narrow=0, zero_point=-2.0),
        name="qonnx_attrs_zero_points")
    save("qonnx_attrs_zero_points", model, frames, catalogue, executor="qonnx")

    # Trunc as the activation quantizer after the first MatMul, on its integer accumulator
    # (input scale x weight scale, no bias Add in between), then a ReLU
    w1_quant = int_weights(w1, 4)
    accumulator_scale = np.float32(np.float32(1 / 15) * w1_quant["scale"])

    def trunc_mlp(name: str, qonnx_opset: int, trunc_inputs) -> onnx.ModelProto:
        graph = QonnxGraph()
        x = graph.quant("input", **UINT4_INPUT)
        product = graph.node("MatMul", [x, graph.weights(w1, **w1_quant)], "product")
        truncated = graph.qonnx_node("Trunc", [product] + [graph.constant(np.asarray(v, np.float32), "trunc")
                                                           for v in trunc_inputs], "trunc", rounding_mode="FLOOR")
        relu = graph.node("Relu", [truncated], "relu")
        product = graph.node("MatMul", [relu, graph.weights(w2, **int_weights(w2, 4))], "product")
        graph.node("Add", [product, graph.constant(weights[3], "b2")], "logits")
        return graph.model(name, "output", qonnx_opset)

    model = trunc_mlp("qonnx_attrs_trunc_v1", 1, [accumulator_scale, 0.0, 12.0, 6.0])
    save("qonnx_attrs_trunc_v1", model, frames, catalogue, executor="qonnx")
    model = trunc_mlp("qonnx_attrs_trunc_v2", 2, [accumulator_scale, 0.0, 12.0, accumulator_scale * 64, 6.0])
    save("qonnx_attrs_trunc_v2", model, frames, catalogue, executor="qonnx")


def main():
    from sklearn.datasets import load_digits

    digits = load_digits()
    all_frames = (digits.data / 16.0).astype(np.float32)
    frames = all_frames[:FRAME_COUNT].copy()
    frames_int8 = np.round(frames * 127).astype(np.int8)
    np.save(HERE / "frames.npy", frames)
    np.save(HERE / "frames_int8.npy", frames_int8)
    weights = train_float_mlp()
    catalogue: dict = {}
    make_integer_models(weights, all_frames, frames_int8, catalogue)
    make_qonnx_models(weights, frames, catalogue)
    make_onnxruntime_models(weights, frames, all_frames[FRAME_COUNT:FRAME_COUNT + 256], catalogue)
    make_brevitas_models(frames, catalogue)
    (HERE / "models.json").write_text(json.dumps(catalogue, indent=1) + "\n")


if __name__ == "__main__":
    main()
