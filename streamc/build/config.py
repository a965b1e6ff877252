"""The YAML build configuration, validated; paths are relative to the configuration file."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, model_validator

from ..errors import ConfigError

STEPS = ("load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim", "synth")
DEVICES = ("ice40-up5k", "ecp5-85f")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LayerFolding(_Strict):
    pe: PositiveInt
    simd: PositiveInt


class VerifyConfig(_Strict):
    inputs: Path | None = None
    """Frames as .npy in the model's input shape (with a leading frame axis); random if absent."""
    expected: Path | None = None
    """The model's expected outputs for those frames (.npy), compared with the end-to-end output."""
    labels: Path | None = None
    """Class labels (.npy of ints): the summary then reports accuracy of the simulated hardware."""
    frames: PositiveInt | None = None
    """How many frames to simulate (default: all given inputs, or 32 random frames)."""
    seed: int = 0
    input_gap_prob: float = Field(0.3, ge=0.0, lt=1.0)
    output_stall_prob: float = Field(0.3, ge=0.0, lt=1.0)


class BuildConfig(_Strict):
    model: Path
    output_dir: Path
    devices: list[Literal["ice40-up5k", "ecp5-85f"]] = list(DEVICES)
    clock_mhz: PositiveFloat = 100.0
    target_fps: PositiveFloat | None = None
    folding: dict[str, LayerFolding] | None = None
    steps: list[Literal[STEPS]] = list(STEPS)
    verify: VerifyConfig = VerifyConfig()
    fifo_depth: PositiveInt = 2

    @model_validator(mode="after")
    def _check(self) -> "BuildConfig":
        if (self.target_fps is None) == (self.folding is None):
            raise ValueError("give exactly one of target_fps and folding")
        if list(self.steps) != list(STEPS[:len(self.steps)]):
            raise ValueError(f"steps must be a prefix of the pipeline {list(STEPS)}, not {list(self.steps)}")
        return self


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown key {where!r}")
        else:
            lines.append(f"{where}: {item['msg']}")
    return f"build config {source}: " + "; ".join(lines)


def load_config(path: Path) -> BuildConfig:
    """Read and validate ``path``; relative paths inside it are taken from its folder."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"build config {str(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"build config {path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"build config {path}: must be a mapping of keys to values, not {type(raw).__name__}")
    try:
        config = BuildConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path))) from None
    base = path.parent.resolve()
    verify = config.verify
    resolved = {key: base / value for key, value in verify.model_dump().items()
                if isinstance(value, Path)}
    return config.model_copy(update=dict(model=base / config.model, output_dir=base / config.output_dir,
                                         verify=verify.model_copy(update=resolved)))
