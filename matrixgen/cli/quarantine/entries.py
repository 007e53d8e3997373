"""`matrixgen quarantine add`, `remove`, `lift` and `list`: the entries of the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from matrixgen.cli.common import (
    ExpiresOption,
    OwnerOption,
    RecipesOption,
    TableOrJson,
    TableOrJsonOption,
    echo_json,
    existing_recipes_dir,
    exits,
    option,
    usable_generation,
)
from matrixgen.model.errors import ExitCode, UsageError, did_you_mean
from matrixgen.model.vocab import CONFIG_FILENAME, QuarantineAction, QuarantineKind
from matrixgen.quarantine.trackers import tracker_text
from matrixgen.systems import assumed_first, example_places
from matrixgen.util.escape import terminal_text
from matrixgen.util.values import json_value
from matrixgen.util.words import counted
from matrixgen.views.table import table

if TYPE_CHECKING:
    from matrixgen.entries.add import NewEntry
    from matrixgen.quarantine.model import Entry, QuarantineFile
    from matrixgen.quarantine.project import Project


# Megatron-LM's own pipeline generator, which reads no quarantine file.
GENERATOR = "generate_jet_trigger_job.py"


EDIT_EXITS = (
    ExitCode.OK,
    (ExitCode.USAGE, "usage error (unknown id, a value no job has, ...)"),
    ExitCode.CONFIG,
    (
        ExitCode.QUARANTINE,
        "the quarantine file is malformed, is not a regular file (a directory, FIFO, device, a "
        "link out of the tree), or cannot be locked (MATRIXGEN_LOCK_TIMEOUT, the holder named) or "
        "written (it is then left as it was)",
    ),
)


def honoured_by(root: Path) -> str | None:
    """A note when CI files of the checkout holding the tree still call the
    generator, which reads no entry (None: none does, or no checkout)."""
    from matrixgen.util.checkout import checkout_top

    top = checkout_top(root)
    if top is None:
        return None
    callers = []
    # Each system's CI files, the one assumed outside any CI first.
    for path in (p for h in assumed_first() for g in h.ci_files for p in sorted(top.glob(g))):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if GENERATOR in text.replace(f"# {GENERATOR}", ""):
            callers.append(path.relative_to(top).as_posix())
    if not callers:
        return None
    more = f" and {len(callers) - 1} other CI file(s)" if len(callers) > 1 else ""
    return (
        f"note: {callers[0]}{more} still call Megatron-LM's {GENERATOR}, which reads no "
        "quarantine file: this entry applies to their pipelines once they call "
        "`matrixgen jet-trigger` instead (docs/megatron.md)"
    )


_VERBS = {
    "skip": "skips",
    "allow-failure": "lets fail",
    "deselect": "deselects in",
    "mute": "mutes in",
}


@exits(*EDIT_EXITS)
def add(
    test_case: Annotated[
        list[str],
        option(
            "NAME", "Test case name, or a glob (*, ?, [..]); repeatable: one entry covers them all."
        ),
    ],
    tracker: Annotated[str, option("TRACKER", 'Issue URL, or "#N" (resolved by tracker_base).')],
    kind: Annotated[QuarantineKind, typer.Option(help="Why: the reason taxonomy.")],
    action: Annotated[
        QuarantineAction, typer.Option(help="skip, allow-failure, deselect or mute.")
    ],
    reason: Annotated[str, option("TEXT", "One line: what fails and how.")],
    owner: OwnerOption = None,
    recipes: RecipesOption = None,
    platform: Annotated[
        list[str] | None, option("PLATFORM", "Only on this platform (repeatable).")
    ] = None,
    environment: Annotated[
        list[str] | None, option("ENV", "Only in this environment (repeatable).")
    ] = None,
    scope: Annotated[
        list[str] | None,
        option(
            "SYSTEM/SCOPE",
            f"Only there: {', '.join(example_places())}, or a whole system "
            "(repeatable; default: all).",
        ),
    ] = None,
    model: Annotated[str | None, option("MODEL", "Only this model's test case.")] = None,
    tag: Annotated[list[str] | None, option("TAG", "Only this tag (repeatable).")] = None,
    node_id: Annotated[
        list[str] | None, option("NODE_ID", "pytest node id to deselect or mute (repeatable).")
    ] = None,
    expires: ExpiresOption = None,
    entry_id: Annotated[str | None, option("ID", "Entry id (default: derived).", "--id")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what it would affect; write nothing.")
    ] = False,
    fmt: TableOrJsonOption = TableOrJson.TABLE,
) -> None:
    """Quarantine a test case: prints the jobs it affects per target, then the entry id."""
    from matrixgen.entries.add import EntryRequest, new_entry, write_entry

    root = existing_recipes_dir(recipes)
    generation = usable_generation(root)
    request = EntryRequest(
        test_cases=test_case,
        tracker=tracker,
        kind=kind,
        action=action,
        reason=reason,
        owner=owner,
        model=model,
        platforms=platform or (),
        environments=environment or (),
        tags=tag or (),
        scopes=scope or (),
        node_ids=node_id or (),
        expires=expires,
        entry_id=entry_id,
    )
    new = new_entry(generation, request, config_path=root / CONFIG_FILENAME)
    for other_id, count in new.already:
        typer.echo(
            f"note: entry {terminal_text(other_id)} already applies to {count} of these job(s) "
            "in their target(s); where two entries apply, skip beats allow-failure beats deselect",
            err=True,
        )
    if new.entry.tracker_url is None:
        typer.echo(
            f"note: {terminal_text(new.entry.tracker)} cannot be linked: set "
            f"quarantine.tracker_base in {terminal_text(root / CONFIG_FILENAME)} (in a tree "
            "without vocabulary, `quarantine: {tracker_base: "
            "https://github.com/OWNER/REPO/issues/}` is a whole config)",
            err=True,
        )
    from matrixgen.quarantine.project import Project

    project = Project(root, generation.tree.config)  # the config the generation read
    write_entry(project, new, dry_run=dry_run)
    note = honoured_by(root)
    if note is not None:
        typer.echo(terminal_text(note), err=True)
    _echo_added(new, project.quarantine_path, fmt=fmt, dry_run=dry_run)


def _echo_added(new: NewEntry, path: Path, *, fmt: TableOrJson, dry_run: bool) -> None:
    grouped, chosen = new.by_target, new.entry.id
    if fmt is TableOrJson.JSON:
        echo_json(
            {
                "id": chosen,
                "written": not dry_run,
                "file": str(path),
                "entry": json_value(new.entry),
                "targets": [
                    {"target": name, "jobs": [json_value(j) for j in jobs]}
                    for name, jobs in grouped.items()
                ],
            }
        )
    else:
        verb = _VERBS[new.entry.action.value]
        for name, target_jobs in grouped.items():
            typer.echo(f"{terminal_text(name)}: {verb} {counted(len(target_jobs), 'job')}")
            for job in target_jobs:
                typer.echo(f"  {terminal_text(f'{job.identity} [{job.shown_scope}]')}")
        typer.echo(terminal_text(chosen))
    done = "dry run: nothing written to" if dry_run else "added to"
    cases = counted(len({h.job.identity for h in new.hits}), "case")
    reach = f"{cases}, {counted(len(new.hits), 'job')} in {counted(len(grouped), 'target')}"
    typer.echo(f"entry {terminal_text(chosen)} ({reach}) {done} {terminal_text(path)}", err=True)


def _existing_file(recipes: Path | None, verb: str) -> tuple[Project, str | None]:
    """The tree's project, whose quarantine file must exist, and its tracker base."""
    from matrixgen.quarantine.policy import policy
    from matrixgen.quarantine.project import open_project

    project = open_project(existing_recipes_dir(recipes))
    path = project.quarantine_path
    if not os.path.lexists(path):
        raise UsageError(f"{path} does not exist: there is nothing to {verb}")
    return project, policy(project.config).tracker_base


@exits(*EDIT_EXITS)
def remove(
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The entry to remove.")],
    recipes: RecipesOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing.")] = False,
) -> None:
    """Remove one entry by id."""
    project, _ = _existing_file(recipes, "remove")
    path = project.quarantine_path

    def change(qfile: QuarantineFile) -> tuple[list[dict[str, Any]], list[int]]:
        entry = qfile.by_id(entry_id)
        if entry is None:
            known = [e.id for e in qfile.entries]
            raise UsageError(
                f'no quarantine entry has id "{entry_id}"{did_you_mean(entry_id, known)}'
            )
        return [], [entry.index]

    project.edit(change, dry_run=dry_run)
    typer.echo(terminal_text(entry_id))
    typer.echo(
        f"{'would remove' if dry_run else 'removed'} entry {terminal_text(entry_id)} from "
        f"{terminal_text(path)}",
        err=True,
    )


@exits(*EDIT_EXITS)
def lift(
    tracker: Annotated[str, option("TRACKER", 'The tracker: URL, "#N" or N.')],
    recipes: RecipesOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing.")] = False,
) -> None:
    """Remove every entry of one tracker (it was resolved): prints their ids."""
    from matrixgen.quarantine.model import entries_tracked_by

    project, base = _existing_file(recipes, "lift")
    ref = tracker_text(tracker)
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

    project.edit(change, dry_run=dry_run)
    for entry in lifted:
        typer.echo(terminal_text(entry.id))
    verb = "would lift" if dry_run else "lifted"
    typer.echo(
        f"{verb} {counted(len(lifted), 'entry', 'entries')} of {terminal_text(ref)}", err=True
    )


@exits(*EDIT_EXITS)
def list_entries(
    recipes: RecipesOption = None,
    tracker: Annotated[
        str | None, option("TRACKER", 'Only entries of this tracker: URL, "#N" or N.')
    ] = None,
    owner: Annotated[str | None, option("OWNER", "Only entries of this owner.")] = None,
    kind: Annotated[QuarantineKind | None, typer.Option(help="Only entries of this kind.")] = None,
    action: Annotated[
        QuarantineAction | None, typer.Option(help="Only entries with this action.")
    ] = None,
    platform: Annotated[
        str | None,
        option(
            "PLATFORM", "Only entries that can apply on this platform (they list it, or list none)."
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
    from matrixgen.entries.listing import EntryFilter, entry_row, filter_entries
    from matrixgen.quarantine.policy import current_day, policy
    from matrixgen.quarantine.project import open_project

    root = existing_recipes_dir(recipes)
    project = open_project(root)
    config, path, qfile = project.config, project.quarantine_path, project.quarantine
    base = policy(config).tracker_base
    qfile.refuse_errors(
        f"{path} has {len(qfile.errors)} error(s); fix them first "
        "(`matrixgen quarantine audit` still lists what it can read)"
    )
    if platform is not None:  # a typo would list no entry, and say nothing
        from matrixgen.engine.select import check_values

        check_values("--platform", "platform", [platform], config, usable_generation(root).jobs)
    wanted = EntryFilter(
        tracker=tracker_text(tracker) if tracker is not None else None,
        owner=owner,
        kind=kind,
        action=action,
        platform=platform,
        expired_before=current_day() if expired else None,
    )
    try:
        entries = filter_entries(qfile.entries, wanted, tracker_base=base)
    except ValueError as exc:
        raise UsageError(f"--tracker {tracker}: {exc}; give the URL") from None
    if fmt is TableOrJson.JSON:
        echo_json([json_value(e) for e in entries])
    else:
        rows = [entry_row(e) for e in entries]
        headers = list(rows[0]) if rows else []  # no row: the table is the `empty` line
        cells = [list(row.values()) for row in rows]
        typer.echo(table(cells, headers, empty="no entries match"), nl=False)
    shown = len(entries)
    total = len(qfile.entries)
    of = f" of {total}" if shown != total else ""
    typer.echo(f"{shown}{of} entr{'y' if total == 1 else 'ies'}", err=True)
