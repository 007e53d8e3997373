"""Emit a GitHub Actions matrix: JSON that `strategy.matrix` reads through `fromJSON`
(one row per job, keys in `github_row`'s order), split into shards of nearly
equal size past GitHub's limits (docs/ci-limits.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

from msgspec import Struct

from matrixgen.emit.common import (
    ROUTE_PLUGIN,
    EmitSettings,
    EmittedJob,
    EmittedTarget,
    Waits,
    allowed_to_fail,
    emitted_job,
    emitted_jobs,
    job_route,
    plugin_variables,
    timeout_minutes,
)
from matrixgen.model.errors import LimitError
from matrixgen.model.jobs import Job
from matrixgen.model.sections import SystemSettings
from matrixgen.systems.github.limits import GITHUB_MAX_MATRIX_ROWS, GITHUB_MAX_OUTPUT_BYTES
from matrixgen.util import jsontext
from matrixgen.util.escape import json_for_log


def github_row(job: Job, settings: EmitSettings) -> dict[str, Any]:
    """One `include` entry; key order is fixed so the JSON is stable."""
    row: dict[str, Any] = {
        "model": job.model,
        "test_case": job.test_case,
        "name": job.name,
        "platform": job.platform,
        "environment": job.environment,
        "tag": job.tag or "",
        "n_repeat": settings.n_repeat_for(job),
        "timeout": timeout_minutes(settings.timeout_seconds(job)),
    }
    if job.nodes is not None:
        row["nodes"] = job.nodes
    if job.gpus is not None:
        row["gpus"] = job.gpus
    if settings.lightweight:
        row["lightweight"] = True
    image = settings.image(job)
    if image:
        row["image"] = image
    tags = settings.tags(job)
    if tags:
        row["runner"] = list(tags)
    route = job_route(job, settings, launcher=None)
    env = dict(job.env)
    if route == ROUTE_PLUGIN:
        env.update(plugin_variables(job, settings, settings.quarantine_file))
    if env:
        row["env"] = env
    if job.args:
        row["args"] = list(job.args)
    if allowed_to_fail(job):
        row["continue-on-error"] = True
    if job.quarantine is not None:
        shown = ("id", "tracker", "action", "kind")
        row["quarantine"] = {key: getattr(job.quarantine, key) for key in shown}
    return row


def compact(value: Any) -> str:
    """The one JSON spelling we emit: compact, UTF-8, keys in insertion order."""
    return json_for_log(jsontext.compact(value))


def _size(value: Any) -> int:
    return len(compact(value).encode("utf-8"))


def shard_rows(
    rows: Sequence[dict[str, Any]],
    *,
    max_rows: int = GITHUB_MAX_MATRIX_ROWS,
    max_bytes: int = GITHUB_MAX_OUTPUT_BYTES,
) -> list[list[dict[str, Any]]]:
    """Split rows, in order, into the fewest shards of nearly equal length that
    each hold at most `max_rows` rows and `max_bytes` bytes of `{"include": [...]}`.
    Every row lands in exactly one shard; a row too big on its own is a LimitError."""
    if not rows:
        return []
    sizes = [_size(r) for r in rows]
    overhead = _size({"include": []})
    biggest = max(sizes)
    if overhead + biggest > max_bytes:
        index = sizes.index(biggest)
        raise LimitError(
            f'matrix row of "{rows[index].get("name")}" is {biggest:,} bytes: one row alone '
            f"passes GitHub's limit of {max_bytes:,} bytes per job output"
        )
    count = max(math.ceil(len(rows) / max_rows), math.ceil(sum(sizes) / max_bytes))
    while True:
        # `count` runs covering the rows, the first `len(rows) % count` one longer.
        base, extra = divmod(len(rows), count)
        bounds = list(pairwise(i * base + min(i, extra) for i in range(count + 1)))
        if all(
            overhead + sum(sizes[a:b]) + (b - a - 1) <= max_bytes for a, b in bounds
        ):  # commas between rows
            return [list(rows[a:b]) for a, b in bounds]
        count += 1


class GithubMatrix(Struct, frozen=True):
    """The emitted matrix of one target, as shards of rows."""

    shards: tuple[tuple[dict[str, Any], ...], ...]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [row for shard in self.shards for row in shard]

    def text(self) -> str:
        """The file: a plain matrix, or the sharded form past the limits."""
        matrices = [{"include": list(shard)} for shard in self.shards]
        if len(matrices) > 1:
            return compact({"shards": len(matrices), "matrices": matrices}) + "\n"
        return compact(matrices[0] if matrices else {"include": []}) + "\n"

    def outputs(self) -> list[tuple[str, str]]:
        """(name, value) of each step output, in order (see the module docstring)."""
        return shard_outputs("shards", "matrix", [{"include": list(s)} for s in self.shards])


def shard_outputs(count: str, name: str, matrices: Sequence[Any]) -> list[tuple[str, str]]:
    """The step outputs of some matrices: `count` (how many), `name` (the first,
    `{"include": []}` when none) and `<name>-1`... (the others)."""
    first = matrices[0] if matrices else {"include": []}
    rest = ((f"{name}-{i}", compact(m)) for i, m in enumerate(matrices[1:], start=1))
    return [(count, str(len(matrices))), (name, compact(first)), *rest]


def github_jobs(jobs: Iterable[Job], settings: EmitSettings) -> list[EmittedJob]:
    """The emitted jobs of a selection: one matrix row each, in file order."""
    return [emitted_job(job, github_row, settings) for job in emitted_jobs(jobs)]


def github_matrix(emitted: Sequence[EmittedJob]) -> GithubMatrix:
    """The matrix that holds emitted jobs: their rows, sharded past the limits."""
    rows = [dict(e.content) for e in emitted]
    return GithubMatrix(shards=tuple(tuple(s) for s in shard_rows(rows)))


def emit_github(jobs: Iterable[Job], settings: EmitSettings) -> GithubMatrix:
    """The matrix of a selection: one row per job, sharded past the limits."""
    return github_matrix(github_jobs(jobs, settings))


class GithubEmitter:
    """GitHub Actions: one matrix per target (an `emit.registry.Emitter`)."""

    suffix = ".json"
    child_pipelines = False
    names_jobs = False
    standalone = staticmethod(github_row)  # a job on its own is its matrix row

    def jobs(
        self, jobs: Sequence[Job], settings: EmitSettings
    ) -> tuple[list[EmittedJob], list[str]]:
        return github_jobs(jobs, settings), []

    def file(self, emitted: EmittedTarget, settings: EmitSettings) -> tuple[str, int]:
        matrix = github_matrix(emitted.jobs)
        return matrix.text(), len(matrix.shards)

    def launcher(self, job: Job, settings: EmitSettings) -> str | None:
        return None

    def job_names(self, jobs: Sequence[Job]) -> list[str | None]:
        return [j.name for j in jobs]

    def name_problems(self, jobs: Sequence[Job]) -> list[tuple[Job, str]]:
        return []

    def waits(self, settings: SystemSettings) -> Waits:
        return Waits()  # the rows of a matrix cannot wait for each other

    def own_settings(self, settings: SystemSettings, *, launcher: str | None) -> None:
        return None  # every setting of a matrix row is one every system has


EMITTER = GithubEmitter()
