"""Where a kernel's memories and multiplies go: FINN's ``ram_style`` and ``resType`` choices.

``memory_libmap`` maps each memory on its own cost model unless the memory carries a
``rom_style`` attribute: ``"logic"`` keeps it in LUTs, ``"block"`` puts it in block RAM even
where LUTs would be cheaper. ``mul2dsp`` puts every product it can on hard multipliers (an ECP5
spends a whole ``MULT18X18D`` on a 2 x 2-bit product), and no attribute keeps one off them: a
product written as a sum of partial products is not a multiply to Yosys, so it stays in LUTs.
The planner uses both choices to trade LUTs for block RAMs and DSPs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amaranth.hdl import Value

__all__ = ["RAM_STYLES", "RES_TYPES", "check_res_type", "multiply", "rom_attrs"]

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


#: ``"auto"``: Yosys puts the product on hard multipliers where ``mul2dsp`` takes it; ``"lut"``:
#: partial products added in LUTs.
RES_TYPES = ("auto", "lut")


def check_res_type(res_type: str, *, name: str) -> None:
    """Raise ``ValueError`` naming the node unless ``res_type`` is one of :data:`RES_TYPES`."""
    if res_type not in RES_TYPES:
        raise ValueError(f"node {name!r}: res_type={res_type!r} is not a multiplier placement; "
                         f"valid: {', '.join(RES_TYPES)}")


def multiply(a: Value, b: Value, res_type: str, register=None) -> Value:
    """``a * b`` (either may be signed) as ``res_type`` places it; the value is the same either way. With
    ``register`` (a function giving a register that moves with the caller's pipeline) a product in LUTs is two
    stages: its first partial sums (or its one partial product) are registered."""
    from amaranth.hdl import Mux   # here: configs read RAM_STYLES without loading Amaranth

    product = a * b
    if res_type == "auto":
        return product
    if len(b) > len(a):
        a, b = b, a
    # Shift and add over the narrower operand's bits; a signed operand's top bit weighs -2**(n-1).
    partials = [Mux(b[i], a, 0) << i for i in range(len(b))]
    if not partials:
        return 0
    if b.shape().signed:
        partials[-1] = -partials[-1]
    # Summed pairwise: log2(bits) adders deep, where a running sum is one adder per bit (an 8 x 8-bit
    # product in a row of adders was a 38.7 ns path on the iCE40 UP5K, 26 MHz).
    while len(partials) > 1:
        partials = [partials[k] + partials[k + 1] if k + 1 < len(partials) else partials[k]
                    for k in range(0, len(partials), 2)]
        if register is not None:
            partials, register = [register(partial) for partial in partials], None
    if register is not None:
        partials = [register(partials[0])]
    # Pairwise sums carry spare top bits; the product's own shape holds every value exactly.
    shape = product.shape()
    exact = partials[0][:shape.width]
    return exact.as_signed() if shape.signed else exact
