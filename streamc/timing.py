"""Pipelining for the clock: the delay model of each device family, from nextpnr's timing reports.

A stage asks the model how many adder levels fit between two registers at the clock period, and whether a
memory read and a multiply fit in one (:meth:`streamc.stages.base.Stage.pipeline_for`). The model is a
path's delay as the sum of its parts: leaving and entering a register, each adder level of a tree, each
bit of the carry chain the last adder ripples through, and a block RAM's clock-to-output delay with the
multiply after it. ``benchmarks/calibrate_delays.py`` prints the medians of those parts over the steps of
nextpnr's critical paths (``report.json`` of placed designs: ``benchmarks/bench_fmax.py`` writes them); the
figures below are those medians rounded up, by more where routes spread (on the ECP5-85F a route of the
median 0.9 ns reached 3.9 ns). On the iCE40 the block RAM and multiply figures come from one path (a block
RAM's output into a LUT multiply, :data:`DELAYS`); no iCE40 path measured so far crossed a DSP. nextpnr-himbaechel's
Gowin chip databases (0.11.1) time no path through a hard multiplier (a 16 x 16 multiply into a 32-bit
accumulator reported the accumulator's own carry chain), so the Gowin multiply figure is the ECP5's, not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DelayModel:
    """Nanoseconds of the parts of a path on one device family, routing included.

    Attributes
    ----------
    register_ns : float
        A flip-flop's clock-to-output and setup, with the routes out of it and into the next.
    adder_ns : float
        One level of an adder tree: a LUT and the route to the next level.
    adder_growth_ns : float
        What each level adds to the one before it: a tree's later levels sum wider numbers, which Yosys maps to
        more LUT levels.
    carry_ns : float
        One bit of a carry chain.
    logic_level_ns : float
        One LUT level of control logic (a compare, a select, a counter's next value) with its route.
    memory_ns : float
        A block RAM's clock-to-output delay and the route from it.
    multiply_ns : float
        A lane's multiply after its operands (a hard multiplier's, or a few LUT levels).
    handshake_ns : float
        A stage's pipeline enable from a neighbour's state: a FIFO's level through a width converter's ready into
        the stage's advance and its counters' enables, without the registers at its ends.
    hard_multiply_ns : float
        A hard multiplier's path, register to register, with the routes into and out of it (Yosys packs neither
        register into the multiplier).
    rom_level_ns : float
        One LUT level of a ROM kept in logic, with its route: its address bits fan out to every bit of every
        word, so its routes are longer than an adder tree's.
    enable_ns : float
        A pipeline-wide enable from its register to every stage's registers and memories, across the stage's
        placement (fanout copies included).
    control_ns : float
        The longest control path no pipeline register splits, register to register: a unit's fold counter through
        its compares into its input buffer's write, a FIFO's level into a sliding window's issue.
    window_control_ns : float
        The same in a design with a sliding window: a FIFO's level into the window's issue and the count of rows it
        frees (0: no longer than :attr:`control_ns`).
    memory_output_register : bool
        Whether the register after a block RAM read moves into the block (the ECP5's DP16KD:
        :mod:`streamc.block_ram_registers`), so that the read's clock-to-output no longer bounds the clock.
    memory_route_ns : float
        What the route from such a block's output register to the logic that reads its word adds over a route
        between neighbours: a design of many block RAMs places some far from that logic.
    spread_ns : float
        The route from a register to readers placed across a block of logic, per square root of the block's LUTs (0:
        not measured, never bounding): a fully unrolled layer's input bits each reach adders all over its graph, whose
        placement grows as the square root of its size.
    """

    register_ns: float
    adder_ns: float
    carry_ns: float
    logic_level_ns: float
    memory_ns: float
    multiply_ns: float
    hard_multiply_ns: float
    rom_level_ns: float
    handshake_ns: float
    enable_ns: float
    control_ns: float
    adder_growth_ns: float = 0.0
    memory_output_register: bool = False
    memory_route_ns: float = 0.0
    window_control_ns: float = 0.0
    spread_ns: float = 0.0

    def tree_every(self, period_ns: float, levels: int, width: int, first_route_ns: float = 0.0) -> int:
        """Adder levels between registers so that ``levels`` levels of ``width``-bit sums and the
        accumulator after them close at ``period_ns``: 0 when all of them fit in one stage, else the levels
        of each of the fewest stages in which they fit (at least 1), spread evenly: five levels of which four
        fit are registered after three (and the last), not after four and a lone fifth, in as many stages.
        ``first_route_ns``: what the routes into the first level add (:meth:`spread_route_ns`)."""
        if self._stage_ns(0, levels + 1, width, first_route_ns) <= period_ns:
            return 0
        fit = next((every for every in range(levels, 0, -1)
                    if self._fits(period_ns, levels, width, every, first_route_ns)), 1)
        stages = max(1, -(-levels // fit))
        even = max(1, -(-levels // stages))
        return even if self._fits(period_ns, levels, width, even, first_route_ns) else fit

    def _stage_ns(self, first: int, count: int, width: int, first_route_ns: float = 0.0) -> float:
        """A tree stage of ``count`` levels from level ``first`` (0 the first) with the accumulator's carry."""
        return (self.register_ns + count * self.adder_ns + self.adder_growth_ns * (count * first + count * (count - 1) / 2)
                + width * self.carry_ns + (first_route_ns if first == 0 else 0.0))

    def _fits(self, period_ns: float, levels: int, width: int, every: int, first_route_ns: float = 0.0) -> bool:
        """Whether ``levels`` registered after every ``every`` close, the accumulator (a level) after the last."""
        return all(self._stage_ns(first, min(every, levels + 1 - first), width, first_route_ns) <= period_ns
                   for first in range(0, levels + 1, every))

    def operand_register(self, period_ns: float, multiplies: bool, rom_words: int = 0) -> bool:
        """Whether a memory read and the lane's operation after it (a multiply, or a LUT level) need a
        register between them; with ``rom_words``, a ROM of that many words kept in logic, also whether its
        read is longer than the period (the register then splits it: :attr:`~streamc.rtl.mvau.MatrixVectorUnit.
        weight_rom_banks`)."""
        operation = self.multiply_ns if multiplies else self.adder_ns
        return (self.register_ns + self.memory_ns + operation > period_ns
                or bool(rom_words) and self.register_ns + rom_levels(rom_words) * self.rom_level_ns > period_ns)

    def route_register(self, period_ns: float, width: int) -> bool:
        """Whether a word read from a block RAM into an adder or compare of ``width`` bits needs a second register,
        in the fabric beside that logic, after the first one moved into the block (:attr:`memory_output_register`):
        the route from a block placed far away (:attr:`memory_route_ns`) then has a cycle of its own
        (:attr:`~streamc.rtl.mvau.MatrixVectorUnit.route_register`)."""
        return self.memory_output_register and (self.register_ns + self.memory_route_ns + self.adder_ns
                                                + width * self.carry_ns > period_ns)

    def multiply_register(self, period_ns: float) -> bool:
        """Whether a lane's multiply in LUTs, between its operand and product registers, needs a register inside
        it (:attr:`~streamc.rtl.mvau.MatrixVectorUnit.multiply_register`)."""
        return self.register_ns + self.multiply_ns > period_ns

    def hard_multiplies(self, period_ns: float) -> bool:
        """Whether a hard multiplier between two registers closes at ``period_ns`` (else the planner keeps the
        multiplies in LUTs)."""
        return self.register_ns + self.hard_multiply_ns <= period_ns

    def closes(self, period_ns: float, width: int, window: bool = False) -> bool:
        """Whether the paths no pipeline register splits close at ``period_ns``: a block RAM's read into the register
        after it (unless that register moves into the block), one adder level with the ``width``-bit accumulator
        after it (a tree's shortest stage), and the control paths (:attr:`control_ns`; with a sliding ``window``,
        :attr:`window_control_ns` too)."""
        read = 0.0 if self.memory_output_register else self.memory_ns
        control = max(self.control_ns, self.window_control_ns if window else 0.0)
        return max(self.register_ns + max(read, self.adder_ns + width * self.carry_ns), control) <= period_ns

    def spread_route_ns(self, luts: float) -> float:
        """The route from a register to readers spread over ``luts`` LUTs of logic (:attr:`spread_ns`; a fully
        unrolled layer's inputs into its graph's first adders)."""
        return self.spread_ns * math.sqrt(luts)

    def spread_closes(self, period_ns: float, luts: float) -> bool:
        """Whether such a register reaches its readers and an adder level after them in ``period_ns``: no register
        inside the graph shortens that route."""
        return self.register_ns + self.spread_route_ns(luts) + self.adder_ns <= period_ns

    def flow_control(self, period_ns: float) -> str:
        """What should move a stage's pipeline (:data:`~streamc.rtl.mvau.FLOW_CONTROLS`): its consumer's ready where
        the handshake closes; else a skid register of its own, where that register's enable closes across the
        stage; else credits, which need no enable."""
        if self.register_ns + self.handshake_ns <= period_ns:
            return "stall"
        return "skid" if self.register_ns + self.enable_ns <= period_ns else "credit"


def rom_levels(words: int) -> int:
    """LUT levels of a ROM of ``words`` words in LUT4 logic, address register to data register: one LUT per 16
    words, a 2:1 select per address bit above those four, and the LUT that ABC shares with the address
    counter's next value (TFC-w1a1's 64-word ROMs on the UP5K: four)."""
    return 2 + max(0, math.ceil(math.log2(words)) - 4)


#: From the UP5K (iCEBreaker) and LFE5U-85F (ULX3S) designs of ``benchmarks/bench_fmax.py``, 2026-11-28: medians
#: iCE40 register 3.61, adder level 2.64, carry bit 0.28; ECP5 register 1.42, adder level 1.13, carry 0.02
#: per bit (0.04 per two-bit CCU2C), block RAM 7.06, multiply 5.47 ns. GW1NR-9 (Tang Nano 9K, nextpnr-himbaechel-gowin,
#: the digits MLP, TFC-w1a1 and digits CNN): register 1.26 (routes out of it up to 3.8), carry bit 0.057, block RAM
#: 5.16 ns (one small design); an adder level of the tree is an ALU chain's carry in (1.00), its last sum (0.56) and
#: the route to the next level's ALU (1.05, up to 1.9): 2.62 ns. The digits MLP planned with an adder level of 1.6 ns
#: missed 60 MHz (19.6 ns over five levels and the accumulator); with these figures TFC-w1a1 and the CNN closed it.
#: The GW1NR-9's adder level was 3.9 ns, not 3.0, while Yosys mapped a tree's first levels to LUT4s and MUX2_LUT5-8
#: chains rather than ALU chains (the digits MLP's 16-input trees), four levels from the product registers took
#: 18.73 ns (53.4 MHz, 2026-11-28). With 3.9 ns the digits MLP, TFC-w1a1 and the CNN close 60 MHz at 68.6, 89.7 and
#: 93.2 MHz, at the same cycles per frame as before. Those LUT chains were Yosys merging the levels between two of
#: the tree's registers into one ``$macc`` of full adders; with every sum kept a carry chain
#: (:func:`~streamc.rtl.arithmetic.adder_tree`) the level is back to 3.0: within 60 % of the Tang Nano 9K at 60 MHz
#: the digits MLP (64 cycles/frame, registered after every three levels) closed at 72.4 MHz on a weight ROM's read
#: into a product, and the CNN (one register after four levels in its first layer, where 3.9 had put two) at 76.7 MHz
#: on its last layer's accumulator, neither path in a registered tree (2026-11-29). The tree that CNN's register split,
#: its first layer's (nine products, four levels and the accumulator), took 14.6 ns from the product registers unsplit
#: (68.5 MHz at 60, the design's critical path, 2026-11-29): 2.3 ns a level past the register; the adder level is 2.6,
#: the median measured above, with which it closes 60 MHz unsplit.
#: A LUT level of control logic (``logic_level_ns``): a sliding window's count of the pixels a patch needs and the
#: reader's issue on it, eight levels and a carry, took 38.6 ns on the UP5K (the digits CNN, 2026-11-28) and 12.5 ns
#: on the GW1NR-9 (the digits CNN within 60 % of the Tang Nano 9K, its windows' counts not registered: 80.2 MHz,
#: 2026-11-29): 4.0 and 1.2 ns a level, the GW1NR-9's LUTs faster than its ALU chains. The ECP5's is its adder level's,
#: not measured apart.
#: The iCE40's adder level is 3.2 ns, not the calibration's median 2.64: TFC-w1a1's popcount trees on a UP5K 98 % full
#: took 26.9 ns over five levels and the accumulator's carry (seven LUTs, routes of 1.8-3.5 ns; 2026-11-28), where
#: 2.7 ns a level had put all five in one stage. Registered after four levels, TFC's 64 x 64 layer and the digits CNN's
#: first convolution took 22.0 and 22.2 ns from their product registers through those four (``calibrate_delays.py``'s
#: adder level as placed: 4.54 and 4.47 ns a level, median of five such stages 4.54): an adder level is 4.5 ns.
#: An iCE40 tree's later levels take longer (``adder_growth_ns``): TFC-w1a1 at 128 cycles/frame planned for 40 MHz
#: (its first layer SIMD 196, eight popcount levels registered after every four) closed at 31.0 MHz on levels five to
#: eight and the accumulator, 32.24 ns ten LUTs deep, its routes the usual 1.76 ns (2026-11-28). Not the device's
#: fill: that placement took 4,920 of the 5,280 cells, and TFC at 196 cycles/frame for 50 MHz 3,259, with the same
#: 1.76 ns routes between LUTs; its layer 2 tree's levels one to three took 18.66 ns. Level ``l`` (from 0) taken as
#: ``adder_ns + l * adder_growth_ns``, the two paths solved for both: 3.8 ns and 0.48 ns a level (the four first levels
#: of the calibration above, 22.0-22.2 ns, are then predicted at 24.2: on the safe side).
#: The iCE40's multiply: the digits CNN's second convolution on the UP5K (UINT4 x INT4 in LUTs), its input buffer's
#: block RAM (4.7 ns to its first LUT) and the buffer's select (4.6 ns) then 15.2 ns of multiply into the product
#: register, setup included (2026-11-28, after the window's counts were summed ahead); 6.0 ns before, an estimate.
#: A hard multiplier: on the ECP5-85F the digits MLP's lanes on 138 MULT18X18D, 14.5 ns register to register (routes
#: of 5.0 ns in, 3.9 ns through, 5.1 ns out; 2026-11-28); the iCE40's and the GW1NR-9's are not measured and taken
#: as their LUT multiply's.
#: A handshake: on the UP5K the digits CNN's FIFO level through a width converter's ready into a convolution's fold
#: counters, 23.7 ns (six LUT levels and their routes; 2026-11-28); the ECP5's scaled from it by its adder level, not
#: measured. The GW1NR-9's is a bound: the digits CNN within 60 % of the Tang Nano 9K at 60 MHz, every MVAU moved by
#: its consumer's ready, closed at 66.4 MHz on a datapath (a product into its accumulator, 15.1 ns; 2026-11-29), so
#: each of its handshakes took less: 15.1 less the register's 2.5. The figure scaled from the UP5K's (22.2) had given
#: that design skid registers it did not need (23 logic cells more, 72.9 MHz).
#: An ECP5 block RAM's read: Yosys maps every DP16KD with REGMODE "NOREG" (its libmap rules have no output
#: register), and the digits MLP on the ECP5-85F at 150 MHz took 5.83 ns of clock-to-output and 1.86 ns of route
#: from a threshold ROM's DP16KD into the register after it, 7.7 ns, closing at 130.1 MHz (2026-11-28). The board
#: flow now moves that register into the block (REGMODE "OUTREG", :mod:`streamc.block_ram_registers`): the same
#: design closed at 150.4 MHz and TFC-w1a1 at 167.3 (119.9 before). The model keeps ``memory_ns`` for the
#: read: it is what asks for the register (``operand_register``) that then moves into the block.
#: The route out of a block RAM's output register: TFC-w1a1 at 14 cycles/frame on half the ECP5-85F (135 DP16KD, its
#: MVAUs moved by credits) closed at 125.4 MHz against 150 on a threshold ROM's DP16KD, output register in the block,
#: into its layer's 7-bit compare: 8.0 ns, of which 5.4 were the route out of the block (2026-11-29); 2.2 + 1.4 + 7 x
#: 0.06 of it are a register, an adder level and the carry as between neighbours, so the route adds 4.0.
#: A ROM level in logic: on the UP5K, TFC-w1a1's 64-word ROM read (22.9 ns, four LUT levels after the register's
#: 3.7, routes of 3.5-4.2 ns on a device 98 % full) gives 4.8 ns; the ECP5's and the GW1NR-9's are not measured,
#: the ECP5's scaled from its adder level by the iCE40's ratio (1.8), the GW1NR-9's the iCE40's.
#: Control paths, which the clock's registers do not split (what bounds ``clock_mhz: auto``): on the UP5K, TFC-w1a1
#: planned for 60 MHz closed at 52.5 MHz on its MVAU's fold counter into its input buffer (19.1 ns), and the digits
#: CNN at 50 MHz at 51.6 MHz on a FIFO's level into its sliding window's issue (19.36 ns), and at 51 MHz (chosen by
#: ``clock_mhz: auto`` with 19.4 ns here) at 48.6 MHz on the same path, 20.6 ns (2026-11-28): the largest, 20.6. On the
#: ECP5-85F the digits MLP with its block RAMs' output registers (a timing-only trial) stopped at an input buffer's
#: write enable from the neuron fold through the width converter's valid, 6.75 ns: 6.8. The GW1NR-9's: at the 87.75 MHz
#: ``clock_mhz: auto`` chose by a 10.8 ns bound (the period of its fastest placement then), the digits CNN and TFC-w1a1
#: within 60 % of the Tang Nano 9K stopped at 9.0 ns (the window's credit) and 9.1 ns (a fold counter into a FIFO's
#: level); asked for 108 MHz they closed at 118.2 and 131.8 MHz (2026-11-29): 9.1.
#: With a sliding window: on the ECP5-85F the digits CNN at a tenth of the device, at the 145 MHz ``clock_mhz: auto``
#: chose by ``control_ns``, closed at 131.4 MHz on a FIFO's level into its second window's count of freed rows, 7.6 ns
#: (one seed, 2026-11-29; at 150 MHz other seeds had placed it at 148.7 to 162.4): ``window_control_ns`` 7.6. On the
#: iCE40 that path is ``control_ns``'s own; the GW1NR-9's is not measured apart.
#: A pipeline-wide enable: on the ECP5-85F, TFC-w1a1 at 14 cycles/frame on half the device with its first layer's
#: skid register (and that register's fanout copies) driving 135 block RAMs' enables: 8.7 ns, 114.8 MHz against
#: 150 (2026-11-28), so 6.5 past the register. The iCE40's and the GW1NR-9's are bounds, not measured apart: with
#: the skid register TFC-w1a1 closed 53.4 MHz on the UP5K (18.7 ns) and the digits CNN 93.2 MHz on the GW1NR-9
#: (10.8 ns) on other paths.
#: A route across an unrolled graph: the digits MLP fully unrolled on half the ECP5-85F (its 64 x 64 layer's graph 22,605
#: LUTs by the estimate, registered after every two adder levels for 150 MHz) closed at 69.6 MHz on a route of 11.1 ns
#: from its input register across the graph into a first-level adder, 14.4 ns in all, where a register, two levels and
#: the carry are 5.4 between neighbours (2026-11-29, nextpnr's static placer and router2: its heap placer's routing did
#: not converge, and its placement was estimated at 71.9 MHz before routing): 9.0 ns, over the square root of 22,605
#: 0.06; over the square root of the graph's own estimated LUTs (20,023, the measure the planner takes:
#: ``MVAULayer.graph_luts``), 0.064. On the safe side: with the 64 x 64 layer folded, its 32 x 64 layer unrolled (8,365)
#: closed at 136.3 MHz, where the figure bounds it at 107 (its worst path two levels inside the graph, 7.3 ns, routes of
#: 1.8 and 3.1).
DELAYS = {
    "ice40": DelayModel(register_ns=3.7, adder_ns=3.8, carry_ns=0.3, logic_level_ns=4.0, memory_ns=4.5,
                        multiply_ns=14.4,
                        hard_multiply_ns=14.4, rom_level_ns=4.8, handshake_ns=20.0, enable_ns=15.0,
                        control_ns=20.6,
                        adder_growth_ns=0.48),
    "ecp5": DelayModel(register_ns=2.2, adder_ns=1.4, carry_ns=0.06, logic_level_ns=1.4, memory_ns=7.1,
                       multiply_ns=5.5,
                       hard_multiply_ns=12.4, rom_level_ns=2.5, handshake_ns=10.4, enable_ns=6.5,
                       control_ns=6.8,
                       memory_output_register=True, memory_route_ns=4.0, window_control_ns=7.6, spread_ns=0.064),
    "gowin": DelayModel(register_ns=2.5, adder_ns=2.6, carry_ns=0.06, logic_level_ns=1.2, memory_ns=5.5,
                        multiply_ns=5.5,
                        hard_multiply_ns=5.5, rom_level_ns=4.8, handshake_ns=12.6, enable_ns=8.3,
                        control_ns=9.1),
}


#: The clocks ``clock_mhz: auto`` plans at, per family: ones the boards' PLLs make exactly from their oscillators (the
#: iCEBreaker's 12 MHz: multiples of 1.5 MHz; the ULX3S' 25 MHz: of 5; the Tang boards' 27 MHz: of 6.75), from 24,
#: 50 and 27 MHz up to past what the family's control paths allow (:attr:`DelayModel.control_ns`).
CLOCK_CANDIDATES_MHZ = {
    "ice40": tuple(1.5 * n for n in range(16, 61)),
    "ecp5": tuple(5.0 * n for n in range(10, 41)),
    "gowin": tuple(6.75 * n for n in range(4, 17)),
}


def delay_model(family: str) -> DelayModel:
    """The delay model of a device family (``"ice40"``, ``"ecp5"``, ``"gowin"``)."""
    if family not in DELAYS:
        raise ValueError(f"no delay model for device family {family!r}; streamc has {', '.join(DELAYS)}")
    return DELAYS[family]


@dataclass(frozen=True)
class Clock:
    """The clock a design is pipelined for: its frequency and the device family's delay model."""

    mhz: float
    family: str

    @property
    def period_ns(self) -> float:
        return 1000.0 / self.mhz

    @property
    def delays(self) -> DelayModel:
        return delay_model(self.family)
