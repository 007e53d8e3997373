"""`matrixgen quarantine add/remove/lift/list/audit` and `matrixgen migrate`.

Exit codes: 0 done; 1 audit found stale entries (or the recipes have errors);
2 a usage error (unknown id, a value no job has, ...); 3 bad project config;
7 the quarantine file is malformed, is not a regular file (a directory, FIFO,
device, a link out of the tree), or cannot be locked (MATRIXGEN_LOCK_TIMEOUT,
the holder named) or written (it is then left as it was); 8 the tracker API
answered with an error.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
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
    recipes_dir,
)
from matrixgen.cli.evidence import DbOption, note_ignored_store
from matrixgen.engine.errors import ExitCode, QuarantineError, UsageError, did_you_mean
from matrixgen.engine.vocab import (
    CONFIG_FILENAME,
    QUARANTINE_FILENAME,
    QuarantineAction,
    QuarantineKind,
)
from matrixgen.util.escape import terminal_text
from matrixgen.views.table import table

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.pipeline import Generation
    from matrixgen.quarantine.entries import Entry, Hit, QuarantineFile


def _root(recipes: Path | None) -> Path:
    root = recipes_dir(recipes)
    if not root.is_dir():
        raise UsageError(f"recipe directory not found: {root}")
    return root


def _config(root: Path) -> ProjectConfig:
    from matrixgen.documents.config import DEFAULT_CONFIG, parse_config
    from matrixgen.engine.load import read_root_file
    from matrixgen.engine.vocab import CONFIG_FILENAME

    raw = read_root_file(root, CONFIG_FILENAME)
    if raw is None:
        return DEFAULT_CONFIG
    return parse_config(raw, str(root / CONFIG_FILENAME))


def _read(root: Path, config: ProjectConfig) -> QuarantineFile:
    """The quarantine file, refused when malformed (exit 7)."""
    from matrixgen.quarantine.edit import read_checked
    from matrixgen.quarantine.entries import policy

    path = root / QUARANTINE_FILENAME
    try:
        return read_checked(path, tracker_base=policy(config).tracker_base)[1]
    except QuarantineError as exc:
        if not exc.findings:
            raise
        raise QuarantineError(
            f"{path} has {len(exc.findings)} error(s); fix them first "
            "(`matrixgen quarantine audit` still lists what it can read)",
            findings=exc.findings,
        ) from None


def _parse_date(text: str, what: str) -> dt.date:
    # fromisoformat alone also takes 20270101 and 2027-W01-1: not what the file holds.
    from matrixgen.util.patterns import name_pattern, whole

    try:
        if not whole(name_pattern(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), text.strip()):
            raise ValueError(text)
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f'{what} "{text}" is not a date: write YYYY-MM-DD') from None


def _check_text(values: Any, where: str = "") -> None:
    """Refuse a value the quarantine file cannot hold: the file is UTF-8, and an
    argument that is not valid UTF-8 reaches Python as lone surrogates."""
    if isinstance(values, dict):
        for key, value in values.items():
            _check_text(value, where or (key if key.startswith("--") else f"--{key}"))
    elif isinstance(values, list | tuple):
        for value in values:
            _check_text(value, where)
    elif isinstance(values, str) and any("\ud800" <= c <= "\udfff" for c in values):
        raise UsageError(f'{where} "{values}" is not valid UTF-8 text')


def _tracker_text(ref: str) -> str:
    ref = ref.strip()
    return f"#{ref}" if ref.isdigit() else ref


def _place_text(text: str) -> str:
    """Check one --scope value: `github/L1`, `gitlab/mr`, or a whole system."""
    system, sep, scope = text.partition("/")
    if system not in ("github", "gitlab") or (sep and not scope):
        hint = ""
        if not sep and system not in ("github", "gitlab"):
            from matrixgen.engine.targets import default_system

            hint = f" (did you mean {default_system(text).value}/{text}?)"
        raise UsageError(
            f'--scope "{text}": write SYSTEM/SCOPE, like github/L1 or gitlab/mr, '
            f"or a whole system (github, gitlab){hint}"
        )
    return text


def _generation(root: Path) -> Generation:
    from matrixgen.engine.errors import RecipeError
    from matrixgen.pipeline import generate

    generation = generate(root)
    errors = generation.expansion.errors
    if errors:
        raise RecipeError(
            f"{len(errors)} error(s) in {root}; fix them first (run `matrixgen validate`)",
            findings=errors,
        )
    return generation


def _new_entry_message(message: str) -> str:
    """A finding about the entry being added, without the file's vocabulary."""
    import re

    message = message.replace('entry "new-entry"', "the entry")
    return re.sub(r"^entries/0(/|: )", "", message)


def _job_line(job: Any) -> str:
    return f"{job.identity} [{job.shown_scope}]"


def _hits_by_target(hits: list[Hit]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for hit in hits:
        grouped.setdefault(hit.target.name, []).append(hit.job)
    return dict(sorted(grouped.items()))


# Said once by `quarantine add`: who reads the entry it writes.
HONOURED_BY = (
    "note: only pipelines that matrixgen generates honour this entry; Megatron-LM's own "
    "generate_jet_trigger_job.py reads no quarantine file (its CI honours it once it calls "
    "`matrixgen jet-trigger` instead)"
)


def add(
    test_case: Annotated[
        str,
        typer.Option("--test-case", metavar="NAME", help="Test case name, or a glob (*, ?, [..])."),
    ],
    tracker: Annotated[
        str, typer.Option(metavar="TRACKER", help='Issue URL, or "#N" (resolved by tracker_base).')
    ],
    kind: Annotated[QuarantineKind, typer.Option(help="Why: the reason taxonomy.")],
    action: Annotated[
        QuarantineAction, typer.Option(help="skip, allow-failure, deselect or mute.")
    ],
    reason: Annotated[str, typer.Option(metavar="TEXT", help="One line: what fails and how.")],
    owner: Annotated[
        str | None,
        typer.Option(
            metavar="OWNER",
            help="Who lifts it: a person or a team (default: quarantine.default_owner).",
        ),
    ] = None,
    recipes: RecipesOption = None,
    platform: Annotated[
        list[str] | None,
        typer.Option("--platform", metavar="PLATFORM", help="Only on this platform (repeatable)."),
    ] = None,
    environment: Annotated[
        list[str] | None,
        typer.Option("--environment", metavar="ENV", help="Only in this environment (repeatable)."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            metavar="SYSTEM/SCOPE",
            help="Only there: github/L1, gitlab/mr, or a whole system (repeatable; default: all).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(metavar="MODEL", help="Only this model's test case.")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", metavar="TAG", help="Only this tag (repeatable).")
    ] = None,
    node_id: Annotated[
        list[str] | None,
        typer.Option(
            "--node-id",
            metavar="NODE_ID",
            help="pytest node id to deselect or mute (repeatable).",
        ),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            metavar="YYYY-MM-DD", help="Expiry day (default: today + default_expiry_days)."
        ),
    ] = None,
    entry_id: Annotated[
        str | None, typer.Option("--id", metavar="ID", help="Entry id (default: derived).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what it would affect; write nothing.")
    ] = False,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Quarantine a test case: prints the jobs it affects per target, then the entry id."""
    from matrixgen.engine.targets import resolve_targets
    from matrixgen.quarantine.edit import edit, unique_id
    from matrixgen.quarantine.edit import entry_id as derive_id
    from matrixgen.quarantine.entries import current_day, entry_from_mapping, entry_hits, policy

    root = _root(recipes)
    generation = _generation(root)
    config = generation.tree.config
    pol = policy(config)
    if generation.quarantine.errors:
        raise QuarantineError(
            f"{generation.quarantine.path} has errors; fix them first, the file was not changed",
            findings=generation.quarantine.errors,
        )
    owner = owner if owner is not None else pol.default_owner
    if owner is None:
        raise UsageError(
            "--owner is needed: who lifts the entry (or set quarantine.default_owner in "
            f"{root / CONFIG_FILENAME})"
        )
    today = current_day()
    until = (
        _parse_date(expires, "--expires")
        if expires
        else today + dt.timedelta(days=pol.default_expiry_days)
    )
    if until < today:
        raise UsageError(f"--expires {until} is in the past")
    if action.node_level and not node_id:
        raise UsageError(f"--action {action.value} needs at least one --node-id")
    if node_id and not action.node_level:
        raise UsageError("--node-id only goes with --action deselect or --action mute")
    match: dict[str, Any] = {"test_case": test_case}
    if model:
        match["model"] = model
    for key, values in (("platforms", platform), ("environments", environment), ("tags", tag)):
        if values:
            match[key] = sorted(dict.fromkeys(values))
    data: dict[str, Any] = {
        "tracker": _tracker_text(tracker),
        "kind": kind.value,
        "action": action.value,
        "match": match,
        "where": sorted(dict.fromkeys(_place_text(s) for s in scope or ())),
        "node_ids": list(dict.fromkeys(node_id or ())),
        "owner": owner.strip(),
        "added": today,
        "expires": until,
        "reason": reason.strip(),
    }
    data = {k: v for k, v in data.items() if v not in ([], "")}
    _check_text({"--id": entry_id, **data})
    entry, findings = entry_from_mapping(
        {"id": entry_id or "new-entry", **data}, tracker_base=pol.tracker_base
    )
    if entry is None or findings:
        raise UsageError(
            "the entry is not valid: "
            + ("; ".join(_new_entry_message(f.message) for f in findings) or "invalid")
        )
    jobs = generation.jobs
    targets = resolve_targets(config, jobs)
    from matrixgen.quarantine.entries import QuarantineFile, check_entries

    problems = [
        f
        for f in check_entries(
            QuarantineFile(path="new entry", present=True, entries=(entry,)), jobs, targets, config
        )
        if f.code in ("quarantine-unknown", "quarantine-matches-nothing")
    ]
    if problems:
        raise UsageError("; ".join(_new_entry_message(f.message) for f in problems))
    if entry.action.node_level:
        from matrixgen.emit.generate import unreached

        existing = [e for e in generation.quarantine.entries if e.id != entry.id]
        blocked = [
            u for u in unreached([*existing, entry], jobs, targets, config) if u.entry is entry
        ]
        if blocked:
            names = ", ".join(sorted({u.target.name for u in blocked}))
            raise UsageError(
                f"the entry cannot reach the tests of target(s) {names} "
                f"({blocked[0].job.identity}): {blocked[0].why}"
            )
    hits = entry_hits(jobs, [entry], targets)[entry.id]
    grouped = _hits_by_target(hits)
    _note_overlaps(hits, generation.quarantine.entries, {j.test_case for j in jobs})
    if entry.tracker_url is None:
        typer.echo(
            f"note: {terminal_text(entry.tracker)} cannot be linked: set "
            f"quarantine.tracker_base in {terminal_text(root / CONFIG_FILENAME)} (in a tree "
            "without vocabulary, `quarantine: {tracker_base: "
            "https://github.com/OWNER/REPO/issues/}` is a whole config)",
            err=True,
        )

    chosen: dict[str, str] = {}

    def change(qfile: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        taken = {e.id for e in qfile.entries}
        if entry_id:
            if entry_id in taken:
                raise UsageError(f'an entry with id "{entry_id}" exists already')
            chosen["id"] = entry_id
        else:
            wanted = derive_id(data)
            existing = qfile.by_id(wanted)
            if existing is not None:
                raise UsageError(
                    f'entry "{wanted}" quarantines the same jobs with the same tracker already'
                )
            chosen["id"] = unique_id(wanted, taken)
        return [{"id": chosen["id"], **data}], []

    path = root / QUARANTINE_FILENAME
    edit(path, change, tracker_base=pol.tracker_base, dry_run=dry_run)
    typer.echo(HONOURED_BY, err=True)
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "id": chosen["id"],
                "written": not dry_run,
                "file": str(path),
                "entry": {**entry.to_dict(), "id": chosen["id"]},
                "targets": [
                    {"target": name, "jobs": [j.to_dict() for j in jobs]}
                    for name, jobs in grouped.items()
                ],
            }
        )
    else:
        verb = {
            "skip": "skips",
            "allow-failure": "lets fail",
            "deselect": "deselects in",
            "mute": "mutes in",
        }[action.value]
        for name, target_jobs in grouped.items():
            typer.echo(f"{terminal_text(name)}: {verb} {len(target_jobs)} job(s)")
            for job in target_jobs:
                typer.echo(f"  {terminal_text(_job_line(job))}")
        typer.echo(terminal_text(chosen["id"]))
    done = "dry run: nothing written to" if dry_run else "added to"
    typer.echo(
        f"entry {terminal_text(chosen['id'])} ({len(hits)} job(s) in {len(grouped)} target(s)) "
        f"{done} {terminal_text(path)}",
        err=True,
    )


def _note_overlaps(hits: list[Hit], existing: Sequence[Entry], known: set[str]) -> None:
    """Say which existing entries already apply to jobs the new entry affects:
    the strongest action decides, so the new entry may change nothing there."""
    from matrixgen.quarantine.entries import applying_entries

    already: dict[str, int] = {}
    for hit in hits:
        for other in applying_entries(hit.job, existing, hit.target, known):
            already[other.id] = already.get(other.id, 0) + 1
    for other_id, count in sorted(already.items()):
        typer.echo(
            f"note: entry {terminal_text(other_id)} already applies to {count} of these job(s) "
            "in their "
            "target(s); where two entries apply, skip beats allow-failure beats deselect",
            err=True,
        )


def remove(
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The entry to remove.")],
    recipes: RecipesOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing.")] = False,
) -> None:
    """Remove one entry by id."""
    from matrixgen.quarantine.edit import edit
    from matrixgen.quarantine.entries import policy

    root = _root(recipes)
    base = policy(_config(root)).tracker_base

    def change(qfile: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        entry = qfile.by_id(entry_id)
        if entry is None:
            known = [e.id for e in qfile.entries]
            raise UsageError(
                f'no quarantine entry has id "{entry_id}"{did_you_mean(entry_id, known)}'
            )
        return [], [entry.index]

    path = root / QUARANTINE_FILENAME
    if not os.path.lexists(path):
        raise UsageError(f"{path} does not exist: there is nothing to remove")
    edit(path, change, tracker_base=base, dry_run=dry_run)
    typer.echo(terminal_text(entry_id))
    typer.echo(
        f"{'would remove' if dry_run else 'removed'} entry {terminal_text(entry_id)} from "
        f"{terminal_text(path)}",
        err=True,
    )


def lift(
    tracker: Annotated[str, typer.Option(metavar="TRACKER", help='The tracker: URL, "#N" or N.')],
    recipes: RecipesOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing.")] = False,
) -> None:
    """Remove every entry of one tracker (it was resolved): prints their ids."""
    from matrixgen.quarantine.edit import edit
    from matrixgen.quarantine.entries import entries_tracked_by, policy

    root = _root(recipes)
    base = policy(_config(root)).tracker_base
    ref = _tracker_text(tracker)
    lifted: list[Entry] = []

    def change(qfile: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        try:
            found = entries_tracked_by(qfile.entries, ref, base)
        except ValueError as exc:
            raise UsageError(f"{exc}; give the URL") from None
        if not found:
            trackers = sorted({e.tracker for e in qfile.entries})
            raise UsageError(
                f"no quarantine entry is tracked by {ref}{did_you_mean(ref, trackers)}"
            )
        lifted.extend(found)
        return [], [e.index for e in found]

    path = root / QUARANTINE_FILENAME
    if not os.path.lexists(path):
        raise UsageError(f"{path} does not exist: there is nothing to lift")
    edit(path, change, tracker_base=base, dry_run=dry_run)
    for entry in lifted:
        typer.echo(terminal_text(entry.id))
    verb = "would lift" if dry_run else "lifted"
    typer.echo(
        f"{verb} {len(lifted)} entr{'y' if len(lifted) == 1 else 'ies'} of {terminal_text(ref)}",
        err=True,
    )


def list_entries(
    recipes: RecipesOption = None,
    tracker: Annotated[
        str | None,
        typer.Option(metavar="TRACKER", help='Only entries of this tracker: URL, "#N" or N.'),
    ] = None,
    owner: Annotated[
        str | None, typer.Option(metavar="OWNER", help="Only entries of this owner.")
    ] = None,
    kind: Annotated[QuarantineKind | None, typer.Option(help="Only entries of this kind.")] = None,
    action: Annotated[
        QuarantineAction | None, typer.Option(help="Only entries with this action.")
    ] = None,
    platform: Annotated[
        str | None,
        typer.Option(
            metavar="PLATFORM",
            help="Only entries that can apply on this platform (they list it, or list none).",
        ),
    ] = None,
    expired: Annotated[
        bool,
        typer.Option(
            "--expired",
            help="Only expired entries (judged against today, or $MATRIXGEN_TODAY).",
        ),
    ] = False,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """List the entries of the quarantine file: what each one matches (test
    case, model, tags, platforms, environments) and where it applies
    (system/scope), with its tracker, owner and expiry. The filters combine."""
    from matrixgen.quarantine.entries import current_day, policy
    from matrixgen.quarantine.listing import EntryFilter, entry_row, filter_entries

    root = _root(recipes)
    config = _config(root)
    qfile = _read(root, config)
    if platform is not None:  # a typo would list no entry, and say nothing
        from matrixgen.engine.select import check_values

        check_values("--platform", "platform", [platform], config, _generation(root).jobs)
    wanted = EntryFilter(
        tracker=_tracker_text(tracker) if tracker is not None else None,
        owner=owner,
        kind=kind,
        action=action,
        platform=platform,
        expired_before=current_day() if expired else None,
    )
    try:
        entries = filter_entries(qfile.entries, wanted, tracker_base=policy(config).tracker_base)
    except ValueError as exc:
        raise UsageError(f"--tracker {tracker}: {exc}; give the URL") from None
    if fmt is TableOrJson.JSON:
        echo_json([e.to_dict() for e in entries])
    else:
        rows = [list(entry_row(e).values()) for e in entries]
        headers = [
            "id",
            "action",
            "kind",
            "tracker",
            "matches",
            "platforms",
            "environments",
            "where",
            "owner",
            "expires",
        ]
        typer.echo(table(rows, headers), nl=False)
    shown = len(entries)
    total = len(qfile.entries)
    of = f" of {total}" if shown != total else ""
    typer.echo(f"{shown}{of} entr{'y' if total == 1 else 'ies'}", err=True)


def audit(
    recipes: RecipesOption = None,
    days: Annotated[
        int, typer.Option(metavar="DAYS", help="Report entries expiring within this many days.")
    ] = 14,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="GITHUB_TOKEN",
            show_envvar=True,
            metavar="TOKEN",
            help="GitHub token for tracker state.",
        ),
    ] = None,
    api_url: ApiUrlOption = None,
    tracker_base: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Where #N points (default: quarantine.tracker_base)."),
    ] = None,
    db: DbOption = None,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Expired, expiring, ownerless, matching nothing, tracker closed. Exit 1 when
    anything but "expiring" is found; 8 when the tracker API fails (after listing
    what was found without it). With a results store, each entry's evidence
    (its jobs' results of the last 30 days) follows."""
    from msgspec.structs import replace

    from matrixgen.engine.targets import resolve_targets
    from matrixgen.quarantine.entries import (
        FAILING_PROBLEMS,
        QuarantineFile,
        audit_entries,
        current_day,
        entry_hits,
        policy,
        resolve_tracker,
    )
    from matrixgen.quarantine.tracker import DEFAULT_API_URL, check_api_url, check_trackers

    if days < 0:
        raise UsageError("--days must be 0 or more")
    api_root = check_api_url(api_url or DEFAULT_API_URL)
    root = _root(recipes)
    generation = _generation(root)
    config = generation.tree.config
    pol = policy(config)
    qfile = generation.quarantine
    if qfile.findings:
        echo_findings(qfile.findings)
    if qfile.present and qfile.document is None and qfile.errors:
        raise QuarantineError(f"{qfile.path} cannot be read", findings=qfile.errors)
    entries = qfile.entries
    base = tracker_base or pol.tracker_base
    if tracker_base:
        entries = tuple(
            replace(e, tracker_url=e.tracker_url or resolve_tracker(e.tracker, base))
            for e in entries
        )
        qfile = QuarantineFile(
            path=qfile.path, present=True, entries=entries, document=qfile.document
        )
    targets = resolve_targets(config, generation.jobs)
    hits = entry_hits(generation.jobs, entries, targets)
    report = check_trackers(
        [(e.id, e.tracker_url) for e in entries if e.tracker],
        token=token,
        api_url=api_root,
    )
    items = audit_entries(qfile, hits, today=current_day(), days=days, tracker_states=report.states)
    from matrixgen.evidence.summary import entry_evidence

    note_ignored_store(db)
    evidence = entry_evidence(generation, entries, db=db, targets=targets) if entries else None
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "items": [i.to_dict() for i in items],
                "tracker_states": dict(sorted(report.states.items())),
                "not_checked": dict(sorted(report.unchecked.items())),
                "tracker_error": report.error,
                **({"evidence": evidence} if evidence is not None else {}),
            }
        )
    else:
        rows = [[i.entry_id, i.problem, i.tracker, i.detail] for i in items]
        typer.echo(table(rows, ["id", "problem", "tracker", "detail"]), nl=False)
        if evidence is not None:
            typer.echo("")
            typer.echo(table([[k, v] for k, v in evidence.items()], ["id", "evidence"]), nl=False)
    if report.unchecked:
        reasons: dict[str, int] = {}
        for reason in report.unchecked.values():
            reasons[reason] = reasons.get(reason, 0) + 1
        for reason, count in sorted(reasons.items()):
            typer.echo(
                f"tracker state NOT checked for {count} entr{'y' if count == 1 else 'ies'}: "
                f"{terminal_text(reason)}; a closed tracker there is not reported",
                err=True,
            )
    checked = len(report.states)
    failing = [i for i in items if i.problem in FAILING_PROBLEMS]
    if len(entries) == 1:
        counted = f"1 entry ({'its tracker' if checked else 'tracker not'} checked)"
    else:
        counted = f"{len(entries)} entries ({checked} of their trackers checked)"
    typer.echo(
        f"{counted}: {len(failing)} problem(s), {len(items) - len(failing)} expiring soon",
        err=True,
    )
    if report.error is not None:
        from matrixgen.engine.errors import TrackerError

        raise TrackerError(report.error)
    if failing:
        raise typer.Exit(ExitCode.FINDINGS)


def migrate(
    recipes: RecipesOption = None,
    write: Annotated[bool, typer.Option("--write", help="Apply the edits and add the entries.")] = (
        False
    ),
    default_tracker: Annotated[
        str | None,
        typer.Option(
            metavar="TRACKER",
            help="Tracker for habits whose comments name none (an umbrella issue).",
        ),
    ] = None,
    owner: Annotated[
        str | None,
        typer.Option(
            metavar="OWNER", help="Owner of the entries (default: the file's maintainers)."
        ),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            metavar="YYYY-MM-DD", help="Expiry day (default: today + default_expiry_days)."
        ),
    ] = None,
    for_matrixgen: Annotated[
        bool,
        typer.Option(
            "--for-matrixgen-pipelines",
            help="Write even though Megatron-LM's own parser, which reads no quarantine "
            "file, would select the restored jobs again: every pipeline of this tree is "
            "generated by matrixgen (for Megatron-LM's CI: `matrixgen jet-trigger`).",
        ),
    ] = False,
    fmt: Annotated[TableOrJson, typer.Option("--format", help="table (text) or json.")] = (
        TableOrJson.TABLE
    ),
) -> None:
    """Turn Megatron-LM quarantine habits (scopes *-broken, *-temp-disabled, flaky,
    commented-out rows naming a tracker) into quarantine entries, keeping every
    real target's selection in the pipelines matrixgen generates. Prints the plan;
    --write applies it. On a format_version 1 tree the plan counts, per target,
    the jobs Megatron-LM's own parser would select again; while there are any,
    --write needs --for-matrixgen-pipelines (else exit 2)."""
    import difflib

    from matrixgen.migrate import plan_migration, write_migration
    from matrixgen.quarantine.edit import render_entry
    from matrixgen.quarantine.entries import current_day

    root = _root(recipes)
    until = _parse_date(expires, "--expires") if expires else None
    # Said once here, rather than as a reason on every habit left alone.
    if until is not None and until < current_day():
        raise UsageError(f"--expires {until} is in the past")
    if default_tracker is not None:
        from matrixgen.quarantine.entries import resolve_tracker

        ref = _tracker_text(default_tracker)
        if resolve_tracker(ref, "https://tracker.invalid/") is None:  # "#N" or a URL
            raise UsageError(f'--default-tracker "{default_tracker}": give an issue URL, N or #N')
    migration = plan_migration(
        root,
        default_tracker=_tracker_text(default_tracker) if default_tracker else None,
        owner=owner,
        expires=until,
    )
    summary = migration.summary()
    if write and migration.parser_added and not for_matrixgen:
        raise UsageError(_parser_refusal(migration))
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "entries": [
                    {
                        **{
                            k: (v.isoformat() if isinstance(v, dt.date) else v)
                            for k, v in e.items()
                        },
                        "from": c.describe,
                        "habit": c.habit,
                    }
                    for c, es in migration.changes
                    for e in es
                ],
                "edits": [c.describe for c, _ in migration.changes],
                "left_alone": [x.to_dict() for x in migration.left_alone],
                "parser_changes": [c.to_dict() for c in migration.parser_changes],
                "summary": summary,
                "written": write,
            }
        )
    else:
        typer.echo(
            f"# {len(migration.entries)} quarantine entries for "
            f"{terminal_text(root / QUARANTINE_FILENAME)}"
        )
        for candidate, entries in migration.changes:
            typer.echo(f"# from {terminal_text(candidate.describe)} ({candidate.habit})")
            for entry in entries:
                typer.echo(render_entry(entry, 0, 2, "\n"), nl=False)
        typer.echo(f"\n# recipe edits ({len(migration.changed_files)} file(s))")
        for rel in migration.changed_files:
            before = migration.files_before[rel].decode("utf-8-sig").splitlines()
            after = migration.files_after[rel].decode("utf-8-sig").splitlines()
            for line in difflib.unified_diff(
                before, after, f"a/{rel}", f"b/{rel}", lineterm="", n=0
            ):
                typer.echo(line)
        if migration.left_alone:
            typer.echo(f"\n# left as they are ({len(migration.left_alone)})")
            for item in migration.left_alone:
                typer.echo(f"# {terminal_text(item)}")
        if migration.parser_changes:
            typer.echo(
                f"\n# Megatron-LM's own parser reads no quarantine file: it would select "
                f"{migration.parser_added} more job(s) ({len(migration.parser_changes)} target(s))"
            )
            for c in migration.parser_changes:
                typer.echo(
                    f"# {terminal_text(c.target)}: {c.before} -> {c.after} job(s) (+{c.added})"
                )
    habits = ", ".join(f"{n} from {h}" for h, n in summary["entries_by_habit"].items()) or "none"
    typer.echo(
        f"{summary['entries']} entries ({habits}); {len(migration.left_alone)} habit(s) left as "
        f"they are; {summary['commented_out_without_tracker']} commented-out row(s) name no "
        "tracker (not quarantines, untouched)",
        err=True,
    )
    parser = (
        f"; Megatron-LM's own parser would select {migration.parser_added} more job(s) in "
        f"{len(migration.parser_changes)} target(s)"
        if migration.parser_added
        else ""
    )
    if write:
        write_migration(migration)
        where = " in the pipelines matrixgen generates" if parser else ""
        typer.echo(
            f"wrote {len(migration.entries)} entries and {len(migration.changed_files)} recipe "
            f"file(s); every real target selects the same jobs as before{where}{parser}",
            err=True,
        )
    elif parser:
        typer.echo(
            f"nothing written{parser}: pass --write --for-matrixgen-pipelines to apply",
            err=True,
        )
    else:
        typer.echo("nothing written (pass --write to apply)", err=True)


def _parser_refusal(migration: Any) -> str:
    """Why --write needs --for-matrixgen-pipelines: the jobs that would come back."""
    changes = migration.parser_changes
    shown = ", ".join(f"{c.target} {c.before} -> {c.after}" for c in changes[:4])
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return (
        f"--write: Megatron-LM's own parser reads no quarantine file, so it would select "
        f"{migration.parser_added} more job(s) once the habits are gone ({terminal_text(shown)}"
        f"{more}; run without --write to see each target). Pass --for-matrixgen-pipelines "
        "when matrixgen generates every pipeline of this tree (for Megatron-LM's CI: "
        "`matrixgen jet-trigger` in place of generate_jet_trigger_job.py); nothing was written"
    )


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="quarantine",
        help="Tracker-linked quarantine entries: add, remove, lift, list, audit.",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )
    group.command("add")(add)
    group.command("remove")(remove)
    group.command("lift")(lift)
    group.command("list")(list_entries)
    group.command("audit")(audit)
    from matrixgen.cli.evidence import propose

    group.command("propose")(propose)
    app.add_typer(group, name="quarantine")
    app.command("migrate")(migrate)
