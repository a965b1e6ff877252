"""Train and export the float test models of `streamc quantize` on scikit-learn's 8x8 digits.

Run from the repository root with the ``models`` extra installed::

    python tests/models/float/make_float.py

Two float networks, input pixels in [0, 1]:

- ``digits_mlp``: 64 -> Linear 64 -> BatchNorm1d -> ReLU -> Linear 32 -> BatchNorm1d -> ReLU -> Linear 10
- ``digits_float_cnn``: (1, 8, 8) -> Conv 8 3x3 pad 1 -> BatchNorm2d -> ReLU -> MaxPool 2 -> Conv 16 3x3
  -> BatchNorm2d -> ReLU -> Flatten (64) -> Linear 10

Each is exported with torch's TorchScript exporter (opset 13, constant folding off so that the
BatchNormalization nodes stay for `streamc quantize` to fold). Writes, next to this script, for each
NAME: ``NAME.onnx``, ``NAME_calib.npy`` (calibration frames from the training split),
``NAME_test.npy`` and ``NAME_test_labels.npy`` (the held-out split) and ``float.json`` (the float
test accuracies, measured with onnxruntime on the exported files).
"""
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from digits_training import train  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 1797
EPOCHS = 30
BATCH_SIZE = 64
LEARNING_RATE = 0.01
TEST_FRACTION = 0.2
CALIBRATION_FRAMES = 200
PIXEL_MAX = 16.0  # the digits data set stores pixels as integers 0..16
OPSET = 13


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
        torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
        torch.nn.Linear(32, 10))


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(64, 10))


def export(model, name, frames, train_index, test_index, labels) -> float:
    path = HERE / f"{name}.onnx"
    torch.onnx.export(model, torch.from_numpy(frames[:1]), str(path), dynamo=False, opset_version=OPSET,
                      do_constant_folding=False, input_names=["input"], output_names=["logits"])
    np.save(HERE / f"{name}_calib.npy", frames[train_index[:CALIBRATION_FRAMES]])
    np.save(HERE / f"{name}_test.npy", frames[test_index])
    np.save(HERE / f"{name}_test_labels.npy", labels[test_index])
    session = ort.InferenceSession(str(path))
    logits = np.concatenate([session.run(None, {"input": f[None]})[0] for f in frames[test_index]])
    return float((logits.argmax(axis=1) == labels[test_index]).mean())


def main():
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    digits = load_digits()
    images = (digits.images / PIXEL_MAX).astype(np.float32)
    labels = digits.target.astype(np.int64)
    train_index, test_index = train_test_split(
        np.arange(len(labels)), test_size=TEST_FRACTION, random_state=SEED, stratify=labels)
    accuracies = {}
    for name, make, frames in (("digits_mlp", mlp, images.reshape(-1, 64)),
                               ("digits_float_cnn", cnn, images[:, None])):
        model = make()
        train(model, torch.from_numpy(frames[train_index]), torch.from_numpy(labels[train_index]),
              seed=SEED, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)
        accuracies[name] = export(model, name, frames, train_index, test_index, labels)
    (HERE / "float.json").write_text(json.dumps({"test_accuracy": accuracies, "test_fraction": TEST_FRACTION,
                                                 "split_random_state": SEED}, indent=2) + "\n")
    print(json.dumps(accuracies, indent=2))


if __name__ == "__main__":
    main()
