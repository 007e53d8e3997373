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

from matrixgen.cli.common import RecipesOption, held, note_warnings, recipes_dir
from matrixgen.engine.vocab import System

if TYPE_CHECKING:
    from matrixgen.emit.jet import JetPipeline, Notice
    from matrixgen.engine.model import RecipeFile
    from matrixgen.pipeline import Generation


def _system(given: System | None) -> System:
    """Which system asks: as given, else github inside GitHub Actions, else gitlab."""
    if given is not None:
        return given
    return System.running_in(os.environ)


SystemChoiceOption = Annotated[
    System | None,
    typer.Option(
        "--system",
        help="The system whose quarantine entries apply (default: github when "
        "GITHUB_ACTIONS=true, else gitlab).",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="A value no recipe uses, or a job the generator would lose, is an error."
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
    from matrixgen.engine.errors import UsageError
    from matrixgen.engine.load import RESERVED_FILES, read_directory
    from matrixgen.pipeline import generate_from_files
    from matrixgen.validate import Needs, require_usable

    directory = recipes_dir(recipes)
    files = read_directory(directory)
    order = sorted(files)
    local_dir = local if local is not None else directory.parent / "local_recipes"
    if local is not None and not local.is_dir():
        raise UsageError(f"--local-recipes: directory not found: {local}")
    if local_dir.is_dir() and local_dir.resolve() != directory.resolve():
        prefix = os.path.relpath(local_dir, directory).replace(os.sep, "/") + "/"
        extra = {
            prefix + rel: data
            for rel, data in read_directory(local_dir).items()
            if rel.endswith(".yaml") and rel not in RESERVED_FILES
        }
        files.update(extra)
        order += sorted(extra)
    generation = generate_from_files(files, root=str(directory))
    note_warnings(require_usable(generation, Needs.VALID), generation.tree.root)
    return held(generation), {rel: i for i, rel in enumerate(order)}


def _say(notices: list[Notice] | tuple[Notice, ...], strict: bool) -> None:
    from matrixgen.engine.errors import UsageError
    from matrixgen.util.escape import terminal_text

    if strict and notices:
        raise UsageError(
            "--strict: "
            + "; ".join(terminal_text(n.message) for n in notices)
            + "; nothing written"
        )
    for notice in notices:
        typer.echo(f"matrixgen: warning: {terminal_text(notice.message)} [{notice.code}]", err=True)


# The options of Megatron-LM's generate_jet_trigger_job.py, with its names, help and defaults.
_ScopeOption = Annotated[str, typer.Option("--scope", metavar="SCOPE", help="Test scope")]
_EnvironmentOption = Annotated[
    str, typer.Option("--environment", metavar="ENV", help="LTS or dev features")
]
_TestCasesOption = Annotated[
    str,
    typer.Option(
        "--test-cases", metavar="NAMES", help="Comma-separated list of test_cases, or 'all'"
    ),
]
_PlatformOption = Annotated[
    str, typer.Option("--platform", metavar="PLATFORM", help="Platform to select")
]
_ClusterOption = Annotated[
    str, typer.Option("--cluster", metavar="CLUSTER", help="Cluster to run on")
]
_OutputPathOption = Annotated[
    str, typer.Option("--output-path", metavar="FILE", help="Path to write GitLab job to")
]
_ContainerImageOption = Annotated[
    str, typer.Option("--container-image", metavar="IMAGE", help="LTS Container image to use")
]
_ContainerTagOption = Annotated[
    str, typer.Option("--container-tag", metavar="TAG", help="Container tag to use")
]
_DependentJobOption = Annotated[
    str,
    typer.Option(
        "--dependent-job",
        metavar="JOB",
        help="Name of job that created the downstream pipeline",
    ),
]
_SlurmAccountOption = Annotated[
    str, typer.Option("--slurm-account", metavar="ACCOUNT", help="Slurm account to use")
]
_NRepeatOption = Annotated[
    int, typer.Option("--n-repeat", metavar="N", help="Repeats, passed to the launcher")
]
_TimeLimitOption = Annotated[
    int,
    typer.Option("--time-limit", metavar="SECONDS", help="Time limit, passed to the launcher"),
]
_PartitionOption = Annotated[
    str | None, typer.Option("--partition", metavar="PARTITION", help="Slurm partition to use")
]
_RecordCheckpointsOption = Annotated[
    str | None,
    typer.Option("--record-checkpoints", metavar="true|false", help="Values are 'true' or 'false'"),
]
_TagOption = Annotated[
    str | None, typer.Option("--tag", metavar="TAG", help="Tag (only relevant for unit tests)")
]
_RunNameOption = Annotated[
    str | None,
    typer.Option("--run-name", metavar="NAME", help="Run name (only relevant for release tests)"),
]
_WandbExperimentOption = Annotated[
    str | None,
    typer.Option(
        "--wandb-experiment",
        metavar="NAME",
        help="Wandb experiment (only relevant for release tests)",
    ),
]
_EnableLightweightModeOption = Annotated[
    bool,
    typer.Option(
        "--enable-lightweight-mode",
        show_default=True,
        help="Run 2-step smoke tests instead of full training",
    ),
]
_EnableWarmupOption = Annotated[
    bool,
    typer.Option(
        "--enable-warmup/--no-enable-warmup",
        help="Run one job as dependency to others as to warm up cache",
    ),
]
_CadenceOption = Annotated[
    str | None,
    typer.Option(
        "--cadence",
        metavar="CADENCE",
        help="Trigger cadence to filter tests by (pr|nightly|mergegroup). "
        "Empty/unset disables the cadence filter.",
    ),
]
_EnableErrorExtractionOption = Annotated[
    bool,
    typer.Option(
        "--enable-error-extraction/--no-enable-error-extraction",
        help="Extract a structured error report from GitLab child-job output.",
    ),
]


def jet_trigger(
    scope: _ScopeOption,
    environment: _EnvironmentOption,
    test_cases: _TestCasesOption,
    platform: _PlatformOption,
    cluster: _ClusterOption,
    output_path: _OutputPathOption,
    container_image: _ContainerImageOption,
    container_tag: _ContainerTagOption,
    dependent_job: _DependentJobOption,
    slurm_account: _SlurmAccountOption,
    n_repeat: _NRepeatOption = 1,
    time_limit: _TimeLimitOption = 1,
    partition: _PartitionOption = None,
    record_checkpoints: _RecordCheckpointsOption = None,
    tag: _TagOption = None,
    run_name: _RunNameOption = None,
    wandb_experiment: _WandbExperimentOption = None,
    enable_lightweight_mode: _EnableLightweightModeOption = False,
    enable_warmup: _EnableWarmupOption = True,
    cadence: _CadenceOption = None,
    enable_error_extraction: _EnableErrorExtractionOption = False,
    recipes: RecipesOption = None,
    local_recipes: LocalRecipesOption = None,
    system: SystemChoiceOption = None,
    strict: StrictOption = False,
) -> None:
    """Megatron-LM's child pipeline for one call, as its generate_jet_trigger_job.py
    writes it, with the quarantine applied (docs/megatron.md).

    Takes every option of that script, with the same names, types and defaults.
    Exit 1: the tree or a quarantine entry has errors, or a node-level entry
    cannot reach its tests; 2: usage error (with --strict also a value no
    recipe uses, or a job the generator would lose); 3: bad project config; 7:
    the quarantine file cannot be read; 9 and 12: the output cannot be
    written, or is a link.
    """
    from matrixgen.cli.emit import _write_text
    from matrixgen.emit.jet import JetCall, call_pipeline, check_call, pipeline_text

    call = JetCall(
        scope=scope,
        environment=environment,
        n_repeat=n_repeat,
        time_limit=time_limit,
        test_cases=test_cases,
        platform=platform,
        cluster=cluster,
        partition=partition,
        container_image=container_image,
        container_tag=container_tag,
        dependent_job=dependent_job,
        record_checkpoints=record_checkpoints,
        slurm_account=slurm_account,
        tag=tag,
        run_name=run_name,
        wandb_experiment=wandb_experiment,
        enable_lightweight_mode=enable_lightweight_mode,
        enable_warmup=enable_warmup,
        cadence=cadence,
        enable_error_extraction=enable_error_extraction,
    )
    check_call(call)
    generation, file_order = load_jet_tree(recipes, local_recipes)
    pipeline = call_pipeline(generation, call, _system(system), file_order=file_order)
    _say(pipeline.notices, strict)
    _write_text(Path(output_path), pipeline_text(pipeline))
    _summary(pipeline, output_path)


def _summary(pipeline: JetPipeline, output_path: str) -> None:
    """One line on stderr: what was written, and what the quarantine took out."""
    from matrixgen.util.escape import terminal_text

    target = pipeline.target
    where = f"{target.system.value}/{target.selector.scope}"
    line = (
        f"{terminal_text(output_path)}: {len(pipeline.jobs)} job(s) for {terminal_text(where)} "
        f"{terminal_text(target.selector.platform)}/{terminal_text(target.selector.environment)}"
    )
    skipped = pipeline.skipped
    allowed = [
        j for _, j in pipeline.jobs if j.quarantine and j.quarantine.action == "allow-failure"
    ]
    notes = []
    if skipped:
        ids = sorted({j.quarantine.id for j in skipped if j.quarantine})
        notes.append(f"{len(skipped)} skipped by quarantine ({', '.join(ids)})")
    if allowed:
        notes.append(f"{len(allowed)} allowed to fail by quarantine")
    if notes:
        line += "; " + "; ".join(terminal_text(n) for n in notes)
    typer.echo(line, err=True)


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
    output: Annotated[
        Path | None,
        typer.Option("--output", metavar="FILE", help="Write the JSON here instead of stdout."),
    ] = None,
    strict: StrictOption = False,
) -> None:
    """The unit-test bucket matrix Megatron-LM's GitHub workflow builds with yq from a
    unit-test recipe ([{"bucket": ...}, ...], compact), with skip entries applied.

    Exit 1: the tree or a quarantine entry has errors, or a node-level entry
    cannot reach its tests; 2: usage error, or FILE is no recipe of the tree.
    """
    from matrixgen.cli.emit import _write_text
    from matrixgen.emit.jet_buckets import bucket_matrix, bucket_text

    generation, _ = load_jet_tree(recipes, None)
    recipe = _recipe_file(generation, recipes_dir(recipes), file)
    matrix = bucket_matrix(
        recipe,
        generation,
        system=_system(system),
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
        _write_text(output, text)


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


def register(app: typer.Typer) -> None:
    app.command("jet-trigger")(jet_trigger)
    app.command("jet-buckets")(jet_buckets)
