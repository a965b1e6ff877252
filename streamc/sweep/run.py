"""Run a sweep on Dask: an embedded ``distributed.LocalCluster`` (one single-threaded worker process per core,
on the loopback interface) or an existing cluster's scheduler. Each point is one task, its build in its own
folder; rows are written as the tasks finish, in whatever order that is.

The workers build into the sweep's ``output_dir``, so a remote cluster's workers must see it at the same path
(a shared file system), and run the same streamc.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..cluster import dask_client
from ..errors import BuildError, ConfigError
from ..pipeline.runner import input_fingerprint
from .chart import pareto_chart
from .point import FAILED, run_point
from .results import CHART_NAME, CSV_NAME, JSON_NAME, best_row, prune_builds, read_rows, write_results
from .spec import Point, Sweep, load_sweep, write_point_config

#: The entry of :func:`input_fingerprint` that hashes streamc's source and its tools' versions.
STREAMC_INPUT = "streamc or its tools"


@dataclass
class SweepResult:
    """What :func:`run_sweep` did.

    Attributes
    ----------
    rows
        One per point, in the sweep file's order (see ``sweep.json``).
    best
        The best passed row by the sweep's ``best`` criterion, or None.
    ran, skipped
        The names of the points built in this run, and of those an earlier run had finished from the same inputs.
    files
        ``json``, ``csv`` and ``chart`` (None where no point passed) paths.
    """

    rows: list[dict]
    best: dict | None
    ran: list[str]
    skipped: list[str]
    files: dict[str, Path | None]


def run_sweep(sweep_file: str | Path, *, scheduler: str | None = None, workers: int | None = None,
              fresh: bool = False, console: Console | None = None) -> SweepResult:
    """Build every point of ``sweep_file`` on Dask up to its ``until`` step; write sweep.json, sweep.csv and
    pareto.png into its ``output_dir``.

    Parameters
    ----------
    scheduler
        An existing Dask scheduler's address (``tcp://HOST:PORT``); by default an embedded ``LocalCluster``.
    workers
        Worker processes of the embedded cluster (default: one per core); not taken with ``scheduler``.
    fresh
        Build every point, even those an earlier run finished from the same inputs (each build still resumes
        after its last complete step, as ``streamc build`` does).
    console
        Where each point's result line goes as it arrives, and the closing summary.

    Raises
    ------
    ConfigError
        For a bad sweep file or a bad point configuration (before anything runs), or bad ``workers``.
    BuildError
        If the scheduler cannot be reached or has no worker.
    """
    console = console or Console()
    sweep = load_sweep(sweep_file)
    if scheduler is not None and workers is not None:
        raise ConfigError("give workers (an embedded cluster's size) or scheduler (an existing cluster), not both")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be at least 1, not {workers}")
    output_dir = sweep.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    recorded = {} if fresh else read_rows(output_dir)
    fingerprints = {point.name: _fingerprint(point) for point in sweep.points}
    rows = {point.name: recorded[point.name] for point in sweep.points
            if recorded.get(point.name, {}).get("fingerprint") == fingerprints[point.name]}
    skipped = list(rows)
    todo = [point for point in sweep.points if point.name not in rows]
    sweep_info = {"sweep_file": str(sweep.source.resolve()), "until": sweep.spec.until, "best_by": sweep.spec.best}
    if skipped:
        console.print(f"{len(skipped)} of {len(sweep.points)} points finished from the same inputs in an earlier run: "
                      "skipped")

    def record(point: Point, row: dict) -> None:
        rows[point.name] = {"point": point.name, "values": point.values, **row}
        write_results(output_dir, sweep_info, sweep.keys, _in_order(sweep, rows))
        _print_row(console, len(rows), len(sweep.points), rows[point.name])
        bar.advance(row["status"])

    if todo:
        for point in todo:
            write_point_config(point)
        with dask_client(scheduler, workers) as client, _PointsBar(console, len(todo)) as bar:
            from distributed import as_completed

            count = len(client.scheduler_info()["workers"])
            console.print(f"{len(todo)} point{'s' if len(todo) != 1 else ''} on {count} Dask "
                          f"worker{'s' if count != 1 else ''} ({escape(client.scheduler.address)})")
            # Keys unique to this run: a long-lived scheduler may still hold an earlier run's tasks.
            run = uuid.uuid4().hex[:8]
            futures = {client.submit(_task, str(point.config_path), pure=False, key=f"sweep-{run}-{point.name}"):
                       point for point in todo}
            try:
                for future in as_completed(futures):
                    point = futures[future]
                    try:
                        row = {**future.result(), "fingerprint": fingerprints[point.name]}
                    except Exception as exc:  # noqa: BLE001 -- the cluster lost the task (a killed worker): rerun next time
                        row = {"status": FAILED, "error": f"the cluster lost this point: {type(exc).__name__}: {exc}"}
                    record(point, {"build_dir": str(point.config.output_dir), **row})
            except KeyboardInterrupt:
                raise BuildError(f"interrupted with {len(rows)} of {len(sweep.points)} points finished (in "
                                 f"{output_dir / CSV_NAME}); run the same command to build the others") from None
    ordered = _in_order(sweep, rows)
    best = best_row(ordered, sweep.spec.best)
    if sweep.spec.keep == "best":
        prune_builds(ordered, best)
    write_results(output_dir, {**sweep_info, "best": best["point"] if best else None}, sweep.keys, ordered)
    chart = pareto_chart(ordered, output_dir / CHART_NAME, title=sweep.source.stem, best=best)
    result = SweepResult(rows=ordered, best=best, ran=[point.name for point in todo], skipped=skipped,
                         files={"json": output_dir / JSON_NAME, "csv": output_dir / CSV_NAME, "chart": chart})
    _print_summary(console, result)
    return result


def _task(config_path: str) -> dict:
    """A point on a worker: its row, with the worker that built it."""
    from distributed import get_worker

    return {**run_point(config_path), "worker": get_worker().address}


def _fingerprint(point: Point) -> str:
    """The hash of what the point's build reads, streamc and its tools aside: a rerun keeps what an earlier
    streamc made of the same point (``fresh`` rebuilds)."""
    inputs = input_fingerprint(point.config)
    del inputs[STREAMC_INPUT]
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _in_order(sweep: Sweep, rows: dict[str, dict]) -> list[dict]:
    return [rows[point.name] for point in sweep.points if point.name in rows]


class _PointsBar:
    """The points built so far, passed and failed, as a bar on a terminal; elsewhere each point's printed row
    (:func:`_print_row`) says as much."""

    def __init__(self, console: Console, total: int):
        self.progress = None
        if console.is_terminal:
            self.progress = Progress(SpinnerColumn(), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("points: {task.fields[passed]} passed, {task.fields[failed]} failed"),
                                     TimeElapsedColumn(), console=console, transient=True)
            self.task = self.progress.add_task("sweep", total=total, passed=0, failed=0)

    def __enter__(self):
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()

    def advance(self, status: str) -> None:
        if self.progress is not None:
            fields = self.progress.tasks[0].fields
            key = "failed" if status == FAILED else "passed"
            self.progress.update(self.task, advance=1, **{key: fields[key] + 1})


def _print_row(console: Console, done: int, total: int, row: dict) -> None:
    head = f"[{done}/{total}] {escape(row['point'])}: "
    if row["status"] == FAILED:
        # One line per point, however long its error: a log to grep.
        console.print(f"{head}[red]failed[/red]: {escape(row['error'] or '')}", soft_wrap=True)
        return
    figures = [f"{row['cycles_per_frame']:,} cycles/frame, {row['frames_per_second']:,.0f} frames/s",
               f"{row['lut']:,} LUT, {row['ff']:,} FF, {row['bram']} BRAM, {row['dsp']} DSP "
               f"({row['resources_from']}, {row['device']})"]
    if row["fmax_mhz"] is not None:
        figures.append(f"fmax {row['fmax_mhz']:.2f} MHz (seed {row['seed']})")
    console.print(f"{head}passed: {'; '.join(figures)}; {row['seconds']:.1f} s", soft_wrap=True)


def _print_summary(console: Console, result: SweepResult) -> None:
    failed = sum(row["status"] == FAILED for row in result.rows)
    console.print(f"{len(result.rows) - failed} passed, {failed} failed ({len(result.ran)} built in this run, "
                  f"{len(result.skipped)} skipped)")
    if result.best is not None:
        kept = f", build kept in {escape(result.best['build_dir'])}" if result.best["build_dir"] else ""
        console.print(f"best: {escape(result.best['point'])}{kept}")
    written = [result.files["csv"], result.files["json"], result.files["chart"]]
    console.print("wrote " + ", ".join(escape(str(path)) for path in written if path is not None))
