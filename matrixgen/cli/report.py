"""`matrixgen report`: the static HTML site (matrixgen.report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from matrixgen.cli.common import (
    RecipesOption,
    TargetOption,
    check_ad_hoc,
    exits,
    load_valid,
    option,
)
from matrixgen.cli.results import DbOption
from matrixgen.cli.triage import (
    BaselineRefOption,
    BaselineRunsOption,
    BaselineSourceOption,
    check_triage_options,
)
from matrixgen.model.errors import ExitCode
from matrixgen.util.escape import terminal_text


@exits(
    (ExitCode.OK, "written"),
    ExitCode.FINDINGS,
    (ExitCode.USAGE, "usage error (an unknown --run among them)"),
    ExitCode.CONFIG,
    (ExitCode.ENVIRONMENT, "a file cannot be written"),
    (ExitCode.RESULTS_STORE, "the results store cannot be opened or read, or --run without one"),
    (ExitCode.OUTPUT, "--output-dir, or a page in it, is a symbolic link (refused)"),
)
def report(
    out: Annotated[
        Path, option("DIR", "Directory the site is written to.", "--output-dir", file_okay=False)
    ],
    recipes: RecipesOption = None,
    db: DbOption = None,
    since: Annotated[
        int, option("DAYS", "Results of the last DAYS days (flake history, evidence).")
    ] = 30,
    target: TargetOption = None,
    run: Annotated[
        str | None, option("RUN_ID", "The stored run whose triage the Triage page shows.")
    ] = None,
    baseline_ref: BaselineRefOption = "main",
    baseline_source: BaselineSourceOption = None,
    baseline_runs: BaselineRunsOption = 1,
) -> None:
    """Write a static HTML site into --output-dir: Overview (jobs and GPU-hours per
    pipeline), Selection (cases x platforms per pipeline, with quarantine),
    Quarantine board, Flake history (a test-by-run grid from the results store)
    and Triage. HTML and inline CSS and SVG only: no script, no request to any
    other host; open index.html.

    With a results store (--db, $MATRIXGEN_RESULTS_DB, or .matrixgen/results.db
    when it exists) the pages add expected GPU-hours, each entry's evidence and
    last runs, and the flake grid; without one each page says what a store adds.
    Expiry and ages are judged against $MATRIXGEN_TODAY when set.

    With --run (and a store), the Triage page shows that run's triage, as
    `matrixgen results triage --run RUN --since DAYS` gives it (the same baseline
    options); new failures do not change the exit code here.

    \b
    """
    from matrixgen.cli.features import report_contributions
    from matrixgen.model.errors import UsageError
    from matrixgen.quarantine.policy import current_day
    from matrixgen.report.pages import render_site
    from matrixgen.report.site import gather, write_site

    if since < 1:  # as `flaky` says it (without importing the store for a tree without one)
        raise UsageError("--since must be 1 day or more")
    query = None
    if run is not None:  # the results store's part of the report reads it
        from matrixgen.results.site import TriageQuery

        query = TriageQuery(
            run_id=check_triage_options(run, baseline_ref, baseline_source, baseline_runs),
            baseline_ref=baseline_ref,
            baseline_source=baseline_source,
            baseline_runs=baseline_runs,
        )
    generation = load_valid(recipes)
    targets = generation.targets(target or ())
    if target:
        check_ad_hoc(generation, targets)
    data = gather(
        generation,
        since_days=since,
        today=current_day(),
        targets=targets,
        contributions=report_contributions(),
        options={"db": db, "triage": query},
    )
    site = render_site(data)
    write_site(out, site)
    size = sum(len(page.encode("utf-8")) for page in site.values())
    typer.echo(
        f"{len(site)} page(s), {size:,} bytes -> {terminal_text(out / 'index.html')}", err=True
    )
