"""PLLs that make the design clock from a board oscillator: iCE40 ``SB_PLL40_PAD``, ECP5 ``EHXPLLL``, Gowin
``rPLL``.

The divider searches follow Project IceStorm's ``icepll`` (simple feedback), Project Trellis' ``ecppll`` and
Project Apicula's ``gowin_pll``: every legal divider setting is tried and the one closest to the requested
frequency wins. ``tests/test_pnr.py`` checks them against ``yowasp-icepll`` and ``yowasp-ecppll``,
``tests/test_gowin.py`` against ``gowin_pll`` (apycula).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib.cdc import AsyncFFSynchronizer

from ..errors import ConfigError

__all__ = ["ICE40PLLSettings", "ECP5PLLSettings", "GowinPLLSettings", "ice40_pll_settings", "ecp5_pll_settings",
           "gowin_pll_settings", "PLL"]

# iCE40 sysCLOCK PLL limits (iCE40 sysCLOCK PLL Design and Usage Guide, FPGA-TN-02052; as in icepll).
_ICE40_PFD_MHZ = (10.0, 133.0)
_ICE40_VCO_MHZ = (533.0, 1066.0)
_ICE40_OUT_MHZ = (16.0, 275.0)
# ECP5 EHXPLLL limits (ECP5 and ECP5-5G sysCLOCK PLL/DLL Design and Usage Guide, FPGA-TN-02200; as in ecppll,
# which allows outputs from 10 MHz where the data sheet says 3.125).
_ECP5_PFD_MHZ = (3.125, 400.0)
_ECP5_VCO_MHZ = (400.0, 800.0)
_ECP5_OUT_MHZ = (10.0, 400.0)
# Gowin rPLL limits per chip (phase detector, VCO, output), as apycula's gowin_pll has them from the data sheets
# (GW1NR-9 C6/I5: DS117E; GW2A-18 C8/I7: DS102E); the VCO and output must lie strictly inside theirs.
_GOWIN_LIMITS_MHZ = {"GW1N-9C": ((3.0, 400.0), (400.0, 1200.0), (3.125, 600.0)),
                     "GW2A-18C": ((3.0, 500.0), (500.0, 1250.0), (3.90625, 625.0))}
_GOWIN_ODIV = (2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128)


@dataclass(frozen=True)
class ICE40PLLSettings:
    """``SB_PLL40_PAD`` dividers: f_out = f_in * (divf + 1) / ((divr + 1) * 2**divq)."""

    input_mhz: float
    requested_mhz: float
    achieved_mhz: float
    divr: int
    divf: int
    divq: int
    filter_range: int


@dataclass(frozen=True)
class ECP5PLLSettings:
    """``EHXPLLL`` dividers with CLKOP feedback: f_out = f_in * clkfb_div / clki_div."""

    input_mhz: float
    requested_mhz: float
    achieved_mhz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int
    vco_mhz: float


@dataclass(frozen=True)
class GowinPLLSettings:
    """``rPLL`` dividers: f_out = f_in * (fbdiv_sel + 1) / (idiv_sel + 1), VCO = f_out * odiv_sel."""

    input_mhz: float
    requested_mhz: float
    achieved_mhz: float
    idiv_sel: int
    fbdiv_sel: int
    odiv_sel: int
    vco_mhz: float


def _check_request(family: str, requested_mhz: float, limits: tuple[float, float]) -> None:
    low, high = limits
    if not low <= requested_mhz <= high:
        raise ConfigError(f"clock_mhz must be between {low:g} and {high:g} for the {family} PLL, "
                          f"not {requested_mhz!r}")


def ice40_pll_settings(*, input_mhz: float, requested_mhz: float) -> ICE40PLLSettings:
    """The ``SB_PLL40_PAD`` dividers whose output is closest to ``requested_mhz``.

    Raises
    ------
    ConfigError
        If ``requested_mhz`` is outside the PLL's output range (16 to 275 MHz).
    """
    _check_request("iCE40", requested_mhz, _ICE40_OUT_MHZ)
    best = None
    for divr in range(16):
        pfd = input_mhz / (divr + 1)
        if not _ICE40_PFD_MHZ[0] <= pfd <= _ICE40_PFD_MHZ[1]:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not _ICE40_VCO_MHZ[0] <= vco <= _ICE40_VCO_MHZ[1]:
                continue
            for divq in range(1, 7):
                out = vco / 2 ** divq
                if best is None or abs(out - requested_mhz) < abs(best[0] - requested_mhz):
                    best = (out, divr, divf, divq, pfd)
    out, divr, divf, divq, pfd = best
    # The loop filter's range follows the phase detector's frequency (icepll's table).
    filter_range = next(r for r, top in enumerate((17, 26, 44, 66, 101, float("inf")), 1) if pfd < top)
    return ICE40PLLSettings(input_mhz=input_mhz, requested_mhz=requested_mhz, achieved_mhz=out, divr=divr,
                            divf=divf, divq=divq, filter_range=filter_range)


def ecp5_pll_settings(*, input_mhz: float, requested_mhz: float) -> ECP5PLLSettings:
    """The ``EHXPLLL`` dividers whose output is closest to ``requested_mhz`` (ties: VCO nearest 600 MHz).

    Raises
    ------
    ConfigError
        If ``requested_mhz`` is outside the PLL's output range (10 to 400 MHz).
    """
    _check_request("ECP5", requested_mhz, _ECP5_OUT_MHZ)
    best = None
    for clki_div in range(1, 129):
        pfd = input_mhz / clki_div
        if not _ECP5_PFD_MHZ[0] <= pfd <= _ECP5_PFD_MHZ[1]:
            continue
        for clkfb_div in range(1, 81):
            out = pfd * clkfb_div
            for clkop_div in range(1, 129):
                vco = out * clkop_div
                if not _ECP5_VCO_MHZ[0] <= vco <= _ECP5_VCO_MHZ[1]:
                    continue
                key = (abs(out - requested_mhz), abs(vco - 600))
                if best is None or key < best[0]:
                    best = (key, out, clki_div, clkfb_div, clkop_div, vco)
    _, out, clki_div, clkfb_div, clkop_div, vco = best
    return ECP5PLLSettings(input_mhz=input_mhz, requested_mhz=requested_mhz, achieved_mhz=out, clki_div=clki_div,
                           clkfb_div=clkfb_div, clkop_div=clkop_div, vco_mhz=vco)


def gowin_pll_settings(*, chip: str, input_mhz: float, requested_mhz: float) -> GowinPLLSettings:
    """The ``rPLL`` dividers of ``chip`` (nextpnr's chip database: ``"GW1N-9C"``, ``"GW2A-18C"``) whose output is
    closest to ``requested_mhz`` (ties: the first in gowin_pll's order).

    Raises
    ------
    ConfigError
        If ``requested_mhz`` is outside the PLL's output range (GW1N-9C: 3.125 to 600 MHz).
    """
    pfd_limits, vco_limits, out_limits = _GOWIN_LIMITS_MHZ[chip]
    _check_request(f"Gowin {chip}", requested_mhz, out_limits)
    best = None
    for idiv_sel in range(64):
        pfd = input_mhz / (idiv_sel + 1)
        if not pfd_limits[0] <= pfd <= pfd_limits[1]:
            continue
        for fbdiv_sel in range(64):
            out = input_mhz * (fbdiv_sel + 1) / (idiv_sel + 1)
            if not out_limits[0] < out < out_limits[1]:
                continue
            for odiv_sel in _GOWIN_ODIV:
                vco = out * odiv_sel
                if vco_limits[0] < vco < vco_limits[1] and (best is None or abs(out - requested_mhz) < best[0]):
                    best = (abs(out - requested_mhz), out, idiv_sel, fbdiv_sel, odiv_sel, vco)
    _, out, idiv_sel, fbdiv_sel, odiv_sel, vco = best
    return GowinPLLSettings(input_mhz=input_mhz, requested_mhz=requested_mhz, achieved_mhz=out, idiv_sel=idiv_sel,
                            fbdiv_sel=fbdiv_sel, odiv_sel=odiv_sel, vco_mhz=vco)


class PLL(Elaboratable):
    """Clocks the ``sync`` domain (which its parent defines) from a PLL fed by the oscillator pad; reset is
    held until the PLL locks.

    Parameters
    ----------
    settings : ICE40PLLSettings, ECP5PLLSettings or GowinPLLSettings
        The dividers (from :func:`ice40_pll_settings`, :func:`ecp5_pll_settings` or :func:`gowin_pll_settings`).
    pad : Signal
        The oscillator's input port. On iCE40 it must be a top-level port on a PLL-capable pin:
        ``SB_PLL40_PAD`` takes the pad itself.

    Attributes
    ----------
    locked : Signal
        High once the PLL has locked.
    """

    def __init__(self, *, settings: ICE40PLLSettings | ECP5PLLSettings | GowinPLLSettings, pad: Signal):
        self._settings = settings
        self._pad = pad
        self.locked = Signal()

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.pll = self._instance(ClockSignal("sync"))
        # Reset is released synchronously to the new clock, a few cycles after lock.
        released = Signal(init=1)
        m.submodules.reset_sync = AsyncFFSynchronizer(~self.locked, released, o_domain="sync")
        if isinstance(self._settings, ECP5PLLSettings):
            # On the ECP5 the reset's route across the device in the fabric was the worst path at 150 MHz (TFC-w1a1
            # on half the 85F: 6.1 ns from the synchronizer). Through a DCCA it takes a global network, which nextpnr
            # routes to the registers' LSR inputs.
            m.submodules.reset_buffer = Instance("DCCA", i_CLKI=released, i_CE=1, o_CLKO=ResetSignal("sync"))
        else:
            m.d.comb += ResetSignal("sync").eq(released)
        return m

    def _instance(self, clock: ClockSignal) -> Instance:
        s = self._settings
        if isinstance(s, ICE40PLLSettings):
            return Instance("SB_PLL40_PAD", p_FEEDBACK_PATH="SIMPLE", p_DIVR=s.divr, p_DIVF=s.divf, p_DIVQ=s.divq,
                            p_FILTER_RANGE=s.filter_range, i_PACKAGEPIN=self._pad, i_RESETB=1, i_BYPASS=0,
                            o_PLLOUTGLOBAL=clock, o_LOCK=self.locked)
        if isinstance(s, GowinPLLSettings):
            # Internal feedback; the dynamic divider and phase inputs tied off, as gowin_pll writes them.
            return Instance("rPLL", p_FCLKIN=f"{s.input_mhz:g}", p_IDIV_SEL=s.idiv_sel, p_FBDIV_SEL=s.fbdiv_sel,
                            p_ODIV_SEL=s.odiv_sel, i_CLKIN=self._pad, i_CLKFB=0, i_RESET=0, i_RESET_P=0, i_FBDSEL=0,
                            i_IDSEL=0, i_ODSEL=0, i_PSDA=0, i_DUTYDA=0, i_FDLY=0, o_CLKOUT=clock, o_LOCK=self.locked)
        # CPHASE = CLKOP_DIV - 1 is the zero-phase setting of Lattice's tools; the phase to the
        # oscillator does not matter here, only the frequency.
        return Instance("EHXPLLL", a_FREQUENCY_PIN_CLKI=f"{s.input_mhz:g}", a_FREQUENCY_PIN_CLKOP=f"{s.achieved_mhz:g}",
                        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
                        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
                        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKI_DIV=s.clki_div,
                        p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=s.clkop_div, p_CLKOP_CPHASE=s.clkop_div - 1,
                        p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=s.clkfb_div,
                        i_RST=0, i_STDBY=0, i_CLKI=self._pad, i_CLKFB=clock, i_PHASESEL0=0, i_PHASESEL1=0,
                        i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
                        o_CLKOP=clock, o_LOCK=self.locked)
