"""Every CI system matrixgen writes for, each in a home of its own.

`matrixgen/systems/<name>/` holds all that is particular to one system: its
facts (`HOME`: name, events, CI variables, tiers), its limits, its settings
Struct, its emitter, its step outputs and its commands. `HOMES` is the registry,
one line per system, in the order the vocabulary (`engine.vocab.System`), help
and listings give them. Nothing outside this package names a system or reads a
CI variable (tests/test_systems.py): the rest asks the registry or `systems.ci`.

Adding a system: a package `systems/<name>/` with its `HOME` and parts, and its
line here (docs/emitters.md).
"""

from __future__ import annotations

from matrixgen.systems import github, gitlab
from matrixgen.systems.home import Home

HOMES: tuple[Home, ...] = (
    github.HOME,
    gitlab.HOME,
)


def home_of(name: str) -> Home:
    """The home of a system by its name (a KeyError for an unknown one)."""
    for home in HOMES:
        if home.name == name:
            return home
    raise KeyError(name)


def other_tiers_home() -> Home:
    """The system that runs the tiers no other claims, and is assumed outside
    any CI: the last home that claims no tiers of its own."""
    return [home for home in HOMES if home.tiers is None][-1]
