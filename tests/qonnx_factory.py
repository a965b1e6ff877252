"""Small random QONNX MLPs written with onnx.helper, shaped like Brevitas exports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QDOMAIN = "qonnx.custom_op.general"


@dataclass
class LayerSpec:
    out_features: int
    weight_bits: int = 2          # 1 means BipolarQuant
    act_bits: int | None = 2      # None: no quantizer after (the last layer); 1 means BipolarQuant
    act_signed: bool = True
    narrow_weights: bool = True
    batchnorm: bool = True
    relu: bool = False
    bias: bool = False
    per_channel_weight_scale: bool = False
    gemm: bool = True


@dataclass
class MlpSpec:
    in_features: int
    layers: list[LayerSpec]
    in_bits: int = 8
    in_signed: bool = True
    seed: int = 0
    negative_bn: bool = True
    act_scale: float = 0.5
    extra_tail: bool = True
    name: str = "mlp"
    opset: int = 13
    rounding_mode: str = "ROUND"


def make_mlp(spec: MlpSpec) -> onnx.ModelProto:
    rng = np.random.default_rng(spec.seed)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def quant(x, out, bits, signed, narrow, scale, name):
        if bits == 1:
            nodes.append(helper.make_node("BipolarQuant", [x, const(f"{name}_s", scale)], [out], name=name, domain=QDOMAIN))
        else:
            nodes.append(helper.make_node(
                "Quant", [x, const(f"{name}_s", scale), const(f"{name}_z", 0.0), const(f"{name}_b", bits)], [out],
                name=name, domain=QDOMAIN, signed=int(signed), narrow=int(narrow), rounding_mode=spec.rounding_mode))

    x = "input"
    quant(x, "q0", spec.in_bits, spec.in_signed, False, 1.0 / 2 ** (spec.in_bits - 1), "QuantIn")
    x, fan_in = "q0", spec.in_features
    for i, layer in enumerate(spec.layers):
        w = rng.normal(size=(layer.out_features, fan_in)).astype(np.float32)
        w_scale = (2.0 ** rng.integers(-3, 0, size=(layer.out_features, 1))).astype(np.float32) \
            if layer.per_channel_weight_scale else np.float32(0.25)
        quant(const(f"W{i}", w), f"W{i}_q", layer.weight_bits, True, layer.narrow_weights, w_scale, f"WeightQuant{i}")
        out = f"fc{i}"
        if layer.gemm:
            inputs = [x, f"W{i}_q"] + ([const(f"B{i}", rng.normal(size=layer.out_features))] if layer.bias else [])
            nodes.append(helper.make_node("Gemm", inputs, [out], name=f"Gemm{i}", transB=1))
        else:
            nodes.append(helper.make_node("Transpose", [f"W{i}_q"], [f"W{i}_t"], name=f"Transpose{i}", perm=[1, 0]))
            nodes.append(helper.make_node("MatMul", [x, f"W{i}_t"], [out], name=f"MatMul{i}"))
            if layer.bias:
                nodes.append(helper.make_node("Add", [out, const(f"B{i}", rng.normal(size=layer.out_features))],
                                              [out + "_b"], name=f"Bias{i}"))
                out += "_b"
        x = out
        if layer.batchnorm:
            c = layer.out_features
            gamma = rng.uniform(0.5, 2.0, size=c)
            if spec.negative_bn:
                gamma *= np.where(rng.random(c) < 0.3, -1, 1)
            nodes.append(helper.make_node(
                "BatchNormalization",
                [x, const(f"bn{i}_g", gamma), const(f"bn{i}_b", rng.normal(size=c)),
                 const(f"bn{i}_m", rng.normal(size=c) * fan_in ** 0.5 * 0.1), const(f"bn{i}_v", rng.uniform(0.5, 4, size=c) * fan_in * 0.05)],
                [x + "_bn"], name=f"BatchNorm{i}", epsilon=1e-5))
            x += "_bn"
        if layer.relu:
            nodes.append(helper.make_node("Relu", [x], [x + "_relu"], name=f"Relu{i}"))
            x += "_relu"
        fan_in = layer.out_features
        if layer.act_bits is not None:
            quant(x, f"a{i}", layer.act_bits, layer.act_signed, False, spec.act_scale, f"ActQuant{i}")
            x = f"a{i}"
    if spec.extra_tail:
        nodes.append(helper.make_node("Mul", [x, const("tail_scale", rng.uniform(0.5, 2, size=fan_in))], ["tail_mul"], name="TailMul"))
        nodes.append(helper.make_node("Add", ["tail_mul", const("tail_bias", rng.normal(size=fan_in))], ["output"], name="TailAdd"))
    else:
        nodes.append(helper.make_node("Identity", [x], ["output"], name="Out"))
    graph = helper.make_graph(
        nodes, spec.name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, spec.in_features])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, fan_in])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec.opset), helper.make_opsetid(QDOMAIN, 1)])
    model.ir_version = 10
    return model


def random_frames(spec: MlpSpec, count: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.2, 1.2, size=(count, 1, spec.in_features)).astype(np.float32)
