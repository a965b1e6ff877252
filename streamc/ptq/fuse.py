"""Kernel fusion (the RFC's "logical kernels"): a BatchNormalization after a Gemm/MatMul/Conv is folded
into its weights and bias, and ``linear -> [BatchNorm] -> [Relu]`` is one kernel whose ports are its
input, its weights and its output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

LINEAR_OPS = ("Gemm", "MatMul", "Conv")


@dataclass
class Kernel:
    """One logical kernel: ``node`` (Gemm/MatMul/Conv) with constant ``weight``, ending in ``output``."""

    node: onnx.NodeProto
    weight: str
    output: str
    relu: bool
    channel_axis: int   # the weight axis of the output channels (per-channel scales run along it)
    members: tuple[str, ...]  # names of the nodes the kernel holds


def consumers(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    found: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {tensor.name: tensor for tensor in model.graph.initializer}


def _channel_axis(node: onnx.NodeProto) -> int:
    if node.op_type == "Gemm":
        return 0 if any(a.name == "transB" and a.i for a in node.attribute) else 1
    return 0 if node.op_type == "Conv" else 1


def _foldable(node: onnx.NodeProto, inits: dict) -> bool:
    # Gemm's alpha/beta and transA would have to be folded too; such exports are left as they are.
    plain = all(a.name == "transB" or (a.name in ("alpha", "beta") and a.f == 1.0) for a in node.attribute) \
        if node.op_type == "Gemm" else True
    return plain and node.input[1] in inits


def fold_batchnorms(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with every BatchNormalization that is the only reader of a Gemm/MatMul/Conv
    with constant weights folded into them (the linear op takes the BatchNorm's output name)."""
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph = folded.graph
    inits = _initializers(folded)
    readers = consumers(folded)
    producers = {out: node for node in graph.node for out in node.output}
    for bn in [n for n in graph.node if n.op_type == "BatchNormalization"]:
        linear = producers.get(bn.input[0])
        if linear is None or linear.op_type not in LINEAR_OPS or len(readers[bn.input[0]]) != 1 \
                or not _foldable(linear, inits) or not all(name in inits for name in bn.input[1:5]):
            continue
        gamma, beta, mean, var = (numpy_helper.to_array(inits[name]).astype(np.float64) for name in bn.input[1:5])
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        factor = gamma / np.sqrt(var + eps)
        weight = numpy_helper.to_array(inits[linear.input[1]]).astype(np.float64)
        axis = _channel_axis(linear)
        shape = [1] * weight.ndim
        shape[axis] = -1
        has_bias = len(linear.input) > 2 and linear.input[2] in inits
        bias = numpy_helper.to_array(inits[linear.input[2]]).astype(np.float64) if has_bias else np.zeros(len(factor))
        inits[linear.input[1]].CopyFrom(numpy_helper.from_array((weight * factor.reshape(shape)).astype(np.float32),
                                                                 linear.input[1]))
        new_bias = ((bias - mean) * factor + beta).astype(np.float32)
        if linear.op_type == "MatMul":
            # MatMul has no bias input: the folded shift is an Add of its own, still inside the kernel.
            bias_name = f"{bn.name}_folded_bias"
            graph.initializer.append(numpy_helper.from_array(new_bias, bias_name))
            add = helper.make_node("Add", [linear.output[0], bias_name], [bn.output[0]], name=f"{bn.name}_folded")
            graph.node.insert(list(graph.node).index(bn), add)
        else:
            bias_name = linear.input[2] if has_bias else f"{bn.name}_folded_bias"
            if has_bias:
                inits[bias_name].CopyFrom(numpy_helper.from_array(new_bias, bias_name))
            else:
                graph.initializer.append(numpy_helper.from_array(new_bias, bias_name))
                linear.input.append(bias_name)
            linear.output[0] = bn.output[0]
        graph.node.remove(bn)
    used = {name for node in graph.node for name in node.input}
    kept = [tensor for tensor in graph.initializer if tensor.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return folded


def logical_kernels(model: onnx.ModelProto) -> list[Kernel]:
    """The kernels of a graph whose BatchNorms are folded: each linear op with constant weights, the
    bias Add of a folded MatMul and a Relu that is its output's only reader."""
    inits = _initializers(model)
    readers = consumers(model)
    kernels = []
    for node in model.graph.node:
        if node.op_type not in LINEAR_OPS or len(node.input) < 2 or node.input[1] not in inits:
            continue
        members, output = [node.name], node.output[0]
        following = readers.get(output, [])
        if node.op_type == "MatMul" and len(following) == 1 and following[0].op_type == "Add" \
                and following[0].input[1] in inits:
            members.append(following[0].name)
            output = following[0].output[0]
            following = readers.get(output, [])
        relu = len(following) == 1 and following[0].op_type == "Relu"
        if relu:
            members.append(following[0].name)
            output = following[0].output[0]
        kernels.append(Kernel(node, node.input[1], output, relu, _channel_axis(node), tuple(members)))
    return kernels
