"""Reference checking (docs/coverage.md): each job's reference files rendered
from the templates and looked up in a listing of the reference tree, once per
job however many targets select it; `validate`'s check of them, and what an
orphan's path tells, as the coverage report and the diff show it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec import Struct

from matrixgen.documents.recipe import rows
from matrixgen.model.errors import Finding, Severity, did_you_mean, finding
from matrixgen.model.jobs import Job
from matrixgen.model.references import (
    OPT_OUT_KEY,
    ReferenceListing,
    ReferenceSettings,
    ReferenceTemplate,
    job_opt_out,
    list_directory,
    parse_opt_out,
    reference_path,
)
from matrixgen.model.templates import TemplateError
from matrixgen.util.checkout import checkout_top
from matrixgen.util.values import JsonLayout
from matrixgen.views.table import few

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


class ReferenceChecker:
    """Renders each job's references once, for many targets, and looks them up."""

    def __init__(self, settings: ReferenceSettings, listing: ReferenceListing) -> None:
        self.settings = settings
        self.listing = listing
        # By the job's id, the job (kept so that the id stays its own) and each
        # template's name and path for it, None where it cannot fill the template.
        self._rendered: dict[int, tuple[Job, tuple[tuple[str, str | None], ...]]] = {}
        self._hints: dict[str, str | None] = {}
        # Per template and message, the jobs that cannot fill it, each once: a job a
        # quarantine entry marks is a new value in each target that selects it.
        self.problems: dict[tuple[str, str], dict[tuple[str, ...], Job]] = {}

    def _render(self, template: ReferenceTemplate, job: Job) -> str | None:
        """The template's path for the job; None (and the problem kept) when it cannot fill it."""
        try:
            return reference_path(template, job)
        except TemplateError as exc:
            named = self.problems.setdefault((template.name, str(exc)), {})
            named.setdefault(job.duplicate_key(), job)
            return None

    def rendered(self, job: Job) -> tuple[tuple[str, str | None], ...]:
        """Each template's name and path for the job, rendered once (so a
        template it cannot fill names it once among the problem's jobs)."""
        key = id(job)
        if key not in self._rendered:
            paths = tuple((t.name, self._render(t, job)) for t in self.settings.templates)
            self._rendered[key] = (job, paths)
        return self._rendered[key][1]

    def paths(self, job: Job) -> tuple[str, ...]:
        """Every path (relative to the root) the job's templates render to."""
        return tuple(path for _, path in self.rendered(job) if path is not None)

    def missing(self, job: Job) -> tuple[MissingReference, ...]:
        """The references a job needs and the listing lacks (none when it opts out of all)."""
        opt_out = job_opt_out(job)
        return tuple(
            MissingReference(
                job=job, reference=name, path=self.listing.shown(rel), hint=self.hint(rel)
            )
            for name, rel in self.rendered(job)
            if rel is not None and rel not in self.listing.files
            if opt_out is None or not opt_out.covers(name)
        )

    def checks(self, job: Job) -> bool:
        """Whether any of the job's references is checked (it does not opt out of all)."""
        opt_out = job_opt_out(job)
        return opt_out is None or any(not opt_out.covers(t.name) for t in self.settings.templates)

    def hint(self, rel: str) -> str | None:
        if rel not in self._hints:
            near = self.listing.nearest(rel)
            self._hints[rel] = self.listing.shown(near) if near is not None else None
        return self._hints[rel]


class OrphanFields(Struct, frozen=True, kw_only=True):
    """What an orphan's path tells of the job it would be for."""

    model: str | None = None
    test_case: str | None = None
    environment: str | None = None
    platform: str | None = None


# Its fields, as reports show them (a column each).
ORPHAN_COLUMNS: tuple[str, ...] = OrphanFields.__struct_fields__


def read_listing(
    recipes: Path, settings: ReferenceSettings, root: Path | None = None
) -> ReferenceListing:
    """The reference tree of a recipe tree on disk: `root` when given (--root),
    else the configured root below the top of the checkout the recipes are in
    (outside a checkout, the recipes' parent: a checkout with them at its top)."""
    if root is None:
        top = checkout_top(recipes) or recipes.resolve().parent
        root = top / settings.root if settings.root else top
    return list_directory(root, settings.prefix, shown_root=_shown(root))


def _shown(directory: Path) -> str:
    """A directory as messages show it: relative to the current one when inside it."""
    here = Path.cwd()
    absolute = directory if directory.is_absolute() else here / directory
    resolved, top = absolute.resolve(), here.resolve()
    if not resolved.is_relative_to(top):
        return absolute.as_posix()
    text = resolved.relative_to(top).as_posix()
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
    checker = ReferenceChecker(settings, listing)
    # One finding per missing file (the fix is adding it), at the first row that needs it.
    grouped: dict[tuple[str, str], tuple[MissingReference, list[str]]] = {}
    for target in generation.checked_targets():
        selection = generation.selection(target)
        for job in (*selection.jobs, *selection.skipped):
            checker.paths(job)  # a template a skipped job cannot fill is a problem too
        for missing in (m for job in selection.jobs for m in checker.missing(job)):
            key = (missing.reference, missing.path)
            first, names = grouped.setdefault(key, (missing, []))
            if missing.job.source < first.job.source:
                grouped[key] = (missing, names)
            names.append(target.name)
    for missing, names in grouped.values():
        gating = [name for name in names if settings.is_gating(name)]
        hint = f"; nearest: {missing.short_hint}" if missing.hint else ""
        which = f"gating target(s) {few(gating, 3)}" if gating else f"target(s) {few(names, 3)}"
        yield finding(
            missing.job.source,
            "reference-missing",
            f"{missing.job.identity}: no {missing.reference} file {missing.path}{hint} ({which})",
            Severity.ERROR if gating else Severity.WARNING,
        )
    for (name, message), named in sorted(checker.problems.items()):
        example, *others = named.values()
        more = f" and {len(others)} other job(s)" if others else ""
        yield finding(
            config.locate(["references", "templates", name]),
            "reference-template",
            f'reference "{name}": {message} ({example.identity}{more})',
        )


def opt_out_findings(tree: RecipeTree, settings: ReferenceSettings) -> Iterator[Finding]:
    """A malformed opt-out, or one naming no declared reference, is an error."""
    declared = [t.name for t in settings.templates]
    for recipe in tree.tests:
        places: list[tuple[tuple[str | int, ...], Any]] = [(("spec",), recipe.data.get("spec"))]
        if recipe.format_version == 2:
            places += rows(recipe.data)
        for where, holder in places:
            if not isinstance(holder, dict) or OPT_OUT_KEY not in holder:
                continue
            keys = (*where, OPT_OUT_KEY)
            parsed = parse_opt_out(holder[OPT_OUT_KEY])
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
