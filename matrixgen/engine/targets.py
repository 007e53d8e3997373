"""Targets: configured ones, ad hoc ones from `--target k=v,...`, and the ones a
tree without config implies (every scope x platform x environment it uses)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from matrixgen.engine.config import ProjectConfig
from matrixgen.engine.errors import UsageError, did_you_mean
from matrixgen.engine.model import Job, Selector, Target
from matrixgen.engine.vocab import ALL_CADENCES, System, resolve_scope

TARGET_KEYS = ("system", "scope", "platform", "environment", "cadence", "model", "tag")
_GITHUB_TIER = re.compile(r"^L[01]$")


def default_system(scope: str) -> System:
    """GitHub runs the L0/L1 tiers (and their legacy names); GitLab runs the rest."""
    return System.GITHUB if _GITHUB_TIER.match(resolve_scope(scope)) else System.GITLAB


def target_name(system: System, selector: Selector) -> str:
    parts = [system.value, selector.scope, selector.platform, selector.environment]
    if selector.cadence:
        parts.append(selector.cadence)
    return "-".join(p for p in parts if p)


def parse_target(text: str, config: ProjectConfig | None = None) -> Target:
    """`system=gitlab,scope=mr,platform=dgx_h100,environment=dev[,cadence=pr]`."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise UsageError(f'--target "{text}": expected key=value pairs separated by commas')
        if key not in TARGET_KEYS:
            raise UsageError(
                f'--target "{text}": unknown key "{key}"{did_you_mean(key, TARGET_KEYS)}; '
                f"known: {', '.join(TARGET_KEYS)}"
            )
        if key in fields:
            raise UsageError(f'--target "{text}": "{key}" given twice')
        fields[key] = value
    for required in ("scope", "platform", "environment"):
        if required not in fields:
            raise UsageError(f'--target "{text}": "{required}" is required')
    if "cadence" in fields and fields["cadence"] not in ALL_CADENCES:
        raise UsageError(
            f'--target "{text}": unknown cadence "{fields["cadence"]}"'
            f"{did_you_mean(fields['cadence'], ALL_CADENCES)}"
        )
    if "system" in fields:
        try:
            system = System(fields["system"])
        except ValueError:
            raise UsageError(
                f'--target "{text}": unknown system "{fields["system"]}"; use github or gitlab'
            ) from None
    else:
        system = default_system(fields["scope"])
    selector = Selector(
        scope=fields["scope"],
        platform=fields["platform"],
        environment=fields["environment"],
        cadence=fields.get("cadence"),
        model=fields.get("model"),
        tag=fields.get("tag"),
    )
    settings: dict = {}
    if config is not None:
        settings = dict(config.section("systems").get(system.value, {}))
    return Target(
        name=target_name(system, selector), system=system, selector=selector, settings=settings
    )


def discover_targets(jobs: Iterable[Job]) -> list[Target]:
    """Every scope x platform x environment the jobs use, each once."""
    seen = sorted(
        {
            (j.scope, j.platform, j.environment)
            for j in jobs
            if j.scope and j.platform and j.environment
        }
    )
    targets = []
    for scope, platform, environment in seen:
        selector = Selector(scope=scope, platform=platform, environment=environment)
        system = default_system(scope)
        targets.append(Target(name=target_name(system, selector), system=system, selector=selector))
    return targets


def resolve_targets(
    config: ProjectConfig,
    jobs: Sequence[Job],
    *,
    specs: Sequence[str] = (),
    names: Sequence[str] = (),
) -> list[Target]:
    """The targets a command works on: the ones asked for, else the configured
    ones, else (a tree without config) the ones the jobs imply."""
    targets: list[Target] = []
    for name in names:
        target = config.target(name)
        if target is None:
            known = [t.name for t in config.targets]
            raise UsageError(f'unknown target "{name}"{did_you_mean(name, known)}')
        targets.append(target)
    targets.extend(parse_target(spec, config) for spec in specs)
    if targets:
        names_seen: set[str] = set()
        for target in targets:
            if target.name in names_seen:
                raise UsageError(f'target "{target.name}" is given twice')
            names_seen.add(target.name)
        return targets
    if config.targets:
        return list(config.targets)
    return discover_targets(jobs)
