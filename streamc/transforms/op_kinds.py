"""The kinds of ONNX op the streamline step tells apart, shared by its driver and its parts."""

from __future__ import annotations

from .tidy import SHAPE_OPS

QUANTIZER_OPS = frozenset({"Quant", "BipolarQuant", "QuantizeLinear", "Trunc"})
LINEAR_OPS = frozenset({"MatMul", "MatMulInteger", "Conv", "ConvInteger"})
#: Linear ops on integer codes (the integer-operator dialect): their output is the int32 accumulator.
INTEGER_LINEAR_OPS = frozenset({"MatMulInteger", "ConvInteger"})
CONV_OPS = frozenset({"Conv", "ConvInteger"})
#: Ops between a quantizer and the next linear layer that act on codes as on values: shape ops, and
#: max pooling (the quantizer is monotonic, so the max of codes is the code of the max; a ReduceMax
#: over the spatial axes is a global max pool, as the dynamo exporter writes AdaptiveMaxPool2d(1)).
CODE_OPS = SHAPE_OPS | {"MaxPool", "ReduceMax"}
#: Ops allowed between a linear layer and its quantizer: each is monotonic in its dynamic input.
MONOTONIC_OPS = frozenset({"Add", "Sub", "Mul", "Div", "BatchNormalization", "Relu", "Clip", "Max", "Min",
                           "Neg", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
                           "Tanh", "Sigmoid", "Erf"})
#: Averages mix a window of codes: a linear op of their own, not lowered yet.
AVERAGING_OPS = frozenset({"AveragePool", "GlobalAveragePool", "ReduceMean"})
#: Quantizers may sit inside a monotonic chain too: thresholds absorb all of it.
ABSORBABLE_OPS = MONOTONIC_OPS | QUANTIZER_OPS | {"DequantizeLinear", "Round"}
