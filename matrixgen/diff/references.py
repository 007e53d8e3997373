"""Reference files in a diff: each side's reference tree at its own revision,
and per target the jobs the head adds without their references, and the jobs
both sides run that had their references at the base and lose them at the head.

Each side is listed once (one `git ls-tree` of its commit, or one walk of the
working tree); the head side's declared references (its project config) decide
what a job needs.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import ClassVar

from msgspec import Struct

from matrixgen.diff.gitsource import Repository
from matrixgen.diff.model import SelectionDiff, Side, runs
from matrixgen.model.jobs import Job
from matrixgen.model.references import (
    ReferenceListing,
    ReferenceSettings,
    list_directory,
    listing_from_paths,
)
from matrixgen.util.escape import markdown_code as _code
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import JsonLayout
from matrixgen.views.references import MissingReference, ReferenceChecker
from matrixgen.views.table import Column, Report


def listing_at(
    repo: Repository, revision: str | None, settings: ReferenceSettings
) -> ReferenceListing:
    """The reference tree of `settings` at a revision (None: the working tree, on disk)."""
    root, prefix = settings.root, settings.prefix
    if revision is None:
        return list_directory(repo.top / root, prefix, shown_root=root)
    start = posixpath.join(root, prefix) if root else prefix
    paths = repo.list_paths(revision, start)
    where = f"at {revision}"
    if paths is None:
        return ReferenceListing(shown_root=root, files=frozenset(), present=False, where=where)
    rel = [posixpath.join(prefix, p) if prefix else p for p in paths]
    return listing_from_paths(rel, shown_root=root, prefix=prefix, where=where)


class TargetGaps(Struct, frozen=True, kw_only=True):
    """One target's jobs that run at the head without a reference they need."""

    target: str
    added: tuple[MissingReference, ...] = ()  # jobs the head adds
    # Jobs both sides run: present at the base, missing at the head.
    lost: tuple[MissingReference, ...] = ()

    # Its JSON: every field (a missing reference as coverage writes it).
    JSON: ClassVar[JsonLayout] = JsonLayout()


class ReferenceGaps(Struct, frozen=True, kw_only=True):
    targets: tuple[TargetGaps, ...]
    declared: bool = False  # the head declares references (else nothing was checked)


def reference_gaps(repo: Repository, result: SelectionDiff, sides: Sequence[Side]) -> ReferenceGaps:
    """The jobs of the diff that run at the head without their references."""
    base, head = sides
    settings = head.generation.tree.config.references
    if settings is None:
        return ReferenceGaps(targets=())
    head_listing = listing_at(repo, head.source.commit, settings)
    if not head_listing.present:
        return ReferenceGaps(targets=(), declared=True)
    base_settings = base.generation.tree.config.references
    base_listing = (
        listing_at(repo, base.source.commit, base_settings) if base_settings is not None else None
    )
    head_checker = ReferenceChecker(settings, head_listing)
    base_checker = (
        ReferenceChecker(settings, base_listing)
        if base_listing is not None and base_listing.present
        else None
    )
    found: list[TargetGaps] = []
    for diff in result.targets:
        added_ids = {id(j) for j in diff.added}
        added = [m for job in diff.added if runs(job) for m in head_checker.missing(job)]
        lost: list[MissingReference] = []
        if base_checker is not None:
            base_target = base.generation.tree.config.target(diff.target.name) or diff.target
            had = _had(base.generation.selection(base_target).jobs, base_checker)
            lost = [
                m
                for job in head.generation.selection(diff.target).jobs
                if id(job) not in added_ids
                for m in head_checker.missing(job)
                if (_key(job), m.reference) in had
            ]
        if added or lost:
            found.append(TargetGaps(target=diff.target.name, added=tuple(added), lost=tuple(lost)))
    return ReferenceGaps(targets=tuple(found), declared=True)


def _key(job: Job) -> tuple[str, ...]:
    return (job.model, job.test_case, job.environment, job.platform, job.tag or "", job.scope or "")


def _had(jobs: Sequence[Job], checker: ReferenceChecker) -> set[tuple[tuple[str, ...], str]]:
    """(job, reference) pairs the base has the file for."""
    had: set[tuple[tuple[str, ...], str]] = set()
    names = [t.name for t in checker.settings.templates]
    for job in jobs:
        missing = {m.reference for m in checker.missing(job)}
        had.update((_key(job), name) for name in names if name not in missing)
    return had


def _what(missing: Sequence[MissingReference]) -> str:
    """ "no golden for dgx_gb200": the references missing, per platform."""
    by_reference: dict[str, set[str]] = {}
    for m in missing:
        by_reference.setdefault(m.reference, set()).add(m.job.platform)
    return "; ".join(
        f"no {name} for {', '.join(sorted(platforms))}"
        for name, platforms in sorted(by_reference.items())
    )


def _gaps(gaps: ReferenceGaps) -> Report:
    """A row per job and reference it runs without."""
    codes = [Column(h, escape=_code) for h in ("target", "job", "reference", "looked for")]
    return Report(
        [*codes[:2], Column("change", escape=str), *codes[2:]],
        [
            (t.target, m.job.identity, kind, m.reference, m.path)
            for t in gaps.targets
            for kind, items in (("added", t.added), ("lost", t.lost))
            for m in items
        ],
    )


def render_gaps(gaps: ReferenceGaps, fmt: str) -> str:
    """The reference part of a diff, in text or markdown (empty when nothing is missing)."""
    if not gaps.targets:
        return ""
    if fmt == "markdown":
        lines = ["", "#### Jobs without their references", "", *_gaps(gaps).markdown()]
        return "\n".join(lines) + "\n"
    lines = ["", "references:"]
    for t in gaps.targets:
        parts = [
            f"{sign}{len({id(m.job) for m in items})} job(s){said}{_what(items)}"
            for sign, said, items in (("+", ", ", t.added), ("", " lose references: ", t.lost))
            if items
        ]
        lines.append(f"  {terminal_text(t.target)}: " + terminal_text("; ".join(parts)))
        for kind, items in (("+", t.added), ("!", t.lost)):
            for m in items:
                said = f"{m.job.identity}: no {m.reference} file {m.path}"
                lines.append(f"    {kind} {terminal_text(said)}")
    return "\n".join(lines) + "\n"
