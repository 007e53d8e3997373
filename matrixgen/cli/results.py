"""`matrixgen results ingest`, `prune` and `flaky` (sqlalchemy imported only as one runs)."""

from __future__ import annotations

import datetime as dt
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.cli.common import (
    RecipesOption,
    TableJsonOrMarkdown,
    TableOrJson,
    TableOrJsonOption,
    echo_json,
    exits,
    option,
    tree_config,
    usable_generation,
)
from matrixgen.model.errors import ExitCode, UsageError
from matrixgen.systems.ci import ci_value, variables_of
from matrixgen.util.escape import terminal_text as _t
from matrixgen.util.values import json_value

if TYPE_CHECKING:
    from matrixgen.results.flaky import FlakyPolicy

DbOption = Annotated[
    str | None,
    option(
        "URL",
        "Results store: a SQLite file path, sqlite:///PATH or postgresql://... "
        "(default: $MATRIXGEN_RESULTS_DB, else .matrixgen/results.db at the top of the checkout, "
        "unless git tracks it).",
    ),
]
SinceOption = Annotated[int, option("DAYS", "Only runs of the last DAYS days.")]
MinRunsOption = Annotated[int, option("N", "Leave out keys with fewer runs than this.")]
FlipRateOption = Annotated[float, option("RATE", "Flaky above this flip rate: flips / (runs - 1).")]
BrokenRunsOption = Annotated[int, option("N", "Broken when the last N runs or more all failed.")]


def note_ignored_store(db: str | None) -> None:
    """A note when the default results store is there but tracked by git, so not
    read (the commands that need a store stop on it instead)."""
    from matrixgen.util.checkout import choose_store

    note = choose_store(db).note
    if note is not None:
        typer.echo(f"matrixgen: note: {_t(note)}", err=True)


FlakyFormatOption = Annotated[
    TableJsonOrMarkdown, typer.Option("--format", help="table, json or markdown.")
]


def _parse_time(text: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f'--finished-at "{text}": expected an ISO time like 2026-11-30T18:05:00Z'
        ) from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    try:
        moment.astimezone(dt.UTC)  # stored in UTC, and read back as a date there
    except OverflowError:
        raise UsageError(f'--finished-at "{text}" is outside the years 1 to 9999 in UTC') from None
    from matrixgen.results.junit import FUTURE_SKEW

    now = dt.datetime.now(dt.UTC)
    if moment > now + FUTURE_SKEW:
        raise UsageError(
            f'--finished-at "{text}" is later than now ({now.isoformat(timespec="seconds")}) '
            f"plus {FUTURE_SKEW.seconds // 60} minutes: refused"
        )
    return moment


@exits(
    ExitCode.OK,
    (ExitCode.USAGE, "usage error (unknown target or job, a test no job holds, bad option)"),
    ExitCode.RESULTS_FILE,
    ExitCode.RESULTS_STORE,
)
def ingest(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE|DIR...", help="JUnit XML files, or directories.")
    ],
    run_id: Annotated[str, option("ID", "The CI run (pipeline) id.")],
    target: Annotated[
        str | None, option("TARGET", "The target the jobs ran in (a name from the config).")
    ] = None,
    job: Annotated[
        str | None, option("JOB", "The job that wrote the files (its recipe or CI name).")
    ] = None,
    tag: Annotated[
        str | None, option("TAG", "Leave out jobs with another tag (jobs without one stay).")
    ] = None,
    commit: Annotated[
        str | None, option("SHA", f"The commit tested (default: {_ci_default('commit')}).")
    ] = None,
    finished_at: Annotated[
        str | None,
        option("TIME", "When the run finished (default: the reports' timestamps, else now)."),
    ] = None,
    ref: Annotated[
        str | None,
        option("REF", f"The branch or tag the run was for (default: {_ci_default('ref')})."),
    ] = None,
    source: Annotated[
        str | None,
        option(
            "SOURCE",
            "What started the run: schedule, merge_request_event, push... "
            f"(default: {_ci_default('source')}).",
        ),
    ] = None,
    base: Annotated[
        str | None,
        option(
            "REV",
            "The git revision whose quarantine file decides which failures stay muted "
            f"(default: {_ci_default('diff_base')}, else the tree of --recipes as it is): "
            "give a pull request's base, so that its own file grants nothing.",
            envvar=list(variables_of("diff_base")),
        ),
    ] = None,
    db: DbOption = None,
    recipes: RecipesOption = None,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Store the tests of JUnit XML reports for one run: one row per job and test.

    A failure the report marks muted stays muted only where a mute entry of the
    quarantine file at --base names it. Each failure's reason is stored, and the
    line of its output a known-failure pattern of the config matches. Re-ingesting
    a run changes nothing; a bad file stores nothing."""

    from matrixgen.results.junit import report_files

    if not run_id.strip():
        raise UsageError("--run-id must not be empty")
    moment = _parse_time(finished_at) if finished_at else None
    commit = commit or ci_value("commit")
    ref = _origin("--ref", ref, "ref")
    source = _origin("--source", source, "source")
    paths = report_files(files)
    if not paths:
        raise UsageError("no JUnit XML files found in " + ", ".join(str(f) for f in files))
    generation = usable_generation(recipes, selection=True)
    from matrixgen.quarantine.policy import current_day
    from matrixgen.results.mapping import Mapper, MuteGrants

    mapper = Mapper(generation, target=target, job=job, tag=tag)
    entries, where = _mute_entries(generation, recipes, base.strip() if base else None)
    grants = MuteGrants(entries, {j.test_case for j in generation.jobs}, current_day())

    from matrixgen.results.store import RunInfo

    info = RunInfo(run_id=run_id.strip(), commit=commit, finished_at=moment, ref=ref, source=source)
    from matrixgen.results.known import known_failures

    # The config's known-failure patterns read each failed test's output: the
    # line one matches is kept (triage matches the message itself later).
    known = known_failures(generation.tree.config)
    report, shown = _stream_ingest(db, info, paths, mapper, grants, known.watch if known else None)
    _echo_ingest(report, shown, len(paths), fmt)
    if grants.refused:
        typer.echo(
            f"matrixgen: note: {grants.refused} failure(s) marked muted by their report "
            f'(e.g. "{_t(grants.first or "")}") but named by no mute entry of {_t(where)}: '
            "stored as failed (a report's mark is a claim; only the quarantine file grants it)",
            err=True,
        )


def _mute_entries(generation: Any, recipes: Path | None, base: str | None) -> tuple[Any, str]:
    """The entries that may keep a failure muted, and where they come from: the
    quarantine file at `base` (a git revision), else the tree's own."""
    if not base:
        return generation.quarantine.entries, generation.quarantine.path
    from matrixgen.diff.gitsource import check_revision, locate_recipes
    from matrixgen.model.errors import MatrixgenError
    from matrixgen.model.vocab import QUARANTINE_FILENAME
    from matrixgen.quarantine.model import parse_quarantine

    check_revision(base)
    try:
        repo, path = locate_recipes(recipes)
        source = repo.read(base, path)
    except MatrixgenError as exc:
        raise UsageError(
            f"--base {base}: its quarantine file cannot be read ({exc}); fetch that revision "
            "(the pull request's base) into the checkout"
        ) from None
    name = f"{path}/{QUARANTINE_FILENAME}" if path else QUARANTINE_FILENAME
    qfile = parse_quarantine(source.files.get(QUARANTINE_FILENAME), name)
    where = f"{name} at {source.label}"
    if qfile.errors:
        typer.echo(f"matrixgen: note: {_t(where)} has errors: no failure is kept muted", err=True)
        return (), where
    return qfile.entries, where


def _echo_ingest(report: Any, shown: str, files: int, fmt: TableOrJson) -> None:
    jobs = report.table()
    odd = list(report.not_node_ids)
    if fmt is TableOrJson.JSON:
        headers = [c.header for c in jobs.columns]
        echo_json(
            {
                "run_id": report.run_id,
                "new_run": report.new_run,
                "files": files,
                "jobs": [dict(zip(headers, r, strict=True)) for r in jobs.rows],
                "not_node_ids": odd,
            }
        )
    else:
        typer.echo(jobs.text(), nl=False)
    if odd:
        typer.echo(
            f"matrixgen: note: {len(odd)} record(s) of unit-test buckets name no test "
            f'(not a pytest node id path::name, e.g. "{_t(odd[0])}"): stored as results, '
            "never used to draft a deselect",
            err=True,
        )
    typer.echo(
        f"run {_t(report.run_id)}: {files} file(s), {report.tests} test(s); stored "
        f"{report.rows} result(s) of {len(report.stored)} job(s) in {shown}"
        + (
            f"; {len(report.already)} job(s) of this run were stored before and are left as "
            "they were"
            if report.already
            else ""
        ),
        err=True,
    )


def _stream_ingest(
    db: str | None, info: Any, paths: list[Path], mapper: Any, grants: Any, watch: Any = None
) -> tuple[Any, str]:
    """Read the reports one record at a time into the store, in one transaction
    (memory stays flat: `ingest.IngestSink`); the run ends when its reports
    say (clamped to now), unless --finished-at said. A SQLite store this
    ingest created is removed again when the ingest fails: nothing stored."""
    from matrixgen.results.ingest import ingest_stream
    from matrixgen.results.junit import run_finished_at, stream_report
    from matrixgen.results.store import open_store, sqlite_path, store_url

    path = sqlite_path(store_url(db))
    created = path is not None and not path.exists()
    store = open_store(db, write=True)
    try:
        with ingest_stream(store, info) as sink:
            if mapper.named is not None:
                named = mapper.named
                sink.job(named.key, named.names[-1], named.target)
            ends = []
            for number, report in enumerate(paths):

                def add(test: Any, number: int = number, report: Path = report) -> None:
                    chosen = mapper(str(report), test)
                    test = grants(chosen, test)
                    sink.add(chosen.key, chosen.names[-1], chosen.target, number, test, str(report))

                ends.append(stream_report(report, add, watch))
            moment = info.finished_at
            if moment is None:
                moment, note = run_finished_at(ends)
                if note is not None:
                    typer.echo(f"matrixgen: note: {_t(note)}", err=True)
            return sink.finish(moment), store.shown
    except BaseException:
        if created and path is not None:
            store.close()
            path.unlink(missing_ok=True)
        raise
    finally:
        store.close()


def _origin(option: str, given: str | None, role: str) -> str | None:
    """--ref or --source: as given (never blank), else from the CI's own variables."""
    if given is not None:
        if not given.strip() or given != given.strip():
            raise UsageError(f"{option} {given!r}: expected a name without surrounding blanks")
        return given
    return ci_value(role)


def _ci_default(role: str) -> str:
    return ", else ".join(f"${name}" for name in variables_of(role))


@exits(ExitCode.OK, ExitCode.USAGE, ExitCode.RESULTS_STORE)
def prune(
    older_than: Annotated[
        int,
        option(
            "DAYS", "Delete the runs that finished more than DAYS days ago, with their results."
        ),
    ],
    db: DbOption = None,
) -> None:
    """Delete old runs from the results store, with their results, in one transaction."""
    from matrixgen.results.flaky import iso, reference_time
    from matrixgen.results.queries import prune as store_prune
    from matrixgen.results.store import open_store

    if older_than < 1:
        raise UsageError("--older-than must be 1 day or more")
    before = reference_time() - older_than * 86400
    with closing(open_store(db, write=True)) as store:
        deleted = store_prune(store, before)
    typer.echo(
        f"deleted {deleted['runs']} run(s) finished before {iso(before)}: "
        f"{deleted['run_jobs']} job outcome(s), {deleted['results']} result(s) from {store.shown}",
        err=True,
    )


def _policy(since: int, min_runs: int, flip_rate: float, broken_runs: int) -> FlakyPolicy:
    from matrixgen.results.flaky import FlakyPolicy

    policy = FlakyPolicy(
        since_days=since, min_runs=min_runs, flip_rate=flip_rate, broken_runs=broken_runs
    )
    policy.check()
    return policy


@exits(
    ExitCode.OK,
    ExitCode.USAGE,
    (ExitCode.RESULTS_STORE, "the results store cannot be opened or read"),
)
def flaky(
    since: SinceOption = 30,
    min_runs: MinRunsOption = 3,
    flip_rate: FlipRateOption = 0.1,
    broken_runs: BrokenRunsOption = 3,
    verdict: Annotated[
        list[str] | None,
        option("VERDICT", "Only rows with this verdict (broken, failing, flaky, ok)."),
    ] = None,
    ref: Annotated[str | None, option("REF", "Only the runs of this branch or tag.")] = None,
    source: Annotated[
        str | None, option("SOURCE", "Only the runs of this source (needs --ref).")
    ] = None,
    db: DbOption = None,
    fmt: FlakyFormatOption = TableJsonOrMarkdown.TABLE,
    recipes: RecipesOption = None,
) -> None:
    """Flaky and broken cases from the stored results: one row per job, platform,
    environment and scope (per pytest node id inside unit-test buckets), ranked.

    Scopes are named as the recipe tree's config names them (`nightly`, which
    the store holds as its tier L2); without a tree, as the store holds them."""
    from matrixgen.results import flaky as feature
    from matrixgen.results.queries import RunFilter
    from matrixgen.results.store import open_store

    if source is not None and ref is None:
        raise UsageError("--source needs --ref: the runs of one ref, from one source")
    only = RunFilter(ref=ref, source=source) if ref is not None else None

    wanted = set()
    for value in verdict or ():
        try:
            wanted.add(feature.Verdict(value))
        except ValueError:
            raise UsageError(f'--verdict "{value}": use broken, failing, flaky or ok') from None
    policy = _policy(since, min_runs, flip_rate, broken_runs)
    with closing(open_store(db, write=False)) as store:
        report = feature.flaky_rows(store, policy, only=only)
    rows = [r for r in report.rows if not wanted or r.verdict in wanted]
    config = tree_config(recipes)
    if config is not None:
        rows = feature.in_tree_words(rows, config.scope_word)
    if fmt is TableJsonOrMarkdown.JSON:
        echo_json(json_value(rows))
    elif fmt is TableJsonOrMarkdown.MARKDOWN:
        typer.echo(feature.flaky_markdown(rows), nl=False)
    else:
        typer.echo(feature.flaky_text(rows, judged=bool(report.rows)), nl=False)
    typer.echo(report.counted(policy), err=True)
