"""Verification shards as tasks of a real Dask cluster: an embedded ``distributed.LocalCluster`` of 2 workers on
127.0.0.1 (``simulate(scheduler=)`` and the API's ``Accelerator.simulate``), and a ``dask scheduler`` + ``dask
worker`` the test starts, reached by ``streamc build --scheduler``. The workers build the model from the Verilog
they are sent; the merged outputs and verdict equal one local run's."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from amaranth.back import verilog
from distributed import Client, LocalCluster

import streamc
from stream_designs import AddOnePipeline
from streamc.cli import main
from streamc.sim.runner import simulate

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "build_configs" / "digits.yaml"
MODELS = ROOT / "build_configs" / "models"
DASK = Path(sys.executable).parent / "dask"
FRAMES = 24


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as local:
        yield local


def test_shards_on_a_local_cluster_merge_in_frame_order(tmp_path, cluster):
    """Three shards of a stream design on 2 workers: the outputs of one local run, mismatches counted over every
    shard and the first named by its frame in the whole set; progress adds up every shard's frames and cycles."""
    path = tmp_path / "design.v"
    path.write_text(verilog.convert(AddOnePipeline(elems=1, width=40, accept_every=3), name="streamc_top"))
    frames = np.random.default_rng(5).integers(0, 1 << 40, size=(40, 4), dtype=np.uint64)
    expected = (frames + 1) % (1 << 40)
    expected[[21, 33], 0] ^= 1
    seen = []

    def run(**kwargs):
        return simulate(verilog=path, top="streamc_top", build_dir=tmp_path / "build", in_elems=1, in_width=40,
                        out_elems=1, out_width=40, frames=frames, expected=expected, n_out=4, **kwargs)

    whole = run()
    sharded = run(shards=3, scheduler=cluster.scheduler_address, progress=lambda *counts: seen.append(counts))
    np.testing.assert_array_equal(sharded.outputs, whole.outputs)
    assert (sharded.shards, whole.shards) == (3, 1)
    assert sharded.mismatches == whole.mismatches == 2
    assert sharded.first_mismatch == whole.first_mismatch and sharded.first_mismatch.frame == 21
    assert sharded.measured_cycles_per_frame == whole.measured_cycles_per_frame == 12
    assert sharded.latency_cycles == whole.latency_cycles
    assert seen[-1] == (40, sharded.simulated_cycles)
    assert all(0 <= frames_done <= 40 for frames_done, _ in seen)


def _demo_config(folder: Path) -> Path:
    config = yaml.safe_load(DEMO.read_text())
    config.update(model=str(MODELS / "digits_mlp.onnx"), output_dir=str(folder / "out"),
                  steps=["load", "tidy", "streamline", "to_hw", "fold", "rtl", "sim"],
                  verify={"inputs": str(MODELS / "digits_frames.npy"), "labels": str(MODELS / "digits_labels.npy"),
                          "frames": FRAMES})
    path = folder / "build.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_demo_verified_on_a_local_cluster_and_through_an_external_scheduler(tmp_path, cluster):
    frames = np.load(MODELS / "digits_frames.npy")[:FRAMES]
    labels = np.load(MODELS / "digits_labels.npy")[:FRAMES]
    acc = streamc.compile(config=DEMO, output_dir=tmp_path / "api")
    whole = acc.simulate(frames, labels=labels)
    on_cluster = acc.simulate(frames, labels=labels, scheduler=cluster.scheduler_address)
    np.testing.assert_array_equal(on_cluster.hardware, whole.hardware)
    np.testing.assert_array_equal(on_cluster.outputs, whole.outputs)
    assert on_cluster.failure is None and whole.failure is None
    # One shard per worker unless verify.shards says otherwise.
    assert (on_cluster.report["shards"], whole.report["shards"]) == (2, 1)
    for key in ("mismatches", "first_mismatch", "accuracy_hw", "accuracy_reference", "measured_cycles_per_frame",
                "latency_cycles", "end_to_end_differing_frames"):
        assert on_cluster.report[key] == whole.report[key], key
    assert on_cluster.report["measured_cycles_per_frame"] == on_cluster.report["predicted_cycles_per_frame"]

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    started = []
    try:
        started.append(subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                         "--no-dashboard"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen([str(DASK), "worker", address, "--host", "127.0.0.1", "--nworkers", "2",
                                         "--nthreads", "1", "--no-dashboard"], cwd=tmp_path,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        assert main(["build", str(_demo_config(tmp_path)), "--scheduler", address]) == 0
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)
    reports = tmp_path / "out" / "reports"
    report = json.loads((reports / "rtlsim.json").read_text())
    assert report["shards"] == 2 and report["frames"] == FRAMES and report["mismatches"] == 0
    assert report["accuracy_hw"] == whole.report["accuracy_hw"]
    np.testing.assert_array_equal(np.load(reports / "rtlsim_hw_outputs.npy"), whole.hardware)
    # The shards ran on the workers: the build folder holds no local model.
    assert not (tmp_path / "out" / "sim_build" / "harness").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
