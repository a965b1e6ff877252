"""Run an exported QONNX model with qonnx's reference executor, one frame at a time.

Used to make the expected outputs streamc's tests compare against. Kept free of
torch so that tests can call it without the ``models`` extra.
"""
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx

import qonnx.core.onnx_exec as qonnx_onnx_exec
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_shapes import InferShapes

# onnxruntime 1.31 reads models up to IR version 13; qonnx builds its one-node models
# with onnx.helper.make_model, which stamps the newest IR version onnx knows (14 in
# onnx 1.23), so every standard node would be refused.
ORT_READABLE_IR_VERSION = 10


@contextmanager
def _node_models_readable_by_onnxruntime():
    make_model = qonnx_onnx_exec.qonnx_make_model

    def make_model_with_old_ir(graph, **kwargs):
        model = make_model(graph, **kwargs)
        model.ir_version = ORT_READABLE_IR_VERSION
        return model

    qonnx_onnx_exec.qonnx_make_model = make_model_with_old_ir
    try:
        yield
    finally:
        qonnx_onnx_exec.qonnx_make_model = make_model


def load_for_execution(model: "onnx.ModelProto | str | Path") -> ModelWrapper:
    """Wrap a model for qonnx's executor, with every tensor shape inferred.

    Parameters
    ----------
    model : onnx.ModelProto or path-like
        The model as exported; it is copied, never changed in place.

    Returns
    -------
    ModelWrapper
        The model with shapes inferred (qonnx refuses to run without them).
    """
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
    else:
        proto = onnx.load(str(model))
    return ModelWrapper(proto).transform(InferShapes())


def execute_frames(model: "onnx.ModelProto | str | Path", frames: np.ndarray) -> np.ndarray:
    """Run ``frames`` through ``model`` one at a time and stack the outputs.

    Parameters
    ----------
    model : onnx.ModelProto or path-like
        A model with one input and one output whose leading dimension is 1.
    frames : numpy.ndarray
        Inputs stacked along axis 0; ``frames[i:i + 1]`` must match the model's input shape.

    Returns
    -------
    numpy.ndarray
        Outputs stacked along axis 0, shape ``(len(frames),) + output_shape[1:]``.
    """
    wrapper = load_for_execution(model)
    input_name = wrapper.graph.input[0].name
    output_name = wrapper.graph.output[0].name
    outputs = []
    with _node_models_readable_by_onnxruntime():
        for index in range(len(frames)):
            frame = np.ascontiguousarray(frames[index:index + 1], dtype=np.float32)
            result = qonnx_onnx_exec.execute_onnx(wrapper, {input_name: frame})
            outputs.append(result[output_name])
    return np.concatenate(outputs, axis=0)
