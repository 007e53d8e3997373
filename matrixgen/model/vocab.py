"""Closed vocabularies and the fixed rules of the recipe format."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

from matrixgen.systems import HOMES, home_of, other_tiers_home

if TYPE_CHECKING:
    from matrixgen.systems.home import Home


class _SystemMembers(StrEnum):
    """A CI system: one member per home of `matrixgen.systems.HOMES`, in its
    order; what the engine knows of each is its home's (`System.home`)."""

    # The home, then its fields by the same names (documented in systems/home.py).
    @property
    def home(self) -> Home:
        return home_of(self.value)

    @property
    def label(self) -> str:
        return self.home.label

    @property
    def events(self) -> tuple[str, ...]:
        return self.home.events

    @property
    def also_runs(self) -> tuple[str, ...]:
        return self.home.also_runs

    @property
    def job_variable(self) -> str:
        return self.home.job_variable

    @property
    def tiers(self) -> str | None:
        return self.home.tiers


# Built from the registry: a new home is a new member, with no edit here.
System = _SystemMembers(
    "System", [(home.name.upper(), home.name) for home in HOMES], module=__name__
)
System.__doc__ = _SystemMembers.__doc__
# The system that runs the tiers no other claims, and is assumed outside any CI.
OTHER_TIERS_SYSTEM = System(other_tiers_home().name)


class Cadence(StrEnum):
    PR = "pr"
    NIGHTLY = "nightly"
    MERGEGROUP = "mergegroup"
    WEEKLY = "weekly"


class RecipeType(StrEnum):
    BASIC = "basic"
    BUILD = "build"


class QuarantineAction(StrEnum):
    SKIP = "skip"
    ALLOW_FAILURE = "allow-failure"
    DESELECT = "deselect"
    MUTE = "mute"

    @property
    def node_level(self) -> bool:
        """Acts on pytest node ids inside the job (the job itself stays)."""
        return self in (QuarantineAction.DESELECT, QuarantineAction.MUTE)


class QuarantineKind(StrEnum):
    FLAKY = "flaky"
    BROKEN = "broken"
    BASELINE_FAILURE = "baseline-failure"
    INFRA = "infra"
    INVESTIGATING = "investigating"


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


ALL_CADENCES: tuple[str, ...] = tuple(c.value for c in Cadence)
# Plain strings, not enum members: jobs carry them into JSON and YAML output.
DEFAULT_CADENCE: tuple[str, ...] = (
    Cadence.PR.value,
    Cadence.NIGHTLY.value,
    Cadence.MERGEGROUP.value,
)

# Legacy scope names -> (tier, cadence implied when the recipe sets none).
# GitLab scopes (mr, mr-slim, unit-tests, ...) pass through unchanged.
LEGACY_SCOPE_ALIASES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "mr-github-slim": ("L0", None),
    "mr-github": ("L1", None),
    "nightly": ("L2", (Cadence.NIGHTLY.value,)),
    "weekly": ("L3", (Cadence.WEEKLY.value,)),
}


def resolve_scope(scope: str) -> str:
    """The tier a scope name selects: `nightly` and `L2` select the same rows."""
    alias = LEGACY_SCOPE_ALIASES.get(scope)
    return alias[0] if alias else scope


def scope_names(names: Iterable[str]) -> list[str]:
    """Scope names as a message lists them, sorted, in the tree's own words:
    `nightly (also known as L2)`, never `L2` beside `nightly`."""
    given = set(names)
    tiers = {resolve_scope(n): n for n in sorted(given) if resolve_scope(n) != n}
    return sorted(
        f"{n} (also known as {resolve_scope(n)})" if resolve_scope(n) != n else n
        for n in given
        if n not in tiers
    )


def scope_word(scope: str, words: Iterable[str]) -> str:
    """The name a tree's words (its declared or written scopes) give a scope:
    itself, else the legacy name of that tier (`nightly` for `L2`)."""
    known = set(words)
    if scope in known:
        return scope
    return next((n for n in sorted(known) if n != scope and resolve_scope(n) == scope), scope)


# Built-in defaults, used when a tree has no project config (format_version 1).
DEFAULT_TIME_LIMIT = 2700
DEFAULT_N_REPEAT = 5
DEFAULT_MAX_JOBS = 100_000
# The most jobs any tree may expand to, whatever its defaults.max_jobs says: a
# pull request controls the config, and each job costs memory (about 9 KB) and
# time; 500,000 jobs are sixteen times the largest tree we measure.
MAX_JOBS_CEILING = 500_000

# Placeholders the job launcher fills in at run time, not from recipe fields.
RUNTIME_PLACEHOLDERS: frozenset[str] = frozenset({"assets_dir", "artifacts_dir"})

CONFIG_FILENAME = "matrixgen.yaml"
QUARANTINE_FILENAME = "quarantine.yaml"
