"""``streamc sweep``: points of the digits MLP built on a real Dask cluster (an embedded LocalCluster of 2 workers
on 127.0.0.1, and a ``dask scheduler`` + ``dask worker`` the test starts), rows equal to the API's own figures
or the points' Yosys reports, a bar of the points done on a terminal, reruns that skip finished points, a failing
point recorded while the sweep goes on, and one clear line for each bad sweep file."""

from __future__ import annotations

import csv
import io
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from distributed import Client
from rich.console import Console

import streamc
from streamc.cli import main
from streamc.errors import ConfigError
from streamc.sweep import load_sweep

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "build_configs" / "models"
DASK = Path(sys.executable).parent / "dask"


def _base(folder: Path, **keys) -> Path:
    config = {"model": str(MODELS / "digits_mlp.onnx"), "output_dir": "unused", "devices": ["ice40-up5k"],
              "clock_mhz": 30, "target_fps": 50000,
              "verify": {"inputs": str(MODELS / "digits_frames.npy"), "labels": str(MODELS / "digits_labels.npy"),
                         "frames": 16}, **keys}
    path = folder / "base.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _sweep_file(folder: Path, **keys) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": "base.yaml", "output_dir": "sweep_out", **keys}, sort_keys=False))
    return path


def test_an_estimate_sweep_on_a_local_cluster_of_two_workers_then_reruns_skip_finished_points(tmp_path):
    _base(tmp_path)
    sweep_file = _sweep_file(tmp_path, until="estimate", grid={"target_fps": [10000, 50000], "clock_mhz": [30, 48]})
    shown = io.StringIO()
    result = streamc.run_sweep(sweep_file, workers=2, console=Console(file=shown, force_terminal=True, width=160))

    assert result.ran == [row["point"] for row in result.rows] and not result.skipped
    # On a terminal, a bar of the points built, passed and failed.
    assert "4/4" in shown.getvalue() and "points: 4 passed, 0 failed" in shown.getvalue()
    assert [row["values"] for row in result.rows] == [{"target_fps": fps, "clock_mhz": mhz}
                                                      for fps in (10000, 50000) for mhz in (30, 48)]
    assert len({row["worker"] for row in result.rows}) == 2
    for row in result.rows:
        # The same point through the Python API: the figures a row holds are the build's own.
        acc = streamc.compile(config=tmp_path / "base.yaml", output_dir=tmp_path / "api", **row["values"])
        assert row["status"] == "passed" and row["error"] is None
        assert row["cycles_per_frame"] == acc.cycles_per_frame
        assert row["frames_per_second"] == round(acc.frames_per_second, 1)
        estimate = acc.estimate()["ice40-up5k"]
        assert (row["lut"], row["ff"], row["bram"], row["dsp"]) == tuple(estimate[k] for k in ("lut", "ff", "bram",
                                                                                                 "dsp"))
        assert row["resources_from"] == "estimate" and row["fmax_mhz"] is None

    best = max(result.rows, key=lambda row: (row["frames_per_second"], -row["lut"]))
    assert result.best == best and best["values"] == {"target_fps": 50000, "clock_mhz": 48}
    out = tmp_path / "sweep_out"
    # keep: best (the default): only the best point's build folder stays; every point keeps its config and log.
    kept = sorted(path.parents[2].name for path in out.glob("points/*/build/reports/estimates.json"))
    assert kept == [best["point"]]
    assert all((out / "points" / row["point"] / name).is_file() for row in result.rows
               for name in ("build.yaml", "build.log"))
    with (out / "sweep.csv").open() as file:
        table = list(csv.DictReader(file))
    assert [line["point"] for line in table] == [row["point"] for row in result.rows]
    assert [int(line["lut"]) for line in table] == [row["lut"] for row in result.rows]
    recorded = json.loads((out / "sweep.json").read_text())
    assert recorded["best"] == best["point"] and recorded["points"] == result.rows
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    again = streamc.run_sweep(sweep_file, workers=2)
    assert again.ran == [] and again.skipped == result.ran and again.rows == result.rows

    # A grid grown by a clock: only its new points are built.
    _sweep_file(tmp_path, until="estimate", grid={"target_fps": [10000, 50000], "clock_mhz": [30, 48, 60]})
    grown = streamc.run_sweep(sweep_file, workers=2)
    assert sorted(grown.ran) == ["target_fps=10000,clock_mhz=60", "target_fps=50000,clock_mhz=60"]
    assert len(grown.skipped) == 4 and len(grown.rows) == 6
    assert grown.rows[:2] + grown.rows[3:5] == result.rows
    # At 60 MHz the cheapest folding for 50,000 frames/s is slower than the one at 48 MHz, which stays best.
    assert grown.rows[5]["frames_per_second"] < best["frames_per_second"] and grown.best == best


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_sweep_on_an_external_scheduler_records_a_failing_point_and_goes_on(tmp_path, capsys):
    _base(tmp_path)
    # 10^8 frames/s is beyond any folding at 30 MHz: that point fails in its fold step.
    sweep_file = _sweep_file(tmp_path, points=[{"target_fps": 100_000_000}, {"target_fps": 50000}],
                             grid={"clock_mhz": [30]})
    address = f"tcp://127.0.0.1:{_free_port()}"
    started = []
    try:
        started.append(subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port",
                                         address.rsplit(":", 1)[1], "--no-dashboard"], cwd=tmp_path,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen([str(DASK), "worker", address, "--host", "127.0.0.1", "--nworkers", "2",
                                         "--nthreads", "1", "--no-dashboard"], cwd=tmp_path,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        assert main(["sweep", str(sweep_file), "--scheduler", address]) == 0
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)
    output = capsys.readouterr().out
    assert f"2 points on 2 Dask workers ({address})" in output
    assert "1 passed, 1 failed" in output
    rows = json.loads((tmp_path / "sweep_out" / "sweep.json").read_text())["points"]
    assert [row["point"] for row in rows] == ["target_fps=100000000,clock_mhz=30", "target_fps=50000,clock_mhz=30"]
    failed, passed = rows
    assert failed["status"] == "failed" and "\n" not in failed["error"] and "target_fps" in failed["error"]
    assert failed["error"] in output and failed["cycles_per_frame"] is None
    assert passed["status"] == "passed" and passed["cycles_per_frame"] == 512
    assert {row["worker"].rsplit(":", 1)[0] for row in rows} == {"tcp://127.0.0.1"}
    # The failed point keeps its build folder and log; it is finished, so a rerun skips it too.
    assert (tmp_path / "sweep_out" / "points" / failed["point"] / "build").is_dir()
    assert streamc.run_sweep(sweep_file, workers=1).skipped == [row["point"] for row in rows]


def test_a_synth_sweep_gives_each_point_yosys_figures(tmp_path):
    _base(tmp_path)
    sweep_file = _sweep_file(tmp_path, until="synth", keep="all", grid={"target_fps": [10000, 50000]})
    result = streamc.run_sweep(sweep_file, workers=2)
    assert [row["status"] for row in result.rows] == ["passed", "passed"]
    for row in result.rows:
        reports = Path(row["build_dir"]) / "reports"
        synth = json.loads((reports / "synth_ice40-up5k.json").read_text())
        assert row["resources_from"] == "yosys"
        assert (row["lut"], row["ff"], row["bram"], row["dsp"]) == (synth["lut"], synth["ff"], synth["bram"],
                                                                    synth["dsp"])
        rtlsim = json.loads((reports / "rtlsim.json").read_text())
        assert rtlsim["mismatches"] == 0 and rtlsim["measured_cycles_per_frame"] == row["cycles_per_frame"]
    assert result.rows[0]["lut"] < result.rows[1]["lut"]
    assert result.best["values"] == {"target_fps": 50000}


def test_points_cross_the_grid_and_a_seed_is_one_placement_seed(tmp_path):
    _base(tmp_path, board="icebreaker")
    sweep = load_sweep(_sweep_file(tmp_path, until="pnr", points=[{"budget": 0.5}, {"target_fps": 20000}],
                                   grid={"seed": [1, 7], "verify.frames": [8]}))
    assert [point.name for point in sweep.points] == [
        "budget=0.5,seed=1,verify.frames=8", "budget=0.5,seed=7,verify.frames=8",
        "target_fps=20000,seed=1,verify.frames=8", "target_fps=20000,seed=7,verify.frames=8"]
    first, second = sweep.points[:2]
    # A point's folding mode replaces the base's target_fps; the rest of the base stays.
    assert (first.config.budget, first.config.target_fps, first.config.clock_mhz) == (0.5, None, 30)
    assert (first.config.pnr_seed, second.config.pnr_seed, second.config.pnr_seeds) == (1, 7, 1)
    assert second.config.verify.frames == 8 and second.config.verify.labels == MODELS / "digits_labels.npy"
    assert second.config.steps[-1] == "pnr" and second.config.board == "icebreaker"
    assert second.config.output_dir == tmp_path / "sweep_out" / "points" / second.name / "build"


FOLDING = {"node_linear": {"pe": 1, "simd": 8}, "node_linear_1": {"pe": 1, "simd": 4},
           "node_linear_2": {"pe": 1, "simd": 1}}


@pytest.mark.parametrize("keys, base_keys, message", [
    ({"gird": {"clock_mhz": [30]}}, {}, "unknown key 'gird' (a sweep file has base, output_dir, until, grid"),
    ({"grid": {"clok_mhz": [30]}}, {}, "grid: unknown key 'clok_mhz'; give a build-config key, seed, or a dotted"),
    ({"grid": {"clock_mhz": 30}}, {}, "grid.clock_mhz: must be a list, not 30"),
    ({"grid": {"clock_mhz": []}}, {}, "grid.clock_mhz: give at least one value"),
    ({"grid": {"clock_mhz": [30, 30]}}, {}, "grid: clock_mhz lists 30 twice"),
    ({"grid": {"clock_mhz": [30, -5]}}, {}, "point clock_mhz=-5: clock_mhz must be a positive number of MHz or auto "
                                            "(with budget), not -5"),
    ({"grid": {"output_dir": ["a", "b"]}}, {}, "grid: 'output_dir' is set by the sweep for each point"),
    ({"grid": {"seed": [1, 2]}}, {}, "point seed=1: seed is a nextpnr placement seed; it takes until: pnr, not "
                                     "estimate"),
    ({"until": "pnr", "grid": {"clock_mhz": [30]}}, {}, "point clock_mhz=30: steps include pnr but no board"),
    ({"until": "place", "grid": {"clock_mhz": [30]}}, {}, "until: Input should be 'estimate', 'synth' or 'pnr'"),
    ({"points": [{"clock_mhz": 30}], "grid": {"clock_mhz": [48]}}, {},
     "'clock_mhz' is in both grid and points[0]; give it in one of them"),
    ({"grid": {"folding.node_linear.pe": [2]}}, {},
     "folding.node_linear.pe changes the base's folding, but the base config has none"),
    ({"grid": {"folding.node_linear.pee": [2]}}, {"folding": FOLDING, "target_fps": None},
     "point folding.node_linear.pee=2: unknown key 'folding.node_linear.pee'"),
    ({"grid": {}}, {}, "no points; give grid (key: [values]) or points"),
    ({"base": "missing.yaml", "grid": {"clock_mhz": [30]}}, {}, "missing.yaml' does not exist"),
])
def test_a_bad_sweep_file_gives_one_line_naming_the_key(tmp_path, keys, base_keys, message):
    base = _base(tmp_path)
    if base_keys:
        config = {**yaml.safe_load(base.read_text()), **base_keys}
        base.write_text(yaml.safe_dump({key: value for key, value in config.items() if value is not None}))
    with pytest.raises(ConfigError) as error:
        load_sweep(_sweep_file(tmp_path, **keys))
    assert message in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith(f"sweep file '{tmp_path / 'sweep.yaml'}'") or "missing.yaml" in message


def test_the_cli_reports_a_bad_sweep_file_in_one_line(tmp_path, capsys):
    _base(tmp_path)
    assert main(["sweep", str(_sweep_file(tmp_path, grid={"clok_mhz": [30]}))]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_an_unreachable_scheduler_is_one_error(tmp_path, capsys):
    _base(tmp_path)
    started = time.perf_counter()
    address = f"tcp://127.0.0.1:{_free_port()}"
    assert main(["sweep", str(_sweep_file(tmp_path, grid={"clock_mhz": [30]})), "--scheduler", address]) == 2
    error = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at {address}" in error and error.strip().count("\n") == 0
    assert time.perf_counter() - started < 120


def test_among_seeds_of_one_design_the_best_point_is_the_fastest_placement():
    from streamc.sweep.point import PASSED
    from streamc.sweep.results import best_row

    # Two placement seeds of the digits demo as the pnr sweep recorded them: same folding, fmax 43.41 and 46.33.
    rows = [{"status": PASSED, "lut": 982, "frames_per_second": 58_594.0, "fmax_mhz": fmax, "seed": seed}
            for seed, fmax in ((1, 43.41), (2, 46.33))]
    for criterion in ("fps", "lut", "fps_per_lut"):
        assert best_row(rows, criterion)["seed"] == 2
    rows.append({"status": PASSED, "lut": 900, "frames_per_second": 58_594.0, "fmax_mhz": None, "seed": 3})
    assert best_row(rows, "lut")["seed"] == 3  # fewer LUTs first; fmax only breaks ties
