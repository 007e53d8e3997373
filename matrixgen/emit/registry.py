"""The CI systems matrixgen writes files for: one emitter each, named in one table.

An emitter is a module's `EMITTER`, a value that has what `Emitter` lists: how
its system names a file and a job, whether the file is a child pipeline or a
matrix, and how a target's selection becomes that file. `generate`, the diff,
the checks, the graph and the evidence mapping ask the table, never which system
it is. Each system's emitter is the `emitter` part of its home
(`systems/<name>/emitter`), found from `systems.HOMES`: a new system's emitter
needs no line here (tests/test_emit_registry.py checks that every system has
one).

Megatron-LM's drop-ins (each home's `megatron` part: `jet-trigger`,
`jet-buckets`) are not emitters: they write what that project's own generators
write, from their options rather than a target's settings; they ask this table
for the facts of the system they write for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from matrixgen.model.errors import UsageError
from matrixgen.model.vocab import System
from matrixgen.systems import HOMES
from matrixgen.systems.home import Home

if TYPE_CHECKING:
    from matrixgen.emit.common import EmitSettings, EmittedJob, EmittedTarget, Waits
    from matrixgen.model.jobs import Job
    from matrixgen.model.sections import SystemSettings


@runtime_checkable
class Emitter(Protocol):
    """What `generate` and the views need of a system's emitter."""

    # The ending of a target's file name (`.json`, `.yml`).
    suffix: str
    # True: the file is a child pipeline that a job of the parent pipeline
    # triggers (it may need that job; its jobs may wait for each other). False: a
    # matrix that a workflow reads through step outputs, whose rows cannot wait
    # for each other.
    child_pipelines: bool
    # The file gives each job a name of its own (`job_names`), which may differ
    # from the job's `name`; False: a job is known by its `name`.
    names_jobs: bool

    def jobs(
        self, jobs: Sequence[Job], settings: EmitSettings
    ) -> tuple[list[EmittedJob], list[str]]:
        """The emitted jobs of a selection, in file order, and the stage order
        (empty where the system has none)."""

    def file(self, emitted: EmittedTarget, settings: EmitSettings) -> tuple[str, int]:
        """The text of the file that holds a target's emitted jobs, and its shards
        (matrices in the file; 1 for a pipeline, 0 when it holds no job)."""

    def standalone(self, job: Job, settings: EmitSettings) -> dict[str, Any]:
        """What the file would hold for a job on its own (two definitions of one
        job are compared on it)."""

    def launcher(self, job: Job, settings: EmitSettings) -> str | None:
        """The command a job's entry runs; None where the file names none (the
        workflow's own step runs a matrix row)."""

    def job_names(self, jobs: Sequence[Job]) -> list[str | None]:
        """The name each job gets in the file (None where it can get none)."""

    def name_problems(self, jobs: Sequence[Job]) -> list[tuple[Job, str]]:
        """(job, why) for each job the file could not name."""

    def waits(self, settings: SystemSettings) -> Waits:
        """What a target's jobs wait for besides their recipes' needs (a warm-up
        job, the parent pipeline's job), from its settings."""

    def own_settings(self, settings: SystemSettings, *, launcher: str | None) -> Any:
        """The settings only this system has (`EmitSettings.own`), resolved from
        a target's settings (its system's settings Struct) and --launcher; None
        where it has none."""


def part_of(home: Home, part: str) -> ModuleType | None:
    """The module of a home's part (its emitter, step outputs), None where the
    home has none: the parts sit on this floor, above the registry of homes."""
    module = home.part(part)
    return importlib.import_module(module) if module is not None else None


def _emitter(home: Home) -> Emitter:
    module = part_of(home, "emitter")
    if module is None:
        raise LookupError(f"the home of {home.name} has no emitter")
    return module.EMITTER


EMITTERS: Final[Mapping[System, Emitter]] = MappingProxyType(
    {System(home.name): _emitter(home) for home in HOMES}
)


def step_outputs() -> ModuleType:
    """The step outputs of the system that has them (`Home.step_output_option`):
    its `outputs` part."""
    for home in HOMES:
        module = part_of(home, "outputs")
        if module is not None:
            return module
    raise UsageError("no CI system matrixgen knows takes step outputs")


def emitter_for(system: System) -> Emitter:
    """The emitter of a system."""
    return EMITTERS[system]
