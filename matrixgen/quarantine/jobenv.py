"""How a test process learns which quarantine entries concern it.

Node-level entries (pytest node ids) act inside the test process: the pytest
plugin reads the quarantine file named by QUARANTINE_VARIABLE and the job's
place and identity from the JOB_VARIABLES. A recipe's script sets them (see
docs/megatron.md); a job whose script never names QUARANTINE_VARIABLE cannot
honour a node-level entry, and emitters refuse to pretend it does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.model.vocab import QuarantineAction, System
from matrixgen.systems.ci import running
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.shellvars import exported

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.quarantine.model import Entry

QUARANTINE_VARIABLE = "MATRIXGEN_QUARANTINE"

# Field of the job -> the variable that carries it into the test process.
JOB_VARIABLES: dict[str, str] = {
    "system": "MATRIXGEN_SYSTEM",
    "scope": "MATRIXGEN_SCOPE",
    "platform": "MATRIXGEN_PLATFORM",
    "environment": "MATRIXGEN_ENVIRONMENT",
    "model": "MATRIXGEN_MODEL",
    "test_case": "MATRIXGEN_TEST_CASE",
    "tag": "MATRIXGEN_TAG",
}


def reaches_plugin(script_text: str) -> bool:
    """Whether a job's script hands the quarantine file to its test process: it
    exports QUARANTINE_VARIABLE with a value at its top level, as the shell
    reads the script (`util.shellvars`: a comment, an `echo` or a here-document
    that mentions the variable sets nothing)."""
    return bool(exported(script_text).get(QUARANTINE_VARIABLE))


def script_reaches_plugin(spec: Mapping[str, Any]) -> str | None:
    """None when the recipe's script hands the quarantine file to the pytest
    plugin; else why it does not (for a message). The job runs its setup, then its script."""
    parts = [spec.get("script_setup"), spec.get("script")]
    if reaches_plugin("\n".join(p for p in parts if isinstance(p, str))):
        return None
    return (
        f"never exports {QUARANTINE_VARIABLE} for the pytest plugin (an `export` line at "
        "its top level; a comment or a string that names the variable sets nothing)"
    )


# Fields a job must name; the tag is optional ("" or unset: the job has none),
# the system defaults to where the process runs (`systems.ci.running`).
REQUIRED_FIELDS = ("scope", "platform", "environment", "model", "test_case")

# The entry label a job carries in QUARANTINE_VARIABLE when no node-level entry
# applies to it: written and recognised by one rule (docs/pytest-plugin.md).
ENTRY_ID = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"  # the quarantine schema's id pattern
# A tracker as a job carries it: "#N", or a URL (its scheme in any case, as
# `trackers.resolve_tracker` takes it).
_TRACKER = r"(?:#[0-9]+|[A-Za-z][A-Za-z0-9+.-]*://\S+)"
_LABEL = name_pattern(rf"{ENTRY_ID}(?:, {ENTRY_ID})* {_TRACKER}(?:, {_TRACKER})*")


class IdentityError(ValueError):
    """A job variable is missing or holds a value that cannot be a job's."""


class JobIdentity(Struct, frozen=True, kw_only=True):
    """Where a test process runs and which job it is, as its variables say."""

    system: System | None  # None: not said (MATRIXGEN_SYSTEM unset, no CI marker)
    scope: str
    platform: str
    environment: str
    model: str
    test_case: str
    tag: str = ""

    def __str__(self) -> str:
        tag = f"[{self.tag}]" if self.tag else ""
        return (
            f"{self.model}/{self.test_case}{tag} on {self.platform}/{self.environment} "
            f"({self.system.value if self.system else 'system not set'}/{self.scope})"
        )


def identity_from(environ: Mapping[str, str]) -> JobIdentity:
    """The job's identity from its variables (JOB_VARIABLES); IdentityError
    naming every variable that is missing, or a system that is none."""
    values = {field: environ.get(name, "").strip() for field, name in JOB_VARIABLES.items()}
    missing = [JOB_VARIABLES[f] for f in REQUIRED_FIELDS if not values[f]]
    if missing:
        raise IdentityError(
            f"{', '.join(missing)} not set: with {QUARANTINE_VARIABLE} set, the job's "
            f"{', '.join(JOB_VARIABLES[f] for f in REQUIRED_FIELDS)} must be set too "
            "(docs/pytest-plugin.md)"
        )
    system_text = values.pop("system")
    if system_text:
        try:
            system = System(system_text)
        except ValueError:
            raise IdentityError(
                f"{JOB_VARIABLES['system']}={system_text!r}: expected "
                + " or ".join(s.value for s in System)
            ) from None
    else:
        # A CI marker only, never a default (docs/pytest-plugin.md, MATRIXGEN_SYSTEM).
        home = running(environ)
        system = System(home.name) if home is not None else None
    return JobIdentity(system=system, **values)


def identity_variables(identity: JobIdentity, quarantine_file: str) -> dict[str, str]:
    """The variables that hand a job's quarantine to its test process, in
    JOB_VARIABLES order (an empty tag left out)."""
    # str(): the system's value, System being a StrEnum.
    values = {name: str(getattr(identity, field)) for field, name in JOB_VARIABLES.items()}
    return {QUARANTINE_VARIABLE: quarantine_file} | {k: v for k, v in values.items() if v}


def entry_label(entry_ids: str, trackers: str) -> str:
    """`<entry id>[, <entry id>...] <tracker>[, <tracker>...]`: what a quarantined
    job carries (a QuarantineMark's id and tracker, each already joined)."""
    return f"{entry_ids} {trackers}".strip()


def is_entry_label(value: str) -> bool:
    """Whether a value of QUARANTINE_VARIABLE is an entry label (one that
    `entry_label` writes), not a file: its entry ids, a blank, then its
    trackers, whatever their spelling, on one line."""
    return whole(_LABEL, value.strip()) is not None


class QuarantineFileError(ValueError):
    """The quarantine file named by QUARANTINE_VARIABLE cannot be used."""


class JobQuarantine(Struct, frozen=True, kw_only=True):
    """The node-level entries of one job, read in its test process."""

    path: str
    identity: JobIdentity
    entries: tuple[Entry, ...]  # deselect and mute entries that apply, file order
    expired: tuple[Entry, ...] = ()  # ones that would apply but expired
    # Ones that apply on some systems only, to a job whose system is not said:
    # not applied (a gitlab/unit-tests entry must not act on GitHub's job).
    undecided: tuple[Entry, ...] = ()

    def node_actions(self) -> dict[str, Entry]:
        """node id -> the entry that decides it: a deselect entry wins over a mute
        entry, and of two entries of one action the first in the file."""
        out: dict[str, Entry] = {}
        for entry in sorted(
            self.entries, key=lambda e: (e.action is QuarantineAction.MUTE, e.index)
        ):
            for node in entry.node_ids:
                out.setdefault(node, entry)
        return out


class _TreeTestCases:
    """The test cases of the recipe tree beside the quarantine file, read only
    when a glob pattern needs them (an exact name must match only itself:
    Megatron-LM's unit-test buckets are named like globs)."""

    def __init__(self, tree_dir: Path) -> None:
        self.tree_dir = tree_dir

    def __contains__(self, name: object) -> bool:
        return name in self.names

    @cached_property
    def names(self) -> frozenset[str]:
        from matrixgen.engine.expand import expand_tree
        from matrixgen.engine.load import load_tree, read_directory
        from matrixgen.model.errors import MatrixgenError

        try:
            tree = load_tree(read_directory(self.tree_dir), root=str(self.tree_dir))
            return frozenset(j.test_case for j in expand_tree(tree).jobs)
        except (MatrixgenError, OSError):
            # No readable tree beside the file: a pattern is then read as a glob.
            return frozenset()


def _config(tree_dir: Path) -> ProjectConfig:
    """The project config beside the file (`open_project`), so that a "#N"
    tracker reaches the JUnit XML as its URL; the default config where there is
    none or it cannot be read: checking it is validate's work, not the test run's."""
    from matrixgen.documents.config import DEFAULT_CONFIG
    from matrixgen.model.errors import MatrixgenError
    from matrixgen.quarantine.project import open_project

    try:
        return open_project(tree_dir).config
    except (MatrixgenError, OSError):
        return DEFAULT_CONFIG


def load_job_quarantine(environ: Mapping[str, str]) -> JobQuarantine | None:
    """The node-level entries that apply to the job the variables name, or None
    when QUARANTINE_VARIABLE is unset, empty, or holds an entry label (see
    `is_entry_label`). QuarantineFileError for a file that is missing, not a
    regular file, or has errors; IdentityError for missing job variables."""
    from matrixgen.quarantine.model import read_quarantine
    from matrixgen.quarantine.policy import current_day
    from matrixgen.util.readfile import NotRegularFile, read_regular

    value = environ.get(QUARANTINE_VARIABLE, "").strip()
    if not value:
        return None
    path = Path(value)
    try:
        raw = read_regular(Path(os.path.realpath(path)))
    except NotRegularFile as exc:
        raise QuarantineFileError(f"{QUARANTINE_VARIABLE}={value}: {exc.strerror}") from None
    except OSError as exc:
        raise QuarantineFileError(
            f"{QUARANTINE_VARIABLE}={value}: cannot be read: {exc.strerror}"
        ) from None
    if raw is None:
        if is_entry_label(value):
            return None
        raise QuarantineFileError(
            f"{QUARANTINE_VARIABLE}={value}: no such file (it must name the quarantine "
            "file, e.g. tests/test_utils/recipes/quarantine.yaml)"
        )
    identity = identity_from(environ)
    qfile = read_quarantine(raw, value, _config(path.parent))
    if qfile.errors:
        shown = "; ".join(str(f) for f in qfile.errors[:3])
        more = f"; and {len(qfile.errors) - 3} more" if len(qfile.errors) > 3 else ""
        raise QuarantineFileError(
            f"{len(qfile.errors)} error(s) in the quarantine file: {shown}{more} "
            "(matrixgen validate shows every finding)"
        )
    today = current_day()
    known = _TreeTestCases(path.parent)
    applying: list[Entry] = []
    expired: list[Entry] = []
    undecided: list[Entry] = []
    for entry in qfile.entries:
        if not entry.action.node_level or not entry.match.matches(identity, known):
            continue
        systems = [s for s in System if entry.applies_in(s, identity.scope)]
        if identity.system is None and systems and len(systems) < len(System):
            undecided.append(entry)
        elif (identity.system in systems) if identity.system else systems:
            (expired if entry.expired(today) else applying).append(entry)
    return JobQuarantine(
        path=value,
        identity=identity,
        entries=tuple(applying),
        expired=tuple(expired),
        undecided=tuple(undecided),
    )
