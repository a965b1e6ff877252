"""Train and export the demo model: a quantized MLP for scikit-learn's 8x8 digits.

Run from the repository root with the ``models`` extra installed::

    python build_configs/models/make_digits_mlp.py

Network (Brevitas, all quantizers per-tensor with a learned float scale):
input (1, 64) in [0, 1] -> QuantIdentity UINT4 -> QuantLinear 64->64 INT4 weights, no bias
-> BatchNorm1d -> QuantReLU UINT2 -> QuantLinear 64->32 INT4 weights, no bias
-> BatchNorm1d -> QuantReLU UINT2 -> QuantLinear 32->10 INT4 weights + float bias = logits.

Writes, next to this script: ``digits_mlp.onnx`` (torch.export exporter, torch's
default), ``digits_mlp_legacy.onnx`` (TorchScript exporter), ``digits_frames.npy``
(all 1797 images, float32, (1797, 64)), ``digits_labels.npy`` (int64),
``digits_mlp.json`` (accuracies) and ``*.onnx.txt`` node-by-node descriptions; and
``tests/models/external/digits_mlp.onnx`` with its weights in ``digits_mlp.data``.
"""
import json
from pathlib import Path
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from brevitas.export import export_qonnx
from brevitas.nn import QuantIdentity, QuantLinear, QuantReLU
from brevitas.quant import Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The reference executor and the describer live with the test models; they need no torch.
sys.path.insert(0, str(REPO / "tests" / "models"))
from describe_onnx import describe  # noqa: E402
from digits_training import train  # noqa: E402
from qonnx_reference import execute_frames  # noqa: E402

SEED = 1797
EPOCHS = 60
BATCH_SIZE = 64
LEARNING_RATE = 0.01
TEST_FRACTION = 0.2
INPUT_BITS = 4
WEIGHT_BITS = 4
ACTIVATION_BITS = 2
# The digits data set stores pixels as integers 0..16.
PIXEL_MAX = 16.0
EXTERNAL_DIR = REPO / "tests" / "models" / "external"


def build_model() -> torch.nn.Module:
    """The quantized MLP, untrained."""
    def linear(in_features, out_features, bias):
        return QuantLinear(
            in_features, out_features, bias=bias,
            weight_quant=Int8WeightPerTensorFloat, weight_bit_width=WEIGHT_BITS)

    return torch.nn.Sequential(
        QuantIdentity(act_quant=Uint8ActPerTensorFloat, bit_width=INPUT_BITS),
        linear(64, 64, bias=False),
        torch.nn.BatchNorm1d(64),
        QuantReLU(bit_width=ACTIVATION_BITS),
        linear(64, 32, bias=False),
        torch.nn.BatchNorm1d(32),
        QuantReLU(bit_width=ACTIVATION_BITS),
        linear(32, 10, bias=True),
    )


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(axis=1) == labels).mean())


def export_both(model):
    """Export with the dynamo and the TorchScript exporter; save and return both protos.

    The exporters write into a scratch folder because torch's dynamo exporter leaves a
    stale ``.onnx.data`` file beside its output even though Brevitas re-saves the model
    with its weights inline.
    """
    example = torch.zeros(1, 64)
    names = dict(input_names=["global_in"], output_names=["global_out"])
    with tempfile.TemporaryDirectory() as scratch:
        dynamo = export_qonnx(
            model, args=example, export_path=f"{scratch}/dynamo.onnx", dynamo=True, optimize=True, **names)
        legacy = export_qonnx(
            model, args=example, export_path=f"{scratch}/legacy.onnx", dynamo=False, **names)
    onnx.save(dynamo, HERE / "digits_mlp.onnx")
    onnx.save(legacy, HERE / "digits_mlp_legacy.onnx")
    return dynamo, legacy


def save_with_external_data(model: onnx.ModelProto):
    """A copy whose large initializers sit in a side file, to test loading such models."""
    EXTERNAL_DIR.mkdir(parents=True, exist_ok=True)
    # onnx appends tensors to an existing data file, so a rerun must start from none.
    (EXTERNAL_DIR / "digits_mlp.data").unlink(missing_ok=True)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    onnx.save(copy, EXTERNAL_DIR / "digits_mlp.onnx", save_as_external_data=True,
              all_tensors_to_one_file=True, location="digits_mlp.data")


def main():
    started = time.monotonic()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    frames = (digits.data / PIXEL_MAX).astype(np.float32)
    labels = digits.target.astype(np.int64)
    np.save(HERE / "digits_frames.npy", frames)
    np.save(HERE / "digits_labels.npy", labels)
    train_index, test_index = train_test_split(
        np.arange(len(frames)), test_size=TEST_FRACTION, random_state=SEED, stratify=labels)

    model = build_model()
    train(model, torch.from_numpy(frames[train_index]), torch.from_numpy(labels[train_index]),
          seed=SEED, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(frames)).numpy()
    trained = time.monotonic()

    dynamo, legacy = export_both(model)
    save_with_external_data(dynamo)
    for name, proto in (("digits_mlp", dynamo), ("digits_mlp_legacy", legacy)):
        (HERE / f"{name}.onnx.txt").write_text(describe(proto))
    onnx_logits = execute_frames(dynamo, frames)
    # The TorchScript export only has to agree with the dynamo one; the held-out frames
    # show that at a fifth of the cost of running all of them.
    legacy_logits = execute_frames(legacy, frames[test_index])

    report = {
        "frames": len(frames),
        "train_frames": len(train_index),
        "test_frames": len(test_index),
        "split": f"sklearn train_test_split(test_size={TEST_FRACTION}, random_state={SEED}, stratify=labels)",
        "torch_accuracy_all": accuracy(torch_logits, labels),
        "torch_accuracy_test": accuracy(torch_logits[test_index], labels[test_index]),
        "onnx_accuracy_all": accuracy(onnx_logits, labels),
        "onnx_accuracy_test": accuracy(onnx_logits[test_index], labels[test_index]),
        "onnx_legacy_accuracy_test": accuracy(legacy_logits, labels[test_index]),
        "max_abs_logit_difference_onnx_vs_torch": float(np.abs(onnx_logits - torch_logits).max()),
        "max_abs_logit_difference_legacy_vs_onnx_test": float(np.abs(legacy_logits - onnx_logits[test_index]).max()),
        "onnx_argmax_disagreements_vs_torch": int((onnx_logits.argmax(1) != torch_logits.argmax(1)).sum()),
        "onnx_executor": "qonnx.core.onnx_exec.execute_onnx, one frame at a time",
    }
    (HERE / "digits_mlp.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"training {trained - started:.1f} s, export and checks {time.monotonic() - trained:.1f} s")


if __name__ == "__main__":
    main()
