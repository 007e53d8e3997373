"""The base of the few value classes that leave some fields out of equality, and
the JSON of values whose JSON is not simply their fields."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from functools import cache
from operator import attrgetter
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

import msgspec
from msgspec import Struct, field


class ComparedValue(Struct, frozen=True):
    """A frozen value compared and hashed by what `compared()` returns (its
    identity), not by every field: where it was read, caches, and parts that
    are not hashable are left out. Two values of different classes are never
    equal.

    The fields left out are named once, in the class's `NOT_COMPARED`: every
    other field counts, in the order declared, so a new field counts unless it
    is named there. A class may still define `compared()` itself."""

    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset()

    def compared(self) -> tuple:
        return compared_fields(type(self))(self)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.compared() == other.compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.compared())


@cache
def compared_fields(cls: type[ComparedValue]) -> Callable[[Any], tuple]:
    """The getter of the tuple a class compares: its fields, in the order
    declared, but the ones in `NOT_COMPARED` (made once per class)."""
    names = field_names(cls, cls.NOT_COMPARED)
    one = attrgetter(*names)
    return one if len(names) > 1 else (lambda value: (one(value),))


def field_names(cls: type[Struct], leave_out: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """A Struct's fields in the order declared, but `leave_out`."""
    return tuple(f for f in cls.__struct_fields__ if f not in leave_out)


class JsonLayout(Struct, frozen=True, kw_only=True):
    """How a value's JSON differs from its fields in the order declared, said on
    its class as `JSON` (read by `json_value`): the fields left out, the ones
    written only when set (not None nor empty), where some go (`after`: (field,
    the field it follows); `last`: at the end), the property a field's value is
    read from (`shown`), and tuples of (key, value) pairs written as an object
    (`as_mapping`). Keys are the fields' encoded names (msgspec's `rename`).

    A report whose JSON is not its fields names its keys instead (`keys`: each
    key and the attribute, or dotted path of attributes, it is read from), in
    order, after the items of the mapping `spread` names, if any; `when_set`
    then names keys."""

    keys: tuple[tuple[str, str], ...] = ()
    spread: str | None = None
    leave_out: frozenset[str] = frozenset()
    when_set: frozenset[str] = frozenset()
    after: tuple[tuple[str, str], ...] = ()
    last: tuple[str, ...] = ()
    shown: Mapping[str, str] = field(default_factory=dict)
    as_mapping: frozenset[str] = frozenset()


@cache
def json_fields(cls: type[Struct]) -> tuple[str, ...]:
    """The fields of a class's JSON, in order, as its `JSON` layout says."""
    layout: JsonLayout = getattr(cls, "JSON", None) or JsonLayout()
    moved = {name for name, _ in layout.after} | set(layout.last)
    names = [n for n in field_names(cls, layout.leave_out) if n not in moved]
    for name, anchor in layout.after:
        names.insert(names.index(anchor) + 1, name)
    return (*names, *layout.last)


def json_value(value: Any) -> Any:
    """A value as JSON holds it: a Struct as its class says (its `JSON` layout,
    else msgspec's encoding: its `rename` and `omit_defaults`), tuples as lists,
    enums as their values, dates as YYYY-MM-DD, mappings key by key."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, Struct):
        if getattr(kind, "JSON", None) is None:
            return msgspec.to_builtins(value)
        return _encoder(kind)(value)
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, (frozenset, set)):
        return sorted(json_value(v) for v in value)
    if isinstance(value, Mapping):
        return {k: json_value(v) for k, v in value.items()}
    return msgspec.to_builtins(value)


_PLAIN = frozenset({str, int, float, bool, type(None)})


@cache
def _encoder(cls: type[Struct]) -> Callable[[Any], dict[str, Any]]:
    """A class's JSON as one function, made once from its layout and its
    fields' types: a listing of 30,000 jobs goes as fast as code written out by
    hand."""
    layout: JsonLayout = cls.JSON  # type: ignore[attr-defined]
    if layout.keys:
        return _keyed(layout)
    hints = get_type_hints(cls)
    keys = dict(zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True))
    parts, dropped = [], []
    for name in json_fields(cls):
        source = f"v.{layout.shown.get(name, name)}"
        expression = "dict(x)" if name in layout.as_mapping else _conversion(hints.get(name))
        parts.append(f"{keys[name]!r}: {_apply(expression, source)}")
        if name in layout.when_set:
            dropped.append(keys[name])
    body = f"out = {{{', '.join(parts)}}}"
    for key in dropped:
        body += f"\n    if out[{key!r}] in _EMPTY: del out[{key!r}]"
    namespace: dict[str, Any] = {"_json": json_value, "_EMPTY": _EMPTY}
    exec(f"def encode(v):\n    {body}\n    return out", namespace)  # from the class's own fields
    return namespace["encode"]


_EMPTY: tuple[Any, ...] = (None, "", [], {})


def _keyed(layout: JsonLayout) -> Callable[[Any], dict[str, Any]]:
    """The JSON of a report that names its keys: each read where it says."""
    getters = [(key, attrgetter(path)) for key, path in layout.keys]
    when_set = layout.when_set
    spread = attrgetter(layout.spread) if layout.spread else None

    def encode(value: Any) -> dict[str, Any]:
        out = json_value(spread(value)) if spread is not None else {}
        out.update((key, json_value(get(value))) for key, get in getters)
        for key in when_set:
            if out[key] in _EMPTY:
                del out[key]
        return out

    return encode


def _apply(expression: str, source: str) -> str:
    """`expression` (over the value `x`) written over `source` (an attribute read)."""
    return re.sub(r"\bx\b", source, expression)


def _conversion(kind: Any) -> str:
    """How a field of this type is written (an expression over its value `x`)."""
    args = [a for a in get_args(kind) if a is not type(None)]
    if get_origin(kind) in (UnionType, Union) and len(args) < len(get_args(kind)):
        inner = _conversion(args[0] if len(args) == 1 else Any)
        return "x" if inner == "x" else f"None if x is None else {inner}"
    if kind in _PLAIN or kind is Any:
        return "x" if kind in _PLAIN else "_json(x)"
    origin = get_origin(kind) or kind
    if origin is tuple or origin is list:
        item = get_args(kind)[0] if get_args(kind) else Any
        return "list(x)" if item in _PLAIN else "[_json(i) for i in x]"
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return "x.value"
    return "_json(x)"
