"""Vector-vector unit: the arithmetic of a depthwise convolution, and of an average pool."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamc.datatypes import DataType, smallest_datatype

from .arithmetic import shape_of_range
from .placement import check_res_type, multiply, rom_attrs
from .window import check_channel_fold

__all__ = ["VectorVectorUnit", "vector_vector_reference"]


def vector_vector_reference(patches: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """What :class:`VectorVectorUnit` computes: ``patches`` of shape ``(vectors, K*C)`` in
    ``(k, c)`` order and ``weights`` of shape ``(C, K)`` give ``(vectors, C)`` dot products."""
    weights = np.asarray(weights, dtype=np.int64)
    patches = np.asarray(patches, dtype=np.int64).reshape(len(patches), weights.shape[1], -1)
    return np.einsum("vkc,ck->vc", patches, weights)


class VectorVectorUnit(wiring.Component):
    """Multiplies each channel of a patch by that channel's own kernel: FINN's VVAU.

    A depthwise convolution is :class:`~streamc.rtl.window.SlidingWindow` followed by this
    unit; an average pool is the same with all-ones weights (the division is left to the
    thresholds or requantization that follow).

    Input: per output pixel (a *vector*) its patch in ``(k, c)`` order, as
    :class:`~streamc.rtl.window.SlidingWindow` emits it: the ``C`` channels of tap 0, then of
    tap 1, ..., ``simd`` channels per beat, so a vector is ``K`` taps of ``CF = C/simd``
    channel groups. Output: per vector the ``C`` dot products
    ``acc[c] = sum_k weights[c, k] * x[k, c]`` in channel order, ``simd`` per beat. A global
    average pool over an ``H x W`` image is ``K = H*W`` with one vector per frame, fed straight
    from a layer's raster-order output.

    Partial sums. While a vector streams in, each of the ``CF`` groups carries ``simd``
    partial sums from one tap to the next. They sit in registers arranged as a rotating chain
    of ``CF`` stages that moves one stage per accepted beat: a group's partial sum is read
    back exactly ``CF`` beats after it was written, so the chain's head always holds the
    partial sum of the group arriving now. That needs no address decode, no read multiplexer
    and no forwarding around a memory's read-after-write hazard (a memory would have one for
    ``CF`` of 1 or 2); the cost is ``C`` accumulators in flip-flops, which suits the channel
    counts of depthwise layers on iCE40/ECP5. During the last tap each beat completes one
    group, whose sums go straight to the output register.

    Weights sit in a ROM (:class:`~amaranth.lib.memory.Memory`) of ``K*CF`` rows of ``simd``
    weights, read in step with the input; where every row is the same (an average pool's
    all-ones kernels) they are a constant instead.

    Pipeline (stalls as a whole while its output beat is not taken,
    ``i.ready = ~o.valid | o.ready``): accept beat and read weight ROM -> operands ->
    products -> partial sum, and output register on the last tap. See :attr:`latency`.

    ``BIPOLAR`` inputs or weights count as their values -1/+1: against any other type the
    other operand is negated instead of multiplied; ``BIPOLAR`` times ``BIPOLAR`` is +1 where
    the two bits agree.

    Parameters
    ----------
    weights : numpy.ndarray
        Integer array of shape ``(C, K)``: channel ``c``'s ``K`` taps, ``k = kh*KW + kw``.
    in_dtype, weight_dtype : DataType
        Types of the input elements and of the weights.
    simd : int
        Channels per beat in and out; must divide ``C``.
    vectors : int or None
        Vectors (output pixels) per frame, for :attr:`cycles_per_frame`; ``None`` counts one.
    ram_style : str
        Where the weight ROM goes: ``"auto"`` (Yosys decides), ``"distributed"`` (LUTs) or
        ``"block"`` (block RAM); see :mod:`streamc.rtl.placement`. Unused when every row is the same.
    res_type : str
        Where the lanes' multiplies go: ``"auto"`` (hard multipliers where Yosys maps them) or
        ``"lut"`` (partial products in LUTs); see :mod:`streamc.rtl.placement`.
    name : str
        Node name, used in error messages.

    Members
    -------
    i : In(stream.Signature(unsigned(simd * in_dtype.bitwidth)))
        Patches, element ``j`` of a beat at bit ``j * in_dtype.bitwidth``.
    o : Out(stream.Signature(unsigned(simd * out_dtype.bitwidth)))
        Dot products, packed likewise as :meth:`DataType.to_hw` packs ``out_dtype``.

    Attributes
    ----------
    out_dtype : DataType
        The smallest type (:func:`~streamc.datatypes.smallest_datatype`) holding every dot
        product these weights can give with ``in_dtype`` inputs.
    acc_shape : amaranth.hdl.Shape
        Shape of the partial sums: the narrowest holding every sum over a prefix of the taps.
    in_elems, out_elems : int
        ``simd``.
    in_width, out_width : int
        ``in_dtype.bitwidth`` and ``out_dtype.bitwidth``.
    cycles_per_frame : int
        ``vectors * K * C // simd``: one input beat per cycle; the ``C // simd`` output beats
        of a vector leave during its last tap, so the output never limits the pace.
    latency : int
        3: cycles from the cycle that accepts a group's last-tap beat to the cycle in which
        that group's output beat is first valid.
    """

    def __init__(self, *, weights: np.ndarray, in_dtype: DataType, weight_dtype: DataType,
                 simd: int, vectors: int | None = None, ram_style: str = "auto", res_type: str = "auto",
                 name: str = "vvau"):
        weights = np.asarray(weights)
        if weights.ndim != 2 or 0 in weights.shape or not np.issubdtype(weights.dtype,
                                                                          np.integer):
            raise ValueError(f"node {name!r}: weights must be a non-empty 2-D integer array of "
                             f"shape (C, K), not {weights.dtype} of shape {weights.shape}")
        channels, taps = weights.shape
        check_channel_fold(name, "channels", simd, channels)
        if vectors is not None and (not isinstance(vectors, (int, np.integer)) or vectors < 1):
            raise ValueError(f"node {name!r}: vectors must be an integer >= 1 or None, "
                             f"not {vectors!r}")
        if not weight_dtype.contains(weights):
            raise ValueError(f"node {name!r}: weights must be {weight_dtype} values, found "
                             f"values in [{weights.min()}, {weights.max()}]")
        self.name = name
        self._weight_attrs = rom_attrs(ram_style, name=name, what="ram_style")
        self.ram_style = ram_style
        check_res_type(res_type, name=name)
        self.res_type = res_type
        self._weights = weights.astype(np.int64)
        self._in_dtype, self._weight_dtype = in_dtype, weight_dtype
        self._simd, self._taps, self._groups = simd, taps, channels // simd

        # Per weight, the least and greatest product with an input; prefix sums over the taps
        # bound the partial sums, the full sums the results.
        w = self._weights.astype(object)
        term_lo = np.minimum(w * in_dtype.min, w * in_dtype.max)
        term_hi = np.maximum(w * in_dtype.min, w * in_dtype.max)
        prefix_lo, prefix_hi = np.cumsum(term_lo, axis=1), np.cumsum(term_hi, axis=1)
        self.out_dtype = smallest_datatype(prefix_lo[:, -1].min(), prefix_hi[:, -1].max())
        self.acc_shape = shape_of_range(int(prefix_lo.min()), int(prefix_hi.max()))

        self.in_elems = self.out_elems = simd
        self.in_width = in_dtype.bitwidth
        self.out_width = self.out_dtype.bitwidth
        self.cycles_per_frame = (1 if vectors is None else int(vectors)) * taps * self._groups
        self.latency = 3
        super().__init__({
            "i": In(stream.Signature(unsigned(simd * self.in_width))),
            "o": Out(stream.Signature(unsigned(simd * self.out_width))),
        })

    @property
    def weights(self) -> np.ndarray:
        """The ``(C, K)`` weights, channel by tap, as integers."""
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
    def weight_rom_rows(self) -> list[int]:
        """The weight ROM's words: row ``k * CF + g``: weights ``[g*simd + j, k]`` at bit ``j * weight bits``."""
        simd, wb = self._simd, self._weight_dtype.bitwidth
        bits = self._weight_dtype.to_hw(self._weights).astype(object)
        return [sum(int(bits[g * simd + j, k]) << (j * wb) for j in range(simd))
                for k in range(self._taps) for g in range(self._groups)]

    def _product(self, x_bits, w_bits):
        """Signed product of one input element and one weight, both as stored bits."""
        in_dt, w_dt = self._in_dtype, self._weight_dtype
        if in_dt.bipolar and w_dt.bipolar:
            return Mux(x_bits[0] == w_bits[0], Const(1, signed(2)), Const(-1, signed(2)))
        if w_dt.bipolar:
            x = x_bits.as_signed() if in_dt.signed else x_bits
            return Mux(w_bits[0], x, -x)
        w = w_bits.as_signed() if w_dt.signed else w_bits
        if in_dt.bipolar:
            return Mux(x_bits[0], w, -w)
        x = x_bits.as_signed() if in_dt.signed else x_bits
        return multiply(x, w, self.res_type)

    def elaborate(self, platform):
        m = Module()
        simd, taps, groups = self._simd, self._taps, self._groups
        iw, wb, ow = self.in_width, self._weight_dtype.bitwidth, self.out_width

        # The whole pipeline moves when the output register is empty or being emptied.
        advance = Signal()
        take = Signal()
        m.d.comb += [
            advance.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(advance),
            take.eq(self.i.valid & advance),
        ]

        # Accept: the input beat's group and tap, and its row of weights.
        group = Signal(range(groups))
        tap = Signal(range(taps))
        with m.If(take):
            with m.If(group == groups - 1):
                m.d.sync += [group.eq(0), tap.eq(Mux(tap == taps - 1, 0, tap + 1))]
            with m.Else():
                m.d.sync += group.eq(group + 1)

        rows = self.weight_rom_rows
        if len(set(rows)) == 1:
            w1 = Const(rows[0], unsigned(simd * wb))
        else:
            m.submodules.weight_rom = weight_rom = Memory(
                shape=unsigned(simd * wb), depth=len(rows), init=rows, attrs=self._weight_attrs)
            weight_read = weight_rom.read_port(domain="sync")
            row = Signal(range(len(rows)))
            with m.If(take):
                m.d.sync += row.eq(Mux(row == len(rows) - 1, 0, row + 1))
            m.d.comb += [weight_read.addr.eq(row), weight_read.en.eq(advance)]
            w1 = weight_read.data

        # Stage 1: operands.
        valid1, first1, last1 = Signal(), Signal(), Signal()
        x1 = Signal(simd * iw)
        with m.If(advance):
            m.d.sync += [valid1.eq(take), first1.eq(tap == 0), last1.eq(tap == taps - 1),
                         x1.eq(self.i.payload)]

        # Stage 2: products.
        valid2, first2, last2 = Signal(), Signal(), Signal()
        products2 = []
        for j in range(simd):
            value = self._product(x1[j * iw:(j + 1) * iw], w1[j * wb:(j + 1) * wb])
            product = Signal(value.shape(), name=f"product_{j}")
            with m.If(advance):
                m.d.sync += product.eq(value)
            products2.append(product)
        with m.If(advance):
            m.d.sync += [valid2.eq(valid1), first2.eq(first1), last2.eq(last1)]

        # Stage 3: partial sums. chain[0] is the arriving group's; every beat shifts the chain
        # by one group and appends the new sums, which on the last tap go out instead.
        chain = [[Signal(self.acc_shape, name=f"partial_{n}_{j}") for j in range(simd)]
                 for n in range(groups)]
        sums = []
        for j in range(simd):
            total = Signal(self.acc_shape, name=f"sum_{j}")
            m.d.comb += total.eq(Mux(first2, 0, chain[0][j]) + products2[j])
            sums.append(total)
        with m.If(advance & valid2):
            for n in range(groups - 1):
                m.d.sync += [dst.eq(src) for dst, src in zip(chain[n], chain[n + 1])]
            m.d.sync += [dst.eq(src) for dst, src in zip(chain[-1], sums)]

        # Output register. Assigning to ow-bit signals sign-extends or wraps each sum into its
        # to_hw bit pattern.
        out_bits = [Signal(ow, name=f"out_{j}") for j in range(simd)]
        m.d.comb += [bits.eq(total) for bits, total in zip(out_bits, sums)]
        with m.If(advance):
            m.d.sync += [self.o.valid.eq(valid2 & last2), self.o.payload.eq(Cat(*out_bits))]
        return m
