"""`quarantine add`: one entry built from the command line's values, checked as
the file's entries are and against the tree, then written under the file's lock.
A feature, not core: whether an entry reaches a job's tests is the emitters' rule
(`emit.checks.unreached`), and emit sits above the quarantine floor."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.engine.targets import default_system, resolve_targets
from matrixgen.model.errors import UsageError
from matrixgen.model.jobs import Job, Target
from matrixgen.model.vocab import QuarantineAction, QuarantineKind
from matrixgen.quarantine.apply import Hit, applying_entries, entry_hits
from matrixgen.quarantine.checks import check_entries
from matrixgen.quarantine.model import (
    Entry,
    QuarantineFile,
    entry_from_mapping,
    file_subject,
    node_ids_misfit,
)
from matrixgen.quarantine.policy import current_day, option_day, policy
from matrixgen.quarantine.trackers import tracker_text
from matrixgen.systems import example_places, names

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation
    from matrixgen.quarantine.project import Project


class EntryRequest(Struct, frozen=True, kw_only=True):
    test_cases: Sequence[str]  # one entry covers them all
    tracker: str
    kind: QuarantineKind
    action: QuarantineAction
    reason: str
    owner: str | None = None
    model: str | None = None
    platforms: Sequence[str] = ()
    environments: Sequence[str] = ()
    tags: Sequence[str] = ()
    scopes: Sequence[str] = ()
    node_ids: Sequence[str] = ()
    expires: str | None = None  # YYYY-MM-DD; default: today + default_expiry_days
    entry_id: str | None = None  # default: derived from what the entry matches


class NewEntry(Struct, frozen=True, kw_only=True):
    """A checked entry: its fields as written (without the id), the jobs it
    applies to, and the existing entries that already apply to some of them."""

    entry: Entry
    data: dict[str, Any]
    explicit_id: bool
    hits: tuple[Hit, ...]
    already: tuple[tuple[str, int], ...]  # (entry id, jobs of these it applies to)

    @property
    def by_target(self) -> dict[str, list[Job]]:
        grouped: dict[str, list[Job]] = {}
        for hit in self.hits:
            grouped.setdefault(hit.target.name, []).append(hit.job)
        return dict(sorted(grouped.items()))


def new_entry(generation: Generation, request: EntryRequest, *, config_path: Path) -> NewEntry:
    """The entry `request` asks for, checked (a QuarantineError when the file
    itself has errors)."""
    from matrixgen.quarantine.render import entry_id as derive_id

    qfile = generation.quarantine
    qfile.refuse_errors(f"{qfile.path} has errors; fix them first, the file was not changed")
    data = _fields(request, generation, config_path)
    explicit = request.entry_id is not None
    subject = file_subject if explicit else (lambda _id, _index: "the entry")
    base = policy(generation.tree.config).tracker_base
    entry, findings = entry_from_mapping(
        {"id": request.entry_id or derive_id(data), **data},
        tracker_base=base,
        subject=subject,
        alone=True,
    )
    if entry is None or findings:
        raise UsageError(
            "the entry is not valid: " + ("; ".join(f.message for f in findings) or "invalid")
        )
    jobs, config = generation.jobs, generation.tree.config
    targets = resolve_targets(config, jobs)
    alone = QuarantineFile(path="new entry", present=True, entries=(entry,))
    problems = [
        f
        for f in check_entries(alone, jobs, targets, config, subject=subject)
        if f.code in ("quarantine-unknown", "quarantine-matches-nothing")
    ]
    if problems:
        raise UsageError("; ".join(f.message for f in problems))
    _check_reach(entry, generation, targets)
    hits = entry_hits(jobs, [entry], targets)[entry.id]
    known = {j.test_case for j in jobs}
    already = Counter(
        other.id for h in hits for other in applying_entries(h.job, qfile.entries, h.target, known)
    )
    return NewEntry(
        entry=entry,
        data=data,
        explicit_id=explicit,
        hits=tuple(hits),
        already=tuple(sorted(already.items())),
    )


def _fields(request: EntryRequest, generation: Generation, config_path: Path) -> dict[str, Any]:
    """The entry's fields as the file holds them; a UsageError for an option
    wrong whatever the tree holds."""
    pol = policy(generation.tree.config)
    owner = request.owner if request.owner is not None else pol.default_owner
    if owner is None:
        raise UsageError(
            "--owner is needed: who lifts the entry (or set quarantine.default_owner in "
            f"{config_path})"
        )
    today = current_day()
    until = (
        option_day(request.expires, "--expires")
        if request.expires
        else today + dt.timedelta(days=pol.default_expiry_days)
    )
    if until < today:
        raise UsageError(f"--expires {until} is in the past")
    misfit = node_ids_misfit(request.action.value, list(request.node_ids) or None)
    if misfit == "missing":
        raise UsageError(f"--action {request.action.value} needs at least one --node-id")
    if misfit == "misplaced":
        raise UsageError("--node-id only goes with --action deselect or --action mute")
    cases = list(dict.fromkeys(request.test_cases))
    match: dict[str, Any] = {"test_case": cases[0] if len(cases) == 1 else cases}
    if request.model:
        match["model"] = request.model
    for key in ("platforms", "environments", "tags"):
        if getattr(request, key):
            match[key] = sorted(dict.fromkeys(getattr(request, key)))
    data: dict[str, Any] = {
        "tracker": tracker_text(request.tracker),
        "kind": request.kind.value,
        "action": request.action.value,
        "match": match,
        "where": sorted(dict.fromkeys(_place_text(s) for s in request.scopes)),
        "node_ids": list(dict.fromkeys(request.node_ids)),
        "owner": owner.strip(),
        "added": today,
        "expires": until,
        "reason": request.reason.strip(),
    }
    data = {k: v for k, v in data.items() if v not in ([], "")}
    check_text({"--id": request.entry_id, **data})
    return data


def check_text(values: Any, where: str = "") -> None:
    """Refuse a value the quarantine file cannot hold: the file is UTF-8, and an
    argument that is not valid UTF-8 reaches Python as lone surrogates."""
    if isinstance(values, dict):
        for key, value in values.items():
            check_text(value, where or (key if key.startswith("--") else f"--{key}"))
    elif isinstance(values, list | tuple):
        for value in values:
            check_text(value, where)
    elif isinstance(values, str) and any("\ud800" <= c <= "\udfff" for c in values):
        raise UsageError(f'{where} "{values}" is not valid UTF-8 text')


def _place_text(text: str) -> str:
    """Check one --scope value: `SYSTEM/SCOPE` (`github/L1`), or a whole system."""
    system, sep, scope = text.partition("/")
    if system not in names() or (sep and not scope):
        hint = "" if sep else f" (did you mean {default_system(text).value}/{text}?)"
        raise UsageError(
            f'--scope "{text}": write SYSTEM/SCOPE, like {" or ".join(example_places())}, '
            f"or a whole system ({', '.join(names())}){hint}"
        )
    return text


def _check_reach(entry: Entry, generation: Generation, targets: Sequence[Target]) -> None:
    """A node-level entry must reach the tests of every job it applies to."""
    if not entry.action.node_level:
        return
    from matrixgen.emit.checks import unreached

    existing = [e for e in generation.quarantine.entries if e.id != entry.id]
    blocked = [
        u
        for u in unreached([*existing, entry], generation.jobs, targets, generation.tree.config)
        if u.entry is entry
    ]
    if blocked:
        names = ", ".join(sorted({u.target.name for u in blocked}))
        raise UsageError(
            f"the entry cannot reach the tests of target(s) {names} "
            f"({blocked[0].job.identity}): {blocked[0].why}"
        )


def write_entry(project: Project, new: NewEntry, *, dry_run: bool) -> None:
    """Add the entry to the project's file under its lock (`Project.edit`): its
    id, the one asked for or the derived one, must be new there."""
    wanted = new.entry.id

    def change(qfile: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        if qfile.by_id(wanted) is not None:
            if new.explicit_id:
                raise UsageError(f'an entry with id "{wanted}" exists already')
            raise UsageError(
                f'entry "{wanted}" quarantines the same jobs with the same tracker already'
            )
        return [{"id": wanted, **new.data}], []

    project.edit(change, dry_run=dry_run)
