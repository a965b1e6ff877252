"""The bit-width search of streamc quantize (streamc.ptq.budget): accuracy as its target where labels are
given, and a beam search past the models whose every combination it can price."""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import streamc
from streamc.ptq.budget import ALLOWED_BITS, EXHAUSTIVE_CHOICES, search_bits
from streamc.ptq.constraints import Constraints

FLOAT = Path(__file__).parent / "models" / "float"


def test_with_labels_the_search_keeps_the_most_accurate_choice_that_fits(tmp_path):
    """The digits MLP at 200,000 frames/s on the UP5K: w8a8 does not fit, w4a4 does; of the 27 choices, the
    one kept is the most accurate that fits (ties: the least noise), and it is the model written."""
    report = streamc.quantize(FLOAT / "digits_mlp.onnx", FLOAT / "digits_mlp_calib.npy", tmp_path / "q.onnx",
                              test=FLOAT / "digits_mlp_test.npy", labels=FLOAT / "digits_mlp_test_labels.npy",
                              scales="float", device="ice40-up5k", target_fps=200_000, clock_mhz=30)
    fitting = [choice for choice in report.priced if choice.fits]
    assert len(report.priced) == 27 and fitting and report.chosen.fits
    uniform = {choice.bits[0]: choice for choice in report.priced if len(set(choice.bits)) == 1}
    assert not uniform[8].fits and uniform[4].fits
    assert all(choice.accuracy is not None for choice in fitting)
    assert all(choice.accuracy is None for choice in report.priced if not choice.fits)
    assert report.chosen.accuracy == max(choice.accuracy for choice in fitting)
    # the model written is the choice measured (float scales: nothing changes it after the search)
    assert report.quantized_accuracy == report.chosen.accuracy
    best = [c for c in fitting if c.accuracy == report.chosen.accuracy]
    assert report.chosen.noise == min(c.noise for c in best)


def _deep_mlp(path: Path, widths=(64, 32, 32, 32, 32, 10)) -> Path:
    rng = np.random.default_rng(5)
    inits, nodes, x = [], [], "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        inits.append(numpy_helper.from_array((rng.normal(size=(b, a)) / np.sqrt(a)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Gemm", [x, f"w{i}"], [f"g{i}"], name=f"gemm{i}", transB=1))
        x = f"g{i}"
        if i < len(widths) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, widths[0]])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, widths[-1]])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def test_five_layers_are_searched_with_a_beam(tmp_path):
    """3**5 = 243 combinations: the beam prices a fraction of them and finds per-layer bits that fit at a
    rate w8a8 cannot reach, with less noise than the uniform w4a4 that also fits."""
    path = _deep_mlp(tmp_path / "deep.onnx")
    frames = np.random.default_rng(6).uniform(0, 1, size=(64, 64)).astype(np.float32)
    chosen, priced = search_bits(path, frames, Constraints(), device="ice40-up5k", target_fps=200_000, clock_mhz=30)
    assert len(ALLOWED_BITS) ** 5 > EXHAUSTIVE_CHOICES and len(priced) < len(ALLOWED_BITS) ** 5
    uniform = {choice.bits[0]: choice for choice in priced if len(set(choice.bits)) == 1}
    assert set(uniform) == set(ALLOWED_BITS) and not uniform[8].fits and uniform[4].fits
    assert chosen.fits and len(set(chosen.bits)) > 1 and chosen.noise < uniform[4].noise
    assert chosen.noise == min(choice.noise for choice in priced if choice.fits)
