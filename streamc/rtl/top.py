# amaranth: UnusedElaboratable=no
"""The stitched accelerator: kernels in a dataflow graph, joined by forks, width converters and FIFOs."""

from __future__ import annotations

import gc
from contextlib import contextmanager

from amaranth.back import rtlil, verilog
from amaranth.hdl import Module, Shape, unsigned
from amaranth.hdl import MemoryData
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .branch import StreamFork
from .rom_files import RomFiles
from .stream import StreamFIFO, WidthConverter

__all__ = ["StreamAccelerator", "input_ports", "to_verilog"]

DEFAULT_FIFO_DEPTH = 2
#: ``sources`` entry that stands for the accelerator's input stream.
INPUT = -1


def input_ports(component) -> list[tuple[object, int, int]]:
    """A kernel's input streams with their elements per beat and bits per element, in port order:
    ``a`` and ``b`` for a two-operand kernel, each of ``i`` for an array of inputs, else ``i``."""
    if hasattr(component, "a") and hasattr(component, "b"):
        return [(component.a, component.in_elems, component.a_width),
                (component.b, component.in_elems, component.b_width)]
    if isinstance(component.i, (list, tuple)) or hasattr(component.i, "__getitem__"):
        return [(port, component.in_elems, component.in_width) for port in component.i]
    return [(component.i, component.in_elems, component.in_width)]


class StreamAccelerator(wiring.Component):
    """Stream kernels wired as a dataflow graph behind AXI-Stream style ports.

    Stage ``k`` reads, on its input port ``j``, the output of stage ``sources[k][j]`` (``-1``: the
    accelerator input). On each such link come, in order: a :class:`StreamFork` output where the
    producer feeds several ports (every copy of its stream is taken independently), a
    :class:`WidthConverter` where the producer puts out a different number of elements per beat than
    the port takes, and a :class:`StreamFIFO` of the link's depth at the port's beat width. The element
    widths must match. The last stage's output is the accelerator's output.

    Parameters
    ----------
    stages : list of wiring.Component
        Kernels in topological order. A kernel has an ``o`` output stream and input streams as
        :func:`input_ports` finds them, with the attributes ``in_elems``, ``out_elems``, ``out_width``
        and ``in_width`` (or ``a_width``/``b_width``); a ``name`` attribute, if present, names it in
        errors and in the Verilog hierarchy.
    sources : list of list of int or None
        Per stage, the stage each input port reads. ``None``: a chain, stage ``k`` reads stage ``k - 1``.
    fifo_depths : list or None
        Per stage, per input port, the depth of the FIFO on that link (0: none). For a chain
        (``sources`` None) also a flat list with one depth per link between consecutive stages.
        ``None`` puts a FIFO of depth 2 on every link between stages and none at the input.

    Members
    -------
    s_axis_tdata : In(unsigned(in_elems * in_width))
    s_axis_tvalid : In(1)
    s_axis_tready : Out(1)
        Input beats, packed as the first port reading the input takes them.
    m_axis_tdata : Out(unsigned(out_elems * out_width))
    m_axis_tvalid : Out(1)
    m_axis_tready : In(1)
        Output beats, packed as the last stage puts them out.

    Attributes
    ----------
    in_elems, in_width, out_elems, out_width : int
        Elements per beat and bits per element at the input and the output.
    """

    def __init__(self, *, stages: list, sources: list[list[int]] | None = None, fifo_depths: list | None = None):
        if not stages:
            raise ValueError("an accelerator needs at least one stage, not an empty list")
        chain = sources is None
        if chain:
            sources = [[INPUT]] + [[k] for k in range(len(stages) - 1)]
        if len(sources) != len(stages):
            raise ValueError(f"sources must have one entry per stage ({len(stages)}), not {len(sources)}")
        if fifo_depths is None:
            fifo_depths = [[0 if s == INPUT else DEFAULT_FIFO_DEPTH for s in ports] for ports in sources]
        elif chain and all(isinstance(d, int) for d in fifo_depths):
            if len(fifo_depths) != len(stages) - 1:
                raise ValueError(f"fifo_depths must have one entry per link between stages "
                                 f"({len(stages) - 1}), not {len(fifo_depths)}: {fifo_depths!r}")
            fifo_depths = [[0]] + [[d] for d in fifo_depths]
        if len(fifo_depths) != len(stages) or any(len(d) != len(s) for d, s in zip(fifo_depths, sources)):
            raise ValueError(f"fifo_depths must have one entry per input port of each stage, not {fifo_depths!r}")
        for depth in (d for ports in fifo_depths for d in ports):
            if depth < 0:
                raise ValueError(f"FIFO depths must be 0 (no FIFO) or more, not {depth!r}")

        self._components: list[tuple[str, object]] = []
        self._links: list[tuple[object, object]] = []   # (producer stream or INPUT, consumer stream)
        names = [_stage_name(k, stage) for k, stage in enumerate(stages)]
        ports = [input_ports(stage) for stage in stages]
        readers: dict[int, list[tuple[int, int]]] = {}
        for k, stage_sources in enumerate(sources):
            if len(stage_sources) != len(ports[k]):
                raise ValueError(f"{names[k]} has {len(ports[k])} input ports but sources names "
                                 f"{len(stage_sources)}: {stage_sources!r}")
            for j, source in enumerate(stage_sources):
                if not INPUT <= source < k:
                    raise ValueError(f"{names[k]} reads stage {source}; stages may read earlier stages or "
                                     f"{INPUT} (the input) only")
                readers.setdefault(source, []).append((k, j))
        unread = [names[k] for k in range(len(stages) - 1) if k not in readers]
        if unread:
            raise ValueError(f"{unread[0]} feeds no stage; only the last stage may be the output")

        first_reader, first_port = readers[INPUT][0]
        self.in_elems, self.in_width = ports[first_reader][first_port][1:]
        self._forks: dict[str, StreamFork] = {}
        producers = {INPUT: (INPUT, self.in_elems, self.in_width, "in")}
        for k, stage in enumerate(stages):
            producers[k] = (stage.o, stage.out_elems, stage.out_width, names[k])
        for k, stage in enumerate(stages):
            for j, source in enumerate(sources[k]):
                self._link(producers[source], readers[source], (k, j), ports[k][j], names[k], fifo_depths[k][j])
            self._components.append((names[k], stage))

        last = stages[-1]
        self.out_elems, self.out_width = last.out_elems, last.out_width
        self._last = last
        super().__init__({
            "s_axis_tdata": In(unsigned(self.in_elems * self.in_width)),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "m_axis_tdata": Out(unsigned(self.out_elems * self.out_width)),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
        })

    @property
    def components(self) -> tuple[tuple[str, object], ...]:
        """Every kernel with its instance name, in the Verilog's order: the stages, and the forks, width
        converters and FIFOs on the links into them."""
        return tuple(self._components)

    def _link(self, producer, readers, reader, port, consumer_name: str, depth: int) -> None:
        stream, elems, width, producer_name = producer
        port_stream, port_elems, port_width = port
        if width != port_width:
            raise ValueError(f"{producer_name} puts out {width}-bit elements but {consumer_name} takes "
                             f"{port_width}-bit elements")
        tag = f"{producer_name.split('_')[0]}_{consumer_name.split('_')[0]}" + (f"_{reader[1]}" if reader[1] else "")
        if len(readers) > 1:
            fork = self._fork_of(producer, readers)
            stream = fork.o[readers.index(reader)]
        for name, component in self.link_parts(tag, elems, port_elems, width, depth):
            self._components.append((name, component))
            self._links.append((stream, component.i))
            stream = component.o
        self._links.append((stream, port_stream))

    def _fork_of(self, producer, readers) -> StreamFork:
        stream, elems, width, producer_name = producer
        if producer_name not in self._forks:
            fork = StreamFork(elem_width=width, elems=elems, outputs=len(readers), name=f"fork_{producer_name}")
            self._forks[producer_name] = fork
            self._components.append((f"fork_{producer_name}", fork))
            self._links.append((stream, fork.i))
        return self._forks[producer_name]

    @staticmethod
    def link_parts(tag: str, elems: int, port_elems: int, width: int, depth: int):
        """The ``(name, component)`` pairs that link a producer of ``elems`` elements of ``width`` bits
        per beat to a port taking ``port_elems``, named after ``tag``: a width converter where the two
        differ, then a FIFO of ``depth`` beats unless ``depth`` is 0."""
        if elems != port_elems:
            yield f"convert_{tag}", WidthConverter(elem_width=width, in_elems=elems, out_elems=port_elems)
        # The FIFO sits on the consumer's side of the converter: a consumer that takes its input in
        # bursts (an MVAU's first neuron fold) then finds whole beats waiting, instead of waiting for
        # the converter to gather them at the producer's pace.
        if depth:
            yield f"fifo_{tag}", StreamFIFO(width=port_elems * width, depth=depth)

    def elaborate(self, platform):
        m = Module()
        for name, component in self._components:
            m.submodules[name] = component
        for source, sink in self._links:
            if source is INPUT:
                m.d.comb += [sink.payload.eq(self.s_axis_tdata), sink.valid.eq(self.s_axis_tvalid),
                             self.s_axis_tready.eq(sink.ready)]
            else:
                wiring.connect(m, source, sink)
        m.d.comb += [
            self.m_axis_tdata.eq(self._last.o.payload),
            self.m_axis_tvalid.eq(self._last.o.valid),
            self._last.o.ready.eq(self.m_axis_tready),
        ]
        return m


def _stage_name(index: int, stage) -> str:
    return f"stage{index}_{getattr(stage, 'name', type(stage).__name__)}"


def to_verilog(top: wiring.Component, *, name: str = "streamc_top", roms: RomFiles | None = None) -> str:
    """Verilog of ``top`` as module ``name``: for a :class:`StreamAccelerator`, ports ``clk``,
    ``rst`` and the AXI-Stream six; for one kernel alone, its stream ports.

    With ``roms``, the memories it takes read their contents with ``$readmemh`` from the files it
    then holds (``roms.files``), which must be written beside the Verilog; else every memory's
    contents are inline.

    Source-location attributes are left out so that the text does not depend on where
    streamc is installed.
    """
    # Amaranth's netlist is millions of small objects; the cyclic garbage collector would scan
    # them again and again while they are built (a third of the conversion time of a CNV).
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _memory_contents_as_text(roms), _memory_rows_as_given():
            text = verilog.convert(top, name=name, emit_src=False)
        return text if roms is None else roms.rewrite(text)
    finally:
        if collecting:
            gc.enable()


@contextmanager
def _memory_contents_as_text(roms: RomFiles | None):
    """Has Amaranth write each memory's initial contents into RTLIL as one constant string, or,
    for the memories ``roms`` takes, no contents but a mark where their ``$readmemh`` goes.

    Amaranth 0.5 builds that constant one bit at a time, a netlist object per bit: seconds
    for the weight ROMs of a convolutional network, most of its conversion time. The text
    written here is the same, character for character.
    """
    original = rtlil.ModuleEmitter.emit_memory

    def emit_memory(emitter, cell_idx, cell):
        width, rows = cell.width, cell.init
        if width * len(rows) == 0:
            return original(emitter, cell_idx, cell)
        memid = emitter.memories[cell_idx].memid
        words, bits = cell.depth, ""
        if roms is not None and (mark := roms.take(emitter.builder.name, memid, width, rows)) is not None:
            # An empty initialization rather than none: the cells keep their names and Yosys writes the
            # rest of the Verilog in the same order, which its LUT mapping depends on.
            roms.mark(emitter.builder.contents[memid], mark)
            words = 0
        else:
            mask = (1 << width) - 1
            # RTLIL constants are written most significant bit first: the last row leads.
            bits = "".join(format(row & mask, f"0{width}b") for row in reversed(rows))
        emitter.builder.cell("$meminit_v2", ports={
            "ADDR": emitter.sigspec(),
            "DATA": f"{len(bits)}'{bits}",
            "EN": f"{width}'{'1' * width}",
        }, parameters={
            "MEMID": memid,
            "ABITS": 0,
            "WIDTH": width,
            "WORDS": words,
            "PRIORITY": 0,
        }, src_loc=cell.src_loc)

    rtlil.ModuleEmitter.emit_memory = emit_memory
    try:
        yield
    finally:
        rtlil.ModuleEmitter.emit_memory = original


@contextmanager
def _memory_rows_as_given():
    """Has Amaranth take a memory's initial rows as they are when they are plain integers that
    fit its shape, instead of checking each row as a constant expression (a few microseconds a
    row, seconds for the hundreds of thousands of rows of a folded CNV). Anything else, and every
    error message, still goes through Amaranth's own checks."""
    original = MemoryData.Init.__init__

    def init(self, elems, *, shape, depth):
        if type(shape) is Shape and type(elems) is list and elems and all(type(e) is int for e in elems):
            lo, hi = ((-1 << shape.width - 1, (1 << shape.width - 1) - 1) if shape.signed
                      else (0, (1 << shape.width) - 1))
            if lo <= min(elems) and max(elems) <= hi and isinstance(depth, int) and len(elems) <= depth:
                original(self, [], shape=shape, depth=depth)
                self._elems[:len(elems)] = elems
                return
        original(self, elems, shape=shape, depth=depth)

    MemoryData.Init.__init__ = init
    try:
        yield
    finally:
        MemoryData.Init.__init__ = original
