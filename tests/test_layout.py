"""The package is a layered core with features on top and the CLI over all:

- a core module imports only its own floor and the floors below it;
- a feature module imports the core and its own package, never another feature
  (what one feature adds to another's output it registers: `views.contributions`,
  handed over by `cli.features`);
- the CLI imports anything.

Imports inside functions and `if TYPE_CHECKING:` blocks count; no set of modules
imports itself round in a circle, type-only imports included (they are never
run, but a reader follows them as any other)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "matrixgen"

# The core's floors, bottom to top.
CORE = [
    "util",
    "systems",
    "model",
    "documents",
    "engine",
    "quarantine",
    "pipeline",
    "emit",
    "views",
    "validate",
]
# Packages over the core, side by side.
FEATURES = frozenset(
    {"decide", "diff", "results", "report", "migrate", "entries", "coverage", "changes", "generate"}
)
# Over everything: parses, dispatches, hands features their contributions.
TOP = "cli"
# systems/ holds one home per CI system (matrixgen/systems/<name>/). The rule,
# with no exception per module: a part of a home (a module of systems/<name>/
# named in this table) sits on the floor of what it is, as if it were a module
# of that floor; every other module of systems/ (the registry, the homes' facts,
# their limits, the running CI's variables) sits on the systems floor, just
# above util, so that every floor may ask the registry. Equal to
# matrixgen.systems.home.PART_FLOORS (a test holds them so).
SYSTEM_PART_FLOORS: dict[str, str] = {
    "settings": "documents",
    "emitter": "emit",
    "outputs": "emit",
    "commands": "cli",
    "megatron": "emit",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def place(module: str) -> str:
    """The core floor, feature or top a module belongs to (a part of a CI
    system's home: the floor of what it is)."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":  # matrixgen itself
        return TOP
    if parts[1] == "systems" and len(parts) == 4 and parts[3] in SYSTEM_PART_FLOORS:
        return SYSTEM_PART_FLOORS[parts[3]]
    return parts[1]


def floor_of(module: str) -> int:
    """A core module's floor (0: util); -1 for a feature or the top."""
    where = place(module)
    return CORE.index(where) if where in CORE else -1


def breaks_layout(module: str, dep: str) -> bool:
    """Does `module` importing `dep` break the one rule?"""
    here, there = place(module), place(dep)
    if here == TOP:
        return False
    if here in FEATURES:
        return there != here and there not in CORE
    if here not in CORE:  # placed nowhere: every import of it is out of place
        return True
    return there not in CORE or CORE.index(there) > CORE.index(here)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, own: str | None = None, *, type_only: bool = False) -> set[str]:
    """Every matrixgen module that `path` imports, at any depth of its code
    (with `type_only`, those inside `if TYPE_CHECKING:` blocks too)."""
    found: set[str] = set()
    own = own or module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("matrixgen"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    name = f"{base}.{child.module}" if child.module else base
                else:
                    name = child.module or ""
                if name.startswith("matrixgen"):
                    found.add(name)
                    # `from matrixgen.engine import load` imports a submodule.
                    for alias in child.names:
                        if (
                            (PACKAGE.parent / (name + "." + alias.name).replace(".", "/"))
                            .with_suffix(".py")
                            .exists()
                        ):
                            found.add(f"{name}.{alias.name}")
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(own)
    return found


def import_graph(*, type_only: bool = False) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in imports_of(path, type_only=type_only) if m in modules}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks the layout: up a floor of the core, from the
    core into a feature or the CLI, or from one feature into another."""
    return [
        f"{module} imports {dep}"
        for module, deps in sorted(graph.items())
        for dep in sorted(deps)
        if breaks_layout(module, dep)
    ]


def feature_imports(graph: dict[str, set[str]]) -> list[str]:
    """The imports from one feature into another."""
    return [
        f"{module} imports {dep}"
        for module, deps in sorted(graph.items())
        for dep in sorted(deps)
        if place(module) in FEATURES and place(dep) in FEATURES and place(module) != place(dep)
    ]


def test_every_import_follows_the_layout() -> None:
    """Type-only imports too: a type named from a floor above is a dependency
    on it all the same, only not run."""
    upward = upward_imports(import_graph(type_only=True))
    assert not upward, "imports against the layout:\n" + "\n".join(upward)


def test_no_feature_imports_another() -> None:
    found = feature_imports(import_graph(type_only=True))
    assert not found, "imports from one feature into another:\n" + "\n".join(found)


def test_the_rule_holds_each_kind_of_import() -> None:
    graph = {
        "matrixgen.engine.load": {"matrixgen.util.atomic", "matrixgen.emit.common"},
        "matrixgen.diff.render": {"matrixgen.diff.model", "matrixgen.validate"},
        "matrixgen.report.site": {"matrixgen.results.site"},
        "matrixgen.views.page": {"matrixgen.report.pages"},
        "matrixgen.cli.report": {"matrixgen.results.site", "matrixgen.report.site"},
    }
    assert upward_imports(graph) == [
        "matrixgen.engine.load imports matrixgen.emit.common",
        "matrixgen.report.site imports matrixgen.results.site",
        "matrixgen.views.page imports matrixgen.report.pages",
    ]
    assert feature_imports(graph) == ["matrixgen.report.site imports matrixgen.results.site"]


def test_every_package_has_one_place() -> None:
    """Each top-level module or package of matrixgen is a floor of the core, a
    feature or the top: a new package must be placed before it can import."""
    names = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    unplaced = sorted(names - set(CORE) - FEATURES - {TOP, "__init__", "__main__"})
    assert not unplaced, f"neither a floor of the core nor a feature: {unplaced}"


def test_the_values_sit_below_the_documents_and_the_stages() -> None:
    """The documents read files into the values and the stages build on them;
    a value imports neither a stage nor a document."""
    assert not upward_imports({"matrixgen.documents.config": {"matrixgen.model.jobs"}})
    assert not upward_imports({"matrixgen.engine.load": {"matrixgen.model.errors"}})
    assert upward_imports({"matrixgen.documents.config": {"matrixgen.engine.globs"}})
    assert upward_imports({"matrixgen.model.references": {"matrixgen.engine.globs"}})
    assert upward_imports({"matrixgen.model.errors": {"matrixgen.documents.config_sections"}})
    assert upward_imports({"matrixgen.model.jobs": {"matrixgen.documents.yamlio"}})


def test_no_module_outside_the_cli_imports_it() -> None:
    offenders = [
        f"{module} imports {dep}"
        for module, deps in sorted(import_graph().items())
        for dep in sorted(deps)
        if dep.startswith("matrixgen.cli")
        and not module.startswith(("matrixgen.cli", "matrixgen.__main__"))
        and place(module) != TOP  # a home's commands
    ]
    assert not offenders, "\n".join(offenders)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other round in a circle (each sorted)."""
    # Tarjan's strongly connected components, iteratively: any component of more
    # than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_there_is_no_import_cycle() -> None:
    cycles = import_cycles(import_graph(type_only=True))
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The reader must not miss a function-level import (the kind that hid the
    old cycle) and must leave TYPE_CHECKING imports out unless asked for them."""
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from matrixgen.cli.main import main\n"
        "def f():\n    if True:\n        from matrixgen.validate import validate\n"
        "    from . import checks\n"
    )
    found = imports_of(source, own="matrixgen.engine.sample")
    assert "matrixgen.validate" in found
    assert "matrixgen.engine.checks" in found  # a relative import
    assert "matrixgen.cli.main" not in found
    assert "matrixgen.cli.main" in imports_of(source, "matrixgen.engine.sample", type_only=True)


def test_the_parts_of_a_home_are_the_ones_the_homes_declare() -> None:
    from matrixgen.systems.home import PART_FLOORS

    assert dict(PART_FLOORS) == SYSTEM_PART_FLOORS


def test_a_part_of_a_home_sits_on_its_own_floor() -> None:
    assert floor_of("matrixgen.systems.gitlab.emitter") == CORE.index("emit")
    assert place("matrixgen.systems.github.commands") == TOP
    assert floor_of("matrixgen.systems.github") == CORE.index("systems")
    assert floor_of("matrixgen.systems.ci") == CORE.index("systems")
    assert floor_of("matrixgen.systems.gitlab.limits") == CORE.index("systems")
    # The registry imports no part: each floor finds the parts it uses.
    assert upward_imports({"matrixgen.systems": {"matrixgen.systems.github.emitter"}})


@pytest.mark.parametrize("floor", [*CORE, *sorted(FEATURES), TOP])
def test_every_floor_exists(floor: str) -> None:
    assert (PACKAGE / floor).is_dir() or (PACKAGE / f"{floor}.py").exists()


TESTS = Path(__file__).resolve().parent


def _statements(node: ast.AST) -> list[ast.stmt]:
    """Every statement under `node`, at any depth (imports are statements, so the
    expressions are not walked)."""
    out: list[ast.stmt] = []
    work = [node]
    while work:
        current = work.pop()
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(current, name, None)
            if isinstance(children, list):
                for child in children:
                    if isinstance(child, ast.stmt):
                        out.append(child)
                    work.append(child)
    return out


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (`tests.test_*`, or `.test_*` relative) that `path` imports:
    shared builders belong in a fixtures module, never in another test file."""
    found = []
    for node in _statements(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                names = [module] if module else [a.name for a in node.names]
                names = [f"tests.{n}" for n in names]
            elif module == "tests":
                names = [f"tests.{a.name}" for a in node.names]
            else:
                names = [module]
        else:
            continue
        found += [
            f"{path.name}:{node.lineno}: {n}"
            for n in names
            # tests.test_utils of a checked-out Megatron-LM tree is not one of ours
            if n.startswith("tests.test_") and (TESTS / f"{n.split('.')[1]}.py").exists()
        ]
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def test_no_test_module_imports_another() -> None:
    offenders = [
        line for path in sorted(TESTS.glob("*.py")) for line in imported_test_modules(path)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_check_sees_every_spelling_of_a_test_import(tmp_path: Path) -> None:
    source = tmp_path / "test_sample.py"
    source.write_text(
        "from tests.test_cli import run\n"
        "import tests.test_diff\n"
        "from tests import test_pins\n"
        "from .test_stats import build\n"
        "from tests.emit_fixtures import emitted\n"
        "def f():\n    from tests.test_values import _Mark\n"
    )
    assert [line.split(": ")[1] for line in imported_test_modules(source)] == [
        "tests.test_cli",
        "tests.test_diff",
        "tests.test_pins",
        "tests.test_stats",
        "tests.test_values",
    ]
