# amaranth: UnusedElaboratable=no
"""The sliding window: each output pixel's patch of a convolution or pool, channels-last."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..datatypes import DataType
from ..errors import LoweringError
from ..timing import Clock
from .base import Stage


@dataclass
class WindowStage(Stage):
    """A sliding-window generator: each output pixel's (kh, kw, c) patch, channels-last, ``elems`` per cycle."""

    name: str
    source: str
    in_shape: tuple[int, int, int]          # (H, W, C)
    out_shape: tuple[int, int]              # (OH, OW)
    kernel: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]      # top, left, bottom, right
    dilations: tuple[int, int]
    dtype: DataType
    pad_value: int
    elems: int = 1
    sources: list[int] = field(default_factory=lambda: [-1])
    clock: Clock | None = None      # the clock its reader's registers are chosen for (streamc.timing)

    kind = "window"
    in_elems = out_elems = property(lambda self: self.elems)
    in_dtype = out_dtype = property(lambda self: self.dtype)
    output_stage = "window"

    @property
    def in_count(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def out_count(self) -> int:
        return int(np.prod(self.out_shape) * np.prod(self.kernel) * self.in_shape[2])

    def cycles(self) -> int:
        return max(self.in_count, self.out_count) // self.elems

    def emulate(self, x: np.ndarray) -> np.ndarray:
        """The patches in stream order, in the narrowest integers that hold the codes: the patches repeat
        every pixel up to kernel-size times, and their reader (a unit's product or sum, a max pool) widens
        what it computes."""
        frames = x.reshape(len(x), *self.in_shape)
        low = min(int(frames.min(initial=self.pad_value)), self.pad_value)
        high = max(int(frames.max(initial=self.pad_value)), self.pad_value)
        narrow = np.result_type(np.min_scalar_type(low), np.min_scalar_type(high))
        top, left, bottom, right = self.padding
        padded = np.pad(frames.astype(narrow), ((0, 0), (top, bottom), (left, right), (0, 0)),
                        constant_values=self.pad_value)
        (oh, ow), (kh, kw), (sh, sw), (dh, dw) = self.out_shape, self.kernel, self.strides, self.dilations
        spans = ((kh - 1) * dh + 1, (kw - 1) * dw + 1)
        # (N, rows, columns, C, span rows, span columns): views, copied once by the reshape
        views = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=(1, 2))
        patches = views[:, :oh * sh:sh, :ow * sw:sw, :, ::dh, ::dw]
        return patches.transpose(0, 1, 2, 4, 5, 3).reshape(len(x), -1)

    def describe(self) -> str:
        return f"sliding window of {self.source!r}"

    def need(self, port: int) -> np.ndarray:
        """The reader starts a patch once the last image pixel it reads is written."""
        (height, width, channels), (out_h, out_w) = self.in_shape, self.out_shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.strides, self.dilations
        top, left = self.padding[:2]
        rows = np.minimum(np.arange(out_h) * sh - top + (kh - 1) * dh, height - 1)
        cols = np.minimum(np.arange(out_w) * sw - left + (kw - 1) * dw, width - 1)
        # the last real pixel of each patch: its bottom row, and its rightmost column inside the image
        last_pixel = (rows[:, None] * width + cols[None, :] + 1) * channels
        per_pixel = np.clip(last_pixel.reshape(-1), 0, height * width * channels)
        return np.repeat(per_pixel, int(np.prod(self.kernel)) * channels)

    def follow(self, before: Stage | None, after: Stage | None) -> None:
        # Its consumer's pace where the consumer folds, else its producer's; channels per beat divide the
        # channels.
        folds = after is not None and bool(after.knobs(placement=False))
        wanted = after.in_elems if folds else (before.out_elems if before else 1)
        self.elems = math.gcd(wanted, self.in_shape[2])

    def pipeline_for(self, clock: Clock) -> None:
        self.clock = clock

    @property
    def needed_register(self) -> bool:
        """Whether the reader's count of the pixels a patch needs is a register: where the path that sums it and
        moves the reader on it is longer than the clock's period (counted as eight LUT levels of control logic,
        :attr:`~streamc.timing.DelayModel.logic_level_ns`: the corner's two adders and two clamping compares with
        their selects, the compare the reader issues on, the issue, and each counter's next-value select; on the
        UP5K the digits CNN's took 38.6 ns, on the GW1NR-9 12.5)."""
        if self.clock is None:
            return False
        from ..rtl.window import needed_range

        height, width, _ = self.in_shape
        bits = needed_range(height, width, *self.padding[:2]).stop.bit_length() + 1
        delays = self.clock.delays
        return delays.register_ns + 8 * delays.logic_level_ns + bits * delays.carry_ns > self.clock.period_ns

    @property
    def address_register(self) -> bool:
        """Whether the ring's read address is a register: where the read summed from the counters (two adders of
        the address's width) and, on a family whose small rings are LUT RAM read without a register before them
        (the ECP5's, the GW1NR-9's), a LUT level of the read after them are longer than the clock's period. An
        iCE40 ring is a block RAM, whose address is its read's register."""
        if self.clock is None:
            return False
        from ..resources.memories import LUTRAM

        height, width, channels = self.in_shape
        bits = (height * width * channels // max(self.elems, 1)).bit_length() + 1
        delays = self.clock.delays
        read = delays.rom_level_ns if self.clock.family in LUTRAM else 0.0
        return delays.register_ns + 2 * (delays.adder_ns + bits * delays.carry_ns) + read > self.clock.period_ns

    def components(self) -> list:
        from ..rtl.window import SlidingWindow

        return [SlidingWindow(in_shape=self.in_shape, kernel=self.kernel, stride=self.strides,
                              padding=self.padding, dilation=self.dilations, dtype=self.dtype,
                              pad_value=self.pad_value, simd=self.elems, needed_register=self.needed_register,
                              address_register=self.address_register,
                              name=self.name)]


def conv_window(record: dict) -> dict:
    """:func:`sliding_window`'s arguments for the window in front of a convolution or average ``record``."""
    conv = record["conv"]
    return dict(in_shape=conv["in_shape"], out_shape=conv["out_shape"][:-1], kernel=conv["kernel"],
                strides=conv["strides"], pads_begin=conv["pads_begin"], pads_end=conv["pads_end"],
                dilations=conv["dilations"], dtype=record["in_dtype"], pad_value=conv["pad_value"])


def sliding_window(name: str, source: str, in_shape, out_shape, kernel, strides, pads_begin, pads_end, dilations,
                   dtype: DataType, pad_value: int) -> WindowStage:
    """A sliding window in 2-D terms: a 1-D convolution is one row high."""
    if len(kernel) == 1:
        in_shape, out_shape = (1, *in_shape), (1, *out_shape)
        kernel, strides, dilations = (1, *kernel), (1, *strides), (1, *dilations)
        pads_begin, pads_end = (0, *pads_begin), (0, *pads_end)
    if len(kernel) != 2:
        raise LoweringError(f"node {source!r}: {len(kernel)}-D windows are not supported; 1-D and 2-D are")
    return WindowStage(name=name, source=source, in_shape=tuple(in_shape), out_shape=tuple(out_shape[:2]),
                       kernel=tuple(kernel), strides=tuple(strides),
                       padding=(pads_begin[0], pads_begin[1], pads_end[0], pads_end[1]),
                       dilations=tuple(dilations), dtype=dtype, pad_value=pad_value)
