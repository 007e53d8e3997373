"""Reference coverage (docs/coverage.md): per target, the jobs it runs that miss
a reference file, and the orphans, files that fit a template but are no path
(nor `_suffix` variant) of a job any target selects; skipped and opted-out
jobs' files are not orphans, only not checked. One listing of the reference
tree; each job's paths are rendered once however many targets select it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct

from matrixgen.documents.recipe import rows
from matrixgen.engine.targets import resolve_targets
from matrixgen.model.errors import Finding, Severity, did_you_mean, finding
from matrixgen.model.jobs import Job, Target
from matrixgen.model.references import (
    OPT_OUT_KEY,
    ORPHAN_FIELDS,
    ReferenceListing,
    ReferenceSettings,
    ReferenceTemplate,
    TemplateMatcher,
    is_variant,
    job_opt_out,
    list_directory,
    parse_opt_out,
    reference_path,
    used_by_dir,
)
from matrixgen.model.templates import TemplateError
from matrixgen.pipeline import Generation
from matrixgen.util.checkout import checkout_top
from matrixgen.util.escape import markdown_code as code_span  # no content breaks out of it
from matrixgen.util.values import JsonLayout
from matrixgen.views.table import Column, Report, few

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext
    from matrixgen.engine.load import RecipeTree


# The job fields of a missing reference, in the JSON, then where it was looked for.
MISSING_JOB_FIELDS = ("model", "test_case", "tag", "environment", "platform")
PLACE_KEYS = tuple((k, k) for k in ("reference", "path", "hint"))


class MissingReference(Struct, frozen=True, kw_only=True):
    """A job that misses one of its references."""

    job: Job
    reference: str
    path: str  # as shown: the root joined with the rendered template
    hint: str | None  # the nearest existing file, as shown

    @property
    def short_hint(self) -> str | None:
        """The hint as a file name when it sits in the folder looked in."""
        if self.hint is None:
            return None
        here, _, name = self.hint.rpartition("/")
        return name if here == self.path.rpartition("/")[0] else self.hint

    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(*((k, f"job.{k}") for k in MISSING_JOB_FIELDS), *PLACE_KEYS)
    )


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


class ReferenceChecker:
    """Renders and looks up each job's references once, for many targets."""

    def __init__(self, settings: ReferenceSettings, listing: ReferenceListing) -> None:
        self.settings = settings
        self.listing = listing
        self._missing: dict[int, tuple[MissingReference, ...]] = {}
        self._paths: dict[int, tuple[str, ...]] = {}
        self._keep: dict[int, Job] = {}  # keeps ids stable while cached
        self._hints: dict[str, str | None] = {}
        self.problems: dict[tuple[str, str], list[Job]] = {}

    def _render(self, template: ReferenceTemplate, job: Job) -> str | None:
        """The template's path for the job; None (and the problem kept) when it cannot fill it."""
        try:
            return reference_path(template, job)
        except TemplateError as exc:
            self.problems.setdefault((template.name, str(exc)), []).append(job)
            return None

    def paths(self, job: Job) -> tuple[str, ...]:
        """Every path (relative to the root) the job's templates render to."""
        key = id(job)
        if key not in self._paths:
            self._keep[key] = job
            rendered = (self._render(t, job) for t in self.settings.templates)
            self._paths[key] = tuple(p for p in rendered if p is not None)
        return self._paths[key]

    def missing(self, job: Job) -> tuple[MissingReference, ...]:
        """The references a job needs and the listing lacks (none when it opts out of all)."""
        key = id(job)
        if key not in self._missing:
            self._keep[key] = job
            opt_out = job_opt_out(job)
            wanted = (
                t for t in self.settings.templates if opt_out is None or not opt_out.covers(t.name)
            )
            rendered = ((t.name, self._render(t, job)) for t in wanted)
            self._missing[key] = tuple(
                MissingReference(
                    job=job, reference=name, path=self.listing.shown(rel), hint=self.hint(rel)
                )
                for name, rel in rendered
                if rel is not None and rel not in self.listing.files
            )
        return self._missing[key]

    def hint(self, rel: str) -> str | None:
        if rel not in self._hints:
            near = self.listing.nearest(rel)
            self._hints[rel] = self.listing.shown(near) if near is not None else None
        return self._hints[rel]


def checked(job: Job, settings: ReferenceSettings) -> bool:
    """Whether any of the job's references is checked (it does not opt out of all)."""
    opt_out = job_opt_out(job)
    return opt_out is None or any(not opt_out.covers(t.name) for t in settings.templates)


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


# What an orphan's path tells of the job it would be for, as reports show it.
ORPHAN_COLUMNS = ("model", "test_case", "environment", "platform")


class Orphan(Struct, frozen=True, kw_only=True):
    path: str  # as shown
    reference: str
    fields: Mapping[str, str]

    # Its JSON: the path, and each field its path tells (None where it tells none).
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(("path", "path"), *((name, f"told.{name}") for name in ORPHAN_COLUMNS))
    )

    @property
    def told(self) -> OrphanFields:
        return OrphanFields(**{k: v for k, v in self.fields.items() if k in ORPHAN_COLUMNS})


class OrphanFields(Struct, frozen=True, kw_only=True):
    """What an orphan's path tells of the job it would be for."""

    model: str | None = None
    test_case: str | None = None
    environment: str | None = None
    platform: str | None = None


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
    orphans: bool = True,
) -> Coverage:
    """Missing references of `targets`, orphans against `all_targets` (default:
    the same targets): a file is an orphan only when no target selects it.
    `exclude_models`: models left out altogether (e.g. unit-tests in a tree
    whose recipes cannot opt out); `orphans=False` skips looking for orphans."""
    excluded = frozenset(exclude_models)
    checker = ReferenceChecker(settings, listing)
    used: set[str] = set()
    results: list[TargetCoverage] = []
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
        chosen = [j for j in jobs if checked(j, settings)]
        missing = [m for job in chosen for m in checker.missing(job)]
        results.append(
            TargetCoverage(
                target=target,
                gating=settings.is_gating(target.name),
                jobs=len(jobs),
                checked=len(chosen),
                missing=tuple(missing),
            )
        )
    order = {t.name: i for i, t in enumerate(targets)}
    results.sort(key=lambda r: order[r.target.name])
    found = find_orphans(settings, listing, used, generation.jobs) if orphans else []
    return Coverage(
        settings=settings,
        listing=listing,
        targets=tuple(results),
        orphans=tuple(found),
        problems=tuple(
            TemplateProblem(reference=name, message=message, jobs=tuple(jobs))
            for (name, message), jobs in sorted(checker.problems.items())
        ),
    )


def find_orphans(
    settings: ReferenceSettings,
    listing: ReferenceListing,
    used: Iterable[str],
    jobs: Sequence[Job],
) -> list[Orphan]:
    """Listed files that fit a template, are no selected job's path, nor a variant of one."""
    used_set = set(used)
    grouped = used_by_dir(used_set)
    known = {
        name: {v for v in (getattr(j, name) for j in jobs) if isinstance(v, str)}
        for name in ("model", "test_case", "environment", "tag", "scope")
    }
    known["platforms"] = known["platform"] = {j.platform for j in jobs}
    matchers = [TemplateMatcher.build(t, known) for t in settings.templates]
    orphans: list[Orphan] = []
    for path in sorted(listing.files):
        if path in used_set or is_variant(path, grouped):
            continue
        for matcher in matchers:
            fields = matcher.fit(path)
            if fields is None:
                continue
            shown = {ORPHAN_FIELDS[k]: v for k, v in fields.items() if k in ORPHAN_FIELDS}
            orphans.append(
                Orphan(path=listing.shown(path), reference=matcher.template.name, fields=shown)
            )
            break
    return orphans


def read_listing(
    recipes: Path, settings: ReferenceSettings, root: Path | None = None
) -> ReferenceListing:
    """The reference tree of a recipe tree on disk: `root` when given (--root),
    else the configured root below the top of the checkout the recipes are in
    (outside a checkout, the recipes' parent: a checkout with them at its top)."""
    if root is not None:
        return list_directory(root, settings.prefix, shown_root=_shown(root))
    top = checkout_top(recipes) or recipes.resolve().parent
    directory = top / settings.root if settings.root else top
    return list_directory(directory, settings.prefix, shown_root=_shown(directory))


def _shown(directory: Path) -> str:
    """A directory as messages show it: relative to the current one when inside it."""
    here = Path.cwd()
    absolute = directory if directory.is_absolute() else here / directory
    try:
        rel = absolute.resolve().relative_to(here.resolve())
    except ValueError:
        return absolute.as_posix()
    text = rel.as_posix()
    return "" if text == "." else text


def check_references(context: ValidationContext) -> Iterator[Finding]:
    """validate: opt-outs are well formed and name declared references; with a
    listing of the reference tree, every target's jobs have their references (an
    error in a gating target, a warning elsewhere), once per job and reference."""
    tree = context.tree
    settings = tree.config.references
    if settings is None:
        return
    yield from opt_out_findings(tree, settings)
    listing = context.references
    if listing is None:
        return
    config = tree.config
    if not listing.present:
        where = listing.shown(settings.prefix) or "the repository top"
        yield finding(
            config.locate(["references"]),
            "reference-tree",
            f"no reference tree at {where} ({listing.where}): no reference is checked",
            Severity.WARNING,
        )
        return
    generation = context.generation
    targets = resolve_targets(config, generation.jobs)
    coverage = compute_coverage(generation, settings, listing, targets, orphans=False)
    # One finding per missing file (the fix is adding it), at the first row that needs it.
    grouped: dict[tuple[str, str], tuple[MissingReference, list[TargetCoverage]]] = {}
    for target, missing in coverage.missing:
        key = (missing.reference, missing.path)
        first, in_targets = grouped.setdefault(key, (missing, []))
        if missing.job.source < first.job.source:
            grouped[key] = (missing, in_targets)
        in_targets.append(target)
    for missing, in_targets in grouped.values():
        gating = [t.target.name for t in in_targets if t.gating]
        names = [t.target.name for t in in_targets]
        hint = f"; nearest: {missing.short_hint}" if missing.hint else ""
        which = f"gating target(s) {few(gating, 3)}" if gating else f"target(s) {few(names, 3)}"
        yield finding(
            missing.job.source,
            "reference-missing",
            f"{missing.job.identity}: no {missing.reference} file {missing.path}{hint} ({which})",
            Severity.ERROR if gating else Severity.WARNING,
        )
    for problem in coverage.problems:
        example = problem.jobs[0]
        more = f" and {len(problem.jobs) - 1} other job(s)" if len(problem.jobs) > 1 else ""
        yield finding(
            config.locate(["references", "templates", problem.reference]),
            "reference-template",
            f'reference "{problem.reference}": {problem.message} ({example.identity}{more})',
        )


def opt_out_findings(tree: RecipeTree, settings: ReferenceSettings) -> Iterator[Finding]:
    """A malformed opt-out, or one naming no declared reference, is an error."""
    declared = [t.name for t in settings.templates]
    for recipe in tree.tests:
        data = recipe.data
        places: list[tuple[tuple[str | int, ...], Any]] = []
        spec = data.get("spec")
        if isinstance(spec, dict) and OPT_OUT_KEY in spec:
            places.append((("spec", OPT_OUT_KEY), spec[OPT_OUT_KEY]))
        if recipe.format_version == 2:
            for where, row in rows(data):
                if OPT_OUT_KEY in row:
                    places.append(((*where, OPT_OUT_KEY), row[OPT_OUT_KEY]))
        for keys, value in places:
            parsed = parse_opt_out(value)
            if isinstance(parsed, str):
                yield finding(recipe.document.locate(list(keys)), "reference-opt-out", parsed)
                continue
            for name in sorted(parsed.names or ()):
                if name not in declared:
                    yield finding(
                        recipe.document.locate([*keys, "skip"]),
                        "reference-opt-out",
                        f'references.skip: "{name}" is not a declared reference'
                        f"{did_you_mean(name, declared)}; declared in {tree.config.path}: "
                        f"{', '.join(declared)}",
                    )


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
        [(o.path, *(o.fields.get(k) or None for k in ORPHAN_COLUMNS)) for o in coverage.orphans],
    )


def render_table(coverage: Coverage) -> str:
    """`matrixgen coverage`: targets, then missing references, then orphans."""
    out = [_targets(coverage.targets).text()]
    if coverage.missing:
        out.append(f"\nMissing references ({len(coverage.missing)})\n")
        out.append(_missing(coverage).text())
    if coverage.orphans:
        out.append(f"\nOrphans: files no job of any target selects ({len(coverage.orphans)})\n")
        out.append(_orphans(coverage).text())
    return "".join(out)


def summary_line(coverage: Coverage) -> str:
    listing = coverage.listing
    where = listing.shown(coverage.settings.prefix) or "."
    missing = len(coverage.missing)
    return (
        f"{len(coverage.targets)} target(s): {missing} missing reference(s) "
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
