"""Resource models of streamc's kernels: LUT, FF, block RAM, SPRAM and DSP as Yosys maps them.

Block RAM and DSP counts follow the rules Yosys itself applies, so they are exact:

- **Memories** (``amaranth.lib.memory`` ROMs and RAMs) go through ``memory_libmap``. It maps a
  memory to soft logic when that is cheaper than every hard mapping: soft logic costs
  ``width * depth / 16`` for a ROM (no write port) and ``width * depth`` for a RAM (the
  ``-logic-cost-rom`` and ``-logic-cost-ram`` defaults, truncated to an integer); a block RAM
  mapping costs ``cost * blocks + 0.5 * (address blocks - 1) * width`` (the read mux), with
  ``cost`` 64 for iCE40's ``SB_RAM40_4K`` and 128 for ECP5's ``DP16KD``/``PDPW16KD``, and
  ``blocks = ceil(address blocks * width / port width)`` over the port widths the block offers
  (:func:`memory_mapping`). ECP5 RAMs (not ROMs: ``prune_rom``) may also become LUT RAM
  (``TRELLIS_DPR16X4``, cost 4 per 16 x 4 bits), which is nearly always cheaper than FFs.
  ``synth_ice40`` never maps to SPRAM on its own (``SB_SPRAM256KA`` only by attribute), so
  SPRAM is 0 for every kernel streamc generates today. A ``ram_style`` the planner chose
  (:mod:`streamc.rtl.placement`) overrides the cost model: LUTs, or the cheapest block RAM mapping;
  a ``res_type`` of ``"lut"`` keeps a kernel's lane multiplies off the DSPs.
- **Multipliers** go through ``mul2dsp``: ``synth_ice40 -dsp`` uses one ``SB_MAC16`` per
  16 x 16 piece of a product of operands at least 2 bits wide and a result at least 11 bits
  wide; ``synth_ecp5`` one ``MULT18X18D`` per 18 x 18 piece of any product of operands at
  least 2 bits wide (:func:`dsp_count`). XNOR-popcount and a bipolar operand (a masked weight or
  a complemented input in an MVAU, a negation in a vector unit) use no multiplier.

LUT and FF counts are linear models over structural features of each kernel (datapath bits,
comparators, ROM bits kept in logic, pipeline registers), with coefficients fitted per device
family by ``benchmarks/calibrate_resources.py`` on a sweep of single-kernel syntheses stored in
``benchmarks/calibration/``. Where the logic is regular the features count it as the generator
builds it: the register bits a sliding window or an MVAU declares (less what Yosys merges or
finds constant), the adders of an MVAU's adder tree, the bank multiplexers of block and LUT RAM.
A ROM kept in logic costs per *live* bit column (:func:`rom_live_bits`): its contents, which the
specs read off the units, decide how many columns Yosys keeps.

Each kernel's spec and model live in the module named as its generator's in :mod:`streamc.rtl`:
:mod:`.mvau`, :mod:`.vvau`, :mod:`.threshold`, :mod:`.lut`, :mod:`.window` (sliding window and pool),
:mod:`.stream` (FIFO and width converter) and :mod:`.branch` (add, concatenation, fork). They share
:mod:`.memories` (how Yosys maps memories), :mod:`.arithmetic` (multipliers) and :mod:`.shared`;
:mod:`.model` reads the spec of any unit and prices it with the fitted coefficients.
"""

from .coefficients import COEFFICIENTS
from .arithmetic import dsp_count
from .branch import AddSpec, ConcatSpec, ForkSpec
from .lut import LUTSpec, table_pieces
from .memories import MemoryMapping, memory_mapping, rom_live_bits, varying_bits
from .model import (ChainSpec, Spec, estimate_kernel, features, kernel_name, spec_from_dict, spec_of_unit, specs_of_unit,
                    with_placement)
from .mvau import MVAUSpec, MVAUSpecs
from .shared import FAMILIES, ResourceEstimate, accumulator_range, family_of
from .stream import ConverterSpec, FIFOSpec
from .threshold import ThresholdSpec
from .vvau import VVAUSpec
from .window import PoolSpec, WindowSpec

__all__ = ["COEFFICIENTS", "FAMILIES", "AddSpec", "ChainSpec", "ConcatSpec", "ConverterSpec", "FIFOSpec", "ForkSpec",
           "LUTSpec", "MVAUSpec", "MVAUSpecs", "MemoryMapping", "PoolSpec", "ResourceEstimate", "Spec", "ThresholdSpec", "VVAUSpec",
           "WindowSpec", "accumulator_range", "dsp_count", "estimate_kernel", "family_of", "features", "kernel_name",
           "memory_mapping", "rom_live_bits", "spec_from_dict", "spec_of_unit", "specs_of_unit", "table_pieces", "varying_bits",
           "with_placement"]
