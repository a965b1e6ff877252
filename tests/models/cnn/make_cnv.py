"""Export randomized CNV_1W1A, CNV_1W2A and CNV_2W2A (Brevitas' bnn_pynq examples) as QONNX.

Run from the repository root with the ``models`` extra installed::

    python tests/models/cnn/make_cnv.py

The networks are untrained; their weights are Brevitas' default initialisation and
their BatchNorm and TensorNorm statistics are drawn around the statistics of the test
frames, with some negative BatchNorm weights (see ``cnn_export.randomize_norms``).
Writes, next to this script:

- ``cnv_w1a1.onnx``, ``cnv_w1a2.onnx``, ``cnv_w2a2.onnx``: the torch.export (dynamo) exporter;
- ``cnv_w1a1_legacy.onnx``: the TorchScript exporter (only one: each CNV is ~6 MB);
- ``cnv_frames.npy``: 16 CIFAR-sized frames in [0, 1], float32, shape (16, 3, 32, 32);
- ``<name>_expected.npy``: qonnx's outputs for the frames, shape (16, 10);
- ``*.onnx.txt``: the node-by-node description from ``describe_onnx.py``.
"""
import numpy as np
import torch
import torch.nn.functional as F
from brevitas_examples.bnn_pynq.models import model_with_cfg

from cnn_export import HERE, randomize_norms, record_expected

SEED = 20240612
FRAME_COUNT = 16
FRAME_SHAPE = (3, 32, 32)
# Coarse colour blobs upsampled plus pixel noise: neighbouring pixels correlate as in
# photographs, which uniform noise would not give.
BLOB_GRID = 8
PIXEL_NOISE = 0.1
VARIANTS = {"cnv_w1a1": "cnv_1w1a", "cnv_w1a2": "cnv_1w2a", "cnv_w2a2": "cnv_2w2a"}
WITH_LEGACY = {"cnv_w1a1"}


def cifar_like_frames(generator):
    blobs = torch.rand((FRAME_COUNT, FRAME_SHAPE[0], BLOB_GRID, BLOB_GRID), generator=generator)
    smooth = F.interpolate(blobs, size=FRAME_SHAPE[1:], mode="bilinear", align_corners=False)
    noise = (torch.rand(smooth.shape, generator=generator) * 2 - 1) * PIXEL_NOISE
    return (smooth + noise).clamp(0.0, 1.0)


def main():
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    frames = cifar_like_frames(generator)
    frames_np = frames.numpy().astype(np.float32)
    np.save(HERE / "cnv_frames.npy", frames_np)
    for stem, config_name in VARIANTS.items():
        model, _ = model_with_cfg(config_name, pretrained=False)
        randomize_norms(model, frames, generator)
        expected = record_expected(model, stem, frames_np, FRAME_COUNT, with_legacy=stem in WITH_LEGACY)
        print(f"  argmax spread {np.bincount(expected.argmax(1), minlength=10)}")


if __name__ == "__main__":
    main()
