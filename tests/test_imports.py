"""The shape of streamc's import graph: no cycles, the hardware library below the compiler, no private reads.

Every module under streamc/, rtl/ (``streamc.rtl``) and sim/ (``streamc.sim``) is parsed, not imported:
imports at module level and inside functions count alike, since a function-level import hides a cycle
without removing it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
#: Package name of each source folder (pyproject's package-dir).
FOLDERS = {"streamc": ROOT / "streamc"}
#: What the hardware library and its simulation must not import: the compiler above them and its drivers.
ABOVE_HARDWARE = ("streamc.pipeline", "streamc.host", "streamc.cli", "streamc.planner", "streamc.estimate",
                  "streamc.pnr")


@cache
def modules() -> dict[str, Path]:
    """Every module's dotted name and file; a package by its ``__init__.py``."""
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _known(name: str) -> str | None:
    """``name`` if it is one of the modules, else its nearest enclosing module that is (None: not streamc)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports(name: str) -> tuple[tuple[str, str | None, str, int], ...]:
    """``(module, imported name or None, local name, line)`` for every import in module ``name``, relative
    ones resolved.

    ``from m import x`` gives ``(m.x, None, "x")`` when ``m.x`` is a module, else ``(m, "x", "x")``;
    ``import a.b`` gives ``("a.b", None, "a.b")`` (``as y``: local name ``y``).
    """
    tree = ast.parse(modules()[name].read_text(), filename=str(modules()[name]))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, alias.asname or alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{base}.{alias.name}" in modules():
                    found.append((f"{base}.{alias.name}", None, local, node.lineno))
                else:
                    found.append((base, alias.name, local, node.lineno))
    return tuple(found)


def graph() -> dict[str, set[str]]:
    """Module → the streamc modules it imports (a package by its ``__init__``)."""
    edges = {}
    for name in modules():
        edges[name] = {target for imported, *_ in imports(name)
                       if (target := _known(imported)) is not None and target != name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``edges`` as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}          # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_hardware_library_and_its_simulation_import_nothing_of_the_compiler_above_them():
    wrong = sorted({f"{name} imports {imported} (line {line})"
                    for name in modules() if name.startswith(("streamc.rtl", "streamc.sim"))
                    for imported, _, _, line in imports(name)
                    if any(imported == above or imported.startswith(above + ".") for above in ABOVE_HARDWARE)})
    assert not wrong, "\n".join(wrong)


def private_reads() -> list[str]:
    """``from m import _x``, ``m._x`` where ``m`` names another streamc module, and ``X._x`` where ``X`` was
    imported from one (a class's private method), in every module."""
    found = []
    for name in modules():
        bound = {}                       # local name → the streamc module it is, or the one it comes from
        for imported, what, local, _ in imports(name):
            if imported not in modules():
                continue
            bound[local] = imported
            if what is not None and what.startswith("_") and not what.startswith("__") and imported != name:
                found.append(f"{name} imports {what} from {imported}")
        for node in ast.walk(ast.parse(modules()[name].read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and bound.get(_dotted(node.value), name) != name):
                found.append(f"{name} reads {_dotted(node.value)}.{node.attr} of {bound[_dotted(node.value)]}")
    return sorted(set(found))


#: Underscore names that are public API: a named tuple's methods.
_NAMED_TUPLE_API = {"_asdict", "_replace", "_fields", "_make"}


def _own_private_names(tree: ast.Module) -> set[str]:
    """Underscore attributes a module defines: ``self._x = ...``, class and module level ``_x = ...``,
    ``def _x``, ``class _X``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def object_private_reads() -> list[str]:
    """``obj._x`` in one module where ``_x`` is an underscore attribute only another streamc module defines:
    reading another module's object's private state (``self``/``cls`` reads of one's own are fine)."""
    trees = {name: ast.parse(path.read_text()) for name, path in modules().items()}
    own = {name: _own_private_names(tree) for name, tree in trees.items()}
    defined_elsewhere = set().union(*own.values())
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in _NAMED_TUPLE_API
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in own[name] and node.attr in defined_elsewhere):
                found.append(f"{name} (line {node.lineno}) reads {ast.unparse(node)}")
    return sorted(found)


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute reads on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def test_no_module_reads_private_names_of_another():
    found = private_reads() + object_private_reads()
    assert not found, "\n".join(found)
