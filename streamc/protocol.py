"""The framing protocol between a host and the board shell (``docs/board_protocol.md``), shared by both ends.

The host sends each frame as :data:`START_BYTE` and the frame's input beats, each beat's bits in whole
bytes, least significant byte first; the board answers each frame with :data:`RESULT_BYTE` and the frame's
output beats, packed the same way. Frame and result sizes are fixed by the compiled model
(:class:`FrameFormat`). The gateware (:mod:`streamc.rtl.shell`) and the host driver (:mod:`streamc.host`)
both import this module, so neither depends on the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import BoardError, ConfigError

__all__ = ["DEFAULT_BAUD", "RESULT_BYTE", "START_BYTE", "FrameFormat"]

START_BYTE = 0xA5
RESULT_BYTE = 0x5A
DEFAULT_BAUD = 115_200


@dataclass(frozen=True)
class FrameFormat:
    """The stream geometry of an accelerator, which fixes the sizes of protocol frames.

    Attributes
    ----------
    in_elems, in_width, in_beats : int
        Elements per input beat, bits per element, beats per frame.
    out_elems, out_width, out_beats : int
        The same for the output.
    """

    in_elems: int
    in_width: int
    in_beats: int
    out_elems: int
    out_width: int
    out_beats: int

    def __post_init__(self):
        for name in ("in_elems", "in_width", "in_beats", "out_elems", "out_width", "out_beats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"frame format: {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_dataflow(cls, dataflow) -> FrameFormat:
        """The format of a folded :class:`~streamc.hw.Dataflow` (after the ``fold`` step)."""
        first, last = dataflow.stages[0], dataflow.stages[-1]
        return cls(in_elems=first.in_elems, in_width=first.in_dtype.bitwidth,
                   in_beats=first.in_count // first.in_elems, out_elems=last.out_elems,
                   out_width=last.out_dtype.bitwidth, out_beats=last.out_count // last.out_elems)

    in_beat_bits = property(lambda self: self.in_elems * self.in_width, doc="Bits of one input beat.")
    out_beat_bits = property(lambda self: self.out_elems * self.out_width, doc="Bits of one output beat.")
    in_beat_bytes = property(lambda self: math.ceil(self.in_beat_bits / 8), doc="Bytes of one input beat.")
    out_beat_bytes = property(lambda self: math.ceil(self.out_beat_bits / 8), doc="Bytes of one output beat.")
    n_in = property(lambda self: self.in_elems * self.in_beats, doc="Input elements per frame.")
    n_out = property(lambda self: self.out_elems * self.out_beats, doc="Output elements per frame.")
    frame_bytes = property(lambda self: 1 + self.in_beats * self.in_beat_bytes,
                           doc="Bytes of one frame on the wire, start byte included.")
    result_bytes = property(lambda self: 1 + self.out_beats * self.out_beat_bytes,
                            doc="Bytes of one result on the wire, result byte included.")

    def encode(self, bits: np.ndarray) -> bytes:
        """Frames of raw input bit patterns ``(N, n_in)`` (``DataType.to_hw``) as protocol bytes."""
        bits = np.asarray(bits)
        if bits.ndim != 2 or bits.shape[1] != self.n_in:
            raise ConfigError(f"frames to encode must have shape (N, {self.n_in}), not {bits.shape}")
        if bits.size and (bits.min() < 0 or int(bits.max()) >> self.in_width):
            raise ConfigError(f"frames to encode must hold {self.in_width}-bit patterns, not values in "
                              f"[{bits.min()}, {bits.max()}]")
        out = bytearray()
        for frame in bits.astype(np.uint64).reshape(len(bits), self.in_beats, self.in_elems).tolist():
            out.append(START_BYTE)
            for beat in frame:
                value = sum(element << (j * self.in_width) for j, element in enumerate(beat))
                out += value.to_bytes(self.in_beat_bytes, "little")
        return bytes(out)

    def decode(self, data: bytes, frames: int) -> np.ndarray:
        """``frames`` results from protocol bytes, as raw output bit patterns ``(frames, n_out)`` (uint64).

        Raises
        ------
        BoardError
            If the byte count is wrong or a result does not start with :data:`RESULT_BYTE`.
        """
        if len(data) != frames * self.result_bytes:
            raise BoardError(f"expected {frames} results of {self.result_bytes} bytes ({frames * self.result_bytes} "
                             f"bytes), got {len(data)} bytes")
        mask = (1 << self.out_width) - 1
        outputs = np.empty((frames, self.out_beats, self.out_elems), dtype=np.uint64)
        for k in range(frames):
            result = data[k * self.result_bytes:(k + 1) * self.result_bytes]
            if result[0] != RESULT_BYTE:
                raise BoardError(f"result {k} starts with byte 0x{result[0]:02x}, not 0x{RESULT_BYTE:02x}: "
                                 "the board and the host disagree on the frame format (was the bitstream "
                                 "built from the same config?)")
            for b in range(self.out_beats):
                start = 1 + b * self.out_beat_bytes
                value = int.from_bytes(result[start:start + self.out_beat_bytes], "little")
                outputs[k, b] = [(value >> (j * self.out_width)) & mask for j in range(self.out_elems)]
        return outputs.reshape(frames, self.n_out)

    def resync_bytes(self) -> bytes:
        """Bytes that bring the board's frame assembler back to idle from any state.

        ``frame_bytes`` zero bytes: idle, the board ignores them; part-way through a frame they
        complete it (the host then discards the one result that comes back).
        """
        return bytes(self.frame_bytes)

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in
                ("in_elems", "in_width", "in_beats", "out_elems", "out_width", "out_beats")}
