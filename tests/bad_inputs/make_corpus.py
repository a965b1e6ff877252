"""Write the bad-input corpus: one folder per case, each a small valid build with one thing broken.

Run ``python tests/bad_inputs/make_corpus.py`` after changing a case; ``cases.yaml`` (written by
hand) says what ``streamc build`` must answer for each folder. The output is byte-for-byte
deterministic (``tests/test_bad_inputs.py`` checks the committed folders against a fresh run).

Every case starts from one of two models that build cleanly (:func:`mlp` and :func:`cnn`, both
checked by the test) and changes one thing, so that the error a case expects is the only one.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
QDOMAIN = "qonnx.custom_op.general"
FRONT_STEPS = "[load, tidy, streamline, to_hw, fold]"
#: Steps for cases about verification data: the test stubs out code generation and the simulator.
SIM_STEPS = "[load, tidy, streamline, to_hw, fold, rtl, sim]"
W0 = (np.arange(16, dtype=np.float32).reshape(4, 4) % 5 - 2) / 4
W1 = (np.arange(8, dtype=np.float32).reshape(4, 2) % 3 - 1) / 4


def config(model: str = "model.onnx", *, output_dir: str = "out", steps: str = FRONT_STEPS, extra: str = "",
           target: str = "target_fps: 1000\n") -> str:
    return f"model: {model}\noutput_dir: {output_dir}\nsteps: {steps}\n{target}{extra}"


class ModelBuilder:
    """Nodes and named float32 initializers, turned into a model at the end."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value, dtype=np.float32) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, name: str, **attrs) -> str:
        domain = QDOMAIN if op in ("Quant", "BipolarQuant") else ""
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, domain=domain, **attrs))
        return output

    def quant(self, x: str, output: str, name: str, *, scale, bits, signed: int = 1, narrow: int = 0) -> str:
        inputs = [x, self.const(f"{name}_scale", scale), self.const(f"{name}_zero", 0.0),
                  self.const(f"{name}_bits", bits)]
        return self.node("Quant", inputs, output, name, signed=signed, narrow=narrow, rounding_mode="ROUND")

    def model(self, in_shape, out_shape, *, opset: int = 13, ir_version: int = 8) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "bad_input",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                                  self.initializers)
        model = helper.make_model(graph, producer_name="make_corpus",
                                  opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(QDOMAIN, 1)])
        model.ir_version = ir_version
        return model


def mlp_builder(*, act_scale=0.5, act_bits=3.0, weight_scale=0.25, w0=W0, act_quant: bool = True) -> ModelBuilder:
    """x (1x4) -> Quant 8b -> MatMul 4x4 (2b weights) -> Relu -> Quant 3b unsigned -> MatMul 4x2 -> Quant 4b.

    Without ``act_quant`` the Relu feeds the second MatMul directly.
    """
    b = ModelBuilder()
    b.quant("x", "xq", "QuantIn", scale=1 / 64, bits=8.0)
    b.quant(b.const("W0", w0), "W0q", "WeightQuant0", scale=weight_scale, bits=2.0, narrow=1)
    b.node("MatMul", ["xq", "W0q"], "fc0", "fc0")
    b.node("Relu", ["fc0"], "r0" if act_quant else "a0", "Relu0")
    if act_quant:
        b.quant("r0", "a0", "ActQuant0", scale=act_scale, bits=act_bits, signed=0)
    b.quant(b.const("W1", W1), "W1q", "WeightQuant1", scale=0.25, bits=2.0, narrow=1)
    b.node("MatMul", ["a0", "W1q"], "fc1", "fc1")
    b.quant("fc1", "y", "ActQuant1", scale=0.25, bits=4.0)
    return b


def mlp(**kwargs) -> onnx.ModelProto:
    return mlp_builder(**kwargs).model([1, 4], [1, 2])


def cnn(*, transpose: bool = False) -> onnx.ModelProto:
    """x (1x2x4x4) -> Quant 8b -> Conv 3x3 to 4 channels -> Relu -> Quant 2b -> Flatten -> MatMul 16x2 -> Quant 4b.

    With ``transpose``, the image's rows and columns swap before a 1x1 Conv (and its Quant) ahead of the flatten."""
    b = ModelBuilder()
    b.quant("x", "xq", "QuantIn", scale=1 / 64, bits=8.0)
    w = (np.arange(4 * 2 * 9, dtype=np.float32).reshape(4, 2, 3, 3) % 5 - 2) / 4
    b.quant(b.const("Wc", w), "Wcq", "WeightQuantC", scale=0.25, bits=2.0, narrow=1)
    b.node("Conv", ["xq", "Wcq"], "conv", "conv0", kernel_shape=[3, 3], group=1)
    b.node("Relu", ["conv"], "rc", "ReluC")
    b.quant("rc", "ac", "ActQuantC", scale=0.5, bits=2.0, signed=0)
    flat_in = "ac"
    if transpose:
        b.node("Transpose", ["ac"], "act", "swap_hw", perm=[0, 1, 3, 2])
        b.quant(b.const("W1", (np.arange(16, dtype=np.float32).reshape(4, 4, 1, 1) % 3 - 1) / 4), "W1q",
                "WeightQuant1", scale=0.25, bits=2.0, narrow=1)
        b.node("Conv", ["act", "W1q"], "conv1_out", "conv1", kernel_shape=[1, 1], group=1)
        flat_in = b.quant("conv1_out", "a1", "ActQuant1", scale=0.5, bits=2.0)
    b.node("Flatten", [flat_in], "flat", "flatten")
    wf = (np.arange(32, dtype=np.float32).reshape(16, 2) % 3 - 1) / 4
    b.quant(b.const("Wf", wf), "Wfq", "WeightQuantF", scale=0.25, bits=2.0, narrow=1)
    b.node("MatMul", ["flat", "Wfq"], "fc", "fc")
    b.quant("fc", "y", "ActQuantOut", scale=0.25, bits=4.0)
    return b.model([1, 2, 4, 4], [1, 2])


def set_initializer(model: onnx.ModelProto, name: str, value) -> None:
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == name:
            model.graph.initializer[index].CopyFrom(
                numpy_helper.from_array(np.asarray(value, dtype=numpy_helper.to_array(tensor).dtype), name))
            return
    raise KeyError(name)


def node_named(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.name == name)


def externalize(model: onnx.ModelProto, name: str, location: str, *, length: int | None = None) -> None:
    """Store initializer ``name`` as external data at ``location`` (its bytes are not written here)."""
    tensor = next(t for t in model.graph.initializer if t.name == name)
    size = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(size if length is None else length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


# --- writing -----------------------------------------------------------------------------------------

CASES: dict[str, Callable[[Path], None]] = {}


def case(function: Callable[[Path], None]) -> Callable[[Path], None]:
    CASES[function.__name__] = function
    return function


def write(folder: Path, name: str, data: bytes | str | onnx.ModelProto | np.ndarray) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, onnx.ModelProto):
        data = data.SerializeToString(deterministic=True)
    if isinstance(data, np.ndarray):
        with path.open("wb") as file:
            np.save(file, data, allow_pickle=False)
        return
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)


def model_case(folder: Path, model: onnx.ModelProto | bytes, **config_args) -> None:
    write(folder, "model.onnx", model)
    write(folder, "build.yaml", config(**config_args))


# --- the ONNX file itself ----------------------------------------------------------------------------

@case
def model_empty(folder):
    model_case(folder, b"")


@case
def model_truncated(folder):
    data = mlp().SerializeToString(deterministic=True)
    model_case(folder, data[:len(data) // 2])


@case
def model_garbage(folder):
    model_case(folder, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)


@case
def model_is_text(folder):
    # Protobuf reads some text as valid (unknown) fields: the model must still be refused.
    model_case(folder, b"this is not a model\n")


@case
def model_is_directory(folder):
    write(folder, "model.onnx/README", "a folder named like a model\n")
    write(folder, "build.yaml", config())


@case
def model_missing(folder):
    write(folder, "build.yaml", config("models/mlp.onnx"))


@case
def ir_version_too_new(folder):
    model = mlp()
    model.ir_version = 99
    model_case(folder, model)


@case
def opset_too_new(folder):
    model = mlp()
    model.opset_import[0].version = 30
    model_case(folder, model)


@case
def unknown_domain(folder):
    model = mlp()
    node_named(model, "Relu0").domain = "com.example.secret"
    model.opset_import.append(helper.make_opsetid("com.example.secret", 1))
    model_case(folder, model)


@case
def unknown_op(folder):
    model = mlp()
    node_named(model, "Relu0").op_type = "Relu6"
    model_case(folder, model)


@case
def graph_cycle(folder):
    # Relu0 reads ActQuant0's output, which reads Relu0's: fc0's result goes nowhere.
    model = mlp()
    node_named(model, "Relu0").input[0] = "a0"
    model_case(folder, model)


@case
def dangling_tensor(folder):
    model = mlp()
    node_named(model, "fc1").input[0] = "a_0"
    model_case(folder, model)


@case
def duplicate_tensor_name(folder):
    # Relu0 writes 'xq' a second time (QuantIn writes it first).
    model = mlp()
    node_named(model, "Relu0").output[0] = "xq"
    node_named(model, "ActQuant0").input[0] = "xq"
    model_case(folder, model)


@case
def duplicate_initializer(folder):
    model = mlp()
    model.graph.initializer.append(numpy_helper.from_array(W0 * 2, "W0"))
    model_case(folder, model)


@case
def huge_declared_dims(folder):
    # 64 bytes of data under a shape of 2**62 elements: nothing may try to allocate it.
    model = mlp()
    next(t for t in model.graph.initializer if t.name == "W0").dims[:] = [1 << 31, 1 << 31]
    model_case(folder, model)


@case
def huge_input_shape(folder):
    # The input claims 2**40 features; the weights say 4.
    b = mlp_builder()
    model_case(folder, b.model([1, 1 << 40], [1, 2]))


# --- external data -----------------------------------------------------------------------------------

def external_case(folder: Path, location: str, *, length: int | None = None) -> None:
    """The model in ``model/`` with W0 external at ``location``; beside ``model/``, a decoy weight file
    that must never be read (a build that read it would succeed)."""
    model = mlp()
    externalize(model, "W0", location, length=length)
    write(folder, "model/model.onnx", model)
    write(folder, "decoy.bin", W0.tobytes())
    write(folder, "build.yaml", config("model/model.onnx"))


@case
def external_dotdot(folder):
    external_case(folder, "../decoy.bin")


@case
def external_absolute(folder):
    external_case(folder, "/etc/passwd", length=64)


@case
def external_symlink_out(folder):
    external_case(folder, "weights.bin")
    os.symlink("../decoy.bin", folder / "model" / "weights.bin")


@case
def external_missing(folder):
    external_case(folder, "weights.bin")


@case
def external_short(folder):
    external_case(folder, "weights.bin")
    write(folder, "model/weights.bin", W0.tobytes()[:40])


# --- values ------------------------------------------------------------------------------------------

@case
def scale_nan(folder):
    model_case(folder, mlp(act_scale=np.nan))


@case
def scale_inf(folder):
    model_case(folder, mlp(act_scale=np.inf))


@case
def scale_zero(folder):
    model_case(folder, mlp(act_scale=0.0))


@case
def scale_negative(folder):
    model_case(folder, mlp(act_scale=-0.5))


@case
def weight_scale_zero(folder):
    model_case(folder, mlp(weight_scale=0.0))


@case
def bit_width_zero(folder):
    model_case(folder, mlp(act_bits=0.0))


@case
def bit_width_negative(folder):
    model_case(folder, mlp(act_bits=-3.0))


@case
def bit_width_nan(folder):
    model_case(folder, mlp(act_bits=np.nan))


@case
def bit_width_40(folder):
    model_case(folder, mlp(act_bits=40.0))


@case
def bit_width_not_scalar(folder):
    model_case(folder, mlp(act_bits=[3.0, 4.0, 3.0, 4.0]))


@case
def weights_nan(folder):
    w0 = W0.copy()
    w0[1, 2] = np.nan
    model_case(folder, mlp(w0=w0))


@case
def weights_inf(folder):
    w0 = W0.copy()
    w0[3, 0] = -np.inf
    model_case(folder, mlp(w0=w0))


@case
def per_channel_activation_scale(folder):
    model_case(folder, mlp(act_scale=np.array([[0.5, 0.25, 0.5, 0.25]], np.float32)))


# --- graphs streamc does not compile (yet) -----------------------------------------------------------

@case
def no_quantizer(folder):
    b = ModelBuilder()
    b.node("MatMul", ["x", b.const("W0", W0)], "fc0", "fc0")
    b.node("Relu", ["fc0"], "r0", "Relu0")
    b.node("MatMul", ["r0", b.const("W1", W1)], "y", "fc1")
    model_case(folder, b.model([1, 4], [1, 2]))


@case
def residual_branch(folder):
    # y = ActQuant1(fc1(a0) + a0[:, :2]) needs a0 twice.
    b = mlp_builder()
    b.nodes[-1].input[0] = "sum"
    b.node("Slice", ["a0", b.const("starts", [0], np.int64), b.const("ends", [2], np.int64),
                     b.const("axes", [1], np.int64)], "skip", "skip")
    b.node("Add", ["fc1", "skip"], "sum", "residual")
    b.nodes.append(b.nodes.pop(-3))  # keep the nodes in topological order: ActQuant1 last
    model_case(folder, b.model([1, 4], [1, 2]))


@case
def weights_from_the_input(folder):
    # fc0 multiplies the input by a reshaped copy of itself: its "weights" are not constant.
    b = mlp_builder()
    b.node("Reshape", ["xq", b.const("to_column", [4, 1], np.int64)], "xq_col", "as_column")
    b.node("MatMul", ["xq_col", "xq"], "outer", "outer_product")
    b.nodes[2].input[1] = "outer"
    b.nodes[2:2] = [b.nodes.pop(-2), b.nodes.pop(-1)]
    model_case(folder, b.model([1, 4], [1, 2]))


@case
def transpose_between_layers(folder):
    model_case(folder, cnn(transpose=True))


@case
def linear_after_linear(folder):
    # fc0 -> Relu -> fc1 with no quantizer between them: fc1 reads unquantized activations.
    model_case(folder, mlp_builder(act_quant=False).model([1, 4], [1, 2]))


@case
def weights_as_graph_input(folder):
    model = mlp()
    model.graph.input.append(helper.make_tensor_value_info("W1", TensorProto.FLOAT, [4, 2]))
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "W1"))
    model_case(folder, model)


@case
def symbolic_feature_dim(folder):
    model_case(folder, mlp_builder().model(["batch", "features"], ["batch", 2]))


@case
def too_large_for_the_device(folder):
    # 1024x1024 two-bit weights (2 Mbit, a column plus a row broadcast: weights all alike would fold into
    # a constant) on an UP5K (1 Mbit SPRAM, 120 kbit EBR).
    b = ModelBuilder()
    b.quant("x", "xq", "QuantIn", scale=1 / 64, bits=8.0)
    rng = np.random.default_rng(5)
    column, row = (rng.integers(-1, 2, size=shape).astype(np.float32) * 0.25 for shape in ((1024, 1), (1, 1024)))
    b.node("Add", [b.const("w_column", column), b.const("w_row", row)], "W0", "spread_weights")
    b.quant("W0", "W0q", "WeightQuant0", scale=0.25, bits=2.0, narrow=1)
    b.node("MatMul", ["xq", "W0q"], "fc0", "fc0")
    b.quant("fc0", "y", "ActQuant0", scale=4.0, bits=4.0)
    write(folder, "model.onnx", b.model([1, 1024], [1, 1024]))
    write(folder, "build.yaml", config(extra="devices: [ice40-up5k]\n"))


@case
def quantize_linear_int16(folder):
    b = ModelBuilder()
    b.node("QuantizeLinear", ["x", b.const("x_scale", 1 / 64), b.const("x_zero", 0, np.int16)], "xq", "QuantIn")
    b.node("DequantizeLinear", ["xq", "x_scale", "x_zero"], "xd", "DequantIn")
    b.node("DequantizeLinear", [b.const("W0_codes", W0 * 4, np.int8), b.const("W0_scale", 0.25),
                                b.const("W0_zero", 0, np.int8)], "W0d", "WeightDequant0")
    b.node("MatMul", ["xd", "W0d"], "fc0", "fc0")
    b.node("QuantizeLinear", ["fc0", b.const("y_scale", 0.25), b.const("y_zero", 0, np.int8)], "yq", "QuantOut")
    b.node("DequantizeLinear", ["yq", "y_scale", "y_zero"], "y", "DequantOut")
    model_case(folder, b.model([1, 4], [1, 4], opset=21, ir_version=10))


# --- build configurations ----------------------------------------------------------------------------

@case
def config_unknown_key(folder):
    model_case(folder, mlp(), extra="folding_file: fold.yaml\n")


@case
def config_wrong_type(folder):
    model_case(folder, mlp(), target="target_fps: 1000\nfifo_depth: [4]\n")


@case
def config_python_tag(folder):
    # Would create 'pwned' beside the config if the YAML were loaded unsafely.
    model_case(folder, mlp(), extra="clock_mhz: !!python/object/apply:os.system ['touch pwned']\n")


@case
def config_is_directory(folder):
    write(folder, "model.onnx", mlp())
    write(folder, "build.yaml/README", "a folder named like a config\n")


@case
def config_folding_not_dividing(folder):
    model_case(folder, mlp(), target="folding: {fc0: {pe: 3, simd: 4}, fc1: {pe: 1, simd: 1}}\n")


@case
def output_dir_is_a_file(folder):
    model_case(folder, mlp())
    write(folder, "out", "a file where the output folder should go\n")


@case
def output_dir_holds_other_files(folder):
    model_case(folder, mlp())
    write(folder, "out/thesis.tex", "\\documentclass{article}\n")


# --- verification data -------------------------------------------------------------------------------

def verify_case(folder: Path, verify: str, files: dict[str, np.ndarray | bytes]) -> None:
    write(folder, "model.onnx", mlp())
    write(folder, "build.yaml", config(steps=SIM_STEPS, extra=f"verify: {verify}\n"))
    for name, data in files.items():
        write(folder, name, data)


FRAMES = (np.arange(16, dtype=np.float32).reshape(4, 1, 4) % 7 - 3) / 4


@case
def frames_missing(folder):
    verify_case(folder, "{inputs: frames.npy}", {})


@case
def frames_wrong_shape(folder):
    verify_case(folder, "{inputs: frames.npy}", {"frames.npy": FRAMES.reshape(4, 2, 2)})


@case
def frames_nan(folder):
    frames = FRAMES.copy()
    frames[2, 0, 1] = np.nan
    verify_case(folder, "{inputs: frames.npy}", {"frames.npy": frames})


@case
def frames_strings(folder):
    verify_case(folder, "{inputs: frames.npy}", {"frames.npy": np.array([["0.5", "1", "x", "2"]] * 4)})


@case
def frames_pickle(folder):
    # An object array is a pickle: np.load must not run it.
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    payload = b"cos\nsystem\n(S'touch pwned'\ntR."
    verify_case(folder, "{inputs: frames.npy}", {"frames.npy": header.getvalue() + payload})


@case
def expected_wrong_size(folder):
    verify_case(folder, "{inputs: frames.npy, expected: expected.npy}",
                {"frames.npy": FRAMES, "expected.npy": np.zeros((4, 3), np.float32)})


@case
def expected_missing(folder):
    verify_case(folder, "{inputs: frames.npy, expected: expected.npy}", {"frames.npy": FRAMES})


@case
def labels_wrong_count(folder):
    verify_case(folder, "{inputs: frames.npy, labels: labels.npy}",
                {"frames.npy": FRAMES, "labels.npy": np.array([0, 1, 1], np.int64)})


def main(destination: Path = HERE) -> None:
    destination = Path(destination)
    for name, make in CASES.items():
        folder = destination / name
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        make(folder)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
