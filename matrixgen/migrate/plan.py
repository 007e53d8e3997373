"""Planning a migration (applied, checked and repeated until every candidate
holds), proving no real target's selection changes, and writing it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from msgspec import Struct

from matrixgen.documents.config import DEFAULT_CONFIG, ProjectConfig
from matrixgen.engine.load import read_directory
from matrixgen.engine.targets import default_system, discover_targets, resolve_targets
from matrixgen.migrate.scan import Candidate, LeftAlone, _scan_file
from matrixgen.model.errors import Finding, QuarantineError, UsageError
from matrixgen.model.jobs import Job, JobId, Target
from matrixgen.model.vocab import QUARANTINE_FILENAME, QuarantineAction, resolve_scope
from matrixgen.pipeline import Generation, generate_from_files
from matrixgen.quarantine.apply import applying_entries
from matrixgen.quarantine.habits import is_habit_scope
from matrixgen.quarantine.model import entry_from_mapping
from matrixgen.quarantine.policy import current_day, policy
from matrixgen.quarantine.project import Project
from matrixgen.quarantine.trackers import resolve_tracker, tracker_text
from matrixgen.util.textedit import apply_edits, decode, encode
from matrixgen.util.values import JsonLayout, json_value


class ParserChange(Struct, frozen=True, kw_only=True):
    """What Megatron-LM's own parser, which reads no quarantine file, selects for
    one target before and after the migration: `added` jobs come back."""

    target: str
    before: int
    after: int
    added: int


class Migrated(Struct, frozen=True, kw_only=True):
    """An entry migration writes, and the habit it replaces."""

    entry: Mapping[str, Any]
    origin: str  # the habit's line, as the report says it
    habit: str

    JSON: ClassVar[JsonLayout] = JsonLayout(
        spread="entry", keys=(("from", "origin"), ("habit", "habit"))
    )


class Migration(Struct, frozen=True, kw_only=True):
    """A planned migration: entries to add, recipe files to rewrite, and what was
    left alone (with the reason)."""

    root: Path
    changes: tuple[tuple[Candidate, tuple[dict[str, Any], ...]], ...]
    left_alone: tuple[LeftAlone, ...]
    files_before: Mapping[str, bytes]
    files_after: Mapping[str, bytes]
    untracked_comments: int = 0  # commented-out rows without a tracker: not habits
    # format_version 1: the targets whose selection by Megatron-LM's parser grows.
    parser_changes: tuple[ParserChange, ...] = ()
    config: ProjectConfig = DEFAULT_CONFIG  # the tree's, that the entries are written under

    @property
    def parser_added(self) -> int:
        """Jobs Megatron-LM's own parser would select in addition, over every target."""
        return sum(c.added for c in self.parser_changes)

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [entry for _, entries in self.changes for entry in entries]

    @property
    def changed_files(self) -> list[str]:
        return sorted(
            rel
            for rel, data in self.files_after.items()
            if rel != QUARANTINE_FILENAME and self.files_before.get(rel) != data
        )

    # Its JSON (`migrate --format json`, which adds whether it was written).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("entries", "migrated"),
            ("edits", "edits"),
            ("left_alone", "left_alone"),
            ("parser_changes", "parser_changes"),
            ("summary", "counts"),
        )
    )

    @property
    def migrated(self) -> tuple[Migrated, ...]:
        """Each entry with the habit it comes from."""
        return tuple(
            Migrated(entry=e, origin=c.describe, habit=c.habit)
            for c, es in self.changes
            for e in es
        )

    @property
    def edits(self) -> tuple[str, ...]:
        return tuple(c.describe for c, _ in self.changes)

    @property
    def counts(self) -> dict[str, Any]:
        by_habit = Counter(candidate.habit for candidate, entries in self.changes for _ in entries)
        rows_by_habit = Counter(candidate.habit for candidate, _ in self.changes)
        left = Counter(item.habit for item in self.left_alone)
        return {
            "entries": len(self.entries),
            "entries_by_habit": dict(sorted(by_habit.items())),
            "migrated_by_habit": dict(sorted(rows_by_habit.items())),
            "left_alone_by_habit": dict(sorted(left.items())),
            "recipe_files_changed": len(self.changed_files),
            "commented_out_without_tracker": self.untracked_comments,
            "parser_added_jobs": self.parser_added,
        }


# --------------------------------------------------------------------------- planning


def _real_scopes(generation: Generation) -> frozenset[str]:
    scopes = {j.scope for j in generation.jobs if j.scope and not is_habit_scope(j.scope)}
    vocab = generation.tree.config.vocabulary
    if vocab is not None:
        scopes |= {s for s in vocab.all_scopes if not is_habit_scope(s)}
    return frozenset(resolve_scope(s) for s in scopes)


def _entries_for(
    candidate: Candidate,
    jobs: Sequence[Job],
    *,
    today: dt.date,
    expires: dt.date,
) -> list[dict[str, Any]]:
    """One skip entry per restored row: exactly that row's jobs in its scopes."""
    by_row: dict[int, list[Job]] = {}
    for job in jobs:
        by_row.setdefault(job.source.line, []).append(job)
    entries = []
    for _, row_jobs in sorted(by_row.items()):
        models = sorted({j.model for j in row_jobs})
        cases = sorted({j.test_case for j in row_jobs})
        if len(models) != 1 or len(cases) != 1:
            continue
        tags = sorted({j.tag for j in row_jobs if j.tag})
        match: dict[str, Any] = {
            "model": models[0],
            "test_case": cases[0],
            "platforms": sorted({j.platform for j in row_jobs}),
            "environments": sorted({j.environment for j in row_jobs}),
        }
        if tags:
            match["tags"] = tags
        where = sorted(
            {f"{default_system(j.scope or '').value}/{j.scope}" for j in row_jobs if j.scope}
        )
        entries.append(
            {
                "tracker": candidate.tracker,
                "kind": candidate.kind.value,
                "action": QuarantineAction.SKIP.value,
                "match": match,
                "where": where,
                "owner": candidate.owner,
                "added": today,
                "expires": expires,
                "reason": candidate.reason,
            }
        )
    return entries


def _identity_scopes(jobs: Iterable[Job]) -> set[tuple[JobId, str | None]]:
    return {(j.identity, j.scope) for j in jobs}


def plan_migration(
    root: Path,
    *,
    default_tracker: str | None = None,
    owner: str | None = None,
    expires: dt.date | None = None,
) -> Migration:
    """Find the habits of the tree in `root` and plan their migration. Nothing is
    written; `files_after` holds the recipe files (and quarantine file) as they
    would be."""
    from matrixgen.quarantine.edit import insert_entries
    from matrixgen.quarantine.render import entry_id, unique_id

    today = current_day()
    default_tracker = _checked_options(default_tracker, expires, today)
    files = read_directory(root)
    before = generate_from_files(files, root=str(root))
    if before.expansion.errors:
        raise QuarantineError(
            f"{root} has recipe errors; fix them before migrating (run `matrixgen validate`)",
            findings=before.expansion.errors,
        )
    if before.quarantine.errors:
        raise QuarantineError(
            f"{root / QUARANTINE_FILENAME} has errors; fix them before migrating",
            findings=before.quarantine.errors,
        )
    pol = policy(before.tree.config)
    expires = expires or today + dt.timedelta(days=pol.default_expiry_days)
    real_scopes = _real_scopes(before)
    candidates: list[Candidate] = []
    left: list[LeftAlone] = []
    untracked = 0
    for recipe in before.tree.tests:
        text, _ = decode(files[recipe.rel])
        scan = _scan_file(
            recipe,
            text,
            real_scopes,
            default_tracker=default_tracker,
            owner=owner,
            default_owner=pol.default_owner,
        )
        candidates += scan.candidates
        left += scan.left_alone
        untracked += scan.untracked_comments
    taken = {e.id for e in before.quarantine.entries}
    planned, after_files, after = _settle(
        root, before, files, candidates, left, today=today, expires=expires
    )
    # Each entry's id, derived and unique in the file.
    changes: list[tuple[Candidate, tuple[dict[str, Any], ...]]] = []
    for candidate, entries in planned:
        named = []
        for entry in entries:
            new_id = unique_id(entry_id(entry), taken)
            taken.add(new_id)
            named.append({"id": new_id, **entry})
        changes.append((candidate, tuple(named)))
    all_entries = [e for _, entries in changes for e in entries]
    if all_entries:
        old_q, bom = decode(files.get(QUARANTINE_FILENAME, b""))
        after_files[QUARANTINE_FILENAME] = encode(insert_entries(old_q, all_entries), bom)
    migration = Migration(
        root=root,
        changes=tuple(changes),
        left_alone=tuple(sorted(left, key=lambda x: (x.path, x.line))),
        files_before=files,
        files_after=after_files,
        untracked_comments=untracked,
        parser_changes=parser_changes(before, after) if changes else (),
        config=before.tree.config,
    )
    problems = equivalence_problems(before, after_files, root=str(root))
    if problems:
        raise QuarantineError(
            "the migration would change what targets select; nothing was planned:",
            details=problems[:20],
        )
    return migration


def _checked_options(
    default_tracker: str | None, expires: dt.date | None, today: dt.date
) -> str | None:
    """Refuse an expiry in the past (said once here, rather than as a reason on
    every habit left alone) and a default tracker that is no URL, N or #N."""
    if expires is not None and expires < today:
        raise UsageError(f"--expires {expires} is in the past")
    if default_tracker is None:
        return None
    ref = tracker_text(default_tracker)
    if resolve_tracker(ref, "https://tracker.invalid/") is None:  # "#N" or a URL
        raise UsageError(f'--default-tracker "{default_tracker}": give an issue URL, N or #N')
    return ref


def _settle(
    root: Path,
    before: Generation,
    files: Mapping[str, bytes],
    candidates: list[Candidate],
    left: list[LeftAlone],
    *,
    today: dt.date,
    expires: dt.date,
) -> tuple[list[tuple[Candidate, list[dict[str, Any]]]], dict[str, bytes], Generation]:
    """Apply the candidates, check each on the result, drop the ones that fail
    (into `left`, with why); repeat until every remaining one holds (each round
    drops at least one). The candidates that hold with their entries, the files
    and the generation after them."""
    tracker_base = policy(before.tree.config).tracker_base
    before_jobs = _identity_scopes(before.jobs)
    before_findings = _finding_keys(before.findings)
    while True:
        after_files = dict(files)
        for rel in sorted({c.rel for c in candidates}):
            text, bom = decode(files[rel])
            edits = [e for c in candidates if c.rel == rel for e in c.edits]
            after_files[rel] = encode(apply_edits(text, edits), bom)
        after = generate_from_files(after_files, root=str(root))
        new_findings = _finding_keys(after.findings) - before_findings
        failed: list[tuple[Candidate, str]] = []
        planned: list[tuple[Candidate, list[dict[str, Any]]]] = []
        known = {j.test_case for j in after.jobs}
        for candidate in candidates:
            problem = _finding_problem(candidate, new_findings)
            span = [
                j
                for j in after.jobs
                if j.recipe == candidate.rel
                and candidate.first_line <= j.source.line <= candidate.last_line
                and (candidate.scopes is None or j.scope in candidate.scopes)
            ]
            if problem is None and not span:
                problem = "restoring it yields no job"
            if problem is None:
                clash = _identity_scopes(span) & before_jobs
                if clash:
                    some = sorted(clash, key=str)[0]
                    problem = f"another row already has {some[0]} in scope {some[1]}"
            entries: list[dict[str, Any]] = []
            if problem is None:
                entries = _entries_for(candidate, span, today=today, expires=expires)
                problem = _check_entries(entries, span, after.jobs, known, tracker_base)
            if problem is not None:
                failed.append((candidate, problem))
            else:
                planned.append((candidate, entries))
        if not failed:
            return planned, after_files, after
        for c, problem in failed:
            left.append(LeftAlone(path=c.rel, line=c.first_line, habit=c.habit, reason=problem))
        candidates = [c for c, _ in planned]


def _finding_keys(findings: Iterable[Finding]) -> set[tuple[str, int, str, str]]:
    return {(f.location.file, f.location.line, f.code, f.message) for f in findings}


def _finding_problem(candidate: Candidate, new: set[tuple[str, int, str, str]]) -> str | None:
    for file, line, code, message in sorted(new):
        if file == candidate.path and candidate.first_line <= line <= candidate.last_line:
            return f"restoring it would be reported: {message} [{code}]"
    return None


def _check_entries(
    entries: Sequence[dict[str, Any]],
    span: Sequence[Job],
    jobs: Sequence[Job],
    known: set[str],
    tracker_base: str | None,
) -> str | None:
    """Each entry must be valid and apply to exactly the restored jobs."""
    if not entries:
        return "its jobs do not share one model and test case"
    hit: set[tuple[JobId, str | None]] = set()
    for data in entries:
        entry, findings = entry_from_mapping({"id": "candidate", **data}, tracker_base=tracker_base)
        if entry is None or findings:
            text = "; ".join(f.message for f in findings) or "invalid"
            return f"its entry would be invalid: {text}"
        hit |= _identity_scopes(j for j in jobs if applying_entries(j, [entry], None, known))
    want = _identity_scopes(span)
    if hit != want:
        extra = sorted(hit - want, key=str)
        if extra:
            return f"its entry would also skip {extra[0][0]} in scope {extra[0][1]}"
        return "its entry would not cover every restored job"
    return None


# --------------------------------------------------------------------------- checking


def real_targets(generation: Generation) -> list[Target]:
    """Every target the tree implies (or configures), except habit scopes: no
    pipeline runs `mr-broken`."""
    targets = resolve_targets(generation.tree.config, generation.jobs)
    if not generation.tree.config.targets:
        targets = discover_targets(generation.jobs, holding_pen=True)
    return [t for t in targets if not is_habit_scope(t.selector.scope or "")]


def _real_targets_of_both(before: Generation, after: Generation) -> list[Target]:
    """The real targets of either tree, by name (before's where both have one)."""
    targets: dict[str, Target] = {}
    for target in (*real_targets(before), *real_targets(after)):
        targets.setdefault(target.name, target)
    return [targets[name] for name in sorted(targets)]


def parser_changes(before: Generation, after: Generation) -> tuple[ParserChange, ...]:
    """On a format_version 1 tree, the real targets for which Megatron-LM's own
    parser selects more jobs after the migration than before: it reads no
    quarantine file, so every restored job comes back there. matrixgen's
    selection before quarantine is that parser's (tests/test_compat.py). A
    format_version 2 tree is read by matrixgen only: nothing to count."""
    if before.tree.format_version != 1:
        return ()
    found = []
    for target in _real_targets_of_both(before, after):
        old = before.select(target.selector)
        new = after.select(target.selector)
        seen = _identity_scopes(old)
        added = sum((j.identity, j.scope) not in seen for j in new)
        if added:
            found.append(
                ParserChange(target=target.name, before=len(old), after=len(new), added=added)
            )
    return tuple(found)


def equivalence_problems(
    before: Generation, files_after: Mapping[str, bytes], *, root: str
) -> list[str]:
    """Targets (real ones, of either tree, with and without each cadence) whose
    selection after quarantine differs between `before` and the tree of `files_after`."""
    after = generate_from_files(files_after, root=root)
    problems = []
    for target in _real_targets_of_both(before, after):
        a, b = ([json_value(j) for j in g.selection(target).jobs] for g in (before, after))
        if a != b:
            gone = len([j for j in a if j not in b])
            new = len([j for j in b if j not in a])
            problems.append(
                f"{target.name}: {gone} job(s) no longer selected, {new} newly selected"
            )
    return problems


# --------------------------------------------------------------------------- writing


def write_migration(migration: Migration) -> None:
    """Add the entries (under the quarantine file's lock), then rewrite the recipe
    files: if writing recipes failed, the entries would match nothing (validate
    says so) but no target would select a quarantined job."""
    from matrixgen.quarantine.edit import atomic_write, check_writable, read_file

    root = migration.root
    entries = migration.entries
    # Refuse before writing anything rather than half-way through.
    for rel in migration.changed_files:
        check_writable(root / rel, root=root)
    if entries:
        check_writable(root / QUARANTINE_FILENAME, root=root)

        def change(qfile: Any) -> tuple[list[dict[str, Any]], list[int]]:
            clash = {e.id for e in qfile.entries} & {e["id"] for e in entries}
            if clash:
                raise QuarantineError(
                    f"{root / QUARANTINE_FILENAME} changed since the migration was planned "
                    f"(ids {', '.join(sorted(clash))} exist now); run migrate again"
                )
            return list(entries), []

        Project(root, migration.config).edit(change)
    for rel in migration.changed_files:
        path = root / rel
        current = read_file(path, root=root)
        if current != migration.files_before[rel]:
            raise QuarantineError(f"{path} changed since the migration was planned; run it again")
        atomic_write(path, migration.files_after[rel], root=root)
