"""`matrixgen quarantine audit` and `propose`: entries judged against the tree,
their trackers and the evidence."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.cli.common import (
    ApiUrlOption,
    RecipesOption,
    TableOrJson,
    TableOrJsonOption,
    echo_findings,
    echo_json,
    existing_recipes_dir,
    exits,
    option,
    usable_generation,
)
from matrixgen.cli.results import (
    BrokenRunsOption,
    DbOption,
    FlipRateOption,
    MinRunsOption,
    SinceOption,
    _policy,
    _t,
    note_ignored_store,
)
from matrixgen.model.errors import ExitCode, TrackerError, UsageError
from matrixgen.model.vocab import QUARANTINE_FILENAME
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import json_value
from matrixgen.util.words import counted
from matrixgen.views.table import table

if TYPE_CHECKING:
    from matrixgen.quarantine.audit import Audit
    from matrixgen.results.flaky import FlakyRow
    from matrixgen.results.propose import Proposal


@exits(
    ExitCode.OK,
    (ExitCode.FINDINGS, 'anything but "expiring" is found (or the recipes have errors)'),
    ExitCode.CONFIG,
    (
        ExitCode.TRACKER,
        "the tracker API answered with an error (after listing what was found without it)",
    ),
)
def audit(
    recipes: RecipesOption = None,
    days: Annotated[int, option("DAYS", "Report entries expiring within this many days.")] = 14,
    token: Annotated[str | None, _token("GitHub token for tracker state.")] = None,
    api_url: ApiUrlOption = None,
    tracker_base: Annotated[
        str | None, option("URL", "Where #N points (default: quarantine.tracker_base).")
    ] = None,
    db: DbOption = None,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Expired, expiring, ownerless, matching nothing, tracker closed. With a
    results store, each entry's evidence (its jobs' results of the last 30 days)
    follows."""
    from matrixgen.quarantine.audit import audit_quarantine
    from matrixgen.quarantine.tracker import DEFAULT_API_URL, check_api_url
    from matrixgen.results.summary import entry_evidence

    if days < 0:
        raise UsageError("--days must be 0 or more")
    api_root = check_api_url(api_url or DEFAULT_API_URL)
    root = existing_recipes_dir(recipes)
    generation = usable_generation(root)
    qfile = generation.quarantine
    echo_findings(qfile.findings)
    found = audit_quarantine(
        qfile,
        generation.jobs,
        generation.tree.config,
        days=days,
        token=token,
        api_url=api_root,
        tracker_base=tracker_base,
    )
    note_ignored_store(db)
    evidence = (
        entry_evidence(generation, found.entries, db=db, targets=found.targets)
        if found.entries
        else None
    )
    _echo_audit(found, evidence, fmt, days)
    if found.trackers.error is not None:
        raise TrackerError(found.trackers.error)
    # An entry the file's errors left out is audited by no one: a problem too.
    if found.failing or qfile.errors:
        raise typer.Exit(ExitCode.FINDINGS)


def _echo_audit(found: Audit, evidence: dict[str, Any] | None, fmt: TableOrJson, days: int) -> None:
    report, items = found.trackers, found.items
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "items": json_value(items),
                "tracker_states": dict(sorted(report.states.items())),
                "not_checked": dict(sorted(report.unchecked.items())),
                "tracker_error": report.error,
                **({"evidence": evidence} if evidence is not None else {}),
            }
        )
    else:
        rows = [[i.entry_id, i.problem, i.tracker, i.detail] for i in items]
        # All is well: said in words, not as a bare header.
        fine = (
            "no problems: no entry is expired, ownerless, matching nothing or with a closed "
            f"tracker, and none expires within {days} days"
        )
        typer.echo(table(rows, ["id", "problem", "tracker", "detail"], empty=fine), nl=False)
        if evidence is not None:
            typer.echo("")
            typer.echo(table([[k, v] for k, v in evidence.items()], ["id", "evidence"]), nl=False)
    for reason, count in sorted(Counter(report.unchecked.values()).items()):
        typer.echo(
            f"tracker state NOT checked for {counted(count, 'entry', 'entries')}: "
            f"{terminal_text(reason)}; a closed tracker there is not reported",
            err=True,
        )
    checked, failing = len(report.states), len(found.failing)
    if len(found.entries) == 1:
        entries = f"1 entry ({'its tracker' if checked else 'tracker not'} checked)"
    else:
        entries = f"{len(found.entries)} entries ({checked} of their trackers checked)"
    typer.echo(
        f"{entries}: {failing} problem(s), {len(items) - failing} expiring soon",
        err=True,
    )


def _token(text: str) -> Any:
    return option("TOKEN", text, envvar="GITHUB_TOKEN", show_envvar=True)


def propose(
    tracker: Annotated[
        str | None,
        option("TRACKER", 'Tracker of the drafts: an issue URL, or "#N" (needed for --write).'),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Add the drafts and apply the lifts.")
    ] = False,
    owner: Annotated[str | None, option("OWNER", "Owner when the recipe names no maintainers.")] = (
        None
    ),
    lift_runs: Annotated[
        int, option("N", "Lift entries whose jobs passed this many last runs.")
    ] = 10,
    since: SinceOption = 30,
    min_runs: MinRunsOption = 3,
    flip_rate: FlipRateOption = 0.1,
    broken_runs: BrokenRunsOption = 3,
    ref: Annotated[
        list[str] | None,
        option(
            "REF",
            "Judge lifts on the runs of this branch only (repeatable; default: main, "
            "the baseline ref): a run of an unreviewed branch never lifts an entry.",
        ),
    ] = None,
    token: Annotated[str | None, _token("GitHub token: lift closed trackers.")] = None,
    api_url: ApiUrlOption = None,
    db: DbOption = None,
    recipes: RecipesOption = None,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Draft entries for flaky and broken cases that have none, scoped to where the
    evidence is; propose lifting the entries the evidence clears. --write edits the
    quarantine file (safely, as `add` and `lift` do)."""
    from matrixgen.results.propose import proposal_from_store, write_proposal

    if lift_runs < 1:
        raise UsageError("--lift-runs must be 1 or more")
    if write and not tracker:
        raise UsageError("--write needs --tracker: every entry names its tracker")
    flaky_policy = _policy(since, min_runs, flip_rate, broken_runs)
    root = existing_recipes_dir(recipes)
    generation = usable_generation(root, selection=True)
    proposal = proposal_from_store(
        generation,
        db=db,
        flaky_policy=flaky_policy,
        tracker=tracker,
        owner=owner,
        lift_runs=lift_runs,
        token=token,
        api_url=api_url,
        lift_refs=_refs(ref),
    )
    path = root / QUARANTINE_FILENAME
    written = bool(write and (proposal.drafts or proposal.lifts))
    if written:
        write_proposal(path, proposal, generation.tree.config)
    if fmt is TableOrJson.JSON:
        echo_json({**json_value(proposal), "written": written})
    else:
        _echo_proposal(proposal, path)
    unchecked = proposal.trackers_unchecked
    if unchecked:
        typer.echo(
            f"tracker state not checked for {counted(unchecked, 'entry', 'entries')} "
            "(set GITHUB_TOKEN or pass --token): a closed tracker there is not proposed for a lift",
            err=True,
        )
    typer.echo(f"matrixgen: note: {_t(proposal.lift_evidence)}", err=True)
    if not tracker and proposal.drafts:
        typer.echo("the drafts name no tracker: pass --tracker (needed for --write)", err=True)
    done = f"wrote them to {path}" if written else "nothing written (pass --write to apply)"
    typer.echo(
        f"{len(proposal.drafts)} draft(s), {len(proposal.lifts)} lift(s), "
        f"{len(proposal.covered) + len(proposal.not_node_ids)} case(s) left out; {done}",
        err=True,
    )


def _refs(given: list[str] | None) -> tuple[str, ...]:
    """The --ref values, each once; main (the baseline ref) when none."""
    refs = tuple(dict.fromkeys(given or ["main"]))
    for value in refs:
        if not value.strip() or value != value.strip():
            raise UsageError(f"--ref {value!r}: expected a branch name without surrounding blanks")
    return refs


def _echo_proposal(proposal: Proposal, path: Path) -> None:
    from matrixgen.quarantine.render import render_entry

    typer.echo(f"# {counted(len(proposal.drafts), 'new entry', 'new entries')} for {path}")
    for d in proposal.drafts:
        for r in d.rows:
            typer.echo(f"# {r.verdict.value}: {_t(_case(r))}: {_t(r.evidence())}")
        typer.echo(render_entry(d.data, 0, 2, "\n"), nl=False)
    if proposal.lifts:
        typer.echo(f"\n# lifts ({len(proposal.lifts)}), {_t(proposal.lift_evidence)}")
        for lift in proposal.lifts:
            typer.echo(f"# {_t(lift.entry.id)} ({_t(lift.entry.tracker_ref)}): {_t(lift.reason)}")

    def left_out(row: FlakyRow, why: str) -> None:
        where = f"{_t(row.job.where)} ({row.job.place})"
        typer.echo(f"# left out: {row.verdict.value} {_t(_case(row))} on {where}: {why}")

    for c in proposal.covered:
        by = f"already quarantined by {_t(', '.join(c.by))}"
        left_out(c.row, by if c.by else "no job of the recipes runs it now")
    for entry_id, why in proposal.unjudged:
        typer.echo(f"# kept: {_t(entry_id)}: {_t(why)}")
    for r in proposal.not_node_ids:
        left_out(r, "not a pytest node id (path::name), so never drafted as a deselect")


def _case(row: FlakyRow) -> str:
    name = f"{row.job.model}/{row.job.test_case}" + (f"[{row.job.tag}]" if row.job.tag else "")
    return f"{name} {row.node_id}" if row.node_id else name
