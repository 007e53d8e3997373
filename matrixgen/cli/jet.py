"""Megatron-LM's CI, dropped in: `jet-trigger` (its child-pipeline generator, option
for option) and `jet-buckets` (its unit-test bucket matrix for GitHub).

Imported at start-up by matrixgen.cli.main only when one of these commands runs:
everything heavy is imported inside the commands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from matrixgen.cli.common import (
    JsonOutputOption,
    RecipesOption,
    exits,
    held,
    note,
    note_warnings,
    recipes_dir,
)
from matrixgen.engine.errors import ExitCode
from matrixgen.engine.vocab import OTHER_TIERS_SYSTEM, System
from matrixgen.systems.ci import job_variables, running

if TYPE_CHECKING:
    from matrixgen.emit.jet import JetPipeline, Notice
    from matrixgen.engine.model import Job, RecipeFile
    from matrixgen.pipeline import Generation


def _assumed_system() -> str:
    """How --system is chosen when not given, in words."""
    running = [
        f"{s.value} when {s.job_variable}=true" for s in System if s is not OTHER_TIERS_SYSTEM
    ]
    return ", ".join([*running, f"else {OTHER_TIERS_SYSTEM.value}"])


SystemChoiceOption = Annotated[
    System | None,
    typer.Option(
        "--system",
        help=f"The system whose quarantine entries apply (default: {_assumed_system()}).",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="A value no recipe uses, a job the generator would lose, or a CI limit the "
        "file would break, is an error.",
    ),
]
LocalRecipesOption = Annotated[
    Path | None,
    typer.Option(
        "--local-recipes",
        metavar="DIR",
        help="More recipes, read after the tree (default: local_recipes/ beside the tree, "
        "when it exists).",
        file_okay=False,
        dir_okay=True,
    ),
]


def load_jet_tree(recipes: Path | None, local: Path | None) -> tuple[Generation, dict[str, int]]:
    """The tree and, as the generator reads it, its local recipes after it; refused
    when `validate` would fail it. Returns the files' order too (tree first, each
    part by path)."""
    from matrixgen.emit.checks import UNREACHABLE
    from matrixgen.engine.errors import UsageError
    from matrixgen.engine.load import RESERVED_FILES, folder_in_tree, read_directory
    from matrixgen.pipeline import generate_from_files
    from matrixgen.validate import Needs, require_usable

    directory = recipes_dir(recipes)
    files = read_directory(directory)
    order = sorted(files)
    if local is not None and not local.is_dir():
        raise UsageError(f"--local-recipes: directory not found: {local}")
    # The default, beside the tree, is the checkout's: a link there is refused as
    # in a tree (a link to / would have the whole disk read).
    local_dir = local if local is not None else folder_in_tree(directory.parent, "local_recipes")
    if local_dir is not None and local_dir.resolve() != directory.resolve():
        prefix = os.path.relpath(local_dir, directory).replace(os.sep, "/") + "/"
        extra = {
            prefix + rel: data
            for rel, data in read_directory(local_dir).items()
            if rel.endswith(".yaml") and rel not in RESERVED_FILES
        }
        files.update(extra)
        order += sorted(extra)
    generation = generate_from_files(files, root=str(directory))
    # A node-level entry that cannot reach a job's tests is refused by the call
    # whose pipeline holds that job (emit.jet, emit.jet_buckets), naming entry
    # and job: not by every call, whatever pipeline it writes.
    usable = require_usable(generation, Needs.VALID, own_checks=(UNREACHABLE,))
    note_warnings(usable, generation.tree.root)
    return held(generation), {rel: i for i, rel in enumerate(order)}


def asking_system(given: System | None) -> System:
    """The system whose entries apply: --system, else the one whose job this
    process runs in. When assumed, a note says which and why (once)."""
    if given is not None:
        return given
    home = running()
    chosen = System(home.name) if home is not None else OTHER_TIERS_SYSTEM
    if home is not None:
        why = f"{home.job_variable}=true"
    else:
        why = " and ".join(job_variables()) + " are not true"
    choices = " or ".join(f"--system {s.value}" for s in System)
    note(
        f"--system {chosen.value} assumed ({why}): the quarantine entries of "
        f"{chosen.value} apply; give {choices} to choose"
    )
    return chosen


def _say(notices: list[Notice] | tuple[Notice, ...], strict: bool) -> None:
    """Each notice as a warning; with --strict an error, and nothing written: exit 4
    when a CI system's limit would be broken, else 2."""
    from matrixgen.emit.jet import LIMIT_NOTICE
    from matrixgen.engine.errors import LimitError, UsageError
    from matrixgen.util.escape import terminal_text

    if strict and notices:
        error = LimitError if any(n.code == LIMIT_NOTICE for n in notices) else UsageError
        raise error(
            "--strict: "
            + "; ".join(terminal_text(n.message) for n in notices)
            + "; nothing written"
        )
    for notice in notices:
        typer.echo(f"matrixgen: warning: {terminal_text(notice.message)} [{notice.code}]", err=True)


# Two of jet-trigger's options, too long to spell in its signature.
_LightweightOption = Annotated[
    bool,
    typer.Option(
        "--enable-lightweight-mode",
        show_default=True,
        help="Run 2-step smoke tests instead of full training",
    ),
]
_CadenceOption = Annotated[
    str | None,
    typer.Option(
        metavar="CADENCE",
        help="Trigger cadence to filter tests by (pr|nightly|mergegroup). "
        "Empty/unset disables the cadence filter.",
    ),
]


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
    scope: Annotated[str, typer.Option(metavar="SCOPE", help="Test scope")],
    environment: Annotated[str, typer.Option(metavar="ENV", help="LTS or dev features")],
    test_cases: Annotated[
        str, typer.Option(metavar="NAMES", help="Comma-separated list of test_cases, or 'all'")
    ],
    platform: Annotated[str, typer.Option(metavar="PLATFORM", help="Platform to select")],
    cluster: Annotated[str, typer.Option(metavar="CLUSTER", help="Cluster to run on")],
    output_path: Annotated[str, typer.Option(metavar="FILE", help="Path to write GitLab job to")],
    container_image: Annotated[
        str, typer.Option(metavar="IMAGE", help="LTS Container image to use")
    ],
    container_tag: Annotated[str, typer.Option(metavar="TAG", help="Container tag to use")],
    dependent_job: Annotated[
        str, typer.Option(metavar="JOB", help="Name of job that created the downstream pipeline")
    ],
    slurm_account: Annotated[str, typer.Option(metavar="ACCOUNT", help="Slurm account to use")],
    n_repeat: Annotated[int, typer.Option(metavar="N", help="Repeats, passed to the launcher")] = 1,
    time_limit: Annotated[
        int, typer.Option(metavar="SECONDS", help="Time limit, passed to the launcher")
    ] = 1,
    partition: Annotated[
        str | None, typer.Option(metavar="PARTITION", help="Slurm partition to use")
    ] = None,
    record_checkpoints: Annotated[
        str | None, typer.Option(metavar="true|false", help="Values are 'true' or 'false'")
    ] = None,
    tag: Annotated[
        str | None, typer.Option(metavar="TAG", help="Tag (only relevant for unit tests)")
    ] = None,
    run_name: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Run name (only relevant for release tests)"),
    ] = None,
    wandb_experiment: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Wandb experiment (only relevant for release tests)"),
    ] = None,
    enable_lightweight_mode: _LightweightOption = False,
    enable_warmup: Annotated[
        bool, typer.Option(help="Run one job as dependency to others as to warm up cache")
    ] = True,
    cadence: _CadenceOption = None,
    enable_error_extraction: Annotated[
        bool, typer.Option(help="Extract a structured error report from GitLab child-job output.")
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
    from matrixgen.cli.emit import write_text
    from matrixgen.emit.jet import JetCall, call_pipeline, check_call, pipeline_text

    options = locals()
    call = JetCall(**{name: options[name] for name in JetCall.__struct_fields__})
    check_call(call)
    generation, file_order = load_jet_tree(recipes, local_recipes)
    pipeline = call_pipeline(generation, call, asking_system(system), file_order=file_order)
    _say(pipeline.notices, strict)
    write_text(Path(output_path), pipeline_text(pipeline))
    _summary(pipeline, output_path, generation)


def _summary(pipeline: JetPipeline, output_path: str, generation: Generation) -> None:
    """One line on stderr: what was written, and what the quarantine did to it,
    each with the entries that did it: jobs skipped, allowed to fail, and node
    ids muted or deselected inside jobs (the pytest plugin applies those)."""
    from matrixgen.quarantine.apply import applying_entries
    from matrixgen.util.escape import terminal_text

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
    if pipeline.skipped:
        notes.append(
            f"{len(pipeline.skipped)} skipped by quarantine ({ids(list(pipeline.skipped), 'skip')})"
        )
    allowed = [j for j in written if j.quarantine and j.quarantine.action == "allow-failure"]
    if allowed:
        by = ids(allowed, "allow-failure")
        notes.append(f"{len(allowed)} allowed to fail by quarantine ({by})")
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
        str,
        typer.Option("--scope", metavar="SCOPE", help="The scope whose quarantine entries apply."),
    ] = "unit-tests",
    environment: Annotated[
        str, typer.Option("--environment", metavar="ENV", help="The environment asked for.")
    ] = "dev",
    tag: Annotated[str, typer.Option("--tag", metavar="TAG", help="The tag asked for.")] = "latest",
    platform: Annotated[
        str | None,
        typer.Option("--platform", metavar="PLATFORM", help="Default: the recipe's own platform."),
    ] = None,
    output: JsonOutputOption = None,
    strict: StrictOption = False,
) -> None:
    """The unit-test bucket matrix Megatron-LM's GitHub workflow builds with yq from a
    unit-test recipe ([{"bucket": ...}, ...], compact), with skip entries applied.

    """
    from matrixgen.cli.emit import write_text
    from matrixgen.emit.jet_buckets import bucket_matrix, bucket_text

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
    _say(matrix.notices, strict)
    text = bucket_text(matrix)
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_text(output, text)


def _recipe_file(generation: Generation, directory: Path, file: Path) -> RecipeFile:
    """The tree's recipe at FILE (a path as the shell has it)."""
    from matrixgen.engine.errors import UsageError

    try:
        rel = file.resolve().relative_to(directory.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"{file} is not inside the recipe tree {directory}") from None
    for recipe in generation.tree.files:
        if recipe.rel == rel:
            return recipe
    raise UsageError(f"{file}: no recipe of the tree {directory} (a basic recipe file)")
