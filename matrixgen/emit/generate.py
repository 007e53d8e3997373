"""`generate`: every target of a tree from one load and one expansion.

For each target: its selection (`Generation.jobs_for`, quarantine applied), its
settings, and the file CI reads: `<target>.json` (a GitHub matrix) or
`<target>.yml` (a GitLab child pipeline). File names are the target names with
anything but letters, digits, `.`, `_` and `-` replaced by `_`; two targets whose
names map to one file are an error, never an overwrite. `write_outputs` owns the
output folder through a manifest and a lock file (see there).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import (
    GITLAB_MAX_JOB_NAME,
    EmitSettings,
    EmittedTarget,
    allowed_to_fail,
    deselected,
    emitted_jobs,
    resolve_settings,
    skipped_jobs,
)
from matrixgen.emit.github import github_jobs, github_matrix
from matrixgen.emit.gitlab import RESERVED_NAMES, gitlab_jobs, gitlab_pipeline, name_problems
from matrixgen.engine.errors import (
    Finding,
    OutputError,
    Severity,
    UsageError,
    file_error,
    write_failure,
)
from matrixgen.engine.model import Job, QuarantineMark, Target
from matrixgen.engine.select import select
from matrixgen.engine.vocab import QUARANTINE_FILENAME, System
from matrixgen.pipeline import Generation
from matrixgen.quarantine.entries import Entry, Selection
from matrixgen.util.atomic import WriteError, remove_stale_temps, write_atomic
from matrixgen.util.jsontext import JSON_MAX_BYTES, JsonInputError, load_bounded
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.readfile import NotRegularFile, read_regular
from matrixgen.util.values import ComparedValue

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(target: Target) -> str:
    """The file a target's output goes to, inside the output directory."""
    stem = _UNSAFE.sub("_", target.name).lstrip(".") or "target"
    return stem + (".json" if target.system is System.GITHUB else ".yml")


class TargetOutput(ComparedValue, frozen=True, kw_only=True):
    """One target's emitted file and its counts."""

    target: Target
    file: str
    text: str
    jobs: int
    allow_failure: int
    quarantined: int  # kept but marked (allow-failure, deselect)
    deselect: int
    skipped: int  # left out by a skip entry
    shards: int  # GitHub: matrices in the file; GitLab: 1 (0 when only a placeholder)
    # Every quarantined job of the target, kept or skipped: (job identity, mark).
    marks: tuple[tuple[str, QuarantineMark], ...] = ()
    # The jobs of the file as values (what the diff compares).
    emitted: EmittedTarget | None = None  # not compared

    def compared(self) -> tuple:
        return (
            self.target,
            self.file,
            self.text,
            self.jobs,
            self.allow_failure,
            self.quarantined,
            self.deselect,
            self.skipped,
            self.shards,
            self.marks,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "target": self.target.name,
            **self.target.to_dict(),
            "file": self.file,
            "jobs": self.jobs,
            "allow_failure": self.allow_failure,
            "quarantined": self.quarantined,
            "deselect": self.deselect,
            "skipped": self.skipped,
            "shards": self.shards,
            "quarantine": [{"job": name, **mark.to_dict()} for name, mark in self.marks],
        }


def emitted_target(
    target: Target,
    chosen: Selection,
    config: ProjectConfig,
    *,
    launcher: str | None = None,
    quarantine_file: str | None = None,
) -> tuple[EmittedTarget, EmitSettings]:
    """A target's selection as emitted jobs: what its file holds, job by job.
    `quarantine_file` is the tree's quarantine file as the jobs' test processes
    find it (for the pytest plugin; default quarantine.yaml)."""
    jobs = emitted_jobs(chosen.jobs)
    settings = resolve_settings(
        target, config, jobs, launcher=launcher, quarantine_file=quarantine_file
    )
    stages: list[str] = []
    if target.system is System.GITHUB:
        emitted = github_jobs(jobs, settings)
    else:
        emitted, stages = gitlab_jobs(jobs, settings)
    # A skip mark on a kept job (a caller's own selection) keeps it out as well.
    kept = {id(j) for j in jobs}
    left_out = [*chosen.skipped, *(j for j in chosen.jobs if id(j) not in kept)]
    result = EmittedTarget(
        target=target,
        jobs=tuple(emitted),
        skipped=skipped_jobs(left_out),
        stages=tuple(stages),
    )
    return result, settings


def emit_target(
    generation: Generation,
    target: Target,
    *,
    launcher: str | None = None,
) -> TargetOutput:
    """The file of one target, from a generation already loaded and expanded."""
    chosen = generation.selection(target)
    emitted, settings = emitted_target(
        target,
        chosen,
        generation.tree.config,
        launcher=launcher,
        quarantine_file=quarantine_path(generation.tree.root),
    )
    if target.system is System.GITHUB:
        matrix = github_matrix(emitted.jobs)
        text, shards = matrix.text(), len(matrix.shards)
    else:
        pipeline = gitlab_pipeline(emitted.jobs, emitted.stages, settings)
        text, shards = pipeline.text, 1 if pipeline.job_names else 0
    jobs = [e.job for e in emitted.jobs]
    return TargetOutput(
        target=target,
        file=file_name(target),
        text=text,
        jobs=len(jobs),
        allow_failure=sum(allowed_to_fail(j) for j in jobs),
        quarantined=sum(j.quarantine is not None for j in jobs),
        deselect=sum(bool(deselected(j)) for j in jobs),
        skipped=len(emitted.skipped),
        shards=shards,
        marks=tuple(
            (str(e.identity), e.quarantine)
            for e in sorted((*emitted.jobs, *emitted.skipped), key=lambda e: e.job.sort_key())
            if e.quarantine is not None
        ),
        emitted=emitted,
    )


def quarantine_path(root: str) -> str:
    """The tree's quarantine file, relative to the folder matrixgen runs in (the
    top of the checkout, where CI jobs start) when the tree is below it."""
    if root in ("", "."):
        return QUARANTINE_FILENAME
    path = Path(root) / QUARANTINE_FILENAME
    if path.is_absolute():
        from contextlib import suppress

        with suppress(ValueError, OSError):  # outside (or no working folder): as given
            path = path.relative_to(Path.cwd())
    return path.as_posix()


def generate_all(
    generation: Generation, targets: Sequence[Target], *, launcher: str | None = None
) -> list[TargetOutput]:
    """Every target's file, in target order; refuses two targets that share a file
    (also when their names differ only in case: one file on macOS and Windows)."""
    counts = Counter(file_name(t).casefold() for t in targets)
    clashes = sorted(name for name, n in counts.items() if n > 1)
    if clashes:
        who = [t.name for t in targets if file_name(t).casefold() in clashes]
        raise UsageError(
            f"targets {', '.join(sorted(who))} would write the same file(s) "
            f"{', '.join(clashes)}; rename one of them"
        )
    return [emit_target(generation, t, launcher=launcher) for t in targets]


MANIFEST_NAME = ".matrixgen-manifest.json"
LOCK_NAME = ".matrixgen.lock"
_OWNED_NAME = name_pattern(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.(?:json|yml)")


class WriteReport(Struct, frozen=True, kw_only=True):
    """What `write_outputs` did in the folder."""

    written: tuple[Path, ...]
    removed: tuple[str, ...] = ()  # files of earlier runs for targets that are gone
    kept: tuple[tuple[str, str], ...] = ()  # (file, why) earlier files left in place
    notes: tuple[str, ...] = ()


def write_outputs(
    outputs: Iterable[TargetOutput], out_dir: Path, *, targets_now: Iterable[str] = ()
) -> WriteReport:
    """Write each file whole (`util.atomic`), and own the folder through a
    manifest (`.matrixgen-manifest.json`: each file written, with its SHA-256).

    A file an earlier run wrote, for a target that is gone (neither written now
    nor among `targets_now`, the files of every target the tree defines), is
    removed, but only when it is still exactly what was written: a file matrixgen
    did not write, or one changed since, is never deleted. Runs into one folder
    are serialised by the lock file `.matrixgen.lock` (waiting up to
    MATRIXGEN_LOCK_TIMEOUT seconds), so the folder always holds one run's
    files. The folder itself must not be a symbolic link.
    """
    from matrixgen.util.lockfile import LockError, hold, timeout_from_env

    outputs = list(outputs)
    try:
        timeout = timeout_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _prepare_folder(out_dir)
    try:
        with hold(out_dir / LOCK_NAME, timeout=timeout):
            return _write_owned(outputs, out_dir, set(targets_now))
    except LockError as exc:
        # Held too long, or a link at the lock's name: 10; the disk refused: 9.
        raise write_failure(
            f"--out {out_dir}: {exc.message}; nothing was written", exc.errno
        ) from None
    except WriteError as exc:
        raise write_failure(exc.message, exc.errno) from None


def _prepare_folder(out_dir: Path) -> None:
    try:
        info = os.lstat(out_dir)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise file_error(f"--out {out_dir}", exc) from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise OutputError(
            f"--out {out_dir} is a symbolic link (to {os.readlink(out_dir)!r}); generate owns "
            "its folder and never writes through links: give the real directory"
        )
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"--out {out_dir} is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise file_error(f"--out {out_dir}: cannot create the directory", exc) from None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_manifest(out_dir: Path) -> tuple[dict[str, str], list[str]]:
    """The files an earlier run wrote, {name: sha256}; unusable entries dropped."""
    path = out_dir / MANIFEST_NAME
    try:
        raw = read_regular(path, limit=JSON_MAX_BYTES)
    except NotRegularFile as exc:
        raise OutputError(f"--out {out_dir}: {MANIFEST_NAME} is {exc.kind}: refused") from None
    except OSError as exc:
        raise file_error(f"--out {out_dir}: cannot read {MANIFEST_NAME}", exc) from None
    if raw is None:
        return {}, []
    why = ""
    try:
        data = load_bounded(raw)
        files = data["files"] if isinstance(data, dict) and data.get("format") == 1 else None
    except JsonInputError as exc:
        files, why = None, f" ({exc})"
    except KeyError:
        files = None
    if not isinstance(files, dict):
        return {}, [f"{path} is not a manifest matrixgen wrote{why}: ignored, no file removed"]
    owned = {
        name: digest
        for name, digest in files.items()
        if isinstance(name, str) and whole(_OWNED_NAME, name) and isinstance(digest, str)
    }
    return owned, []


def _write_manifest(out_dir: Path, files: dict[str, str]) -> None:
    body = {"format": 1, "tool": "matrixgen generate", "files": dict(sorted(files.items()))}
    write_atomic(out_dir / MANIFEST_NAME, (json.dumps(body, indent=2) + "\n").encode())


def _write_owned(outputs: list[TargetOutput], out_dir: Path, targets_now: set[str]) -> WriteReport:
    for name in [MANIFEST_NAME, *(o.file for o in outputs)]:
        remove_stale_temps(out_dir, name, every=True)  # the lock keeps other writers out
    earlier, notes = _read_manifest(out_dir)
    data = {o.file: o.text.encode("utf-8") for o in outputs}
    now = {name: _digest(body) for name, body in data.items()}
    # Recorded before writing: a run killed half-way never forgets a file it wrote.
    _write_manifest(out_dir, {**earlier, **now})
    written = []
    for output in outputs:
        path = out_dir / output.file
        write_atomic(path, data[output.file])
        written.append(path)
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    owned = dict(now)
    for name, digest in sorted(earlier.items()):
        if name in now:
            continue
        path = out_dir / name
        try:
            current = read_regular(path)
        except OSError:
            kept.append((name, "no longer a regular file: left alone"))
            continue
        if current is None:
            continue
        if name in targets_now:
            # Its target still exists (not part of this run): still ours if unchanged.
            if _digest(current) == digest:
                owned[name] = digest
            continue
        if _digest(current) != digest:
            kept.append((name, "changed since matrixgen wrote it: left alone"))
            continue
        try:
            os.unlink(path)
        except OSError as exc:
            kept.append((name, f"cannot be removed: {exc.strerror}"))
            owned[name] = digest
            continue
        removed.append(name)
    _write_manifest(out_dir, owned)
    return WriteReport(
        written=tuple(written), removed=tuple(removed), kept=tuple(kept), notes=tuple(notes)
    )


def _group(target: Target) -> str:
    value = target.settings.get("group")
    return value if isinstance(value, str) and value else target.name


def _shards(output: TargetOutput) -> list[Any]:
    """A GitHub target's non-empty matrices, in order, from its emitted file."""
    document = json.loads(output.text)
    return [m for m in document.get("matrices", [document]) if m["include"]]


def github_groups(
    outputs: Sequence[TargetOutput], configured: Sequence[Target]
) -> dict[str, list[Any]]:
    """{group: its non-empty matrices} for every group of the GitHub targets (a
    target's `group` setting, else its name), the configured ones included (an
    empty list for a group no generated target fills); two generated targets in
    one group are a UsageError."""
    filled: dict[str, TargetOutput] = {}
    for output in outputs:
        if output.target.system is not System.GITHUB:
            continue
        name = _group(output.target)
        if name in filled:
            raise UsageError(
                f"targets {filled[name].target.name} and {output.target.name} both fill output "
                f'group "{name}": generate one of them at a time, or give them different groups'
            )
        filled[name] = output
    groups = sorted({_group(t) for t in configured if t.system is System.GITHUB} | set(filled))
    return {name: _shards(filled[name]) if name in filled else [] for name in groups}


def github_group_outputs(
    outputs: Sequence[TargetOutput], configured: Sequence[Target]
) -> list[tuple[str, str]]:
    """Step outputs per output group: `<group>-shards` and `<group>` (the first
    matrix; `<group>-1`... past one). A group no generated target fills gets 0
    shards and an empty matrix, so a workflow can give each group one job, run
    when its shards are more than 0."""
    from matrixgen.emit.github import compact

    out: list[tuple[str, str]] = []
    for name, matrices in github_groups(outputs, configured).items():
        out.append((f"{name}-shards", str(len(matrices))))
        out.append((name, compact(matrices[0] if matrices else {"include": []})))
        out.extend((f"{name}-{i}", compact(m)) for i, m in enumerate(matrices[1:], start=1))
    return out


def github_outputs(
    outputs: Sequence[TargetOutput], configured: Sequence[Target] = ()
) -> tuple[list[tuple[str, str]], str | None]:
    """The step outputs of `generate --github-output`. JSON values, keyed by name
    (what a composite action can pass on as a fixed set of outputs):

    - `targets`: the names of every target generated, in order;
    - `matrices`: {name: [matrix, ...]} for each GitHub target, its shards in
      order (`[{"include": []}]` for an empty selection), so a workflow reads
      `fromJSON(...matrices)[name][k]` for shard k; `shards`: {name: N};
    - `files`: {name: the file written for it, inside --out};
    - `groups` and `group-shards`: the same per output group (see github_groups);

    then, per group, `<group>-shards` and `<group>` (github_group_outputs). A
    group whose name is one of the outputs above is a UsageError. When two
    generated targets fill one group (every target of a tree, pr and mergegroup
    alike), the group outputs are left out and the note returned says so; the
    outputs per target hold everything."""
    from matrixgen.emit.github import compact

    matrices: dict[str, list] = {}
    shards: dict[str, int] = {}
    for output in outputs:
        if output.target.system is System.GITHUB:
            found = _shards(output)
            matrices[output.target.name] = found or [{"include": []}]
            shards[output.target.name] = len(found)
    fixed = [
        ("targets", compact([o.target.name for o in outputs])),
        ("matrices", compact(matrices)),
        ("shards", compact(shards)),
        ("files", compact({o.target.name: o.file for o in outputs})),
    ]
    try:
        groups = github_groups(outputs, configured)
    except UsageError as exc:
        return fixed, f"no output group outputs: {exc.message}"
    fixed += [
        ("groups", compact({g: m or [{"include": []}] for g, m in groups.items()})),
        ("group-shards", compact({g: len(m) for g, m in groups.items()})),
    ]
    per_group = github_group_outputs(outputs, configured)
    taken = {name for name, _ in fixed}
    clash = sorted({name for name, _ in per_group} & taken)
    if clash:
        raise UsageError(
            f"output group(s) {', '.join(clash)} clash with generate's own outputs "
            f"({', '.join(sorted(taken))}): rename the group"
        )
    return fixed + per_group, None


def summary(outputs: Sequence[TargetOutput]) -> dict[str, Any]:
    """Counts per target and per platform (JSON of `generate --format json`)."""
    by_platform: dict[str, dict[str, int]] = {}
    for output in outputs:
        platform = output.target.selector.platform or ""
        counts = by_platform.setdefault(platform, {"targets": 0, "jobs": 0})
        counts["targets"] += 1
        counts["jobs"] += output.jobs
    return {
        "targets": [o.summary() for o in outputs],
        "platforms": {p: by_platform[p] for p in sorted(by_platform)},
        "total": {"targets": len(outputs), "jobs": sum(o.jobs for o in outputs)},
    }


def quarantine_rows(outputs: Sequence[TargetOutput]) -> tuple[list[list[str]], list[str]]:
    """One row per quarantine entry in effect: its tracker, action and where it bites."""
    entries: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for output in outputs:
        for name, mark in output.marks:
            targets, jobs = entries.setdefault((mark.id, mark.tracker, mark.action), (set(), set()))
            targets.add(output.target.name)
            jobs.add(name)
    rows = [
        [entry_id, tracker, action, str(len(targets)), ", ".join(sorted(jobs))]
        for (entry_id, tracker, action), (targets, jobs) in sorted(entries.items())
    ]
    return rows, ["quarantine", "tracker", "action", "targets", "jobs"]


def summary_rows(outputs: Sequence[TargetOutput]) -> tuple[list[list[str]], list[str]]:
    headers = [
        "target",
        "system",
        "platform",
        "jobs",
        "allow_failure",
        "quarantined",
        "skipped",
        "file",
    ]
    rows = [
        [
            o.target.name,
            o.target.system.value,
            o.target.selector.platform or "",
            str(o.jobs),
            str(o.allow_failure),
            str(o.quarantined),
            str(o.skipped),
            o.file,
        ]
        for o in outputs
    ]
    return rows, headers


def check_gitlab_names(context: ValidationContext) -> Iterator[Finding]:
    """validate: jobs a GitLab target's child pipeline could not name (two jobs
    left with one name, or a name past 255 characters): `generate` would refuse."""
    from matrixgen.engine.targets import checked_targets

    generation = Generation(context.tree, context.expansion)  # shares the selections
    severity = Severity.ERROR if context.tree.format_version == 2 else Severity.WARNING
    found: dict[tuple[Any, str], list[str]] = {}
    for target in checked_targets(context):
        if target.system is not System.GITLAB:
            continue
        # The kept jobs are the emitted ones; naming does not depend on their order.
        jobs = generation.selection(target).jobs
        if _named_as_they_are(jobs):
            continue
        for job, why in name_problems(jobs):
            found.setdefault((job.source, why), []).append(target.name)
    for (location, why), names in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        yield Finding(
            location=location,
            severity=severity,
            code="gitlab-job-name",
            message=f"{why} (target {shown})",
        )


class Unreached(Struct, frozen=True):
    """A node-level entry that cannot reach the tests of a target's job."""

    entry: Entry
    target: Target
    job: Job
    why: str


def unreached(
    entries: Sequence[Entry], jobs: Sequence[Job], targets: Sequence[Target], config: ProjectConfig
) -> list[Unreached]:
    """Every (node-level entry, target, job) where the entry applies to the job
    but cannot reach its tests (`common.node_route`), in target and job order."""
    from matrixgen.emit.common import Unreachable, node_route
    from matrixgen.engine.errors import MatrixgenError
    from matrixgen.quarantine.entries import apply_quarantine, applying_entries

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
        for job in marked:
            try:
                node_route(job, settings)
            except Unreachable as exc:
                for entry in applying_entries(job, entries, target, known):
                    if entry.action.node_level:
                        found.append(Unreached(entry, target, job, str(exc)))
    return found


def check_node_routes(context: ValidationContext) -> Iterator[Finding]:
    """validate: node-level entries (deselect, mute) that cannot reach the tests
    of a target's job (`common.node_route`): `generate` would refuse. One error
    per entry and target, at the entry's action."""
    from matrixgen.engine.targets import checked_targets
    from matrixgen.quarantine.entries import load_quarantine

    qfile = load_quarantine(context.tree)
    found: dict[tuple[str, str], list[Unreached]] = {}
    for item in unreached(
        qfile.entries, context.expansion.jobs, checked_targets(context), context.tree.config
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
        yield Finding(
            location=location,
            severity=Severity.ERROR,
            code="quarantine-unreachable",
            message=f'entry "{entry_id}" ({entry.action.value}) cannot reach the tests of '
            f"target {target_name} ({items[0].job.identity}{more}): {items[0].why}",
        )


def _named_as_they_are(jobs: Sequence[Job]) -> bool:
    """Whether `name_problems` finds nothing without naming the jobs one by one:
    distinct names, none reserved or hidden (a leading dot), none too long, are
    what `assign_names` gives at its first round, each job its own name. Most
    targets; the others go through `name_problems`."""
    from operator import attrgetter, methodcaller

    names = set(map(attrgetter("name"), jobs))
    return (
        len(names) == len(jobs)
        and names.isdisjoint(RESERVED_NAMES)
        and not any(map(methodcaller("startswith", "."), names))
        and max(map(len, names), default=0) <= GITLAB_MAX_JOB_NAME
    )


def check_duplicates(context: ValidationContext) -> Iterator[Finding]:
    """validate: one job defined by several rows for one target (the same identity
    and scope, cadences that the target takes both of). The target runs one job
    (the last definition, see `select.one_per_identity`). Copies that agree on
    every emitted field are a warning naming every location; copies that differ
    are an error (a warning in a format_version 1 tree, whose generator keeps the
    last one too) naming the locations and the fields: CI could run only one."""
    from matrixgen.emit.github import github_row
    from matrixgen.emit.gitlab import standalone_content
    from matrixgen.engine.errors import MatrixgenError
    from matrixgen.engine.select import matches
    from matrixgen.engine.targets import checked_targets

    doubled = [j for j in context.expansion.jobs if j.definitions]
    if not doubled:
        return
    config = context.tree.config
    severity = Severity.ERROR if context.tree.format_version == 2 else Severity.WARNING
    # locations of the copies -> (targets, differing fields, a job)
    found: dict[tuple, tuple[list[str], dict[str, list[Any]], Any]] = {}
    for target in checked_targets(context):
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
            content = github_row if target.system is System.GITHUB else standalone_content
            contents = [content(j, settings) for j in group]
            differing: dict[str, list[Any]] = {}
            for key in sorted({k for c in contents for k in c}):
                values = [c.get(key) for c in contents]
                if any(v != values[0] for v in values[1:]):
                    differing[key] = values
            where = tuple(j.source for j in group)
            names, fields, _ = found.setdefault(where, ([], {}, group[-1]))
            names.append(target.name)
            for key, values in differing.items():
                fields.setdefault(key, values)
    for where, (names, fields, job) in sorted(found.items()):
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        places = ", ".join(str(w) for w in where)
        scope = job.shown_scope
        if not fields:
            yield Finding(
                location=where[0],
                severity=Severity.WARNING,
                code="duplicate-job",
                message=(
                    f"{job.identity} in scope {scope} is defined {len(where)} times, at "
                    f"{places}; the copies agree on everything emitted, so target(s) "
                    f"{shown} run it once: keep one row"
                ),
            )
            continue
        differences = "; ".join(
            f"{key}: "
            + ", ".join(f"{_short_value(v)} at {w}" for v, w in zip(values, where, strict=True))
            for key, values in fields.items()
        )
        yield Finding(
            location=where[0],
            severity=severity,
            code="duplicate-conflict",
            message=(
                f"{job.identity} in scope {scope} is defined {len(where)} times and the "
                f"copies differ ({differences}): target(s) {shown} can run only one; "
                f"generate uses the last, at {where[-1]}"
            ),
        )


def _short_value(value: Any) -> str:
    import json

    text = "(unset)" if value is None else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def check_timeouts(context: ValidationContext) -> Iterator[Finding]:
    """validate: a job whose timeout (derived from n_repeat x time_limit plus the
    system's overhead, or set) exceeds its system's timeout_cap: CI would cut it
    off, or refuse the job, before its last repeat."""
    from matrixgen.emit.common import resolve_settings, timeout_minutes
    from matrixgen.engine.targets import checked_targets

    config = context.tree.config
    targets = [t for t in checked_targets(context) if t.settings.get("timeout_cap") is not None]
    if not targets:
        return
    generation = Generation(context.tree, context.expansion)  # shares the selections
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
    for location, (seconds, cap, names) in sorted(found.items(), key=lambda kv: kv[0]):
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        yield Finding(
            location=location,
            severity=Severity.ERROR,
            code="timeout-cap",
            message=f"the job's timeout is {timeout_minutes(seconds)} min ({seconds} s), past the "
            f"system's timeout_cap of {timeout_minutes(cap)} min ({cap} s): lower n_repeat or "
            f"time_limit, or set the recipe's timeout (target {shown})",
        )
