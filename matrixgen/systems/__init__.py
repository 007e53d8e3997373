"""Every CI system matrixgen writes for, each in a home of its own
(docs/emitters.md).

`HOMES` is the registry, one line per system, in the order the vocabulary
(`model.vocab.System`), help and listings give them. Nothing outside this
package names a system or reads a CI variable (tests/test_systems.py).
"""

from __future__ import annotations

from matrixgen.systems import github, gitlab
from matrixgen.systems.home import Home

HOMES: tuple[Home, ...] = (
    github.HOME,
    gitlab.HOME,
)


def names() -> tuple[str, ...]:
    """Every system's name, in the registry's order."""
    return tuple(home.name for home in HOMES)


def example_places() -> tuple[str, ...]:
    """A place of each system (`SYSTEM/SCOPE`), as examples in help and messages name them."""
    return tuple(f"{home.name}/{home.example_scope}" for home in HOMES)


def step_output_home() -> Home:
    """The system whose jobs take step outputs (`--github-output` and the like)."""
    return next(home for home in HOMES if home.step_output_option)


def step_output_option() -> str:
    """The option that appends step outputs, as every command spells it."""
    return step_output_home().step_output_option or ""


def step_output_file() -> str:
    """The variable that names the step outputs' file, as help writes it (`$NAME`)."""
    return "$" + step_output_home().variables["step_outputs"]


def home_of(name: str) -> Home:
    """The home of a system by its name (a KeyError for an unknown one)."""
    return {home.name: home for home in HOMES}[name]


def assumed_first() -> tuple[Home, ...]:
    """Every home, the one assumed outside any CI first, then the registry's order
    (the order variables are asked in outside CI, and the drop-ins listed in)."""
    first = other_tiers_home()
    return (first, *(home for home in HOMES if home is not first))


def other_tiers_home() -> Home:
    """The system that runs the tiers no other claims, and is assumed outside
    any CI: the last home that claims no tiers of its own."""
    return [home for home in HOMES if home.tiers is None][-1]
