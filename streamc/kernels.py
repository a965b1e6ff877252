# amaranth: UnusedElaboratable=no
"""The RTL kernels of a folded design, and what they take of a device.

Each stage gives its Amaranth components (:meth:`~streamc.stages.base.Stage.components`) and :func:`stitch` joins
the stages' kernels into the accelerator, as the rtl step generates it; :func:`kernel_rows` and
:func:`estimate_design` apply :mod:`streamc.resources` to every stage and to the forks, FIFOs and width
converters :func:`stitch` puts on the links between them. The fold step's estimates, ``streamc estimate``
and the planner all price a folding here, from the very kernels the rtl step builds. Most of those are
built only to be priced, never elaborated: the first line of this module, of :mod:`streamc.stages`' kind
modules and of :mod:`streamc.rtl.top` (Amaranth's linter option) keeps Amaranth from warning about them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from types import SimpleNamespace


from .devices import Device
from .fifo_sizing import fifo_depths
from .stages import Stage
from .resources import ChainSpec, ResourceEstimate, Spec, estimate_kernel, spec_of_unit, specs_of_unit


def stitch(stages: list[Stage], kernels_of: list[list], depths: list[list[int]]):
    """The accelerator of ``stages``: each stage's kernels (``kernels_of``) follow each other directly, and
    the stage's links, with the FIFO ``depths`` of its input ports, end at its first kernel."""
    from .rtl.top import StreamAccelerator

    components, sources, component_depths, last_of = [], [], [], {-1: -1}
    for index, (stage, kernels, stage_depths) in enumerate(zip(stages, kernels_of, depths)):
        sources.append([last_of[s] for s in stage.sources])
        component_depths.append(stage_depths)
        sources += [[len(components) + k] for k in range(len(kernels) - 1)]
        component_depths += [[0]] * (len(kernels) - 1)
        components += kernels
        last_of[index] = len(components) - 1
    return StreamAccelerator(stages=components, sources=sources, fifo_depths=component_depths)


@dataclass
class EstimateRow:
    """One kernel of the design: a hardware stage (all the kernels it is built of), or a fork, width
    converter or FIFO on a link, named as the rtl step names its instance (``fifo_stage3_stage5_1``:
    the FIFO in front of input port 1 of kernel 5, fed by kernel 3, kernels numbered as in the Verilog)."""

    name: str
    kind: str
    cycles: int | None
    folding: dict
    resources: dict[str, ResourceEstimate] = field(default_factory=dict)


def stage_spec(stage: Stage) -> Spec:
    """The resource-model spec of a folded stage: of the kernels the rtl step builds for it
    (:meth:`~streamc.stages.base.Stage.components`), a :class:`~streamc.resources.ChainSpec` of several."""
    return stage_spec_and_ports(stage)[0]


Port = tuple[int, int]


def stage_spec_and_ports(stage: Stage) -> tuple[Spec, list[Port], Port]:
    """:func:`stage_spec`, with the (elements per beat, bits per element) of each input port of the stage's
    kernels and of its output, as the rtl step links them (:func:`link_specs`)."""
    return stage_specs(stage)(stage.in_elems)


def stage_specs(stage: Stage) -> Callable[[int], tuple[Spec, list[Port], Port]]:
    """:func:`stage_spec_and_ports` of the stage as folded now, for a count of input elements per beat: its
    kernels are built once and priced for any count their first kernel's spec can be read for
    (:func:`~streamc.resources.specs_of_unit`: an MVAU's SIMD; the planner builds a layer once per PE)."""
    from .rtl.top import input_ports

    kernels = stage.components()
    first, rest = specs_of_unit(kernels[0]), [spec_of_unit(unit) for unit in kernels[1:]]
    widths = [width for _, _, width in input_ports(kernels[0])]
    out = (kernels[-1].out_elems, kernels[-1].out_width)

    def at(in_elems: int) -> tuple[Spec, list[Port], Port]:
        spec, registers = first(in_elems), stage.pipeline_at(in_elems)
        spec = replace(spec, **registers) if registers else spec
        return _joined([spec, *rest]), [(in_elems, width) for width in widths], out
    return at


def link_specs(producer: Port, port: Port, depth: int) -> list[Spec]:
    """The width converter and FIFO :class:`~streamc.rtl.top.StreamAccelerator` puts on a link from an
    output ``producer`` to an input ``port``, with a FIFO of ``depth`` beats (0: none)."""
    from .rtl.top import StreamAccelerator

    (elems, width), (port_elems, _) = producer, port
    return [spec_of_unit(unit) for _, unit in StreamAccelerator.link_parts("link", elems, port_elems, width, depth)]


def fork_spec(producer: Port, readers: int) -> Spec:
    """The fork :class:`~streamc.rtl.top.StreamAccelerator` puts on an output ``producer`` that ``readers``
    (two or more) input ports read."""
    from .rtl.branch import StreamFork

    elems, width = producer
    return spec_of_unit(StreamFork(elem_width=width, elems=elems, outputs=readers))


def _spec_of_kernels(kernels: list) -> Spec:
    return _joined([spec_of_unit(unit) for unit in kernels])


def _joined(specs: list[Spec]) -> Spec:
    return specs[0] if len(specs) == 1 else ChainSpec(kernels=tuple(specs))


#: What a link's kernel shows as its folding.
_LINK_FOLDING = ("depth", "in_elems", "out_elems", "outputs")


def kernel_rows(stages: list[Stage], fifo_depth: int) -> list[tuple[EstimateRow, Spec]]:
    """Every kernel the rtl step generates for a dataflow's ``stages``, in its order, with its spec: per
    stage its kernels, and per link the fork, width converter and FIFO
    :class:`~streamc.rtl.top.StreamAccelerator` puts there, with the depths
    :func:`~streamc.fifo_sizing.fifo_depths` gives for ``fifo_depth``.
    """
    depths = fifo_depths(SimpleNamespace(stages=stages), fifo_depth)
    kernels_of = [stage.components() for stage in stages]
    top = stitch(stages, kernels_of, depths)
    first_of = {id(kernels[0]): index for index, kernels in enumerate(kernels_of)}
    parts = {id(unit) for kernels in kernels_of for unit in kernels}
    rows = []
    for name, unit in top.components:
        if id(unit) in first_of:
            stage = stages[first_of[id(unit)]]
            rows.append((EstimateRow(stage.name, type(stage).__name__, stage.cycles(), stage.folding()),
                         _spec_of_kernels(kernels_of[first_of[id(unit)]])))
        elif id(unit) not in parts:
            spec = spec_of_unit(unit)
            folding = {key: value for key, value in asdict(spec).items() if key in _LINK_FOLDING}
            rows.append((EstimateRow(name, type(unit).__name__, None, folding), spec))
    return rows


def estimate_design(stages: list[Stage], devices: list[Device], fifo_depth: int) -> list[EstimateRow]:
    """Resources of every kernel on every device."""
    rows = kernel_rows(stages, fifo_depth)
    for row, spec in rows:
        for device in devices:
            row.resources[device.name] = estimate_kernel(spec, device.family, dsp=device.dsp > 0)
    return [row for row, _ in rows]
