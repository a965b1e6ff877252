"""``streamc ops`` and docs/ops.md list exactly the ops the loader accepts, with what the lowering makes of them."""

from pathlib import Path

import pytest
from onnx import TensorProto, helper

from streamc.cli import main
from streamc.errors import FrontendError
from streamc.frontend.load import graph_from_model
from streamc.ir import MICROSOFT_OPS, QONNX_OPS
from streamc.op_catalog import LIMITS, markdown, supported_ops
from streamc.reference import SUPPORTED_OPS
from streamc.transforms import op_kinds
from streamc.transforms.tidy import SHAPE_OPS

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
    assert set(LIMITS) <= set(LISTED)


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
