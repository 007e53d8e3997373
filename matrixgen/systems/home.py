"""What a CI system's home declares about it: `Home`, one value per system
(docs/emitters.md). The parts of a home that need a higher floor are found by
their module name (`Home.part`), so the home itself imports nothing above util.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from msgspec import Struct, field

# The parts a home may have, by module name, and the floor each sits on
# (tests/test_layout.py holds the modules of systems/ to this).
PART_FLOORS: Mapping[str, str] = MappingProxyType(
    {
        "settings": "documents",
        "emitter": "emit",
        "outputs": "emit",
        "commands": "cli",
        # Megatron-LM's drop-in generator for the system (what its own CI writes).
        "megatron": "emit",
    }
)

# What a CI variable of a home is read for (`Home.variables`): the roles the
# rest of matrixgen asks `systems.ci` about.
VARIABLE_ROLES = frozenset(
    {
        "commit",  # the commit a job runs for
        "ref",  # the branch or tag the run is for
        "source",  # what started the run (the system's event name)
        "diff_base",  # the base revision of the merge request
        "workspace",  # the top of the checkout, for annotations
        "step_outputs",  # the file a step appends its outputs to
    }
)


class Home(Struct, frozen=True, kw_only=True):
    """One CI system: the facts the engine, the CLI and the readers use."""

    # The system's name as config, targets and command lines write it.
    name: str
    # Its name in prose (messages, help).
    label: str
    # The package that holds its parts (`matrixgen.systems.<name>`).
    package: str
    # The events the system reports (its event names, as `decide --event` takes them).
    events: tuple[str, ...]
    # The variable the system sets to "true" in every job it runs.
    job_variable: str
    # The tiers it runs unless a target says otherwise (a pattern of tier names);
    # None: every tier no other system claims.
    tiers: str | None
    # Scopes of another system's tiers this system runs too.
    also_runs: tuple[str, ...] = ()
    # Its CI variables by role (VARIABLE_ROLES): the only names of them matrixgen reads.
    variables: Mapping[str, str] = field(default_factory=dict)
    # The parts it has (PART_FLOORS keys): modules of `package`.
    parts: frozenset[str] = frozenset()
    # True: the system reads workflow commands on stdout as annotations of the
    # files findings name (`model.errors.annotation_lines`).
    annotates: bool = False
    # The option that appends step outputs to the file its `step_outputs`
    # variable names (its `outputs` part); None: the system has none.
    step_output_option: str | None = None
    # Commands of its `commands` part besides its own (named after the system),
    # as (name, function): listed after `decide` in help.
    commands: tuple[tuple[str, str], ...] = ()
    # A scope of the system that examples in help and messages name (`github/L1`).
    example_scope: str = ""
    # Where a checkout keeps the system's CI files (globs from its top).
    ci_files: tuple[str, ...] = ()
    # How a job of the system passes a pull request's labels as a JSON list
    # (`decide --labels-json`); None: the system has no such expression.
    labels_expression: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.variables) - VARIABLE_ROLES
        if unknown:
            raise ValueError(f"{self.name}: unknown variable roles {sorted(unknown)}")
        unknown = set(self.parts) - set(PART_FLOORS)
        if unknown:
            raise ValueError(f"{self.name}: unknown parts {sorted(unknown)}")

    def part(self, name: str) -> str | None:
        """The module of a part of the home (`matrixgen.systems.github.emitter`),
        None where the home has no such part."""
        return f"{self.package}.{name}" if name in self.parts else None
