"""Stage 4, quarantine: tracker-linked entries applied to the jobs of each target.

The file's shape is declared once, in documents/quarantine.py; this module reads
it (the schema says what is wrong with the shape, the rules here what no schema
states: a missing tracker or owner, node ids, duplicate ids, dates in order, a
tracker's form) and makes each entry an Entry. Actions: docs/security.md.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct
from msgspec.structs import asdict

from matrixgen.documents.quarantine import NODE_LEVEL, EntryFields, QuarantineDocument
from matrixgen.documents.schema import DecodeError, check_document, decode
from matrixgen.documents.yamlio import YamlDocument, parse_yaml
from matrixgen.model.errors import Finding, Findings, Location, QuarantineError, Severity
from matrixgen.model.vocab import (
    QUARANTINE_FILENAME,
    QuarantineAction,
    System,
    resolve_scope,
)
from matrixgen.quarantine.policy import policy
from matrixgen.quarantine.trackers import (
    ISSUE_NUMBER,
    canonical_url,
    issue_number,
    resolve_tracker,
    tracker_key,
    tracker_text,
)
from matrixgen.util.nodeid import node_id_problem
from matrixgen.util.patterns import whole
from matrixgen.util.textedit import split_lines
from matrixgen.util.values import JsonLayout

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.engine.load import RecipeTree

# --------------------------------------------------------------------------- values


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


class Entry(EntryFields, frozen=True, kw_only=True):
    """One quarantine entry: its fields as the file writes them (tracker, owner
    and reason "" when missing: an error), and what reading resolved."""

    tracker: str = ""  # as written: a URL or "#N"
    owner: str = ""
    reason: str = ""
    tracker_url: str | None = None  # resolved URL, None when "#N" has no tracker_base
    places: tuple[Place, ...] = ()  # `where` read; empty: everywhere
    index: int = 0  # position in the file's entries list
    location: Location = Location("")  # not compared: an entry moved in the file is the same

    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset({"location"})
    # `quarantine list --format json`: the fields as the file writes them, the
    # resolved tracker after the tracker, node ids last and only when there are some.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        leave_out=frozenset({"places", "index", "location"}),
        after=(("tracker_url", "tracker"),),
        last=("node_ids",),
        when_set=frozenset({"node_ids"}),
    )

    @property
    def tracker_ref(self) -> str:
        """What jobs carry: the resolved URL when known, else the reference as written."""
        return self.tracker_url or self.tracker

    def applies_in(self, system: System, scope: str | None) -> bool:
        return not self.places or any(place.covers(system, scope) for place in self.places)

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and self.expires < today


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
        if self.errors:
            raise QuarantineError(message, findings=self.errors)


# --------------------------------------------------------------------------- parsing


def load_quarantine(tree: RecipeTree) -> QuarantineFile:
    raw = (tree.extra_files or {}).get(QUARANTINE_FILENAME)
    root = tree.root
    shown = (
        QUARANTINE_FILENAME if root in ("", ".") else f"{root.rstrip('/')}/{QUARANTINE_FILENAME}"
    )
    return read_quarantine(raw, shown, tree.config)


def read_quarantine(raw: bytes | None, path: str, config: ProjectConfig) -> QuarantineFile:
    """A project's quarantine file (its bytes, None when absent), read with its
    config: a "#N" tracker resolves against the config's tracker_base. Bytes
    read before (the two sides of a diff) are not parsed again."""
    return _parse_cached(raw, path, tracker_base=policy(config).tracker_base)


def parse_quarantine(
    raw: bytes | None, path: str, *, tracker_base: str | None = None
) -> QuarantineFile:
    """Entries with a missing tracker or owner are kept (the audit lists them)
    but reported as errors; entries whose id, kind, action or match cannot be
    read are left out and reported."""
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
    return isinstance(action, str) and action in NODE_LEVEL


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
    check_document(
        QuarantineDocument,
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


def _entry(
    item: Any,
    i: int,
    document: YamlDocument,
    tracker_base: str | None,
    findings: Findings,
    subject: Subject = file_subject,
) -> Entry | None:
    """An Entry when its fields read as declared (EntryFields), tracker, owner and
    reason kept even when missing; else None, and a finding when the schema's
    check said nothing at the entry (what it refused, where)."""
    where = ("entries", i)
    try:
        fields = decode(item, EntryFields, document, where)
    except DecodeError as exc:
        if not _said_at(findings, document, i):
            findings.add(exc.location, "schema", exc.message)
        return None
    if fields.added and fields.expires and fields.expires < fields.added:
        findings.add(
            document.locate([*where, "expires"]),
            "quarantine-dates",
            f"{subject(fields.id, i)} expires ({fields.expires}) before it was added "
            f"({fields.added})",
        )
    tracker = (fields.tracker or "").strip()
    tracker_url = resolve_tracker(tracker, tracker_base) if tracker else None
    if tracker and tracker_url is None and not whole(ISSUE_NUMBER, tracker):
        findings.add(
            document.locate([*where, "tracker"]),
            "quarantine-tracker",
            f'{subject(fields.id, i)}: tracker "{tracker}" is neither an issue URL nor "#N"',
        )
    return Entry(
        **{
            **asdict(fields),
            "tracker": tracker,
            "owner": (fields.owner or "").strip(),
            "reason": fields.reason or "",
        },
        tracker_url=tracker_url,
        places=tuple(Place.parse(w) for w in fields.where),
        index=i,
        location=document.locate(where),
    )


def _said_at(findings: Findings, document: YamlDocument, i: int) -> bool:
    """Is an error already reported inside entry i (from its first line to the
    next entry's)? The schema's check and this module's rules say why an entry
    is left out; a value only msgspec refuses (a quoted date that is none,
    `"2025-02-30"`) is said by the decoding."""
    start = document.locate(["entries", i])
    after = document.locate(["entries", i + 1])
    end = (after.line, after.column) if after != document.locate(["entries"]) else None
    return any(
        f.severity is Severity.ERROR
        and f.location.file == start.file
        and (f.location.line, f.location.column) >= (start.line, start.column)
        and (end is None or (f.location.line, f.location.column) < end)
        for f in findings.items
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


def entries_tracked_by(entries: Iterable[Entry], ref: str, tracker_base: str | None) -> list[Entry]:
    """The entries of one tracker, however it is spelled (`7201`, `#7201`, URL).

    Without a tracker base a bare number still finds entries whose tracker URL
    is a GitHub-style issue (`/OWNER/REPO/issues/N`, no query or fragment) of
    that number, when those URLs are all one; when they are several, which one
    is meant is unclear (ValueError)."""
    entries = list(entries)
    key = tracker_key(ref, tracker_base)
    found = [e for e in entries if tracker_key(e.tracker, tracker_base) == key]
    number = whole(ISSUE_NUMBER, tracker_text(ref))
    if found or number is None or tracker_base:
        return found
    by_url: dict[str, list[Entry]] = {}
    for entry in entries:
        url = canonical_url(entry.tracker_url) if entry.tracker_url else None
        if url is not None and issue_number(url) == number[1]:
            by_url.setdefault(url, []).append(entry)
    if len(by_url) > 1:
        raise ValueError(
            f"{ref} is ambiguous without a tracker base: it could be {', '.join(sorted(by_url))}"
        )
    return next(iter(by_url.values()), [])
