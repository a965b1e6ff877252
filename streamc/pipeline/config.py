"""The YAML build configuration, validated; paths are relative to the configuration file.

Values are taken as YAML types them: ``clock_mhz: "100"`` (a string) or ``pe: true`` is an
error, not silently converted. Unknown keys, nested ones included, are errors, and so is a key
given twice. The YAML is read with a safe loader: tags such as ``!!python/object`` are refused,
never executed.
"""

from __future__ import annotations

import difflib
import math
import os
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from ..boards import get_board
from ..errors import ConfigError
from ..rtl.placement import RAM_STYLES, RES_TYPES
from ..stages.threshold import STYLES as THRESHOLD_STYLES

STEPS = ("load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim", "synth", "pnr")
#: What runs when a config names no steps: a bitstream (pnr) only where it names a board.
DEFAULT_STEPS = STEPS[:-1]
BOARDS = ("icebreaker", "ulx3s-85f", "ulx3s-45f", "ulx3s-25f", "tangnano9k", "tangprimer20k")
#: What a config synthesizes for when it names no devices.
DEVICES = ("ice40-up5k", "ecp5-85f")
#: Every device a config may name (streamc.synth's).
SYNTH_DEVICES = (*DEVICES, "gowin-gw1nr-9", "gowin-gw2a-18")
#: The keys that say how the folding is chosen: a config gives exactly one.
FOLDING_MODES = ("target_fps", "budget", "folding")

# YAML gives paths as strings; everything else must already have the right type.
ConfigPath = Annotated[Path, Field(strict=False)]
PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
DeviceFraction = Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class LayerFolding(_Strict):
    pe: PositiveInt
    simd: PositiveInt
    ram_style: Literal[RAM_STYLES] = "auto"
    """Where the weight ROM goes: auto (Yosys decides), distributed (LUTs) or block (block RAM)."""
    ram_style_thresholds: Literal[RAM_STYLES] = "auto"
    """Where the threshold ROM goes, likewise."""
    res_type: Literal[RES_TYPES] = "auto"
    """Where the multiplies go: auto (hard multipliers where Yosys maps them) or lut."""
    operand_register: bool | None = None
    """A register between the ROM reads and the multiplies; unset: as the clock needs (``pipelining``)."""
    route_register: bool | None = None
    """With operand_register: a second register after the output stage's ROM reads (thresholds, requantization) and,
    for block RAM weights, after the weight ROM's address and word, beside the logic that reads them, for the route to
    and from a block RAM placed far away; unset: as the clock needs."""
    tree_every: NonNegativeInt | None = None
    """Adder levels between pipeline registers in the lanes' trees (0: none); unset: as the clock needs."""
    keep_adders: bool | None = None
    """A fully unrolled layer (pe and simd its outputs and inputs): every adder of its shift-and-add graph its own
    carry chain; unset: as the device family does best (kept on the ECP5 and Gowin, merged on the iCE40)."""


class TableFolding(_Strict):
    """A lookup table's entry: its lanes follow the layer before it; only its ROMs' placement is chosen."""

    ram_style: Literal[RAM_STYLES] = "auto"
    """Where each lane's table goes: auto, distributed (LUTs) or block (block RAM)."""


class ThresholdFolding(_Strict):
    """A vector unit's or residual add's entry: its lanes follow its neighbours; only how its thresholds find the
    count is chosen."""

    threshold_style: Literal[THRESHOLD_STYLES] = "auto"
    """parallel (a compare per threshold), search (a binary search over thresholds in ROMs) or auto (the cheaper)."""


def _folding_kind(entry) -> str:
    # An entry that gives nothing but ram_style is a table's, nothing but threshold_style a thresholded
    # stage's; anything else is checked as a layer's, so that a layer's entry missing pe says so. Pydantic
    # asks again with the entry made, to serialize it.
    if isinstance(entry, (TableFolding, ThresholdFolding)):
        return "table" if isinstance(entry, TableFolding) else "thresholds"
    if isinstance(entry, dict) and entry and set(entry) <= {"ram_style"}:
        return "table"
    if isinstance(entry, dict) and entry and set(entry) <= {"threshold_style"}:
        return "thresholds"
    return "layer"


#: A folding entry, as its keys say: a layer's, a lookup table's, or a thresholded stage's.
FoldingEntry = Annotated[Annotated[LayerFolding, Tag("layer")] | Annotated[TableFolding, Tag("table")]
                         | Annotated[ThresholdFolding, Tag("thresholds")], Discriminator(_folding_kind)]


class VerifyConfig(_Strict):
    inputs: ConfigPath | None = None
    """Frames as .npy in the model's input shape (with a leading frame axis); random if absent."""
    expected: ConfigPath | None = None
    """The model's expected outputs for those frames (.npy), compared with the end-to-end output."""
    labels: ConfigPath | None = None
    """Class labels (.npy of ints): the summary then reports accuracy of the simulated hardware."""
    frames: PositiveInt | None = None
    """How many frames to simulate (default: all given inputs, or 32 random frames)."""
    seed: int = 0
    shards: PositiveInt | None = None
    """Simulations run side by side, each on its share of the frames (merged in order): of the one Verilator model
    built locally, or on the workers of ``streamc build --scheduler`` (default: 1 locally, one per worker there)."""
    input_gap_prob: Probability = 0.3
    output_stall_prob: Probability = 0.3

    @model_validator(mode="after")
    def _check(self) -> "VerifyConfig":
        for key in ("expected", "labels"):
            if getattr(self, key) is not None and self.inputs is None:
                raise ValueError(f"verify.{key} describes given frames: it needs verify.inputs")
        return self


class BuildConfig(_Strict):
    """The build configuration.

    How the folding is chosen: exactly one of ``target_fps`` (the cheapest folding that reaches it
    at ``clock_mhz``), ``budget`` (the fastest folding within that fraction of the first device's
    LUTs, with its block RAM and DSPs) or ``folding`` (pe and simd per layer). Costs are estimated
    on the first of ``devices``; with ``target_fps``, a design that does not fit that device is an
    error when the configuration names ``devices`` (the default list only says where to synthesize).
    """

    model: ConfigPath
    output_dir: ConfigPath
    devices: list[Literal[SYNTH_DEVICES]] = list(DEVICES)
    clock_mhz: PositiveFinite | Literal["auto"] = 100.0
    """The design clock in MHz; with budget, auto: the clock of the most frames/s among the first device family's
    candidates (streamc.timing.CLOCK_CANDIDATES_MHZ), each planned with the pipelining it needs."""
    target_fps: PositiveFinite | None = None
    budget: DeviceFraction | None = None
    folding: dict[str, FoldingEntry] | None = None
    steps: list[Literal[STEPS]] = list(DEFAULT_STEPS)
    board: Literal[BOARDS] | None = None
    """A board to build a bitstream for (the pnr step), with a PLL from its oscillator to clock_mhz."""
    verify: VerifyConfig = VerifyConfig()
    fifo_depth: PositiveInt = 2
    pnr_seed: PositiveInt = 1
    """The first nextpnr placement seed the pnr step tries."""
    pnr_seeds: PositiveInt = 1
    """nextpnr placement seeds the pnr step tries (pnr_seed and the ones after it) while timing is not met;
    the fastest placement is kept."""
    pipelining: Literal["clock", "none"] = "clock"
    """clock: the kernels get the pipeline registers clock_mhz needs on the first device's family, by its
    delay model (streamc.timing); none: no registers beyond the kernels' fixed stages."""

    @field_validator("clock_mhz", mode="before")
    @classmethod
    def _clock(cls, value):
        # One line for every wrong value, not the union's line per member.
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                or not math.isfinite(value) or value <= 0):
            raise ValueError(f"clock_mhz must be a positive number of MHz or auto (with budget), not {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _board_steps(cls, data):
        # A board asks for its bitstream: without explicit steps, the pipeline then runs through pnr.
        if isinstance(data, dict) and data.get("board") is not None and "steps" not in data:
            return {**data, "steps": list(STEPS)}
        return data

    @model_validator(mode="after")
    def _check(self) -> "BuildConfig":
        modes = [key for key in FOLDING_MODES if getattr(self, key) is not None]
        if len(modes) != 1:
            given = f"not {' and '.join(modes)} together" if modes else "none is given"
            raise ValueError(f"give one of target_fps (the cheapest folding that reaches it), budget (the fastest "
                             f"folding within that fraction of the first device) or folding (pe and simd per "
                             f"layer); {given}")
        if self.clock_mhz == "auto" and (self.budget is None or self.pipelining != "clock"):
            raise ValueError("clock_mhz: auto chooses the clock with the folding: it needs budget (not target_fps or "
                             "folding) and pipelining: clock")
        if self.budget is not None and not self.devices:
            raise ValueError("budget is a fraction of the first device in devices, but devices is empty; "
                             f"give at least one of {', '.join(DEVICES)}")
        if not self.steps or list(self.steps) != list(STEPS[:len(self.steps)]):
            raise ValueError(f"steps must be a non-empty prefix of the pipeline [{', '.join(STEPS)}], "
                             f"not [{', '.join(self.steps)}]")
        board_device = get_board(self.board).device if self.board else None
        if board_device in SYNTH_DEVICES and self.devices[:1] != [board_device]:
            raise ValueError(f"board {self.board} carries the {board_device}, but the folding is planned for the first "
                             f"of devices, {self.devices[0] if self.devices else 'none'}; put {board_device} first in "
                             f"devices")
        if "pnr" in self.steps and self.board is None:
            raise ValueError(f"steps include pnr but no board is given; give board: one of {', '.join(BOARDS)}")
        if "synth" in self.steps and not self.devices:
            raise ValueError(f"devices is empty but steps include synth; give at least one of {', '.join(DEVICES)}")
        return self


class _SafeUniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that also refuses a mapping key given twice (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


_PLAIN_TYPE_ERRORS = {"model_type": "a mapping of keys to values", "dict_type": "a mapping of keys to values",
                      "list_type": "a list", "path_type": "a path (a string)"}


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        # A folding entry's loc carries the union tag (folding.fc1.layer.pe); the user wrote folding.fc1.pe.
        loc = [part for n, part in enumerate(item["loc"]) if not (n == 2 and item["loc"][0] == "folding")]
        where = ".".join(str(part) for part in loc)
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(loc[-1]), _keys_beside(item["loc"]), n=1)
            lines.append(f"unknown key {where!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        elif item["type"] == "value_error":
            # Our own cross-field checks: their message already names the keys.
            lines.append(str(item["ctx"]["error"]))
        elif item["type"] == "missing":
            lines.append(f"{where}: missing (required)")
        elif item["type"] in _PLAIN_TYPE_ERRORS:
            lines.append(f"{where}: must be {_PLAIN_TYPE_ERRORS[item['type']]}, not {item['input']!r}")
        else:
            lines.append(f"{where}: {item['msg']}, not {item['input']!r}")
    return "; ".join(lines)


def _keys_beside(loc: tuple) -> list[str]:
    """The keys valid where pydantic's ``loc`` points (a folding entry's loc carries its union tag)."""
    if len(loc) == 1:
        return list(BuildConfig.model_fields)
    if loc[0] == "verify":
        return list(VerifyConfig.model_fields)
    if loc[0] == "folding" and len(loc) == 4:
        return list((LayerFolding if loc[2] == "layer" else TableFolding).model_fields)
    return []


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if problem.startswith("could not determine a constructor for the tag"):
        tag = problem.rsplit(" ", 1)[-1].strip("'").replace("tag:yaml.org,2002:", "!!")
        problem = f"YAML tag {tag!r} is not allowed (only plain values, lists and mappings)"
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem


def load_config(path: Path) -> BuildConfig:
    """Read and validate ``path``; relative paths inside it are taken from its folder.

    Raises
    ------
    ConfigError
        If the file is missing or unreadable, is not a YAML mapping, or any value is invalid;
        the message names the key and says what is valid.
    """
    path = Path(path)
    source = f"build config {str(path)!r}"
    raw = read_yaml(path, source)
    if raw is None:
        raise ConfigError(f"{source} is empty; it needs at least model, output_dir and target_fps or folding")
    return config_from_mapping(raw, base=path.parent.resolve(), source=source)


def read_yaml(path: Path, source: str) -> dict | None:
    """The mapping a YAML file holds (None when the file is empty), read with the safe, unique-key loader.

    Raises
    ------
    ConfigError
        Naming ``source``, if the file is missing or unreadable, is not valid YAML or is not a mapping.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{source} is a directory, not a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"{source} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source} is not UTF-8 text") from None
    try:
        raw = yaml.load(text, Loader=_SafeUniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{source} must be a mapping of keys to values, not a {type(raw).__name__}")
    return raw


def config_from_mapping(raw: dict, *, base: Path, source: str) -> BuildConfig:
    """Validate the keys of a build configuration; relative paths are taken from the folder ``base``.

    Raises
    ------
    ConfigError
        Naming ``source`` and each invalid key, and saying what is valid.
    """
    try:
        config = BuildConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None
    verify = config.verify
    resolved = {key: _joined(base, value) for key, value in verify.model_dump().items() if isinstance(value, Path)}
    return config.model_copy(update=dict(model=_joined(base, config.model), output_dir=_joined(base, config.output_dir),
                                         verify=verify.model_copy(update=resolved)))


def _joined(base: Path, path: Path) -> Path:
    """``path`` taken from ``base``, its ``..`` steps removed so that messages show the folder meant.

    Textually, as the shell's ``cd`` does: ``base`` is resolved already, and a symlink the user wrote
    stays as written (a model's external data is read beside the link, not beside its target).
    """
    return Path(os.path.normpath(base / path))
