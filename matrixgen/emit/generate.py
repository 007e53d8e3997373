"""Every target's file from one load and one expansion, named after the target
(anything but letters, digits, `.`, `_` and `-` becomes `_`: two targets that
map to one file are an error, never an overwrite). `generate` writes them into
a folder it owns (matrixgen/generate); the diff compares them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import (
    EmitSettings,
    EmittedTarget,
    allowed_to_fail,
    deselected,
    emitted_jobs,
    skipped_jobs,
)
from matrixgen.emit.registry import emitter_for, resolve_settings
from matrixgen.model.errors import (
    UsageError,
)
from matrixgen.model.jobs import QuarantineMark, Target
from matrixgen.model.vocab import QUARANTINE_FILENAME
from matrixgen.pipeline import Generation
from matrixgen.quarantine.apply import Selection
from matrixgen.util.values import ComparedValue, json_value

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(target: Target) -> str:
    stem = _UNSAFE.sub("_", target.name).lstrip(".") or "target"
    return stem + emitter_for(target.system).suffix


# The counts of a target's summary, in its order.
SUMMARY_COUNTS = ("jobs", "allow_failure", "quarantined", "deselect", "skipped", "shards")


class TargetOutput(ComparedValue, frozen=True, kw_only=True):
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

    def summary(self) -> dict[str, Any]:
        return {
            "target": self.target.name,
            **json_value(self.target.place),
            "file": self.file,
            **{k: getattr(self, k) for k in SUMMARY_COUNTS},
            "quarantine": [{"job": name, **json_value(mark)} for name, mark in self.marks],
        }


def emitted_target(
    target: Target,
    chosen: Selection,
    config: ProjectConfig,
    *,
    launcher: str | None = None,
    quarantine_file: str | None = None,
) -> tuple[EmittedTarget, EmitSettings]:
    """A target's selection as emitted jobs. `quarantine_file`: the tree's
    quarantine file as the jobs' test processes find it."""
    jobs = emitted_jobs(chosen.jobs)
    settings = resolve_settings(
        target, config, jobs, launcher=launcher, quarantine_file=quarantine_file
    )
    emitted, stages = emitter_for(target.system).jobs(jobs, settings)
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
    text, shards = emitter_for(target.system).file(emitted, settings)
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
    )


def quarantine_path(root: str) -> str:
    """The tree's quarantine file, relative to the folder matrixgen runs in (the
    top of the checkout, where CI jobs start) when the tree is below it."""
    if root in ("", "."):
        return QUARANTINE_FILENAME
    path = Path(root) / QUARANTINE_FILENAME
    if path.is_absolute():
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
