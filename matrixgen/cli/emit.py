"""Commands that write what CI reads: `generate`, and what the per-system
commands (each home's `commands`) share. Imported at start-up by cli.main:
everything heavy is imported inside the functions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption, change_selection
from matrixgen.cli.common import (
    HoldingPenOption,
    RecipesOption,
    TableOrJson,
    TargetOption,
    check_ad_hoc,
    echo_json,
    exits,
    load_valid,
    option,
    recipes_dir,
)
from matrixgen.cli.decide import EventOption, LabelOption, LabelsJsonOption, SystemOption
from matrixgen.model.errors import ExitCode, UsageError
from matrixgen.model.vocab import System
from matrixgen.systems import step_output_file, step_output_option
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import json_value

if TYPE_CHECKING:
    from matrixgen.changes.dropped import Dropped
    from matrixgen.emit.common import EmitSettings
    from matrixgen.emit.generate import TargetOutput
    from matrixgen.model.jobs import Job, Target
    from matrixgen.pipeline import Generation


LauncherOption = Annotated[
    str | None,
    option(
        "COMMAND",
        "Command every GitLab job runs instead of the configured launcher "
        "(e.g. 'echo' for a dry run).",
    ),
]


def target_to_emit(
    recipes: Path | None,
    system: System,
    values: list[str] | None,
    changed_since: str | None,
    full: bool,
    *,
    launcher: str | None = None,
) -> tuple[Target, list[Job], EmitSettings]:
    """A `github` or `gitlab` command's one target, its jobs and its settings."""
    from matrixgen.emit.registry import resolve_settings

    generation = load_valid(recipes, emitting=True)
    chosen = one_target(generation, system, values)
    generation, _ = change_selection(generation, recipes_dir(recipes), changed_since, full)
    jobs = generation.jobs_for(chosen)
    return chosen, jobs, resolve_settings(chosen, generation.tree.config, jobs, launcher=launcher)


def one_target(generation: Generation, system: System, values: list[str] | None) -> Target:
    """Key=value pairs without system= are the command's system."""
    from matrixgen.model.errors import UsageError

    if not values:
        raise UsageError(
            f"`{system.value}` needs a target: --target NAME, or --target "
            "scope=...,platform=...,environment=... (`generate` emits every target)"
        )
    if len(values) != 1:
        shown = ", ".join(f'"{v}"' for v in values)
        raise UsageError(
            f"`{system.value}` emits one target at a time; got {len(values)} ({shown}): "
            "`generate` emits several"
        )
    targets = generation.targets(values, system=system)
    target = targets[0]
    check_ad_hoc(generation, targets)
    if target.system is not system:
        what = "" if values[0] == target.name else f' (target "{target.name}")'
        raise UsageError(
            f'--target "{values[0]}"{what} is a {target.system.value} target; '
            f"use `matrixgen {target.system.value}` or `matrixgen generate`"
        )
    return target


def write_text(path: Path, text: str) -> None:
    """--output: written whole, never through a link (`util.atomic`)."""
    from matrixgen.model.errors import UsageError, file_error, write_failure
    from matrixgen.util.atomic import WriteError, write_atomic

    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:  # mkdir would say "File exists"
        raise UsageError(f"cannot write {path}: {blocking} is a file, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise file_error(f"cannot write {path}", exc) from None
    try:
        write_atomic(path, text.encode("utf-8"))
    except WriteError as exc:
        raise write_failure(exc.message, exc.errno) from None


@exits(
    ExitCode.FINDINGS,
    ExitCode.USAGE,
    ExitCode.CONFIG,
    ExitCode.LIMIT,
    (ExitCode.ENVIRONMENT, "a file cannot be written (full or read-only disk)"),
    (
        ExitCode.OUTPUT,
        "--output-dir or a file in it is a symbolic link (refused), or another run held the "
        "folder's lock too long",
    ),
)
def generate(
    target: TargetOption = None,
    recipes: RecipesOption = None,
    out: Annotated[
        Path, option("DIR", "Directory for one file per target.", "--output-dir", file_okay=False)
    ] = Path("out"),
    fmt: Annotated[TableOrJson, typer.Option("--format", help="The summary's format.")] = (
        TableOrJson.TABLE
    ),
    launcher: LauncherOption = None,
    holding_pen: HoldingPenOption = False,
    event: EventOption = None,
    label: LabelOption = None,
    labels_json: LabelsJsonOption = None,
    system: SystemOption = None,
    github_output: Annotated[
        bool,
        typer.Option(
            step_output_option(),
            help=f"Also append step outputs to {step_output_file()}: targets, matrices (JSON: "
            "matrices[NAME][K] is shard K of a GitHub target), shards, files, groups and "
            "group-shards (the same per output group); and, per group, <group>-shards and "
            "<group> (0 and an empty matrix for a group not generated).",
        ),
    ] = False,
    changed_since: ChangedSinceOption = None,
    full: FullOption = False,
) -> None:
    """Every target (configured, given, or for a tree without config every
    scope x platform x environment it uses): one file each in --output-dir
    (<target>.json for GitHub, <target>.yml for GitLab), and a summary.
    With --event: exactly the targets `matrixgen decide` picks for the event and
    labels, with the decided n_repeat and lightweight mode applied.

    The tree is loaded, expanded and validated once. The folder is owned through
    .matrixgen-manifest.json: files earlier runs wrote for targets that are gone
    are removed (never a file matrixgen did not write, nor one changed since);
    runs into one folder wait for each other (MATRIXGEN_LOCK_TIMEOUT, 30 s).
    """
    from matrixgen.generate.output import generate_into, summary

    if event is None and (label or labels_json or system):
        raise UsageError("--label, --labels-json and --system go with --event")
    if event is not None and target:
        raise UsageError("give --event or targets, not both: the event decides the targets")
    generation = load_valid(recipes, emitting=True)
    if event is not None:
        from matrixgen.cli.decide import decision_for

        targets = list(decision_for(generation, event, label, labels_json, system).targets)
    else:
        targets = generation.targets(target or (), holding_pen=holding_pen)
    if target:
        check_ad_hoc(generation, targets)
    full_generation = generation
    generation, changes = change_selection(generation, recipes_dir(recipes), changed_since, full)
    outputs = generate_into(
        generation,
        targets,
        out,
        launcher=launcher,
        github_output=github_output,
        targets_given=bool(target),
        say=lambda line: typer.echo(line, err=True),
    )
    saved = None
    if changes is not None:
        from matrixgen.changes.dropped import dropped_by_target

        saved = dropped_by_target(full_generation, generation, targets, changes)
    if fmt is TableOrJson.JSON:
        data = summary(outputs)
        if saved is not None:
            data["changes"] = json_value(saved)
        echo_json(data)
        return
    _echo_summary(outputs, saved, out)


def _echo_summary(outputs: list[TargetOutput], saved: Dropped | None, out: Path) -> None:
    from matrixgen.generate.output import summary_text

    typer.echo(summary_text(outputs), nl=False)
    if saved is not None:
        from matrixgen.changes.dropped import render_dropped

        typer.echo("\n" + render_dropped(saved), nl=False)
    jobs = sum(o.jobs for o in outputs)
    typer.echo(f"{len(outputs)} target(s), {jobs} job(s) -> {terminal_text(out)}", err=True)
