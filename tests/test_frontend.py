"""Loading ONNX as exporters write it, and refusing broken or unsupported files with exact messages."""

import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamc.errors import FrontendError
from streamc.execute import execute
from streamc.frontend.load import graph_from_model, load_onnx
from streamc.hw import to_hw
from streamc.transforms.streamline import streamline
from streamc.transforms.tidy import tidy

ROOT = Path(__file__).resolve().parents[1]
TEST_MODELS = ROOT / "tests" / "models"
DIGITS = ROOT / "build_configs" / "models"
QDOMAIN = "qonnx.custom_op.general"
WEIGHT = np.arange(16, dtype=np.float32).reshape(4, 4) / 8 - 1


def make_model(nodes, *, initializers=(), inputs=("x",), outputs=("y",), opset=13, ir_version=8,
               extra_opsets=(), input_shape=(1, 4)):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(input_shape)) for name in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    model.ir_version = ir_version
    return model


def matmul_model(**kwargs):
    """y = x @ W, the smallest model that loads."""
    return make_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                      initializers=[numpy_helper.from_array(WEIGHT, "W")], **kwargs)


def save(model, folder: Path, name="model.onnx") -> Path:
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


def load_error(model, tmp_path) -> str:
    with pytest.raises(FrontendError) as info:
        load_onnx(save(model, tmp_path))
    return str(info.value)


# --- real exports ------------------------------------------------------------------------------

REAL_EXPORTS = {
    TEST_MODELS / "tfc_w1a1.onnx": [(64, 784), (64, 64), (64, 64), (10, 64)],
    TEST_MODELS / "tfc_w2a2_legacy.onnx": [(64, 784), (64, 64), (64, 64), (10, 64)],
    DIGITS / "digits_mlp.onnx": [(64, 64), (32, 64), (10, 32)],
    DIGITS / "digits_mlp_legacy.onnx": [(64, 64), (32, 64), (10, 32)],
    TEST_MODELS / "external" / "digits_mlp.onnx": [(64, 64), (32, 64), (10, 32)],
}


@pytest.mark.parametrize("path", REAL_EXPORTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_real_exports_load_and_lower_to_mvau_layers(path):
    graph = load_onnx(path)
    assert len(graph.inputs) == 1 and graph.inputs[0].name == "global_in"
    layers = to_hw(streamline(tidy(graph))).layers
    assert [(layer.mh, layer.mw) for layer in layers] == REAL_EXPORTS[path]


def test_external_data_gives_the_inline_constants():
    inline, external = load_onnx(DIGITS / "digits_mlp.onnx"), load_onnx(TEST_MODELS / "external" / "digits_mlp.onnx")
    assert inline.constants.keys() == external.constants.keys()
    for name, value in inline.constants.items():
        np.testing.assert_array_equal(external.constants[name], value)


@pytest.mark.parametrize("domain", ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"])
def test_qonnx_ops_load_from_every_qonnx_domain(domain, tmp_path):
    model = onnx.load(DIGITS / "digits_mlp.onnx")
    for node in model.graph.node:
        if node.domain == QDOMAIN:
            node.domain = domain
    for entry in model.opset_import:
        if entry.domain == QDOMAIN:
            entry.domain = domain
    graph = load_onnx(save(model, tmp_path))
    original = load_onnx(DIGITS / "digits_mlp.onnx")
    assert [(n.op_type, n.inputs, n.outputs) for n in graph.nodes] == \
           [(n.op_type, n.inputs, n.outputs) for n in original.nodes]
    frames = np.load(DIGITS / "digits_frames.npy")[:8]
    np.testing.assert_array_equal(execute(graph, {"global_in": frames})["global_out"],
                                  execute(original, {"global_in": frames})["global_out"])


@pytest.mark.parametrize("ir_version", range(3, 15))
def test_ir_versions_up_to_14_load(ir_version, tmp_path):
    graph = load_onnx(save(matmul_model(ir_version=ir_version), tmp_path))
    assert [n.op_type for n in graph.nodes] == ["MatMul"]


def exporter_style_model(opset: int) -> onnx.ModelProto:
    """Gemm with transB, BatchNormalization after it, a constant-shape Reshape, a Constant node,
    one constant shared by two nodes, and every initializer also listed as a graph input."""
    rng = np.random.default_rng(opset)
    inits = {
        "W": rng.normal(size=(3, 8)).astype(np.float32), "bias": rng.normal(size=3).astype(np.float32),
        "gamma": rng.uniform(0.5, 2, size=3).astype(np.float32), "beta": rng.normal(size=3).astype(np.float32),
        "mean": rng.normal(size=3).astype(np.float32), "var": rng.uniform(0.5, 2, size=3).astype(np.float32),
        "shape": np.array([1, 8], dtype=np.int64), "half": np.float32(0.5),
    }
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["flat"], name="flatten"),
        helper.make_node("Mul", ["flat", "half"], ["scaled"], name="scale_in"),
        helper.make_node("Gemm", ["scaled", "W", "bias"], ["fc"], name="fc", transB=1),
        helper.make_node("BatchNormalization", ["fc", "gamma", "beta", "mean", "var"], ["bn"], name="bn",
                         epsilon=1e-3),
        helper.make_node("Constant", [], ["offset"], name="offset", value=numpy_helper.from_array(np.float32(0.25))),
        helper.make_node("Add", ["bn", "offset"], ["shifted"], name="shift"),
        helper.make_node("Mul", ["shifted", "half"], ["y"], name="scale_out"),
    ]
    graph = helper.make_graph(
        nodes, "exported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 4])]
        + [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inits.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("opset", range(9, 22))
def test_exporter_style_graph_loads_and_computes_at_every_opset(opset, tmp_path):
    model = exporter_style_model(opset)
    graph = load_onnx(save(model, tmp_path))
    assert graph.opset == opset
    assert [i.name for i in graph.inputs] == ["x"] and graph.inputs[0].shape == (1, 2, 4)
    assert [n.op_type for n in graph.nodes] == ["Reshape", "Mul", "Gemm", "BatchNormalization", "Add", "Mul"]
    assert graph.constants["offset"] == np.float32(0.25)
    assert sum("half" in n.inputs for n in graph.nodes) == 2

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.random.default_rng(1).normal(size=(1, 2, 4)).astype(np.float32)
    fc = (x.reshape(1, 8) * 0.5) @ inits["W"].T + inits["bias"]
    bn = (fc - inits["mean"]) / np.sqrt(inits["var"] + 1e-3) * inits["gamma"] + inits["beta"]
    expected = (bn + 0.25) * 0.5
    np.testing.assert_allclose(execute(graph, {"x": x})["y"], expected, rtol=1e-5, atol=1e-6)
    tidied = tidy(graph)
    np.testing.assert_allclose(execute(tidied, {"x": x})["y"], expected, rtol=1e-5, atol=1e-6)


def test_constant_node_attribute_kinds():
    nodes = [helper.make_node("Constant", [], ["a"], value_float=1.5),
             helper.make_node("Constant", [], ["b"], value_ints=[1, 2]),
             helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(WEIGHT)),
             helper.make_node("MatMul", ["x", "c"], ["y"])]
    graph = graph_from_model(make_model(nodes))
    assert graph.constants["a"].dtype == np.float32 and graph.constants["a"] == 1.5
    assert graph.constants["b"].dtype == np.int64 and graph.constants["b"].tolist() == [1, 2]
    np.testing.assert_array_equal(graph.constants["c"], WEIGHT)
    assert [n.op_type for n in graph.nodes] == ["MatMul"]


# --- files that are not ONNX ----------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(FrontendError, match=rf"^model file '{re.escape(str(tmp_path))}/nothing.onnx' does not exist$"):
        load_onnx(tmp_path / "nothing.onnx")


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(FrontendError, match=rf"^model path '{re.escape(str(tmp_path))}' is not a file$"):
        load_onnx(tmp_path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(FrontendError, match=rf"^'{re.escape(str(path))}' is empty, not an ONNX model$"):
        load_onnx(path)


@pytest.mark.parametrize("content", [b"name,value\nw,1.5\n", (DIGITS / "digits_mlp.onnx").read_bytes()[:5000],
                                     (DIGITS / "digits_mlp.onnx").read_bytes()[:-7]],
                         ids=["csv text", "truncated at 5000 bytes", "last 7 bytes cut"])
def test_not_onnx_or_truncated(content, tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    with pytest.raises(FrontendError, match=rf"^'{re.escape(str(path))}' is not an ONNX model \(truncated or not "
                                            r"protobuf: Error parsing message.*\)$"):
        load_onnx(path)


def test_protobuf_without_a_graph(tmp_path):
    path = tmp_path / "opset_only.onnx"
    path.write_bytes(onnx.OperatorSetIdProto(domain="", version=13).SerializeToString())
    with pytest.raises(FrontendError, match=rf"^'{re.escape(str(path))}' is not an ONNX model \(it has no IR "
                                            r"version or no graph\)$"):
        load_onnx(path)


# --- versions, domains and ops ----------------------------------------------------------------------

def test_ir_version_15_is_refused(tmp_path):
    assert load_error(matmul_model(ir_version=15), tmp_path) == \
        "ONNX IR version 15 is newer than supported (up to 14)"


@pytest.mark.parametrize("opset", [8, 22])
def test_opsets_outside_9_to_21_are_refused(opset, tmp_path):
    assert load_error(matmul_model(opset=opset), tmp_path) == \
        f"ONNX opset {opset} is not supported; supported opsets are 9 to 21"


def test_model_without_default_opset_is_refused():
    model = matmul_model()
    model.opset_import[0].domain = QDOMAIN
    with pytest.raises(FrontendError, match=r"^the model imports no default ONNX opset; supported opsets are 9 to 21$"):
        graph_from_model(model)


def test_unknown_domain_is_refused():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="act", domain="com.example")],
                       extra_opsets=[helper.make_opsetid("com.example", 1)])
    with pytest.raises(FrontendError, match=r"^node 'act' \(Relu\) is in domain 'com.example', which streamc does "
                                            r"not know; supported domains: the default ONNX domain, "
                                            r"finn.custom_op.general, onnx.brevitas, qonnx.custom_op.general, "
                                            r"com.microsoft \(QGemm\)$"):
        graph_from_model(model)


def test_unknown_qonnx_op_is_refused():
    model = make_model([helper.make_node("Im2Col", ["x"], ["y"], name="im2col", domain="finn.custom_op.general")])
    with pytest.raises(FrontendError, match=r"^node 'im2col' \(Im2Col, domain finn.custom_op.general\) is not a "
                                            r"supported QONNX op; supported: BipolarQuant, MultiThreshold, Quant, Trunc$"):
        graph_from_model(model)


def test_unsupported_op_points_to_the_listing():
    model = make_model([helper.make_node("LSTM", ["x"], ["y"])])
    with pytest.raises(FrontendError, match=r"^node 'LSTM_0' has op 'LSTM', which streamc does not support; "
                                            r"`streamc ops` lists the supported ops$"):
        graph_from_model(model)


def test_misspelled_op_gets_a_guess():
    model = make_model([helper.make_node("Matmul", ["x", "x"], ["y"])])
    with pytest.raises(FrontendError, match=r"^node 'Matmul_0' has op 'Matmul', which streamc does not support "
                                            r"\(did you mean 'MatMul'\?\); `streamc ops` lists the supported ops$"):
        graph_from_model(model)


def test_subgraph_attribute_is_refused():
    body = helper.make_graph([], "body", [], [])
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="act", body=body)])
    with pytest.raises(FrontendError, match=r"^node 'act' \(Relu\) has a subgraph in attribute 'body'; control flow "
                                            r"is not supported$"):
        graph_from_model(model)


def test_constant_node_with_unsupported_attribute():
    model = make_model([helper.make_node("Constant", [], ["c"], name="text", value_string="hello"),
                        helper.make_node("Relu", ["x"], ["y"])])
    with pytest.raises(FrontendError, match=r"^node 'text' \(Constant\) has attributes \['value_string'\]; "
                                            r"supported: exactly one of value, value_float, value_floats, value_int, "
                                            r"value_ints$"):
        graph_from_model(model)


# --- graph structure --------------------------------------------------------------------------------

def test_node_reading_a_tensor_nobody_produces():
    model = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")])
    with pytest.raises(FrontendError, match=r"^node 'add' \(Add\) reads 'ghost', which no earlier node produces "
                                            r"\(the graph is not in topological order, or the tensor is missing\)$"):
        graph_from_model(model)


def test_nodes_out_of_order_are_sorted():
    model = make_model([helper.make_node("Relu", ["h"], ["y"], name="second"),
                        helper.make_node("Relu", ["x"], ["h"], name="first")])
    assert [n.name for n in graph_from_model(model).nodes] == ["first", "second"]


def test_a_cycle_is_named():
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="entry"),
                        helper.make_node("Add", ["a", "c"], ["b"], name="left"),
                        helper.make_node("Relu", ["b"], ["c"], name="right"),
                        helper.make_node("Relu", ["b"], ["y"], name="exit")])
    with pytest.raises(FrontendError, match=r"^the graph has a cycle: 'left' -> 'right' -> 'left'; "
                                            r"ONNX graphs must be acyclic$"):
        graph_from_model(model)


def test_graph_output_produced_by_no_node():
    model = make_model([helper.make_node("Relu", ["x"], ["h"], name="act")])
    with pytest.raises(FrontendError, match=r"^graph output 'y' is produced by no node$"):
        graph_from_model(model)


def test_two_nodes_writing_one_tensor():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="first"),
                        helper.make_node("Neg", ["x"], ["y"], name="second")])
    with pytest.raises(FrontendError, match=r"^node 'second' \(Neg\) writes tensor 'y', which node 'first' \(Relu\) "
                                            r"already writes; every tensor must have exactly one producer$"):
        graph_from_model(model)


def test_node_overwriting_an_initializer():
    model = make_model([helper.make_node("Relu", ["x"], ["W"], name="act"),
                        helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                       initializers=[numpy_helper.from_array(WEIGHT, "W")])
    with pytest.raises(FrontendError, match=r"^node 'act' \(Relu\) writes tensor 'W', which an initializer already "
                                            r"writes; every tensor must have exactly one producer$"):
        graph_from_model(model)


def test_constant_node_overwriting_the_graph_input():
    model = make_model([helper.make_node("Constant", [], ["x"], name="c", value_float=1.0),
                        helper.make_node("Relu", ["x"], ["y"])])
    with pytest.raises(FrontendError, match=r"^node 'c' \(Constant\) writes tensor 'x', which the graph input already "
                                            r"writes; every tensor must have exactly one producer$"):
        graph_from_model(model)


def test_model_without_nodes():
    with pytest.raises(FrontendError, match=r"^the model has no nodes; there is nothing to compile$"):
        graph_from_model(make_model([], outputs=["x"]))


def test_two_graph_inputs_are_refused_at_load():
    model = make_model([helper.make_node("Add", ["x", "z"], ["y"])], inputs=["x", "z"])
    with pytest.raises(FrontendError, match=r"^the model has 2 graph inputs \('x', 'z'\); streamc compiles models "
                                            r"with exactly one input \(initializers listed as inputs do not count\)$"):
        graph_from_model(model)


def test_only_initializers_as_inputs_is_refused():
    model = make_model([helper.make_node("Relu", ["W"], ["y"])], inputs=["W"],
                       initializers=[numpy_helper.from_array(WEIGHT, "W")])
    with pytest.raises(FrontendError, match=r"^the model has 0 graph inputs; streamc compiles models with exactly one "
                                            r"input \(initializers listed as inputs do not count\)$"):
        graph_from_model(model)


def test_two_graph_outputs_are_refused_at_load():
    model = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])],
                       outputs=["y", "z"])
    with pytest.raises(FrontendError, match=r"^the model has 2 graph outputs \('y', 'z'\); streamc compiles models "
                                            r"with exactly one output$"):
        graph_from_model(model)


def test_graph_input_without_shape():
    model = matmul_model()
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(FrontendError, match=r"^graph input 'x' has no shape; export the model with a fixed input "
                                            r"shape$"):
        graph_from_model(model)


def test_initializer_whose_bytes_do_not_fit_its_shape():
    model = matmul_model()
    model.graph.initializer[0].raw_data = WEIGHT.tobytes()[:-4]
    with pytest.raises(FrontendError, match=r"^initializer 'W' holds 60 bytes of data; its shape \(4, 4\) of FLOAT "
                                            r"needs 64$"):
        graph_from_model(model)


def test_duplicate_initializer_names():
    model = matmul_model()
    model.graph.initializer.append(numpy_helper.from_array(WEIGHT, "W"))
    with pytest.raises(FrontendError, match=r"^two initializers are named 'W'; tensor names must be unique$"):
        graph_from_model(model)


# --- external data ----------------------------------------------------------------------------------

def external_model(location: str, *, offset: int | None = 0, length: int | None = WEIGHT.nbytes):
    """``matmul_model`` with W stored as external data at ``location``."""
    model = matmul_model()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = weight.external_data.add()
            entry.key, entry.value = key, str(value)
    return model


@pytest.fixture
def model_dir(tmp_path):
    """A model folder inside tmp_path; beside it, a valid weight file that must never be read."""
    (tmp_path / "outside.bin").write_bytes(WEIGHT.tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    return folder


def test_external_data_beside_the_model_loads(model_dir):
    (model_dir / "sub").mkdir()
    (model_dir / "sub" / "w.bin").write_bytes(b"\0" * 8 + WEIGHT.tobytes())
    graph = load_onnx(save(external_model("sub/w.bin", offset=8), model_dir))
    np.testing.assert_array_equal(graph.constants["W"], WEIGHT)


def test_external_data_without_length_reads_to_the_end(model_dir):
    (model_dir / "w.bin").write_bytes(WEIGHT.tobytes())
    graph = load_onnx(save(external_model("w.bin", offset=None, length=None), model_dir))
    np.testing.assert_array_equal(graph.constants["W"], WEIGHT)


def test_symlink_inside_the_folder_is_followed(model_dir):
    (model_dir / "real.bin").write_bytes(WEIGHT.tobytes())
    os.symlink("real.bin", model_dir / "link.bin")
    graph = load_onnx(save(external_model("link.bin"), model_dir))
    np.testing.assert_array_equal(graph.constants["W"], WEIGHT)


OUTSIDE = (r"^tensor 'W': external data '{}' lies outside the model's folder '.*/model'; external data is only read "
           r"from files beside the model \(a relative path, no '\.\.', no symlink leading out\)$")


def test_absolute_location_is_refused(model_dir):
    location = str(model_dir.parent / "outside.bin")
    with pytest.raises(FrontendError, match=OUTSIDE.format(re.escape(location))):
        load_onnx(save(external_model(location), model_dir))


def test_absolute_location_inside_the_folder_is_refused_too(model_dir):
    (model_dir / "w.bin").write_bytes(WEIGHT.tobytes())
    location = str(model_dir / "w.bin")
    with pytest.raises(FrontendError, match=OUTSIDE.format(re.escape(location))):
        load_onnx(save(external_model(location), model_dir))


@pytest.mark.parametrize("location", ["../outside.bin", "sub/../../outside.bin"])
def test_dotdot_escape_is_refused(location, model_dir):
    (model_dir / "sub").mkdir()
    with pytest.raises(FrontendError, match=OUTSIDE.format(re.escape(location))):
        load_onnx(save(external_model(location), model_dir))


def test_symlink_leading_out_is_refused(model_dir):
    os.symlink(model_dir.parent / "outside.bin", model_dir / "w.bin")
    with pytest.raises(FrontendError, match=OUTSIDE.format("w.bin")):
        load_onnx(save(external_model("w.bin"), model_dir))


def test_symlinked_subfolder_leading_out_is_refused(model_dir):
    os.symlink(model_dir.parent, model_dir / "up")
    with pytest.raises(FrontendError, match=OUTSIDE.format("up/outside.bin")):
        load_onnx(save(external_model("up/outside.bin"), model_dir))


def test_missing_external_data(model_dir):
    with pytest.raises(FrontendError, match=r"^tensor 'W': external data 'w.bin' is missing: no such file in the "
                                            r"model's folder '.*/model'$"):
        load_onnx(save(external_model("w.bin"), model_dir))


def test_external_data_file_too_short(model_dir):
    (model_dir / "w.bin").write_bytes(WEIGHT.tobytes()[:40])
    with pytest.raises(FrontendError, match=r"^tensor 'W': external data 'w.bin' is too short: it holds 40 bytes, the "
                                            r"tensor needs bytes 0 to 64$"):
        load_onnx(save(external_model("w.bin"), model_dir))


def test_external_data_length_not_fitting_the_shape(model_dir):
    (model_dir / "w.bin").write_bytes(WEIGHT.tobytes() + b"\0" * 4)
    with pytest.raises(FrontendError, match=r"^initializer 'W' holds 68 bytes of data; its shape \(4, 4\) of FLOAT "
                                            r"needs 64$"):
        load_onnx(save(external_model("w.bin", length=None), model_dir))


def test_external_data_offset_not_a_number(model_dir):
    (model_dir / "w.bin").write_bytes(WEIGHT.tobytes())
    with pytest.raises(FrontendError, match=r"^tensor 'W': external data 'w.bin': offset must be a non-negative "
                                            r"integer, not '-8'$"):
        load_onnx(save(external_model("w.bin", offset=-8), model_dir))


def test_external_data_without_location(model_dir):
    with pytest.raises(FrontendError, match=r"^tensor 'W' is stored as external data but names no location$"):
        load_onnx(save(external_model(""), model_dir))


def test_in_memory_model_with_unloaded_external_data():
    with pytest.raises(FrontendError, match=r"^initializer 'W' is stored as external data, which is not loaded here; "
                                            r"load the model with load_onnx$"):
        graph_from_model(external_model("w.bin"))
