"""Stage 4, quarantine: tracker-linked entries applied to the jobs of each target.

The quarantine file (`quarantine.yaml` at the root of a recipe tree) is a list of
entries. Each entry names its tracker, an owner, what it matches (model, test case
name or glob, platforms, environments, tags) and where it applies (systems and
scopes; absent means everywhere). In one target an entry either removes the job
(skip), keeps it running without blocking (allow-failure), or keeps it and acts on
pytest node ids inside it: deselects them (deselect), or runs them without
letting their failure fail the job (mute; the pytest plugin applies node-level
entries in the test process, docs/pytest-plugin.md). See the README, Task 3.

This module holds the entry values and the parsing of the file; the other rooms:
`apply` (what entries do to a selection), `checks` (validate's check), `audit`,
`trackers` (tracker references), `edit` (comment-keeping edits of the file),
`tracker` (the GitHub API), `propose` (drafts and lifts from the evidence).
Everything but `edit` and `tracker` is pure: values in, values out.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Callable, Container, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct
from msgspec.structs import asdict

from matrixgen.documents.yamlio import YamlDocument, parse_yaml
from matrixgen.engine.errors import Finding, Findings, Location, QuarantineError, Severity
from matrixgen.engine.model import Job, QuarantineMark
from matrixgen.engine.schemas import check_against_schema
from matrixgen.engine.vocab import (
    QUARANTINE_FILENAME,
    QuarantineAction,
    QuarantineKind,
    System,
    resolve_scope,
)
from matrixgen.quarantine.policy import parse_day, policy
from matrixgen.quarantine.trackers import ISSUE_NUMBER, resolve_tracker
from matrixgen.util.nodeid import is_node_id, node_id_problem
from matrixgen.util.patterns import whole
from matrixgen.util.textedit import split_lines
from matrixgen.util.values import ComparedValue

if TYPE_CHECKING:
    from matrixgen.engine.load import RecipeTree
    from matrixgen.quarantine.jobenv import JobIdentity

_NODE_LEVEL = frozenset(a.value for a in QuarantineAction if a.node_level)
_GLOB_CHARS = re.compile(r"[*?\[]")

# --------------------------------------------------------------------------- values


class Match(Struct, frozen=True, kw_only=True):
    """What an entry matches; an empty tuple means any value. `test_cases` holds
    one name or glob or more (the file's `test_case`: a string, or a list when
    one entry covers several test cases); a job matches when any of them does."""

    model: str | None = None
    test_cases: tuple[str, ...]
    platforms: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def test_case(self) -> str:
        """The test case(s) as a line shows them."""
        return ", ".join(self.test_cases)

    def matches(self, job: Job | JobIdentity, known_test_cases: Container[str]) -> bool:
        if self.model is not None and job.model != self.model:
            return False
        if self.platforms and job.platform not in self.platforms:
            return False
        if self.environments and job.environment not in self.environments:
            return False
        if self.tags and (job.tag or "") not in self.tags:
            return False
        return any(
            matches_test_case(pattern, job.test_case, known_test_cases)
            for pattern in self.test_cases
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields as the file writes them: an absent model or empty list left
        out, one test case as a string."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "test_cases":
                out["test_case"] = value[0] if len(value) == 1 else list(value)
            elif value not in (None, ()):
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


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


class Place(Struct, frozen=True, order=True):
    """One `where` item: a system, and a scope (resolved) or None for all its scopes."""

    system: System
    scope: str | None = None

    @classmethod
    def parse(cls, text: str) -> Place:
        system, _, scope = text.partition("/")
        return cls(System(system), resolve_scope(scope) if scope else None)

    def covers(self, system: System, scope: str | None) -> bool:
        if self.system is not system:
            return False
        return self.scope is None or (scope is not None and resolve_scope(scope) == self.scope)


class Entry(ComparedValue, frozen=True, kw_only=True):
    """One quarantine entry, as written in the file (tracker also resolved)."""

    id: str
    tracker: str  # as written: a URL or "#N"; "" when missing (an error)
    tracker_url: str | None  # resolved URL, None when "#N" has no tracker_base
    kind: QuarantineKind
    action: QuarantineAction
    match: Match
    where: tuple[Place, ...] = ()  # empty: everywhere
    where_text: tuple[str, ...] = ()  # as written, for messages and listings
    node_ids: tuple[str, ...] = ()
    owner: str = ""  # "" when missing (an error)
    added: dt.date | None = None
    expires: dt.date | None = None
    reason: str = ""
    index: int = 0  # position in the file's entries list
    location: Location = Location("")  # not compared: an entry moved in the file is the same

    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset({"location"})

    @property
    def tracker_ref(self) -> str:
        """What jobs carry: the resolved URL when known, else the reference as written."""
        return self.tracker_url or self.tracker

    def applies_in(self, system: System, scope: str | None) -> bool:
        return not self.where or any(place.covers(system, scope) for place in self.where)

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and self.expires < today

    def mark(self) -> QuarantineMark:
        return QuarantineMark(
            id=self.id,
            tracker=self.tracker_ref,
            action=self.action.value,
            kind=self.kind.value,
            node_ids=self.node_ids if self.action.node_level else (),
            muted=self.node_ids if self.action is QuarantineAction.MUTE else (),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry's fields as in the file (dates as YYYY-MM-DD), for `quarantine list`."""
        out: dict[str, Any] = {
            "id": self.id,
            "tracker": self.tracker,
            "tracker_url": self.tracker_url,
            "kind": self.kind.value,
            "action": self.action.value,
            "match": self.match.to_dict(),
            "where": list(self.where_text),
            "owner": self.owner,
            "added": self.added.isoformat() if self.added else None,
            "expires": self.expires.isoformat() if self.expires else None,
            "reason": self.reason,
        }
        if self.node_ids:
            out["node_ids"] = list(self.node_ids)
        return out


class QuarantineFile(Struct, frozen=True, kw_only=True):
    """A parsed quarantine file: usable entries, and every problem found."""

    path: str
    present: bool
    entries: tuple[Entry, ...] = ()
    findings: tuple[Finding, ...] = ()
    document: YamlDocument | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def by_id(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def refuse_errors(self, message: str) -> None:
        """A QuarantineError saying `message`, with the errors, when there are any."""
        if self.errors:
            raise QuarantineError(message, findings=self.errors)


# --------------------------------------------------------------------------- parsing


def load_quarantine(tree: RecipeTree) -> QuarantineFile:
    """The quarantine file of a loaded tree (its bytes were kept by load.py)."""
    raw = (tree.extra_files or {}).get(QUARANTINE_FILENAME)
    root = tree.root
    shown = (
        QUARANTINE_FILENAME if root in ("", ".") else f"{root.rstrip('/')}/{QUARANTINE_FILENAME}"
    )
    return _parse_cached(raw, shown, tracker_base=policy(tree.config).tracker_base)


def parse_quarantine(
    raw: bytes | None, path: str, *, tracker_base: str | None = None
) -> QuarantineFile:
    """Parse and check a quarantine file. Entries with a missing tracker or owner
    are kept (the audit lists them) but reported as errors; entries whose id,
    kind, action or match cannot be read are left out and reported."""
    if raw is None:
        return QuarantineFile(path=path, present=False)
    findings = Findings()
    try:
        document = parse_yaml(raw, path, findings)
    except ValueError:
        # PyYAML builds dates as it reads: `2025-13-01` raises instead of reporting.
        findings.add(_bad_date_location(raw, path), "yaml-date", "not a valid date (YYYY-MM-DD)")
        document = None
    if document is None and [f.code for f in findings.items] == ["file-empty"]:
        return QuarantineFile(path=path, present=True)  # empty, not broken
    entries: list[Entry] = []
    if document is not None and not isinstance(document.data, dict):
        findings.add(
            document.locate([]),
            "quarantine-type",
            "the quarantine file must be a mapping with an `entries:` list",
        )
    elif document is not None:
        _schema_findings(document, findings)
        raw_entries = document.data.get("entries")
        seen: dict[str, int] = {}
        for i, item in enumerate(raw_entries if isinstance(raw_entries, list) else ()):
            entry = _entry(item, i, document, tracker_base, findings)
            if entry is not None and entry.id in seen:
                findings.add(
                    document.locate(["entries", i, "id"]),
                    "quarantine-duplicate-id",
                    f'entry id "{entry.id}" is already used by entries[{seen[entry.id]}]',
                )
            elif entry is not None:
                seen[entry.id] = i
                entries.append(entry)
    return QuarantineFile(
        path=path,
        present=True,
        entries=tuple(entries),
        findings=tuple(findings.sorted()),
        document=document,
    )


# A file whose bytes did not change (the two sides of a diff) is parsed once.
_parse_cached = lru_cache(maxsize=64)(parse_quarantine)


def _bad_date_location(raw: bytes, path: str) -> Location:
    text = raw.decode("utf-8", "replace")
    for n, line in enumerate(split_lines(text), 1):
        for found in re.finditer(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", line):
            try:
                dt.date(*map(int, found.groups()))
            except ValueError:
                return Location(path, n, found.start() + 1)
    return Location(path)


def plain(value: Any, *, sparse: bool = False) -> Any:
    """Dates as YYYY-MM-DD text, as the schema describes them and JSON holds them;
    `sparse`: mappings without their empty values, as entries are compared."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {
            k: plain(v, sparse=sparse)
            for k, v in value.items()
            if not (sparse and v in (None, [], ()))
        }
    if isinstance(value, list | tuple):
        return [plain(v, sparse=sparse) for v in value]
    return value


# Rules this module states itself, each with a clearer message than the
# schema's: a missing or empty tracker or owner, node_ids missing or misplaced
# (`node_ids_misfit`), a node id that is not one (`node_id_problem`, with why),
# and `entries` that is not a list (with what to write instead).
OWN_FIELDS = ("tracker", "owner")
Subject = Callable[[Any, int], str]


def file_subject(entry_id: Any, index: int) -> str:
    """How messages name an entry of the file: by its id, else by its position."""
    return f'entry "{entry_id}"' if isinstance(entry_id, str) else f"entry entries[{index}]"


def node_ids_misfit(action: object, node_ids: Any) -> str | None:
    """ "missing" when a node-level action has no node ids, "misplaced" when
    node ids come with another action, else None. An action that is no string
    (a list, a mapping: the schema says what it should be) is no node-level one."""
    node_level = _node_level(action)
    if node_level and not node_ids:
        return "missing"
    if node_ids is not None and not node_level:
        return "misplaced"
    return None


def _node_level(action: object) -> bool:
    return isinstance(action, str) and action in _NODE_LEVEL


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _said_here(error: Any, entries: Any) -> bool:
    """Does a rule of this module report what this schema error reports?
    Decided on the error's keyword, value and path."""
    path = list(error.absolute_path)
    if path[:1] != ["entries"]:
        return False
    if not isinstance(entries, list):
        return True
    if len(path) == 2 and error.validator == "required":
        missing = error.validator_value[error.relative_schema_path[-1]]
        return missing in (*OWN_FIELDS, "node_ids")
    if len(path) == 3 and path[2] in OWN_FIELDS:
        return _blank(error.instance)
    return len(path) == 4 and path[2] == "node_ids" and error.validator == "pattern"


def _schema_findings(
    document: YamlDocument,
    findings: Findings,
    subject: Subject = file_subject,
    within: Sequence[str | int] = (),
) -> None:
    data = plain(document.data)
    items = data.get("entries") if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and not _node_level(item.get("action")):
            # Misplaced node_ids are said below; the schema's `not` would quote the
            # whole entry (cut at 200 characters) instead.
            item.pop("node_ids", None)
    entries = document.data.get("entries")
    check_against_schema(
        "quarantine",
        document,
        findings,
        data=data,
        leave_out=lambda error: _said_here(error, entries),
        within=within,
    )
    if "entries" in document.data and not isinstance(entries, list):
        kinds = {
            dict: "a mapping",
            str: "a string",
            bool: "a boolean",
            int: "a number",
            float: "a number",
        }
        what = "nothing (null)" if entries is None else kinds.get(type(entries), "no list")
        findings.add(
            document.locate(["entries"]),
            "quarantine-type",
            f"entries holds {what}: it must be a list of entries "
            "(write `entries: []` for an empty quarantine)",
        )
    if isinstance(entries, list):
        for i, item in enumerate(entries):
            if isinstance(item, dict):
                _entry_rules(item, i, document, findings, subject(item.get("id"), i))


def _entry_rules(
    item: Mapping[str, Any], i: int, document: YamlDocument, findings: Findings, name: str
) -> None:
    """The rules of one entry this module states itself (see OWN_FIELDS)."""
    action, node_ids = item.get("action"), item.get("node_ids")
    misfit = node_ids_misfit(action, node_ids)
    if misfit == "missing":
        what = "deselect" if action == QuarantineAction.DESELECT else "run muted"
        findings.add(
            document.locate(["entries", i, "action"]),
            "quarantine-node-ids",
            f"{name}: action {action} needs node_ids (the pytest node ids to {what})",
        )
    elif misfit == "misplaced":
        findings.add(
            document.locate(["entries", i, "node_ids"]),
            "quarantine-node-ids",
            f"{name}: node_ids only go with action deselect or mute "
            f"(this entry's action is {action})",
        )
    for j, node in enumerate(node_ids if isinstance(node_ids, list) else ()):
        problem = node_id_problem(node) if isinstance(node, str) and node else None
        if problem is not None:
            findings.add(
                document.locate(["entries", i, "node_ids", j]),
                "quarantine-node-ids",
                f'{name}: "{node}" is not a pytest node id: {problem}',
            )
    for key in OWN_FIELDS:
        if key not in item:
            findings.add(
                document.locate(["entries", i]),
                f"quarantine-no-{key}",
                f"{name} has no {key}: every entry needs one",
            )
        elif _blank(item[key]):
            hint = (
                ' (write it in quotes, tracker: "#123": a bare # starts a YAML comment)'
                if key == "tracker" and item[key] is None
                else ""
            )
            findings.add(
                document.locate(["entries", i, key]),
                f"quarantine-no-{key}",
                f"{name} has an empty {key}{hint}",
            )


def _strings(value: Any) -> tuple[str, ...]:
    """A list of non-empty strings (none when absent); ValueError for anything else."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ValueError(value)


def _date(value: Any) -> dt.date | None:
    """A date, None when absent; ValueError when unreadable."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        return parse_day(value)
    raise ValueError(value)


def _entry(
    item: Any,
    i: int,
    document: YamlDocument,
    tracker_base: str | None,
    findings: Findings,
    subject: Subject = file_subject,
) -> Entry | None:
    """An Entry when the fields that decide what it does are readable, else None
    (the schema check already said why)."""
    entry_id = item.get("id") if isinstance(item, dict) else None
    if not isinstance(entry_id, str) or not entry_id:
        return None
    try:
        kind = QuarantineKind(item.get("kind"))
        action = QuarantineAction(item.get("action"))
        match = _match(item.get("match"))
        node_ids = _strings(item.get("node_ids"))
        where_text = _strings(item.get("where"))
        where = tuple(Place.parse(w) for w in where_text)
        added, expires = _date(item.get("added")), _date(item.get("expires"))
    except ValueError:
        return None
    if not all(is_node_id(n) for n in node_ids):
        return None  # said by the check: such an entry would deselect a whole folder
    if added and expires and expires < added:
        findings.add(
            document.locate(["entries", i, "expires"]),
            "quarantine-dates",
            f"{subject(entry_id, i)} expires ({expires}) before it was added ({added})",
        )
    tracker = item.get("tracker")
    tracker = tracker.strip() if isinstance(tracker, str) else ""
    tracker_url = resolve_tracker(tracker, tracker_base) if tracker else None
    if tracker and tracker_url is None and not whole(ISSUE_NUMBER, tracker):
        findings.add(
            document.locate(["entries", i, "tracker"]),
            "quarantine-tracker",
            f'{subject(entry_id, i)}: tracker "{tracker}" is neither an issue URL nor "#N"',
        )
    owner = item.get("owner")
    reason = item.get("reason")
    return Entry(
        id=entry_id,
        tracker=tracker,
        tracker_url=tracker_url,
        kind=kind,
        action=action,
        match=match,
        where=where,
        where_text=where_text,
        node_ids=node_ids,
        owner=owner.strip() if isinstance(owner, str) else "",
        added=added,
        expires=expires,
        reason=reason if isinstance(reason, str) else "",
        index=i,
        location=document.locate(["entries", i]),
    )


def _match(value: Any) -> Match:
    """What an entry matches; ValueError when unreadable."""
    if not isinstance(value, dict):
        raise ValueError(value)
    test_case, model = value.get("test_case"), value.get("model")
    cases = (test_case,) if isinstance(test_case, str) else _strings(test_case)
    if not cases or not all(cases):
        raise ValueError(value)
    if model is not None and not isinstance(model, str):
        raise ValueError(value)
    return Match(
        test_cases=cases,
        model=model,
        platforms=_strings(value.get("platforms")),
        environments=_strings(value.get("environments")),
        tags=_strings(value.get("tags")),
    )


def entry_from_mapping(
    item: Mapping[str, Any],
    *,
    tracker_base: str | None = None,
    subject: Subject = file_subject,
    alone: bool = False,
) -> tuple[Entry | None, list[Finding]]:
    """One entry given as plain data (from the command line): the Entry, or None
    and what is wrong with it, with the same checks as the file's; `alone`:
    messages name paths inside the entry, not inside a file's `entries`."""
    document = YamlDocument(path="new entry", data={"entries": [dict(item)]}, root=None)
    findings = Findings()
    _schema_findings(document, findings, subject, ("entries", 0) if alone else ())
    entry = _entry(dict(item), 0, document, tracker_base, findings, subject)
    return entry, findings.sorted()
