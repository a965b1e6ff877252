"""The sweep's Pareto chart: frames/s against LUTs of every passed point, coloured by fmax (or by the clock
asked, where no point was placed and routed), the Pareto front drawn through the points no other point
beats on both. Needs matplotlib (``pip install "streamc[charts]"``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .point import PASSED

#: Where a row's LUTs come from, as the legend says it.
SOURCES = {"estimate": "estimated", "yosys": "from Yosys"}


def pareto_front(rows: list[dict]) -> list[dict]:
    """The rows no other row beats: none has at least as many frames/s with fewer LUTs, or more frames/s with
    as few. In order of LUTs."""
    front = []
    for row in sorted(rows, key=lambda row: (row["lut"], -row["frames_per_second"])):
        if not front or row["frames_per_second"] > front[-1]["frames_per_second"]:
            front.append(row)
    return front


def pareto_chart(rows: list[dict], path: Path, *, title: str, best: dict | None) -> Path | None:
    """Draw the chart of ``rows`` into ``path`` (PNG); None, and no file, when no point passed with figures.

    Raises
    ------
    ConfigError
        If matplotlib is not installed.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ConfigError('the sweep chart needs matplotlib; install it with: pip install "streamc[charts]"') from None
    drawn = [row for row in rows if row["status"] == PASSED and row["lut"] and row["frames_per_second"]]
    if not drawn:
        return None
    placed = all(row["fmax_mhz"] is not None for row in drawn)
    colour = [row["fmax_mhz"] if placed else row["clock_mhz"] for row in drawn]
    colour_label = "fmax (MHz, nextpnr)" if placed else "clock_mhz asked (MHz; not placed and routed)"

    figure = Figure(figsize=(9, 6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    devices = sorted({row["device"] for row in drawn})
    markers = dict(zip(devices, "osD^v<>p"))
    low, high = min(colour), max(colour)
    for device in devices:
        own = [n for n, row in enumerate(drawn) if row["device"] == device]
        dots = axes.scatter([drawn[n]["lut"] for n in own], [drawn[n]["frames_per_second"] for n in own],
                            c=[colour[n] for n in own], vmin=low, vmax=high if high > low else low + 1,
                            cmap="viridis", marker=markers[device], s=70, edgecolors="black", linewidths=0.5,
                            label=f"{device} (LUTs {SOURCES[drawn[own[0]]['resources_from']]})", zorder=3)
    figure.colorbar(dots, ax=axes, label=colour_label)
    front = pareto_front(drawn)
    axes.step([row["lut"] for row in front], [row["frames_per_second"] for row in front], where="post",
              color="tab:red", linewidth=1.2, label="Pareto front", zorder=2)
    if best is not None:
        axes.scatter([best["lut"]], [best["frames_per_second"]], s=260, facecolors="none", edgecolors="tab:red",
                     linewidths=1.8, label=f"best: {best['point']}", zorder=4)
    # Neighbours in LUTs take turns above and below their dot, so that close points' labels do not overlap.
    for turn, row in enumerate(sorted(drawn, key=lambda row: (row["lut"], row["frames_per_second"]))):
        fmax = f", fmax {row['fmax_mhz']:.1f} MHz" if row["fmax_mhz"] is not None else ""
        axes.annotate(f"{row['point']}\n{row['frames_per_second']:,.0f} frames/s, {row['lut']:,} LUT{fmax}",
                      (row["lut"], row["frames_per_second"]), textcoords="offset points",
                      xytext=(7, 5 if turn % 2 else -22), fontsize=7)
    fps = [row["frames_per_second"] for row in drawn]
    if max(fps) > 20 * min(fps):
        axes.set_yscale("log")
    thousands = FuncFormatter(lambda value, _: f"{value:,.0f}")
    axes.xaxis.set_major_formatter(thousands)
    axes.yaxis.set_major_formatter(thousands)
    axes.set_xlabel("LUTs (of the first device each point names)")
    axes.set_ylabel("frames/s at clock_mhz")
    failed = sum(row["status"] != PASSED for row in rows)
    axes.set_title(f"streamc sweep {title}: frames/s against LUTs, {len(drawn)} passed points"
                   + (f" ({failed} failed, not drawn)" if failed else ""))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    axes.margins(x=0.25, y=0.15)
    figure.savefig(path, dpi=120)
    return path
