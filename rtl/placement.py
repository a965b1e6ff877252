"""Where a kernel's read-only memories go: FINN's ``ram_style`` names, passed to Yosys as attributes.

``memory_libmap`` maps each memory on its own cost model unless the memory carries a
``rom_style`` attribute: ``"logic"`` keeps it in LUTs, ``"block"`` puts it in block RAM even
where LUTs would be cheaper. The planner uses the choice to trade LUTs for block RAMs.
"""

from __future__ import annotations

__all__ = ["RAM_STYLES", "rom_attrs"]

#: ``"auto"``: Yosys decides; ``"distributed"``: LUTs (an iCE40 has no LUT RAM; a ROM becomes
#: logic on both families); ``"block"``: block RAM (``SB_RAM40_4K``, ``DP16KD``).
RAM_STYLES = ("auto", "distributed", "block")
_ATTRIBUTE = {"auto": {}, "distributed": {"rom_style": "logic"}, "block": {"rom_style": "block"}}


def rom_attrs(style: str, *, name: str, what: str) -> dict[str, str]:
    """The memory attributes that place a ROM as ``style`` says.

    Raises
    ------
    ValueError
        If ``style`` is not one of :data:`RAM_STYLES`; the message names the node and the memory.
    """
    if style not in _ATTRIBUTE:
        raise ValueError(f"node {name!r}: {what}={style!r} is not a memory placement; "
                         f"valid: {', '.join(RAM_STYLES)}")
    return dict(_ATTRIBUTE[style])
