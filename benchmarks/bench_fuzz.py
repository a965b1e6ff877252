"""Differential fuzzing, the long profile: compile and simulate many random networks.

Case ``seed`` is the network :func:`fuzz_networks.spec_from_seed` makes from it (an MLP, a CNN or
a dialect model, with a random folding and random frames); cases ``--seed`` to ``--seed + --count - 1``
run in batches of ``--batch`` networks that share one Verilator build (see
:func:`fuzz_networks.check_verilator_batch`), ``--jobs`` batches at a time. Each case checks, on
every one of its frames, streamc's executor, the emulated hardware and the Verilator simulation
(hardware integers through the host tail) against a reference independent of streamc: qonnx's
executor for QONNX models, exact_model for the onnxruntime dialects; bit for bit where the network's
outputs are exact, else within a few ulps of the largest output. The hardware's integers must also
equal streamc's executor's, and the measured cycles per frame the predicted ones.

A network streamc refuses (a one-line StreamcError before the RTL) is a refusal, listed with its seed
and reason and counted by reason; anything else that goes wrong is a failure, printed with its seed:
a StreamcError that reports "a streamc bug", a disagreement, measured cycles that differ from the
prediction, a crash. The exit status is 1 if any case failed.

    python benchmarks/bench_fuzz.py --count 200 --seed 0 --jobs 2
    python benchmarks/bench_fuzz.py --replay 9        # one case, verbose, its build folder kept
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_networks as fuzz  # noqa: E402
from streamc.errors import StreamcError  # noqa: E402

UNOPTIMIZED_BUILD = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"


@dataclass
class CaseResult:
    seed: int
    family: str
    status: str                  # "pass", "refused" or "failed"
    reason: str = ""             # the refusal's kind, or the failure
    stages: str = ""             # the hardware stages, e.g. "WindowStage MVAULayer MVAULayer"
    message: str = ""            # a refusal's own message (``reason`` blanks its names and numbers)
    reference: str = ""          # the independent reference the outputs were compared with
    exact: bool | None = None    # whether the outputs had to equal it bit for bit
    seconds: float = 0.0         # the batch's time shared equally among its cases
    sim_seconds: float = 0.0
    measured_cycles_per_frame: float | None = None
    predicted_cycles_per_frame: int | None = None


def _end_with(result: CaseResult, error: Exception) -> None:
    """A refusal or a failure, as :func:`fuzz_networks.outcome` decides."""
    result.status, result.reason = fuzz.outcome(error)
    if result.status == "refused":
        result.message = str(error)


def _front_checks(seed: int) -> tuple[CaseResult, "fuzz.FuzzNetwork | None"]:
    """The checks without Verilator; returns the network if it goes on to Verilator."""
    spec = fuzz.spec_from_seed(seed)
    result = CaseResult(seed=seed, family=spec.family, status="pass")
    try:
        network = fuzz.build_network(spec)
        result.reference, result.exact = network.reference, network.exact
        fuzz.check_reference(network)
        result.stages = " ".join(fuzz.check_emulation(network).stage_kinds)
        return result, network
    except Exception as error:  # noqa: BLE001 (every exception is a finding to report, not to stop on)
        _end_with(result, error)
    return result, None


def _record(result: CaseResult, outcome) -> None:
    if isinstance(outcome, Exception):
        _end_with(result, outcome)
    else:
        result.sim_seconds = outcome["sim_seconds"]
        result.measured_cycles_per_frame = outcome["measured_cycles_per_frame"]
        result.predicted_cycles_per_frame = outcome["predicted_cycles_per_frame"]
        if result.measured_cycles_per_frame != result.predicted_cycles_per_frame:
            # check_verilator raises on this already; a report that gets here still fails the case.
            result.status = "failed"
            result.reason = (f"measured {result.measured_cycles_per_frame} cycles per frame, "
                             f"predicted {result.predicted_cycles_per_frame}")


def run_batch(seeds: list[int], work: Path, *, keep: bool = False) -> list[CaseResult]:
    """Every check on the cases ``seeds``, their Verilator simulations sharing one build in
    ``work/batch_<first seed>`` (removed unless a case failed or ``keep``)."""
    started = time.perf_counter()
    folder = work / f"batch_{seeds[0]}"
    results, networks = [], []
    for seed in seeds:
        result, network = _front_checks(seed)
        results.append(result)
        if network is not None:
            networks.append((result, network))
    try:
        if len(networks) == 1:
            # A lone network goes through the build's own sim step.
            outcomes = [fuzz.check_verilator(networks[0][1], folder, seed=networks[0][0].seed)]
        else:
            outcomes = fuzz.check_verilator_batch([n for _, n in networks], folder, seed=seeds[0])
    except (StreamcError, fuzz.FuzzFailure) as error:
        outcomes = [error] * len(networks)
    except Exception as error:  # noqa: BLE001
        (work / f"batch_{seeds[0]}.traceback.txt").write_text(traceback.format_exc())
        outcomes = [error] * len(networks)
    if len(outcomes) != len(networks):
        outcomes = [RuntimeError(f"the Verilator checks gave {len(outcomes)} results for {len(networks)} networks")] \
            * len(networks)
    for (result, _), outcome in zip(networks, outcomes):
        _record(result, outcome)
    seconds = round((time.perf_counter() - started) / len(seeds), 2)
    for result in results:
        result.seconds = seconds
    if not keep and all(r.status != "failed" for r in results):
        shutil.rmtree(folder, ignore_errors=True)
    return results


def summarize(results: list[CaseResult], wall: float, jobs: int) -> dict:
    failed = [r for r in results if r.status == "failed"]
    simulated = [r for r in results if r.status == "pass"]
    refused = [r for r in results if r.status == "refused"]
    refusals = collections.Counter(r.reason for r in refused)
    return {
        "cases": len(results),
        "passed": len(simulated),
        "mismatches_or_failures": len(failed),
        "refused": len(refused),
        "refusals_by_reason": dict(refusals.most_common()),
        "refused_seeds_by_reason": {reason: [r.seed for r in refused if r.reason == reason]
                                    for reason, _ in refusals.most_common()},
        "refusals": [{"seed": r.seed, "family": r.family, "reason": r.reason, "message": r.message} for r in refused],
        "families": dict(collections.Counter(r.family for r in simulated)),
        "references": dict(collections.Counter(f"{r.reference} ({'exact' if r.exact else 'ulps'})"
                                               for r in simulated)),
        "cycles_differing_from_prediction": [r.seed for r in results if r.measured_cycles_per_frame is not None
                                             and r.measured_cycles_per_frame != r.predicted_cycles_per_frame],
        "wall_seconds": round(wall, 1),
        "jobs": jobs,
        "wall_seconds_per_case": round(wall / max(len(results), 1), 2),
        "mean_case_seconds": round(sum(r.seconds for r in results) / max(len(results), 1), 2),
        "failures": [{"seed": r.seed, "family": r.family, "reason": r.reason[:500]} for r in failed],
    }


def print_summary(summary: dict) -> None:
    print(f"\ncases: {summary['cases']}  passed (compiled, simulated, matched): {summary['passed']}  "
          f"refused: {summary['refused']}  mismatches/failures: {summary['mismatches_or_failures']}")
    print(f"families passed: {summary['families']}")
    print(f"references of the passed cases: {summary['references']}")
    print(f"time: {summary['wall_seconds']} s wall with {summary['jobs']} jobs, "
          f"{summary['wall_seconds_per_case']} s per case (wall), {summary['mean_case_seconds']} s per case in its batch")
    if summary["cycles_differing_from_prediction"]:
        print(f"measured cycles differ from the prediction (failures) in seeds "
              f"{summary['cycles_differing_from_prediction']}")
    for reason, count in summary["refusals_by_reason"].items():
        print(f"  refused x{count}: {reason}")
        print(f"    seeds: {', '.join(map(str, summary['refused_seeds_by_reason'][reason]))}")
    for failure in summary["failures"]:
        print(f"  FAILED seed {failure['seed']} ({failure['family']}): {failure['reason']}")
        print(f"    replay: python benchmarks/bench_fuzz.py --replay {failure['seed']}")


def replay(seed: int, work: Path) -> int:
    spec = fuzz.spec_from_seed(seed)
    print(f"case {seed}: {spec}")
    result, = run_batch([seed], work, keep=True)
    print(json.dumps(asdict(result), indent=1))
    print(f"build folder: {work / f'batch_{seed}'}")
    return 1 if result.status == "failed" else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="how many random networks (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first case (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="batches run at once (default 1)")
    parser.add_argument("--batch", type=int, default=8,
                        help="networks per Verilator build (default 8; 1: each through the build's sim step)")
    parser.add_argument("--replay", type=int, metavar="SEED", help="run the one case SEED and keep its build")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="start no batch after this long; the summary covers the cases that ran")
    parser.add_argument("--work", type=Path, help="folder for the builds (default: a new temporary folder)")
    parser.add_argument("--json", type=Path, help="also write the summary and every case's result here")
    args = parser.parse_args(argv)
    if not __debug__:
        parser.error("run without python -O: the comparisons with the references are assert statements")
    # The simulations are short: the C++ Verilator writes, compiled without optimization, builds in about
    # half the CPU time (37 s against 66 s for five networks here). simulate() keeps MAKEFLAGS it finds.
    os.environ["MAKEFLAGS"] = " ".join(filter(None, [os.environ.get("MAKEFLAGS"), UNOPTIMIZED_BUILD]))
    work = args.work or Path(tempfile.mkdtemp(prefix="streamc_fuzz_"))
    work.mkdir(parents=True, exist_ok=True)
    if args.replay is not None:
        return replay(args.replay, work)

    started = time.perf_counter()
    results: list[CaseResult] = []
    seeds = list(range(args.seed, args.seed + args.count))
    batches = [seeds[i:i + args.batch] for i in range(0, len(seeds), args.batch)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_batch, batch, work) for batch in batches]
        for future in as_completed(futures):
            if args.time_limit is not None and time.perf_counter() - started > args.time_limit:
                for waiting in futures:
                    waiting.cancel()
            if future.cancelled():
                continue
            for result in future.result():
                results.append(result)
                detail = result.reason[:160] if result.status != "pass" else result.stages
                print(f"[{len(results):>4}/{len(seeds)}] seed {result.seed:>6} {result.family:<8} "
                      f"{result.status:<8} {result.seconds:6.1f} s  {detail}", flush=True)
    if len(results) < len(seeds):
        print(f"time limit: {len(results)} of {len(seeds)} cases ran")
    summary = summarize(sorted(results, key=lambda r: r.seed), time.perf_counter() - started, args.jobs)
    print_summary(summary)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "cases": [asdict(r) for r in results]}, indent=1))
    print(f"builds of failed cases kept in {work}")
    return 1 if summary["mismatches_or_failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
