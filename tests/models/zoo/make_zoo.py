"""A model zoo of the networks users bring, with random weights, as streamc test models.

Run from the repository root with the ``models`` extra installed (torch, brevitas, onnxruntime)::

    python tests/models/zoo/make_zoo.py [NAME ...]

or, to record the ORT model's expected outputs again from the committed model and frames::

    python tests/models/zoo/make_zoo.py --expected-only

Every Brevitas model gets its weights from Brevitas' default initialisation under a fixed seed,
BatchNorm statistics drawn around what the frames produce with quantization off
(``cnn_export.randomize_norms``), activation scales calibrated on the frames
(``cnn_export.calibrate_activations``), and is exported with ``export_qonnx`` (dynamo exporter).
Its expected outputs are qonnx's executor's (``qonnx_reference.execute_frames``).

- ``mobilenet_v1_w025``, input (1, 3, 32, 32) in [0, 1]: Brevitas' own MobileNet-v1
  (``brevitas_examples.imagenet_classification.models.mobilenetv1.MobileNet``) at width 0.25
  (channels 8, 16, 32, 32, 64, 64, 128 x 6, 256, 256), 4-bit weights and activations, 8-bit
  first-layer weights, per-channel weight scales, its default quantizers: per-channel activation
  scales on the first block's ReLU and on every pointwise ReLU but the last stage's (each feeds a
  depthwise convolution), ``TruncAvgPool2d`` over the final 1x1 map (kernel 1: 32x32 input, five
  stride-2 stages), FC 256->10 (10 classes, not ImageNet's 1000, for a 32x32 input; 1000 would
  be 1 MB more weights). Brevitas' network takes float images into its first convolution; an
  8-bit ``QuantIdentity`` in front quantizes them (as FINN's MobileNet flow does with its
  preprocessing), since a quantized accelerator takes integer codes.
- ``resnet8``, input (1, 3, 32, 32) in [-1, 1]: MLPerf Tiny's image-classification ResNet-8:
  8-bit input quantizer -> conv 3x3 16 + BN + ReLU -> three stacks (16, 32, 64 filters, strides
  1, 2, 2) of conv 3x3 + BN + ReLU, conv 3x3 + BN, the skip (the stack input, or a 1x1 strided
  conv where the shape changes), Add + ReLU -> average pool 8x8 (``TruncAvgPool2d``) -> dense 10.
  INT4 weights (per tensor), both Add inputs quantized by their own INT4 ``QuantIdentity``
  (scales differ), UINT4 ReLUs.
- ``resnet8_ort_qdq``: the same network in float (torch layers, BatchNorm randomized the same
  way), exported to ONNX (opset 13, BatchNorm folded by the exporter) and quantized by
  onnxruntime's ``quantize_static`` to QDQ: per-channel int8 weights, symmetric int8 activations,
  calibrated on 32 random frames in [-1, 1]. Expected outputs from ``tests/exact_model.py``
  (exact integer kernels; every other node alone in onnxruntime, optimizations off).
- ``ds_cnn``, input (1, 1, 49, 10) (MFCC-like, in [-4, 4]): MLPerf Tiny's keyword-spotting DS-CNN:
  8-bit input quantizer -> conv 10x4 stride 2, 64 filters, padding (5, 1) -> BN + ReLU -> four
  depthwise-separable blocks (dw 3x3 + BN + ReLU, pw 1x1 64 + BN + ReLU) -> average pool 25x5
  (``TruncAvgPool2d``) -> dense 12. Keras' 'same' padding pads rows 4 above and 5 below; Brevitas
  pads symmetrically, so 5 and 5 give the same 25x5 map. 64 channels as in MLPerf, INT4
  weights, UINT4 activations.
- ``autoencoder``, input (1, 640) in [-1, 1]: MLPerf Tiny's anomaly-detection autoencoder:
  8-bit input quantizer -> 640 -> 128 -> 128 -> 128 -> 128 -> 8 -> 128 -> 128 -> 128 -> 128
  (Linear + BN + ReLU each) -> Linear 640 (float bias, the output). INT8 weights, UINT8 ReLUs.
- ``autoencoder_8bit``, input (1, 128) in [-1, 1]: the dense autoencoder of issue 24, 8-bit input quantizer
  -> 128 -> 64 -> 64 -> 8 -> 64 -> 64 (Linear + BN + ReLU each) -> Linear 128 (float bias, the output),
  INT8 weights and UINT8 ReLUs with per-tensor float scales; exported with ``export_qonnx`` and also
  as QCDQ (``autoencoder_8bit_qcdq``: ``export_onnx_qcdq``, TorchScript exporter; its expected outputs
  from ``tests/exact_model.py``, onnxruntime node by node, since qonnx has no QCDQ ops to run).
- ``jet_tagging_mlp``, input (1, 16) (standardized features, in [-3, 3]): hls4ml's jet-tagging
  MLP 16 -> 64 -> 32 -> 32 -> 5 (Linear + BN + ReLU, the last Linear bare: its softmax is left to
  the host), 8-bit input quantizer, INT6 weights, UINT6 activations as the hls4ml QKeras benchmark.

Writes, next to this script, ``<name>.onnx``, ``<name>.onnx.txt``, ``<name>_frames.npy``
(8 frames) and ``<name>_expected.npy`` (all 8 frames).
"""
import sys
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
sys.path.insert(0, str(TESTS))  # the exact reference (exact_model.py), needs no torch
from exact_model import run_frames  # noqa: E402

SEED = 20260514
FRAME_COUNT = 8
#: Frames that calibrate the scales and norm statistics; more than the recorded ones.
CALIBRATION_COUNT = 32
ORT_NAME = "resnet8_ort_qdq"
NAMES = ("mobilenet_v1_w025", "resnet8", ORT_NAME, "ds_cnn", "autoencoder", "jet_tagging_mlp", "autoencoder_8bit")
#: Brevitas models also exported as QCDQ, as ``<name>_qcdq.onnx``.
QCDQ_NAMES = ("autoencoder_8bit",)


def record_ort_expected() -> None:
    """``resnet8_ort_qdq_expected.npy``: the exact reference's outputs for the committed model and frames."""
    frames = np.load(HERE / f"{ORT_NAME}_frames.npy")
    np.save(HERE / f"{ORT_NAME}_expected.npy", run_frames(onnx.load(HERE / f"{ORT_NAME}.onnx"), frames))


def _brevitas_builders():
    """The Brevitas networks, built here so that ``--expected-only`` needs no torch."""
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU, TruncAvgPool2d
    from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Uint8ActPerTensorFloat
    from brevitas_examples.imagenet_classification.models.mobilenetv1 import MobileNet

    def weights(bits):
        return dict(weight_quant=Int8WeightPerTensorFloat, weight_bit_width=bits)

    def relu(bits, return_quant_tensor=True):
        return QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=bits, return_quant_tensor=return_quant_tensor)

    def input_quant(signed, bits=8):
        quant = Int8ActPerTensorFloat if signed else Uint8ActPerTensorFloat
        return QuantIdentity(act_quant=quant, bit_width=bits, return_quant_tensor=True)

    def mobilenet_v1_w025():
        # quant_mobilenet_v1's channel list and width scaling, with its 4-bit configuration's
        # settings (ROUND_AVG_POOL true: qonnx's executor and the exporters need the round).
        channels = [[int(c * 0.25) for c in stage]
                    for stage in [[32], [64], [128, 128], [256, 256], [512] * 6, [1024, 1024]]]
        net = MobileNet(channels=channels, first_stage_stride=False, round_average_pool=True, act_bit_width=4,
                        weight_bit_width=4, last_layer_bit_width=4, avg_pool_kernel_size=1, num_classes=10)
        return torch.nn.Sequential(input_quant(signed=False), net)

    class ResidualStack(torch.nn.Module):
        """Conv-BN-ReLU, conv-BN, plus the skip (a 1x1 strided conv where the shape changes), ReLU."""

        def __init__(self, in_channels, channels, stride):
            super().__init__()
            self.conv1 = QuantConv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False, **weights(4))
            self.bn1 = torch.nn.BatchNorm2d(channels)
            self.relu1 = relu(4)
            self.conv2 = QuantConv2d(channels, channels, 3, padding=1, bias=False, **weights(4))
            self.bn2 = torch.nn.BatchNorm2d(channels)
            # Both Add inputs quantized, each on its own scale: the add aligns two integer grids.
            self.branch_quant = QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=4, return_quant_tensor=False)
            self.skip = None
            if stride != 1 or in_channels != channels:
                self.skip = QuantConv2d(in_channels, channels, 1, stride=stride, bias=False, **weights(4))
                self.skip_quant = QuantIdentity(act_quant=Int8ActPerTensorFloat, bit_width=4,
                                                return_quant_tensor=False)
            self.relu_out = relu(4)

        def forward(self, x):
            branch = self.branch_quant(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))))
            if self.skip is None:
                skip = x.value if hasattr(x, "value") else x
            else:
                skip = self.skip_quant(self.skip(x))
            return self.relu_out(branch + skip)

    class ResNet8(torch.nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.input_quant = input_quant(signed=True)
            self.conv = QuantConv2d(3, 16, 3, padding=1, bias=False, **weights(4))
            self.bn = torch.nn.BatchNorm2d(16)
            self.relu = relu(4)
            self.stacks = torch.nn.Sequential(ResidualStack(16, 16, 1), ResidualStack(16, 32, 2),
                                              ResidualStack(32, 64, 2))
            self.pool = TruncAvgPool2d(kernel_size=8, stride=8)
            self.flatten = torch.nn.Flatten()
            self.classifier = QuantLinear(64, classes, bias=True, **weights(4))

        def forward(self, x):
            x = self.relu(self.bn(self.conv(self.input_quant(x))))
            return self.classifier(self.flatten(self.pool(self.stacks(x))))

    def ds_cnn(channels=64, classes=12):
        layers = [input_quant(signed=True),
                  QuantConv2d(1, channels, (10, 4), stride=2, padding=(5, 1), bias=False, **weights(4)),
                  torch.nn.BatchNorm2d(channels), relu(4)]
        for _ in range(4):
            layers += [QuantConv2d(channels, channels, 3, padding=1, groups=channels, bias=False, **weights(4)),
                       torch.nn.BatchNorm2d(channels), relu(4),
                       QuantConv2d(channels, channels, 1, bias=False, **weights(4)),
                       torch.nn.BatchNorm2d(channels), relu(4)]
        layers += [TruncAvgPool2d(kernel_size=(25, 5), stride=(25, 5)), torch.nn.Flatten(),
                   QuantLinear(channels, classes, bias=True, **weights(4))]
        return torch.nn.Sequential(*layers)

    def mlp(widths, bits):
        layers = [input_quant(signed=True)]
        for width_in, width_out in zip(widths[:-2], widths[1:-1]):
            layers += [QuantLinear(width_in, width_out, bias=True, **weights(bits)),
                       torch.nn.BatchNorm1d(width_out), relu(bits)]
        layers.append(QuantLinear(widths[-2], widths[-1], bias=True, **weights(bits)))
        return torch.nn.Sequential(*layers)

    return {
        "mobilenet_v1_w025": mobilenet_v1_w025,
        "resnet8": ResNet8,
        "ds_cnn": ds_cnn,
        "autoencoder": lambda: mlp([640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640], 8),
        "jet_tagging_mlp": lambda: mlp([16, 64, 32, 32, 5], 6),
        "autoencoder_8bit": lambda: mlp([128, 64, 64, 8, 64, 64, 128], 8),
    }


#: Input shape (without the batch axis) and the range frames are drawn from.
INPUTS = {
    "mobilenet_v1_w025": ((3, 32, 32), 0.0, 1.0),
    "resnet8": ((3, 32, 32), -1.0, 1.0),
    ORT_NAME: ((3, 32, 32), -1.0, 1.0),
    "ds_cnn": ((1, 49, 10), -4.0, 4.0),
    "autoencoder": ((640,), -1.0, 1.0),
    "jet_tagging_mlp": ((16,), -3.0, 3.0),
    "autoencoder_8bit": ((128,), -1.0, 1.0),
}


def _frames(name, count, generator):
    """Images get a level per frame and channel under the noise: a global average pool of pure
    noise would give every frame nearly the same features, and every frame the same class."""
    import torch

    shape, low, high = INPUTS[name]
    noise = torch.rand((count, *shape), generator=generator) * (high - low) + low
    if len(shape) == 3:
        level = low + (high - low) * torch.rand((count, shape[0], 1, 1), generator=generator)
        noise = (level + 0.5 * (noise - (low + high) / 2)).clamp(low, high)
    return noise.float()


def make_brevitas(name, generator):
    cnn_folder = HERE.parent / "cnn"
    sys.path.insert(0, str(cnn_folder))
    from cnn_export import record_expected, set_statistics

    model = _brevitas_builders()[name]()
    calibration = _frames(name, CALIBRATION_COUNT, generator)
    frames = calibration[:FRAME_COUNT]
    set_statistics(model, calibration, generator)
    frames_np = frames.numpy().astype(np.float32)
    np.save(HERE / f"{name}_frames.npy", frames_np)
    expected = record_expected(model, name, frames_np, FRAME_COUNT, with_legacy=False, folder=HERE)
    print(f"  argmax {expected.reshape(len(expected), -1).argmax(1)}")
    if name in QCDQ_NAMES:
        export_qcdq(model, name, frames_np)


def export_qcdq(model, name, frames):
    """``<name>_qcdq.onnx`` (frames and expected outputs beside it): the same weights as QCDQ."""
    import torch
    from brevitas.export import export_onnx_qcdq

    stem = f"{name}_qcdq"
    path = HERE / f"{stem}.onnx"
    # the TorchScript QCDQ exporter returns nothing; its file is the result
    export_onnx_qcdq(model.eval(), args=torch.zeros(1, *frames.shape[1:]), export_path=str(path), dynamo=False,
                     input_names=["x"], output_names=["y"])
    np.save(HERE / f"{stem}_frames.npy", frames)
    expected = run_frames(onnx.load(path), frames).astype(np.float32)
    np.save(HERE / f"{stem}_expected.npy", expected)
    qonnx_expected = np.load(HERE / f"{name}_expected.npy")
    print(f"{stem}: out {expected.shape}, |qcdq-qonnx| max {np.abs(expected - qonnx_expected).max():.3g}; "
          f"{path.stat().st_size / 1e6:.2f} MB")
    sys.path.insert(0, str(HERE.parent))
    from describe_onnx import describe
    (HERE / f"{stem}.onnx.txt").write_text(describe(onnx.load(path)))


class _ResNet8Float:
    """The float ResNet-8, for onnxruntime's quantizer."""

    @staticmethod
    def build():
        import torch

        class Stack(torch.nn.Module):
            def __init__(self, in_channels, channels, stride):
                super().__init__()
                self.branch = torch.nn.Sequential(
                    torch.nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False),
                    torch.nn.BatchNorm2d(channels), torch.nn.ReLU(),
                    torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False), torch.nn.BatchNorm2d(channels))
                self.skip = (torch.nn.Conv2d(in_channels, channels, 1, stride=stride, bias=True)
                             if stride != 1 or in_channels != channels else torch.nn.Identity())

            def forward(self, x):
                return torch.relu(self.branch(x) + self.skip(x))

        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            Stack(16, 16, 1), Stack(16, 32, 2), Stack(32, 64, 2),
            torch.nn.AvgPool2d(8), torch.nn.Flatten(), torch.nn.Linear(64, 10))


def make_ort(generator):
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    sys.path.insert(0, str(HERE.parent / "cnn"))
    from cnn_export import randomize_norms

    class Frames(CalibrationDataReader):
        def __init__(self, frames):
            self._batches = iter([{"x": frame[None]} for frame in frames])

        def get_next(self):
            return next(self._batches, None)

    net = _ResNet8Float.build()
    calibration = _frames(ORT_NAME, CALIBRATION_COUNT, generator)
    randomize_norms(net, calibration, generator)
    float_path = HERE / f"{ORT_NAME}_float.onnx"
    torch.onnx.export(net.eval(), torch.zeros(1, *INPUTS[ORT_NAME][0]), str(float_path), opset_version=13,
                      dynamo=False, input_names=["x"], output_names=["y"])
    path = HERE / f"{ORT_NAME}.onnx"
    quantize_static(str(float_path), str(path), Frames(calibration.numpy()), quant_format=QuantFormat.QDQ,
                    per_channel=True, weight_type=QuantType.QInt8, activation_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True})
    float_path.unlink()
    np.save(HERE / f"{ORT_NAME}_frames.npy", calibration[:FRAME_COUNT].numpy().astype(np.float32))
    record_ort_expected()
    sys.path.insert(0, str(HERE.parent))
    from describe_onnx import describe  # a summary: the printer writes out every initializer (300 kB)
    (HERE / f"{ORT_NAME}.onnx.txt").write_text(describe(onnx.load(path)))
    expected = np.load(HERE / f"{ORT_NAME}_expected.npy")
    with torch.no_grad():
        float_out = net(calibration[:FRAME_COUNT]).numpy()
    print(f"{ORT_NAME}: out {expected.shape}, |exact-float| max {np.abs(expected - float_out).max():.3g}; "
          f"{path.stat().st_size / 1e6:.2f} MB\n  argmax {expected.argmax(1)}")


def main() -> None:
    arguments = sys.argv[1:]
    if arguments == ["--expected-only"]:
        record_ort_expected()
        return
    import torch

    for name in arguments or NAMES:
        if name not in NAMES:
            sys.exit(f"unknown model {name!r}; the zoo has {', '.join(NAMES)}")
        # A seed per model: making one model alone gives the same files as making them all.
        offset = NAMES.index(name)
        torch.manual_seed(SEED + offset)
        generator = torch.Generator().manual_seed(SEED + offset)
        if name == ORT_NAME:
            make_ort(generator)
        else:
            make_brevitas(name, generator)


if __name__ == "__main__":
    main()
