"""A recipe file read once into located values: RecipeDoc, its Blocks, their Rows.

The reader takes its key lists from documents/recipe_fields.py and says, with a
code of its own, what expansion cannot use (docs/recipe-format.md). Each value
keeps the findings its reading gave, so that expansion reports them as it
reaches it (a file cut short by the job cap reports what it read, no more).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.documents.recipe_fields import (
    ATTRIBUTE_KEYS_V1,
    ATTRIBUTE_KEYS_V2,
    BLOCK_KEYS,
    KNOWN_AXES_V2,
    KNOWN_SPEC_KEYS_V2,
    ROW_KEYS_V2,
    SPEC_SHAPES_V2,
    TOP_KEYS,
)
from matrixgen.documents.yamlio import YamlDocument
from matrixgen.model.errors import FileFindings, Finding, Findings, Location, did_you_mean
from matrixgen.model.vocab import ALL_CADENCES, RecipeType
from matrixgen.util.patterns import name_pattern, whole

if TYPE_CHECKING:
    from matrixgen.documents.config import Vocabulary


class RecipeFile(Struct, frozen=True, kw_only=True):
    """One parsed recipe file of a tree."""

    path: str  # as shown in messages (tree root joined with rel)
    rel: str  # relative to the tree root, '/'-separated
    document: YamlDocument
    kind: RecipeType
    format_version: int

    @property
    def data(self) -> Any:
        return self.document.data


# Change-based selection (format_version 2): globs of repository paths whose
# change needs a case, and `always` for cases every change runs. They add up
# from the spec (the file) to the block to the row; engine/changes.py reads them.
CHANGE_KEYS = ("paths", "always")
_SHAPES = {
    str: "a string",
    tuple[str, ...]: "a list of strings",
    dict[str, str]: "a mapping of strings",
    dict[str, Any]: "a mapping",
}
ENV_NAME = name_pattern(r"[A-Za-z_][A-Za-z0-9_]*")
SCALARS = (str, int, float, bool)
# The fields of RecipeDoc and Block that are what reading found, not keys of
# the file (every other field is named as the schema names the key).
READ_FIELDS = frozenset({"spec_of_rows", "findings", "usable"})

Path = tuple[str | int, ...]


class Row(Struct, frozen=True, kw_only=True):
    """One product row: its axes (keys that multiply out) and its attributes."""

    where: Path  # ("products", block, "products", row)
    data: dict[str, Any]
    usable: bool
    findings: tuple[Finding, ...]
    location: Location | None = None  # where the row starts (usable rows)
    cadence: list[str] | None = None  # the row's own
    axes: tuple[str, ...] = ()
    values: tuple[list[Any], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the spec's env updated by the row's
    args: tuple[str, ...] = ()  # the spec's args, then the row's


class Block(Struct, frozen=True, kw_only=True):
    """One test-case block (its fields named as the schema's block_v2 names them)."""

    usable: bool
    findings: tuple[Finding, ...]
    test_case: str
    products: tuple[Row, ...] = ()
    cadence: list[str] | None = None
    paths: Any = None
    always: Any = None
    # The spec the block's rows start from: the file's, with the block's paths
    # and `always` (format_version 2).
    spec_of_rows: Mapping[str, Any] | None = None


class RecipeDoc(Struct, frozen=True, kw_only=True):
    """One recipe file (its fields named as the schema's top level names them)."""

    findings: tuple[Finding, ...]
    type: RecipeType
    format_version: int
    spec: dict[str, Any] | None  # None when it is no mapping
    maintainers: Any = None
    loggers: Any = None
    products: tuple[Block, ...] = ()


def read_recipe(recipe: RecipeFile, vocabulary: Vocabulary | None) -> RecipeDoc:
    """The file's values and findings, in one walk over its data."""
    return _Reader(recipe, vocabulary).document()


def blocks(data: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, block) for every block of a recipe's data that is a mapping."""
    products = data.get("products") if isinstance(data, dict) else None
    if isinstance(products, list):
        for bi, block in enumerate(products):
            if isinstance(block, dict):
                yield bi, block


def rows(data: Any) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, row) for every row that is a mapping, in a block that is one."""
    for bi, block in blocks(data):
        block_rows = block.get("products")
        if isinstance(block_rows, list):
            for ri, row in enumerate(block_rows):
                if isinstance(row, dict):
                    yield ("products", bi, "products", ri), row


def block_rows(mapping: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The rows of a well-formed format_version 2 block (block keys only, a
    test_case, and non-empty rows of row keys only), else None."""
    found = mapping.get("products")
    if (
        set(mapping) - BLOCK_KEYS
        or "test_case" not in mapping
        or not isinstance(found, list)
        or not all(isinstance(r, dict) and set(r) <= ROW_KEYS_V2 and r for r in found)
    ):
        return None
    return found


def with_change_keys(spec: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """spec with `more`'s paths added to its own and `always` if either says so.
    Values of the wrong shape are left to the schema's findings."""
    out = dict(spec)
    paths = [p for p in (spec.get("paths"), more.get("paths")) if isinstance(p, list)]
    if paths:
        out["paths"] = [glob for group in paths for glob in group if isinstance(glob, str)]
    if more.get("always") is True or spec.get("always") is True:
        out["always"] = True
    return out


class _Reader(FileFindings):
    def __init__(self, recipe: RecipeFile, vocabulary: Vocabulary | None) -> None:
        super().__init__(recipe, Findings())
        self.attribute_keys = ATTRIBUTE_KEYS_V2 if self.v2 else ATTRIBUTE_KEYS_V1
        self.known_axes = KNOWN_AXES_V2 | (vocabulary.axes if vocabulary else frozenset())
        self.spec_keys = KNOWN_SPEC_KEYS_V2 | (vocabulary.spec_keys if vocabulary else frozenset())
        self.products_node: Any = None
        self.rows_node: tuple[int, Any] = (-1, None)

    def taken(self) -> tuple[Finding, ...]:
        """The findings so far, handed to the value they belong to."""
        items = self.findings.items
        if not items:  # the common case: nothing to hand over
            return ()
        found = tuple(items)
        items.clear()
        return found

    def document(self) -> RecipeDoc:
        data = self.recipe.data
        for key in data:
            if key not in TOP_KEYS:
                self.note(
                    self.at(key, key=True),
                    "unknown-key",
                    f'unknown top-level key "{key}"{did_you_mean(key, TOP_KEYS)}',
                )
        spec = self.spec(data.get("spec"))
        products = self.products(data) if spec is not None else None
        findings = self.taken()  # the file's own, before its blocks'
        seen_cases: dict[str, int] = {}
        return RecipeDoc(
            findings=findings,
            type=self.recipe.kind,
            format_version=self.recipe.format_version,
            spec=spec,
            maintainers=data.get("maintainers"),
            loggers=data.get("loggers"),
            products=tuple(
                [self.block(spec, bi, block, seen_cases) for bi, block in enumerate(products or ())]
            ),
        )

    def spec(self, spec: Any) -> dict[str, Any] | None:
        # Every key is a string: yamlio keys the others by their text, with a finding.
        if not isinstance(spec, dict):
            self.error(self.at("spec"), "spec-type", "spec must be a mapping of job defaults")
            return None
        if not self.v2:
            return spec
        for key in spec:
            if key not in self.spec_keys and not key.startswith("x-"):
                self.error(
                    self.at("spec", key, key=True),
                    "unknown-key",
                    f'unknown spec key "{key}"{did_you_mean(key, self.spec_keys)}',
                )
        for key, want in SPEC_SHAPES_V2.items():
            value = spec.get(key)
            if value is not None and not _has_shape(value, want):
                self.error(
                    self.at("spec", key),
                    "spec-type",
                    f'spec "{key}" must be {_SHAPES[want]}, not {shown(value)}',
                )
        if self.recipe.kind is RecipeType.BASIC and "build" not in spec:
            self.error(
                self.at("spec", key=True),
                "build-missing",
                'spec has no "build": every job needs the build recipe of the image it runs in',
            )
        return spec

    def products(self, data: dict[str, Any]) -> list[Any] | None:
        """The file's list of blocks (None: no blocks to read)."""
        products = data.get("products")
        if self.recipe.kind is RecipeType.BUILD:
            if products:
                self.note(
                    self.at("products"),
                    "build-products",
                    "a build recipe's products are never selected as test jobs",
                )
            return None
        if products is None:
            if self.v2 or "products" in data:
                self.note(
                    self.at("products"), "products-missing", "no products: this file yields no jobs"
                )
            return None
        if not isinstance(products, list):
            self.error(
                self.at("products"), "products-type", "products must be a list of test-case blocks"
            )
            return None
        if not products:
            self.note(
                self.at("products"), "products-empty", "products is empty: this file yields no jobs"
            )
        return products

    def block(self, spec: dict[str, Any], bi: int, block: Any, seen_cases: dict[str, int]) -> Block:
        where: Path = ("products", bi)
        if not isinstance(block, dict):
            self.error(
                self.at(*where),
                "block-type",
                "a test-case block must be a mapping with test_case and products",
            )
            return Block(usable=False, findings=self.taken(), test_case="")
        for key in block:
            if key not in BLOCK_KEYS:
                self.note(
                    self.at(*where, key, key=True),
                    "unknown-key",
                    f'unknown key "{key}" in a test-case block{did_you_mean(key, BLOCK_KEYS)}',
                )
        test_case = self.test_case(block.get("test_case"), bi, seen_cases)
        outer = block.get("cadence")
        block_rows = block.get("products")
        usable = (
            test_case is not None
            and (outer is None or self.cadence_ok(outer, (*where, "cadence")))
            and self.rows_ok(block, block_rows, where, test_case)
        )
        if not usable:
            return Block(usable=False, findings=self.taken(), test_case=test_case or "")
        if self.v2 and any(k in block for k in CHANGE_KEYS):
            spec = with_change_keys(spec, block)
        return Block(
            usable=True,
            findings=self.taken(),
            test_case=test_case or "",
            cadence=outer,
            paths=block.get("paths"),
            always=block.get("always"),
            spec_of_rows=spec,
            products=tuple(
                [self.row(spec, (*where, "products", ri), row) for ri, row in enumerate(block_rows)]
            ),
        )

    def test_case(self, cases: Any, bi: int, seen_cases: dict[str, int]) -> str | None:
        where = ("products", bi, "test_case")
        if (
            not isinstance(cases, list)
            or not cases
            or not all(isinstance(c, str) and c for c in cases)
        ):
            self.error(
                self.at(*where),
                "test-case-type",
                "test_case must be a one-element list holding the test case's name",
            )
            return None
        test_case = cases[0]
        if len(cases) > 1:
            ignored = ", ".join(cases[1:])
            self.note(
                self.at(*where),
                "test-case-extra",
                f"only the first test case ({test_case}) is read; ignored: {ignored}",
            )
        if test_case in seen_cases:
            self.note(
                self.at(*where),
                "duplicate-block",
                f'test case "{test_case}" already has a block '
                f"(products[{seen_cases[test_case]}]) in this file",
            )
        else:
            seen_cases[test_case] = bi
        return test_case

    def rows_ok(self, block: dict[str, Any], block_rows: Any, where: Path, test_case: str) -> bool:
        if "products" not in block:
            self.note(
                self.at(*where),
                "block-no-products",
                f'test case "{test_case}" has no products: it yields no jobs',
            )
            return False
        if not isinstance(block_rows, list):
            self.error(
                self.at(*where, "products"),
                "products-type",
                "a block's products must be a list of product rows",
            )
            return False
        if not block_rows:
            self.note(
                self.at(*where, "products"),
                "products-empty",
                f'test case "{test_case}" has an empty products list: it yields no jobs',
            )
        return True

    def cadence_ok(self, cadence: Any, where: Path) -> bool:
        if not isinstance(cadence, list) or not all(isinstance(c, str) for c in cadence):
            self.error(self.at(*where), "cadence-type", "cadence must be a list of cadence names")
            return False
        bad = [c for c in cadence if c not in ALL_CADENCES]
        for c in bad:
            self.error(
                self.at(*where),
                "cadence-value",
                f'unknown cadence "{c}"{did_you_mean(c, ALL_CADENCES)}; '
                f"allowed: {', '.join(ALL_CADENCES)}",
            )
        if not cadence:
            self.error(
                self.at(*where), "cadence-empty", "cadence is empty: the job would never run"
            )
            return False
        return not bad

    def row(self, spec: Mapping[str, Any], where: Path, row: Any) -> Row:
        if not isinstance(row, dict):
            self.error(
                self.at(*where), "row-type", "a product row must be a mapping of axis -> list"
            )
            return Row(where=where, data={}, usable=False, findings=self.taken())
        if not row:
            self.note(
                self.at(*where), "row-empty", "an empty product row yields one job of spec defaults"
            )
        inner = row.get("cadence")
        axes = tuple([k for k in row if k not in self.attribute_keys])
        attrs = None
        if (inner is None or self.cadence_ok(inner, (*where, "cadence"))) and self.axes_ok(
            row, axes, where
        ):
            attrs = self.attributes(spec, row, where)
        if attrs is None:
            return Row(where=where, data=row, usable=False, findings=self.taken())
        return Row(
            where=where,
            data=row,
            usable=True,
            findings=self.taken(),
            location=self.row_location(where),
            cadence=inner,
            axes=axes,
            values=tuple([row[k] for k in axes]),
            env=attrs[0],
            args=attrs[1],
        )

    def axes_ok(self, row: dict[str, Any], axes: tuple[str, ...], where: Path) -> bool:
        for key in axes:
            value = row[key]
            if self.v2 and key not in self.known_axes:
                self.error(
                    self.at(*where, key, key=True),
                    "unknown-key",
                    f'unknown row key "{key}"{did_you_mean(key, self.known_axes)}; '
                    "declare extra axes under vocabulary.axes in the project config",
                )
                return False
            if not isinstance(value, list):
                self.error(
                    self.at(*where, key),
                    "axis-type",
                    f'"{key}" must be a list of values, like {key}: [{show(value)}]',
                )
                return False
            for i, item in enumerate(value):
                if not isinstance(item, SCALARS):
                    self.error(
                        self.at(*where, key, i),
                        "axis-value",
                        f'values of "{key}" must be plain scalars, not {type(item).__name__}',
                    )
                    return False
            if not value:
                self.note(
                    self.at(*where, key),
                    "axis-empty",
                    f'"{key}" is an empty list: this row yields no jobs',
                )
        return True

    def attributes(
        self, spec: Mapping[str, Any], row: dict[str, Any], where: Path
    ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None:
        """env and args of a row's jobs: spec env updated by the row's, spec args then the row's."""
        env: dict[str, str] = {}
        args: list[str] = []
        # In a format_version 1 row, env and args are axes like any other key (as
        # Megatron-LM's parser reads them), not attributes.
        sources = ((spec, ("spec",)), (row, where)) if self.v2 else ((spec, ("spec",)),)
        for source, keys in sources:
            raw_env = source.get("env")
            if raw_env is not None:
                if not isinstance(raw_env, dict):
                    self.error(
                        self.at(*keys, "env"), "env-type", "env must be a mapping NAME: value"
                    )
                    return None
                for k, v in raw_env.items():
                    if not whole(ENV_NAME, k):
                        # The emitters write it as a variable name: it must be one.
                        self.note(
                            self.at(*keys, "env", k, key=True),
                            "env-type",
                            f'env name "{k}" is not a variable name (letters, digits, _; '
                            "not starting with a digit)",
                        )
                    if not isinstance(v, SCALARS):
                        self.error(
                            self.at(*keys, "env", k),
                            "env-type",
                            f"env {k} must be a string, number or boolean",
                        )
                        return None
                    env[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
            raw_args = source.get("args")
            if raw_args is not None:
                if not isinstance(raw_args, list) or not all(isinstance(a, str) for a in raw_args):
                    self.error(
                        self.at(*keys, "args"), "args-type", "args must be a list of strings"
                    )
                    return None
                args.extend(raw_args)
        return tuple(sorted(env.items())), tuple(args)

    def row_location(self, where: Path) -> Location:
        """Where a row starts: found from the cached products node, not from the root."""
        if self.products_node is None:
            self.products_node = _value_node(self.doc.root, "products")
        _, bi, _, ri = where
        try:
            if self.rows_node[0] != bi:  # found once per block, not once per row
                self.rows_node = (bi, _value_node(self.products_node.value[bi], "products"))
            row = self.rows_node[1].value[ri]
        except (AttributeError, IndexError, TypeError):
            return self.at(*where)
        return Location(self.doc.path, row.start_mark.line + 1, row.start_mark.column + 1)


def _has_shape(value: Any, want: Any) -> bool:
    """Whether a value as YAML read it is of the declared type (`_SHAPES`)."""
    if want is str:
        return isinstance(value, str)
    if want == tuple[str, ...]:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if want == dict[str, str]:
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return isinstance(value, dict)


def _value_node(node: Any, key: str) -> Any:
    for key_node, value_node in getattr(node, "value", ()):
        if getattr(key_node, "value", None) == key:
            return value_node
    return None


def shown(value: Any) -> str:
    """A value in a message: strings quoted, so that an empty one shows."""
    return f'"{show(value)}"' if isinstance(value, str) else show(value)


def show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
