"""Random quantized networks for differential fuzzing, and the checks each one must pass.

A network is described by a :class:`NetworkSpec`, a small frozen value that says everything
about it (hypothesis prints it when a check fails, and it is what a benchmark failure reports).
Specs come from one function, :func:`network_spec`, that asks a *chooser* for every decision; two
choosers drive it:

- :func:`network_specs`, a hypothesis strategy (``hypothesis.strategies.composite``): examples
  shrink towards small, plain networks, since every choice shrinks towards its first option;
- :func:`spec_from_seed`, a numpy generator seeded with an integer: the benchmark's cases, each
  replayable from its seed alone.

Three families of networks:

- ``mlp``: :func:`qonnx_factory.make_mlp` (Brevitas-shaped QONNX MLPs: Gemm or MatMul, BatchNorm
  with negative scales, per-channel weight scales, bipolar and narrow weights, a float tail);
- ``cnn``: :func:`make_cnn` below, built with :mod:`dialect_factory`'s graph builder: 1-D or 2-D
  convolutions (kernels 1-3, strides 1-2, asymmetric zero padding), BatchNorm, ReLU, an activation
  quantizer per layer (1-8 bits, signed or not, narrow, any rounding mode), max pools, Flatten
  and dense layers;
- ``dialect``: :data:`dialect_factory.MAKERS` cases (QONNX with Trunc and zero points, QCDQ, QDQ,
  QOperator, integer operators, an int8 Tanh table, float16 Tanh/Sigmoid), chosen by seed.

Every spec also picks a folding (a divisor of each layer's MH for PE and of MW for SIMD) and the
seed of its input frames.

Every network has a reference independent of streamc (:meth:`FuzzNetwork.reference_outputs`):
qonnx's executor for QONNX models, :func:`exact_model.run_frames` for the onnxruntime dialects. The
checks (:func:`check_reference`, :func:`check_emulation`, :func:`check_verilator`) compare every
frame they run with it, raise :class:`FuzzFailure` when two executions disagree (or the hardware
fails in simulation) and let a :class:`~streamc.errors.StreamcError` through when streamc refuses the
network (from load up to fold). :func:`outcome` says whether an error is a refusal (with a key to
count refusals by) or a failure: a StreamcError that reports an internal inconsistency is a failure.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import dialect_factory
import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper
from qonnx_factory import LayerSpec, MlpSpec, make_mlp, random_frames
from test_dialects_random import assert_matches

from streamc.errors import BuildError, StreamcError
from streamc.execute import execute
from streamc.frontend.load import graph_from_model
from streamc.hw import Dataflow, to_hw
from streamc.ir import Graph
from streamc.pipeline.config import BuildConfig, LayerFolding
from streamc.pipeline.folder import BuildFolder
from streamc.pipeline.steps import (
    STEP_FUNCTIONS,
    TOP,
    BuildState,
    _timeout_cycles,
    expected_hw_outputs,
)
from streamc.rtl.placement import RAM_STYLES, RES_TYPES
from streamc.rtl.rom_files import rom_files
from streamc.sim.runner import simulate
from streamc.stages import MVAULayer, divisors
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROUNDING_MODES = dialect_factory.ROUNDING_MODES
#: Dialect makers the ``dialect`` family draws from: all of them.
DIALECTS = tuple(dialect_factory.MAKERS)
#: How a convolution's bias is written: the Conv's third input, or an Add of a (C, 1, ...) constant after it.
CONV_BIAS_SPELLINGS = ("none", "add", "input")
#: Frames streamed through Verilator per network: enough for random stalls to matter, few for speed.
SIM_FRAMES = 12
#: Frames in :func:`check_reference` alone (qonnx's executor runs one frame at a time, node by node).
QONNX_FRAMES = 4
#: Units in the last place of the largest output an inexact output may be off by. Both references run a
#: float MatMul in onnxruntime, which rounds every float32 partial sum, where streamc rounds the exact
#: accumulator once: over 1,500 QCDQ cases of 12 frames that came to at most 3 ulps against exact_model,
#: 2 over 300 QONNX cases against qonnx (test_dialects_random allows qonnx 2, on its fixed seeds). A
#: quantizer that decided differently moves an output by a whole step, far beyond this.
REFERENCE_ULPS = 4
#: Part of a StreamcError's message that marks an internal inconsistency streamc caught in itself, not a
#: refusal of its input (see streamc.hw.to_hw and streamc.pipeline.steps.expected_hw_outputs).
STREAMC_BUG = "a streamc bug"
PIPELINE = ("load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim")


# ------------------------------------------------------------------------------------------------
# Specs
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quantizer:
    """An activation (or input) quantizer: ``bits == 1`` is a BipolarQuant.

    ``scale_shift`` moves the power-of-two scale from the one that fits the expected range of the
    values (``-1``: finer, more clipping; ``+1``: coarser).
    """

    bits: int
    signed: bool = True
    narrow: bool = False
    rounding: str = "ROUND"
    scale_shift: int = 0


@dataclass(frozen=True)
class Weights:
    """A weight quantizer: ``bits == 1`` is a BipolarQuant; scales are powers of two."""

    bits: int
    narrow: bool = False
    per_channel: bool = False


@dataclass(frozen=True)
class ConvLayer:
    channels: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]                 # ONNX order: every axis' begin, then every axis' end
    weights: Weights
    act: Quantizer
    bias: str = "none"                    # one of CONV_BIAS_SPELLINGS
    batchnorm: bool = False
    relu: bool = False
    pool: tuple[tuple[int, ...], tuple[int, ...]] | None = None   # (kernel, strides) of a MaxPool


@dataclass(frozen=True)
class DenseLayer:
    features: int
    weights: Weights
    act: Quantizer | None                 # None: the accumulator goes to the float tail
    bias: bool = False
    batchnorm: bool = False
    relu: bool = False


@dataclass(frozen=True)
class CnnSpec:
    in_shape: tuple[int, ...]             # (C, *spatial), one or two spatial axes
    input: Quantizer
    convs: tuple[ConvLayer, ...]
    dense: tuple[DenseLayer, ...]
    tail: bool = False                    # a per-feature float Mul and Add after the last layer
    seed: int = 0


@dataclass(frozen=True)
class NetworkSpec:
    """One random network: its family's description, a folding and the seed of its frames.

    ``folding`` holds ``(pe_pick, simd_pick, placement_pick)`` per matrix layer (cycled if there are
    more layers): layer ``i`` gets the ``pe_pick``-th divisor of its MH and the ``simd_pick``-th of
    its MW, modulo their count, and the placement of its ROMs and multiplies ``placement_pick`` names
    (:func:`placement_of`).
    """

    family: str
    mlp: MlpSpec | None = None
    cnn: CnnSpec | None = None
    dialect: tuple[str, int] | None = None
    folding: tuple[tuple[int, int, int], ...] = ((0, 0, 0),)
    frames_seed: int = 0


@dataclass
class FuzzNetwork:
    """A spec made concrete: the model, its frames, and how its outputs are checked.

    ``reference`` names the executor, independent of streamc, that defines the outputs: ``"qonnx"``
    (qonnx's, for QONNX models) or ``"exact_model"`` (:func:`exact_model.run_frames`, for the
    onnxruntime dialects). ``exact`` says whether the outputs must equal it bit for bit, or be within
    :data:`REFERENCE_ULPS` units in the last place of the largest output.
    """

    spec: NetworkSpec
    model: onnx.ModelProto
    frames: np.ndarray
    reference: str = "qonnx"
    exact: bool = True
    _reference_outputs: np.ndarray | None = field(default=None, repr=False)

    def reference_outputs(self) -> np.ndarray:
        """The reference's outputs for every frame, computed once (qonnx's executor is slow)."""
        if self._reference_outputs is None:
            self._reference_outputs = run_reference(self.model, self.frames, self.reference)
        return self._reference_outputs


class FuzzFailure(AssertionError):
    """Two executions of the same network disagree, or the compiled hardware fails in simulation:
    a streamc bug (or a reference's)."""


# ------------------------------------------------------------------------------------------------
# Choosers: the same generator driven by hypothesis or by a seeded numpy generator
# ------------------------------------------------------------------------------------------------

class _HypothesisChooser:
    def __init__(self, draw):
        self._draw = draw

    def integer(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))

    def chance(self, percent: int) -> bool:
        # Shrinks towards False: the plainer network.
        return self._draw(st.integers(0, 99)) >= 100 - percent

    def pick(self, options):
        return self._draw(st.sampled_from(options))


class _RandomChooser:
    def __init__(self, rng: np.random.Generator):
        self._rng = rng

    def integer(self, low: int, high: int) -> int:
        return int(self._rng.integers(low, high + 1))

    def chance(self, percent: int) -> bool:
        return bool(self._rng.integers(0, 100) >= 100 - percent)

    def pick(self, options):
        return options[int(self._rng.integers(len(options)))]


def _quantizer(choose, *, allow_bipolar: bool = True) -> Quantizer:
    bits = choose.integer(1 if allow_bipolar else 2, 8)
    signed = bits == 1 or choose.chance(50)
    return Quantizer(bits=bits, signed=signed, narrow=bits >= 2 and signed and choose.chance(30),
                     rounding=choose.pick(ROUNDING_MODES), scale_shift=choose.integer(-1, 1))


def _weights(choose) -> Weights:
    bits = choose.integer(1, 8)
    return Weights(bits=bits, narrow=bits >= 2 and choose.chance(50), per_channel=choose.chance(50))


def _conv_layer(choose, spatial: tuple[int, ...]) -> tuple[ConvLayer, tuple[int, ...]]:
    kernel = tuple(choose.integer(1, min(3, size)) for size in spatial)
    strides = tuple(choose.integer(1, 2) for _ in spatial)
    begin = tuple(choose.integer(0, k - 1) for k in kernel)
    end = tuple(choose.integer(0, k - 1) for k in kernel)
    out = tuple((size + b + e - k) // s + 1 for size, k, s, b, e in zip(spatial, kernel, strides, begin, end))
    pool = None
    if choose.chance(40) and min(out) >= 2:
        pool_kernel = tuple(choose.integer(2, min(3, size)) for size in out)
        pool_strides = tuple(choose.integer(1, k) for k in pool_kernel)
        pool = (pool_kernel, pool_strides)
        out = tuple((size - k) // s + 1 for size, k, s in zip(out, pool_kernel, pool_strides))
    layer = ConvLayer(channels=choose.integer(1, 5), kernel=kernel, strides=strides, pads=begin + end,
                      weights=_weights(choose), act=_quantizer(choose), bias=choose.pick(CONV_BIAS_SPELLINGS),
                      batchnorm=choose.chance(50), relu=choose.chance(30), pool=pool)
    return layer, out


def _dense_layer(choose, *, last: bool) -> DenseLayer:
    act = None if last and choose.chance(50) else _quantizer(choose)
    return DenseLayer(features=choose.integer(1, 8), weights=_weights(choose), act=act, bias=choose.chance(40),
                      batchnorm=choose.chance(50), relu=choose.chance(30))


def _cnn_spec(choose) -> CnnSpec:
    dims = choose.integer(1, 2)
    spatial = tuple(choose.integer(3, 10 if dims == 1 else 6) for _ in range(dims))
    in_shape = (choose.integer(1, 3), *spatial)
    convs = []
    for _ in range(choose.integer(1, 2)):
        layer, spatial = _conv_layer(choose, spatial)
        convs.append(layer)
    n_dense = choose.integer(1, 2)
    dense = tuple(_dense_layer(choose, last=i == n_dense - 1) for i in range(n_dense))
    return CnnSpec(in_shape=in_shape, input=_quantizer(choose, allow_bipolar=False), convs=tuple(convs),
                   dense=dense, tail=choose.chance(50), seed=choose.integer(0, 2**31 - 1))


def _mlp_spec(choose) -> MlpSpec:
    n_layers = choose.integer(1, 3)
    layers = []
    for i in range(n_layers):
        last = i == n_layers - 1
        act_bits = None if last and choose.chance(60) else choose.integer(1, 8)
        layers.append(LayerSpec(out_features=choose.integer(1, 10), weight_bits=choose.integer(1, 8), act_bits=act_bits,
                                act_signed=act_bits == 1 or choose.chance(50), narrow_weights=choose.chance(50),
                                batchnorm=choose.chance(60), relu=choose.chance(30), bias=choose.chance(40),
                                per_channel_weight_scale=choose.chance(50), gemm=not choose.chance(30)))
    return MlpSpec(in_features=choose.integer(1, 12), layers=layers, in_bits=choose.integer(2, 8),
                   in_signed=choose.chance(50), seed=choose.integer(0, 2**31 - 1), negative_bn=choose.chance(70),
                   act_scale=choose.pick((0.5, 0.25, 1.0)), extra_tail=choose.chance(50),
                   rounding_mode=choose.pick(ROUNDING_MODES), name="fuzz_mlp")


def network_spec(choose) -> NetworkSpec:
    """A random :class:`NetworkSpec`; every decision is asked of ``choose``."""
    family = choose.pick(("mlp", "cnn", "dialect"))
    folding = tuple((choose.integer(0, 15), choose.integer(0, 15), choose.integer(0, 17))
                    for _ in range(choose.integer(1, 4)))
    common = dict(family=family, folding=folding, frames_seed=choose.integer(0, 2**31 - 1))
    if family == "mlp":
        return NetworkSpec(mlp=_mlp_spec(choose), **common)
    if family == "cnn":
        return NetworkSpec(cnn=_cnn_spec(choose), **common)
    return NetworkSpec(dialect=(choose.pick(DIALECTS), choose.integer(0, 10_000)), **common)


@st.composite
def network_specs(draw) -> NetworkSpec:
    """Hypothesis strategy of :class:`NetworkSpec` values."""
    return network_spec(_HypothesisChooser(draw))


def spec_from_seed(seed: int) -> NetworkSpec:
    """The benchmark's case ``seed``: the same spec on every run and machine."""
    return network_spec(_RandomChooser(np.random.default_rng(seed)))


# ------------------------------------------------------------------------------------------------
# Building the models
# ------------------------------------------------------------------------------------------------

def _levels(q: Quantizer) -> int:
    """How many scale steps the quantizer reaches on its larger side."""
    if q.bits == 1:
        return 1
    return 2 ** (q.bits - 1) if q.signed else 2 ** q.bits - 1


def _pow2_near(value: float) -> float:
    return float(2.0 ** round(math.log2(max(value, 2.0 ** -12))))


def _quantize(b, x: str, q: Quantizer, magnitude: float) -> tuple[str, float]:
    """Quantize ``x`` (values of about ``magnitude``); returns the tensor and its magnitude."""
    scale = _pow2_near(2 * magnitude / _levels(q)) * 2.0 ** q.scale_shift
    if q.bits == 1:
        out = b.node("BipolarQuant", [x, b.constant(scale, "scale")], "bipolar", domain=dialect_factory.QONNX_DOMAIN)
        return out, scale
    out = dialect_factory._quant(b, x, scale, 0.0, q.bits, signed=int(q.signed), narrow=int(q.narrow),
                                 rounding=q.rounding)
    return out, scale * _levels(q) / 2


def _weight_tensor(b, rng, shape: tuple[int, ...], w: Weights) -> tuple[str, float]:
    """Quantized weights of ``shape`` (output channels first); returns the tensor and its typical size."""
    scale_shape = (shape[0],) + (1,) * (len(shape) - 1) if w.per_channel else ()
    scale = (2.0 ** rng.integers(-3, 1, size=scale_shape)).astype(np.float32)
    codes_rms = 1.0 if w.bits == 1 else max(1.0, 2 ** (w.bits - 1) / 2)
    values = (rng.normal(size=shape) * codes_rms * scale).astype(np.float32)
    if w.bits == 1:
        out = b.node("BipolarQuant", [b.constant(values, "float_weights"), b.constant(scale, "scale")], "weights",
                     domain=dialect_factory.QONNX_DOMAIN)
    else:
        out = dialect_factory._quant(b, b.constant(values, "float_weights"), scale, 0.0, w.bits, signed=1,
                                     narrow=int(w.narrow))
    return out, float(np.max(scale)) * codes_rms


def _affine(b, rng, x: str, channels: int, layer, magnitude: float) -> tuple[str, float]:
    """Bias, BatchNorm (some scales negative) and ReLU as the layer asks; returns the tensor and its magnitude."""
    if layer.batchnorm:
        gamma = rng.uniform(0.5, 2.0, size=channels) * np.where(rng.random(channels) < 0.3, -1, 1)
        params = [gamma, rng.normal(size=channels), rng.normal(size=channels) * magnitude * 0.5,
                  rng.uniform(0.5, 2.0, size=channels) * magnitude ** 2]
        x = b.node("BatchNormalization", [x] + [b.constant(p, name) for p, name in zip(params, "gbmv")], "batchnorm",
                   epsilon=1e-5)
        magnitude = 2.0
    if layer.relu:
        x = b.node("Relu", [x], "relu")
    return x, magnitude


def make_cnn(spec: CnnSpec) -> onnx.ModelProto:
    """A QONNX CNN: input quantizer, convolutions (each quantized, maybe pooled), Flatten, dense layers."""
    rng = np.random.default_rng(spec.seed)
    b = dialect_factory._Builder(f"fuzz_cnn_{spec.seed}")
    x, magnitude = _quantize(b, "input", spec.input, 1.0)
    channels, spatial = spec.in_shape[0], spec.in_shape[1:]
    for conv in spec.convs:
        weights, w_size = _weight_tensor(b, rng, (conv.channels, channels, *conv.kernel), conv.weights)
        fan_in = channels * int(np.prod(conv.kernel))
        magnitude *= w_size * fan_in ** 0.5
        bias = rng.normal(size=conv.channels) * magnitude
        inputs = [x, weights] + ([b.constant(bias, "bias")] if conv.bias == "input" else [])
        x = b.node("Conv", inputs, "conv", kernel_shape=list(conv.kernel), strides=list(conv.strides),
                   pads=list(conv.pads))
        if conv.bias == "add":
            x = b.node("Add", [x, b.constant(bias.reshape(-1, *[1] * len(spatial)), "bias")], "bias")
        dims = len(spatial)
        spatial = tuple((size + conv.pads[i] + conv.pads[i + dims] - k) // s + 1
                        for i, (size, k, s) in enumerate(zip(spatial, conv.kernel, conv.strides)))
        channels = conv.channels
        x, magnitude = _affine(b, rng, x, channels, conv, magnitude)
        x, magnitude = _quantize(b, x, conv.act, magnitude)
        if conv.pool is not None:
            kernel, strides = conv.pool
            x = b.node("MaxPool", [x], "maxpool", kernel_shape=list(kernel), strides=list(strides))
            spatial = tuple((size - k) // s + 1 for size, k, s in zip(spatial, kernel, strides))
    x = b.node("Flatten", [x], "flatten", axis=1)
    features = channels * int(np.prod(spatial))
    for dense in spec.dense:
        weights, w_size = _weight_tensor(b, rng, (dense.features, features), dense.weights)
        magnitude *= w_size * features ** 0.5
        inputs = [x, weights]
        if dense.bias:
            inputs.append(b.constant(rng.normal(size=dense.features) * magnitude, "bias"))
        x = b.node("Gemm", inputs, "gemm", transB=1)
        features = dense.features
        x, magnitude = _affine(b, rng, x, features, dense, magnitude)
        if dense.act is not None:
            x, magnitude = _quantize(b, x, dense.act, magnitude)
    if spec.tail:
        x = b.node("Mul", [x, b.constant(rng.uniform(0.5, 2, size=features), "tail_scale")], "tail_mul")
        x = b.node("Add", [x, b.constant(rng.normal(size=features), "tail_bias")], "tail_add")
    else:
        x = b.node("Identity", [x], "out")
    b.nodes[-1].output[0] = "output"
    graph = helper.make_graph(b.nodes, b.name, [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                              [1, *spec.in_shape])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, features])],
                              initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(dialect_factory.QONNX_DOMAIN, 1)])
    model.ir_version = dialect_factory.IR_VERSION
    onnx.checker.check_model(model)
    return model


def _cnn_frames(spec: CnnSpec, count: int, seed: int) -> np.ndarray:
    """Frames a little beyond the input quantizer's range, a quarter of the values on rounding ties."""
    rng = np.random.default_rng(seed)
    scale = _pow2_near(2 / _levels(spec.input)) * 2.0 ** spec.input.scale_shift
    low = -_levels(spec.input) * scale if spec.input.signed else 0.0
    high = _levels(spec.input) * scale
    shape = (count, *spec.in_shape)
    uniform = rng.uniform(low - 0.1 * (high - low), high + 0.1 * (high - low), size=shape)
    ties = (rng.integers(round(low / scale) - 1, round(high / scale) + 1, size=shape) + 0.5) * scale
    return np.where(rng.random(shape) < 0.25, ties, uniform).astype(np.float32)


def build_network(spec: NetworkSpec, *, frames: int = SIM_FRAMES) -> FuzzNetwork:
    """The model and ``frames`` input frames a spec describes."""
    # An MLP or CNN is exact when it ends in a quantizer: its outputs are codes times a power of two,
    # whatever order the float ops before it ran in. A float tail rounds, in an order streamc may change.
    if spec.family == "mlp":
        # random_frames gives each frame the model's input shape (1, features); the executors take a batch.
        batch = random_frames(spec.mlp, frames, spec.frames_seed).reshape(frames, spec.mlp.in_features)
        exact = spec.mlp.layers[-1].act_bits is not None and not spec.mlp.extra_tail
        return FuzzNetwork(spec, make_mlp(spec.mlp), batch, exact=exact)
    if spec.family == "cnn":
        exact = spec.cnn.dense[-1].act is not None and not spec.cnn.tail
        return FuzzNetwork(spec, make_cnn(spec.cnn), _cnn_frames(spec.cnn, frames, spec.frames_seed), exact=exact)
    dialect, seed = spec.dialect
    case = dialect_factory.MAKERS[dialect](seed)
    pick = np.random.default_rng(spec.frames_seed).choice(len(case.frames), size=frames, replace=False)
    # The factory's "onnxruntime" cases hold integer operators, which onnxruntime computes inexactly on
    # CPUs without VNNI, and its "streamc" cases (float16) are ones a whole-model session computes in
    # float32 (it drops the Cast pair around its float32 kernels): exact_model runs the integer operators
    # exactly and every other node alone in onnxruntime, so a float16 node's output is a float16 tensor
    # (a lone float16 Tanh or Sigmoid node gives the float16 nearest the exact value).
    reference = "qonnx" if case.reference == "qonnx" else "exact_model"
    return FuzzNetwork(spec, case.model, case.frames[np.sort(pick)], reference=reference, exact=case.exact)


def run_reference(model: onnx.ModelProto, frames: np.ndarray, reference: str) -> np.ndarray:
    """The outputs of ``model`` on ``frames`` by the executor ``reference`` names (see :class:`FuzzNetwork`)."""
    if reference == "qonnx":
        from models.qonnx_reference import execute_frames

        return execute_frames(model, frames)
    if reference == "exact_model":
        import exact_model

        return exact_model.run_frames(model, frames)
    raise ValueError(f"no reference executor named {reference!r}")


def placement_of(pick: int) -> dict[str, str]:
    """One of the 18 placements of a layer's weight ROM, threshold ROM and multiplies."""
    return {"ram_style": RAM_STYLES[pick % 3], "ram_style_thresholds": RAM_STYLES[pick // 3 % 3],
            "res_type": RES_TYPES[pick // 9 % 2]}


def folding_for(layers: list[MVAULayer], picks: tuple[tuple[int, int, int], ...]) -> dict[str, dict]:
    """PE, SIMD and placements per layer from the spec's picks: PE and SIMD always divisors of MH and MW."""
    folding = {}
    for index, layer in enumerate(layers):
        pe_pick, simd_pick, placement_pick = picks[index % len(picks)]
        pe_options, simd_options = divisors(layer.mh), divisors(layer.mw)
        folding[layer.name] = {"pe": pe_options[pe_pick % len(pe_options)],
                               "simd": simd_options[simd_pick % len(simd_options)], **placement_of(placement_pick)}
    return folding


# ------------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------------

def refusal_reason(error: StreamcError) -> str:
    """The kind of refusal: the error's class and message with names and numbers blanked.

    Raises
    ------
    FuzzFailure
        If the error is not a refusal: it reports an internal inconsistency (:data:`STREAMC_BUG`), or
        its message is not one clear line (empty, or several lines).
    """
    message = str(error)
    if STREAMC_BUG in message:
        raise FuzzFailure(f"internal inconsistency: {type(error).__name__}: {message}") from error
    if not message.strip() or "\n" in message.strip():
        raise FuzzFailure(f"{type(error).__name__} without a one-line message: {message!r}")
    blanked = re.sub(r"'[^']*'", "'…'", message)
    blanked = re.sub(r"\d+(\.\d+)?", "N", blanked)
    return f"{type(error).__name__}: {blanked}"


def outcome(error: BaseException) -> tuple[str, str]:
    """How a case that raised ``error`` ends: ``("refused", reason)`` for a StreamcError that is a
    refusal (:func:`refusal_reason`), else ``("failed", what went wrong)``."""
    if isinstance(error, StreamcError):
        try:
            return "refused", refusal_reason(error)
        except FuzzFailure as failure:
            return "failed", f"FuzzFailure: {failure}"
    return "failed", f"{type(error).__name__}: {error}"


def check_against_reference(what: str, network: FuzzNetwork, outputs: np.ndarray) -> None:
    """``outputs``, one per frame of the network, are the reference's: bit for bit where the network is
    exact, else within :data:`REFERENCE_ULPS` of its largest output (test_dialects_random's
    ``assert_matches``)."""
    expected = network.reference_outputs()
    try:
        assert_matches(outputs, expected, network.exact, ulps=REFERENCE_ULPS)
    except AssertionError as error:
        detail = f"{outputs.dtype}{list(outputs.shape)} against {expected.dtype}{list(expected.shape)}"
        if outputs.shape == expected.shape and len(expected):
            diff = np.abs(outputs.astype(np.float64) - expected.astype(np.float64)).reshape(len(expected), -1)
            frame = int(np.argmax(diff.max(axis=1)))
            detail += (f"; differs by up to {diff.max():g} ({'exact' if network.exact else 'inexact'} outputs), "
                       f"in {int((diff.max(axis=1) > 0).sum())} of {len(expected)} frames; frame {frame}: got "
                       f"{outputs[frame].reshape(-1).tolist()}, expected {expected[frame].reshape(-1).tolist()}")
        raise FuzzFailure(f"{what} vs {network.reference}: {detail}") from error


def _run(graph: Graph, frames: np.ndarray, *, keep_all: bool = False) -> dict[str, np.ndarray]:
    return execute(graph, {graph.inputs[0].name: frames}, keep_all=keep_all)


def check_reference(network: FuzzNetwork) -> None:
    """streamc's executor computes what the independent reference does, on every frame."""
    graph = graph_from_model(network.model)
    check_against_reference("streamc's executor", network, _run(graph, network.frames)[graph.outputs[0].name])


@dataclass
class Compiled:
    """A network through to_hw: the loaded and tidied graphs (the references) and the hardware view."""

    graph: Graph
    tidied: Graph
    dataflow: Dataflow

    @property
    def stage_kinds(self) -> list[str]:
        return [type(stage).__name__ for stage in self.dataflow.stages]


def compile_network(network: FuzzNetwork) -> Compiled:
    """load (from the model in memory) → tidy → streamline → to_hw; raises StreamcError on refusal."""
    graph = graph_from_model(network.model)
    tidied = tidy(graph)
    dataflow = to_hw(streamline(tidied))
    return Compiled(graph, tidied, dataflow)


def check_emulation(network: FuzzNetwork) -> Compiled:
    """:meth:`Dataflow.emulate` gives streamc's executor's hardware-boundary integers bit for bit, and
    the independent reference's outputs after the host tail, on every frame."""
    compiled = compile_network(network)
    dataflow, frames = compiled.dataflow, network.frames
    hw, outputs = dataflow.emulate(frames)
    expected_hw = expected_hw_outputs(dataflow, _run(compiled.tidied, frames, keep_all=True))
    if not np.array_equal(hw, expected_hw):
        frame = int(np.argmax((hw != expected_hw).any(axis=1)))
        raise FuzzFailure(f"emulated hardware vs reference integers: {int((hw != expected_hw).any(axis=1).sum())} "
                           f"of {len(frames)} frames differ; frame {frame}: got {hw[frame].tolist()}, "
                           f"expected {expected_hw[frame].tolist()}")
    check_against_reference("emulated hardware and host tail", network, outputs)
    return compiled


def _run_step(name: str, state: BuildState) -> None:
    """One pipeline step. A StreamcError up to fold is streamc refusing the network and goes through;
    from rtl on, streamc has accepted the network, so it is a :class:`FuzzFailure`, and so is any
    other exception in any step."""
    try:
        STEP_FUNCTIONS[name](state)
    except StreamcError as error:
        if PIPELINE.index(name) < PIPELINE.index("rtl"):
            raise
        raise FuzzFailure(f"{name} step failed: {error} (build in {state.folder.root})") from error
    except Exception as error:  # noqa: BLE001 (a crash is a finding, whatever its type)
        raise FuzzFailure(f"{name} step crashed: {type(error).__name__}: {error} (build in {state.folder.root})") \
            from error


def _build_through_rtl(network: FuzzNetwork, folder: Path, *, seed: int) -> BuildState:
    """The pipeline's steps from load to rtl in ``folder``, with the spec's folding (see :func:`_run_step`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(network.model, folder / "model.onnx")
    np.save(folder / "frames.npy", network.frames)
    config = BuildConfig.model_validate(dict(
        model=str(folder / "model.onnx"), output_dir=str(folder / "build"), target_fps=1.0, devices=[],
        steps=list(PIPELINE), verify=dict(inputs=str(folder / "frames.npy"), seed=seed)))
    state = BuildState(config=config, folder=BuildFolder(config.output_dir), config_path=str(folder / "model.onnx"))
    for name in PIPELINE[:PIPELINE.index("fold")]:
        _run_step(name, state)
    folding = folding_for(state.dataflow.layers, network.spec.folding)
    state.config = config.model_copy(update=dict(
        target_fps=None, folding={name: LayerFolding(**entry) for name, entry in folding.items()}))
    _run_step("fold", state)
    _run_step("rtl", state)
    return state


def _verdict(network: FuzzNetwork, report: dict, outputs: np.ndarray, folder: Path) -> dict:
    """The sim report if the simulation passed every check: the hardware's integers are streamc's
    executor's, its outputs through the host tail the independent reference's, on every frame, and
    its throughput the one predicted."""
    if report["mismatches"]:
        raise FuzzFailure(f"Verilator vs streamc's executor: {report['mismatches']} of {report['frames']} frames "
                          f"differ; first: {report['first_mismatch']} (build in {folder})")
    check_against_reference(f"Verilator's outputs through the host tail (build in {folder})", network, outputs)
    if report["measured_cycles_per_frame"] != report["predicted_cycles_per_frame"]:
        raise FuzzFailure(f"Verilator measured {report['measured_cycles_per_frame']} cycles per frame, "
                          f"streamc predicted {report['predicted_cycles_per_frame']} (build in {folder})")
    return report


def check_verilator(network: FuzzNetwork, folder: Path, *, seed: int = 0) -> dict:
    """Build the network with the pipeline's steps up to ``sim`` in ``folder`` (new or empty) and
    return the sim step's report if the simulation passes every check of :func:`_verdict`.

    The folding comes from the spec (see :func:`folding_for`); the frames are the network's, streamed
    with random input gaps and output stalls (``seed``).
    """
    state = _build_through_rtl(network, folder, seed=seed)
    _run_step("sim", state)
    outputs = np.load(state.folder.path("reports", "rtlsim_outputs.npy"))
    return _verdict(network, dict(state.rtlsim, folding=state.config.folding), outputs, folder)


# ------------------------------------------------------------------------------------------------
# Several networks in one Verilator build
# ------------------------------------------------------------------------------------------------
# A Verilator build compiles the simulation runtime and cocotb's main (about ten seconds here) before
# the design itself (one or two seconds for these networks). Networks built together share that: each
# keeps its own top module (renamed), and a wrapper passes the streams to the one named in a file
# the simulation reads at start-up. simulate() takes no plusargs, hence the file.

BATCH_TOP = "fuzz_top"
#: Read by the wrapper from the simulation's working directory, which simulate() makes ``build_dir/run``.
SELECT_FILE = "fuzz_select.txt"


def _stream_widths(dataflow: Dataflow) -> tuple[int, int]:
    first, last = dataflow.stages[0], dataflow.stages[-1]
    return first.in_elems * first.in_dtype.bitwidth, last.out_elems * last.out_dtype.bitwidth


def batch_verilog(tops: list[tuple[str, str, int, int]]) -> str:
    """One Verilog file: every ``(name, verilog, in_bits, out_bits)`` top and a wrapper ``fuzz_top``
    with the same stream ports that connects the network numbered in ``fuzz_select.txt``."""
    in_bits = max(t[2] for t in tops)
    out_bits = max(t[3] for t in tops)
    lines = [f"module {BATCH_TOP}(clk, rst, s_axis_tdata, s_axis_tvalid, s_axis_tready, "
             "m_axis_tdata, m_axis_tvalid, m_axis_tready);",
             "  input clk; input rst;",
             f"  input [{in_bits - 1}:0] s_axis_tdata; input s_axis_tvalid; output s_axis_tready;",
             f"  output [{out_bits - 1}:0] m_axis_tdata; output m_axis_tvalid; input m_axis_tready;",
             "  integer select, file;",
             "  initial begin",
             f'    file = $fopen("{SELECT_FILE}", "r");',
             f'    if (file == 0) $fatal(1, "{BATCH_TOP}: no {SELECT_FILE} in the working directory");',
             f'    if ($fscanf(file, "%d", select) != 1) $fatal(1, "{BATCH_TOP}: {SELECT_FILE} names no network");',
             "    $fclose(file);",
             "  end"]
    ready, data, valid = [], [], []
    for index, (name, _, in_w, out_w) in enumerate(tops):
        lines += [f"  wire n{index}_s_ready, n{index}_m_valid; wire [{out_w - 1}:0] n{index}_m_data;",
                  f"  {name} n{index}(.clk(clk), .rst(rst), .s_axis_tdata(s_axis_tdata[{in_w - 1}:0]), "
                  f".s_axis_tvalid(s_axis_tvalid && select == {index}), .s_axis_tready(n{index}_s_ready), "
                  f".m_axis_tdata(n{index}_m_data), .m_axis_tvalid(n{index}_m_valid), "
                  f".m_axis_tready(m_axis_tready && select == {index}));"]
        ready.append(f"select == {index} ? n{index}_s_ready : ")
        data.append(f"select == {index} ? {{{{{out_bits - out_w}{{1'b0}}}}, n{index}_m_data}} : "
                    if out_w < out_bits else f"select == {index} ? n{index}_m_data : ")
        valid.append(f"select == {index} ? n{index}_m_valid : ")
    lines += [f"  assign s_axis_tready = {''.join(ready)}1'b0;",
              f"  assign m_axis_tdata = {''.join(data)}{out_bits}'d0;",
              f"  assign m_axis_tvalid = {''.join(valid)}1'b0;",
              "endmodule", ""]
    renamed = [re.sub(rf"\b{re.escape(TOP)}\b", name, verilog) for name, verilog, _, _ in tops]
    return "\n".join(lines) + "\n".join(renamed)


def _simulate_selected(state: BuildState, index: int, verilog: Path, build_dir: Path) -> tuple[np.ndarray, dict]:
    """What the sim step does, on network ``index`` of a batch build: the outputs through the host tail
    and the report."""
    dataflow, verify, frames = state.dataflow, state.config.verify, state.frames
    tidied = state.graphs["tidy"]
    in_name = tidied.inputs[0].name
    expected = expected_hw_outputs(dataflow, execute(tidied, {in_name: frames}, keep_all=True))
    codes = dataflow.to_stream_order(np.rint(execute(dataflow.head, {in_name: frames})[dataflow.hw_input])
                                     .astype(np.int64))
    first, last = dataflow.stages[0], dataflow.stages[-1]
    (build_dir / "run").mkdir(parents=True, exist_ok=True)
    (build_dir / "run" / SELECT_FILE).write_text(f"{index}\n")
    result = simulate(verilog=verilog, top=BATCH_TOP, build_dir=build_dir, in_elems=first.in_elems,
                      in_width=first.in_dtype.bitwidth, out_elems=last.out_elems, out_width=last.out_dtype.bitwidth,
                      frames=first.in_dtype.to_hw(codes), expected=last.out_dtype.to_hw(expected),
                      n_out=last.out_count, seed=verify.seed, input_gap_prob=verify.input_gap_prob,
                      output_stall_prob=verify.output_stall_prob,
                      timeout_cycles=_timeout_cycles(dataflow, len(frames), verify))
    hw = dataflow.from_stream_order(last.out_dtype.from_hw(result.outputs)).astype(np.float32)
    outputs = execute(dataflow.tail, {dataflow.hw_output: hw})[dataflow.tail.outputs[0].name]
    return outputs, dict(frames=len(frames), mismatches=result.mismatches,
                first_mismatch=result.first_mismatch._asdict() if result.first_mismatch else None,
                measured_cycles_per_frame=result.measured_cycles_per_frame,
                predicted_cycles_per_frame=dataflow.cycles_per_frame(), sim_seconds=round(result.sim_seconds, 3),
                folding={layer.name: {"pe": layer.pe, "simd": layer.simd, "ram_style": layer.ram_style,
                                      "ram_style_thresholds": layer.ram_style_thresholds, "res_type": layer.res_type}
                         for layer in dataflow.layers})


def check_verilator_batch(networks: list[FuzzNetwork], folder: Path, *, seed: int = 0) -> list[dict | Exception]:
    """:func:`check_verilator` for several networks with one Verilator build; one result per network:
    its report, the StreamcError that refused it, or the :class:`FuzzFailure` it caused.

    If the shared build fails, each network is built alone, so that the failure lands on its network.
    """
    folder = Path(folder)
    results: list[dict | Exception | None] = [None] * len(networks)
    states: dict[int, BuildState] = {}
    for index, network in enumerate(networks):
        try:
            states[index] = _build_through_rtl(network, folder / f"net{index}", seed=seed)
        except (StreamcError, FuzzFailure) as error:
            results[index] = error
    if states:
        tops = [(f"fuzz_net{index}", state.verilog, *_stream_widths(state.dataflow)) for index, state in states.items()]
        verilog = folder / f"{BATCH_TOP}.v"
        verilog.write_text(batch_verilog(tops))
        # The ROM files beside the batch, under the names the renamed tops read.
        for (name, *_), state in zip(tops, states.values()):
            for rom in rom_files(state.verilog):
                shutil.copyfile(state.folder.path("verilog", rom), folder / re.sub(rf"\b{re.escape(TOP)}\b", name, rom))
        build_dir = folder / "sim_build"
        for position, (index, state) in enumerate(states.items()):
            try:
                outputs, report = _simulate_selected(state, position, verilog, build_dir)
                results[index] = _verdict(networks[index], report, outputs, folder / f"net{index}")
            except FuzzFailure as error:
                results[index] = error
            except Exception as error:  # noqa: BLE001 (a crash is a finding, whatever its type)
                if isinstance(error, BuildError) and str(error).startswith("Verilator could not build"):
                    return [result if result is not None else _alone(networks[i], folder / f"alone{i}", seed)
                            for i, result in enumerate(results)]
                results[index] = FuzzFailure(f"simulation failed: {type(error).__name__}: {error} "
                                             f"(build in {folder / f'net{index}'})")
    return results


def _alone(network: FuzzNetwork, folder: Path, seed: int) -> dict | Exception:
    try:
        return check_verilator(network, folder, seed=seed)
    except (StreamcError, FuzzFailure) as error:
        return error
