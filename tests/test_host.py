"""The host driver: the framing protocol byte for byte, the driver against a board model in Python (directly
and over a pseudo-terminal with pyserial), and ``run_frames`` with the Verilator board on the digits demo."""

import os
import pty
import threading
import tty
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from streamc.datatypes import INT, UINT
from streamc.errors import BoardError, ConfigError
from streamc.execute import execute
from streamc.frontend.load import load_onnx
from streamc.host import Board, SerialTransport, compile_design, run_frames
from streamc.protocol import RESULT_BYTE, START_BYTE, FrameFormat

DIGITS = Path(__file__).parent.parent / "build_configs" / "models"
SMALL = FrameFormat(in_elems=3, in_width=4, in_beats=2, out_elems=1, out_width=10, out_beats=2)


def test_sizes_follow_the_stream_geometry():
    assert (SMALL.in_beat_bytes, SMALL.frame_bytes, SMALL.out_beat_bytes, SMALL.result_bytes) == (2, 5, 2, 5)
    assert (SMALL.n_in, SMALL.n_out) == (6, 2)


def test_a_frame_is_the_start_byte_and_each_beat_least_significant_byte_first():
    # Beat 0 holds elements 1, 2, 3 at bits 0, 4, 8: 0x321; beat 1 holds 0xF, 0x0, 0xA: 0xA0F.
    assert SMALL.encode(np.array([[1, 2, 3, 15, 0, 10]])) == bytes([START_BYTE, 0x21, 0x03, 0x0F, 0x0A])


def test_a_result_is_the_result_byte_and_each_beat_least_significant_byte_first():
    data = bytes([RESULT_BYTE, 0xFF, 0x03, 0x02, 0x00, RESULT_BYTE, 0x00, 0x02, 0x01, 0x00])
    assert SMALL.decode(data, 2).tolist() == [[0x3FF, 0x002], [0x200, 0x001]]


def test_decode_names_what_is_wrong():
    with pytest.raises(BoardError, match=r"^expected 2 results of 5 bytes \(10 bytes\), got 9 bytes$"):
        SMALL.decode(bytes(9), 2)
    with pytest.raises(BoardError, match=r"^result 1 starts with byte 0xa5, not 0x5a: the board and the host "
                                         r"disagree on the frame format \(was the bitstream built from the same "
                                         r"config\?\)$"):
        SMALL.decode(bytes([RESULT_BYTE, 0, 0, 0, 0, START_BYTE, 0, 0, 0, 0]), 2)


def test_encode_refuses_values_that_do_not_fit():
    with pytest.raises(ConfigError, match=r"^frames to encode must have shape \(N, 6\), not \(1, 5\)$"):
        SMALL.encode(np.zeros((1, 5), dtype=np.uint64))
    with pytest.raises(ConfigError, match=r"^frames to encode must hold 4-bit patterns, not values in \[0, 16\]$"):
        SMALL.encode(np.array([[0, 0, 0, 0, 0, 16]]))


def test_a_format_needs_positive_sizes():
    with pytest.raises(ConfigError, match=r"^frame format: out_beats must be a positive integer, not 0$"):
        FrameFormat(in_elems=1, in_width=1, in_beats=1, out_elems=1, out_width=1, out_beats=0)


class BoardModel:
    """The board's side of the protocol in Python: drops bytes until a start byte, takes a frame, answers it.

    ``compute`` maps one frame's input bit patterns to its output bit patterns.
    """

    def __init__(self, fmt: FrameFormat, compute):
        self._fmt, self._compute = fmt, compute
        self._frame: bytearray | None = None
        self.unanswered = 0

    def feed(self, data: bytes) -> bytes:
        fmt, reply = self._fmt, bytearray()
        for byte in data:
            if self._frame is None:
                if byte == START_BYTE:
                    self._frame = bytearray()
                continue
            self._frame.append(byte)
            if len(self._frame) == fmt.frame_bytes - 1:
                beats = [int.from_bytes(self._frame[k:k + fmt.in_beat_bytes], "little")
                         for k in range(0, len(self._frame), fmt.in_beat_bytes)]
                bits = [(beat >> (j * fmt.in_width)) & ((1 << fmt.in_width) - 1)
                        for beat in beats for j in range(fmt.in_elems)]
                out = self._compute(np.array(bits, dtype=np.uint64))
                reply.append(RESULT_BYTE)
                for beat_values in np.reshape(out, (fmt.out_beats, fmt.out_elems)).tolist():
                    beat = sum(int(v) << (j * fmt.out_width) for j, v in enumerate(beat_values))
                    reply += beat.to_bytes(fmt.out_beat_bytes, "little")
                self._frame = None
                self.unanswered += 1
        return bytes(reply)


class ModelTransport:
    """A transport to a :class:`BoardModel`, recording how many frames were sent before each read."""

    def __init__(self, board: BoardModel):
        self._board, self._replies = board, bytearray()
        self.frames_before_read: list[int] = []

    def write(self, data: bytes) -> None:
        self._replies += self._board.feed(data)

    def read(self, size: int) -> bytes:
        self.frames_before_read.append(self._board.unanswered)
        self._board.unanswered = 0
        data, self._replies = bytes(self._replies[:size]), self._replies[size:]
        return data

    def close(self) -> None:
        pass


def stage(**attributes):
    return SimpleNamespace(**attributes)


def test_results_longer_than_frames_go_one_frame_at_a_time():
    # One 8-bit input element per frame; four signed 10-bit outputs (x, -x, 2x, x - 100).
    dataflow = SimpleNamespace(stages=[
        stage(in_elems=1, in_dtype=UINT(8), in_count=1),
        stage(out_elems=2, out_dtype=INT(10), out_count=4)])
    out_dtype = INT(10)
    board_model = BoardModel(FrameFormat.from_dataflow(dataflow),
                             lambda bits: out_dtype.to_hw(np.array([1, -1, 2, 1]) * bits[0] - [0, 0, 0, 100]))
    transport = ModelTransport(board_model)
    board = Board(dataflow=dataflow, transport=transport)
    assert board.frames_in_flight == 1
    codes = np.array([[0], [7], [255]])
    hw = board.run_codes(codes)
    assert hw.tolist() == [[0, 0, 0, -100], [7, -7, 14, -93], [255, -255, 510, 155]]
    assert transport.frames_before_read == [1, 1, 1]


def test_codes_outside_the_input_type_are_refused():
    dataflow = SimpleNamespace(stages=[stage(in_elems=1, in_dtype=UINT(2), in_count=1),
                                       stage(out_elems=1, out_dtype=UINT(2), out_count=1)])
    board = Board(dataflow=dataflow, transport=ModelTransport(BoardModel(FrameFormat.from_dataflow(dataflow), None)))
    with pytest.raises(ConfigError, match=r"^input codes must be UINT2 values in \[0, 3\], not values in \[0, 4\]$"):
        board.run_codes(np.array([[0], [4]]))


@pytest.fixture(scope="module")
def digits_design(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    config = folder / "digits.yaml"
    config.write_text(yaml.safe_dump({"model": str(DIGITS / "digits_mlp.onnx"), "output_dir": str(folder / "out"),
                                      "clock_mhz": 30, "target_fps": 50_000}))
    dataflow, _ = compile_design(config, folder / "design")
    return config, dataflow


def digits_reference(frames: np.ndarray) -> np.ndarray:
    model = load_onnx(DIGITS / "digits_mlp.onnx")
    return execute(model, {model.inputs[0].name: frames})[model.outputs[0].name]


def emulated_board(dataflow) -> BoardModel:
    """A board model that computes what the hardware computes, with the dataflow's integer emulation."""
    first, last = dataflow.stages[0], dataflow.stages[-1]

    def compute(bits):
        values = {-1: first.in_dtype.from_hw(bits)[None]}
        for index, stage_ in enumerate(dataflow.stages):
            values[index] = stage_.emulate(*[values[source] for source in stage_.sources])
        return last.out_dtype.to_hw(values[len(dataflow.stages) - 1][0])

    return BoardModel(FrameFormat.from_dataflow(dataflow), compute)


def test_the_driver_applies_head_and_tail_on_the_host(digits_design):
    _, dataflow = digits_design
    frames = np.load(DIGITS / "digits_frames.npy")[:40]
    transport = ModelTransport(emulated_board(dataflow))
    board = Board(dataflow=dataflow, transport=transport)
    assert board.frames_in_flight is None
    outputs = board.run(frames)
    assert transport.frames_before_read == [40]
    assert np.allclose(outputs, digits_reference(frames), rtol=1e-5, atol=1e-5)


def test_serial_transport_talks_to_a_board_on_a_pseudo_terminal(digits_design):
    pytest.importorskip("serial", reason="pyserial is the serial port's optional dependency")
    _, dataflow = digits_design
    board_model = emulated_board(dataflow)
    controller, device = pty.openpty()
    tty.setraw(controller)

    def serve():
        while True:
            try:
                data = os.read(controller, 4096)
            except OSError:
                return  # the device side was closed
            if not data:
                return
            os.write(controller, board_model.feed(data))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    transport = SerialTransport(port=os.ttyname(device), timeout_s=5.0)
    try:
        frames = np.load(DIGITS / "digits_frames.npy")[:10]
        outputs = Board(dataflow=dataflow, transport=transport).run(frames)
    finally:
        transport.close()
        os.close(device)
        # The server must be gone before the controller's descriptor is closed: a number closed under its
        # read is the next file opened (the model, which it then read from under load_onnx).
        server.join(timeout=10)
        os.close(controller)
    assert not server.is_alive()
    assert np.allclose(outputs, digits_reference(frames), rtol=1e-5, atol=1e-5)


def test_a_missing_serial_port_is_named():
    pytest.importorskip("serial", reason="pyserial is the serial port's optional dependency")
    with pytest.raises(BoardError, match=r"^cannot open serial port '/nonexistent/ttyUSB9': "):
        SerialTransport(port="/nonexistent/ttyUSB9")


def test_run_frames_needs_a_port_or_sim(digits_design, tmp_path):
    config, _ = digits_design
    with pytest.raises(ConfigError, match=r"^give either a serial port \(--port\) or --sim, not both or neither$"):
        run_frames(config, DIGITS / "digits_frames.npy", work_dir=tmp_path)


def test_frames_of_the_wrong_size_are_refused(digits_design, tmp_path):
    config, _ = digits_design
    np.save(tmp_path / "frames.npy", np.zeros((3, 65), dtype=np.float32))
    with pytest.raises(ConfigError, match=r"^'.*frames\.npy' holds an array of shape \(3, 65\); the model input "
                                          r"'global_in' takes frames of shape \(64,\): give an array of "
                                          r"shape \(N, 64\)$"):
        run_frames(config, tmp_path / "frames.npy", sim=True, work_dir=tmp_path / "work")


def test_frames_holding_nan_are_refused_by_name(digits_design, tmp_path):
    config, _ = digits_design
    frames = np.zeros((3, 64), dtype=np.float32)
    frames[1, 7] = np.nan
    np.save(tmp_path / "frames.npy", frames)
    with pytest.raises(ConfigError, match=r"^frames: frame 1 of '.*frames\.npy' holds NaN; frames must be finite$"):
        run_frames(config, tmp_path / "frames.npy", sim=True, work_dir=tmp_path / "work")

def test_run_frames_in_simulation_classifies_digits(digits_design, tmp_path):
    config, _ = digits_design
    frames = np.load(DIGITS / "digits_frames.npy")[:5]
    np.save(tmp_path / "frames.npy", frames)
    outputs, board = run_frames(config, tmp_path / "frames.npy", sim=True, work_dir=tmp_path / "work")
    assert np.allclose(outputs, digits_reference(frames), rtol=1e-5, atol=1e-5)
    assert board.transport.runs[0].sent == 5 * board.frame_format.frame_bytes
