"""The base of the few value classes that leave some fields out of equality, and
the JSON of values whose JSON is not simply their fields."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import Any, ClassVar

import msgspec
from msgspec import Struct


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
    written only when set (not None nor empty), and where some of them go
    (`after`: (field, the field it follows); `last`: at the end)."""

    leave_out: frozenset[str] = frozenset()
    when_set: frozenset[str] = frozenset()
    after: tuple[tuple[str, str], ...] = ()
    last: tuple[str, ...] = ()


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
    """A value as JSON holds it: a Struct as an object of its fields (by its
    `JSON` layout, when it has one; else as msgspec encodes it: its `rename` and
    `omit_defaults`), tuples as lists, enums as their values, dates as
    YYYY-MM-DD."""
    if isinstance(value, Struct):
        cls = type(value)
        if getattr(cls, "JSON", None) is None:
            return msgspec.to_builtins(value)
        layout: JsonLayout = cls.JSON  # type: ignore[attr-defined]
        out = {}
        for name in json_fields(cls):
            item = getattr(value, name)
            if name in layout.when_set and item in (None, "", (), [], {}):
                continue
            out[name] = json_value(item)
        return out
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return msgspec.to_builtins(value)
