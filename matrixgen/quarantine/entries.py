"""Stage 4, quarantine: tracker-linked entries applied to the jobs of each target.

The quarantine file (`quarantine.yaml` at the root of a recipe tree) is a list of
entries. Each entry names its tracker, an owner, what it matches (model, test case
name or glob, platforms, environments, tags) and where it applies (systems and
scopes; absent means everywhere). In one target an entry either removes the job
(skip), keeps it running without blocking (allow-failure), or keeps it and acts on
pytest node ids inside it: deselects them (deselect), or runs them without
letting their failure fail the job (mute; the pytest plugin applies node-level
entries in the test process, docs/pytest-plugin.md). See docs/quarantine.md.

Everything here is pure: parsing, matching and checking take values and return
values; editing the file lives in quarantine_edit.py, tracker lookups in tracker.py.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.engine.errors import Finding, Findings, Location, Severity, UsageError, did_you_mean
from matrixgen.engine.model import Job, QuarantineMark, Selector, Target
from matrixgen.engine.schemas import check_against_schema
from matrixgen.engine.select import select
from matrixgen.engine.targets import checked_targets, default_system, target_name
from matrixgen.engine.vocab import (
    LEGACY_SCOPE_ALIASES,
    QUARANTINE_FILENAME,
    QuarantineAction,
    QuarantineKind,
    System,
    resolve_scope,
)
from matrixgen.engine.yamlio import YamlDocument, parse_yaml
from matrixgen.util.nodeid import is_node_id, node_id_problem
from matrixgen.util.patterns import NON_BLANK, name_pattern, whole
from matrixgen.util.values import ComparedValue

if TYPE_CHECKING:
    from matrixgen.engine.config import ProjectConfig
    from matrixgen.engine.context import ValidationContext
    from matrixgen.engine.load import RecipeTree
    from matrixgen.quarantine.jobenv import JobIdentity

DEFAULT_GRACE_DAYS = 14
DEFAULT_EXPIRY_DAYS = 30
DEFAULT_API_URL = "https://api.github.com"

# When several entries apply to one job in one target, the strongest action wins.
ACTION_STRENGTH = {
    QuarantineAction.SKIP: 0,
    QuarantineAction.ALLOW_FAILURE: 1,
    QuarantineAction.DESELECT: 2,
    QuarantineAction.MUTE: 3,
}
_NODE_LEVEL = frozenset(a.value for a in QuarantineAction if a.node_level)
_GLOB_CHARS = re.compile(r"[*?\[]")
_ISSUE_NUMBER = name_pattern(r"#(\d+)")
_HTTP_URL = name_pattern(f"https?://{NON_BLANK}+", re.IGNORECASE)
# Schema findings about a missing tracker or owner, said more clearly below.
_SAID_BELOW = re.compile(r"entries/\d+/(tracker|owner): (None |'' should be)")


# --------------------------------------------------------------------------- values


class Policy(Struct, frozen=True, kw_only=True):
    """The `quarantine` section of the project config, with defaults."""

    tracker_base: str | None = None
    default_owner: str | None = None  # `add` and `migrate` when no owner is given
    grace_days: int = DEFAULT_GRACE_DAYS
    default_expiry_days: int = DEFAULT_EXPIRY_DAYS


TODAY_VARIABLE = "MATRIXGEN_TODAY"


def current_day() -> dt.date:
    """The day expiry is judged against: $MATRIXGEN_TODAY (YYYY-MM-DD) when set, so
    a past CI run can be reproduced and tests do not age; else the calendar's."""
    import os

    value = os.environ.get(TODAY_VARIABLE)
    if not value:
        return dt.date.today()
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{TODAY_VARIABLE}={value!r}: expected a date like 2026-12-01") from None


def policy(config: ProjectConfig) -> Policy:
    section = config.section("quarantine")
    return Policy(
        tracker_base=section.get("tracker_base"),
        default_owner=section.get("default_owner"),
        grace_days=section.get("grace_days", DEFAULT_GRACE_DAYS),
        default_expiry_days=section.get("default_expiry_days", DEFAULT_EXPIRY_DAYS),
    )


class Match(Struct, frozen=True, kw_only=True):
    """What an entry matches; an empty tuple means any value."""

    test_case: str
    model: str | None = None
    platforms: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def is_glob(self) -> bool:
        return bool(_GLOB_CHARS.search(self.test_case))

    def matches(self, job: Job | JobIdentity, known_test_cases: Container[str]) -> bool:
        if self.model is not None and job.model != self.model:
            return False
        if self.platforms and job.platform not in self.platforms:
            return False
        if self.environments and job.environment not in self.environments:
            return False
        if self.tags and (job.tag or "") not in self.tags:
            return False
        return matches_test_case(self.test_case, job.test_case, known_test_cases)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.model is not None:
            out["model"] = self.model
        out["test_case"] = self.test_case
        for key in ("platforms", "environments", "tags"):
            values = getattr(self, key)
            if values:
                out[key] = list(values)
        return out


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

    def __str__(self) -> str:
        return f"{self.system.value}/{self.scope}" if self.scope else self.system.value


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
    location: Location = Location("")  # not compared: where the file holds it

    def compared(self) -> tuple:
        """Every field but `location`: an entry moved in the file is the same entry."""
        return (
            self.id,
            self.tracker,
            self.tracker_url,
            self.kind,
            self.action,
            self.match,
            self.where,
            self.where_text,
            self.node_ids,
            self.owner,
            self.added,
            self.expires,
            self.reason,
            self.index,
        )

    @property
    def tracker_ref(self) -> str:
        """What jobs carry: the resolved URL when known, else the reference as written."""
        return self.tracker_url or self.tracker

    def applies_in(self, system: System, scope: str | None) -> bool:
        return not self.where or any(place.covers(system, scope) for place in self.where)

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and self.expires < today

    def mark(self) -> QuarantineMark:
        node_level = self.action.node_level
        return QuarantineMark(
            id=self.id,
            tracker=self.tracker_ref,
            action=self.action.value,
            kind=self.kind.value,
            node_ids=self.node_ids if node_level else (),
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


EMPTY = QuarantineFile(path=QUARANTINE_FILENAME, present=False)


# --------------------------------------------------------------------------- trackers


def resolve_tracker(ref: str, tracker_base: str | None) -> str | None:
    """`#N` -> tracker_base + N; a URL stays; anything else cannot be resolved."""
    ref = ref.strip()
    number = whole(_ISSUE_NUMBER, ref)
    if number:
        if not tracker_base:
            return None
        return tracker_base.rstrip("/") + "/" + number[1]
    if whole(_HTTP_URL, ref):
        return ref.rstrip("/")
    return None


def same_tracker(a: str, b: str, tracker_base: str | None) -> bool:
    """`#7201`, `7201` and its URL name the same tracker."""
    return _tracker_key(a, tracker_base) == _tracker_key(b, tracker_base)


def _tracker_key(ref: str, tracker_base: str | None) -> str:
    ref = ref.strip()
    if ref.isdigit():
        ref = "#" + ref
    resolved = resolve_tracker(ref, tracker_base)
    return _url_key(resolved) if resolved else ref


def entries_tracked_by(entries: Iterable[Entry], ref: str, tracker_base: str | None) -> list[Entry]:
    """The entries of one tracker, however it is spelled (`7201`, `#7201`, URL).

    Without a tracker base a bare number still finds entries whose tracker URL
    ends in that issue number, when those URLs all name one repository; when
    they name several, which one is meant is unclear (ValueError)."""
    entries = list(entries)
    found = [e for e in entries if same_tracker(e.tracker, ref, tracker_base)]
    number = whole(_ISSUE_NUMBER, "#" + ref.strip() if ref.strip().isdigit() else ref.strip())
    if found or number is None or tracker_base:
        return found
    by_number: dict[str, list[Entry]] = {}
    for entry in entries:
        key = _url_key(entry.tracker_url) if entry.tracker_url else ""
        issue = whole(_ISSUE_PATH, key[key.find("/") :]) if "/" in key else None
        if issue and issue[3] == number[1]:
            by_number.setdefault(key, []).append(entry)
    if len(by_number) > 1:
        urls = ", ".join(sorted(e[0].tracker_url or "" for e in by_number.values()))
        raise ValueError(f"{ref} is ambiguous without a tracker base: it could be {urls}")
    return next(iter(by_number.values()), [])


_ISSUE_PATH = name_pattern(r"/([^/]+)/([^/]+)/(?:issues|pull)/(\d+)/?")


def _url_key(url: str) -> str:
    """What tells two spellings of one issue URL apart from another issue: not
    the scheme, the host's case, a query, a fragment (a comment link) or a
    trailing slash; on GitHub-style paths neither owner/repo case nor
    issues-vs-pull (one number space)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    if parts.port:
        host = f"{host}:{parts.port}"
    path = parts.path.rstrip("/")
    issue = whole(_ISSUE_PATH, path)
    if issue:
        path = f"/{issue[1].lower()}/{issue[2].lower()}/issues/{issue[3]}"
    return f"{host}{path}"


# --------------------------------------------------------------------------- parsing


def load_quarantine(tree: RecipeTree) -> QuarantineFile:
    """The quarantine file of a loaded tree (its bytes were kept by load.py)."""
    extra = tree.extra_files or {}
    raw = extra.get(QUARANTINE_FILENAME)
    root = tree.root
    shown = (
        QUARANTINE_FILENAME if root in ("", ".") else f"{root.rstrip('/')}/{QUARANTINE_FILENAME}"
    )
    return _parse_cached(raw, shown, policy(tree.config).tracker_base)


@lru_cache(maxsize=64)
def _parse_cached(raw: bytes | None, path: str, tracker_base: str | None) -> QuarantineFile:
    return parse_quarantine(raw, path, tracker_base=tracker_base)


def parse_quarantine(
    raw: bytes | None, path: str, *, tracker_base: str | None = None
) -> QuarantineFile:
    """Parse and check a quarantine file. Entries with a missing tracker or owner
    are kept (the audit lists them) but reported as errors; entries whose id,
    kind, action or match cannot be read are left out and reported."""
    if raw is None:
        return replace(EMPTY, path=path)
    findings = Findings()
    try:
        document = parse_yaml(raw, path, findings)
    except ValueError:
        # PyYAML builds dates as it reads: `2025-13-01` raises instead of reporting.
        findings.add(_bad_date_location(raw, path), "yaml-date", "not a valid date (YYYY-MM-DD)")
        document = None
    if document is None:
        # An empty file is an empty quarantine, not a broken one.
        if [f.code for f in findings.items] == ["file-empty"]:
            return QuarantineFile(path=path, present=True)
        return QuarantineFile(path=path, present=True, findings=tuple(findings.sorted()))
    data = document.data
    if not isinstance(data, dict):
        findings.add(
            document.locate([]),
            "quarantine-type",
            "the quarantine file must be a mapping with an `entries:` list",
        )
        return QuarantineFile(
            path=path, present=True, findings=tuple(findings.sorted()), document=document
        )
    _schema_findings(document, findings)
    raw_entries = data.get("entries") or []
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    if isinstance(raw_entries, list):
        for i, item in enumerate(raw_entries):
            entry = _entry(item, i, document, tracker_base, findings)
            if entry is None:
                continue
            if entry.id in seen:
                findings.add(
                    document.locate(["entries", i, "id"]),
                    "quarantine-duplicate-id",
                    f'entry id "{entry.id}" is already used by entries[{seen[entry.id]}]',
                )
                continue
            seen[entry.id] = i
            entries.append(entry)
    return QuarantineFile(
        path=path,
        present=True,
        entries=tuple(entries),
        findings=tuple(findings.sorted()),
        document=document,
    )


def _bad_date_location(raw: bytes, path: str) -> Location:
    text = raw.decode("utf-8", "replace")
    for n, line in enumerate(text.splitlines(), 1):
        for found in re.finditer(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", line):
            try:
                dt.date(*map(int, found.groups()))
            except ValueError:
                return Location(path, n, found.start() + 1)
    return Location(path)


def _plain(value: Any) -> Any:
    """Dates as YYYY-MM-DD text, as the schema describes them."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _schema_findings(document: YamlDocument, findings: Findings) -> None:
    found = Findings()
    data = _plain(document.data)
    items = data.get("entries") if isinstance(data, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("action") not in _NODE_LEVEL:
            # Misplaced node_ids are said below; the schema's `not` would quote the
            # whole entry (cut at 200 characters) instead.
            item.pop("node_ids", None)
    check_against_schema("quarantine", document, found, data=data)
    entries = document.data.get("entries")
    for finding in found.items:
        # Missing trackers and owners get their own clearer message (below).
        if "'tracker' is a required property" in finding.message:
            continue
        if "'owner' is a required property" in finding.message:
            continue
        if _SAID_BELOW.match(finding.message):  # prefix
            continue
        if "'node_ids' is a required property" in finding.message:
            continue  # said below, where it happens
        if re.match(r"entries/\d+/node_ids/\d+: .* does not match ", finding.message):  # prefix
            continue  # said below, with why
        if finding.message.startswith("entries: ") and not isinstance(entries, list):
            continue  # said below, with what to write instead
        findings.items.append(finding)
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
            if not isinstance(item, dict):
                continue
            action, node_ids = item.get("action"), item.get("node_ids")
            if action in _NODE_LEVEL and not node_ids:
                what = "deselect" if action == QuarantineAction.DESELECT else "run muted"
                findings.add(
                    document.locate(["entries", i, "action"]),
                    "quarantine-node-ids",
                    f"entry {_name(item, i)}: action {action} needs node_ids "
                    f"(the pytest node ids to {what})",
                )
            elif node_ids is not None and action not in _NODE_LEVEL:
                findings.add(
                    document.locate(["entries", i, "node_ids"]),
                    "quarantine-node-ids",
                    f"entry {_name(item, i)}: node_ids only go with action deselect or mute "
                    f"(this entry's action is {action})",
                )
            for j, node in enumerate(node_ids if isinstance(node_ids, list) else ()):
                problem = node_id_problem(node) if isinstance(node, str) and node else None
                if problem is not None:
                    findings.add(
                        document.locate(["entries", i, "node_ids", j]),
                        "quarantine-node-ids",
                        f'entry {_name(item, i)}: "{node}" is not a pytest node id: {problem}',
                    )
            for key, what in (("tracker", "tracker"), ("owner", "owner")):
                if key not in item:
                    findings.add(
                        document.locate(["entries", i]),
                        f"quarantine-no-{key}",
                        f"entry {_name(item, i)} has no {what}: every entry needs one",
                    )
                elif item[key] is None or (isinstance(item[key], str) and not item[key].strip()):
                    hint = (
                        ' (write it in quotes, tracker: "#123": a bare # starts a YAML comment)'
                        if key == "tracker" and item[key] is None
                        else ""
                    )
                    findings.add(
                        document.locate(["entries", i, key]),
                        f"quarantine-no-{key}",
                        f"entry {_name(item, i)} has an empty {what}{hint}",
                    )


def _name(item: Mapping[str, Any], i: int) -> str:
    entry_id = item.get("id")
    return f'"{entry_id}"' if isinstance(entry_id, str) else f"entries[{i}]"


def _strings(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return None


def _date(value: Any) -> dt.date | bool | None:
    """A date, None when absent, False when unreadable (the schema reports it)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return False
    return False


def _entry(
    item: Any, i: int, document: YamlDocument, tracker_base: str | None, findings: Findings
) -> Entry | None:
    """An Entry when the fields that decide what it does are readable, else None
    (the schema check already said why)."""
    if not isinstance(item, dict):
        return None
    entry_id = item.get("id")
    match = item.get("match")
    try:
        kind = QuarantineKind(item.get("kind"))
        action = QuarantineAction(item.get("action"))
    except ValueError:
        return None
    if not isinstance(entry_id, str) or not entry_id or not isinstance(match, dict):
        return None
    test_case = match.get("test_case")
    if not isinstance(test_case, str) or not test_case:
        return None
    model = match.get("model")
    lists = {key: _strings(match.get(key)) for key in ("platforms", "environments", "tags")}
    node_ids = _strings(item.get("node_ids"))
    where_raw = _strings(item.get("where"))
    if any(v is None for v in lists.values()) or node_ids is None or where_raw is None:
        return None
    if not all(is_node_id(n) for n in node_ids):
        return None  # said by the check: such an entry would deselect a whole folder
    if model is not None and not isinstance(model, str):
        return None
    try:
        where = tuple(Place.parse(w) for w in where_raw)
    except ValueError:
        return None
    added, expires = _date(item.get("added")), _date(item.get("expires"))
    if added is False or expires is False:
        return None
    assert not isinstance(added, bool) and not isinstance(expires, bool)
    if added and expires and expires < added:
        findings.add(
            document.locate(["entries", i, "expires"]),
            "quarantine-dates",
            f'entry "{entry_id}" expires ({expires}) before it was added ({added})',
        )
    tracker = item.get("tracker")
    tracker = tracker.strip() if isinstance(tracker, str) else ""
    tracker_url = resolve_tracker(tracker, tracker_base) if tracker else None
    if tracker and tracker_url is None and not whole(_ISSUE_NUMBER, tracker):
        findings.add(
            document.locate(["entries", i, "tracker"]),
            "quarantine-tracker",
            f'entry "{entry_id}": tracker "{tracker}" is neither an issue URL nor "#N"',
        )
    owner = item.get("owner")
    reason = item.get("reason")
    return Entry(
        id=entry_id,
        tracker=tracker,
        tracker_url=tracker_url,
        kind=kind,
        action=action,
        match=Match(
            test_case=test_case,
            model=model,
            platforms=lists["platforms"] or (),
            environments=lists["environments"] or (),
            tags=lists["tags"] or (),
        ),
        where=where,
        where_text=where_raw,
        node_ids=node_ids,
        owner=owner.strip() if isinstance(owner, str) else "",
        added=added,
        expires=expires,
        reason=reason if isinstance(reason, str) else "",
        index=i,
        location=document.locate(["entries", i]),
    )


def entry_from_mapping(
    item: Mapping[str, Any], *, tracker_base: str | None = None, path: str = "new entry"
) -> tuple[Entry | None, list[Finding]]:
    """One entry given as plain data (from the command line): the Entry, or None
    and what is wrong with it, with the same checks as the file's."""
    document = YamlDocument(path=path, data={"entries": [dict(item)]}, root=None)
    findings = Findings()
    _schema_findings(document, findings)
    entry = _entry(dict(item), 0, document, tracker_base, findings)
    return entry, findings.sorted()


# --------------------------------------------------------------------------- applying


class Selection(Struct, frozen=True):
    """What one target gets: its jobs (marked where an entry applies), and the
    jobs an entry skipped (marked too), both in selection order."""

    jobs: tuple[Job, ...]
    skipped: tuple[Job, ...] = ()

    @property
    def with_quarantined(self) -> list[Job]:
        return sorted((*self.jobs, *self.skipped), key=Job.sort_key)


def apply_quarantine(
    jobs: Sequence[Job],
    entries: Sequence[Entry],
    target: Target | None,
    *,
    known_test_cases: frozenset[str] | set[str] | None = None,
) -> tuple[list[Job], list[Job]]:
    """(selected jobs with marks, skipped jobs with marks) for one target.

    `target` None means "no target": each job is placed by its own scope on the
    system that runs that scope (L0/L1 on GitHub, the rest on GitLab).
    `known_test_cases` are every test case of the tree, so that a name that is
    also a glob (`tests/unit_tests/models/**/*.py`) matches only itself; by
    default the test cases of `jobs`.
    """
    if known_test_cases is None:
        known_test_cases = {j.test_case for j in jobs}
    selected: list[Job] = []
    skipped: list[Job] = []
    for job in jobs:
        applying = applying_entries(job, entries, target, known_test_cases)
        if not applying:
            selected.append(job)
            continue
        marked = replace(job, quarantine=combined_mark(applying))
        if applying[0].action is QuarantineAction.SKIP:
            skipped.append(marked)
        else:
            selected.append(marked)
    return selected, skipped


def job_place(job: Job, target: Target | None) -> tuple[System, str | None]:
    system = target.system if target is not None else default_system(job.scope or "")
    return system, job.scope


def applying_entries(
    job: Job,
    entries: Iterable[Entry],
    target: Target | None,
    known_test_cases: frozenset[str] | set[str],
) -> list[Entry]:
    """The entries that apply to a job in a target, strongest action first."""
    system, scope = job_place(job, target)
    found = [
        e for e in entries if e.applies_in(system, scope) and e.match.matches(job, known_test_cases)
    ]
    found.sort(key=lambda e: (ACTION_STRENGTH[e.action], e.index))
    return found


def combined_mark(applying: Sequence[Entry]) -> QuarantineMark:
    """One mark for a job: the strongest entry's action and kind; every applying
    entry's id and tracker (comma-separated, strongest first); the node ids of
    every deselect and mute entry, unless the job is skipped anyway (`muted`:
    those only a mute entry names; one a deselect entry names is deselected)."""
    first = applying[0]
    if len(applying) == 1:
        return first.mark()
    node_ids: list[str] = []
    deselected: set[str] = set()
    if first.action is not QuarantineAction.SKIP:
        for entry in applying:
            if entry.action.node_level:
                node_ids.extend(n for n in entry.node_ids if n not in node_ids)
            if entry.action is QuarantineAction.DESELECT:
                deselected.update(entry.node_ids)
    trackers: list[str] = []
    for entry in applying:
        if entry.tracker_ref not in trackers:
            trackers.append(entry.tracker_ref)
    return QuarantineMark(
        id=", ".join(e.id for e in applying),
        tracker=", ".join(trackers),
        action=first.action.value,
        kind=first.kind.value,
        node_ids=tuple(node_ids),
        muted=tuple(n for n in node_ids if n not in deselected),
    )


def selection(
    jobs: Sequence[Job],
    entries: Sequence[Entry],
    target: Target | Selector,
    *,
    known_test_cases: frozenset[str] | set[str] | None = None,
) -> Selection:
    """Select for a target (or a bare selector), then apply quarantine.

    A bare selector with a scope is placed on the system that runs that scope;
    without a scope each job is placed by its own scope."""
    if known_test_cases is None:
        known_test_cases = {j.test_case for j in jobs}
    if isinstance(target, Selector):
        selector = target
        as_target: Target | None = None
        if selector.scope is not None:
            system = default_system(selector.scope)
            as_target = Target(name=target_name(system, selector), system=system, selector=selector)
    else:
        selector, as_target = target.selector, target
    chosen = select(jobs, selector)
    if not entries:
        return Selection(tuple(chosen))
    kept, skipped = apply_quarantine(chosen, entries, as_target, known_test_cases=known_test_cases)
    return Selection(tuple(kept), tuple(skipped))


# --------------------------------------------------------------------------- usage


class Hit(Struct, frozen=True):
    """One job an entry applies to, in one target."""

    target: Target
    job: Job


def entry_hits(
    jobs: Sequence[Job], entries: Sequence[Entry], targets: Sequence[Target]
) -> dict[str, list[Hit]]:
    """For each entry id: the (target, job) pairs it applies to."""
    known = {j.test_case for j in jobs}
    hits: dict[str, list[Hit]] = {e.id: [] for e in entries}
    for target in targets:
        for job in select(jobs, target.selector):
            system, scope = job_place(job, target)
            for entry in entries:
                if entry.applies_in(system, scope) and entry.match.matches(job, known):
                    hits[entry.id].append(Hit(target, job))
    return hits


def overlaps(
    jobs: Sequence[Job], entries: Sequence[Entry], targets: Sequence[Target]
) -> list[tuple[Target, Job, list[Entry]]]:
    """Jobs that several entries apply to in one target (merged node-level entries
    excepted: their node ids all apply)."""
    known = {j.test_case for j in jobs}
    found = []
    for target in targets:
        for job in select(jobs, target.selector):
            applying = applying_entries(job, entries, target, known)
            if len(applying) > 1 and any(not e.action.node_level for e in applying):
                found.append((target, job, applying))
    return found


# --------------------------------------------------------------------------- checks


class Known(Struct, frozen=True):
    """The values a tree uses (or declares), for "did you mean" and unknown values."""

    models: frozenset[str]
    test_cases: frozenset[str]
    platforms: frozenset[str]
    environments: frozenset[str]
    tags: frozenset[str]
    scopes: Mapping[System, frozenset[str]]

    @classmethod
    def of(cls, jobs: Sequence[Job], targets: Sequence[Target], config: ProjectConfig) -> Known:
        scopes: dict[System, set[str]] = {System.GITHUB: set(), System.GITLAB: set()}
        for target in targets:
            if target.selector.scope:
                scopes[target.system].add(resolve_scope(target.selector.scope))
        vocab = config.vocabulary
        platforms = {j.platform for j in jobs}
        environments = {j.environment for j in jobs}
        if vocab is not None:
            platforms |= vocab.platforms
            environments |= vocab.environments
            for system, names in vocab.scopes.items():
                scopes[system] |= {resolve_scope(s) for s in names}
        return cls(
            models=frozenset(j.model for j in jobs),
            test_cases=frozenset(j.test_case for j in jobs),
            platforms=frozenset(platforms),
            environments=frozenset(environments),
            tags=frozenset(j.tag for j in jobs if j.tag),
            scopes={k: frozenset(v) for k, v in scopes.items()},
        )


def check_entries(
    qfile: QuarantineFile,
    jobs: Sequence[Job],
    targets: Sequence[Target],
    config: ProjectConfig,
    *,
    today: dt.date | None = None,
) -> list[Finding]:
    """What `validate` reports about the entries beyond their shape: unknown
    values, entries that match no job, expired entries, overlapping entries."""
    today = today or current_day()
    grace = policy(config).grace_days
    doc = qfile.document
    found = Findings()

    def at(entry: Entry, *keys: str | int) -> Location:
        return doc.locate(["entries", entry.index, *keys]) if doc else entry.location

    known = Known.of(jobs, targets, config)
    unknown_values: set[str] = set()
    for entry in qfile.entries:
        for key, values, allowed in (
            ("platforms", entry.match.platforms, known.platforms),
            ("environments", entry.match.environments, known.environments),
            ("tags", entry.match.tags, known.tags),
        ):
            for j, value in enumerate(values):
                if value not in allowed:
                    unknown_values.add(entry.id)
                    found.add(
                        at(entry, "match", key, j),
                        "quarantine-unknown",
                        f'entry "{entry.id}": no job has {key[:-1]} "{value}"'
                        f"{did_you_mean(value, allowed)}",
                    )
        if entry.match.model is not None and entry.match.model not in known.models:
            unknown_values.add(entry.id)
            found.add(
                at(entry, "match", "model"),
                "quarantine-unknown",
                f'entry "{entry.id}": no job has model "{entry.match.model}"'
                f"{did_you_mean(entry.match.model, known.models)}",
            )
        pattern = entry.match.test_case
        if not any(matches_test_case(pattern, tc, known.test_cases) for tc in known.test_cases):
            unknown_values.add(entry.id)
            what = "matches no test case" if entry.match.is_glob else "is not a test case"
            found.add(
                at(entry, "match", "test_case"),
                "quarantine-unknown",
                f'entry "{entry.id}": "{pattern}" {what}{did_you_mean(pattern, known.test_cases)}',
            )
        for j, place in enumerate(entry.where):
            if place.scope is not None and place.scope not in known.scopes[place.system]:
                unknown_values.add(entry.id)
                used = sorted(known.scopes[place.system])
                # Legacy names too: `nightlyy` is closer to `nightly` than to `L2`.
                aliases = {a: t for a, (t, _) in LEGACY_SCOPE_ALIASES.items() if t in used}
                shown = [
                    f"{name} ({', '.join(a for a, t in aliases.items() if t == name)})"
                    if name in aliases.values()
                    else name
                    for name in used
                ]
                written = entry.where_text[j].partition("/")[2]
                found.add(
                    at(entry, "where", j),
                    "quarantine-unknown",
                    f'entry "{entry.id}": no {place.system.value} target has scope "{written}"'
                    f"{did_you_mean(written, [*used, *aliases])}; "
                    f"{place.system.value} scopes: {', '.join(shown) or 'none'}",
                )
        if entry.expires is not None and entry.expires < today:
            late = (today - entry.expires).days
            severity = Severity.ERROR if late > grace else Severity.WARNING
            tail = (
                f"past the grace period of {grace} day(s)"
                if late > grace
                else f"an error after {grace} day(s) of grace, on "
                f"{entry.expires + dt.timedelta(days=grace + 1)}"
            )
            found.add(
                at(entry, "expires"),
                "quarantine-expired",
                f'entry "{entry.id}" expired on {entry.expires} ({late} day(s) ago, {tail}); '
                f"lift it (matrixgen quarantine lift --tracker {_shell_tracker(entry.tracker)}) "
                "or extend it",
                severity,
            )
    hits = entry_hits(jobs, qfile.entries, targets)
    for entry in qfile.entries:
        if not hits[entry.id] and entry.id not in unknown_values:
            found.add(
                at(entry, "match"),
                "quarantine-matches-nothing",
                f'entry "{entry.id}" applies to no job in any target '
                f"({_describe(entry)}); remove it or fix what it matches",
            )
    for target, job, applying in overlaps(jobs, qfile.entries, targets):
        ids = ", ".join(f'"{e.id}" ({e.action.value})' for e in applying)
        found.add(
            at(applying[1], "match"),
            "quarantine-overlap",
            f"entries {ids} all apply to {job.identity} in target {target.name}; "
            f'"{applying[0].id}" decides what happens',
            Severity.WARNING,
        )
    return found.sorted()


def _shell_tracker(tracker: str) -> str:
    """The tracker as typed in a shell: `#7201` unquoted would start a comment."""
    number = whole(_ISSUE_NUMBER, tracker)
    return number[1] if number else (tracker or "...")


def _describe(entry: Entry) -> str:
    parts = [f"test_case {entry.match.test_case}"]
    if entry.match.model:
        parts.append(f"model {entry.match.model}")
    for key in ("platforms", "environments", "tags"):
        values = getattr(entry.match, key)
        if values:
            parts.append(f"{key} {', '.join(values)}")
    parts.append("where " + (", ".join(entry.where_text) if entry.where else "everywhere"))
    return "; ".join(parts)


def check_quarantine(context: ValidationContext) -> Iterator[Finding]:
    """The check `matrixgen validate` runs (registered in validate.CHECKS)."""
    tree = context.tree
    qfile = load_quarantine(tree)
    yield from qfile.findings
    if not qfile.entries:
        return
    jobs = context.expansion.jobs
    targets = checked_targets(context)
    yield from check_entries(qfile, jobs, targets, tree.config)


# --------------------------------------------------------------------------- audit


class AuditItem(Struct, frozen=True, kw_only=True):
    entry_id: str
    problem: str  # expired, expiring, ownerless, trackerless, matches-nothing, tracker-closed
    detail: str
    tracker: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "id": self.entry_id,
            "problem": self.problem,
            "tracker": self.tracker,
            "detail": self.detail,
        }


# Audit problems that make `quarantine audit` exit non-zero; "expiring" only informs.
FAILING_PROBLEMS = frozenset(
    {"expired", "ownerless", "trackerless", "matches-nothing", "tracker-closed", "tracker-missing"}
)


def audit_entries(
    qfile: QuarantineFile,
    hits: Mapping[str, Sequence[Hit]],
    *,
    today: dt.date,
    days: int,
    tracker_states: Mapping[str, str] | None = None,
) -> list[AuditItem]:
    """Expired, expiring within `days`, ownerless, trackerless, matching nothing,
    and (when tracker states are given: entry id -> open/closed/missing) closed."""
    items: list[AuditItem] = []
    for entry in qfile.entries:
        tracker = entry.tracker_ref

        def add(problem: str, detail: str, entry: Entry = entry, tracker: str = tracker) -> None:
            items.append(
                AuditItem(entry_id=entry.id, problem=problem, detail=detail, tracker=tracker)
            )

        if entry.expires is not None:
            left = (entry.expires - today).days
            if left < 0:
                add("expired", f"expired on {entry.expires} ({-left} day(s) ago)")
            elif left <= days:
                add("expiring", f"expires on {entry.expires} (in {left} day(s))")
        if not entry.owner:
            add("ownerless", "no owner")
        if not entry.tracker:
            add("trackerless", "no tracker")
        if not hits.get(entry.id):
            add("matches-nothing", f"applies to no job in any target ({_describe(entry)})")
        state = (tracker_states or {}).get(entry.id)
        if state == "closed":
            add("tracker-closed", f"tracker {tracker} is closed: lift the entry")
        elif state == "missing":
            add("tracker-missing", f"tracker {tracker} does not exist")
    order = {p: i for i, p in enumerate(sorted(FAILING_PROBLEMS | {"expiring"}))}
    return sorted(items, key=lambda it: (it.entry_id, order[it.problem]))
