"""Commands about the project as a whole: `pins`, `graph`, `stats`."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.cli.common import (
    HoldingPenOption,
    RecipesOption,
    TableOrJson,
    TableOrJsonOption,
    TargetOption,
    check_ad_hoc,
    echo_json,
    exits,
    load_valid,
    option,
    usable_generation,
)
from matrixgen.cli.results import DbOption, note_ignored_store
from matrixgen.model.errors import ExitCode, UsageError
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import json_value
from matrixgen.views.table import table

if TYPE_CHECKING:
    from matrixgen.pipeline import Generation
    from matrixgen.views.stats import Stats


class GraphFormat(StrEnum):
    MERMAID = "mermaid"
    DOT = "dot"
    JSON = "json"


@exits(
    (ExitCode.OK, "every pin holds"),
    (
        ExitCode.FINDINGS,
        "an image drifts or a covered job lacks a pin (`matrixgen validate` says where to fix it), "
        "or the recipes have errors (nothing is shown)",
    ),
    ExitCode.CONFIG,
)
def pins(
    recipes: RecipesOption = None,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Show the image pins side by side, and the env and argument pins with
    the jobs they cover.

    """
    from matrixgen.views.pins import pins_report

    generation = usable_generation(recipes)
    report = pins_report(generation.tree.config, generation.jobs)
    bad = [i for i in report["images"] if not i["ok"]] + [
        p for p in report["pins"] if p["failing_jobs"]
    ]
    if fmt is TableOrJson.JSON:
        echo_json(report)
    else:
        if report["images"]:
            version = report["version"]
            rows = [
                [
                    i["name"],
                    i["system"],
                    i["environment"] or "*",
                    i["arch"] or "*",
                    i["image"],
                    i["version"] or "?",
                    "ok" if i["ok"] else f"DRIFT: want {i['expected']}",
                ]
                for i in report["images"]
            ]
            typer.echo(f"Images (images.version {version})" if version else "Images")
            typer.echo(
                table(rows, ["pin", "system", "env", "arch", "image", "version", "status"]),
                nl=False,
            )
        else:
            typer.echo("Images: none pinned (images in the project config)")
        if report["pins"]:
            typer.echo("\nEnv and argument pins")
            rows = []
            for p in report["pins"]:
                what = [f"{k}={v}" for k, v in p["env"].items()]
                if p["args"]:
                    what.append(" ".join(p["args"]))
                rows.append(
                    [
                        p["name"],
                        ", ".join(what),
                        _covers(p),
                        str(p["covered_jobs"]),
                        str(p["custom_launcher_jobs"]),
                        "ok" if not p["failing_jobs"] else f"{p['failing_jobs']} lack it",
                    ]
                )
            typer.echo(
                table(
                    rows,
                    ["pin", "value", "covers", "jobs", "custom launcher", "status"],
                ),
                nl=False,
            )
        else:
            typer.echo("\nEnv and argument pins: none (pins in the project config)")
    if bad:
        typer.echo(
            f"{len(bad)} pin(s) do not hold; `matrixgen validate` shows where to fix them",
            err=True,
        )
        raise typer.Exit(ExitCode.FINDINGS)


@exits(
    (ExitCode.OK, "no needs missing and no cycles"),
    (ExitCode.FINDINGS, "some (printed on stderr, and drawn in the graph)"),
    (ExitCode.USAGE, "unknown target"),
)
def graph(
    recipes: RecipesOption = None,
    target: TargetOption = None,
    fmt: Annotated[
        GraphFormat, typer.Option("--format", help="mermaid, dot or json.")
    ] = GraphFormat.MERMAID,
) -> None:
    """Print the job graph: build images -> test jobs -> the jobs they need
    (spec needs, a target's warm-up job, the parent pipeline's job).

    Without --target: every job of the tree, with builds and spec needs.
    """
    from matrixgen.views.graph import render_graph, summary, target_graph, tree_graph

    generation = usable_generation(recipes, selection=True)
    if not target:
        result = tree_graph(generation)
    else:
        if len(target) != 1:
            shown = ", ".join(f'"{t}"' for t in target)
            raise UsageError(f"`graph` draws one target at a time; got {len(target)}: {shown}")
        chosen = generation.targets(target)
        check_ad_hoc(generation, chosen)
        result = target_graph(generation, chosen[0])
    typer.echo(render_graph(result, fmt.value), nl=False)
    typer.echo(", ".join(f"{k}: {v}" for k, v in sorted(summary(result).items())), err=True)
    problems = [
        f"{n.job.name} needs {n.name}, which is no job here ({n.job.recipe})"
        for n in result.missing
    ] + [
        # As validate words it: job names, the loop closed.
        "cycle: " + " -> ".join(n.split(":", 1)[1] for n in (*c, c[0]))
        for c in result.cycles
    ]
    for line in problems:
        typer.echo(f"matrixgen: {terminal_text(line)}", err=True)
    if problems:
        raise typer.Exit(ExitCode.FINDINGS)


def stats(
    recipes: RecipesOption = None,
    exclude_platform: Annotated[
        list[str] | None,
        option(
            "PLATFORM", "Leave this platform out (repeatable); added to those with counted: false."
        ),
    ] = None,
    all_platforms: Annotated[
        bool,
        typer.Option(
            "--all-platforms", help="Count platforms marked counted: false in the config too."
        ),
    ] = False,
    target: TargetOption = None,
    holding_pen: HoldingPenOption = False,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
    cost: Annotated[
        bool,
        typer.Option(
            "--cost",
            help="GPU-hours instead of counts: per target, pipeline, platform and recipe "
            "file (nodes x gpus x time_limit x n_repeat); with a results store, the "
            "expected GPU-hours from measured durations too.",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Count jobs per target, pipeline (system/scope), platform, model and
    quarantine state; with --cost, what each costs in GPU-hours.

    With --cost and a results store (--db, $MATRIXGEN_RESULTS_DB, or
    .matrixgen/results.db when it exists and git does not track it), jobs
    with measured durations get an expected figure too: GPUs x the median
    of their measured runs.

    Targets: the --target ones, else the configured ones (a tree without
    config: every scope x platform x environment it uses, holding-pen scopes
    only with --holding-pen). Platforms with `counted: false` are
    left out unless --all-platforms; --exclude-platform leaves out more.
    A pipeline counts distinct jobs over its targets; "cases" are the
    functional ones (every model but unit-tests).
    """
    from matrixgen.views.stats import compute_stats, render_table

    generation = load_valid(recipes)
    targets = generation.targets(target or (), holding_pen=holding_pen)
    check_ad_hoc(generation, targets)
    result = compute_stats(
        generation, targets, exclude=exclude_platform or (), all_platforms=all_platforms
    )
    if cost:
        _stats_cost(generation, result, fmt, db)
    elif fmt is TableOrJson.JSON:
        echo_json(json_value(result.report))
    else:
        typer.echo(render_table(result), nl=False)


def _stats_cost(generation: Generation, result: Stats, fmt: TableOrJson, db: str | None) -> None:
    """`stats --cost`: GPU-hours of the jobs `stats` counts."""
    from matrixgen.results.summary import store_configured
    from matrixgen.views.cost import compute_cost, render_cost_table
    from matrixgen.views.stats import not_counted

    measured = None
    note_ignored_store(db)
    if store_configured(db):  # sqlalchemy only when there is a store
        from matrixgen.results.durations import measured_from_store

        measured = measured_from_store(db)
    # The jobs `stats` counts: the same targets, platforms left out alike.
    left_out = set(result.excluded_platforms)
    report = compute_cost(
        generation,
        [t.target for t in result.targets],
        measured=measured,
        jobs_of=lambda t: [j for j in generation.jobs_for(t) if j.platform not in left_out],
    )
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "excluded_platforms": list(result.excluded_platforms),
                "excluded_targets": list(result.excluded_targets),
                **json_value(report),
            }
        )
    else:
        typer.echo(render_cost_table(report, not_counted(result)), nl=False)


def _covers(pin: dict[str, Any]) -> str:
    keys = ("models", "platforms", "environments")
    parts = [f"{key} {','.join(pin[key])}" for key in keys if pin.get(key)] or ["every job"]
    parts += [f"but {key} {','.join(values)}" for key, values in pin.get("exclude", {}).items()]
    return "; ".join(parts)
