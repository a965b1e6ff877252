"""Export randomized TFC_1W1A and TFC_2W2A (Brevitas' bnn_pynq examples) as QONNX test models.

Run from the repository root with the ``models`` extra installed::

    python tests/models/make_tfc.py

The networks are untrained; their weights are uniform and their BatchNorm and
TensorNorm statistics are drawn around the statistics of the random test frames, with
some negative BatchNorm weights, so that the thresholds streamc derives land inside
the reachable range and some of them flip direction. Writes, next to this script:

- ``tfc_w1a1.onnx``, ``tfc_w2a2.onnx``: the torch.export (dynamo) exporter, torch's default;
- ``tfc_w1a1_legacy.onnx``, ``tfc_w2a2_legacy.onnx``: the TorchScript exporter;
- ``tfc_frames.npy``: 128 frames in [0, 1], float32, shape (128, 1, 28, 28);
- ``tfc_w1a1_expected.npy``, ``tfc_w2a2_expected.npy``: qonnx's reference outputs for
  the frames on the dynamo models (the legacy models are checked to agree with them);
- ``*.onnx.txt``: the node-by-node description from ``describe_onnx.py``.
"""
from pathlib import Path
import sys
import tempfile

import numpy as np
import onnx
import torch
from brevitas.export import export_qonnx
from brevitas_examples.bnn_pynq.models import model_with_cfg
from brevitas_examples.bnn_pynq.models.tensor_norm import TensorNorm

from describe_onnx import describe
from qonnx_reference import execute_frames

HERE = Path(__file__).resolve().parent
SEED = 20240611
FRAME_COUNT = 128
FRAME_SHAPE = (1, 28, 28)
# Streaming hardware takes one frame at a time, so the models have batch size 1.
EXPORT_SHAPE = (1,) + FRAME_SHAPE
NEGATIVE_BN_WEIGHT_FRACTION = 0.25
VARIANTS = {"tfc_w1a1": "tfc_1w1a", "tfc_w2a2": "tfc_2w2a"}


def _input_statistics(model, module, frames):
    """Per-channel mean and variance of what ``module`` receives for ``frames``."""
    captured = []
    handle = module.register_forward_pre_hook(lambda _module, args: captured.append(args[0]))
    with torch.no_grad():
        model(frames)
    handle.remove()
    seen = captured[0]
    seen = seen.value if hasattr(seen, "value") else seen
    return seen.mean(dim=0), seen.var(dim=0)


def randomize(model, frames, generator):
    """Give every norm layer statistics near what ``frames`` produce, in forward order.

    Each mean is shifted by up to one standard deviation and each variance scaled by
    0.5 to 2, so that thresholds are spread over the reachable range instead of
    sitting at zero (the all-default BatchNorm) or far outside it.
    """
    model.eval()
    for module in model.modules():
        if isinstance(module, (torch.nn.BatchNorm1d, TensorNorm)):
            mean, var = _input_statistics(model, module, frames)
            if isinstance(module, TensorNorm):
                mean, var = mean.mean().reshape(1), var.mean().reshape(1)
            count = mean.numel()
            std = var.clamp_min(1e-3).sqrt()
            shift = (torch.rand(count, generator=generator) * 2 - 1) * std
            spread = 0.5 + 1.5 * torch.rand(count, generator=generator)
            magnitude = 0.25 + torch.rand(count, generator=generator)
            sign = torch.where(torch.rand(count, generator=generator) < NEGATIVE_BN_WEIGHT_FRACTION, -1.0, 1.0)
            if isinstance(module, TensorNorm):
                # A negative final scale reverses the logits' order: a compiler must not
                # take the last affine step to be increasing.
                sign = -torch.ones(count)
            with torch.no_grad():
                module.running_mean.copy_(mean + shift)
                module.running_var.copy_(var.clamp_min(1e-3) * spread)
                module.weight.copy_(sign * magnitude)
                module.bias.copy_((torch.rand(count, generator=generator) * 2 - 1) * 0.5)


def export_both(model, stem):
    """Export with the dynamo and the TorchScript exporter; save and return both protos.

    The exporters write into a scratch folder because torch's dynamo exporter leaves a
    stale ``.onnx.data`` file beside its output even though Brevitas re-saves the model
    with its weights inline.
    """
    example = torch.zeros(EXPORT_SHAPE)
    names = dict(input_names=["global_in"], output_names=["global_out"])
    with tempfile.TemporaryDirectory() as scratch:
        dynamo = export_qonnx(
            model, args=example, export_path=f"{scratch}/dynamo.onnx", dynamo=True, optimize=True, **names)
        legacy = export_qonnx(
            model, args=example, export_path=f"{scratch}/legacy.onnx", dynamo=False, **names)
    onnx.save(dynamo, HERE / f"{stem}.onnx")
    onnx.save(legacy, HERE / f"{stem}_legacy.onnx")
    return dynamo, legacy


def main():
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED)
    frames = torch.rand((FRAME_COUNT,) + FRAME_SHAPE, generator=generator)
    frames_np = frames.numpy().astype(np.float32)
    np.save(HERE / "tfc_frames.npy", frames_np)
    for stem, config_name in VARIANTS.items():
        model, _ = model_with_cfg(config_name, pretrained=False)
        randomize(model, frames, generator)
        model.eval()
        with torch.no_grad():
            torch_out = model(frames).numpy()
        dynamo, legacy = export_both(model, stem)
        expected = execute_frames(dynamo, frames_np)
        legacy_out = execute_frames(legacy, frames_np)
        np.save(HERE / f"{stem}_expected.npy", expected.astype(np.float32))
        for suffix, proto in (("", dynamo), ("_legacy", legacy)):
            (HERE / f"{stem}{suffix}.onnx.txt").write_text(describe(proto))
        print(f"{stem}: out shape {expected.shape}, argmax spread {np.bincount(expected.argmax(1), minlength=10)},"
              f" |qonnx-torch| max {np.abs(expected - torch_out).max():.3g},"
              f" |legacy-dynamo| max {np.abs(legacy_out - expected).max():.3g}")
        if not np.allclose(legacy_out, expected, rtol=1e-5, atol=1e-4):
            sys.exit(f"{stem}: legacy and dynamo exports disagree")


if __name__ == "__main__":
    main()
