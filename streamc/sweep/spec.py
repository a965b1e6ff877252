"""The sweep file, validated, and the points it names: each one a build configuration.

A sweep file starts from a build configuration (``base``) and names points by a ``grid`` (every
combination of its values), a list of ``points``, or both (every listed point with every grid
combination). A point's keys are build-config keys, ``seed`` (the one nextpnr placement seed of the
point) or a dotted key into a mapping of the build config (``folding.LAYER.pe``, ``verify.frames``).
Each point's configuration is validated by the build config's own model before anything runs, so a
bad value stops the sweep with one line naming the point and the key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..pipeline.config import FOLDING_MODES, BuildConfig, ConfigPath, config_from_mapping, load_config, read_yaml
from ..pipeline.folder import write_atomically
from ..pipeline.runner import steps_through

#: What a sweep's ``until`` names, and the last build step it runs.
UNTIL_STEPS = {"estimate": "fold", "synth": "synth", "pnr": "pnr"}
#: Build-config keys the sweep sets itself for every point.
SWEEP_OWNED_KEYS = ("output_dir", "steps")
#: Build-config keys that are mappings, whose keys a dotted point key may set one at a time.
NESTED_KEYS = ("folding", "verify")
#: Longest point name used as a folder name as it is; longer names are shortened and given a hash.
MAX_NAME = 96

NonEmptyList = Annotated[list, Field(min_length=1)]


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    base: ConfigPath
    """The build configuration every point starts from (relative to the sweep file)."""
    output_dir: ConfigPath
    """Where the sweep writes sweep.csv, sweep.json, pareto.png and points/<point>/."""
    until: Literal[tuple(UNTIL_STEPS)] = "estimate"
    """How far each point is built: estimate (through fold), synth (Yosys) or pnr (nextpnr, needs a board)."""
    grid: dict[str, NonEmptyList] = {}
    """Key -> values: every combination is a point."""
    points: list[dict[str, Any]] = []
    """Points given one by one, each a mapping of keys; crossed with the grid when both are given."""
    best: Literal["fps", "lut", "fps_per_lut"] = "fps"
    """Which passed point is best: most frames/s, fewest LUTs, or most frames/s per LUT (ties: the other)."""
    keep: Literal["best", "all"] = "best"
    """Build folders kept at the end: the best point's and the failed points' (best), or every one (all)."""


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its name (also its folder's), the keys it sets, and its build configuration."""

    name: str
    values: dict[str, Any]
    config: BuildConfig
    folder: Path

    @property
    def config_path(self) -> Path:
        return self.folder / "build.yaml"


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file and its points, in the file's order."""

    source: Path
    spec: SweepFile
    points: list[Point]

    @property
    def output_dir(self) -> Path:
        return self.spec.output_dir

    @property
    def keys(self) -> list[str]:
        """The keys the points set, in the order the file gives them."""
        return list(dict.fromkeys(key for point in self.points for key in point.values))


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file and every point's build configuration.

    Raises
    ------
    ConfigError
        One line naming the sweep file and the bad key (and, for a bad value, the point).
    """
    path = Path(path)
    source = f"sweep file {str(path)!r}"
    raw = read_yaml(path, source)
    if raw is None:
        raise ConfigError(f"{source} is empty; it needs base, output_dir and grid or points")
    try:
        spec = SweepFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None
    folder = path.parent.resolve()
    # Without ``..`` steps, so that messages and rows show the folder meant (as build configs' paths are).
    spec = spec.model_copy(update=dict(base=Path(os.path.normpath(folder / spec.base)),
                                       output_dir=Path(os.path.normpath(folder / spec.output_dir))))
    base = load_config(spec.base).model_dump(exclude_unset=True, mode="json")
    points = []
    for values in _combinations(spec, source):
        name = point_name(values)
        if any(point.name == name for point in points):
            raise ConfigError(f"{source}: point {name} is given twice")
        point_folder = spec.output_dir / "points" / name
        raw_config = _point_config(base, values, until=spec.until, output_dir=point_folder / "build",
                                   source=f"{source}, point {name}")
        config = config_from_mapping(raw_config, base=folder, source=f"{source}, point {name}")
        points.append(Point(name=name, values=values, config=config, folder=point_folder))
    return Sweep(source=path, spec=spec, points=points)


def write_point_config(point: Point) -> Path:
    """Write the point's build configuration (absolute paths) where its build reads it."""
    text = yaml.safe_dump(point.config.model_dump(mode="json"), sort_keys=False)
    return write_atomically(point.config_path, text.encode())


def point_name(values: dict[str, Any]) -> str:
    """``key=value,...`` for a folder and a chart: lists joined by ``+``, mappings by a hash of their content;
    ``base`` for a point that sets no key."""
    parts = []
    for key, value in values.items():
        if isinstance(value, dict):
            text = _digest(value)[:8]
        elif isinstance(value, list):
            text = "+".join(map(str, value))
        else:
            text = str(value)
        parts.append(f"{key}={text}")
    # A point of no keys is the base config as it is.
    name = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", ",".join(parts)) or "base"
    return name if len(name) <= MAX_NAME else f"{name[:MAX_NAME - 9]}~{_digest(values)[:8]}"


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _combinations(spec: SweepFile, source: str) -> list[dict[str, Any]]:
    if not spec.grid and not spec.points:
        raise ConfigError(f"{source}: no points; give grid (key: [values]) or points (a list of mappings)")
    for index, listed in enumerate(spec.points):
        for key in listed:
            _check_key(key, f"{source}: points[{index}]")
            if key in spec.grid:
                raise ConfigError(f"{source}: {key!r} is in both grid and points[{index}]; give it in one of them")
    for key, values in spec.grid.items():
        _check_key(key, f"{source}: grid")
        repeated = [value for n, value in enumerate(values) if value in values[:n]]
        if repeated:
            raise ConfigError(f"{source}: grid: {key} lists {repeated[0]!r} twice")
    grid = [dict(zip(spec.grid, values)) for values in itertools.product(*spec.grid.values())]
    return [{**listed, **combination} for listed in spec.points or [{}] for combination in grid]


def _check_key(key: str, where: str) -> None:
    head = key.split(".", 1)[0]
    if key in SWEEP_OWNED_KEYS:
        raise ConfigError(f"{where}: {key!r} is set by the sweep for each point (points/<point>/build, "
                          "and the steps until asks for); it cannot vary")
    if key == "seed" or (key in BuildConfig.model_fields) or ("." in key and head in NESTED_KEYS):
        return
    raise ConfigError(f"{where}: unknown key {key!r}; give a build-config key, seed, or a dotted key into "
                      f"{' or '.join(NESTED_KEYS)} (e.g. folding.LAYER.pe)")


def _point_config(base: dict, values: dict[str, Any], *, until: str, output_dir: Path, source: str) -> dict:
    """The base configuration with the point's keys: a folding mode the point gives replaces the base's."""
    raw = dict(base)
    if any(key in values for key in FOLDING_MODES):
        raw = {key: value for key, value in raw.items() if key not in FOLDING_MODES}
    for key, value in values.items():
        if key == "seed":
            if until != "pnr":
                raise ConfigError(f"{source}: seed is a nextpnr placement seed; it takes until: pnr, not {until}")
            if "pnr_seeds" in values:
                raise ConfigError(f"{source}: give seed (one placement seed per point) or pnr_seeds, not both")
            raw.update(pnr_seed=value, pnr_seeds=1)
        elif "." in key:
            _set_nested(raw, key.split("."), value, source)
        else:
            raw[key] = value
    return {**raw, "output_dir": str(output_dir), "steps": steps_through(UNTIL_STEPS[until])}


def _set_nested(raw: dict, parts: list[str], value, source: str) -> None:
    """Set ``raw[a][b]...[z] = value``, copying the mappings on the way (the base is shared by every point)."""
    head, *rest = parts
    inner = raw.get(head)
    if inner is None and head == "folding":
        raise ConfigError(f"{source}: {'.'.join(parts)} changes the base's folding, but the base config has none")
    inner = dict(inner or {})
    if not rest[1:]:
        inner[rest[0]] = value
    else:
        _set_nested(inner, rest, value, source)
    raw[head] = inner


def _describe(error: ValidationError) -> str:
    item = error.errors()[0]
    where = ".".join(str(part) for part in item["loc"])
    if item["type"] == "extra_forbidden":
        return f"unknown key {where!r} (a sweep file has base, output_dir, until, grid, points, best, keep)"
    if item["type"] == "missing":
        return f"{where}: missing (required)"
    if item["type"] == "list_type":
        return f"{where}: must be a list, not {item['input']!r}"
    if item["type"] in ("dict_type", "model_type"):
        return f"{where}: must be a mapping of keys to values, not {item['input']!r}"
    if item["type"] == "too_short":
        return f"{where}: give at least one value"
    return f"{where}: {item['msg']}, not {item['input']!r}"
