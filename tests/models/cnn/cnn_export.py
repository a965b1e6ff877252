"""What the convolutional test-model scripts share: statistics, export, recording.

The scripts beside this file (``make_cnv.py``, ``make_digits_cnn.py``, ``make_blocks.py``)
build Brevitas networks, give their norm layers statistics near what the test frames
produce, export them as QONNX and record qonnx's reference outputs. Needs the
``models`` extra (torch, brevitas).
"""
from pathlib import Path
import sys
import tempfile

import numpy as np
import onnx
import torch
from brevitas.export import export_qonnx
from brevitas.graph.calibrate import calibration_mode, quantization_status_manager
from brevitas_examples.bnn_pynq.models.tensor_norm import TensorNorm

HERE = Path(__file__).resolve().parent
# The describer and the reference executor live one folder up and need no torch.
sys.path.insert(0, str(HERE.parent))
from describe_onnx import describe  # noqa: E402
from qonnx_reference import execute_frames  # noqa: E402

NEGATIVE_BN_WEIGHT_FRACTION = 0.25
NORM_LAYERS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, TensorNorm)
# qonnx and torch compute the same float graph in different orders.
TORCH_AGREEMENT_ATOL = 1e-3


def _input_statistics(model, module, frames):
    """Per-channel mean and variance of what ``module`` receives for ``frames``."""
    captured = []
    handle = module.register_forward_pre_hook(lambda _module, args: captured.append(args[0]))
    with torch.no_grad():
        model(frames)
    handle.remove()
    seen = captured[0]
    seen = seen.value if hasattr(seen, "value") else seen
    # Channels are axis 1 for (N, C), (N, C, L) and (N, C, H, W) alike.
    per_channel = seen.transpose(0, 1).reshape(seen.shape[1], -1)
    return per_channel.mean(dim=1), per_channel.var(dim=1)


def randomize_norms(model, frames, generator, negative_tensor_norm=True):
    """Give every norm layer statistics near what ``frames`` produce, in forward order.

    Each mean is shifted by up to one standard deviation and each variance scaled by
    0.5 to 2, so that thresholds are spread over the reachable range instead of
    sitting at zero (the all-default BatchNorm) or far outside it; a quarter of the
    BatchNorm weights are negative, so some thresholds flip direction.

    Parameters
    ----------
    model : torch.nn.Module
        Put in eval mode; its norm layers are changed in place.
    frames : torch.Tensor
        The frames whose statistics the norm layers are drawn around.
    generator : torch.Generator
        Source of every random draw, for reproducible models.
    negative_tensor_norm : bool
        Give a TensorNorm (a single scale on the logits) a negative weight, which
        reverses the logits' order: a compiler must not take it to be increasing.
    """
    model.eval()
    for module in model.modules():
        if not isinstance(module, NORM_LAYERS):
            continue
        mean, var = _input_statistics(model, module, frames)
        if isinstance(module, TensorNorm):
            mean, var = mean.mean().reshape(1), var.mean().reshape(1)
        count = mean.numel()
        std = var.clamp_min(1e-3).sqrt()
        shift = (torch.rand(count, generator=generator) * 2 - 1) * std
        spread = 0.5 + 1.5 * torch.rand(count, generator=generator)
        magnitude = 0.25 + torch.rand(count, generator=generator)
        sign = torch.where(torch.rand(count, generator=generator) < NEGATIVE_BN_WEIGHT_FRACTION, -1.0, 1.0)
        if isinstance(module, TensorNorm) and negative_tensor_norm:
            sign = -torch.ones(count)
        with torch.no_grad():
            module.running_mean.copy_(mean + shift)
            module.running_var.copy_(var.clamp_min(1e-3) * spread)
            module.weight.copy_(sign * magnitude)
            module.bias.copy_((torch.rand(count, generator=generator) * 2 - 1) * 0.5)


def calibrate_activations(model, frames):
    """Set every statistics-initialised activation scale from ``frames``.

    Brevitas' default activation quantizers take their scale from the first batches
    they see in training; an untrained model would otherwise export whatever the
    example input (zeros) gives. Quantization is off during the pass.
    """
    model.eval()
    with torch.no_grad(), calibration_mode(model):
        model(frames)
    model.eval()


def set_statistics(model, frames, generator):
    """Norm statistics drawn around what ``frames`` produce in the float network (every quantizer
    off: the activation scales are not set yet), then the activation scales calibrated on them."""
    with quantization_status_manager(model, disable_act_quant=True, disable_weight_quant=True,
                                     disable_bias_quant=True, is_training=False):
        randomize_norms(model, frames, generator)
    calibrate_activations(model, frames)


def export_qonnx_models(model, stem, example_shape, with_legacy, folder=HERE):
    """Export with the dynamo exporter (and the TorchScript one); save and return the protos.

    The exporters write into a scratch folder because torch's dynamo exporter leaves a
    stale ``.onnx.data`` file beside its output even though Brevitas re-saves the model
    with its weights inline. The files go to ``folder`` (this script's folder unless told).

    Returns
    -------
    dict
        File stem (``stem`` and, with ``with_legacy``, ``stem + "_legacy"``) to proto.
    """
    example = torch.zeros(example_shape)
    names = dict(input_names=["global_in"], output_names=["global_out"])
    exported = {}
    with tempfile.TemporaryDirectory() as scratch:
        exported[stem] = export_qonnx(
            model, args=example, export_path=f"{scratch}/dynamo.onnx", dynamo=True, optimize=True, **names)
        if with_legacy:
            exported[f"{stem}_legacy"] = export_qonnx(
                model, args=example, export_path=f"{scratch}/legacy.onnx", dynamo=False, **names)
    for name, proto in exported.items():
        onnx.save(proto, folder / f"{name}.onnx")
        (folder / f"{name}.onnx.txt").write_text(describe(proto))
    return exported


def record_expected(model, stem, frames, expected_count, with_legacy=True, folder=HERE):
    """Export ``model``, record qonnx's outputs for the first frames, check them.

    The dynamo export's outputs are saved as ``<stem>_expected.npy``; torch's own
    outputs and the legacy export's must agree with them.

    Parameters
    ----------
    model : torch.nn.Module
        In eval mode, taking one frame of ``frames.shape[1:]`` with batch size 1.
    stem : str
        File name of the model without ``.onnx``.
    frames : numpy.ndarray
        float32 frames; the first ``expected_count`` are run through qonnx.
    expected_count : int
        How many frames to record outputs for.
    with_legacy : bool
        Also export with the TorchScript exporter as ``<stem>_legacy.onnx``.
    folder : pathlib.Path
        Where the files go (default: beside this script).

    Returns
    -------
    numpy.ndarray
        The recorded outputs.
    """
    model.eval()
    checked = frames[:expected_count]
    with torch.no_grad():
        torch_out = model(torch.from_numpy(checked))
    torch_out = (torch_out.value if hasattr(torch_out, "value") else torch_out).numpy()
    exported = export_qonnx_models(model, stem, (1,) + frames.shape[1:], with_legacy, folder)
    expected = execute_frames(exported[stem], checked).astype(np.float32)
    np.save(folder / f"{stem}_expected.npy", expected)
    torch_gap = np.abs(expected - torch_out).max()
    report = f"{stem}: out {expected.shape}, |qonnx-torch| max {torch_gap:.3g}"
    if torch_gap > TORCH_AGREEMENT_ATOL * max(1.0, np.abs(expected).max()):
        sys.exit(f"{report}: qonnx and torch disagree")
    if with_legacy:
        legacy_out = execute_frames(exported[f"{stem}_legacy"], checked)
        legacy_gap = np.abs(legacy_out - expected).max()
        report += f", |legacy-dynamo| max {legacy_gap:.3g}"
        if not np.allclose(legacy_out, expected, rtol=1e-5, atol=1e-4):
            sys.exit(f"{report}: legacy and dynamo exports disagree")
    sizes = ", ".join(f"{name}.onnx {(folder / f'{name}.onnx').stat().st_size / 1e6:.2f} MB" for name in exported)
    print(f"{report}; {sizes}")
    return expected
