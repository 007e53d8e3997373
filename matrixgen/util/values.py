"""The base of the few value classes that leave some fields out of equality."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import Any, ClassVar

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
