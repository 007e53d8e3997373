"""The emitter of each CI system, found in its home (`systems/<name>/emitter`,
its `EMITTER`): `generate`, the diff, the checks and the graph ask this table,
never which system it is, and a new system needs no line here. A target's
settings are resolved here too (`resolve_settings`), its system's own part
asked of that system's emitter."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from matrixgen.documents.config import ProjectConfig
from matrixgen.documents.config_sections import ImageSet, SystemSettings
from matrixgen.emit.common import EmitSettings, EmittedJob, EmittedTarget, Waits
from matrixgen.model.errors import ConfigError, UsageError, finding
from matrixgen.model.vocab import System
from matrixgen.systems import HOMES
from matrixgen.systems.home import Home

if TYPE_CHECKING:
    from matrixgen.model.jobs import Job, Target


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


def resolve_settings(
    target: Target,
    config: ProjectConfig,
    jobs: Iterable[Job] = (),
    *,
    launcher: str | None = None,
    quarantine_file: str | None = None,
) -> EmitSettings:
    """A target's settings for `jobs`, whose platforms and environments choose
    the images and runner tags."""
    settings = target.settings
    selector = target.selector
    pairs = {(j.platform, j.environment) for j in jobs}
    if selector.platform and selector.environment:
        pairs.add((selector.platform, selector.environment))
    images = {pair: _image(settings, config, target.system, *pair) for pair in sorted(pairs)}
    platforms = sorted({p for p, _ in pairs} | ({selector.platform} - {None}))
    tags = {
        p: settings.runner_tags
        if settings.runner_tags is not None
        else config.platform(p).runner_tags or ()
        for p in platforms
    }
    if launcher is not None and not launcher.strip():
        raise UsageError("--launcher: give a command (e.g. 'echo'), not an empty string")
    return EmitSettings(
        target=target,
        images=images,
        runner_tags=tags,
        timeout=settings.timeout,
        timeout_overhead=settings.timeout_overhead or 0,
        timeout_cap=settings.timeout_cap,
        n_repeat=target.n_repeat,
        lightweight=target.lightweight,
        own=emitter_for(target.system).own_settings(settings, launcher=launcher),
        external_needs=frozenset(config.doc.graph.external.get(target.system, ())),
        quarantine_file=quarantine_file or "quarantine.yaml",
    )


def _image(
    settings: SystemSettings,
    config: ProjectConfig,
    system: System,
    platform: str,
    environment: str,
) -> str | None:
    """The settings' `image`, else the environment's own pin, else the system's."""
    if settings.image is not None:
        return settings.image
    images = config.doc.images
    override = images.environments.get(environment)
    env_pin = override.of(system) if override is not None else None
    if env_pin is not None:
        arch = config.platform(platform).arch
        # Pinned per architecture but not for this one: the shared pin applies.
        if env_pin.shared is not None or (arch is not None and getattr(env_pin, arch)):
            keys: list[str | int] = ["images", "environments", environment, system.value]
            return _pinned(env_pin, config, platform, keys)
    pin = images.of(system)
    if pin is None:
        return None
    return _pinned(pin, config, platform, ["images", system.value])


def _pinned(pin: ImageSet, config: ProjectConfig, platform: str, keys: list[str | int]) -> str:
    """`repository:tag` of a pin, per architecture where it is split by one."""
    if pin.shared is not None:
        return pin.shared.image
    arch = config.platform(platform).arch
    chosen = getattr(pin, arch) if arch is not None else None
    if chosen is not None:
        return chosen.image
    where = ".".join(map(str, keys))
    message = (
        f'{where} pins an image per architecture, but platform "{platform}" has none: '
        f"set platforms.{platform}.arch ({' or '.join(sorted(pin.pins()))})"
        if arch is None
        else f'no image pinned for architecture "{arch}" (platform "{platform}") under {where}'
    )
    raise ConfigError(
        f"invalid settings in {config.path or 'the project config'}",
        findings=[finding(config.locate(keys), "settings", message)],
    )
