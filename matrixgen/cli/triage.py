"""`matrixgen results triage`: one run's failures against its baseline."""

from __future__ import annotations

from typing import Annotated

import typer

from matrixgen.cli.common import (
    RecipesOption,
    TableJsonOrMarkdown,
    echo_as,
    exits,
    option,
    usable_generation,
)
from matrixgen.cli.results import (
    BrokenRunsOption,
    DbOption,
    FlakyFormatOption,
    FlipRateOption,
    MinRunsOption,
    SinceOption,
    _policy,
)
from matrixgen.model.errors import ExitCode, UsageError
from matrixgen.util.escape import terminal_text as _t

# The baseline options, shared with `matrixgen report --run`.
BaselineRefOption = Annotated[str, option("REF", "The branch the baseline runs are of.")]
BaselineSourceOption = Annotated[
    str | None, option("SOURCE", "Only baseline runs of this source, e.g. schedule (default: any).")
]
BaselineRunsOption = Annotated[
    int, option("N", "Compare with the latest N baseline runs that finished before the run.")
]


def check_triage_options(
    run: str, baseline_ref: str, baseline_source: str | None, baseline_runs: int
) -> str:
    """The run id, stripped; a usage error for an empty one or a bad baseline."""
    if not run.strip():
        raise UsageError("--run must not be empty")
    if not baseline_ref.strip():
        raise UsageError("--baseline-ref must not be empty")
    if baseline_source is not None and not baseline_source.strip():
        raise UsageError("--baseline-source must not be empty")
    if baseline_runs < 1:
        raise UsageError("--baseline-runs must be 1 or more")
    return run.strip()


@exits(
    (ExitCode.OK, "no failure is new"),
    (
        ExitCode.EXPECTATION,
        "one or more are new (as a failed `diff --expect`: CI blocks on new failures only)",
    ),
    (ExitCode.FINDINGS, "the recipes or the quarantine file have errors"),
    (ExitCode.USAGE, "usage error (no such run, bad option)"),
    (ExitCode.RESULTS_STORE, "the results store cannot be opened or read"),
)
def triage(
    run: Annotated[str, option("RUN_ID", "The stored run to triage.")],
    baseline_ref: BaselineRefOption = "main",
    baseline_source: BaselineSourceOption = None,
    baseline_runs: BaselineRunsOption = 1,
    since: SinceOption = 30,
    min_runs: MinRunsOption = 3,
    flip_rate: FlipRateOption = 0.1,
    broken_runs: BrokenRunsOption = 3,
    db: DbOption = None,
    recipes: RecipesOption = None,
    fmt: FlakyFormatOption = TableJsonOrMarkdown.TABLE,
) -> None:
    """Give each failed job and test of a run one verdict: quarantined (an entry
    covers it), known (a known-failure pattern of the config matches it),
    baseline (the latest baseline run failed it with the same reason), flaky
    (as `matrixgen results flaky` judges it on the baseline ref) or new; and group the
    failures that share one reason."""
    from matrixgen.model.errors import ExpectationError
    from matrixgen.results.queries import RunFilter
    from matrixgen.results.triage import read_triage
    from matrixgen.results.triage_markdown import failure_name, markdown, render_table, summary

    run = check_triage_options(run, baseline_ref, baseline_source, baseline_runs)
    policy = _policy(since, min_runs, flip_rate, broken_runs)
    # A quarantine file with errors is refused here too (exit 1).
    generation = usable_generation(recipes, selection=True)
    report = read_triage(
        db,
        generation,
        run,
        baseline=RunFilter(ref=baseline_ref, source=baseline_source),
        count=baseline_runs,
        policy=policy,
    )
    echo_as(fmt, report, render_table, markdown)
    if report.note:
        typer.echo(f"matrixgen: note: {_t(report.note)}", err=True)
    typer.echo(summary(report), err=True)
    if report.new:
        raise ExpectationError(
            f"{len(report.new)} new failure(s) in run {report.run.run_id}:",
            details=[failure_name(f) for f in report.new[:20]]
            + ([f"and {len(report.new) - 20} more"] if len(report.new) > 20 else []),
        )
