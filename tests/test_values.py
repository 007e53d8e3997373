"""Values that leave some fields out of equality (util.values.ComparedValue): every other field
counts, the left-out ones never do, and hashing agrees with equality.

Each class is built with a distinct placeholder object in every field (msgspec
does not check types at construction), then one field at a time is swapped for
another placeholder: a new field that a class's `__eq__` forgets to compare
fails here."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from matrixgen.emit.common import EmittedJob
from matrixgen.emit.generate import TargetOutput
from matrixgen.engine.expand import Expansion
from matrixgen.model.jobs import Job, Target
from matrixgen.quarantine.model import Entry
from matrixgen.results.store import Store

# class -> the fields equality leaves out (and why: see each class)
NOT_COMPARED: dict[type, set[str]] = {
    Job: {"spec", "recipe", "source", "declared_scope", "definitions"},
    # what comes with the system, the config or a decision
    Target: {"settings", "description", "rereads_recipe", "n_repeat", "lightweight"},
    Entry: {"location"},
    EmittedJob: {"job"},
    TargetOutput: set(),
    Expansion: set(),
    Store: {"migrated", "clock"},
}


class _Mark:
    """A placeholder: equal only to itself, hashable."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _fields(cls: type) -> list[str]:
    return [f.name for f in msgspec.structs.fields(cls)]


def _build(cls: type, placeholders: dict[str, _Mark], /, **override: Any) -> Any:
    """A value of `cls` with a placeholder in every field (some overridden)."""
    return cls(**{name: override.get(name, placeholders[name]) for name in _fields(cls)})


@pytest.mark.parametrize("cls", list(NOT_COMPARED), ids=lambda c: c.__name__)
def test_every_field_but_the_left_out_ones_makes_two_values_differ(cls: type) -> None:
    names = _fields(cls)
    assert NOT_COMPARED[cls] <= set(names)
    marks = {name: _Mark(name) for name in names}
    base = _build(cls, marks)
    assert base == _build(cls, marks) and hash(base) == hash(_build(cls, marks))
    for name in names:
        other = _build(cls, marks, **{name: _Mark(f"other {name}")})
        if name in NOT_COMPARED[cls]:
            assert other == base, f"{cls.__name__}.{name} must not count in equality"
            assert hash(other) == hash(base), f"{cls.__name__}.{name} must not count in hash"
        else:
            assert other != base, f"{cls.__name__}.{name} must count in equality"


@pytest.mark.parametrize("cls", list(NOT_COMPARED), ids=lambda c: c.__name__)
def test_a_value_is_never_equal_to_another_class(cls: type) -> None:
    names = _fields(cls)
    value = _build(cls, {name: _Mark(name) for name in names})
    assert value != tuple(getattr(value, n) for n in names)
    assert value.__eq__(object()) is NotImplemented


def test_values_are_frozen() -> None:
    job = Job(
        model="m",
        test_case="t",
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr",),
        name="m/t",
        build=None,
        n_repeat=1,
        time_limit=60,
    )
    with pytest.raises(AttributeError):
        job.model = "other"  # type: ignore[misc]
    assert msgspec.structs.replace(job, model="other").model == "other"
    assert job.model == "m"
