"""What the board shell costs besides the accelerator: Yosys on the shell alone, fitted per family.

    python benchmarks/calibrate_shell.py [--workdir out/calibrate_shell]

Synthesizes :class:`streamc.rtl.shell.BoardShell` with the accelerator as a black box for a narrow and a
wide frame format on each family, takes away the byte FIFO (priced by its own resource model) and fits
the rest as ``intercept + per_bit * (input beat bits + output beat bits, in whole bytes)``: the UART,
the heartbeat and the frame assembler's and result serializer's beat registers. Prints the
measurements and the coefficients :data:`streamc.boards.SHELL_LOGIC` holds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from streamc.boards import shell_beat_bits, shell_fifo_spec
from streamc.protocol import FrameFormat
from streamc.resources import estimate_kernel, family_of
from streamc.rtl.shell import shell_verilog
from streamc.synth import synthesize

FORMATS = (FrameFormat(in_elems=1, in_width=4, in_beats=64, out_elems=1, out_width=10, out_beats=10),
           FrameFormat(in_elems=49, in_width=1, in_beats=16, out_elems=2, out_width=16, out_beats=5))
BLACK_BOX = ("(* blackbox *) module streamc_top(input clk, input rst, input [{i}:0] s_axis_tdata, input s_axis_tvalid, "
             "output s_axis_tready, output [{o}:0] m_axis_tdata, output m_axis_tvalid, input m_axis_tready); "
             "endmodule\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("out/calibrate_shell"),
                        help="where Yosys runs (not under /tmp: YoWASP cannot see it)")
    args = parser.parse_args()
    for device in ("ice40-up5k", "ecp5-85f", "gowin-gw1nr-9"):
        fifo = estimate_kernel(shell_fifo_spec(), family_of(device))
        points = []
        for fmt in FORMATS:
            work = (args.workdir / f"{device}_{fmt.in_beat_bits}_{fmt.out_beat_bits}").resolve()
            work.mkdir(parents=True, exist_ok=True)
            (work / "shell.v").write_text(shell_verilog(frame_format=fmt, clock_hz=30e6, baud=115200)
                                          + BLACK_BOX.format(i=fmt.in_beat_bits - 1, o=fmt.out_beat_bits - 1))
            result = synthesize(verilog=work / "shell.v", top="streamc_board", device=device, workdir=work)
            bits = shell_beat_bits(fmt)
            points.append((bits, result.lut - fifo.lut, result.ff - fifo.ff))
            print(f"{device}: beats of {bits} bits: LUT {result.lut}, FF {result.ff}, BRAM {result.bram} "
                  f"(byte FIFO estimated LUT {fifo.lut}, FF {fifo.ff}, BRAM {fifo.bram})")
        (b0, l0, f0), (b1, l1, f1) = points
        lut_slope, ff_slope = (l1 - l0) / (b1 - b0), (f1 - f0) / (b1 - b0)
        print(f"{family_of(device)!r}: dict(lut=({l0 - lut_slope * b0:.1f}, {lut_slope:.3f}), "
              f"ff=({f0 - ff_slope * b0:.1f}, {ff_slope:.3f})),")


if __name__ == "__main__":
    main()
