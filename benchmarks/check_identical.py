"""What a refactoring must not change: the Verilog, the estimates and the plans of every test model.

    python benchmarks/check_identical.py --record before.json [--models PATTERN] [--jobs 2]
    python benchmarks/check_identical.py --compare before.json [--models PATTERN] [--jobs 2]

Each model (the committed ONNX files of tests/models, its cnn/, dialects/ and zoo/ folders, and the
demo's; never the *_legacy exports, which are the same networks) is built through the ``rtl`` step for
both devices, ``budget: 0.1`` of the first (the planner's fastest folding within a tenth of the
ECP5-85F, which every model but the largest meets); the demo as its shipped config says. Recorded per
model: the SHA-256 of ``verilog/streamc_top.v`` and of each ROM file ``verilog/filelist.f`` lists after it,
``reports/folding.json`` and ``reports/estimates.json`` as written, or the one-line error of a model streamc
refuses. (Records from before the ROM files, whose Verilog held every memory's contents, differ in both.) ``--compare`` prints every model whose
record differs and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml
from rich.console import Console

from streamc.pipeline.runner import run_build
from streamc.errors import StreamcError

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tests/models/*.onnx", "tests/models/cnn/*.onnx", "tests/models/dialects/*.onnx",
          "tests/models/zoo/*.onnx")
DEMO = ROOT / "build_configs" / "digits.yaml"
STEPS = ["load", "tidy", "streamline", "to_hw", "fold", "rtl"]


def model_paths(pattern: str) -> list[Path]:
    paths = sorted(p for glob in MODELS for p in ROOT.glob(glob) if not p.stem.endswith("_legacy"))
    return [p for p in paths if fnmatch.fnmatch(p.stem, pattern)]


def _config(model: Path, out: Path) -> dict:
    if model == DEMO:
        config = yaml.safe_load(DEMO.read_text())
        config.update(model=str(DEMO.parent / config["model"]), output_dir=str(out), steps=STEPS)
        config.pop("verify", None)
        return config
    return {"model": str(model), "output_dir": str(out), "devices": ["ecp5-85f", "ice40-up5k"], "clock_mhz": 100,
            "budget": 0.1, "steps": STEPS}


def record_one(model: Path) -> tuple[str, dict]:
    name = "demo" if model == DEMO else str(model.relative_to(ROOT))
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        config = Path(folder) / "build.yaml"
        config.write_text(yaml.safe_dump(_config(model, out)))
        try:
            run_build(config, console=Console(file=open("/dev/null", "w")), fresh=True)
        except StreamcError as error:
            return name, {"error": f"{type(error).__name__}: {error}"}
        reports, verilog = out / "reports", out / "verilog"
        return name, {
            "verilog_sha256": hashlib.sha256((verilog / "streamc_top.v").read_bytes()).hexdigest(),
            # Every file of the file list after the Verilog: the ROM contents the Verilog reads.
            "rom_files_sha256": {file: hashlib.sha256((verilog / file).read_bytes()).hexdigest()
                                 for file in (verilog / "filelist.f").read_text().split()[1:]},
            "folding": json.loads((reports / "folding.json").read_text()),
            "estimates": json.loads((reports / "estimates.json").read_text()),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--record", type=Path, help="write the records to this JSON file")
    which.add_argument("--compare", type=Path, help="compare with the records in this JSON file")
    parser.add_argument("--models", default="*", help="only models whose file stem matches (fnmatch)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)

    models = model_paths(args.models) + ([DEMO] if fnmatch.fnmatch("demo", args.models) else [])
    with ProcessPoolExecutor(args.jobs) as pool:
        records = dict(pool.map(record_one, models))
    if args.record:
        args.record.write_text(json.dumps(records, indent=1, sort_keys=True))
        refused = sum("error" in r for r in records.values())
        print(f"{len(records)} models recorded ({refused} refused) in {args.record}")
        return 0
    before = json.loads(args.compare.read_text())
    differing = [name for name in records if before.get(name) != records[name]]
    missing = sorted(set(before) - set(records)) if args.models == "*" else []
    for name in differing:
        old, new = before.get(name, {}), records[name]
        what = [key for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
        print(f"DIFFERS {name}: {', '.join(what)}")
    for name in missing:
        print(f"MISSING {name}")
    print(f"{len(records)} models compared: {len(differing)} differ, {len(missing)} missing")
    return 1 if differing or missing else 0


if __name__ == "__main__":
    sys.exit(main())
