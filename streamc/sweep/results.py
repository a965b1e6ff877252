"""A sweep's results: ``sweep.json`` and ``sweep.csv`` (one row per point, rewritten as each point arrives),
the best point, and which build folders stay.

A row records the fingerprint of its build's inputs (those of
:func:`streamc.pipeline.runner.input_fingerprint` but streamc's own: the config, the model, the verification
arrays). A rerun skips a point whose recorded row has the fingerprint it would build from now, passed or
failed alike: the same inputs build the same result. A point lost by the cluster (a worker killed) has no
fingerprint, so it runs again. Rows of points the sweep file no longer names are left out of the files (their
folders stay).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from ..pipeline.folder import write_atomically
from .point import PASSED

JSON_NAME, CSV_NAME, CHART_NAME = "sweep.json", "sweep.csv", "pareto.png"
#: The measured columns of sweep.csv, after the point's name and swept keys.
MEASURED = ("status", "clock_mhz", "cycles_per_frame", "frames_per_second", "device", "lut", "ff", "bram", "dsp",
            "resources_from", "fmax_mhz", "seed", "seconds", "worker", "build_dir", "error")


def read_rows(output_dir: Path) -> dict[str, dict]:
    """The rows an earlier run of the sweep recorded, by point name (none if it wrote no readable sweep.json)."""
    try:
        recorded = json.loads((output_dir / JSON_NAME).read_text())
        return {row["point"]: row for row in recorded["points"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def write_results(output_dir: Path, sweep_info: dict, keys: list[str], rows: list[dict]) -> None:
    """Write sweep.json (``sweep_info`` and every row) and sweep.csv (a column per swept key), each atomically."""
    write_atomically(output_dir / JSON_NAME, (json.dumps({**sweep_info, "points": rows}, indent=1) + "\n").encode())
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["point", *keys, *(key for key in MEASURED if key not in keys)], extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, **{key: _cell(row["values"].get(key)) for key in keys}})
    write_atomically(output_dir / CSV_NAME, text.getvalue().encode())


def _cell(value) -> str:
    return "" if value is None else value if isinstance(value, (int, float, str)) else json.dumps(value)


def best_row(rows: list[dict], criterion: str) -> dict | None:
    """The passed point that is best by ``criterion``: ``fps`` (most frames/s, then fewest LUTs), ``lut`` (fewest
    LUTs, then most frames/s) or ``fps_per_lut``; among equals (placement seeds of one design), the highest fmax
    where pnr ran. None when no point passed with both figures."""
    ranked = [row for row in rows if row["status"] == PASSED and row["lut"] and row["frames_per_second"]]
    if not ranked:
        return None
    keys = {"fps": lambda row: (row["frames_per_second"], -row["lut"]),
            "lut": lambda row: (-row["lut"], row["frames_per_second"]),
            "fps_per_lut": lambda row: (row["frames_per_second"] / row["lut"], row["frames_per_second"])}
    return max(ranked, key=lambda row: (*keys[criterion](row), row.get("fmax_mhz") or 0.0))


def prune_builds(rows: list[dict], best: dict | None) -> None:
    """Remove the build folders of passed points other than ``best``: a failed point's folder keeps its logs.
    Each point's build.yaml and build.log stay, so any point can be built again."""
    for row in rows:
        if row["status"] == PASSED and row is not best and row["build_dir"]:
            shutil.rmtree(row["build_dir"], ignore_errors=True)
            row["build_dir"] = None
