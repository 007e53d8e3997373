"""The quarantine file (`quarantine.yaml` at the root of a recipe tree), declared once.

`QuarantineDocument` is the file, `EntryFields` one entry as the file writes it
(its fields in the order written), `Match` what an entry matches. The schema, the
reading, `quarantine add` and `quarantine list` all come from these declarations
(docs/architecture.md, "Where a change goes").
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Container, Mapping
from typing import Annotated, Any, ClassVar, Protocol

from msgspec import Meta

from matrixgen.model.sections import NON_BLANK, Text, Unique, whole
from matrixgen.model.vocab import QuarantineAction, QuarantineKind, System
from matrixgen.systems import example_places
from matrixgen.util.nodeid import NODE_ID_PATTERN
from matrixgen.util.values import ComparedValue

_GLOB_CHARS = re.compile(r"[*?\[]")
NODE_LEVEL = tuple(a.value for a in QuarantineAction if a.node_level)

Names = Annotated[tuple[Text, ...], Meta(min_length=1), Unique]


# Places of the first and last system, as the schema's examples name them.
_FIRST, _LAST = example_places()[0], example_places()[-1]


class JobLike(Protocol):
    """What an entry's match looks at: a job, or the identity of the one running."""

    @property
    def model(self) -> str: ...
    @property
    def test_case(self) -> str: ...
    @property
    def platform(self) -> str: ...
    @property
    def environment(self) -> str: ...
    @property
    def tag(self) -> str | None: ...


class Match(
    ComparedValue, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """What an entry matches; an empty tuple means any value. `test_case` is one
    name or glob, or a list of them (one entry covering several test cases): a
    job matches when any of them does."""

    model: Text | None = None
    test_case: Text | Annotated[tuple[Text, ...], Meta(min_length=2), Unique]
    platforms: Names = ()
    environments: Names = ()
    tags: Names = ()

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "test_case": "A test case name, or a glob (fnmatch: *, ?, [..]) when no test case has "
        "exactly this name; or a list of them (the entry covers every test case any of them "
        "matches)."
    }

    @property
    def test_cases(self) -> tuple[str, ...]:
        """The test case names and globs, one or more."""
        return (self.test_case,) if isinstance(self.test_case, str) else self.test_case

    def matches(self, job: JobLike, known_test_cases: Container[str]) -> bool:
        return (
            (self.model is None or job.model == self.model)
            and (not self.platforms or job.platform in self.platforms)
            and (not self.environments or job.environment in self.environments)
            and (not self.tags or (job.tag or "") in self.tags)
            and any(matches_test_case(p, job.test_case, known_test_cases) for p in self.test_cases)
        )


def is_glob(pattern: str) -> bool:
    """Whether a test case pattern holds glob characters (*, ?, [)."""
    return bool(_GLOB_CHARS.search(pattern))


def matches_test_case(pattern: str, test_case: str, known: Container[str]) -> bool:
    """Exact name first: Megatron-LM's unit-test buckets are named like globs
    (`tests/unit_tests/models/**/*.py`), and such a name must select only itself."""
    if pattern == test_case:
        return True
    if pattern in known or not _GLOB_CHARS.search(pattern):
        return False
    return fnmatch.fnmatchcase(test_case, pattern)


# Kept by the reader when missing or blank (the audit lists such entries), so
# their rule is the schema's alone: `required`, and a non-empty string.
def _kept_text(description: str | None = None) -> Any:
    schema: dict[str, Any] = {"minLength": 1}
    if description:
        schema["description"] = description
    return Meta(extra_json_schema=schema, extra={"required": True})


_PLACE = whole(f"({'|'.join(s.value for s in System)})(/{NON_BLANK}+)?")


class EntryFields(ComparedValue, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One quarantine entry, as the file writes it (and in that order)."""

    id: Annotated[
        str,
        Meta(
            pattern=whole("[A-Za-z0-9][A-Za-z0-9_.+-]*"),
            max_length=128,
            description="Stable, unique name of the entry: `matrixgen quarantine remove ID`.",
        ),
    ]
    tracker: Annotated[
        str | None,
        _kept_text(
            'Issue URL, or "#N" (quoted: a bare # starts a YAML comment) resolved against '
            "quarantine.tracker_base in matrixgen.yaml."
        ),
    ] = None
    kind: QuarantineKind
    action: Annotated[
        QuarantineAction,
        Meta(
            description="skip: the job leaves the target; allow-failure: it runs without "
            "blocking; deselect: it runs without the pytest node ids in node_ids; mute: it "
            "runs them, and their failures are reported (and marked quarantined in the JUnit "
            "XML) without failing the job."
        ),
    ]
    match: Match
    where: Annotated[
        tuple[Annotated[str, Meta(pattern=_PLACE)], ...],
        Meta(
            min_length=1,
            extra_json_schema={
                "uniqueItems": True,
                "description": "Systems and scopes the entry applies to "
                f"({', '.join(example_places())}, {_LAST}-slim, or a whole system: "
                f"{_LAST.split('/')[0]}). Absent: everywhere. Legacy scope names resolve "
                f"({_FIRST.split('/')[0]}/mr-github is {_FIRST}).",
            },
        ),
    ] = ()
    node_ids: Annotated[
        tuple[Annotated[str, Meta(min_length=1, pattern=NODE_ID_PATTERN)], ...],
        Meta(
            min_length=1,
            extra_json_schema={
                "uniqueItems": True,
                "description": "pytest node ids to deselect or mute (path::name[::name...], with "
                "an optional [parameters] part; never a bare path or directory); required with "
                "action deselect or mute, and only there.",
            },
        ),
    ] = ()
    owner: Annotated[str | None, _kept_text()] = None
    added: dt.date | None = None
    expires: dt.date | None = None
    reason: Annotated[str | None, _kept_text()] = None

    SCHEMA: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"action": {"enum": list(NODE_LEVEL)}}, "required": ["action"]},
        "then": {"required": ["node_ids"]},
        "else": {"not": {"required": ["node_ids"]}},
    }
    SCHEMA_NAME: ClassVar[str] = "entry"


class QuarantineDocument(ComparedValue, frozen=True, kw_only=True, forbid_unknown_fields=True):
    entries: tuple[EntryFields, ...]

    SCHEMA: ClassVar[dict[str, Any]] = {
        "$id": "https://matrixgen.invalid/schema/quarantine.schema.json",
        "title": "matrixgen quarantine file (quarantine.yaml at the root of a recipe tree)",
        "description": "Tracker-linked entries that take jobs out of targets (skip), keep them "
        "running without blocking (allow-failure), deselect single pytest node ids (deselect), "
        "or run them without letting their failure fail the job (mute). Edit it with "
        "`matrixgen quarantine add/remove/lift`.",
    }
