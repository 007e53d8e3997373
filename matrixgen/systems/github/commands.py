"""`matrixgen github`: one target's matrix.

The home's `commands` part (the CLI floor): the CLI's registry lists it under
the system's name. Imported only when the command runs; everything heavy is
imported inside it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption, change_selection
from matrixgen.cli.common import (
    JsonOutputOption,
    RecipesOption,
    TargetOption,
    exits,
    load_valid,
    recipes_dir,
)
from matrixgen.cli.emit import one_target, write_text
from matrixgen.engine.errors import ExitCode
from matrixgen.engine.vocab import System
from matrixgen.systems.github import HOME
from matrixgen.util.escape import terminal_text


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
    from matrixgen.emit.common import resolve_settings
    from matrixgen.engine.errors import UsageError
    from matrixgen.systems.github.emitter import emit_github
    from matrixgen.systems.github.outputs import append_github_outputs

    if output is not None and github_output:
        raise UsageError("give --output or --github-output, not both")
    generation = load_valid(recipes, emitting=True)
    chosen = one_target(generation, System(HOME.name), target)
    generation, _ = change_selection(generation, recipes_dir(recipes), changed_since, full)
    jobs = generation.jobs_for(chosen)
    settings = resolve_settings(chosen, generation.tree.config, jobs)
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
