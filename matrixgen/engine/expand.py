"""Stage 3, expand: turn every product row into concrete jobs, by Megatron-LM's
rules (docs/megatron-format.md).

Problems Megatron-LM's own parser tolerates are warnings in a format_version 1
tree, so that reading such a tree never changes what it selects; in
format_version 2 they are errors.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from matrixgen.documents.config import ProjectConfig
from matrixgen.documents.recipe import (
    CHANGE_KEYS,
    Block,
    RecipeFile,
    Row,
    read_recipe,
    show,
    shown,
    with_change_keys,
)
from matrixgen.documents.recipe_fields import COUNT_MINIMUM
from matrixgen.engine.load import RecipeTree
from matrixgen.model.errors import (
    FileFindings,
    Finding,
    Findings,
    Location,
    Severity,
    did_you_mean,
)
from matrixgen.model.jobs import Job
from matrixgen.model.templates import TemplateError, render
from matrixgen.model.vocab import (
    CONFIG_FILENAME,
    DEFAULT_CADENCE,
    LEGACY_SCOPE_ALIASES,
    MAX_JOBS_CEILING,
)
from matrixgen.util.values import ComparedValue


class FileExpansion(Struct, frozen=True):
    """The jobs of one file and what expanding it found; cacheable by content."""

    jobs: tuple[Job, ...]
    findings: tuple[Finding, ...]


class Expansion(ComparedValue, frozen=True):
    """Every job of a tree, in a deterministic order, and every finding."""

    jobs: tuple[Job, ...]
    findings: tuple[Finding, ...]
    build_names: frozenset[str]

    def with_jobs(self, jobs: tuple[Job, ...]) -> Expansion:
        """The same expansion holding other jobs."""
        return Expansion(jobs=jobs, findings=self.findings, build_names=self.build_names)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]


class _Budget(Struct):
    """The job cap shared by every file of one expansion."""

    limit: int
    used: int = 0
    exceeded: bool = False


def expand_tree(tree: RecipeTree, *, cache: dict[Any, FileExpansion] | None = None) -> Expansion:
    """Expand every test recipe of a tree, then check what spans files.

    `cache` keeps each file's expansion between calls. A file's jobs depend on
    its content, its shown path and the config only, so with content ids
    (`tree.blob_ids`) the key is (file id, path, config id): two revisions of a
    tree share the expansions of every file that did not change.
    """
    config = tree.config
    findings = Findings()
    findings.extend(tree.findings)
    budget = _Budget(min(config.max_jobs, MAX_JOBS_CEILING))
    jobs: list[Job] = []
    ids = tree.blob_ids or {}
    # Only content ids make a key (an object's id() is reused once it is freed):
    # a file, or a config, without one is expanded afresh and not kept.
    config_key = ids.get(CONFIG_FILENAME, "") if config.document is not None else ""
    usable = cache is not None and (config.document is None or bool(config_key))
    for recipe in tree.files:
        blob = ids.get(recipe.rel)
        key = (blob, recipe.path, config_key)
        cached = usable and bool(blob)
        result = cache.get(key) if cache is not None and cached else None
        if result is not None and budget.used + len(result.jobs) > budget.limit:
            result = None  # expand again, so the cap is reported where it is passed
        if result is None:
            result = expand_file(recipe, config, budget=budget)
            # A file cut short by the shared cap is not its own expansion: keep it out.
            if cache is not None and cached and not budget.exceeded:
                cache[key] = result
        else:
            budget.used += len(result.jobs)
        jobs.extend(result.jobs)
        findings.extend(result.findings)
        if budget.exceeded:
            break
    build_names = _build_names(tree, findings)
    severity = Severity.ERROR if tree.format_version == 2 else Severity.WARNING
    _check_builds(jobs, build_names, findings, severity)
    jobs.sort(key=Job.sort_key)
    return Expansion(
        jobs=tuple(_mark_duplicates(jobs)),
        findings=tuple(findings.sorted()),
        build_names=build_names,
    )


def expand_file(recipe: RecipeFile, config: ProjectConfig, *, budget: _Budget) -> FileExpansion:
    """Expand one recipe file, its jobs counted against the tree's cap."""
    findings = Findings()
    jobs = _FileExpander(recipe, config, findings, budget).run()
    return FileExpansion(jobs=tuple(jobs), findings=tuple(findings.items))


class _FileExpander(FileFindings):
    def __init__(
        self, recipe: RecipeFile, config: ProjectConfig, findings: Findings, budget: _Budget
    ) -> None:
        super().__init__(recipe, findings)
        self.config = config
        self.budget = budget
        vocab = config.vocabulary
        self.declared_scopes = vocab.all_scopes if vocab else frozenset()
        self.spec: dict[str, Any] = {}

    def run(self) -> list[Job]:
        """The jobs of each usable row, with each value's findings as it is reached."""
        document = read_recipe(self.recipe, self.config.vocabulary)
        self.findings.extend(document.findings)
        self.spec = document.spec or {}
        jobs: list[Job] = []
        for block in document.products:
            self.findings.extend(block.findings)
            for row in block.products:
                if row.findings:
                    self.findings.extend(row.findings)
                if row.usable:
                    self.row(block, row, jobs)
                if self.budget.exceeded:
                    return jobs
        return jobs

    def row(self, block: Block, row: Row, jobs: list[Job]) -> None:
        count = math.prod(map(len, row.values))
        self.budget.used += count
        if self.budget.used > self.budget.limit:
            self.budget.exceeded = True
            self.error(
                self.at(*row.where),
                "expansion-cap",
                f"expanding this row passes the cap of {self.budget.limit:,} jobs "
                f"(defaults.max_jobs in the project config; never more than "
                f"{MAX_JOBS_CEILING:,})",
            )
            return
        explicit = row.cadence if row.cadence is not None else block.cadence
        spec = block.spec_of_rows or {}
        # Every job of the row has the same keys of its own (the axes, test_case,
        # cadence): the spec's other keys are picked once, not once per job.
        own = {*row.axes, "test_case", "cadence"}
        base = {k: v for k, v in spec.items() if k not in own}
        extra = self.extra(spec, row.data)
        for combo in itertools.product(*row.values):
            flat = dict(zip(row.axes, combo, strict=True))
            flat["test_case"] = block.test_case
            cadence, declared = self.cadence(flat, explicit)
            flat["cadence"] = list(cadence)
            merged = base.copy()
            merged.update(flat)
            if extra:
                merged.update(extra)
            jobs.append(self.job(merged, cadence, row, declared))

    def extra(self, spec: Mapping[str, Any], row: dict[str, Any]) -> dict[str, Any]:
        """What a format_version 2 row adds to each job: its paths, `always` and
        references."""
        extra: dict[str, Any] = {}
        if not self.v2:
            return extra
        if any(k in row for k in CHANGE_KEYS):
            extra = {k: v for k, v in with_change_keys(spec, row).items() if k in CHANGE_KEYS}
        if "references" in row:
            extra["references"] = row["references"]
        return extra

    def cadence(
        self, flat: dict[str, Any], explicit: list[str] | None
    ) -> tuple[tuple[str, ...], str | None]:
        """The job's cadence, and its scope as the config names it: a legacy scope
        alias (nightly, weekly) becomes its tier and implies its cadence when
        neither row nor block sets one."""
        cadence = tuple(explicit) if explicit is not None else DEFAULT_CADENCE
        scope = flat.get("scope")
        declared = None
        if isinstance(scope, str) and scope in LEGACY_SCOPE_ALIASES:
            tier, implied = LEGACY_SCOPE_ALIASES[scope]
            flat["scope"] = tier
            if explicit is None and implied is not None:
                cadence = implied
            if scope in self.declared_scopes:
                declared = scope  # shown as the config names it
        return cadence, declared

    def job(
        self,
        merged: dict[str, Any],
        cadence: tuple[str, ...],
        row: Row,
        declared_scope: str | None,
    ) -> Job:
        site = _Site(self, merged, row)
        location = site.row
        return Job(
            model=self.text_field(merged, "model", site),
            test_case=merged["test_case"],
            environment=self.text_field(merged, "environment", site),
            platform=self.text_field(merged, "platforms", site),
            tag=self.name_field(merged, "tag", site),
            scope=self.name_field(merged, "scope", site),
            cadence=cadence,
            name=self.template(merged, "name", location) or merged["test_case"],
            build=self.template(merged, "build", location) if "build" in merged else None,
            n_repeat=self.count_field(merged, "n_repeat", self.config.n_repeat, site),
            time_limit=self.count_field(merged, "time_limit", self.config.time_limit, site),
            nodes=self.count_field(merged, "nodes", None, site),
            gpus=self.count_field(merged, "gpus", None, site),
            allow_failure=self.flag_field(merged, "allow_failure", site),
            env=row.env,
            args=row.args,
            spec=MappingProxyType(merged),
            recipe=self.recipe.rel,
            source=location,
            declared_scope=declared_scope,
        )

    def text_field(self, merged: Mapping[str, Any], key: str, site: _Site) -> str:
        value = merged.get(key)
        if isinstance(value, str) and value:
            return value
        if value is None:
            self.note(
                site.row, "field-missing", f'the job has no "{key}" (neither row nor spec sets it)'
            )
        else:
            self.note(site(key), "field-type", f'"{key}" must be a single name, not {shown(value)}')
        return "" if value is None else show(value)

    def name_field(self, merged: Mapping[str, Any], key: str, site: _Site) -> str | None:
        """scope and tag: optional names. A format_version 1 tree keeps what
        Megatron-LM's parser keeps (a number compares unequal to every name)."""
        value = merged.get(key)
        if value is None:
            return None
        if not (isinstance(value, str) and value) and self.v2:
            self.error(site(key), "field-type", f'"{key}" must be a name, not {shown(value)}')
        return str(value)

    def count_field(
        self, merged: Mapping[str, Any], key: str, default: int | None, site: _Site
    ) -> Any:
        value = merged.get(key)
        if value is None:
            return default
        # format_version 2 holds counts to what its schema says; Megatron-LM trees
        # only need them to be whole numbers.
        least = COUNT_MINIMUM.get(key, 0) if self.v2 else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            want = "a whole number" + (f" of at least {least}" if least else "")
            self.note(site(key), "field-type", f'"{key}" must be {want}, not {shown(value)}')
            return default
        return value

    def flag_field(self, merged: Mapping[str, Any], key: str, site: _Site) -> bool:
        value = merged.get(key)
        if value is None or isinstance(value, bool):
            return value is True
        self.note(site(key), "field-type", f'"{key}" must be true or false, not {shown(value)}')
        return False

    def template(self, merged: Mapping[str, Any], key: str, location: Location) -> str | None:
        template = merged.get(key)
        if not isinstance(template, str):
            self.note(location, "template-type", f'spec "{key}" must be a string template')
            return None
        try:
            return render(template, merged)
        except TemplateError as exc:
            self.note(location, "template", f'spec "{key}" ({template}): {exc}')
            return None


class _Site:
    """Where a job's field comes from, found only when a finding needs it: the
    value in the row, else the spec's key, else the row."""

    __slots__ = ("expander", "merged", "of_row", "row")

    def __init__(self, expander: _FileExpander, merged: Mapping[str, Any], row: Row) -> None:
        self.expander, self.merged, self.of_row = expander, merged, row
        self.row = row.location or expander.at(*row.where)

    def __call__(self, key: str) -> Location:
        where, data = self.of_row.where, self.of_row.data
        if key in data:
            values = data[key]
            value = self.merged.get(key)
            for i, item in enumerate(values if isinstance(values, list) else ()):
                if item is value or (type(item) is type(value) and item == value):
                    return self.expander.at(*where, key, i)
            return self.expander.at(*where, key)
        if key in self.expander.spec:
            return self.expander.at("spec", key)
        return self.row


def _build_names(tree: RecipeTree, findings: Findings) -> frozenset[str]:
    names: set[str] = set()
    for recipe in tree.builds:
        spec = recipe.data.get("spec")
        name = spec.get("name") if isinstance(spec, dict) else None
        if isinstance(name, str):
            names.add(name)
        else:
            findings.add(
                recipe.document.locate(["spec", "name"]),
                "build-name",
                "a build recipe needs spec.name, the name jobs refer to in their build",
            )
    return frozenset(names)


def _check_builds(
    jobs: Iterable[Job], build_names: frozenset[str], findings: Findings, severity: Severity
) -> None:
    reported: set[tuple[Location, str]] = set()
    for job in jobs:
        if job.build is not None and job.build not in build_names:
            key = (job.source, job.build)
            if key in reported:
                continue
            reported.add(key)
            findings.add(
                job.source,
                "build-missing",
                f'no build recipe is named "{job.build}" (needed by {job.test_case})'
                f"{did_you_mean(job.build, build_names)}",
                severity,
            )


def _mark_duplicates(jobs: list[Job]) -> list[Job]:
    """Give each job that shares its identity and scope with others (jobs sorted,
    so they are neighbours) the locations of all of them. Selection keeps one job
    per identity in a target (`select.one_per_identity`); validate reports them."""
    out: list[Job] = []
    for _, group in itertools.groupby(jobs, key=Job.duplicate_key):
        same = list(group)
        if len(same) == 1:
            out.append(same[0])
        else:
            where = tuple(sorted({job.source for job in same}))
            out.extend(replace(job, definitions=where) for job in same)
    return out
