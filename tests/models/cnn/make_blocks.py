"""Export four small random convolutional blocks as QONNX test models.

Run from the repository root with the ``models`` extra installed::

    python tests/models/cnn/make_blocks.py

- ``depthwise_block``, input (1, 8, 8, 8) in [0, 1]: QuantIdentity UINT4 -> depthwise
  QuantConv2d 8->8 3x3 pad 1 groups 8, INT4 weights -> BN -> QuantReLU UINT4 -> pointwise
  QuantConv2d 8->16 1x1 INT4 -> BN -> QuantReLU UINT4 -> TruncAvgPool2d 8x8 (global, rounds
  the sum to 8 bits) -> flatten -> QuantLinear 16->10 INT4 weights + float bias.
- ``residual_block``, input (1, 8, 8, 8) in [-1, 1]: QuantIdentity INT4 (scale s_in) -> QuantConv2d
  8->8 3x3 pad 1 -> BN -> QuantReLU UINT4 -> QuantConv2d 8->8 3x3 pad 1 -> BN -> QuantIdentity
  INT6 (its own scale) -> add the quantized block input -> QuantReLU UINT4 ->
  TruncAdaptiveAvgPool2d to 1x1 -> flatten -> QuantLinear 8->10 INT4 + float bias.
- ``conv1d_kws``, input (1, 4, 32) roughly in [-2, 2], keyword-spotting style: QuantIdentity INT8
  -> QuantConv1d 4->8 k5 stride 2 pad 2 -> BN -> QuantReLU UINT4 -> QuantConv1d 8->16 k4
  padding 'same' (asymmetric pads [1, 2]) -> BN -> QuantReLU UINT3 -> MaxPool1d 2 ->
  QuantConv1d 16->16 k3 stride 2 pad 1 groups 4 -> BN -> QuantReLU UINT4 -> flatten (64)
  -> QuantLinear 64->12 INT4 + float bias.
- ``concat_block``, input (1, 8, 8, 8) in [0, 1], inception style: QuantIdentity UINT4 -> two
  branches, QuantConv2d 8->8 3x3 pad 1 -> BN and QuantConv2d 8->4 1x1 -> BN, each through one
  shared QuantReLU UINT4 (so both have its scale) -> concatenated on channels (12) -> QuantConv2d
  12->16 1x1 -> BN -> QuantReLU UINT4 -> MaxPool 2 -> flatten (256) -> QuantLinear 256->10 INT4 + float bias.

Weights are Brevitas' default initialisation; BatchNorm statistics are drawn around what
the frames produce (computed with quantization off), then the activation scales are
calibrated on the frames. Writes, next to this script, for each block: ``<name>.onnx``
(dynamo exporter), ``<name>_legacy.onnx`` (TorchScript exporter), ``<name>_frames.npy``
(16 frames), ``<name>_expected.npy`` (qonnx's outputs) and ``*.onnx.txt`` descriptions.
"""
import numpy as np
import torch
from brevitas.nn import (QuantConv1d, QuantConv2d, QuantIdentity, QuantLinear, QuantReLU,
                         TruncAdaptiveAvgPool2d, TruncAvgPool2d)
from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat

from cnn_export import HERE, record_expected, set_statistics

SEED = 20240613
FRAME_COUNT = 16
WEIGHT_BITS = 4
ACTIVATION_BITS = 4
IMAGE_NOISE = 0.3


def _weights(bits=WEIGHT_BITS):
    return dict(weight_quant=Int8WeightPerTensorFloat, weight_bit_width=bits)


def _relu(bits=ACTIVATION_BITS, return_quant_tensor=True):
    return QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=bits, return_quant_tensor=return_quant_tensor)


def depthwise_block() -> torch.nn.Module:
    channels, expanded, classes, size = 8, 16, 10, 8
    return torch.nn.Sequential(
        QuantIdentity(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True),
        QuantConv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=False, **_weights()),
        torch.nn.BatchNorm2d(channels),
        _relu(),
        QuantConv2d(channels, expanded, kernel_size=1, bias=False, **_weights()),
        torch.nn.BatchNorm2d(expanded),
        _relu(),
        TruncAvgPool2d(kernel_size=size, stride=size),
        torch.nn.Flatten(),
        QuantLinear(expanded, classes, bias=True, **_weights()),
    )


class ResidualBlock(torch.nn.Module):
    """Two 3x3 convolutions plus the block input, added with different scales."""

    def __init__(self, channels=8, classes=10):
        super().__init__()
        self.input_quant = QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
        self.conv1 = QuantConv2d(channels, channels, kernel_size=3, padding=1, bias=False, **_weights())
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.relu1 = _relu()
        self.conv2 = QuantConv2d(channels, channels, kernel_size=3, padding=1, bias=False, **_weights())
        self.bn2 = torch.nn.BatchNorm2d(channels)
        # Its own scale: the add takes two integer grids that a compiler must align.
        self.branch_quant = QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=6, return_quant_tensor=False)
        self.relu_out = _relu()
        self.pool = TruncAdaptiveAvgPool2d(output_size=(1, 1))
        self.flatten = torch.nn.Flatten()
        self.classifier = QuantLinear(channels, classes, bias=True, **_weights())

    def forward(self, x):
        shortcut = self.input_quant(x)
        branch = self.relu1(self.bn1(self.conv1(shortcut)))
        branch = self.branch_quant(self.bn2(self.conv2(branch)))
        shortcut_value = shortcut.value if hasattr(shortcut, "value") else shortcut
        summed = self.relu_out(branch + shortcut_value)
        return self.classifier(self.flatten(self.pool(summed)))


class ConcatBlock(torch.nn.Module):
    """Two branches of different widths, one activation quantizer, concatenated on channels."""

    def __init__(self, channels=8, classes=10):
        super().__init__()
        self.input_quant = QuantIdentity(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
        self.wide = QuantConv2d(channels, 8, kernel_size=3, padding=1, bias=False, **_weights())
        self.bn_wide = torch.nn.BatchNorm2d(8)
        self.narrow = QuantConv2d(channels, 4, kernel_size=1, bias=False, **_weights())
        self.bn_narrow = torch.nn.BatchNorm2d(4)
        self.shared_relu = _relu(return_quant_tensor=False)
        self.mix = QuantConv2d(12, 16, kernel_size=1, bias=False, **_weights())
        self.bn_mix = torch.nn.BatchNorm2d(16)
        self.relu_mix = _relu()
        self.pool = torch.nn.MaxPool2d(2)
        self.flatten = torch.nn.Flatten()
        self.classifier = QuantLinear(16 * 4 * 4, classes, bias=True, **_weights())

    def forward(self, x):
        x = self.input_quant(x)
        wide = self.shared_relu(self.bn_wide(self.wide(x)))
        narrow = self.shared_relu(self.bn_narrow(self.narrow(x)))
        mixed = self.relu_mix(self.bn_mix(self.mix(torch.cat([wide, narrow], dim=1))))
        return self.classifier(self.flatten(self.pool(mixed)))


def conv1d_kws() -> torch.nn.Module:
    channels, hidden, classes = 4, 16, 12
    return torch.nn.Sequential(
        QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=8, return_quant_tensor=True),
        QuantConv1d(channels, 8, kernel_size=5, stride=2, padding=2, bias=False, **_weights()),
        torch.nn.BatchNorm1d(8),
        _relu(),
        # An even kernel with 'same' padding needs one more zero on the right than the left.
        QuantConv1d(8, hidden, kernel_size=4, padding="same", bias=False, **_weights()),
        torch.nn.BatchNorm1d(hidden),
        _relu(bits=3),
        torch.nn.MaxPool1d(2),
        QuantConv1d(hidden, hidden, kernel_size=3, stride=2, padding=1, groups=4, bias=False, **_weights()),
        torch.nn.BatchNorm1d(hidden),
        _relu(),
        torch.nn.Flatten(),
        QuantLinear(hidden * 4, classes, bias=True, **_weights()),
    )


def _frames(generator):
    # A level per frame and channel under the noise: a global average pool of pure
    # noise would give every frame the same features.
    def images(low, high):
        level = low + (high - low) * torch.rand((FRAME_COUNT, 8, 1, 1), generator=generator)
        noise = (torch.rand((FRAME_COUNT, 8, 8, 8), generator=generator) * 2 - 1) * IMAGE_NOISE
        return (level + noise).clamp(low, high)

    unsigned_images = images(0.0, 1.0)
    signed_images = images(-1.0, 1.0)
    # Feature-like sequences: a smooth random walk per channel.
    steps = torch.randn((FRAME_COUNT, 4, 32), generator=generator) * 0.3
    sequences = steps.cumsum(dim=2).clamp(-2.0, 2.0)
    concat_images = images(0.0, 1.0)
    return {"depthwise_block": unsigned_images, "residual_block": signed_images, "conv1d_kws": sequences,
            "concat_block": concat_images}


BUILDERS = {"depthwise_block": depthwise_block, "residual_block": ResidualBlock, "conv1d_kws": conv1d_kws,
            "concat_block": ConcatBlock}


def main():
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    for stem, frames in _frames(generator).items():
        model = BUILDERS[stem]()
        set_statistics(model, frames, generator)
        frames_np = frames.numpy().astype(np.float32)
        np.save(HERE / f"{stem}_frames.npy", frames_np)
        expected = record_expected(model, stem, frames_np, FRAME_COUNT)
        print(f"  argmax spread {np.bincount(expected.argmax(1), minlength=expected.shape[1])}")


if __name__ == "__main__":
    main()
