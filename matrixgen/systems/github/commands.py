"""`matrixgen github` (one target's matrix) and `matrixgen jet-buckets`
(Megatron-LM's unit-test bucket matrix): the home's `commands` part
(docs/emitters.md), imported only when a command runs, as is all it uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption
from matrixgen.cli.common import (
    JsonOutputOption,
    RecipesOption,
    TargetOption,
    exits,
    option,
    recipes_dir,
)
from matrixgen.cli.emit import target_to_emit, write_text
from matrixgen.cli.jet import (
    StrictOption,
    SystemChoiceOption,
    asking_system,
    load_jet_tree,
    say,
)
from matrixgen.model.errors import ExitCode, UsageError
from matrixgen.model.vocab import System
from matrixgen.systems.github import HOME
from matrixgen.util.escape import terminal_text

if TYPE_CHECKING:
    from matrixgen.documents.recipe import RecipeFile
    from matrixgen.pipeline import Generation


@exits(
    ExitCode.FINDINGS,
    ExitCode.USAGE,
    ExitCode.CONFIG,
    (ExitCode.LIMIT, "a GitHub limit cannot be met"),
    ExitCode.ENVIRONMENT,
    ExitCode.OUTPUT,
)
def emit(
    target: TargetOption = None,
    recipes: RecipesOption = None,
    output: JsonOutputOption = None,
    github_output: Annotated[
        bool,
        typer.Option(
            "--github-output",
            help="Append outputs shards, matrix (and matrix-1...) to $GITHUB_OUTPUT.",
        ),
    ] = False,
    changed_since: ChangedSinceOption = None,
    full: FullOption = False,
) -> None:
    """GitHub Actions matrix JSON of one target, for strategy.matrix via fromJSON.

    Past 256 rows (or 1 MB) the rows are split into shards:
    {"shards": N, "matrices": [{"include": [...]}, ...]}; never a job dropped.
    """
    from matrixgen.systems.github.emitter import emit_github
    from matrixgen.systems.github.outputs import append_github_outputs

    if output is not None and github_output:
        raise UsageError("give --output or --github-output, not both")
    chosen, jobs, settings = target_to_emit(recipes, System(HOME.name), target, changed_since, full)
    matrix = emit_github(jobs, settings)
    if github_output:
        path = append_github_outputs(matrix.outputs())
        typer.echo(
            f"{terminal_text(chosen.name)}: {len(matrix.rows)} job(s) in {len(matrix.shards)} "
            f"shard(s) -> {terminal_text(path)}",
            err=True,
        )
    elif output is not None:
        write_text(output, matrix.text())
        typer.echo(
            f"{terminal_text(chosen.name)}: {len(matrix.rows)} job(s) -> {terminal_text(output)}",
            err=True,
        )
    else:
        typer.echo(matrix.text(), nl=False)


@exits(
    (
        ExitCode.FINDINGS,
        "the tree or a quarantine entry has errors, or a node-level entry cannot reach its tests",
    ),
    (ExitCode.USAGE, "usage error, or FILE is no recipe of the tree"),
    (ExitCode.LIMIT, "with --strict, a GitHub limit the matrix would break (docs/ci-limits.md)"),
)
def jet_buckets(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The unit-test recipe, e.g. tests/test_utils/recipes/h100/unit-tests.yaml",
        ),
    ],
    recipes: RecipesOption = None,
    system: SystemChoiceOption = None,
    scope: Annotated[
        str, option("SCOPE", "The scope whose quarantine entries apply.")
    ] = "unit-tests",
    environment: Annotated[str, option("ENV", "The environment asked for.")] = "dev",
    tag: Annotated[str, option("TAG", "The tag asked for.")] = "latest",
    platform: Annotated[
        str | None, option("PLATFORM", "Default: the recipe's own platform.")
    ] = None,
    output: JsonOutputOption = None,
    strict: StrictOption = False,
) -> None:
    """The unit-test bucket matrix Megatron-LM's GitHub workflow builds with yq from a
    unit-test recipe ([{"bucket": ...}, ...], compact), with skip entries applied.

    """
    from matrixgen.systems.github.megatron import bucket_matrix, bucket_text

    generation, _ = load_jet_tree(recipes, None)
    recipe = _recipe_file(generation, recipes_dir(recipes), file)
    matrix = bucket_matrix(
        recipe,
        generation,
        system=asking_system(system),
        scope=scope,
        environment=environment,
        tag=tag,
        platform=platform,
    )
    say(matrix.notices, strict)
    text = bucket_text(matrix)
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_text(output, text)


def _recipe_file(generation: Generation, directory: Path, file: Path) -> RecipeFile:
    """The tree's recipe at FILE (a path as the shell has it)."""
    try:
        rel = file.resolve().relative_to(directory.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{file} is not inside the recipe tree {directory}") from None
    for recipe in generation.tree.files:
        if recipe.rel == rel:
            return recipe
    raise UsageError(f"{file}: no recipe of the tree {directory} (a basic recipe file)")
