"""The import contract of the house: which package may import which, and no circles.

Run ``python -m tests.tools.layers`` from the project root: it prints each broken rule as
one line (file, line, what it imports, why that is not allowed) and exits 1, or prints a
summary and exits 0. ``tests/test_layers.py`` runs it in the test suite.

The layers, lowest first (a package may import only those listed for it)::

    gaigel          the rules engine: the standard library only
    gaigel_api      the generated protocol: protobuf and grpc only
    gaigel_client   the bot SDK: gaigel_api
    gaigel_server   the match server: gaigel, gaigel_api
    gaigel_harness  bot tools (try, check-bot, house and chaos bots, stdio bridge): all of the above
    gaigel_arena    the tournament runner: gaigel, gaigel_api, gaigel_server, gaigel_harness
    gaigel_rl       learning-agent adapters and the policy bot (optional extra rl): gaigel, gaigel_api, gaigel_client

Every import that runs counts, also one inside a function: a lazy import is still a dependency.
For the layers, imports under ``if TYPE_CHECKING:`` do not (they are never executed). For
circles inside :data:`TYPE_CIRCLE_PACKAGES` they do: a module that needs another's types and
is needed by it is one module split in two (move the type down, or use a Protocol).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SOURCES: dict[str, Path] = {
    "gaigel": ROOT / "gaigel",
    "gaigel_api": ROOT / "gaigel_api",
    "gaigel_client": ROOT / "clients" / "python" / "gaigel_client",
    "gaigel_server": ROOT / "server" / "gaigel_server",
    "gaigel_harness": ROOT / "harness" / "gaigel_harness",
    "gaigel_arena": ROOT / "arena" / "gaigel_arena",
    "gaigel_rl": ROOT / "gaigel_rl",
}

ALLOWED: dict[str, frozenset[str]] = {
    "gaigel": frozenset(),
    "gaigel_api": frozenset(),
    "gaigel_client": frozenset({"gaigel_api"}),
    "gaigel_server": frozenset({"gaigel", "gaigel_api"}),
    "gaigel_harness": frozenset({"gaigel", "gaigel_api", "gaigel_client", "gaigel_server"}),
    "gaigel_arena": frozenset({"gaigel", "gaigel_api", "gaigel_server", "gaigel_harness"}),
    "gaigel_rl": frozenset({"gaigel", "gaigel_api", "gaigel_client"}),
}

STDLIB_ONLY = frozenset({"gaigel"})
"""Packages that may import nothing outside the standard library and themselves."""

TYPE_CIRCLE_PACKAGES = frozenset({"gaigel_server", "gaigel_harness", "gaigel_arena"})
"""Packages whose modules may not import each other in a circle, counting ``TYPE_CHECKING`` imports."""

KNOWN_TYPE_CIRCLES: tuple[tuple[str, ...], ...] = ()
"""Type-level circles tolerated while work in progress removes them (none now: the seat, the
session's BoundSeat and the views' Table protocols removed the last ones). An entry that is no
circle any more is reported, so the list only shrinks."""


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    source: str  # importing module, e.g. gaigel_server.table
    path: Path
    line: int
    target: str  # imported module, e.g. gaigel.match
    type_only: bool = False  # under `if TYPE_CHECKING:`: never run


@dataclasses.dataclass(frozen=True)
class Problem:
    """One broken rule."""

    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


def module_name(package: str, root: Path, path: Path) -> str:
    """The dotted module name of *path* inside *package* rooted at *root*."""
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(package: str, root: Path, sources: dict[str, Path]) -> Iterator[Import]:
    """Every import in every module of *package*, relative ones resolved."""
    for path in sorted(root.rglob("*.py")):
        name = module_name(package, root, path)
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, type_only in _nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(name, path, node.lineno, alias.name, type_only)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.module, node.level)
                # `from pkg import mod` names the submodule pkg.mod, `from pkg import thing` pkg itself.
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    yield Import(name, path, node.lineno, sub if _is_module(sub, sources) else base, type_only)


def _nodes(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node, and whether it is under ``if TYPE_CHECKING:`` (annotations only: never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for inner in node.body:
                yield inner, True
                yield from _nodes(inner, True)
            for other in node.orelse:
                yield other, type_only
                yield from _nodes(other, type_only)
            continue
        yield node, type_only
        yield from _nodes(node, type_only)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_module(dotted: str, sources: dict[str, Path]) -> bool:
    package, _, rest = dotted.partition(".")
    root = sources.get(package)
    if root is None or not rest:
        return False
    base = root.joinpath(*rest.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(module: str, is_package: bool, target: str | None, level: int) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, target] if target else parts)


def top(module: str) -> str:
    """The top-level package of a dotted name."""
    return module.partition(".")[0]


def check_layers(imports: Iterable[Import]) -> list[Problem]:
    """Imports of a first-party package its layer does not allow, and non-stdlib imports of the engine."""
    problems = []
    stdlib = sys.stdlib_module_names
    for imp in imports:
        own, other = top(imp.source), top(imp.target)
        if other == own or not other or imp.type_only:
            continue
        if other in ALLOWED:
            if other not in ALLOWED[own]:
                allowed = ", ".join(sorted(ALLOWED[own])) or "no other first-party package"
                problems.append(Problem(imp.path, imp.line, f"{own} imports {imp.target}: {own} may import {allowed}"))
        elif own in STDLIB_ONLY and other not in stdlib and other != "__future__":
            problems.append(
                Problem(imp.path, imp.line, f"{own} imports {imp.target}: the engine uses the standard library only")
            )
    return problems


def check_cycles(imports: Iterable[Import], modules: set[str]) -> list[Problem]:
    """Circles in the module import graph of the first-party modules (one problem per circle)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    where: dict[tuple[str, str], Import] = {}
    for imp in imports:
        if imp.target in modules and imp.target != imp.source and not imp.type_only:
            # `import a.b.c` also imports a and a.b; those edges are what makes package __init__ cycles.
            graph[imp.source].add(imp.target)
            where.setdefault((imp.source, imp.target), imp)
    problems = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        members = sorted(component)
        first = members[0]
        edge = next(where[(first, t)] for t in sorted(graph[first]) if t in component)
        problems.append(
            Problem(
                edge.path, edge.line, f"import circle among {', '.join(members)} (here {first} imports {edge.target})"
            )
        )
    return problems


def check_type_cycles(
    imports: Iterable[Import],
    modules: set[str],
    packages: frozenset[str] = TYPE_CIRCLE_PACKAGES,
    known: Iterable[tuple[str, ...]] = KNOWN_TYPE_CIRCLES,
) -> list[Problem]:
    """Circles among the modules of *packages* that take a ``TYPE_CHECKING`` import (one problem each).

    Circles of runtime imports alone are :func:`check_cycles`' to report. A circle listed in
    *known* (in its order, from any module on it) passes; an entry of *known* that is no
    circle any more is a problem too, so that the list only shrinks.
    """
    inside = {m for m in modules if top(m) in packages}
    graph: dict[str, set[str]] = {m: set() for m in inside}
    where: dict[tuple[str, str], Import] = {}
    for imp in imports:
        if imp.source in inside and imp.target in inside and imp.target != imp.source:
            graph[imp.source].add(imp.target)
            # the edge is type-level only when no import of the pair runs
            if (imp.source, imp.target) not in where or where[(imp.source, imp.target)].type_only:
                where[(imp.source, imp.target)] = imp
    tolerated = {_rotated(entry) for entry in known}
    problems = []
    found: set[tuple[str, ...]] = set()
    for component in _strongly_connected(graph):
        for circle in _circles(graph, component) if len(component) > 1 else ():
            edges = [where[(a, b)] for a, b in zip(circle, (*circle[1:], circle[0]), strict=True)]
            if not any(e.type_only for e in edges):
                continue
            found.add(circle)
            if circle in tolerated:
                continue
            steps = " -> ".join(
                f"{e.source} (TYPE_CHECKING)" if i and edges[i - 1].type_only else e.source for i, e in enumerate(edges)
            )
            last = f"{circle[0]} (TYPE_CHECKING)" if edges[-1].type_only else circle[0]
            problems.append(Problem(edges[0].path, edges[0].line, f"type-level import circle: {steps} -> {last}"))
    for entry in sorted(tolerated - found):
        problems.append(
            Problem(
                ROOT / "tests" / "tools" / "layers.py",
                1,
                f"KNOWN_TYPE_CIRCLES: {' -> '.join(entry)} is no circle any more",
            )
        )
    return problems


def _rotated(circle: tuple[str, ...]) -> tuple[str, ...]:
    """*circle* starting at its smallest module (one spelling per circle)."""
    i = circle.index(min(circle))
    return (*circle[i:], *circle[:i])


def _circles(graph: dict[str, set[str]], component: set[str], limit: int = 1000) -> list[tuple[str, ...]]:
    """The elementary circles inside one strongly connected component, each from its smallest module."""
    out: list[tuple[str, ...]] = []
    for start in sorted(component):
        # paths from start through larger modules only: each circle is found once, from its minimum
        work: list[tuple[str, ...]] = [(start,)]
        while work and len(out) < limit:
            path = work.pop()
            for child in sorted(graph[path[-1]] & component, reverse=True):
                if child == start:
                    out.append(path)
                elif child > start and child not in path:
                    work.append((*path, child))
    return sorted(out)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph has a few hundred nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                out.append(component)
    return out


def check(
    sources: dict[str, Path] = SOURCES, known: Iterable[tuple[str, ...]] = KNOWN_TYPE_CIRCLES
) -> tuple[list[Problem], int, int]:
    """All problems, the number of modules and of imports read (*known*: see :func:`check_type_cycles`)."""
    imports: list[Import] = []
    modules: set[str] = set()
    for package, root in sources.items():
        for path in root.rglob("*.py"):
            modules.add(module_name(package, root, path))
        imports.extend(imports_of(package, root, sources))
    problems = check_layers(imports) + check_cycles(imports, modules) + check_type_cycles(imports, modules, known=known)
    return problems, len(modules), len(imports)


def main() -> int:
    problems, modules, imports = check()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} broken import rule(s); the layers are in {Path(__file__).relative_to(ROOT)}")
        return 1
    print(f"layers ok: {modules} modules, {imports} imports, no forbidden import, no circle")
    if KNOWN_TYPE_CIRCLES:
        print(
            f"(tolerated for now, being removed: {len(KNOWN_TYPE_CIRCLES)} type-level circle(s) in KNOWN_TYPE_CIRCLES)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
