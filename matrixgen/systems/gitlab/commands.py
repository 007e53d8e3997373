"""`matrixgen gitlab` (one target's child pipeline) and `matrixgen jet-trigger`
(Megatron-LM's child-pipeline generator, option for option): the home's
`commands` part (docs/emitters.md), imported only when a command runs, as is
all it uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.changes import ChangedSinceOption, FullOption
from matrixgen.cli.common import RecipesOption, TargetOption, exits, option
from matrixgen.cli.emit import LauncherOption, target_to_emit, write_text
from matrixgen.cli.jet import (
    LocalRecipesOption,
    StrictOption,
    SystemChoiceOption,
    asking_system,
    load_jet_tree,
    say,
)
from matrixgen.model.errors import ExitCode
from matrixgen.model.vocab import System
from matrixgen.systems.gitlab import HOME
from matrixgen.util.escape import terminal_text

if TYPE_CHECKING:
    from matrixgen.model.jobs import Job
    from matrixgen.pipeline import Generation
    from matrixgen.systems.gitlab.megatron import JetPipeline


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
    output: Annotated[Path | None, option("FILE", "Write the YAML here instead of stdout.")] = None,
    launcher: LauncherOption = None,
    changed_since: ChangedSinceOption = None,
    full: FullOption = False,
) -> None:
    """GitLab child pipeline YAML of one target, for trigger: include: artifact."""
    from matrixgen.systems.gitlab.emitter import emit_gitlab

    chosen, jobs, settings = target_to_emit(
        recipes, System(HOME.name), target, changed_since, full, launcher=launcher
    )
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


@exits(
    (
        ExitCode.FINDINGS,
        "the tree or a quarantine entry has errors, or a node-level entry cannot reach its tests",
    ),
    (
        ExitCode.USAGE,
        "usage error (with --strict also a value no recipe uses, or a job the generator would "
        "lose)",
    ),
    ExitCode.CONFIG,
    (ExitCode.LIMIT, "with --strict, a CI limit the file would break (docs/ci-limits.md)"),
    (ExitCode.QUARANTINE, "the quarantine file cannot be read"),
    ExitCode.ENVIRONMENT,
    ExitCode.OUTPUT,
)
def jet_trigger(
    # The options of Megatron-LM's generate_jet_trigger_job.py, with its names,
    # help and defaults: but --output-path, the fields of the JetCall.
    scope: Annotated[str, option("SCOPE", "Test scope")],
    environment: Annotated[str, option("ENV", "LTS or dev features")],
    test_cases: Annotated[str, option("NAMES", "Comma-separated list of test_cases, or 'all'")],
    platform: Annotated[str, option("PLATFORM", "Platform to select")],
    cluster: Annotated[str, option("CLUSTER", "Cluster to run on")],
    output_path: Annotated[str, option("FILE", "Path to write GitLab job to")],
    container_image: Annotated[str, option("IMAGE", "LTS Container image to use")],
    container_tag: Annotated[str, option("TAG", "Container tag to use")],
    dependent_job: Annotated[
        str, option("JOB", "Name of job that created the downstream pipeline")
    ],
    slurm_account: Annotated[str, option("ACCOUNT", "Slurm account to use")],
    n_repeat: Annotated[int, option("N", "Repeats, passed to the launcher")] = 1,
    time_limit: Annotated[int, option("SECONDS", "Time limit, passed to the launcher")] = 1,
    partition: Annotated[str | None, option("PARTITION", "Slurm partition to use")] = None,
    record_checkpoints: Annotated[
        str | None, option("true|false", "Values are 'true' or 'false'")
    ] = None,
    tag: Annotated[str | None, option("TAG", "Tag (only relevant for unit tests)")] = None,
    run_name: Annotated[
        str | None, option("NAME", "Run name (only relevant for release tests)")
    ] = None,
    wandb_experiment: Annotated[
        str | None, option("NAME", "Wandb experiment (only relevant for release tests)")
    ] = None,
    enable_lightweight_mode: Annotated[
        bool,
        option(
            None,
            "Run 2-step smoke tests instead of full training",
            "--enable-lightweight-mode",
            show_default=True,
        ),
    ] = False,
    enable_warmup: Annotated[
        bool, option(None, "Run one job as dependency to others as to warm up cache")
    ] = True,
    cadence: Annotated[
        str | None,
        option(
            "CADENCE",
            "Trigger cadence to filter tests by (pr|nightly|mergegroup). "
            "Empty/unset disables the cadence filter.",
        ),
    ] = None,
    enable_error_extraction: Annotated[
        bool, option(None, "Extract a structured error report from GitLab child-job output.")
    ] = False,
    recipes: RecipesOption = None,
    local_recipes: LocalRecipesOption = None,
    system: SystemChoiceOption = None,
    strict: StrictOption = False,
) -> None:
    """Megatron-LM's child pipeline for one call, as its generate_jet_trigger_job.py
    writes it, with the quarantine applied (docs/megatron.md).

    Takes every option of that script, with the same names, types and defaults.
    """
    from matrixgen.systems.gitlab.megatron import JetCall, call_pipeline, check_call

    options = locals()
    call = JetCall(**{name: options[name] for name in JetCall.__struct_fields__})
    check_call(call)
    generation, file_order = load_jet_tree(recipes, local_recipes)
    pipeline = call_pipeline(generation, call, asking_system(system), file_order=file_order)
    say(pipeline.notices, strict)
    write_text(Path(output_path), pipeline.text)
    _summary(pipeline, output_path, generation)


def _summary(pipeline: JetPipeline, output_path: str, generation: Generation) -> None:
    """One line on stderr: what was written, and what the quarantine did to it,
    each with the entries that did it: jobs skipped, allowed to fail, and node
    ids muted or deselected inside jobs (the pytest plugin applies those)."""
    from matrixgen.quarantine.apply import applying_entries

    target = pipeline.target
    where = f"{target.system.value}/{target.selector.scope}"
    line = (
        f"{terminal_text(output_path)}: {len(pipeline.jobs)} job(s) for {terminal_text(where)} "
        f"{terminal_text(target.selector.platform)}/{terminal_text(target.selector.environment)}"
    )
    written = [j for _, j in pipeline.jobs if j.quarantine is not None]
    known = {j.test_case for j in generation.jobs}
    entries = generation.quarantine.entries

    def ids(jobs: list[Job], action: str) -> str:
        found = {
            e.id
            for j in jobs
            for e in applying_entries(j, entries, target, known)
            if e.action.value == action
        }
        return ", ".join(sorted(found))

    notes = []
    allowed = [j for j in written if j.quarantine and j.quarantine.action == "allow-failure"]
    for jobs, action, what in (
        (list(pipeline.skipped), "skip", "skipped"),
        (allowed, "allow-failure", "allowed to fail"),
    ):
        if jobs:
            notes.append(f"{len(jobs)} {what} by quarantine ({ids(jobs, action)})")
    for action, verb in (("mute", "muted"), ("deselect", "deselected")):
        hit = [j for j in written if j.quarantine and getattr(j.quarantine, verb)]
        if hit:
            count = sum(len(getattr(j.quarantine, verb)) for j in hit if j.quarantine)
            notes.append(
                f"{count} node id(s) {verb} in {len(hit)} job(s) by quarantine ({ids(hit, action)})"
            )
    if notes:
        line += "; " + "; ".join(terminal_text(n) for n in notes)
    typer.echo(line, err=True)
