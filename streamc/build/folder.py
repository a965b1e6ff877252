"""The build's output folder: every file a build writes goes through here, inside ``root``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx

from ..errors import ConfigError
from ..ir import Graph


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


MARKER = ".streamc-build"


class BuildFolder:
    """A build's output folder. streamc writes only into a new or empty folder, or one it made before
    (marked by a ``.streamc-build`` file), so that a mistyped output_dir cannot mix a build into
    someone's files."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"output_dir '{self.root}' is a file, not a folder")
        if self.root.is_dir() and not (self.root / MARKER).exists():
            foreign = sorted(p.name for p in self.root.iterdir())
            if foreign:
                listed = ", ".join(repr(name) for name in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise ConfigError(f"output_dir '{self.root}' holds files streamc did not write ({listed}); "
                                  "give an empty or new folder")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / MARKER).touch()
        self.reports = self.root / "reports"
        self.reports.mkdir(exist_ok=True)

    def path(self, *parts: str) -> Path:
        target = self.root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def write_report(self, name: str, data: dict) -> Path:
        target = self.reports / f"{name}.json"
        target.write_text(json.dumps(_jsonable(data), indent=2) + "\n")
        return target

    def write_model(self, step: str, graph: Graph) -> Path:
        target = self.path(f"model_{step}.onnx")
        onnx.save(graph.to_onnx(), str(target))
        return target
