"""`matrixgen coverage`: which selected jobs miss a reference file, and which
reference files no job selects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.common import (
    RecipesOption,
    TableJsonOrMarkdown,
    TargetOption,
    check_ad_hoc,
    echo_as,
    option,
    recipes_dir,
)
from matrixgen.model.errors import ExitCode, UsageError, exit_codes
from matrixgen.util.escape import terminal_text
from matrixgen.util.patterns import name_pattern, whole

if TYPE_CHECKING:
    from matrixgen.coverage.report import Coverage
    from matrixgen.model.references import ReferenceListing, ReferenceSettings
    from matrixgen.pipeline import Generation

    Lister = Callable[[ReferenceSettings, Path | None], ReferenceListing]

_NAME = name_pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


COVERAGE_HELP = """Per target, the selected jobs that miss a reference file (the path
looked for, and the nearest existing file), and the orphans: files that fit a
reference template but that no job of any target selects.

References are the project config's (references.templates, root, gating); a
tree without config gives them with --reference NAME=TEMPLATE (repeatable)
and --root DIR. Templates name job fields: {model}, {test_case},
{environment}, {platforms} (or {platform}), {tag}, {scope}, any spec field.
Jobs a quarantine skip takes out, and jobs whose recipe or row opts out
(references: {skip: all | [NAME...], reason: TEXT}), are not checked.
"""
COVERAGE_HELP += "\n" + exit_codes(
    (ExitCode.OK, "nothing missing in a gating target (--strict: nothing missing at all)"),
    (ExitCode.FINDINGS, "something missing there"),
    (ExitCode.USAGE, "usage error (no references declared nor given, a bad --reference)"),
    ExitCode.CONFIG,
    (ExitCode.GIT, "git problem (--revision)"),
)


def _given_settings(
    references: list[str], root: Path | None, configured: ReferenceSettings | None
) -> ReferenceSettings:
    """The config's references, with the command line's templates and root over them."""
    from msgspec.structs import replace

    from matrixgen.model.references import ReferenceSettings, ReferenceTemplate, template_problem

    templates: dict[str, ReferenceTemplate] = {}
    for text in references:
        name, sep, template = text.partition("=")
        name = name.strip()
        if not sep or not whole(_NAME, name) or not template:
            raise UsageError(
                f'--reference "{text}": expected NAME=TEMPLATE, e.g. '
                "golden=tests/functional_tests/test_cases/{model}/{test_case}/"
                "golden_values_{environment}_{platforms}.json"
            )
        problem = template_problem(template)
        if problem is not None:
            raise UsageError(f'--reference "{text}": {problem}')
        if name in templates:
            raise UsageError(f'--reference: "{name}" is given twice')
        templates[name] = ReferenceTemplate(name, template)
    if configured is None and not templates:
        raise UsageError(
            "no references are declared (references in the project config): give them with "
            "--reference NAME=TEMPLATE, and --root DIR for where they are"
        )
    settings = configured or ReferenceSettings(templates=())
    if templates:
        settings = replace(settings, templates=tuple(templates[n] for n in sorted(templates)))
    if root is not None and not root.is_dir():
        raise UsageError(f"--root {root}: not a directory")
    return settings


def coverage(
    recipes: RecipesOption = None,
    target: TargetOption = None,
    fmt: Annotated[
        TableJsonOrMarkdown,
        typer.Option("--format", help="table, json or markdown (a PR comment)."),
    ] = TableJsonOrMarkdown.TABLE,
    reference: Annotated[
        list[str] | None,
        option(
            "NAME=TEMPLATE",
            "A reference file every job needs (replaces the configured ones); repeatable.",
        ),
    ] = None,
    root: Annotated[
        Path | None,
        option(
            "DIR",
            "The directory the templates start from (default: the configured root, "
            "below the top of the git checkout). With --revision: relative to the top.",
        ),
    ] = None,
    revision: Annotated[
        str | None,
        option(
            "REV", "Read the recipes and the reference tree from this git revision, not from disk."
        ),
    ] = None,
    exclude_model: Annotated[
        list[str] | None,
        option(
            "MODEL",
            "Leave this model's jobs out (e.g. unit-tests of a tree that cannot opt out); "
            "repeatable.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 on any missing reference, gating or not.")
    ] = False,
) -> None:
    from matrixgen.coverage.report import (
        compute_coverage,
        render_markdown,
        render_table,
        summary_line,
    )
    from matrixgen.validate import Needs, require_usable

    generation, listing_for = _load(recipes, revision)
    require_usable(generation, Needs.SELECTION)
    config = generation.tree.config
    settings = _given_settings(list(reference or ()), root, config.references)
    if root is not None and revision is not None:
        from msgspec.structs import replace

        settings = replace(settings, root=root.as_posix().strip("/"))
        root = None
    listing = listing_for(settings, root)
    targets = generation.targets(target or ())
    check_ad_hoc(generation, targets)
    from matrixgen.engine.select import check_values

    check_values("--exclude-model", "model", exclude_model or (), config, generation.jobs)
    result = compute_coverage(
        generation,
        settings,
        listing,
        targets,
        all_targets=generation.targets(),
        exclude_models=exclude_model or (),
    )
    _echo_problems(result)
    echo_as(fmt, result, render_table, render_markdown)
    typer.echo(terminal_text(summary_line(result)), err=True)
    if result.gating_missing or (strict and result.missing) or result.problems:
        raise typer.Exit(ExitCode.FINDINGS)


def _echo_problems(result: Coverage) -> None:
    listing = result.listing
    if not listing.present:
        where = listing.shown(result.settings.prefix) or "."
        typer.echo(
            f"matrixgen: warning: no reference tree at {terminal_text(where)} "
            f"({terminal_text(listing.where)}): "
            "every reference is missing (--root, or references.root in the project config)",
            err=True,
        )
    for problem in result.problems:
        typer.echo(
            f'matrixgen: error: reference "{problem.reference}": '
            f"{terminal_text(problem.message)} "
            f"({terminal_text(problem.jobs[0].identity)}, {len(problem.jobs)} job(s))",
            err=True,
        )


def _load(recipes: Path | None, revision: str | None) -> tuple[Generation, Lister]:
    """The generation, and how to list its reference tree."""
    if revision is None:
        from matrixgen.pipeline import generate
        from matrixgen.views.references import read_listing

        directory = recipes_dir(recipes)
        return generate(directory), lambda settings, root: read_listing(directory, settings, root)
    from matrixgen.diff.gitsource import check_revision, locate_recipes
    from matrixgen.diff.references import listing_at
    from matrixgen.pipeline import generate_from_files

    check_revision(revision)
    repo, path = locate_recipes(recipes)
    source = repo.read_revision(revision, path)
    if not source.present:
        raise UsageError(f"the recipe directory {path or '.'} does not exist at {revision}")
    loaded = generate_from_files(source.files, root=path or ".", blob_ids=source.blob_ids)
    return loaded, lambda settings, root: listing_at(repo, revision, settings)
