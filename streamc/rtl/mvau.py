"""Matrix-vector-threshold unit: one folded fully connected layer with its activation."""

from __future__ import annotations

from functools import cached_property

import numpy as np
from amaranth.hdl import Array, Cat, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType
from streamc.errors import FoldingError

from .arithmetic import adder_tree, shape_of_range, tree_stages
from .constant_products import adder_graph, constant_products
from .placement import check_res_type, multiply, rom_attrs
from .requant import Requant
from .stream import StreamFIFO

__all__ = ["MatrixVectorUnit", "Requant"]

#: Amaranth builds no memory with wider words than this.
MAX_MEMORY_WIDTH = 65536
#: Words of a bank of a weight ROM in logic read in two stages (:attr:`MatrixVectorUnit.weight_rom_banks`): two LUT4s'
#: and a select (banks of one LUT4's 16 words took TFC-w1a1 to 5,312 logic cells, over the UP5K's 5,280).
LOGIC_ROM_BANK_WORDS = 32
#: What moves an MVAU's pipeline (:class:`MatrixVectorUnit`'s ``flow_control``).
FLOW_CONTROLS = ("stall", "skid", "credit")


def weight_rom_banks(words: int, operand_register: bool, ram_style: str) -> int:
    """Banks of :data:`LOGIC_ROM_BANK_WORDS` words a weight ROM of ``words`` words is read from
    (:attr:`MatrixVectorUnit.weight_rom_banks`): more than one only with ``operand_register`` and the ROM in logic."""
    if not (operand_register and ram_style == "distributed") or words <= LOGIC_ROM_BANK_WORDS:
        return 1
    return -(-words // LOGIC_ROM_BANK_WORDS)


#: Cycles from a neuron fold's last issue to its output beat, by output stage, with no pipelining registers
#: (:attr:`MatrixVectorUnit.latency`).
OUTPUT_STAGE_LATENCY = {"accumulator": 4, "thresholds": 5, "requant": 6}


def unit_latency(output_stage: str, operand_stages: int, product_stage: bool, lanes_summed: int, thresholds: int,
                 tree_every: int, graph_stages: int = 0) -> int:
    """:attr:`MatrixVectorUnit.latency` from its output stage (a key of :data:`OUTPUT_STAGE_LATENCY`), its operand
    stages (:attr:`~MatrixVectorUnit.operand_stage` and :attr:`~MatrixVectorUnit.route_stage`), its
    :attr:`~MatrixVectorUnit.product_stage`, the registers
    ``tree_every`` puts in each PE's tree of ``lanes_summed`` values and in its count of ``thresholds`` compares, and
    the ``graph_stages`` inside constant products (:attr:`MatrixVectorUnit.graph_stages`)."""
    return (OUTPUT_STAGE_LATENCY[output_stage] + operand_stages + product_stage + graph_stages
            + tree_stages(lanes_summed, tree_every) + tree_stages(thresholds, tree_every))


def credit_queue_depth(latency: int, sf: int) -> int:
    """Beats the output queue of an MVAU moved by credits holds (``flow_control="credit"``): a beat's credit is
    taken in the cycle after its last synapse fold issues and returned two cycles after the beat is handed out
    (through a register: the queue sits at the unit's output, the credits at its input), ``latency + 1`` cycles on;
    at full rate, with the output taken as soon as it is offered, ``ceil((latency + 1) / sf)`` beats are on the way
    in that time, and one more keeps the next issue from waiting."""
    return -(-(latency + 1) // sf) + 1


def has_operand_stage(operand_register: bool, banks: int, multiplies: bool) -> bool:
    """Whether ``operand_register`` is a stage of its own (:attr:`MatrixVectorUnit.operand_stage`): not where the
    weight ROM is read from registered ``banks`` and the lanes do not multiply."""
    return operand_register and (banks == 1 or multiplies)


def has_route_stage(route_register: bool, operand_stage: bool, ram_style: str, constant_weights: bool) -> bool:
    """Whether ``route_register`` registers the weight ROM's address and its word a second time, two stages of
    their own (:attr:`MatrixVectorUnit.route_stage`): behind the operand stage, where the weight ROM may be a block RAM
    (not ``"distributed"``) and is read at every issue (not :attr:`~MatrixVectorUnit.constant_weights`)."""
    return route_register and operand_stage and ram_style != "distributed" and not constant_weights


def splits_multiplies(multiply_register: bool, multiplies: bool, res_type: str) -> bool:
    """Whether ``multiply_register`` splits lanes that ``multiplies`` (:attr:`MatrixVectorUnit.product_stage`): only
    multiplies in LUTs."""
    return multiply_register and multiplies and res_type == "lut"


class MatrixVectorUnit(wiring.Component):
    """Computes ``y = f(W x)`` for each input vector ``x``, folded in time like FINN's MVAU.

    ``W`` has ``MH`` rows (output channels) and ``MW`` columns. Each cycle the unit multiplies
    ``simd`` input elements by the matching weights of ``pe`` rows, so a vector takes
    ``NF = MH/pe`` neuron folds of ``SF = MW/simd`` synapse folds. The first neuron fold
    consumes the input beats and keeps them in a buffer; the other folds replay the buffer.

    ``f`` is one of:

    - nothing: the output is the accumulator;
    - qonnx ``MultiThreshold``: the output is ``out_bias`` plus the number of thresholds of
      its channel that the accumulator reaches (``acc >= t``). With a ``BIPOLAR`` output there
      is one threshold per channel and the output is +1 when it is reached, else -1
      (``out_bias`` is unused). ``L`` thresholds cost ``L`` comparators per channel;
    - a :class:`~streamc.rtl.requant.Requant`: the output is
      :func:`~streamc.rtl.requant.requantize` of the accumulator, one multiplier per channel
      whatever the output width: the cheap choice for 8-bit outputs.

    Values on both streams are packed as :meth:`DataType.to_hw` packs them. A ``BIPOLAR``
    operand (bit 1 is +1, bit 0 is -1) needs no multiplier; the lanes then sum terms ``a`` with
    ``W x = scale * a + offset`` per channel (see :meth:`_accumulator_domain`). The thresholds and
    the requantization's constants move into that domain; a bare accumulator starts from its
    channel's offset and adds scaled sums, so that it holds ``W x``:

    - ``BIPOLAR`` times ``BIPOLAR``: XNOR and popcount;
    - ``BIPOLAR`` inputs times multi-bit weights: each input bit masks its weight (FINN's
      binary-input MVAU), as a multiply by ``(x + 1) / 2``;
    - multi-bit inputs times ``BIPOLAR`` weights: a weight of -1 takes the input's bitwise
      complement ``~x`` (``-x - 1`` signed, ``2**bits - 1 - x`` unsigned), no wider than the
      input and with no carry chain; the offset takes the constants back out.

    The datapath is a pipeline that stalls as a whole while the output beat is not taken (unless
    ``flow_control`` is ``"credit"``: then it never stalls, and the unit issues only what its output queue holds):
    issue (weight ROM and input buffer read) -> operands -> products -> adder tree and
    accumulator -> threshold compare, or requantization product -> sum -> output register.
    The output register of a requantization also shifts, rounds and clamps. For a faster clock,
    ``operand_register`` adds a stage between the memories and the multiplies, and ``tree_every``
    registers the adder tree and the threshold count after every that many levels. See
    :attr:`latency`.

    Parameters
    ----------
    weights : numpy.ndarray
        Integer matrix of shape ``(MH, MW)``; output channel ``c`` is row ``c``.
    in_dtype, weight_dtype : DataType
        Types of the input elements and of the weights (true integer values: BIPOLAR is -1/+1).
    pe, simd : int
        Output channels and input elements processed per cycle. ``pe`` must divide ``MH``,
        ``simd`` must divide ``MW``.
    thresholds : numpy.ndarray or None
        Integer array of shape ``(MH, L)``, or ``None`` for no thresholds.
    out_dtype : DataType
        Type of the output elements; must hold every output value (with ``requant``:
        ``[requant.lo, requant.hi]``). Not ``BIPOLAR`` with ``requant``.
    out_bias : int
        Added to the threshold count; must be 0 with ``requant``.
    requant : Requant or None
        Requantization of the accumulator, for ``MH`` channels; only without ``thresholds``.
    ram_style, ram_style_thresholds : str
        Where the weight ROM and the threshold ROM go: ``"auto"`` (Yosys decides),
        ``"distributed"`` (LUTs) or ``"block"`` (block RAM); see :mod:`streamc.rtl.placement`.
    res_type : str
        Where the lanes' multiplies go: ``"auto"`` (hard multipliers where Yosys maps them) or
        ``"lut"`` (partial products in LUTs); see :mod:`streamc.rtl.placement`.
    operand_register : bool
        Register the weight ROM's and the input buffer's words before the multiplies, so that a
        block RAM's clock-to-output delay and a multiply are not one path.
    route_register : bool
        With ``operand_register``: register the words of the output stage's ROMs (thresholds unless
        ``"distributed"``, correction points, requantization factors and offsets) twice, each read a stage earlier,
        so that where the first register moves into a block RAM the route from the block to the logic that reads its
        word has a cycle of its own (TFC-w1a1's threshold ROM on half an ECP5-85F: 5.4 ns of route of 8.0); and the
        weight ROM's address and word registered once more, with the inputs (:attr:`route_stage`).
    tree_every : int
        0: each lane's adder tree and the accumulator are one stage, as are the threshold count and
        the output register. ``k`` > 0: a register after every ``k`` adder levels and after the last
        (:func:`~streamc.rtl.arithmetic.adder_tree`), in the lanes' trees and the threshold count; with
        :attr:`constant_weights`, after every ``k`` levels of the lanes' adder graph, solved for a bounded depth
        (:func:`~streamc.rtl.constant_products.constant_products`).
    multiply_register : bool
        Split the lanes' multiplies in LUTs into two stages, their first partial sums registered (the digits MLP's
        4-bit products on the ECP5-85F: 8.5 ns from the operand register to the product's).
    keep_adders : bool
        With :attr:`constant_weights`: keep every adder of the lanes' shift-and-add graph as its own carry chain
        (:func:`~streamc.rtl.constant_products.constant_products`' ``keep``; the smaller on the ECP5 and Gowin,
        :data:`~streamc.rtl.constant_products.KEPT_ADDERS`), else Yosys merges an adder with one reader into its
        reader's sum. Ignored where the lanes read a weight ROM.
    flow_control : str
        What moves the pipeline (:data:`FLOW_CONTROLS`). ``"stall"``: the consumer's ready, through every stage's
        enable. ``"skid"``: a register: a skid register beside the output register takes the beat the pipeline puts
        out in the cycle the output stalls, and the pipeline moves while it is empty; the consumer's ready then
        reaches only the two output registers (the digits CNN on the UP5K: a FIFO's level through a width
        converter's ready into a convolution's fold counters, 23.7 ns). ``"credit"``: nothing; the pipeline moves
        every cycle into a queue of :attr:`queue_depth` beats, and the unit issues only while the beats it has
        issued and not handed out fit in the queue. No enable then spans the unit (TFC-w1a1's first layer on half
        an ECP5-85F: the skid register's enable into 135 block RAMs, 8.7 ns). Latency and cycles are the same.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(simd * in_dtype.bitwidth)))
        Input vectors, ``SF`` beats each; beat ``k`` holds elements ``k*simd + j`` at bit
        ``j * in_dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(pe * out_dtype.bitwidth)))
        Output vectors, ``NF`` beats each; beat ``n`` holds channels ``n*pe + j`` at bit
        ``j * out_dtype.bitwidth``.

    Attributes
    ----------
    in_elems, in_width, out_elems, out_width : int
        Elements per beat and bits per element on each side.
    cycles_per_frame : int
        ``NF * SF``: cycles per vector with no stalls.
    latency : int
        Cycles from the cycle that issues the last synapse fold of a neuron fold (for the
        first neuron fold: the cycle that accepts its last input beat) to the cycle in which
        that fold's output beat is first valid: 4 for the bare accumulator, 5 with
        thresholds, 6 with requantization; plus 1 with :attr:`operand_stage`, 2 with :attr:`route_stage`, 1 with
        :attr:`product_stage` and the
        registers ``tree_every`` puts in the lanes' trees (or their adder graph: :attr:`graph_stages`) and the
        threshold count.
    acc_shape : amaranth.hdl.Shape
        Accumulator and comparator shape.
    multiplier_shape, offset_shape, product_shape, sum_shape : amaranth.hdl.Shape or None
        With ``requant``: the narrowest shapes holding every multiplier, every offset (with the
        rounding constant), every product of a complete accumulator with its channel's
        multiplier, and every such product plus its channel's offset. ``None`` without
        ``requant``.
    """

    def __init__(self, *, weights: np.ndarray, in_dtype: DataType, weight_dtype: DataType,
                 pe: int, simd: int, thresholds: np.ndarray | None, out_dtype: DataType,
                 out_bias: int = 0, requant: Requant | None = None, ram_style: str = "auto",
                 ram_style_thresholds: str = "auto", res_type: str = "auto",
                 operand_register: bool = False, route_register: bool = False, tree_every: int = 0,
                 flow_control: str = "stall", multiply_register: bool = False, keep_adders: bool = False,
                 name: str = "mvau"):
        weights = np.asarray(weights)
        if weights.ndim != 2 or not np.issubdtype(weights.dtype, np.integer):
            raise ValueError(f"node {name!r}: weights must be a 2-D integer array, "
                             f"not {weights.dtype} of shape {weights.shape}")
        mh, mw = weights.shape
        _check_fold(name, mh, mw, "pe", pe, mh)
        _check_fold(name, mh, mw, "simd", simd, mw)
        if not weight_dtype.contains(weights):
            raise ValueError(f"node {name!r}: weights must be {weight_dtype} values, found "
                             f"values in [{weights.min()}, {weights.max()}]")
        self.name = name
        self._weight_attrs = rom_attrs(ram_style, name=name, what="ram_style")
        self._threshold_attrs = rom_attrs(ram_style_thresholds, name=name, what="ram_style_thresholds")
        self.ram_style, self.ram_style_thresholds = ram_style, ram_style_thresholds
        check_res_type(res_type, name=name)
        self.res_type = res_type
        if not isinstance(tree_every, (int, np.integer)) or tree_every < 0:
            raise ValueError(f"node {name!r}: tree_every must be 0 (no registers in the adder trees) or "
                             f"a positive number of adder levels, not {tree_every!r}")
        self.operand_register, self.tree_every = bool(operand_register), int(tree_every)
        if route_register and not operand_register:
            raise ValueError(f"node {name!r}: route_register is a second register after a ROM's read and needs "
                             f"operand_register")
        self.route_register = bool(route_register)
        if flow_control not in FLOW_CONTROLS:
            raise ValueError(f"node {name!r}: flow_control must be one of {', '.join(FLOW_CONTROLS)}, "
                             f"not {flow_control!r}")
        self.flow_control, self.multiply_register = flow_control, bool(multiply_register)
        self.keep_adders = bool(keep_adders)
        self._weights = weights.astype(np.int64)
        self._in_dtype = in_dtype
        self._weight_dtype = weight_dtype
        self._out_dtype = out_dtype
        self._out_bias = int(out_bias)
        self._pe, self._simd = pe, simd
        self._nf, self._sf = mh // pe, mw // simd
        self._xnor = in_dtype.bipolar and weight_dtype.bipolar
        #: The weight ROM has one word: each lane's weight is a constant (see :attr:`constant_weights`).
        self.constant_weights = self._nf * self._sf == 1
        #: The lanes multiply a signed input as unsigned, ``x + 2**(bits-1)`` (its top bit flipped): an unsigned
        #: by signed product is smaller in LUTs than a signed by signed one, and an input whose zero point was
        #: ``-2**(bits-1)`` (onnxruntime's int8 activations) then needs no per-channel offset at all, so that
        #: its thresholds, requantization offsets and correction points are the same constant in every channel.
        #: Only where an output stage compares the sum: a bare output would add the offsets back itself.
        self._input_offset_binary = (in_dtype.signed and not in_dtype.bipolar and in_dtype.bitwidth > 1
                                     and not weight_dtype.bipolar and (thresholds is not None or requant is not None))
        self._scale, self._offsets = self._accumulator_domain()

        self._bounds = self._row_bounds()
        acc_lo, acc_hi = self._accumulator_range()
        full_lo, full_hi = self.output_sum_range
        self._thresholds = None
        self._requant = None
        self.multiplier_shape = self.offset_shape = self.product_shape = self.sum_shape = None
        if requant is not None:
            self._check_requant(requant, thresholds, out_dtype)
            self._requant = requant
            self._prepare_requant()
            # Correction points compare with the complete sum, as thresholds do.
            self._correction_points = self._compared_with_sum(
                np.concatenate([requant.raise_at, requant.lower_at], axis=1))
            if requant.corrections:
                acc_hi = max(acc_hi, full_hi + 1)
        elif thresholds is None:
            # The bare accumulator starts from its channel's offset and adds scaled sums, so that it
            # holds W x itself (see _accumulator_start).
            sum_lo, sum_hi, partial_lo, partial_hi = (self._scale * bound + self._offsets for bound in self._bounds)
            out_lo, out_hi = int(sum_lo.min()), int(sum_hi.max())
            acc_lo, acc_hi = int(partial_lo.min()), int(partial_hi.max())
            if not (out_dtype.min <= out_lo and out_hi <= out_dtype.max):
                raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the "
                                 f"accumulator range [{out_lo}, {out_hi}]")
        else:
            thresholds = np.asarray(thresholds)
            if (thresholds.ndim != 2 or thresholds.shape[0] != mh or thresholds.shape[1] < 1
                    or not np.issubdtype(thresholds.dtype, np.integer)):
                raise ValueError(f"node {name!r}: thresholds must be an integer array of shape "
                                 f"({mh}, L) with L >= 1, not {thresholds.dtype} of shape "
                                 f"{thresholds.shape}")
            n_thr = thresholds.shape[1]
            if out_dtype.bipolar:
                if n_thr != 1:
                    raise ValueError(f"node {name!r}: a BIPOLAR output needs exactly 1 "
                                     f"threshold per channel, not {n_thr}")
            elif not (out_dtype.min <= self._out_bias
                      and self._out_bias + n_thr <= out_dtype.max):
                raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the "
                                 f"outputs out_bias + [0, {n_thr}] = "
                                 f"[{self._out_bias}, {self._out_bias + n_thr}]")
            self._thresholds = self._compared_with_sum(thresholds)
            acc_hi += 1
        self.acc_shape = shape_of_range(acc_lo, acc_hi)

        self.in_elems = simd
        self.in_width = in_dtype.bitwidth
        self.out_elems = pe
        self.out_width = out_dtype.bitwidth
        self.cycles_per_frame = self._nf * self._sf
        #: The bare output's accumulator starts from a per-channel offset and sums scaled terms.
        self.starts_from_offsets = (self._requant is None and self._thresholds is None
                                    and (self._scale != 1 or bool(self._offsets.any())))
        super().__init__({
            "i": In(stream.Signature(unsigned(simd * self.in_width))),
            "o": Out(stream.Signature(unsigned(pe * self.out_width))),
        })

    @cached_property
    def latency(self) -> int:
        # A property: with constant weights pipelined, the graph is solved to know its stages.
        stage = "requant" if self._requant is not None else "accumulator" if self._thresholds is None else "thresholds"
        return unit_latency(stage, self.operand_stage + 2 * self.route_stage, self.product_stage, self._lanes_summed,
                            0 if self._thresholds is None else self._thresholds.shape[1], self.tree_every,
                            self.graph_stages)

    @property
    def queue_depth(self) -> int:
        """Beats of the output queue of ``flow_control="credit"`` (:func:`credit_queue_depth`); 0 otherwise."""
        return credit_queue_depth(self.latency, self._sf) if self.flow_control == "credit" else 0

    @property
    def graph_stages(self) -> int:
        """With :attr:`constant_weights` and ``tree_every``: the registers inside the lanes' adder graph
        (:meth:`~streamc.rtl.constant_products.AdderGraph.stages`; it is solved to know them); else 0."""
        return self.adder_graph.stages(self.tree_every) if self.constant_weights and self.tree_every else 0

    @property
    def product_stage(self) -> bool:
        """Whether ``multiply_register`` splits the lanes' multiplies: where they multiply in LUTs (``res_type``
        ``"lut"``, no ``BIPOLAR`` operand, more than one word of weights)."""
        multiplies = not (self._in_dtype.bipolar or self._weight_dtype.bipolar or self.constant_weights)
        return splits_multiplies(self.multiply_register, multiplies, self.res_type)

    @property
    def _lanes_summed(self) -> int:
        """Values each PE's adder tree sums: its lanes' products, or the one sum of constant products."""
        return 1 if self.constant_weights else self._simd

    @property
    def adder_graph(self):
        """With :attr:`constant_weights`: the :class:`~streamc.rtl.constant_products.AdderGraph` of the lanes,
        ``W u`` for ``u`` the values the lanes take (:meth:`_lane_input_range`); ``None`` otherwise."""
        if not self.constant_weights:
            return None
        return adder_graph(self._weights, *self._lane_input_range(), pipelined=bool(self.tree_every),
                           keep=self.keep_adders)

    @property
    def lanes_multiply_signed_input(self) -> bool:
        """Whether the lanes' multiplies take the input as signed: a signed input not read as offset binary."""
        return self._in_dtype.signed and not self._input_offset_binary

    @property
    def weights(self) -> np.ndarray:
        """The ``(MH, MW)`` weight matrix the weight ROM holds, as integers."""
        return self._weights

    @property
    def in_dtype(self) -> DataType:
        """Type of the input elements, one lane operand each."""
        return self._in_dtype

    @property
    def weight_dtype(self) -> DataType:
        """Type of the weights, the other lane operand."""
        return self._weight_dtype

    @property
    def thresholds(self) -> np.ndarray | None:
        """The ``(MH, L)`` thresholds the compares read, in the accumulator's domain; or ``None``."""
        return self._thresholds

    @property
    def requant(self) -> Requant | None:
        """The requantization of the output stage, or ``None``."""
        return self._requant

    def _compared_with_sum(self, points: np.ndarray) -> np.ndarray:
        """Per-channel points ``t`` of ``W x >= t`` as points of the sum ``a`` the lanes add (see
        :meth:`_accumulator_domain`): ``scale * a + offset >= t``  <=>  ``a >= ceil((t - offset) / scale)``.
        Points beyond the reachable sums compare the same once clamped, and need no extra bits."""
        full_lo, full_hi = self.output_sum_range
        points = -((self._offsets[:, None] - points.astype(np.int64)) // self._scale)
        return np.clip(points, full_lo, full_hi + 1)

    def _check_requant(self, requant, thresholds, out_dtype: DataType) -> None:
        name, mh = self.name, self._weights.shape[0]
        if thresholds is not None:
            raise ValueError(f"node {name!r}: thresholds and requant are alternative output "
                             f"stages; give one of them, not both")
        if not isinstance(requant, Requant):
            raise ValueError(f"node {name!r}: requant must be a Requant, not "
                             f"{type(requant).__name__}")
        if requant.channels != mh:
            raise ValueError(f"node {name!r}: requant must have one multiplier and offset per "
                             f"output channel ({mh}), not {requant.channels}")
        if out_dtype.bipolar:
            raise ValueError(f"node {name!r}: a requantized output cannot be BIPOLAR; use one "
                             f"threshold per channel instead")
        if not (out_dtype.min <= requant.lo and requant.hi <= out_dtype.max):
            raise ValueError(f"node {name!r}: out_dtype {out_dtype} cannot hold the requantized "
                             f"outputs [lo, hi] = [{requant.lo}, {requant.hi}]")
        if self._out_bias:
            raise ValueError(f"node {name!r}: out_bias applies to thresholds only; with requant "
                             f"it must be 0, not {self._out_bias}")

    def _prepare_requant(self) -> None:
        """Per-channel constants for the accumulator register, and the narrowest shapes.

        The dot product is ``scale * a + offset`` (:meth:`_accumulator_domain`), so its
        requantization sum is ``a * (scale m) + (o + offset m)``. The rounding constant joins the
        offset. The shapes hold every value that a complete accumulator of each channel can lead
        to. Python integers throughout: the bounds may pass int64.
        """
        rq = self._requant
        m = rq.multiplier.astype(object)
        o = rq.offset.astype(object) + rq.rounding_constant + self._offsets.astype(object) * m
        m = self._scale * m
        self._requant_multiplier, self._requant_offset = m, o

        sum_lo, sum_hi = (bound.astype(object) for bound in self._bounds[:2])
        p_lo = np.minimum(sum_lo * m, sum_hi * m)
        p_hi = np.maximum(sum_lo * m, sum_hi * m)
        total_lo, total_hi = int((p_lo + o).min()), int((p_hi + o).max())
        self.multiplier_shape = shape_of_range(int(m.min()), int(m.max()))
        self.offset_shape = shape_of_range(int(o.min()), int(o.max()))
        self.product_shape = shape_of_range(int(p_lo.min()), int(p_hi.max()))
        self.sum_shape = shape_of_range(total_lo, total_hi)
        self._quotient_range = (total_lo >> rq.shift, total_hi >> rq.shift)

    def _accumulator_domain(self) -> tuple[int, np.ndarray]:
        """``scale`` and the per-channel ``offset`` with ``W x = scale * a + offset``, where ``a``
        is what the accumulator sums (see :meth:`_product`):

        - XNOR: ``a`` counts the matching bits, so ``W x = 2 a - MW``;
        - masked weights: ``a = sum(w (x + 1) / 2)``, so ``W x = 2 a - sum(w)``;
        - complemented inputs: a weight of -1 adds ``~x = c - x`` (``c`` is -1 for a signed input,
          ``2**bits - 1`` for an unsigned one), so ``W x = a - c count(w == -1)``;
        - offset-binary inputs (:attr:`lanes_multiply_signed_input` false): ``a = sum(w (x + 2**(bits-1)))``, so
          ``W x = a - 2**(bits-1) sum(w)``.
        """
        weights = self._weights
        if self._input_offset_binary:
            return 1, -(1 << (self._in_dtype.bitwidth - 1)) * weights.sum(axis=1)
        if self.constant_weights:
            # The adder graph sums W x itself, or for a BIPOLAR input W b of its bits (x = 2 b - 1).
            return (2, -weights.sum(axis=1)) if self._in_dtype.bipolar else (1, np.zeros(weights.shape[0], np.int64))
        if self._xnor:
            return 2, np.full(weights.shape[0], -weights.shape[1], np.int64)
        if self._in_dtype.bipolar:
            return 2, -weights.sum(axis=1)
        if self._weight_dtype.bipolar:
            return 1, -self._complement_constant() * (weights < 0).sum(axis=1)
        return 1, np.zeros(weights.shape[0], np.int64)

    def _lane_input_range(self) -> tuple[int, int]:
        """Least and greatest input value a lane multiplies: a ``BIPOLAR`` input's bit, an offset-binary
        input's unsigned value, or the input itself."""
        if self._in_dtype.bipolar:
            return 0, 1
        if self._input_offset_binary:
            return 0, (1 << self._in_dtype.bitwidth) - 1
        return self._in_dtype.min, self._in_dtype.max

    def _lane_input(self, bits):
        """The value a lane multiplies, from a multi-bit input's stored bits (see :meth:`_lane_input_range`)."""
        if self._input_offset_binary:
            return Cat(bits[:-1], ~bits[-1])
        return bits.as_signed() if self._in_dtype.signed else bits

    def _complement_constant(self) -> int:
        """``c`` with ``~x = c - x`` for the input type's bits: -1 signed, ``2**bits - 1`` unsigned."""
        return -1 if self._in_dtype.signed else (1 << self._in_dtype.bitwidth) - 1

    def _row_bounds(self) -> tuple[np.ndarray, ...]:
        """Per output channel: the least and greatest complete sum ``a`` of
        :meth:`_accumulator_domain`, and the least and greatest partial sum.

        A weight ``w >= 0`` times an input in ``[x_lo, x_hi]`` lies in ``[w x_lo, w x_hi]``, a
        negative one in ``[w x_hi, w x_lo]``: every bound is a combination of the row sums of
        the positive and of the negative weights (two passes over the matrix, which the folding
        planner pays for every candidate folding). A masked weight is a multiply by an input in
        ``[0, 1]``; a complemented input ``c - x`` lies in ``[c - x_hi, c - x_lo]``.
        """
        mh, mw = self._weights.shape
        if self.constant_weights:
            # One fold: the partial sums are the complete ones.
            x_lo, x_hi = self._lane_input_range()
            positive = np.clip(self._weights, 0, None).sum(axis=1)
            negative = np.clip(self._weights, None, 0).sum(axis=1)
            lo, hi = x_lo * positive + x_hi * negative, x_hi * positive + x_lo * negative
            return lo, hi, lo, hi
        if self._xnor:
            zeros, full = np.zeros(mh, np.int64), np.full(mh, mw, np.int64)
            return zeros, full, zeros, full
        x_lo, x_hi = self._lane_input_range()
        if self._weight_dtype.bipolar:
            plus = (self._weights > 0).sum(axis=1)
            minus = mw - plus
            c_lo, c_hi = self._complement_constant() - x_hi, self._complement_constant() - x_lo
            return (x_lo * plus + c_lo * minus, x_hi * plus + c_hi * minus,
                    min(x_lo, 0) * plus + min(c_lo, 0) * minus,
                    max(x_hi, 0) * plus + max(c_hi, 0) * minus)
        positive = np.clip(self._weights, 0, None).sum(axis=1)
        negative = np.clip(self._weights, None, 0).sum(axis=1)
        return (x_lo * positive + x_hi * negative, x_hi * positive + x_lo * negative,
                min(x_lo, 0) * positive + max(x_hi, 0) * negative,
                max(x_hi, 0) * positive + min(x_lo, 0) * negative)

    def _accumulator_range(self) -> tuple[int, int]:
        """Bounds of every partial sum the accumulator can hold, over all channels."""
        _, _, partial_lo, partial_hi = self._bounds
        return int(partial_lo.min()), int(partial_hi.max())

    @property
    def output_sum_range(self) -> tuple[int, int]:
        """Bounds of a complete dot product (in the popcount domain for XNOR), over all channels."""
        sum_lo, sum_hi, _, _ = self._bounds
        return int(sum_lo.min()), int(sum_hi.max())

    @property
    def weight_rom_rows(self) -> list[int]:
        """The weight ROM's words: row ``nf * SF + sf`` holds weights of rows ``nf*pe + j``, columns
        ``sf*simd + k``, element ``(j, k)`` at bit ``(j*simd + k) * weight bits``."""
        pe, simd = self._pe, self._simd
        bits = self._weight_dtype.to_hw(self._weights)
        blocks = bits.reshape(self._nf, pe, self._sf, simd).transpose(0, 2, 1, 3)
        return _packed_rows(blocks.reshape(self._nf * self._sf, pe * simd), self._weight_dtype.bitwidth)

    @property
    def threshold_rom_rows(self) -> list[int]:
        """The threshold ROM's words as one ROM of all ``pe`` lanes (wider ones are split by lanes)."""
        return self._threshold_rom_rows(0, self._pe)

    def _threshold_rom_rows(self, first: int, lanes: int) -> list[int]:
        """ROM row ``nf`` of lanes ``first`` to ``first + lanes``: thresholds ``l`` of channel
        ``nf*pe + first + j`` at bit ``(j*L + l) * width``."""
        width = self.acc_shape.width
        fields = (self._thresholds & ((1 << width) - 1)).reshape(self._nf, self._pe, -1)
        return _packed_rows(fields[:, first:first + lanes].reshape(self._nf, -1), width)

    @property
    def correction_rom_rows(self) -> list[int]:
        """The correction points' ROM words: row ``nf`` holds channel ``nf*pe + j``'s raising and then
        lowering points at bit ``(j*J + l) * width``, in the accumulator's domain and shape."""
        width = self.acc_shape.width
        fields = (self._correction_points & ((1 << width) - 1)).reshape(self._nf, -1)
        return _packed_rows(fields, width)

    @property
    def multiplier_rom_rows(self) -> list[int]:
        """The requantization multipliers' ROM words: row ``nf`` holds those of channels ``nf*pe + j``."""
        return _channel_rom_rows(self._requant_multiplier, self._pe, self.multiplier_shape)

    @property
    def offset_rom_rows(self) -> list[int]:
        """The requantization offsets' ROM words: row ``nf`` holds those of channels ``nf*pe + j``."""
        return _channel_rom_rows(self._requant_offset, self._pe, self.offset_shape)

    def _product(self, x_bits, w_bits, register=None):
        """One lane's term of the sum ``a`` (:meth:`_accumulator_domain`), from stored bits; a multiply split by
        ``register`` (:func:`~streamc.rtl.placement.multiply`)."""
        in_dt, w_dt = self._in_dtype, self._weight_dtype
        if in_dt.bipolar and w_dt.bipolar:
            return ~(x_bits[0] ^ w_bits[0])
        if w_dt.bipolar:
            x = x_bits.as_signed() if in_dt.signed else x_bits
            return Mux(w_bits[0], x, ~x)
        w = w_bits.as_signed() if w_dt.signed else w_bits
        if in_dt.bipolar:
            return Mux(x_bits[0], w, 0)
        return multiply(self._lane_input(x_bits), w, self.res_type, register)

    def start_rom_shape(self) -> Shape | None:
        """Shape of the words of the ROM of the accumulators' starting offsets; ``None`` where each
        lane starts from the same offset in every neuron fold, a constant."""
        per_fold = self._offsets.reshape(self._nf, self._pe)
        if not self.starts_from_offsets or (per_fold == per_fold[0]).all():
            return None
        return shape_of_range(int(self._offsets.min()), int(self._offsets.max()))

    @property
    def start_rom_rows(self) -> list[int]:
        """The accumulators' starting offsets' ROM words: row ``nf`` holds those of channels ``nf*pe + j``."""
        return _channel_rom_rows(self._offsets, self._pe, self.start_rom_shape())

    def _accumulator_start(self, m, advance, nf1) -> list:
        """Each lane's value for the accumulator to restart from: 0, a constant offset, or one read
        from a ROM alongside the products (the row arrives with the fold's first sum)."""
        if not self.starts_from_offsets:
            return [0] * self._pe
        shape = self.start_rom_shape()
        if shape is None:
            return [int(offset) for offset in self._offsets[:self._pe]]
        m.submodules.start_rom = rom = Memory(shape=unsigned(self._pe * shape.width), depth=self._nf,
                                              init=self.start_rom_rows)
        read = rom.read_port(domain="sync")
        m.d.comb += [read.addr.eq(nf1), read.en.eq(advance)]
        return _channel_fields(read.data, self._pe, shape)

    def _row(self, m, advance, rom, folds, far: bool = True):
        """The word of ``rom`` (a word per neuron fold) for the stage after the last of ``folds`` (the neuron fold
        of each stage, the issue's first): read at ``folds[-1]``; with ``operand_register`` a stage earlier and
        registered, so that a block RAM's clock-to-output delay is a path of its own; with ``route_register``, where
        the ROM may be ``far`` (a block RAM), two stages earlier and registered twice, so that the route from the
        block is one too."""
        registers = self.operand_register + (self.route_register and far)
        read = rom.read_port(domain="sync")
        m.d.comb += [read.addr.eq(folds[-1 - registers]), read.en.eq(advance)]
        word = read.data
        for _ in range(registers):
            word = _stage_register(m, advance, reset_less=True)(word)
        return word

    def _compare_thresholds(self, m, advance, valid3, folds, acc3):
        """Stage 4: threshold compares, then their count (pipelined with ``tree_every``). Returns the
        output beat's valid and values."""
        pe, n_thr, cw = self._pe, self._thresholds.shape[1], self.acc_shape.width
        # One ROM for all lanes, or, past the widest memory Amaranth builds, one per group of lanes.
        per_rom = max(1, min(pe, MAX_MEMORY_WIDTH // (n_thr * cw)))
        lane_reads = []
        for first in range(0, pe, per_rom):
            lanes = min(per_rom, pe - first)
            rom = Memory(shape=unsigned(lanes * n_thr * cw), depth=self._nf,
                         init=self._threshold_rom_rows(first, lanes), attrs=self._threshold_attrs)
            m.submodules["threshold_rom" if per_rom == pe else f"threshold_rom_{first}"] = rom
            # Read alongside the accumulator's last step, so the row arrives with the sum.
            row = self._row(m, advance, rom, folds, far=self.ram_style_thresholds != "distributed")
            lane_reads += [(row, lane) for lane in range(lanes)]

        # Registered to keep the compares off the adder's path.
        valid4 = Signal()
        reached4 = [Signal(n_thr, name=f"reached_{j}", reset_less=True) for j in range(pe)]
        with m.If(advance):
            m.d.sync += valid4.eq(valid3)
            for j, (row, lane) in enumerate(lane_reads):
                for l in range(n_thr):
                    raw = row[(lane * n_thr + l) * cw:(lane * n_thr + l + 1) * cw]
                    threshold = raw.as_signed() if self.acc_shape.signed else raw
                    m.d.sync += reached4[j][l].eq(acc3[j] >= threshold)
        if self._out_dtype.bipolar:
            return valid4, [reached[0] for reached in reached4]
        register, data = _stage_register(m, advance), _stage_register(m, advance, reset_less=True)
        counts = [adder_tree(m, list(reached), every=self.tree_every, register=data) for reached in reached4]
        for _ in range(tree_stages(n_thr, self.tree_every)):
            valid4 = register(valid4)
        return valid4, [self._out_bias + count for count in counts]

    def _requantize(self, m, advance, valid3, folds, acc3):
        """Stages 4 and 5: product and sum; shift, round and clamp go into the output register.

        Returns the output beat's valid and values.
        """
        pe, rq = self._pe, self._requant
        m.submodules.multiplier_rom = multiplier_rom = Memory(
            shape=unsigned(pe * self.multiplier_shape.width), depth=self._nf,
            init=self.multiplier_rom_rows)
        # Read alongside the accumulator's last step, so the factors arrive with the sum.
        multipliers = self._row(m, advance, multiplier_rom, folds)

        raised, lowered = self._correction_compares(m, advance, folds, acc3)

        # Stage 4: a registered multiply (a hard multiplier's output register).
        valid4 = Signal()
        nf2 = folds[-1]
        nf3 = Signal.like(nf2)
        product4 = [Signal(self.product_shape, name=f"product_{j}", reset_less=True) for j in range(pe)]
        factors = _channel_fields(multipliers, pe, self.multiplier_shape)
        with m.If(advance):
            m.d.sync += [valid4.eq(valid3), nf3.eq(nf2)]
            m.d.sync += [product.eq(acc * factor)
                         for product, acc, factor in zip(product4, acc3, factors)]

        m.submodules.offset_rom = offset_rom = Memory(
            shape=unsigned(pe * self.offset_shape.width), depth=self._nf,
            init=self.offset_rom_rows)
        # One stage later than the factors: the offsets arrive with the products.
        offset_row = self._row(m, advance, offset_rom, [*folds, nf3])

        # Stage 5: product plus offset (which carries the rounding constant); the corrections counted.
        valid5 = Signal()
        sum5 = [Signal(self.sum_shape, name=f"sum_{j}", reset_less=True) for j in range(pe)]
        offsets = _channel_fields(offset_row, pe, self.offset_shape)
        correction5 = [Signal(range(-rq.lower_at.shape[1], rq.raise_at.shape[1] + 1), name=f"correction_{j}",
                              reset_less=True) for j in range(pe)]
        with m.If(advance):
            m.d.sync += valid5.eq(valid4)
            m.d.sync += [total.eq(product + offset)
                         for total, product, offset in zip(sum5, product4, offsets)]
            if rq.corrections:
                m.d.sync += [correction.eq(_count(m, up) - _count(m, down))
                             for correction, up, down in zip(correction5, raised, lowered)]

        # Into the output register: a flooring shift, HALF_EVEN's (HALF_ODD's) tie fix-up, the clamp.
        # The fix-up adds at most 1 and only below hi, so comparing before it clamps right.
        values = []
        for total in sum5:
            floor = total.shift_right(rq.shift) if rq.shift else total
            value = floor
            if rq.rounding == "HALF_EVEN" and rq.shift:
                value = floor + (total[:rq.shift].all() & floor[0])
            elif rq.rounding == "HALF_ODD" and rq.shift:
                value = floor + (total[:rq.shift].all() & ~floor[0])
            if self._quotient_range[1] >= rq.hi:
                value = Mux(floor >= rq.hi, rq.hi, value)
            if self._quotient_range[0] < rq.lo:
                value = Mux(floor < rq.lo, rq.lo, value)
            values.append(value)
        if rq.corrections:
            values = [value + correction for value, correction in zip(values, correction5)]
        return valid5, values

    def _correction_compares(self, m, advance, folds, acc3) -> tuple[list, list]:
        """Stage 4 beside the multiply: each lane's sum against its channel's correction points.
        Returns the registered compares of the raising and of the lowering points, per lane."""
        rq, pe, cw = self._requant, self._pe, self.acc_shape.width
        ups, downs = rq.raise_at.shape[1], rq.lower_at.shape[1]
        if not rq.corrections:
            return [[]] * pe, [[]] * pe
        m.submodules.correction_rom = rom = Memory(shape=unsigned(pe * (ups + downs) * cw), depth=self._nf,
                                                   init=self.correction_rom_rows)
        points = _channel_fields(self._row(m, advance, rom, folds), pe * (ups + downs), self.acc_shape)
        reached = [[Signal(name=f"corrected_{j}_{l}", reset_less=True) for l in range(ups + downs)] for j in range(pe)]
        with m.If(advance):
            for j in range(pe):
                m.d.sync += [bit.eq(acc3[j] >= point)
                             for bit, point in zip(reached[j], points[j * (ups + downs):(j + 1) * (ups + downs)])]
        return [bits[:ups] for bits in reached], [bits[ups:] for bits in reached]

    def _constant_sums(self, m, advance, x1) -> list[list]:
        """Stage 2 with :attr:`constant_weights`: each PE's sum of its lanes' products, by the adder graph,
        registered (one value per PE, for the adder tree)."""
        iw, in_dt = self.in_width, self._in_dtype
        fields = [x1[k * iw:(k + 1) * iw] for k in range(self._simd)]
        inputs = [field if in_dt.bipolar else self._lane_input(field) for field in fields]
        lo, hi = self.output_sum_range
        rows = []
        sums = constant_products(m, inputs, self.adder_graph, keep=self.keep_adders, every=self.tree_every,
                                 register=_stage_register(m, advance, reset_less=True))
        for j, value in enumerate(sums):
            total = Signal(shape_of_range(lo, hi), name=f"constant_sum_{j}", reset_less=True)
            with m.If(advance):
                m.d.sync += total.eq(value)
            rows.append([total])
        return rows

    @property
    def weight_rom_banks(self) -> int:
        """Banks of :data:`LOGIC_ROM_BANK_WORDS` words the weight ROM is read from: with ``operand_register`` and
        the ROM in logic (``ram_style="distributed"``), each bank's word is registered and the operand register
        takes the registered bank's, so a deep ROM's decode is two stages, not one path (TFC-w1a1 on the UP5K:
        64 words through four LUT levels, 22.9 ns); else 1."""
        return weight_rom_banks(self._nf * self._sf, self.operand_register, self.ram_style)

    @property
    def operand_stage(self) -> bool:
        """Whether ``operand_register`` is a stage of its own between the memories and the lanes: not where the
        weight ROM's banks are registered and the lanes do not multiply (an XNOR, a mask or a complement: the
        bank select's last LUT takes it in), so the bank registers stand in its place (TFC-w1a1 on a full UP5K
        had no room for both: 5,300 logic cells of 5,280)."""
        multiplies = not (self._in_dtype.bipolar or self._weight_dtype.bipolar)
        return has_operand_stage(self.operand_register, self.weight_rom_banks, multiplies)

    @property
    def route_stage(self) -> bool:
        """Whether ``route_register`` registers the weight ROM's word and the inputs a second time, in the fabric
        beside the lanes, so that the route from a block RAM placed far from them is a path of its own (TFC-w1a1's
        second layer on half an ECP5-85F: 7.6 ns from its weight ROM's output register into an XNOR's register); and
        its address, so that the route from the issue's counter to blocks spread over the device is one too (its first
        layer's, 7.5 ns, 6.8 of it route, with the word registered twice). Two stages."""
        return has_route_stage(self.route_register, self.operand_stage, self.ram_style, self.constant_weights)

    def _weight_read(self, m, advance, waddr):
        """The weight ROM's word at ``waddr``, a cycle after the issue (stage 1): one synchronous read, or with
        :attr:`weight_rom_banks` each bank's and the one its registered bank number picks."""
        width, rows, banks = self._pe * self._simd * self._weight_dtype.bitwidth, self.weight_rom_rows, \
            self.weight_rom_banks
        if banks == 1:
            rom = Memory(shape=unsigned(width), depth=len(rows), init=rows, attrs=self._weight_attrs)
            m.submodules.weight_rom = rom
            weight_read = rom.read_port(domain="sync")
            m.d.comb += [weight_read.addr.eq(waddr), weight_read.en.eq(advance)]
            return weight_read.data
        low = (LOGIC_ROM_BANK_WORDS - 1).bit_length()
        reads = []
        for bank in range(banks):
            init = rows[bank * LOGIC_ROM_BANK_WORDS:(bank + 1) * LOGIC_ROM_BANK_WORDS]
            m.submodules[f"weight_rom_{bank}"] = rom = Memory(shape=unsigned(width), depth=len(init), init=init,
                                                              attrs=self._weight_attrs)
            read = rom.read_port(domain="sync")
            m.d.comb += [read.addr.eq(waddr[:low]), read.en.eq(advance)]
            reads.append(read.data)
        bank1 = Signal(range(banks))
        with m.If(advance):
            m.d.sync += bank1.eq(waddr[low:])
        word = Signal(width)
        m.d.comb += word.eq(Array(reads)[bank1])
        return word

    def elaborate(self, platform):
        """Input buffer, weight ROM, lanes, accumulators and the output stage, in pipeline order. One long
        function: the fold counters and the stage valid bits it declares first are read by every part."""
        m = Module()
        pe, simd, nf_count, sf_count = self._pe, self._simd, self._nf, self._sf
        iw, wb, ow = self.in_width, self._weight_dtype.bitwidth, self.out_width

        # The whole pipeline moves when the output register is empty or being emptied; with a skid register, when
        # that is empty; with credits, always.
        advance = Signal()
        skid_valid = Signal()
        m.d.comb += advance.eq({"stall": ~self.o.valid | self.o.ready, "skid": ~skid_valid,
                                "credit": 1}[self.flow_control])
        # Whether the unit may issue: with credits, whether the output queue has room for one more beat.
        room = Signal(init=1)

        # Issue: pick the next (neuron fold, synapse fold) step.
        nf = Signal(range(nf_count))
        sf = Signal(range(sf_count))
        waddr = Signal(range(nf_count * sf_count))
        first_fold = nf == 0
        issue = Signal()
        m.d.comb += [
            self.i.ready.eq(advance & room & first_fold),
            issue.eq(advance & room & (~first_fold | self.i.valid)),
        ]
        with m.If(issue):
            m.d.sync += [
                sf.eq(Mux(sf == sf_count - 1, 0, sf + 1)),
                waddr.eq(Mux(waddr == nf_count * sf_count - 1, 0, waddr + 1)),
            ]
            with m.If(sf == sf_count - 1):
                m.d.sync += nf.eq(Mux(nf == nf_count - 1, 0, nf + 1))

        register, data = _stage_register(m, advance), _stage_register(m, advance, reset_less=True)
        # With the route stage the weight ROM reads a registered copy of the address, a stage after the issue.
        w1 = self._weight_read(m, advance, data(waddr) if self.route_stage else waddr)

        # Stage 1: operands.
        valid1, first1, last1 = Signal(), Signal(), Signal()
        nf1 = Signal.like(nf)
        x_in1 = Signal(simd * iw, reset_less=True)
        with m.If(advance):
            m.d.sync += [
                valid1.eq(issue), first1.eq(sf == 0), last1.eq(sf == sf_count - 1),
                nf1.eq(nf), x_in1.eq(self.i.payload),
            ]
        if nf_count > 1:
            # The later neuron folds read the input vector from a buffer written a stage after the issue, from the
            # operand register: its write enable then comes from this unit's registers alone. Written at the
            # issue, its enable took the producer's valid across the device (half an ECP5-85F: the shell's valid
            # and the fold counter into a 64-lane buffer's enable, 8.3 ns).
            from_input1 = Signal()
            sf1 = Signal.like(sf)
            with m.If(advance):
                m.d.sync += [from_input1.eq(first_fold), sf1.eq(sf)]
            store = valid1 & from_input1
            if sf_count == 1:
                # One word: the next fold reads it the cycle after it is stored, so a register, not a memory.
                stored = Signal(simd * iw, reset_less=True)
                with m.If(store):
                    m.d.sync += stored.eq(x_in1)
            else:
                # Fold 1 reads word s sf_count >= 2 cycles after fold 0 took it, a cycle after it was stored.
                m.submodules.input_buffer = input_buffer = Memory(
                    shape=unsigned(simd * iw), depth=sf_count, init=[])
                buffer_write = input_buffer.write_port()
                buffer_read = input_buffer.read_port(domain="sync")
                m.d.comb += [
                    buffer_write.addr.eq(sf1), buffer_write.data.eq(x_in1), buffer_write.en.eq(store),
                    buffer_read.addr.eq(sf), buffer_read.en.eq(advance),
                ]
                stored = buffer_read.data
            # A signal, not an expression: each slice of an expression would copy the multiplexer.
            x1 = Signal(simd * iw)
            m.d.comb += x1.eq(Mux(from_input1, x_in1, stored))
        else:
            x1 = x_in1
        # Each stage's valid, first and last synapse fold, and neuron fold, from stage 1 on.
        control = [(valid1, first1, last1, nf1)]
        for words in [False] * self.route_stage + [True] * (self.operand_stage + self.route_stage):
            # The inputs wait for a word read at a registered address; then both are registered.
            x1, w1 = data(x1), data(w1) if words else w1
            control.append(tuple(register(signal) for signal in control[-1]))
        valid1, first1, last1, nf1 = control[-1]

        # Stage 2: products, the terms of the accumulator's domain.
        valid2, first2, last2 = Signal(), Signal(), Signal()
        nf2 = Signal.like(nf)
        products2 = []
        if self.constant_weights:
            products2 = self._constant_sums(m, advance, x1)
        for j in range(0 if self.constant_weights else pe):
            row = []
            for k in range(simd):
                x_bits = x1[k * iw:(k + 1) * iw]
                w_bits = w1[(j * simd + k) * wb:(j * simd + k + 1) * wb]
                value = self._product(x_bits, w_bits, data if self.product_stage else None)
                product = Signal(value.shape(), name=f"product_{j}_{k}", reset_less=True)
                with m.If(advance):
                    m.d.sync += product.eq(value)
                row.append(product)
            products2.append(row)
        for _ in range(self.product_stage + self.graph_stages):
            control.append(tuple(register(signal) for signal in control[-1]))
        valid1, first1, last1, nf1 = control[-1]
        with m.If(advance):
            m.d.sync += [valid2.eq(valid1), first2.eq(first1), last2.eq(last1), nf2.eq(nf1)]

        # Stage 3: adder tree (its own stages with tree_every) and accumulator.
        valid3 = Signal()
        acc3 = [Signal(self.acc_shape, name=f"acc_{j}", reset_less=True) for j in range(pe)]
        sums2 = [adder_tree(m, row, every=self.tree_every, register=data) for row in products2]
        control.append((valid2, first2, last2, nf2))
        for _ in range(tree_stages(self._lanes_summed, self.tree_every)):
            control.append(tuple(register(signal) for signal in control[-1]))
        valid2, first2, last2, nf2 = control[-1]
        if self.starts_from_offsets and self._scale != 1:
            sums2 = [total * self._scale for total in sums2]
        # The starting offsets are read a stage ahead of the sums they join.
        starts = self._accumulator_start(m, advance, control[-2][3])
        with m.If(advance):
            m.d.sync += valid3.eq(valid2 & last2)
            with m.If(valid2):
                for j in range(pe):
                    # With constant weights every step is a vector's first and last.
                    restart = starts[j] if self.constant_weights else Mux(first2, starts[j], acc3[j])
                    m.d.sync += acc3[j].eq(restart + sums2[j])

        # The neuron fold of each stage up to the accumulator's, the issue's first: the output stage's ROMs are read
        # as many stages ahead as their words are registered.
        folds = [nf, *(stage[3] for stage in control)]
        if self._requant is not None:
            out_valid, out_values = self._requantize(m, advance, valid3, folds, acc3)
        elif self._thresholds is not None:
            out_valid, out_values = self._compare_thresholds(m, advance, valid3, folds, acc3)
        else:
            out_valid, out_values = valid3, acc3

        # Output register. Assigning to ow-bit signals sign-extends or wraps each value into
        # its to_hw bit pattern.
        out_bits = [Signal(ow, name=f"out_{j}") for j in range(pe)]
        m.d.comb += [bits.eq(value) for bits, value in zip(out_bits, out_values)]
        if self.flow_control == "stall":
            with m.If(advance):
                m.d.sync += [self.o.valid.eq(out_valid), self.o.payload.eq(Cat(*out_bits))]
        elif self.flow_control == "skid":
            _skid_output(m, self.o, skid_valid, out_valid, Cat(*out_bits))
        else:
            self._credit_output(m, room, issue & (sf == sf_count - 1), out_valid, Cat(*out_bits))
        return m

    def _credit_output(self, m, room, issued, valid, payload) -> None:
        """The output queue of ``flow_control="credit"``: it takes every beat (``valid``, ``payload``) the pipeline
        puts out; ``room`` says that one more beat ``issued`` fits, counting those on the way and those queued.
        The credits left are a thermometer code, bit ``k`` set while more than ``k`` beats fit: a beat issued
        shifts it down, one handed out up a cycle later, so neither reaches ``room`` through a carry chain (a count
        and its compare took 8.6 ns from the input's valid on half an ECP5-85F, TFC-w1a1), and a beat handed out
        reaches the credits through a register of its own (across the digits MLP's 512-lane first unit on half an
        ECP5-85F, from the queue's valid to the credits beside the unit's input, 8.7 ns). The queue is read
        combinationally, so a beat is offered the cycle after it is put out, at any depth; its valid, which the
        credits read, is a register (the digits MLP's first unit on half an ECP5-85F: 9.5 ns from Amaranth's
        ``SyncFIFO``'s count through its valid into the credits)."""
        depth = self.queue_depth
        m.submodules.output_queue = queue = StreamFIFO(width=len(payload), depth=depth, buffered=False)
        m.d.comb += [queue.i.payload.eq(payload), queue.i.valid.eq(valid)]
        wiring.connect(m, queue.o, wiring.flipped(self.o))
        credits = Signal(depth, init=(1 << depth) - 1)
        # Set the cycle after a beat is handed out.
        returned = Signal()
        m.d.sync += returned.eq(self.o.valid & self.o.ready)
        with m.If(issued & ~returned):
            m.d.sync += credits.eq(credits >> 1)
        with m.Elif(returned & ~issued):
            m.d.sync += credits.eq(Cat(1, credits[:-1]))
        m.d.comb += room.eq(credits[0])


def _skid_output(m, port, skid_valid, valid, payload) -> None:
    """The output register of ``port`` with a skid register beside it (``skid_valid`` says it holds a beat). The
    pipeline moved this cycle unless the skid holds a beat: a beat (``valid``, ``payload``) that the output register
    cannot take, holding one that is not being taken, waits in the skid and goes out first."""
    skid = Signal(len(payload))
    with m.If(~port.valid | port.ready):
        m.d.sync += [port.valid.eq(skid_valid | valid), port.payload.eq(Mux(skid_valid, skid, payload)),
                     skid_valid.eq(0)]
    with m.Elif(~skid_valid):
        m.d.sync += [skid_valid.eq(valid), skid.eq(payload)]


def _stage_register(m, advance, *, reset_less=False):
    """A function giving a register of a value that moves with the pipeline (loads when it advances).

    ``reset_less`` for data, read only where a valid bit says: only the valid bits and the fold counters need the
    reset, whose net then reaches a fraction of the registers, and a register without one packs beside any other.
    One that takes a block RAM's output alone is one the ECP5 flow moves into the block
    (:mod:`streamc.block_ram_registers`), whose clock-to-output is then 1 ns instead of 6."""
    def register(value):
        staged = Signal(value.shape(), name="staged", reset_less=reset_less)
        with m.If(advance):
            m.d.sync += staged.eq(value)
        return staged
    return register


def _packed_rows(fields: np.ndarray, width: int) -> list[int]:
    """Each row of ``fields`` (integers in ``[0, 2**width)``) as one integer, field ``n`` at bit
    ``n * width``. Built with numpy: ROMs run to hundreds of thousands of rows."""
    fields = np.asarray(fields, dtype=np.uint64)
    shifts = np.arange(width, dtype=np.uint64)
    rows = []
    # In slices, so that the one byte per bit in between stays small.
    step = max(1, (1 << 22) // max(1, fields.shape[1] * width))
    for start in range(0, len(fields), step):
        bits = ((fields[start:start + step, :, None] >> shifts) & np.uint64(1)).astype(np.uint8)
        packed = np.packbits(bits.reshape(len(bits), -1), axis=1, bitorder="little")
        if packed.shape[1] <= 8:
            words = np.zeros((len(packed), 8), np.uint8)
            words[:, :packed.shape[1]] = packed
            rows += words.view("<u8")[:, 0].tolist()
        else:
            rows += [int.from_bytes(row.tobytes(), "little") for row in packed]
    return rows


def _channel_rom_rows(values, pe: int, shape: Shape) -> list[int]:
    """ROM row ``nf``: ``values`` of channels ``nf*pe + j`` at bit ``j * shape.width``."""
    mask = (1 << shape.width) - 1
    return [sum((int(values[nf * pe + j]) & mask) << (j * shape.width) for j in range(pe))
            for nf in range(len(values) // pe)]


def _channel_fields(row, pe: int, shape: Shape) -> list:
    """The ``pe`` values of a :func:`_channel_rom_rows` row, each read as ``shape``."""
    width = shape.width
    fields = [row[j * width:(j + 1) * width] for j in range(pe)]
    return [field.as_signed() if shape.signed else field for field in fields]


def _count(m, bits: list):
    """How many of ``bits`` are set (0 for none)."""
    return adder_tree(m, bits) if bits else 0


def _check_fold(name: str, mh: int, mw: int, what: str, value: int, dim: int) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1 or dim % value:
        divisors = ", ".join(str(d) for d in range(1, dim + 1) if dim % d == 0)
        raise FoldingError(f"node {name!r} (MatMul {mh}x{mw}): {what}={value!r} does not divide "
                           f"{dim}; valid {what}: {divisors}")
