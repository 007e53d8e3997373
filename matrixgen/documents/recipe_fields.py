"""A recipe file's shape, declared once: format_version 1 (as Megatron-LM writes
it) and 2, a Struct per part. `RECIPE` is the file: the published schema is made
from it, and the reader (documents/recipe.py) takes its key lists from these
Structs (docs/architecture.md, "Where a change goes").
"""

# Annotations are evaluated where they are written: the key lists below are read
# from the Structs' types.
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from msgspec import Meta, Struct

from matrixgen.model.sections import NON_BLANK, Text, Texts, Unique, whole
from matrixgen.model.vocab import Cadence, RecipeType

Scalar = str | int | float | bool
Cadences = Annotated[tuple[Cadence, ...], Meta(min_length=1)]
Env = dict[Annotated[str, Meta(pattern=whole("[A-Za-z_][A-Za-z0-9_]*"))], Scalar]
IntAxis = Annotated[tuple[Annotated[int, Meta(ge=1)], ...], Meta(min_length=1)]
# An axis a tree declares (vocabulary.axes): a list of plain values.
EXTRA_AXIS = {"type": "array", "items": {"type": ["string", "integer", "number", "boolean"]}}

_CHANGE = {
    "paths": "Globs of repository paths (`**` any folders, `*` and `?` within one) whose change "
    "needs the case; they add up from the spec to the block to the row. Change-based "
    "selection (`--changed-since`).",
    "always": "true: every change runs the case (smoke cases), whatever the paths.",
}


class Part(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A mapping of a recipe file."""


class References(Part, frozen=True, kw_only=True, forbid_unknown_fields=True):
    skip: Literal["all"] | Annotated[tuple[Text, ...], Meta(min_length=1), Unique]
    reason: Annotated[str, Meta(min_length=1, pattern=NON_BLANK)]

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Opt out of the reference files the project config declares "
        "(references.templates): every one (skip: all) or the named ones, with the reason. A "
        "row's opt-out replaces its recipe's."
    }


class Spec(Part, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A format_version 2 spec: the defaults of every job of the file. Keys starting
    with `x-` are free for tools of the project's own."""

    references: References | None = None
    paths: Texts | None = None
    always: bool | None = None
    name: Text | None = None
    model: Text | None = None
    build: Text | None = None
    nodes: Annotated[int, Meta(ge=1)] | None = None
    gpus: Annotated[int, Meta(ge=0)] | None = None
    n_repeat: Annotated[int, Meta(ge=1)] | None = None
    time_limit: Annotated[int, Meta(ge=1)] | None = None
    timeout: Annotated[int, Meta(ge=1)] | None = None
    platforms: str | tuple[str, ...] | None = None
    environment: str | None = None
    scope: str | None = None
    tag: str | None = None
    script_setup: str | None = None
    script: str | None = None
    launcher: str | None = None
    env: Env | None = None
    args: tuple[str, ...] | None = None
    artifacts: dict[str, str] | None = None
    source: dict[str, Any] | None = None
    needs: tuple[str, ...] | None = None

    SCHEMA_NAME: ClassVar[str] = "spec_v2"
    SCHEMA: ClassVar[Mapping[str, Any]] = {"patternProperties": {"^x-": True}}
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        **_CHANGE,
        "timeout": "The CI job's timeout in seconds, instead of the one derived from n_repeat x "
        "time_limit plus the system's timeout_overhead.",
        "launcher": "A custom launcher command that bypasses the shared one.",
    }


class Row(Part, frozen=True, kw_only=True):
    """A format_version 2 product row: axes (lists of values that multiply out)
    and attributes of each job; an axis a tree declares is a list of plain values."""

    references: References | None = None
    cadence: Cadences | None = None
    env: Env | None = None
    args: tuple[str, ...] | None = None
    paths: Texts | None = None
    always: bool | None = None
    environment: Texts | None = None
    scope: Texts | None = None
    platforms: Texts | None = None
    tag: Texts | None = None
    n_repeat: IntAxis | None = None
    time_limit: IntAxis | None = None
    timeout: IntAxis | None = None
    nodes: IntAxis | None = None
    gpus: IntAxis | None = None
    allow_failure: Annotated[tuple[bool, ...], Meta(min_length=1)] | None = None

    SCHEMA_NAME: ClassVar[str] = "row_v2"
    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "minProperties": 1,
        "additionalProperties": {**EXTRA_AXIS, "minItems": 1},
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = _CHANGE


class Block(Part, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A format_version 2 test-case block."""

    test_case: Annotated[tuple[Text, ...], Meta(min_length=1, max_length=1)]
    cadence: Cadences | None = None
    paths: Texts | None = None
    always: bool | None = None
    products: Annotated[tuple[Row, ...], Meta(min_length=1)]

    SCHEMA_NAME: ClassVar[str] = "block_v2"
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = _CHANGE


class RowV1(Part, frozen=True, kw_only=True):
    """A format_version 1 product row: every key but cadence is an axis."""

    cadence: Cadences | None = None

    SCHEMA_NAME: ClassVar[str] = "row"
    SCHEMA: ClassVar[Mapping[str, Any]] = {"additionalProperties": EXTRA_AXIS}


class BlockV1(Part, frozen=True, kw_only=True):
    """A format_version 1 test-case block, as Megatron-LM's parser reads it."""

    test_case: Annotated[tuple[str, ...], Meta(min_length=1)]
    cadence: Cadences | None = None
    products: tuple[RowV1, ...] | None = None

    SCHEMA_NAME: ClassVar[str] = "block"


class RecipeV1(Part, frozen=True, kw_only=True, tag_field="format_version", tag=1):
    type: RecipeType
    maintainers: tuple[str, ...] | None = None
    loggers: tuple[str, ...] | None = None
    spec: dict[str, Any]
    products: Annotated[tuple[BlockV1, ...] | None, Meta(extra={"nullable": True})] = None


class RecipeV2(
    Part, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="format_version", tag=2
):
    type: RecipeType
    maintainers: tuple[str, ...] | None = None
    loggers: tuple[str, ...] | None = None
    spec: Spec
    products: Annotated[tuple[Block, ...], Meta(min_length=1)] | None = None


def _spec_needs(kind: RecipeType, keys: list[str]) -> dict[str, Any]:
    return {
        "if": {"properties": {"type": {"const": kind.value}}, "required": ["type"]},
        "then": {"properties": {"spec": {"required": keys}}},
    }


# A recipe file: format_version 1 or 2, and what a test or a build recipe's spec names.
RECIPE = Annotated[
    RecipeV1 | RecipeV2,
    Meta(
        extra_json_schema={
            "$id": "https://matrixgen.invalid/schema/recipe.schema.json",
            "title": "matrixgen recipe file (format_version 1, as Megatron-LM writes it, and 2)",
            "allOf": [
                _spec_needs(RecipeType.BASIC, ["name", "model", "build"]),
                _spec_needs(RecipeType.BUILD, ["name"]),
            ],
        }
    ),
]

# --------------------------------------------------------------------------- key lists

# The keys of a file, of a format_version 2 block, spec and row.
TOP_KEYS = frozenset({"format_version", *RecipeV2.__struct_fields__})
BLOCK_KEYS = frozenset(Block.__struct_fields__)
KNOWN_SPEC_KEYS_V2 = frozenset(Spec.__struct_fields__)
ROW_KEYS_V2 = frozenset(Row.__struct_fields__)
# Row keys that are attributes of each job, not axes that multiply out.
ATTRIBUTE_KEYS_V1 = frozenset(RowV1.__struct_fields__)
# `references` (an opt-out of the declared reference files) replaces the spec's.
ATTRIBUTE_KEYS_V2 = frozenset({"cadence", "env", "args", "paths", "always", "references"})
# Row keys a format_version 2 tree knows without declaring them.
KNOWN_AXES_V2 = ROW_KEYS_V2 - ATTRIBUTE_KEYS_V2


def _declared(name: str) -> tuple[Any, ...]:
    """A spec key's types, without its None (every spec key may be left out)."""
    return tuple(t for t in get_args(Spec.__annotations__[name]) if t is not type(None))


# Spec keys the emitters and the graph read as they are written: each one's type.
SPEC_SHAPES_V2 = {
    key: _declared(key)[0]
    for key in ("script_setup", "script", "launcher", "needs", "artifacts", "source")
}
# The least value of each count of a job (`timeout` is the CI job's, read as written).
COUNT_MINIMUM = {
    name: kind.__metadata__[0].ge
    for name in Spec.__struct_fields__
    if name != "timeout"
    for kind in _declared(name)
    if get_origin(kind) is Annotated and kind.__origin__ is int
}
