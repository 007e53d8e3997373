"""The shape of the code, against the goals of the restructuring (one figure a line).

    python bench/code_shape.py [--list]

Plain `ast` over `matrixgen/` and `tests/`; nothing is imported from the package,
so it runs in well under a second. What each figure counts:

- package lines: physical lines of every `matrixgen/**/*.py` (and the non-blank ones).
- modules over 600 lines, functions over 80 lines (`def` line to last line,
  decorators left out; nested functions count on their own).
- raw `["products"]` walks: subscripts whose key is the string "products", outside
  the document readers (DOCUMENT_PATHS).
- findings filtered by message text: a string literal tested against a message, the
  forms that can be told from the code alone: `"..." in x.message`, `"..." in message`
  (any name ending in `message`), `x.message.startswith("...")`/`endswith`, `x.message
  == "..."`, `re.search/match/fullmatch/sub/findall(..., x.message)` and a compiled
  pattern's `search/match/fullmatch(x.message)` (a pattern's `sub` that normalises a
  message for comparing is not a filter). A message copied into
  a variable of another name first, or tested inside a helper, is not seen.
- system comparisons: a comparison (`is`, `is not`, `==`, `!=`, `in`, `not in`, or a
  `case` pattern) with `System.GITHUB` or `System.GITLAB` on either side, outside
  SYSTEM_PATHS (the systems' homes, `matrixgen/systems/`).
- system names and CI variables outside `matrixgen/systems/`: as
  tests/systems_fixtures.py `names_outside_systems` finds them (a string literal,
  docstrings left out, naming a system as code and files spell it or a CI
  variable, `System.<MEMBER>`, an import of a home's module), its ALLOWED words
  (the issue tracker's, the recipes' legacy scope names) taken out. A system's
  name in prose (`a GitHub matrix`) is not counted.
- files to touch to add a CI system: measured, like the new field. A copy of the
  checkout gets the toy system (tests/systems_fixtures.py `add_toy_system`: a
  package `systems/toy/` and its line in the registry), the generated files
  written again; the hand-edited files count (the package as one), the written
  ones are listed, and the system must reach the vocabulary, the schema, the
  emitter registry and the CLI and emit its jobs (`toy_system_reaches`). Left
  out with `--no-field` too.
- hand-written `to_dict`: methods named `to_dict` in the package (JSON comes from
  the Structs' declarations instead).
- raw config reads: a project config's sections read as plain mappings
  (`config.raw`, `config.section(...)`, `config.platform_info(...)`) and a target's
  settings read by key (`target.settings.get(...)`, `target.settings[...]`, or
  `getattr(target.settings, "...")`: a setting only some systems have), outside the
  document readers (DOCUMENT_PATHS).
- files to touch to add a field to a quarantine entry: measured, not counted from
  the code. A copy of the checkout gets one field more in the entry's Struct
  (tests/schema_fixtures.py `add_toy_field`, the one hand edit), its schemas
  written again as `python -m matrixgen.documents` does; every file that then
  differs counts, and the field must be read, checked, listed by `quarantine
  list --format json` and written by the editor (`toy_field_carried`), else the
  figure says where it is not. This part runs the copy's package (a few
  seconds); `--no-field` leaves it out.
- files to touch to add a triage verdict: measured the same way. A copy of the
  checkout gets one verdict more (its enum line and words in results/triage.py,
  its name in schema/triage.schema.json: tests/schema_fixtures.py
  `add_toy_verdict`); every file that differs counts, and a failure with that
  verdict must be counted, valid against the schema, and shown by the text
  summary, the Markdown comment and the report's Triage page
  (`toy_verdict_carried`). `--no-field` leaves it out too.
- the layout (tests/test_layout.py: a layered core, features over it, the CLI on
  top): the core's floors and the features; test-to-test imports, imports against
  the layout (up a floor of the core, from the core into a feature or the CLI,
  from one feature into another), those from one feature into another on their
  own, import cycles and type-only imports (`if TYPE_CHECKING:`) against the
  layout: as tests/test_layout.py finds them (its functions are reused; a part of
  a system's home sits on its own floor).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "matrixgen"
TESTS = ROOT / "tests"

# Where the raw recipe document may be walked (paths relative to the checkout).
DOCUMENT_PATHS = ("matrixgen/documents/",)
# Where System.GITHUB / System.GITLAB may be compared: each system's home.
SYSTEM_PATHS = ("matrixgen/systems/",)
MODULE_LIMIT = 600
FUNCTION_LIMIT = 80
SYSTEMS = {"GITHUB", "GITLAB"}
RE_FUNCTIONS = {"search", "match", "fullmatch", "sub", "findall"}


def _load(name: str) -> ModuleType:
    """A module of tests/ by its file name (test_layout for its import graph and
    cycle finder, schema_fixtures for the new-field experiment)."""
    if str(ROOT) not in sys.path:  # fixtures import one another as tests.*
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location(f"_{name}", TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def field_experiment() -> tuple[list[str], dict[str, bool]]:
    """(the files a new entry field changes, where it is carried) in a copy of
    the checkout."""
    import shutil
    import tempfile

    fixtures = _load("schema_fixtures")
    with tempfile.TemporaryDirectory(prefix="matrixgen-field-") as tmp:
        checkout = fixtures.copy_checkout(Path(tmp) / "checkout")
        tree = Path(tmp) / "recipes"
        shutil.copytree(ROOT / "recipes", tree)
        changed = fixtures.add_toy_field(checkout)
        return changed, fixtures.toy_field_carried(checkout, tree)


def verdict_experiment() -> tuple[list[str], dict[str, bool]]:
    """(the files a new triage verdict changes, where it is carried) in a copy of
    the checkout."""
    import tempfile

    fixtures = _load("schema_fixtures")
    with tempfile.TemporaryDirectory(prefix="matrixgen-verdict-") as tmp:
        checkout = fixtures.copy_checkout(Path(tmp) / "checkout")
        changed = fixtures.add_toy_verdict(checkout)
        return changed, fixtures.toy_verdict_carried(checkout)


def system_experiment() -> tuple[list[str], list[str], dict[str, object]]:
    """(the files edited by hand to add a CI system, the files written again,
    what the system reaches) in a copy of the checkout."""
    import tempfile

    fixtures = _load("systems_fixtures")
    with tempfile.TemporaryDirectory(prefix="matrixgen-system-") as tmp:
        checkout = _load("schema_fixtures").copy_checkout(Path(tmp) / "checkout")
        by_hand, written = fixtures.add_toy_system(checkout)
        return by_hand, written, fixtures.toy_system_reaches(checkout, Path(tmp) / "tree")


def show_experiment(what: str, changed: list[str], carried: dict[str, bool]) -> None:
    """The files an experiment changed, and where what it added was not carried."""
    missing = [where for where, done in carried.items() if not done]
    print(
        f"files to touch to add {what}: {len(changed)} (goal at most 2)"
        + (f"; not carried: {', '.join(missing)}" if missing else "")
    )
    for rel in changed:
        print(f"    {rel}")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _is_message(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "message"
    return isinstance(node, ast.Name) and node.id.endswith("message")


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_system(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in SYSTEMS
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "System")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "System")
        )
    )


def _contains_system(node: ast.AST) -> bool:
    return any(_is_system(n) for n in ast.walk(node))


def message_filters(nodes: list[ast.AST]) -> Iterator[int]:
    """Line of each string literal tested against a message's text."""
    for node in nodes:
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
                if (
                    isinstance(op, (ast.In, ast.NotIn)) and _is_text(left) and _is_message(right)
                ) or (
                    isinstance(op, (ast.Eq, ast.NotEq))
                    and (
                        (_is_text(left) and _is_message(right))
                        or (_is_message(left) and _is_text(right))
                    )
                ):
                    yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if (func.attr in {"startswith", "endswith"} and _is_message(func.value)) or (
                any(_is_message(a) for a in node.args)
                and (
                    (func.attr in RE_FUNCTIONS and _is_name(func.value, "re"))
                    or func.attr in {"search", "match", "fullmatch"}
                )
            ):
                yield node.lineno


def system_comparisons(nodes: list[ast.AST]) -> Iterator[int]:
    """Line of each comparison with System.GITHUB or System.GITLAB."""
    for node in nodes:
        if isinstance(node, ast.Compare):
            if any(_contains_system(side) for side in [node.left, *node.comparators]):
                yield node.lineno
        elif isinstance(node, ast.match_case) and _contains_system(node.pattern):
            yield node.pattern.lineno


def products_walks(nodes: list[ast.AST]) -> Iterator[int]:
    for node in nodes:
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "products"
        ):
            yield node.lineno


def to_dicts(nodes: list[ast.AST]) -> Iterator[int]:
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "to_dict":
            yield node.lineno


def _names_config(node: ast.AST) -> bool:
    """An expression that names a project config (`config`, `tree.config`, ...)."""
    if isinstance(node, ast.Name):
        return node.id.endswith("config")
    return isinstance(node, ast.Attribute) and node.attr.endswith("config")


def _is_settings(node: ast.AST) -> bool:
    """`x.settings` or a name `settings` (what a target's settings are read through)."""
    return (isinstance(node, ast.Attribute) and node.attr == "settings") or (
        isinstance(node, ast.Name) and node.id == "settings"
    )


def raw_config_reads(nodes: list[ast.AST]) -> Iterator[int]:
    """Line of each read of a config section, or of a target's settings by key."""
    for node in nodes:
        if isinstance(node, ast.Attribute):
            if node.attr in {"raw", "section", "platform_info"} and _names_config(node.value):
                yield node.lineno
        elif isinstance(node, ast.Subscript) and _is_settings(node.value):
            yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and _is_settings(node.func.value):
                yield node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and node.args
            and _is_settings(node.args[0])
        ):
            yield node.lineno


def long_functions(tree: ast.AST) -> Iterator[tuple[str, int, int]]:
    """(name, line, length) of every function, methods and nested ones included."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                yield name, child.lineno, child.end_lineno - child.lineno + 1
                yield from visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(tree, "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every site, not only counts")
    parser.add_argument(
        "--no-field",
        action="store_true",
        help="leave out the experiments (a new entry field, verdict, CI system)",
    )
    args = parser.parse_args()
    layout = _load("test_layout")

    lines = nonblank = functions = 0
    big_modules: list[tuple[str, int]] = []
    long: list[tuple[str, int]] = []
    products: list[str] = []
    filters: list[str] = []
    systems: list[str] = []
    dicts: list[str] = []
    raw_reads: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = _rel(path)
        text = path.read_text(encoding="utf-8")
        count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        lines += count
        nonblank += sum(1 for line in text.splitlines() if line.strip())
        if count > MODULE_LIMIT:
            big_modules.append((rel, count))
        tree = ast.parse(text, filename=rel)
        nodes = list(ast.walk(tree))
        for name, line, length in long_functions(tree):
            functions += 1
            if length > FUNCTION_LIMIT:
                long.append((f"{rel}:{line} {name}", length))
        if not rel.startswith(DOCUMENT_PATHS):
            products += [f"{rel}:{n}" for n in sorted(products_walks(nodes))]
            raw_reads += [f"{rel}:{n}" for n in sorted(set(raw_config_reads(nodes)))]
        dicts += [f"{rel}:{n}" for n in sorted(to_dicts(nodes))]
        filters += [f"{rel}:{n}" for n in sorted(set(message_filters(nodes)))]
        if not rel.startswith(SYSTEM_PATHS):
            systems += [f"{rel}:{n}" for n in sorted(set(system_comparisons(nodes)))]

    test_imports = [
        f"tests/{line}"
        for path in sorted(TESTS.glob("*.py"))
        for line in layout.imported_test_modules(path)
    ]
    cycles = layout.import_cycles(layout.import_graph(type_only=True))
    typed = layout.import_graph(type_only=True)
    upward_types = [
        line
        for line in layout.upward_imports(typed)
        if line not in layout.upward_imports(layout.import_graph())
    ]

    def show(title: str, items: list[str], goal: str) -> None:
        print(f"{title}: {len(items)} (goal {goal})")
        if args.list or len(items) <= 12:
            for item in items:
                print(f"    {item}")

    print(f"package lines: {lines:,} ({nonblank:,} not blank)")
    show(
        f"modules over {MODULE_LIMIT} lines",
        [f"{rel} ({n})" for rel, n in sorted(big_modules, key=lambda m: -m[1])],
        "0",
    )
    print(f"functions over {FUNCTION_LIMIT} lines: {len(long)} of {functions} (goal at most 10)")
    for where, length in sorted(long, key=lambda f: -f[1]):
        print(f"    {where} ({length})")
    show('raw ["products"] subscripts outside documents/', products, "0")
    show("hand-written to_dict", dicts, "0")
    show("raw config reads outside documents/", raw_reads, "0")
    if not args.no_field:
        show_experiment("a field to a quarantine entry", *field_experiment())
        show_experiment("a triage verdict", *verdict_experiment())
    show("findings filtered by message text", filters, "0")
    show("System.GITHUB/GITLAB comparisons outside systems/", systems, "0")
    show(
        "system names and CI variables outside systems/",
        _load("systems_fixtures").names_outside_systems(PACKAGE),
        "0",
    )
    if not args.no_field:
        by_hand, written, reached = system_experiment()
        reached.pop("stderr", None)
        missing = [where for where, done in reached.items() if not done]
        print(
            f"files to touch to add a CI system: {len(by_hand)} by hand, "
            f"{len(written)} written again (goal at most 3)"
            + (f"; not reached: {', '.join(missing)}" if missing else "")
        )
        for rel in by_hand:
            print(f"    {rel}")
        for rel in written:
            print(f"    {rel} (written again)")
    print(f"core floors, bottom up: {len(layout.CORE)} ({', '.join(layout.CORE)})")
    print(f"features over the core: {len(layout.FEATURES)} ({', '.join(sorted(layout.FEATURES))})")
    show("test-to-test imports", test_imports, "0")
    show("imports against the layout", layout.upward_imports(layout.import_graph()), "0")
    show("imports from one feature into another", layout.feature_imports(typed), "0")
    show("import cycles", [" -> ".join(c) for c in cycles], "0")
    show("type-only imports against the layout", upward_types, "0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
