"""What `validate` reports about the entries beyond their shape."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct

from matrixgen.documents.quarantine import is_glob, matches_test_case
from matrixgen.model.errors import Finding, Findings, Location, Severity, did_you_mean
from matrixgen.model.jobs import Job, Target
from matrixgen.model.vocab import LEGACY_SCOPE_ALIASES, System, resolve_scope, scope_names
from matrixgen.quarantine.apply import entry_hits, overlaps
from matrixgen.quarantine.model import (
    Entry,
    QuarantineFile,
    Subject,
    file_subject,
    load_quarantine,
)
from matrixgen.quarantine.policy import current_day, policy
from matrixgen.quarantine.trackers import shell_tracker

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.engine.context import ValidationContext


class Known(Struct, frozen=True):
    """The values a tree uses (or declares), for "did you mean" and unknown values."""

    models: frozenset[str]
    test_cases: frozenset[str]
    platforms: frozenset[str]
    environments: frozenset[str]
    tags: frozenset[str]
    scopes: Mapping[System, frozenset[str]]
    # The same scopes as the tree writes them (`nightly`, where `scopes` has `L2`).
    words: Mapping[System, frozenset[str]]

    @classmethod
    def of(cls, jobs: Sequence[Job], targets: Sequence[Target], config: ProjectConfig) -> Known:
        scopes: dict[System, set[str]] = {s: set() for s in System}
        words: dict[System, set[str]] = {s: set() for s in System}
        for target in targets:
            if target.selector.scope:
                scopes[target.system].add(resolve_scope(target.selector.scope))
                words[target.system].add(target.selector.scope)
        vocab = config.vocabulary
        platforms = {j.platform for j in jobs}
        environments = {j.environment for j in jobs}
        if vocab is not None:
            platforms |= vocab.platforms
            environments |= vocab.environments
            for system, names in vocab.scopes.items():
                scopes[system] |= {resolve_scope(s) for s in names}
                words[system] |= set(names)
        else:  # implied targets name tiers: the legacy names are the tree's words
            for system, tiers in scopes.items():
                words[system] = tiers | {
                    a for a, (t, _) in LEGACY_SCOPE_ALIASES.items() if t in tiers
                }
        return cls(
            models=frozenset(j.model for j in jobs),
            test_cases=frozenset(j.test_case for j in jobs),
            platforms=frozenset(platforms),
            environments=frozenset(environments),
            tags=frozenset(j.tag for j in jobs if j.tag),
            scopes={k: frozenset(v) for k, v in scopes.items()},
            words={k: frozenset(v) for k, v in words.items()},
        )


def check_entries(
    qfile: QuarantineFile,
    jobs: Sequence[Job],
    targets: Sequence[Target],
    config: ProjectConfig,
    *,
    today: dt.date | None = None,
    subject: Subject = file_subject,
) -> list[Finding]:
    """What `validate` reports about the entries beyond their shape: unknown
    values, entries that match no job, expired entries, overlapping entries
    (each entry named by `subject`)."""
    today = today or current_day()
    grace = policy(config).grace_days
    doc = qfile.document
    found = Findings()

    def name(entry: Entry) -> str:
        return subject(entry.id, entry.index)

    def at(entry: Entry, *keys: str | int) -> Location:
        return doc.locate(["entries", entry.index, *keys]) if doc else entry.location

    known = Known.of(jobs, targets, config)
    hits = entry_hits(jobs, qfile.entries, targets)
    for entry in qfile.entries:
        unknown = list(_unknown_values(entry, known, name(entry)))
        for location, message in unknown:
            found.add(at(entry, *location), "quarantine-unknown", message)
        if not hits[entry.id] and not unknown:
            found.add(
                at(entry, "match"),
                "quarantine-matches-nothing",
                f"{name(entry)} applies to no job in any target "
                f"({describe(entry)}); remove it or fix what it matches",
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
                f"{name(entry)} expired on {entry.expires} ({late} day(s) ago, {tail}); "
                f"lift it (matrixgen quarantine lift --tracker {shell_tracker(entry.tracker)}) "
                "or extend it",
                severity,
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


def _unknown_values(
    entry: Entry, known: Known, name: str
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(where in the entry, message) for each value of the entry no job has."""
    match = entry.match
    for key, values, allowed in (
        ("platforms", match.platforms, known.platforms),
        ("environments", match.environments, known.environments),
        ("tags", match.tags, known.tags),
    ):
        for j, value in enumerate(values):
            if value not in allowed:
                yield (
                    ("match", key, j),
                    f'{name}: no job has {key[:-1]} "{value}"{did_you_mean(value, allowed)}',
                )
    if match.model is not None and match.model not in known.models:
        yield (
            ("match", "model"),
            f'{name}: no job has model "{match.model}"{did_you_mean(match.model, known.models)}',
        )
    for j, pattern in enumerate(match.test_cases):
        names = known.test_cases  # a name matches itself; only a glob needs the scan
        if pattern not in names and not (
            is_glob(pattern) and any(matches_test_case(pattern, tc, names) for tc in names)
        ):
            what = "matches no test case" if is_glob(pattern) else "is not a test case"
            yield (
                ("match", "test_case", j) if len(match.test_cases) > 1 else ("match", "test_case"),
                f'{name}: "{pattern}" {what}{did_you_mean(pattern, known.test_cases)}',
            )
    for j, place in enumerate(entry.places):
        if place.scope is not None and place.scope not in known.scopes[place.system]:
            used = sorted(known.scopes[place.system])
            # Legacy names too: `nightlyy` is closer to `nightly` than to `L2`.
            aliases = {a: t for a, (t, _) in LEGACY_SCOPE_ALIASES.items() if t in used}
            shown = scope_names(known.words.get(place.system, used))
            written = entry.where[j].partition("/")[2]
            yield (
                ("where", j),
                f'{name}: no {place.system.value} target has scope "{written}"'
                f"{did_you_mean(written, [*used, *aliases])}; "
                f"{place.system.value} scopes: {', '.join(shown) or 'none'}",
            )


def describe(entry: Entry) -> str:
    parts = [f"test_case {', '.join(entry.match.test_cases)}"]
    if entry.match.model:
        parts.append(f"model {entry.match.model}")
    for key in ("platforms", "environments", "tags"):
        values = getattr(entry.match, key)
        if values:
            parts.append(f"{key} {', '.join(values)}")
    parts.append("where " + (", ".join(entry.where) or "everywhere"))
    return "; ".join(parts)


def check_quarantine(context: ValidationContext) -> Iterator[Finding]:
    """The check `matrixgen validate` runs (registered in validate.CHECKS)."""
    tree = context.tree
    qfile = load_quarantine(tree)
    yield from qfile.findings
    if not qfile.entries:
        return
    yield from check_entries(qfile, context.expansion.jobs, context.targets, tree.config)
