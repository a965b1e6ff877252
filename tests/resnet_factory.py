"""MLPerf Tiny's ResNet-8 topology as QONNX, written with onnx.helper, shaped like a Brevitas export.

Input (1, 3, 32, 32) through a signed Quant; a 3x3 convolution to 16 channels; three stacks of two 3x3
convolutions (16, 32, 64 channels; the second and third stacks halve the image with a stride of 2 and
carry their skip through a strided 1x1 convolution); each branch ends in a signed Quant of its own
scale before the residual Add, then ReLU and an unsigned Quant; GlobalAveragePool and a Quant; a dense
layer to 10 classes. Convolutions have per-tensor quantized weights and BatchNorm (or, with
``batchnorm=False``, a Mul and an Add per channel). Scales are powers of two or random floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QDOMAIN = "qonnx.custom_op.general"


@dataclass
class ResNetSpec:
    weight_bits: int = 4
    act_bits: int = 4
    in_bits: int = 8
    #: Channels of the first convolution and of each stack.
    widths: tuple[int, ...] = (16, 16, 32, 64)
    image: int = 32
    classes: int = 10
    pow2_scales: bool = True
    batchnorm: bool = True
    seed: int = 0


class _Builder:
    def __init__(self, spec: ResNetSpec):
        self.spec, self.rng = spec, np.random.default_rng(spec.seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, value, dtype=np.float32) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], domain: str = "", out: str | None = None, **attrs) -> str:
        out = out or self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name(f"node_{op}"), domain=domain, **attrs))
        return out

    def scale(self, low: float, high: float) -> float:
        value = self.rng.uniform(low, high)
        return float(2.0 ** np.round(np.log2(value))) if self.spec.pow2_scales else float(value)

    def quant(self, x: str, bits: int, signed: bool, scale: float, narrow: bool = False) -> str:
        return self.node("Quant", [x, self.const(scale), self.const(0.0), self.const(float(bits))], domain=QDOMAIN,
                         signed=int(signed), narrow=int(narrow), rounding_mode="ROUND")

    def weights(self, shape: tuple[int, ...], fan_in: int) -> str:
        values = self.rng.normal(0, 1 / np.sqrt(fan_in), size=shape)
        scale = self.scale(1.5, 3.0) * float(np.abs(values).max()) / 2 ** (self.spec.weight_bits - 1)
        return self.quant(self.const(values), self.spec.weight_bits, True, scale, narrow=True)

    def conv(self, x: str, c_in: int, c_out: int, kernel: int, stride: int) -> str:
        pad = kernel // 2
        y = self.node("Conv", [x, self.weights((c_out, c_in, kernel, kernel), c_in * kernel * kernel)], kernel_shape=[kernel, kernel],
                      strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=1)
        if self.spec.batchnorm:
            return self.node("BatchNormalization", [y, self.const(self.rng.uniform(0.5, 1.5, c_out)),
                                                    self.const(self.rng.normal(0, 0.2, c_out)),
                                                    self.const(self.rng.normal(0, 0.2, c_out)),
                                                    self.const(self.rng.uniform(0.05, 0.3, c_out))], epsilon=1e-5)
        scaled = self.node("Mul", [y, self.const(self.rng.uniform(0.5, 1.5, (1, c_out, 1, 1)))])
        return self.node("Add", [scaled, self.const(self.rng.normal(0, 0.2, (1, c_out, 1, 1)))])

    def relu_quant(self, x: str) -> str:
        return self.quant(self.node("Relu", [x]), self.spec.act_bits, False, self.scale(0.1, 0.4))

    def branch_quant(self, x: str) -> str:
        return self.quant(x, self.spec.act_bits + 2, True, self.scale(0.05, 0.2))

    def stack(self, x: str, c_in: int, c_out: int, stride: int) -> str:
        branch = self.relu_quant(self.conv(x, c_in, c_out, 3, stride))
        branch = self.branch_quant(self.conv(branch, c_out, c_out, 3, 1))
        skip = x if stride == 1 and c_in == c_out else self.branch_quant(self.conv(x, c_in, c_out, 1, stride))
        return self.relu_quant(self.node("Add", [branch, skip]))


def make_resnet8(spec: ResNetSpec = ResNetSpec()) -> onnx.ModelProto:
    b = _Builder(spec)
    first, *stacks = spec.widths
    x = b.quant("global_in", spec.in_bits, True, 2.0 ** (1 - spec.in_bits))
    x = b.relu_quant(b.conv(x, 3, first, 3, 1))
    channels = first
    for index, width in enumerate(stacks):
        x = b.stack(x, channels, width, 1 if index == 0 else 2)
        channels = width
    pooled = b.quant(b.node("GlobalAveragePool", [x]), spec.act_bits, False, b.scale(0.1, 0.4))
    flat = b.node("Reshape", [pooled, b.const([1, channels], np.int64)])
    b.node("MatMul", [flat, b.weights((channels, spec.classes), channels)], out="global_out")
    size = spec.image
    graph = helper.make_graph(b.nodes, "resnet8", [helper.make_tensor_value_info("global_in", TensorProto.FLOAT,
                                                                                  [1, 3, size, size])],
                              [helper.make_tensor_value_info("global_out", TensorProto.FLOAT, [1, spec.classes])],
                              b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QDOMAIN, 1)])
    return onnx.shape_inference.infer_shapes(model)
