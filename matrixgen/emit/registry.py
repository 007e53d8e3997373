"""The emitter of each CI system, found in its home (`systems/<name>/emitter`,
its `EMITTER`): `generate`, the diff, the checks and the graph ask this table,
never which system it is, and a new system needs no line here."""

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

    suffix: str  # of a target's file name
    # True: a child pipeline, whose jobs may wait for each other and for the
    # parent's; False: a matrix read through step outputs, whose rows cannot.
    child_pipelines: bool
    # The file names each job itself (`job_names`), not by the job's `name`.
    names_jobs: bool

    def jobs(
        self, jobs: Sequence[Job], settings: EmitSettings
    ) -> tuple[list[EmittedJob], list[str]]:
        """The emitted jobs of a selection, in file order, and the stage order."""

    def file(self, emitted: EmittedTarget, settings: EmitSettings) -> tuple[str, int]:
        """The text of the file that holds a target's emitted jobs, and its shards
        (matrices in the file; 1 for a pipeline, 0 when it holds no job)."""

    def standalone(self, job: Job, settings: EmitSettings) -> dict[str, Any]:
        """What the file would hold for a job on its own."""

    def launcher(self, job: Job, settings: EmitSettings) -> str | None:
        """The command a job's entry runs; None where the file names none."""

    def job_names(self, jobs: Sequence[Job]) -> list[str | None]:
        """The name each job gets in the file (None where it can get none)."""

    def name_problems(self, jobs: Sequence[Job]) -> list[tuple[Job, str]]:
        """(job, why) for each job the file could not name."""

    def waits(self, settings: SystemSettings) -> Waits:
        """What a target's jobs wait for besides their recipes' needs."""

    def own_settings(self, settings: SystemSettings, *, launcher: str | None) -> Any:
        """The settings only this system has (`EmitSettings.own`), or None."""


def part_of(home: Home, part: str) -> ModuleType | None:
    """The module of a home's part, None where it has none: the parts sit on
    this floor, above the registry of homes."""
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
    """The `outputs` part of the system that has step outputs."""
    for home in HOMES:
        module = part_of(home, "outputs")
        if module is not None:
            return module
    raise UsageError("no CI system matrixgen knows takes step outputs")


def emitter_for(system: System) -> Emitter:
    return EMITTERS[system]
