"""``streamc ops`` and docs/ops.md list exactly the ops the loader accepts, with what the lowering makes of them."""

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from streamc.cli import main
from streamc.errors import FrontendError
from streamc.frontend.load import graph_from_model
from streamc.ir import MICROSOFT_OPS, QONNX_OPS
from streamc.op_catalog import LIMITS, REWRITTEN, markdown, supported_ops
from streamc.reference import SUPPORTED_OPS
from streamc.transforms import op_kinds
from streamc.transforms.tidy import SHAPE_OPS, tidy

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ops.md"
LISTED = {entry.name: entry for entry in supported_ops()}


def one_node_model(op_type: str, domain: str):
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], name="n", domain=domain)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", 13), *(helper.make_opsetid(domain, 1) for _ in [domain] if domain)]
    return helper.make_model(graph, opset_imports=opsets)


def test_docs_are_what_streamc_ops_writes():
    assert DOCS.read_text() == markdown(), "docs/ops.md is stale: run `streamc ops --markdown > docs/ops.md`"


def test_the_listing_is_every_op_the_loader_and_the_lowering_know():
    assert set(LISTED) == SUPPORTED_OPS | QONNX_OPS | MICROSOFT_OPS
    dispatched = set(SHAPE_OPS).union(*(value for value in vars(op_kinds).values() if isinstance(value, frozenset)))
    assert dispatched <= set(LISTED)
    assert set(LIMITS) | set(REWRITTEN) <= set(LISTED)


@pytest.mark.parametrize("name", sorted(LISTED))
def test_the_loader_accepts_every_listed_op_in_each_listed_domain(name):
    for domain in LISTED[name].domains:
        try:
            graph_from_model(one_node_model(name, "" if domain == "ai.onnx" else domain))
        except FrontendError as exc:
            # One input is rarely what the op needs; what matters is that its name and domain are accepted.
            assert "not support" not in str(exc) and "not a supported" not in str(exc), exc


def test_an_unlisted_op_is_refused_with_a_pointer_to_the_listing():
    assert "LSTM" not in LISTED
    with pytest.raises(FrontendError, match=r"which streamc does not support; `streamc ops` lists the supported ops$"):
        graph_from_model(one_node_model("LSTM", ""))


def test_streamc_ops_prints_every_op_and_the_markdown(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in LISTED)
    assert main(["ops", "--markdown"]) == 0
    assert capsys.readouterr().out == DOCS.read_text()


def _rewritten_model(op_type: str):
    u8 = TensorProto.UINT8

    def scalar(name, value, kind=TensorProto.FLOAT):
        return helper.make_tensor(name, kind, [], [value])

    scales = [scalar("xs", 0.1), scalar("xz", 0, u8), scalar("ws", 0.1), scalar("wz", 0, u8), scalar("ys", 0.2),
              scalar("yz", 0, u8)]
    conv = op_type == "QLinearConv"
    x_shape, w_shape = ([1, 1, 3, 3], [1, 1, 1, 1]) if conv else ([1, 4], [4, 4])
    weights = helper.make_tensor("w", u8, w_shape, [1] * int(np.prod(w_shape)))
    x_type, domain, initializers = u8, "", [weights, *scales]
    if op_type in ("QLinearMatMul", "QLinearConv"):
        inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    elif op_type == "QGemm":
        inputs, domain = ["x", "xs", "xz", "w", "ws", "wz", "", "ys", "yz"], "com.microsoft"
    else:
        x_type, initializers = TensorProto.FLOAT, [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)]
        inputs = ["x", "w"] if op_type == "Gemm" else ["x"]
    # A Dropout that makes the graph's output stays: it is what names the output.
    nodes = ([helper.make_node(op_type, inputs, ["d"]), helper.make_node("Relu", ["d"], ["y"])] if op_type == "Dropout"
             else [helper.make_node(op_type, inputs, ["y"], domain=domain)])
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", x_type, x_shape)],
                              [helper.make_tensor_value_info("y", x_type, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("op_type", sorted(REWRITTEN))
def test_tidy_rewrites_into_the_ops_whose_roles_are_listed(op_type):
    ops = {node.op_type for node in tidy(graph_from_model(_rewritten_model(op_type))).nodes}
    assert op_type not in ops
    assert set(REWRITTEN[op_type]) - {"Identity"} <= ops
