"""Stream beats: elements of ``width`` bits side by side, element ``j`` at bits ``[j*width, (j+1)*width)``.

A beat is held as little-endian 32-bit words (what the simulation files carry, and how Verilator
stores a port wider than 64 bits) or as one Python integer (what a cocotb handle takes).
"""

import numpy as np


def words_per_beat(elems: int, width: int) -> int:
    return -(-elems * width // 32)


def pack_words(elements: np.ndarray, elems: int, width: int) -> np.ndarray:
    """Raw element bit patterns, in stream order, as beats: uint32, shape ``(beats, words_per_beat)``."""
    beats = np.asarray(elements, dtype=np.uint64).reshape(-1, elems)
    bits = ((beats[..., None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    padded = np.zeros((len(beats), 32 * words_per_beat(elems, width)), dtype=np.uint8)
    padded[:, : elems * width] = bits.reshape(len(beats), -1)
    return np.packbits(padded, axis=1, bitorder="little").view("<u4")


def unpack_words(words: np.ndarray, elems: int, width: int) -> np.ndarray:
    """Beats as words (shape ``(beats, words_per_beat)``) back to a flat uint64 array of elements, in stream order."""
    words = np.ascontiguousarray(words, dtype="<u4").reshape(-1, words_per_beat(elems, width))
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, : elems * width]
    weights = np.uint64(1) << np.arange(width, dtype=np.uint64)
    return (bits.reshape(len(words), elems, width).astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64).reshape(-1)


def pack_beats(elements: np.ndarray, elems: int, width: int) -> list[int]:
    """Raw element bit patterns, in stream order, as one integer per beat."""
    return words_to_beats(pack_words(elements, elems, width))


def unpack_beats(beats: list[int], elems: int, width: int) -> np.ndarray:
    """One integer per beat back to a flat uint64 array of elements, in stream order."""
    return unpack_words(beats_to_words(beats, words_per_beat(elems, width)), elems, width)


def words_to_beats(words: np.ndarray) -> list[int]:
    """Beats as words (shape ``(beats, words)``) to one integer per beat."""
    return [int.from_bytes(beat.tobytes(), "little") for beat in np.asarray(words, dtype="<u4")]


def beats_to_words(beats: list[int], words: int) -> np.ndarray:
    """One integer per beat to uint32 words, shape ``(beats, words)``."""
    data = b"".join(int(beat).to_bytes(4 * words, "little") for beat in beats)
    return np.frombuffer(data, dtype="<u4").reshape(len(beats), words)
