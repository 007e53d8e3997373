"""Every command and command group of `matrixgen`, in help's order (docs/architecture.md).

A command is named by its module and function, imported only when an app that
holds it is built (`main.app_for` builds the one a command line names)."""

from __future__ import annotations

from msgspec import Struct

from matrixgen.systems import HOMES, assumed_first


class Command(Struct, frozen=True):
    name: str
    module: str
    function: str
    #: The module attribute that holds the command's help, when its function's
    #: docstring does not (a help made from other text).
    help_attr: str | None = None


class Group(Struct, frozen=True):
    name: str
    subject: str
    commands: tuple[Command, ...]

    def summary(self) -> str:
        return f"{self.subject}: {', '.join(c.name for c in self.commands)}."

    def command(self, name: str) -> Command | None:
        return next((c for c in self.commands if c.name == name), None)


class Alias(Struct, frozen=True):
    """A top-level spelling of a group's command, kept working and hidden from help."""

    name: str
    group: str
    command: str


_Q = "matrixgen.cli.quarantine"

CLI: tuple[Command | Group | Alias, ...] = (
    Command("validate", "matrixgen.cli.main", "validate"),
    Command("list", "matrixgen.cli.main", "list_jobs"),
    # Each CI system's own command, named after it (its home's `commands`).
    *(Command(h.name, h.part("commands") or "", "emit") for h in HOMES if h.part("commands")),
    Command("generate", "matrixgen.cli.emit", "generate"),
    Command("diff", "matrixgen.cli.diff", "diff_command", help_attr="DIFF_HELP"),
    Command("pins", "matrixgen.cli.project", "pins"),
    Command("graph", "matrixgen.cli.project", "graph"),
    Command("stats", "matrixgen.cli.project", "stats"),
    Command("coverage", "matrixgen.cli.coverage", "coverage", help_attr="COVERAGE_HELP"),
    Command("decide", "matrixgen.cli.decide", "decide_command"),
    # The other commands of each system's home (Megatron-LM's drop-ins).
    *(Command(n, h.part("commands") or "", f) for h in assumed_first() for n, f in h.commands),
    Command("report", "matrixgen.cli.report", "report"),
    # The old spellings (hidden; typer holds commands before groups).
    Alias("migrate", "quarantine", "migrate"),
    Alias("flaky", "results", "flaky"),
    Alias("triage", "results", "triage"),
    Group(
        "quarantine",
        "Tracker-linked quarantine entries",
        (
            Command("add", f"{_Q}.entries", "add"),
            Command("remove", f"{_Q}.entries", "remove"),
            Command("lift", f"{_Q}.entries", "lift"),
            Command("list", f"{_Q}.entries", "list_entries"),
            Command("audit", f"{_Q}.review", "audit"),
            Command("propose", f"{_Q}.review", "propose"),
            Command("migrate", f"{_Q}.migrate", "migrate"),
        ),
    ),
    Group(
        "results",
        "The results store of JUnit XML reports of CI runs",
        (
            Command("ingest", "matrixgen.cli.results", "ingest"),
            Command("prune", "matrixgen.cli.results", "prune"),
            Command("flaky", "matrixgen.cli.results", "flaky"),
            Command("triage", "matrixgen.cli.triage", "triage"),
        ),
    ),
)


def top_level_names() -> list[str]:
    return [entry.name for entry in CLI]


def entry(name: str) -> Command | Group | Alias | None:
    return next((e for e in CLI if e.name == name), None)


def aliased(alias: Alias) -> Command:
    """The group's command an alias runs."""
    group = entry(alias.group)
    found = group.command(alias.command) if isinstance(group, Group) else None
    if found is None:
        raise KeyError(f"{alias.group} {alias.command}")
    return found
