"""The checks `validate` runs on what the emitters would write: GitLab job names,
node-level quarantine entries that cannot reach their tests, one job defined
twice, and timeouts past a system's cap."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import (
    EmitSettings,
    Unreachable,
    node_route,
    timeout_minutes,
)
from matrixgen.emit.registry import emitter_for, resolve_settings
from matrixgen.engine.select import matches, select
from matrixgen.model.errors import Finding, MatrixgenError, Severity, finding
from matrixgen.model.jobs import Job, Target
from matrixgen.quarantine.apply import apply_quarantine, applying_entries
from matrixgen.quarantine.model import Entry, load_quarantine

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext


def check_gitlab_names(context: ValidationContext) -> Iterator[Finding]:
    """validate: jobs a GitLab target's child pipeline could not name (two jobs
    left with one name, or a name past 255 characters): `generate` would refuse."""
    generation = context.generation  # shares the selections
    severity = Severity.ERROR if context.tree.format_version == 2 else Severity.WARNING
    found: dict[tuple[Any, str], list[str]] = {}
    for target in context.targets:
        emitter = emitter_for(target.system)
        if not emitter.names_jobs:
            continue
        # The kept jobs are the emitted ones; naming does not depend on their order.
        jobs = generation.selection(target).jobs
        for job, why in emitter.name_problems(jobs):
            found.setdefault((target.system.value, job.source, why), []).append(target.name)
    for (system, location, why), names in sorted(found.items()):
        yield finding(location, f"{system}-job-name", f"{why} (target {_first(names)})", severity)


UNREACHABLE = "quarantine-unreachable"  # the code of check_node_routes' findings


class Unreached(Struct, frozen=True):
    entry: Entry
    target: Target
    job: Job
    why: str


def unreached(
    entries: Sequence[Entry], jobs: Sequence[Job], targets: Sequence[Target], config: ProjectConfig
) -> list[Unreached]:
    """Every node-level entry that applies to a job of a target but cannot reach
    its tests (`common.node_route`), in target and job order."""
    if not any(e.action.node_level for e in entries):
        return []
    known = {j.test_case for j in jobs}
    found: list[Unreached] = []
    for target in targets:
        chosen = select(jobs, target.selector)
        kept, _ = apply_quarantine(chosen, entries, target, known_test_cases=known)
        marked = [j for j in kept if j.quarantine and j.quarantine.node_ids]
        if not marked:
            continue
        try:
            settings = resolve_settings(target, config, marked)
        except MatrixgenError:
            continue  # the settings' own check reports it
        emitter = emitter_for(target.system)
        for job in marked:
            try:
                node_route(job, launcher=emitter.launcher(job, settings))
            except Unreachable as exc:
                for entry in applying_entries(job, entries, target, known):
                    if entry.action.node_level:
                        found.append(Unreached(entry, target, job, str(exc)))
    return found


def check_node_routes(context: ValidationContext) -> Iterator[Finding]:
    """validate: what `generate` would refuse of `unreached`, once per entry and
    target, at the entry's action."""
    qfile = load_quarantine(context.tree)
    found: dict[tuple[str, str], list[Unreached]] = {}
    for item in unreached(
        qfile.entries, context.expansion.jobs, context.targets, context.tree.config
    ):
        found.setdefault((item.entry.id, item.target.name), []).append(item)
    for (entry_id, target_name), items in sorted(found.items()):
        entry = items[0].entry
        more = f" and {len(items) - 1} more job(s)" if len(items) > 1 else ""
        location = (
            qfile.document.locate(["entries", entry.index, "action"])
            if qfile.document
            else entry.location
        )
        yield finding(
            location,
            UNREACHABLE,
            f'entry "{entry_id}" ({entry.action.value}) cannot reach the tests of '
            f"target {target_name} ({items[0].job.identity}{more}): {items[0].why}",
        )


def check_duplicates(context: ValidationContext) -> Iterator[Finding]:
    """validate: one job defined by several rows for one target, which runs the
    last: copies that agree on every emitted field are a warning; copies that
    differ, an error (a warning in a format_version 1 tree, whose generator
    keeps the last one too) naming the fields."""
    doubled = [j for j in context.expansion.jobs if j.definitions]
    if not doubled:
        return
    config = context.tree.config
    severity = Severity.ERROR if context.tree.format_version == 2 else Severity.WARNING
    # locations of the copies -> (targets, differing fields, a job)
    found: dict[tuple, tuple[list[str], dict[str, list[Any]], Any]] = {}
    for target in context.targets:
        groups: dict[tuple[str, ...], list[Any]] = {}
        for job in doubled:
            if matches(job, target.selector):
                groups.setdefault(job.duplicate_key(), []).append(job)
        for group in groups.values():
            if len(group) < 2:
                continue
            group.sort(key=lambda j: j.source)
            try:
                settings = resolve_settings(target, config, group)
            except MatrixgenError:
                settings = EmitSettings(target=target)
            contents = [emitter_for(target.system).standalone(j, settings) for j in group]
            where = tuple(j.source for j in group)
            names, fields, _ = found.setdefault(where, ([], {}, group[-1]))
            names.append(target.name)
            for key in sorted({k for c in contents for k in c}):
                values = [c.get(key) for c in contents]
                if any(v != values[0] for v in values[1:]):
                    fields.setdefault(key, values)  # as the first target that differs has it
    for where, (names, fields, job) in sorted(found.items()):
        shown = _first(names)
        places = ", ".join(str(w) for w in where)
        defined = f"{job.identity} in scope {job.shown_scope} is defined {len(where)} times"
        if not fields:
            yield finding(
                where[0],
                "duplicate-job",
                f"{defined}, at {places}; the copies agree on everything emitted, so "
                f"target(s) {shown} run it once: keep one row",
                Severity.WARNING,
            )
            continue
        differences = "; ".join(
            f"{key}: "
            + ", ".join(f"{_short_value(v)} at {w}" for v, w in zip(values, where, strict=True))
            for key, values in fields.items()
        )
        yield finding(
            where[0],
            "duplicate-conflict",
            f"{defined} and the copies differ ({differences}): target(s) {shown} can "
            f"run only one; generate uses the last, at {where[-1]}",
            severity,
        )


def _first(names: list[str]) -> str:
    """The first four target names, in the order met: `a, b, c, d and 2 more`."""
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _short_value(value: Any) -> str:
    text = "(unset)" if value is None else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def check_timeouts(context: ValidationContext) -> Iterator[Finding]:
    """validate: a job whose timeout exceeds its system's timeout_cap: CI would
    cut it off, or refuse it, before its last repeat."""
    config = context.tree.config
    targets = [t for t in context.targets if t.settings.timeout_cap is not None]
    if not targets:
        return
    generation = context.generation  # shares the selections
    found: dict[Any, tuple[int, int, list[str]]] = {}
    for target in targets:
        jobs = generation.selection(target).jobs
        settings = resolve_settings(target, config, jobs)
        cap = settings.timeout_cap
        assert cap is not None
        for job in jobs:
            seconds = settings.timeout_seconds(job)
            if seconds > cap:
                found.setdefault(job.source, (seconds, cap, []))[2].append(target.name)
    for location, (seconds, cap, names) in sorted(found.items()):
        yield finding(
            location,
            "timeout-cap",
            f"the job's timeout is {timeout_minutes(seconds)} min ({seconds} s), past the "
            f"system's timeout_cap of {timeout_minutes(cap)} min ({cap} s): lower n_repeat or "
            f"time_limit, or set the recipe's timeout (target {_first(names)})",
        )
