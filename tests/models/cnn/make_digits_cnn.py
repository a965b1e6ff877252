"""Train and export a small quantized CNN for scikit-learn's 8x8 digits.

Run from the repository root with the ``models`` extra installed::

    python tests/models/cnn/make_digits_cnn.py

Network (Brevitas, per-tensor quantizers with learned float scales), input (1, 1, 8, 8)
in [0, 1]:
QuantIdentity UINT4 -> QuantConv2d 1->8 3x3 pad 1, INT4 weights, no bias -> BatchNorm2d
-> QuantReLU UINT4 -> MaxPool 2x2 -> QuantConv2d 8->16 3x3 no pad, INT4 weights, no bias
-> BatchNorm2d -> QuantReLU UINT2 -> flatten (64) -> QuantLinear 64->10 INT4 weights + float bias.

Writes, next to this script: ``digits_cnn.onnx`` (dynamo exporter), ``digits_cnn_legacy.onnx``
(TorchScript exporter), ``digits_cnn_frames.npy`` (all 1797 images, float32, (1797, 1, 8, 8)),
``digits_cnn_labels.npy`` (int64), ``digits_cnn_expected.npy`` (qonnx's logits for the
first 64 frames), ``digits_cnn.json`` (accuracies) and ``*.onnx.txt`` descriptions.
"""
import json
import sys
import time

import numpy as np
import torch
from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
from brevitas.quant import Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from cnn_export import HERE, record_expected

sys.path.insert(0, str(HERE.parent))
from digits_training import train  # noqa: E402

SEED = 8_8_1797
EPOCHS = 20
BATCH_SIZE = 64
LEARNING_RATE = 0.01
TEST_FRACTION = 0.2
INPUT_BITS = 4
WEIGHT_BITS = 4
FIRST_ACTIVATION_BITS = 4
SECOND_ACTIVATION_BITS = 2
# The digits data set stores pixels as integers 0..16.
PIXEL_MAX = 16.0
EXPECTED_COUNT = 64
REQUIRED_ACCURACY = 0.9


def build_model() -> torch.nn.Module:
    """The quantized CNN, untrained."""
    def conv(in_channels, out_channels, padding):
        return QuantConv2d(
            in_channels, out_channels, kernel_size=3, padding=padding, bias=False,
            weight_quant=Int8WeightPerTensorFloat, weight_bit_width=WEIGHT_BITS)

    return torch.nn.Sequential(
        QuantIdentity(act_quant=Uint8ActPerTensorFloat, bit_width=INPUT_BITS, return_quant_tensor=True),
        conv(1, 8, padding=1),
        torch.nn.BatchNorm2d(8),
        QuantReLU(bit_width=FIRST_ACTIVATION_BITS, return_quant_tensor=True),
        torch.nn.MaxPool2d(2),
        conv(8, 16, padding=0),
        torch.nn.BatchNorm2d(16),
        QuantReLU(bit_width=SECOND_ACTIVATION_BITS, return_quant_tensor=True),
        torch.nn.Flatten(),
        QuantLinear(64, 10, bias=True, weight_quant=Int8WeightPerTensorFloat, weight_bit_width=WEIGHT_BITS),
    )


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(axis=1) == labels).mean())


def main():
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    frames_np = (digits.images / PIXEL_MAX).astype(np.float32)[:, None, :, :]
    labels_np = digits.target.astype(np.int64)
    np.save(HERE / "digits_cnn_frames.npy", frames_np)
    np.save(HERE / "digits_cnn_labels.npy", labels_np)
    train_index, test_index = train_test_split(
        np.arange(len(labels_np)), test_size=TEST_FRACTION, random_state=SEED, stratify=labels_np)
    frames, labels = torch.from_numpy(frames_np), torch.from_numpy(labels_np)

    model = build_model()
    started = time.perf_counter()
    train(model, frames[train_index], labels[train_index],
          seed=SEED, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)
    training_seconds = time.perf_counter() - started
    with torch.no_grad():
        torch_logits = model(frames).numpy()
    expected = record_expected(model, "digits_cnn", frames_np, EXPECTED_COUNT)
    results = {
        "torch_accuracy_train": accuracy(torch_logits[train_index], labels_np[train_index]),
        "torch_accuracy_test": accuracy(torch_logits[test_index], labels_np[test_index]),
        "torch_accuracy_all": accuracy(torch_logits, labels_np),
        f"onnx_accuracy_first_{EXPECTED_COUNT}": accuracy(expected, labels_np[:EXPECTED_COUNT]),
        "training_seconds": round(training_seconds, 1),
        "test_fraction": TEST_FRACTION,
        "split_random_state": SEED,
    }
    (HERE / "digits_cnn.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    if results["torch_accuracy_test"] < REQUIRED_ACCURACY:
        raise SystemExit(f"test accuracy {results['torch_accuracy_test']:.3f} is below {REQUIRED_ACCURACY}")


if __name__ == "__main__":
    main()
