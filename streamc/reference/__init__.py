"""Reference semantics of every operator streamc accepts, in numpy.

This package is what "bit-exact" means in streamc: hardware, transformed graphs and the
input model are all compared against :func:`run_node`. Each op is written to agree with
the executor the input model was written for: QONNX ops with qonnx 1.0, standard ONNX ops
with onnxruntime's CPU kernels. Each family module says how exactly its ops agree:

* :mod:`.quantization` -- the QONNX ops, ``QuantizeLinear``/``DequantizeLinear`` and the
  integer ops (``MatMulInteger``, ``ConvInteger``, ``QLinearMatMul``, ``QLinearConv``, ``QGemm``);
* :mod:`.elementwise` -- arithmetic, comparisons and activations;
* :mod:`.linear` -- ``MatMul``, ``Gemm``, ``Conv`` and ``BatchNormalization``;
* :mod:`.windows` -- the window geometry of convolution and pooling, and the pools;
* :mod:`.shapes` -- shapes, data movement and constants;
* :mod:`.casts` -- ``Cast``;
* :mod:`.reductions` -- reductions, ``Softmax`` and ``ArgMax``.

Where onnxruntime's result depends on its own accumulation order or its own polynomial
approximations (``MatMul``/``Gemm``/``Conv``, ``AveragePool``/``GlobalAveragePool``,
``ReduceSum``/``ReduceMean`` on floats, ``Exp``, ``Tanh``, ``Erf``, ``Softplus``, ``Softmax``,
``Pow``) an op computes in float64 and rounds once to the input dtype. That is deterministic on
every machine, equal to onnxruntime whenever onnxruntime is exact (integer-valued operands with
sums below 2**24, which is what quantized graphs carry), and within a few ulp otherwise.
"""

from __future__ import annotations

import numpy as np

from streamc.errors import UnsupportedOpError

# A family's ops are registered when its module is imported: every family is imported here,
# or its ops would silently be missing from SUPPORTED_OPS.
from . import casts, elementwise, linear, quantization, reductions, shapes, windows  # noqa: F401
from .registry import REGISTRY, Versions
from .windows import window_geometry

__all__ = ["SUPPORTED_OPS", "run_node", "window_geometry"]


def run_node(
    op_type: str,
    attrs: dict,
    inputs: list[np.ndarray | None],
    *,
    opset: int = 13,
    qonnx_opset: int = 1,
) -> list[np.ndarray]:
    """Execute one node.

    Parameters
    ----------
    op_type : str
        Operator name, domain-normalized by the caller: ``Quant``, ``BipolarQuant``,
        ``Trunc`` and ``MultiThreshold`` are the QONNX ops, every other name is standard ONNX.
    attrs : dict
        Attributes as plain python values (int, float, str, lists, numpy arrays for tensors).
    inputs : list of numpy.ndarray or None
        Inputs in node order, ``None`` for an omitted optional input.
    opset : int
        The model's default-domain opset; selects e.g. attribute or input forms of
        ``Clip``, ``Squeeze``, ``Unsqueeze``, ``Slice``, ``Reshape``, ``Softmax``.
    qonnx_opset : int
        The model's qonnx-domain opset; ``Trunc`` has two versions.

    Returns
    -------
    list of numpy.ndarray
        The node's outputs. ``Dropout`` returns its output and its mask; a caller binds
        as many as the node names.

    Raises
    ------
    UnsupportedOpError
        If ``op_type`` is not one of :data:`SUPPORTED_OPS`.
    FrontendError
        If an attribute or input has a value the op does not support.
    """
    function = REGISTRY.get(op_type)
    if function is None:
        raise UnsupportedOpError(
            f"op {op_type!r} is not supported by streamc's reference executor; "
            f"supported ops: {', '.join(sorted(REGISTRY))}"
        )
    outputs = function(attrs, list(inputs), Versions(opset, qonnx_opset))
    # numpy turns 0-d results into scalars; callers get arrays
    return [np.asarray(output) for output in outputs]


SUPPORTED_OPS: frozenset[str] = frozenset(REGISTRY)
