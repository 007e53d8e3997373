"""The base of the few value classes that leave some fields out of equality."""

from __future__ import annotations

from msgspec import Struct


class ComparedValue(Struct, frozen=True):
    """A frozen value compared and hashed by what `compared()` returns (its
    identity), not by every field: where it was read, caches, and parts that
    are not hashable are left out. Two values of different classes are never
    equal."""

    def compared(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.compared() == other.compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.compared())
