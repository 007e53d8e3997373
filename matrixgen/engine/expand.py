"""Stage 3, expand: turn every product row into concrete jobs.

The rules are Megatron-LM's (docs/megatron-format.md): each row multiplies out over all its
keys but `cadence`; the combination overrides the spec; cadence comes from the
row, else the test-case block, else the default, except that a legacy scope
alias (nightly, weekly) implies its cadence when neither sets one.

Problems that make a row impossible to expand are errors. Problems Megatron-LM's
own parser tolerates are warnings in a format_version 1 tree, so that reading
such a tree never changes what it selects; in format_version 2 they are errors.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.documents.config import ProjectConfig
from matrixgen.engine.errors import Finding, Findings, Location, Severity, did_you_mean
from matrixgen.engine.load import RecipeTree
from matrixgen.engine.model import Job, RecipeFile
from matrixgen.engine.templates import TemplateError, render
from matrixgen.engine.vocab import (
    ALL_CADENCES,
    CONFIG_FILENAME,
    DEFAULT_CADENCE,
    LEGACY_SCOPE_ALIASES,
    MAX_JOBS_CEILING,
    RecipeType,
)
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.values import ComparedValue

# Row keys that are attributes of each job, not axes that multiply out.
ATTRIBUTE_KEYS_V1 = frozenset({"cadence"})
# `references` (an opt-out of the declared reference files) replaces the spec's.
ATTRIBUTE_KEYS_V2 = frozenset({"cadence", "env", "args", "paths", "always", "references"})
# Change-based selection (format_version 2): globs of repository paths whose
# change needs a case, and `always` for cases every change runs. They add up
# from the spec (the file) to the block to the row; engine/changes.py reads them.
CHANGE_KEYS = ("paths", "always")
# Row keys a format_version 2 tree knows without declaring them.
KNOWN_AXES_V2 = frozenset(
    {
        "environment",
        "scope",
        "platforms",
        "tag",
        "n_repeat",
        "time_limit",
        "timeout",
        "nodes",
        "gpus",
        "allow_failure",
    }
)
BLOCK_KEYS = frozenset({"test_case", "cadence", "products", "paths", "always"})
# Spec keys a format_version 2 file may use (schema/recipe.schema.json, spec_v2);
# names starting with "x-" are free for tools of the project's own.
KNOWN_SPEC_KEYS_V2 = frozenset(
    {
        "name",
        "model",
        "build",
        "nodes",
        "gpus",
        "n_repeat",
        "time_limit",
        "timeout",
        "platforms",
        "environment",
        "scope",
        "tag",
        "script_setup",
        "script",
        "launcher",
        "env",
        "args",
        "artifacts",
        "source",
        "needs",
        "references",
        "paths",
        "always",
    }
)
# Spec keys of format_version 2 whose shape only the schema would otherwise check.
SPEC_SHAPES_V2 = {
    "script_setup": "text",
    "script": "text",
    "launcher": "text",
    "needs": "names",
    "artifacts": "table",
    "source": "mapping",
}
ENV_NAME = name_pattern(r"[A-Za-z_][A-Za-z0-9_]*")
# The least value of each count in a format_version 2 tree (schema/recipe.schema.json).
COUNT_MINIMUM = {"n_repeat": 1, "time_limit": 1, "nodes": 1, "gpus": 0}
TOP_KEYS = frozenset({"type", "format_version", "maintainers", "loggers", "spec", "products"})

_SCALARS = (str, int, float, bool)


class FileExpansion(Struct, frozen=True):
    """The jobs of one file and what expanding it found; cacheable by content."""

    jobs: tuple[Job, ...]
    findings: tuple[Finding, ...]


class Expansion(ComparedValue, frozen=True):
    """Every job of a tree, in a deterministic order, and every finding."""

    jobs: tuple[Job, ...]
    findings: tuple[Finding, ...]
    build_names: frozenset[str]
    # What later stages derive from these jobs and keep for each other (each
    # target's selection: validate's checks and the emitters select once).
    # Not compared; an expansion made with other jobs (`with_jobs`) starts
    # with an empty memo.
    memo: dict[str, Any] = field(default_factory=dict)

    def with_jobs(self, jobs: tuple[Job, ...]) -> Expansion:
        """The same expansion holding other jobs, with a memo of its own."""
        return Expansion(jobs=jobs, findings=self.findings, build_names=self.build_names)

    def compared(self) -> tuple:
        return (self.jobs, self.findings, self.build_names)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]


class _Budget:
    """The job cap shared by every file of one expansion."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.exceeded = False


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
    config_key: Any = ids.get(CONFIG_FILENAME, "") if config.document is not None else ""
    if config.document is not None and not config_key:
        config_key = id(config)
    for recipe in tree.files:
        blob = ids.get(recipe.rel)
        key = (blob or id(recipe.document), recipe.path, config_key)
        result = cache.get(key) if cache is not None else None
        if result is not None and budget.used + len(result.jobs) > budget.limit:
            result = None  # expand again, so the cap is reported where it is passed
        if result is None:
            result = expand_file(recipe, config, budget=budget)
            # A file cut short by the shared cap is not its own expansion: keep it out.
            if cache is not None and not budget.exceeded:
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


def expand_file(
    recipe: RecipeFile, config: ProjectConfig, *, budget: _Budget | None = None
) -> FileExpansion:
    """Expand one recipe file on its own."""
    findings = Findings()
    if budget is None:
        budget = _Budget(min(config.max_jobs, MAX_JOBS_CEILING))
    expander = _FileExpander(recipe, config, findings, budget)
    jobs = expander.run()
    return FileExpansion(jobs=tuple(jobs), findings=tuple(findings.items))


class _FileExpander:
    def __init__(
        self, recipe: RecipeFile, config: ProjectConfig, findings: Findings, budget: _Budget
    ) -> None:
        self.recipe = recipe
        self.doc = recipe.document
        self.config = config
        self.findings = findings
        self.budget = budget
        self.v2 = recipe.format_version == 2
        # What Megatron-LM tolerates is a warning in a v1 file, an error in v2.
        self.lenient = Severity.ERROR if self.v2 else Severity.WARNING
        self.attribute_keys = ATTRIBUTE_KEYS_V2 if self.v2 else ATTRIBUTE_KEYS_V1
        vocab = config.vocabulary
        self.known_axes = KNOWN_AXES_V2 | (vocab.axes if vocab else frozenset())
        self.declared_scopes = vocab.all_scopes if vocab else frozenset()
        self.products_node: Any = None

    def at(self, *keys: str | int, key: bool = False) -> Location:
        return self.doc.locate(list(keys), key=key)

    def row_location(self, where: tuple[str | int, ...]) -> Location:
        """Where a row starts: found from the cached products node, not from the root."""
        if self.products_node is None:
            self.products_node = _value_node(self.doc.root, "products")
        _, bi, _, ri = where
        try:
            block = self.products_node.value[bi]
            row = _value_node(block, "products").value[ri]
        except (AttributeError, IndexError, TypeError):
            return self.at(*where)
        return Location(self.doc.path, row.start_mark.line + 1, row.start_mark.column + 1)

    def error(self, where: Location, code: str, message: str) -> None:
        self.findings.add(where, code, message, Severity.ERROR)

    def note(self, where: Location, code: str, message: str) -> None:
        self.findings.add(where, code, message, self.lenient)

    def run(self) -> list[Job]:
        data = self.recipe.data
        for key in data:
            if key not in TOP_KEYS:
                self.note(
                    self.at(key, key=True),
                    "unknown-key",
                    f'unknown top-level key "{key}"{did_you_mean(key, TOP_KEYS)}',
                )
        spec = data.get("spec")
        if not isinstance(spec, dict):
            self.error(self.at("spec"), "spec-type", "spec must be a mapping of job defaults")
            return []
        if any(not isinstance(k, str) for k in spec):
            self.error(self.at("spec"), "spec-type", "spec keys must be strings")
            return []
        if self.v2:
            vocab = self.config.vocabulary
            known = KNOWN_SPEC_KEYS_V2 | (vocab.spec_keys if vocab else frozenset())
            for key in spec:
                if key not in known and not key.startswith("x-"):
                    self.error(
                        self.at("spec", key, key=True),
                        "unknown-key",
                        f'unknown spec key "{key}"{did_you_mean(key, known)}',
                    )
            self.spec_v2(spec)
        products = data.get("products")
        if self.recipe.kind is RecipeType.BUILD:
            if products:
                self.note(
                    self.at("products"),
                    "build-products",
                    "a build recipe's products are never selected as test jobs",
                )
            return []
        if products is None:
            if self.v2 or "products" in data:
                self.note(
                    self.at("products"), "products-missing", "no products: this file yields no jobs"
                )
            return []
        if not isinstance(products, list):
            self.error(
                self.at("products"), "products-type", "products must be a list of test-case blocks"
            )
            return []
        if not products:
            self.note(
                self.at("products"), "products-empty", "products is empty: this file yields no jobs"
            )
        jobs: list[Job] = []
        seen_cases: dict[str, int] = {}
        for bi, block in enumerate(products):
            self.block(spec, bi, block, seen_cases, jobs)
            if self.budget.exceeded:
                break
        return jobs

    def spec_v2(self, spec: dict) -> None:
        """Spec keys the emitters and the graph read as they are (each job's own
        fields are checked as each job is made)."""
        for key, want in SPEC_SHAPES_V2.items():
            value = spec.get(key)
            if value is None:
                continue
            if want == "text" and isinstance(value, str):
                continue
            if want == "names" and isinstance(value, list) and _all_text(value):
                continue
            if want == "table" and isinstance(value, dict) and _all_text(value.values()):
                continue
            if want == "mapping" and isinstance(value, dict):
                continue
            shape = {
                "text": "a string",
                "names": "a list of strings",
                "table": "a mapping of strings",
                "mapping": "a mapping",
            }[want]
            self.error(
                self.at("spec", key),
                "spec-type",
                f'spec "{key}" must be {shape}, not {_shown(value)}',
            )
        if self.recipe.kind is RecipeType.BASIC and "build" not in spec:
            self.error(
                self.at("spec", key=True),
                "build-missing",
                'spec has no "build": every job needs the build recipe of the image it runs in',
            )

    def block(
        self, spec: dict, bi: int, block: Any, seen_cases: dict[str, int], jobs: list[Job]
    ) -> None:
        if not isinstance(block, dict):
            self.error(
                self.at("products", bi),
                "block-type",
                "a test-case block must be a mapping with test_case and products",
            )
            return
        for key in block:
            if key not in BLOCK_KEYS:
                self.note(
                    self.at("products", bi, key, key=True),
                    "unknown-key",
                    f'unknown key "{key}" in a test-case block{did_you_mean(key, BLOCK_KEYS)}',
                )
        cases = block.get("test_case")
        if (
            not isinstance(cases, list)
            or not cases
            or not all(isinstance(c, str) and c for c in cases)
        ):
            self.error(
                self.at("products", bi, "test_case"),
                "test-case-type",
                "test_case must be a one-element list holding the test case's name",
            )
            return
        test_case = cases[0]
        if len(cases) > 1:
            ignored = ", ".join(cases[1:])
            self.note(
                self.at("products", bi, "test_case"),
                "test-case-extra",
                f"only the first test case ({test_case}) is read; ignored: {ignored}",
            )
        if test_case in seen_cases:
            self.note(
                self.at("products", bi, "test_case"),
                "duplicate-block",
                f'test case "{test_case}" already has a block '
                f"(products[{seen_cases[test_case]}]) in this file",
            )
        else:
            seen_cases[test_case] = bi
        outer = block.get("cadence")
        if outer is not None and not self.cadence_ok(outer, ("products", bi, "cadence")):
            return
        if "products" not in block:
            self.note(
                self.at("products", bi),
                "block-no-products",
                f'test case "{test_case}" has no products: it yields no jobs',
            )
            return
        rows = block["products"]
        if not isinstance(rows, list):
            self.error(
                self.at("products", bi, "products"),
                "products-type",
                "a block's products must be a list of product rows",
            )
            return
        if not rows:
            self.note(
                self.at("products", bi, "products"),
                "products-empty",
                f'test case "{test_case}" has an empty products list: it yields no jobs',
            )
        if self.v2 and any(k in block for k in CHANGE_KEYS):
            spec = _with_change_keys(spec, block)
        for ri, row in enumerate(rows):
            self.row(spec, test_case, outer, ("products", bi, "products", ri), row, jobs)
            if self.budget.exceeded:
                return

    def cadence_ok(self, cadence: Any, where: tuple[str | int, ...]) -> bool:
        if not isinstance(cadence, list) or not all(isinstance(c, str) for c in cadence):
            self.error(self.at(*where), "cadence-type", "cadence must be a list of cadence names")
            return False
        bad = [c for c in cadence if c not in ALL_CADENCES]
        for c in bad:
            self.error(
                self.at(*where),
                "cadence-value",
                f'unknown cadence "{c}"{did_you_mean(c, ALL_CADENCES)}; '
                f"allowed: {', '.join(ALL_CADENCES)}",
            )
        if not cadence:
            self.error(
                self.at(*where), "cadence-empty", "cadence is empty: the job would never run"
            )
            return False
        return not bad

    def row(
        self,
        spec: dict,
        test_case: str,
        outer: list[str] | None,
        where: tuple[str | int, ...],
        row: Any,
        jobs: list[Job],
    ) -> None:
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
            self.error(
                self.at(*where), "row-type", "a product row must be a mapping of axis -> list"
            )
            return
        if not row:
            self.note(
                self.at(*where), "row-empty", "an empty product row yields one job of spec defaults"
            )
        inner = row.get("cadence")
        if inner is not None and not self.cadence_ok(inner, (*where, "cadence")):
            return
        keys = [k for k in row if k not in self.attribute_keys]
        values: list[list[Any]] = []
        for key in keys:
            value = row[key]
            if self.v2 and key not in self.known_axes:
                self.error(
                    self.at(*where, key, key=True),
                    "unknown-key",
                    f'unknown row key "{key}"{did_you_mean(key, self.known_axes)}; '
                    "declare extra axes under vocabulary.axes in the project config",
                )
                return
            if not isinstance(value, list):
                self.error(
                    self.at(*where, key),
                    "axis-type",
                    f'"{key}" must be a list of values, like {key}: [{_show(value)}]',
                )
                return
            for i, item in enumerate(value):
                if not isinstance(item, _SCALARS):
                    self.error(
                        self.at(*where, key, i),
                        "axis-value",
                        f'values of "{key}" must be plain scalars, not {type(item).__name__}',
                    )
                    return
            if not value:
                self.note(
                    self.at(*where, key),
                    "axis-empty",
                    f'"{key}" is an empty list: this row yields no jobs',
                )
            values.append(value)
        attrs = self.row_attributes(spec, row, where)
        if attrs is None:
            return
        count = math.prod(len(v) for v in values)
        self.budget.used += count
        if self.budget.used > self.budget.limit:
            self.budget.exceeded = True
            self.error(
                self.at(*where),
                "expansion-cap",
                f"expanding this row passes the cap of {self.budget.limit:,} jobs "
                f"(defaults.max_jobs in the project config; never more than "
                f"{MAX_JOBS_CEILING:,})",
            )
            return
        explicit = inner if inner is not None else outer
        base_cadence = tuple(explicit) if explicit is not None else DEFAULT_CADENCE
        location = self.row_location(where)
        changes = (
            {k: v for k, v in _with_change_keys(spec, row).items() if k in CHANGE_KEYS}
            if self.v2 and any(k in row for k in CHANGE_KEYS)
            else None
        )
        # Every job of the row has the same keys of its own (the axes, test_case,
        # cadence): the spec's other keys are picked once, not once per job.
        own = {*keys, "test_case", "cadence"}
        base = {k: v for k, v in spec.items() if k not in own}
        extra = dict(changes) if changes is not None else {}
        if self.v2 and "references" in row:
            extra["references"] = row["references"]
        for combo in itertools.product(*values):
            flat = dict(zip(keys, combo, strict=True))
            flat["test_case"] = test_case
            cadence = base_cadence
            scope = flat.get("scope")
            declared = None
            if isinstance(scope, str) and scope in LEGACY_SCOPE_ALIASES:
                tier, implied = LEGACY_SCOPE_ALIASES[scope]
                flat["scope"] = tier
                if explicit is None and implied is not None:
                    cadence = implied
                if scope in self.declared_scopes:
                    declared = scope  # shown as the config names it
            flat["cadence"] = list(cadence)
            merged = base.copy()
            merged.update(flat)
            if extra:
                merged.update(extra)
            job = self.job(merged, cadence, attrs, where, location, declared)
            if job is not None:
                jobs.append(job)

    def row_attributes(
        self, spec: dict, row: dict, where: tuple[str | int, ...]
    ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None:
        """env and args of a row's jobs: spec env updated by the row's, spec args then the row's."""
        env: dict[str, str] = {}
        args: list[str] = []
        # In a format_version 1 row, env and args are axes like any other key (as
        # Megatron-LM's parser reads them), not attributes.
        sources = ((spec, ("spec",)), (row, where)) if self.v2 else ((spec, ("spec",)),)
        for source, keys in sources:
            raw_env = source.get("env")
            if raw_env is not None:
                if not isinstance(raw_env, dict):
                    self.error(
                        self.at(*keys, "env"), "env-type", "env must be a mapping NAME: value"
                    )
                    return None
                for k, v in raw_env.items():
                    if not whole(ENV_NAME, k):
                        # The emitters write it as a variable name: it must be one.
                        self.note(
                            self.at(*keys, "env", k, key=True),
                            "env-type",
                            f'env name "{k}" is not a variable name (letters, digits, _; '
                            "not starting with a digit)",
                        )
                    if not isinstance(v, _SCALARS):
                        self.error(
                            self.at(*keys, "env", k),
                            "env-type",
                            f"env {k} must be a string, number or boolean",
                        )
                        return None
                    env[str(k)] = _env_text(v)
            raw_args = source.get("args")
            if raw_args is not None:
                if not isinstance(raw_args, list) or not all(isinstance(a, str) for a in raw_args):
                    self.error(
                        self.at(*keys, "args"), "args-type", "args must be a list of strings"
                    )
                    return None
                args.extend(raw_args)
        return tuple(sorted(env.items())), tuple(args)

    def job(
        self,
        merged: dict[str, Any],
        cadence: tuple[str, ...],
        attrs: tuple[tuple[tuple[str, str], ...], tuple[str, ...]],
        where: tuple[str | int, ...],
        location: Location,
        declared_scope: str | None = None,
    ) -> Job | None:
        site = _Site(self, merged, where, location)
        model = self.text_field(merged, "model", site)
        environment = self.text_field(merged, "environment", site)
        platform = self.text_field(merged, "platforms", site)
        name = self.template(merged, "name", location) or merged["test_case"]
        build = self.template(merged, "build", location) if "build" in merged else None
        config = self.config
        return Job(
            model=model,
            test_case=merged["test_case"],
            environment=environment,
            platform=platform,
            tag=self.name_field(merged, "tag", site),
            scope=self.name_field(merged, "scope", site),
            cadence=cadence,
            name=name,
            build=build,
            n_repeat=self.count_field(merged, "n_repeat", config.n_repeat, site),
            time_limit=self.count_field(merged, "time_limit", config.time_limit, site),
            nodes=self.count_field(merged, "nodes", None, site),
            gpus=self.count_field(merged, "gpus", None, site),
            allow_failure=self.flag_field(merged, "allow_failure", site),
            env=attrs[0],
            args=attrs[1],
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
            self.note(
                site(key), "field-type", f'"{key}" must be a single name, not {_shown(value)}'
            )
        return "" if value is None else _show(value)

    def name_field(self, merged: Mapping[str, Any], key: str, site: _Site) -> str | None:
        """scope and tag: optional names. A format_version 1 tree keeps what
        Megatron-LM's parser keeps (a number compares unequal to every name)."""
        value = merged.get(key)
        if value is None:
            return None
        if not (isinstance(value, str) and value) and self.v2:
            self.error(site(key), "field-type", f'"{key}" must be a name, not {_shown(value)}')
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
            self.note(site(key), "field-type", f'"{key}" must be {want}, not {_shown(value)}')
            return default
        return value

    def flag_field(self, merged: Mapping[str, Any], key: str, site: _Site) -> bool:
        value = merged.get(key)
        if value is None or isinstance(value, bool):
            return value is True
        self.note(site(key), "field-type", f'"{key}" must be true or false, not {_shown(value)}')
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

    __slots__ = ("expander", "merged", "row", "where")

    def __init__(
        self,
        expander: _FileExpander,
        merged: Mapping[str, Any],
        where: tuple[str | int, ...],
        row: Location,
    ) -> None:
        self.expander, self.merged, self.where, self.row = expander, merged, where, row

    def __call__(self, key: str) -> Location:
        data = self.expander.recipe.data
        block = data["products"][self.where[1]]
        row = block["products"][self.where[3]]
        if key in row:
            values = row[key]
            value = self.merged.get(key)
            for i, item in enumerate(values if isinstance(values, list) else ()):
                if item is value or (type(item) is type(value) and item == value):
                    return self.expander.at(*self.where, key, i)
            return self.expander.at(*self.where, key)
        spec = data.get("spec")
        if isinstance(spec, dict) and key in spec:
            return self.expander.at("spec", key)
        return self.row


def _with_change_keys(spec: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """spec with `more`'s paths added to its own and `always` if either says so.
    Values of the wrong shape are left to the schema's findings."""
    out = dict(spec)
    paths = [p for p in (spec.get("paths"), more.get("paths")) if isinstance(p, list)]
    if paths:
        out["paths"] = [glob for group in paths for glob in group if isinstance(glob, str)]
    if more.get("always") is True or spec.get("always") is True:
        out["always"] = True
    return out


def _value_node(node: Any, key: str) -> Any:
    for key_node, value_node in getattr(node, "value", ()):
        if getattr(key_node, "value", None) == key:
            return value_node
    return None


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _all_text(values: Iterable[Any]) -> bool:
    return all(isinstance(v, str) for v in values)


def _shown(value: Any) -> str:
    """A value in a message: strings quoted, so that an empty one shows."""
    return f'"{_show(value)}"' if isinstance(value, str) else _show(value)


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


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
    i, n = 0, len(jobs)
    while i < n:
        key = jobs[i].duplicate_key()
        j = i + 1
        while j < n and jobs[j].duplicate_key() == key:
            j += 1
        if j - i == 1:
            out.append(jobs[i])
        else:
            where = tuple(sorted({job.source for job in jobs[i:j]}))
            out.extend(replace(job, definitions=where) for job in jobs[i:j])
        i = j
    return out
