"""`matrixgen gitlab`: one target's child pipeline.

The home's `commands` part (the CLI floor): the CLI's registry lists it under
the system's name. Imported only when the command runs; everything heavy is
imported inside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption, change_selection
from matrixgen.cli.common import RecipesOption, TargetOption, exits, load_valid, recipes_dir
from matrixgen.cli.emit import LauncherOption, one_target, write_text
from matrixgen.engine.errors import ExitCode
from matrixgen.engine.vocab import System
from matrixgen.systems.gitlab import HOME
from matrixgen.util.escape import terminal_text


@exits(
    ExitCode.FINDINGS,
    ExitCode.USAGE,
    ExitCode.CONFIG,
    (
        ExitCode.LIMIT,
        "a GitLab limit cannot be met (job name collision or length, child pipeline over 5 MB)",
    ),
    ExitCode.ENVIRONMENT,
    ExitCode.OUTPUT,
)
def emit(
    target: TargetOption = None,
    recipes: RecipesOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", metavar="FILE", help="Write the YAML here instead of stdout."),
    ] = None,
    launcher: LauncherOption = None,
    changed_since: ChangedSinceOption = None,
    full: FullOption = False,
) -> None:
    """GitLab child pipeline YAML of one target, for trigger: include: artifact."""
    from matrixgen.emit.common import resolve_settings
    from matrixgen.systems.gitlab.emitter import emit_gitlab

    generation = load_valid(recipes, emitting=True)
    chosen = one_target(generation, System(HOME.name), target)
    generation, _ = change_selection(generation, recipes_dir(recipes), changed_since, full)
    jobs = generation.jobs_for(chosen)
    settings = resolve_settings(chosen, generation.tree.config, jobs, launcher=launcher)
    pipeline = emit_gitlab(jobs, settings)
    if output is not None:
        write_text(output, pipeline.text)
        typer.echo(
            f"{terminal_text(chosen.name)}: {len(pipeline.job_names)} job(s) -> "
            f"{terminal_text(output)}",
            err=True,
        )
    else:
        typer.echo(pipeline.text, nl=False)
