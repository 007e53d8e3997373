"""`matrixgen generate`: every target's file written into a folder it owns
(a manifest, a lock), the step outputs, and the summary."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct

from matrixgen.emit.generate import TargetOutput, file_name, generate_all
from matrixgen.emit.registry import emitter_for
from matrixgen.emit.registry import step_outputs as step_output_part
from matrixgen.model.errors import (
    OutputError,
    UsageError,
    file_error,
    write_failure,
)
from matrixgen.model.jobs import Target
from matrixgen.pipeline import Generation
from matrixgen.util.atomic import WriteError, remove_stale_temps, write_atomic
from matrixgen.util.jsontext import JSON_MAX_BYTES, JsonInputError, load_bounded
from matrixgen.util.patterns import name_pattern, whole
from matrixgen.util.readfile import NotRegularFile, read_regular
from matrixgen.views.table import table


def generate_into(
    generation: Generation,
    targets: Sequence[Target],
    out: Path,
    *,
    launcher: str | None = None,
    github_output: bool = False,
    targets_given: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> list[TargetOutput]:
    """`matrixgen generate`: every target's file written into `out` (a run of some
    targets removes none of the others' files); with `github_output`, the step
    outputs as well, checked before any file is written. `say` gets each line
    for the log."""
    outputs = generate_all(generation, targets, launcher=launcher)
    step_outputs: list[tuple[str, str]] | None = None
    if github_output:
        # The configured targets by name, not in config order as listed: the step
        # outputs keep the bytes they had (workflows read them); --target's order stays.
        ordered = outputs if targets_given else sorted(outputs, key=lambda o: o.target.name)
        step_outputs, note = github_outputs(ordered, generation.tree.config.targets)
        if note:
            say(f"matrixgen: note: {note}")
        part = step_output_part()
        output_path = part.path()
        part.check(step_outputs)
    defined = generation.targets(holding_pen=True)
    report = write_outputs(outputs, out, targets_now=[file_name(t) for t in defined])
    for note in report.notes:
        say(f"matrixgen: {note}")
    for name in report.removed:
        say(f"matrixgen: removed {out / name} (its target is gone)")
    for name, why in report.kept:
        say(f"matrixgen: {out / name}: {why}")
    if step_outputs is not None:
        part.append(step_outputs, output_path)
        say(f"step outputs -> {output_path}")
    return outputs


MANIFEST_NAME = ".matrixgen-manifest.json"
LOCK_NAME = ".matrixgen.lock"
_OWNED_NAME = name_pattern(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.(?:json|yml)")


class WriteReport(Struct, frozen=True, kw_only=True):
    removed: tuple[str, ...] = ()  # files of earlier runs for targets that are gone
    kept: tuple[tuple[str, str], ...] = ()  # (file, why) earlier files left in place
    notes: tuple[str, ...] = ()


def write_outputs(
    outputs: Iterable[TargetOutput], out_dir: Path, *, targets_now: Iterable[str] = ()
) -> WriteReport:
    """Write each file whole and own the folder through a manifest (each file
    written, with its SHA-256): a file an earlier run wrote for a target that is
    gone (not in `targets_now`, the files of every target the tree defines) is
    removed only while it is exactly what was written. A lock file serialises
    runs into one folder, so it always holds one run's files."""
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
            f"--output-dir {out_dir}: {exc.message}; nothing was written", exc.errno
        ) from None
    except WriteError as exc:
        raise write_failure(exc.message, exc.errno) from None


def _prepare_folder(out_dir: Path) -> None:
    try:
        info = os.lstat(out_dir)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise file_error(f"--output-dir {out_dir}", exc) from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise OutputError(
            f"--output-dir {out_dir} is a symbolic link (to {os.readlink(out_dir)!r}); generate "
            "owns its folder and never writes through links: give the real directory"
        )
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"--output-dir {out_dir} is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise file_error(f"--output-dir {out_dir}: cannot create the directory", exc) from None


def _read_manifest(out_dir: Path) -> tuple[dict[str, str], list[str]]:
    """The files an earlier run wrote, {name: sha256}; unusable entries dropped."""
    path = out_dir / MANIFEST_NAME
    try:
        raw = read_regular(path, limit=JSON_MAX_BYTES)
    except NotRegularFile as exc:
        raise OutputError(
            f"--output-dir {out_dir}: {MANIFEST_NAME} is {exc.kind}: refused"
        ) from None
    except OSError as exc:
        raise file_error(f"--output-dir {out_dir}: cannot read {MANIFEST_NAME}", exc) from None
    if raw is None:
        return {}, []
    why = ""
    try:
        data = load_bounded(raw)
        files = data.get("files") if isinstance(data, dict) and data.get("format") == 1 else None
    except JsonInputError as exc:
        files, why = None, f" ({exc})"
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
    now = {name: hashlib.sha256(body).hexdigest() for name, body in data.items()}
    # Recorded before writing: a run killed half-way never forgets a file it wrote.
    _write_manifest(out_dir, {**earlier, **now})
    for output in outputs:
        write_atomic(out_dir / output.file, data[output.file])
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
        unchanged = hashlib.sha256(current).hexdigest() == digest
        if name in targets_now:
            # Its target still exists (not part of this run): still ours if unchanged.
            if unchanged:
                owned[name] = digest
            continue
        if not unchanged:
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
    return WriteReport(removed=tuple(removed), kept=tuple(kept), notes=tuple(notes))


def _group(target: Target) -> str:
    return target.settings.group or target.name


def _shards(output: TargetOutput) -> list[Any]:
    """A GitHub target's non-empty matrices, in order, from its emitted file."""
    document = json.loads(output.text)
    return [m for m in document.get("matrices", [document]) if m["include"]]


def github_groups(
    outputs: Sequence[TargetOutput], configured: Sequence[Target]
) -> dict[str, list[Any]]:
    """{group: its non-empty matrices} for every group of the GitHub targets (a
    target's `group`, else its name; configured ones included, empty when no
    generated target fills them); two generated targets in one group: an error."""
    filled: dict[str, TargetOutput] = {}
    for output in outputs:
        if emitter_for(output.target.system).child_pipelines:
            continue
        name = _group(output.target)
        if name in filled:
            raise UsageError(
                f"targets {filled[name].target.name} and {output.target.name} both fill output "
                f'group "{name}": generate one of them at a time, or give them different groups'
            )
        filled[name] = output
    matrices = [t for t in configured if not emitter_for(t.system).child_pipelines]
    groups = sorted({_group(t) for t in matrices} | set(filled))
    return {name: _shards(filled[name]) if name in filled else [] for name in groups}


def github_outputs(
    outputs: Sequence[TargetOutput], configured: Sequence[Target] = ()
) -> tuple[list[tuple[str, str]], str | None]:
    """The step outputs of `generate --github-output` (docs/cli.md), JSON values:
    a fixed set a composite action can pass on, then per group `<group>-shards`
    and `<group>` (0 and an empty matrix for a group no generated target fills,
    so a workflow gives each group one job). When two generated targets fill one
    group (pr and mergegroup alike), the group outputs are left out and the note
    returned says so: the outputs per target hold everything."""
    part = step_output_part()
    compact, shard_outputs = part.compact, part.shard_outputs
    empty = [{"include": []}]
    per_target = {
        o.target.name: _shards(o)
        for o in outputs
        if not emitter_for(o.target.system).child_pipelines
    }
    fixed = [
        ("targets", compact([o.target.name for o in outputs])),
        ("matrices", compact({name: m or empty for name, m in per_target.items()})),
        ("shards", compact({name: len(m) for name, m in per_target.items()})),
        ("files", compact({o.target.name: o.file for o in outputs})),
    ]
    try:
        groups = github_groups(outputs, configured)
    except UsageError as exc:
        return fixed, f"no output group outputs: {exc.message}"
    fixed += [
        ("groups", compact({g: m or empty for g, m in groups.items()})),
        ("group-shards", compact({g: len(m) for g, m in groups.items()})),
    ]
    per_group = [out for g, m in groups.items() for out in shard_outputs(f"{g}-shards", g, m)]
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


def summary_text(outputs: Sequence[TargetOutput]) -> str:
    """The summary's tables: each target's counts and file, each platform's, and
    each quarantine entry in effect (its tracker, action and where it bites)."""
    counts = ("jobs", "allow_failure", "quarantined", "skipped")  # headed by their names
    rows = [
        [
            o.target.name,
            o.target.system.value,
            o.target.selector.platform or "",
            *(str(getattr(o, name)) for name in counts),
            o.file,
        ]
        for o in outputs
    ]
    text = table(rows, ["target", "system", "platform", *counts, "file"])
    by_platform = summary(outputs)["platforms"].items()
    platforms = [[p or "-", c["targets"], c["jobs"]] for p, c in by_platform]
    text += "\n" + table(platforms, ["platform", "targets", "jobs"])
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
    headers = ["quarantine", "tracker", "action", "targets", "jobs"]
    return text + ("\n" + table(rows, headers) if rows else "")
