"""`matrixgen coverage` (docs/coverage.md): per target, the jobs it runs that
miss a reference file, and the orphans, files that fit a template but are no
path (nor `_suffix` variant) of a job any target selects; skipped and opted-out
jobs' files are not orphans, only not checked. One listing of the reference
tree; each job's paths are rendered once however many targets select it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from typing import ClassVar

from msgspec import Struct

from matrixgen.model.jobs import Job, Target
from matrixgen.model.references import (
    ORPHAN_FIELDS,
    ReferenceListing,
    ReferenceSettings,
    TemplateMatcher,
    is_variant,
    used_by_dir,
)
from matrixgen.pipeline import Generation
from matrixgen.util.escape import markdown_code as code_span  # no content breaks out of it
from matrixgen.util.values import JsonLayout
from matrixgen.views.references import (
    ORPHAN_COLUMNS,
    MissingReference,
    OrphanFields,
    ReferenceChecker,
)
from matrixgen.views.table import Column, Report


class TargetMissing(Struct, frozen=True, kw_only=True):
    """A missing reference in one target, as `coverage --format json` lists it."""

    target: str
    missing: MissingReference

    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(("target", "target"), *((k, f"missing.{p}") for k, p in MissingReference.JSON.keys))
    )


class TemplateProblem(Struct, frozen=True, kw_only=True):
    """A template some jobs cannot fill (a field they do not have)."""

    reference: str
    message: str
    jobs: tuple[Job, ...]


class TargetCoverage(Struct, frozen=True, kw_only=True):
    target: Target
    gating: bool
    jobs: int  # the jobs the target keeps after quarantine
    checked: int  # of those, the ones that do not opt out of every reference
    missing: tuple[MissingReference, ...]

    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("target", "target.name"),
            ("gating", "gating"),
            ("jobs", "jobs"),
            ("checked", "checked"),
            ("missing", "missing_count"),
        )
    )

    @property
    def missing_count(self) -> int:
        return len(self.missing)


class Orphan(Struct, frozen=True, kw_only=True):
    path: str  # as shown
    reference: str
    told: OrphanFields

    # Its JSON: the path, and each field its path tells (None where it tells none).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(("path", "path"), *((name, f"told.{name}") for name in ORPHAN_COLUMNS))
    )


class Coverage(Struct, frozen=True, kw_only=True):
    settings: ReferenceSettings
    listing: ReferenceListing
    targets: tuple[TargetCoverage, ...]
    orphans: tuple[Orphan, ...]
    problems: tuple[TemplateProblem, ...] = ()

    @property
    def missing(self) -> list[tuple[TargetCoverage, MissingReference]]:
        return [(t, m) for t in self.targets for m in t.missing]

    @property
    def gating_missing(self) -> int:
        return sum(len(t.missing) for t in self.targets if t.gating)

    @property
    def templates(self) -> dict[str, str]:
        return {t.name: t.template for t in self.settings.templates}

    @property
    def missing_by_target(self) -> tuple[TargetMissing, ...]:
        return tuple(TargetMissing(target=t.target.name, missing=m) for t, m in self.missing)

    # The JSON of `matrixgen coverage --format json` (schema/coverage.schema.json).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("root", "listing.shown_root"),
            ("present", "listing.present"),
            ("references", "templates"),
            ("targets", "targets"),
            ("missing", "missing_by_target"),
            ("orphans", "orphans"),
        )
    )


def compute_coverage(
    generation: Generation,
    settings: ReferenceSettings,
    listing: ReferenceListing,
    targets: Sequence[Target],
    *,
    all_targets: Sequence[Target] | None = None,
    exclude_models: Iterable[str] = (),
) -> Coverage:
    """Missing references of `targets`, orphans against `all_targets` (default:
    the same targets): a file is an orphan only when no target selects it.
    `exclude_models`: models left out altogether (e.g. unit-tests in a tree
    whose recipes cannot opt out)."""
    excluded = frozenset(exclude_models)
    checker = ReferenceChecker(settings, listing)
    used: set[str] = set()
    results: dict[str, TargetCoverage] = {}
    asked = {t.name for t in targets}
    every = list(all_targets) if all_targets is not None else list(targets)
    every += [t for t in targets if t.name not in {a.name for a in every}]
    for target in every:
        selection = generation.selection(target)
        jobs = [j for j in selection.jobs if j.model not in excluded]
        for job in (*jobs, *(j for j in selection.skipped if j.model not in excluded)):
            used.update(checker.paths(job))
        if target.name not in asked:
            continue
        chosen = [j for j in jobs if checker.checks(j)]
        results[target.name] = TargetCoverage(
            target=target,
            gating=settings.is_gating(target.name),
            jobs=len(jobs),
            checked=len(chosen),
            missing=tuple(m for job in chosen for m in checker.missing(job)),
        )
    return Coverage(
        settings=settings,
        listing=listing,
        targets=tuple(results[t.name] for t in targets),  # in the order asked
        orphans=tuple(find_orphans(settings, listing, used, generation.jobs)),
        problems=tuple(
            TemplateProblem(reference=name, message=message, jobs=tuple(named.values()))
            for (name, message), named in sorted(checker.problems.items())
        ),
    )


def find_orphans(
    settings: ReferenceSettings,
    listing: ReferenceListing,
    used: Set[str],
    jobs: Sequence[Job],
) -> list[Orphan]:
    """Listed files that fit a template, are no selected job's path, nor a variant of one."""
    grouped = used_by_dir(used)
    known = {
        name: {v for v in (getattr(j, name) for j in jobs) if isinstance(v, str)}
        for name in ("model", "test_case", "environment", "tag", "scope")
    }
    known["platforms"] = known["platform"] = {j.platform for j in jobs}
    matchers = [TemplateMatcher.build(t, known) for t in settings.templates]
    orphans: list[Orphan] = []
    for path in sorted(listing.files):
        if path in used or is_variant(path, grouped):
            continue
        for matcher in matchers:
            fields = matcher.fit(path)
            if fields is None:
                continue
            shown = {ORPHAN_FIELDS[k]: v for k, v in fields.items() if k in ORPHAN_FIELDS}
            where, name = listing.shown(path), matcher.template.name
            orphans.append(Orphan(path=where, reference=name, told=OrphanFields(**shown)))
            break
    return orphans


def _targets(targets: Iterable[TargetCoverage]) -> Report:
    numbers = (Column(h, escape=str, right=True) for h in ("jobs", "checked", "missing"))
    return Report(
        [Column("target", escape=code_span), Column("gating", escape=str), *numbers],
        [
            (t.target.name, "yes" if t.gating else "no", t.jobs, t.checked, len(t.missing))
            for t in targets
        ],
    )


def _missing(coverage: Coverage) -> Report:
    headers = ("target", "job", "reference", "looked for", "nearest")
    return Report(
        [Column(h, escape=code_span, missing="-") for h in headers],
        [
            (t.target.name, str(m.job.identity), m.reference, m.path, m.short_hint or None)
            for t, m in coverage.missing
        ],
    )


def _orphans(coverage: Coverage) -> Report:
    headers = (("file", "file"), *((k, k.replace("_", " ")) for k in ORPHAN_COLUMNS))
    return Report(
        [Column(h, markdown=md, escape=code_span, missing="-") for h, md in headers],
        [(o.path, *(getattr(o.told, k) or None for k in ORPHAN_COLUMNS)) for o in coverage.orphans],
    )


def render_table(coverage: Coverage) -> str:
    """`matrixgen coverage`: targets, then missing references, then orphans."""
    out = [_targets(coverage.targets).text()]
    if coverage.missing:
        out += [f"\nMissing references ({len(coverage.missing)})\n", _missing(coverage).text()]
    if coverage.orphans:
        out.append(f"\nOrphans: files no job of any target selects ({len(coverage.orphans)})\n")
        out.append(_orphans(coverage).text())
    return "".join(out)


def summary_line(coverage: Coverage) -> str:
    listing = coverage.listing
    where = listing.shown(coverage.settings.prefix) or "."
    return (
        f"{len(coverage.targets)} target(s): {len(coverage.missing)} missing reference(s) "
        f"({coverage.gating_missing} in gating targets), {len(coverage.orphans)} orphan(s); "
        f"reference tree {where} ({listing.where}): {len(listing.files)} file(s)"
    )


def render_markdown(coverage: Coverage) -> str:
    """A PR comment: a summary, the targets that miss something, the missing
    files and the orphans."""
    lines = [
        "<!-- matrixgen-coverage -->",
        "### matrixgen reference coverage",
        "",
        f"**{len(coverage.missing)} missing reference(s)** "
        f"({coverage.gating_missing} in gating targets) · "
        f"**{len(coverage.orphans)} orphan(s)** · {len(coverage.targets)} target(s)",
        "",
    ]
    short = [t for t in coverage.targets if t.missing]
    if short:
        lines += _targets(short).markdown()
        lines += ["", "#### Missing references", "", *_missing(coverage).markdown(), ""]
    if coverage.orphans:
        lines += ["#### Orphans (no job of any target selects them)", ""]
        lines += [*_orphans(coverage).markdown(), ""]
    return "\n".join(lines) + "\n"
