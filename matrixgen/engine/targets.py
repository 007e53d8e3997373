"""Targets: configured ones, ad hoc ones from `--target k=v,...`, and the ones a
tree without config implies (every scope x platform x environment it uses).

Implied targets leave out the holding-pen scopes, where a tree keeps jobs that
no pipeline runs, unless asked for by name or with `holding_pen=True`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from msgspec.structs import replace

from matrixgen.documents.config import DEFAULT_CONFIG, ProjectConfig, system_settings
from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Job, Selector, Target
from matrixgen.model.vocab import (
    ALL_CADENCES,
    LEGACY_SCOPE_ALIASES,
    OTHER_TIERS_SYSTEM,
    System,
    resolve_scope,
)
from matrixgen.util.patterns import name_pattern, whole

TARGET_KEYS = ("system", "scope", "platform", "environment", "cadence", "model", "tag")
_TIERS = tuple((s, name_pattern(s.tiers)) for s in System if s.tiers)

#: Scopes (and scope endings) where a tree parks jobs that no pipeline runs.
HOLDING_PEN_SCOPES = frozenset({"flaky", "deprecated", "cleanup"})
HOLDING_PEN_SUFFIXES = ("-broken", "-temp-disabled")


def is_holding_pen(scope: str | None) -> bool:
    """`mr-broken`, `mr-github-temp-disabled`, `flaky`, `deprecated`, `cleanup`..."""
    return scope is not None and (
        scope in HOLDING_PEN_SCOPES
        or any(scope.endswith(end) and len(scope) > len(end) for end in HOLDING_PEN_SUFFIXES)
    )


def default_system(scope: str) -> System:
    """The system that runs the scope's tier (`System.tiers`: GitHub runs the L0/L1
    tiers and their legacy names, GitLab the rest)."""
    tier = resolve_scope(scope)
    return next((s for s, tiers in _TIERS if whole(tiers, tier)), OTHER_TIERS_SYSTEM)


def target_name(system: System, selector: Selector) -> str:
    parts = [system.value, selector.scope, selector.platform, selector.environment]
    if selector.cadence:
        parts.append(selector.cadence)
    return "-".join(p for p in parts if p)


def parse_target(
    text: str, config: ProjectConfig | None = None, *, system: System | None = None
) -> Target:
    """`system=gitlab,scope=mr,platform=dgx_h100,environment=dev[,cadence=pr]`.

    Without `system=`, `system` (the command's own, for `github` and `gitlab`)
    else the scope's usual system (see default_system)."""
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
                f'--target "{text}": unknown system "{fields["system"]}"; '
                f"use {' or '.join(s.value for s in System)}"
            ) from None
    elif system is None:
        system = default_system(fields["scope"])
    selector = Selector(**{key: value for key, value in fields.items() if key != "system"})
    return _ad_hoc(system, selector, config)


def _ad_hoc(system: System, selector: Selector, config: ProjectConfig | None) -> Target:
    """A target of the system's shared settings (none without a config), named
    by its place, then its model and tag: the unit-test targets of one place
    differ by tag alone (gitlab-unit-tests-dgx_h100-dev-latest)."""
    name = "-".join([target_name(system, selector), *filter(None, (selector.model, selector.tag))])
    return Target(
        name=name,
        system=system,
        selector=selector,
        settings=system_settings(config or DEFAULT_CONFIG, system),
    )


def discover_targets(
    jobs: Iterable[Job],
    *,
    holding_pen: bool = False,
    exclude_platforms: Collection[str] = (),
) -> list[Target]:
    """Every scope x platform x environment the jobs use, each once; holding-pen
    scopes only with `holding_pen`, and never the platforms in `exclude_platforms`
    (those validate reports as typos)."""
    left_out = frozenset(exclude_platforms)
    # The distinct triples first (a few dozen among tens of thousands of jobs),
    # then the tests on each.
    seen = sorted(
        (scope, platform, environment)
        for scope, platform, environment in {(j.scope, j.platform, j.environment) for j in jobs}
        if scope
        and platform
        and environment
        and platform not in left_out
        and (holding_pen or not is_holding_pen(scope))
    )
    found = []
    for scope, p, e in seen:
        selector = Selector(scope=scope, platform=p, environment=e)
        found.append(_ad_hoc(default_system(scope), selector, None))
        # Scopes another system runs as well (GitHub builds its unit-test bucket
        # matrix from the same rows: `jet-buckets`), a target there too.
        found += [
            _ad_hoc(other, selector, None)
            for other in System
            if other is not default_system(scope) and scope in other.also_runs
        ]
    return found


def legacy_names(targets: Iterable[Target]) -> dict[str, Target]:
    """The names of implied targets as users say them, with the legacy scope name
    of their tier: `gitlab-nightly-dgx_h100-dev` for `gitlab-L2-dgx_h100-dev`,
    `gitlab-weekly-...` for `gitlab-L3-...`, `github-mr-github-...` for
    `github-L1-...`. Each is the same target (Megatron-LM's parser selects the
    same rows for `--scope nightly` and `--scope L2`), printed by its own name."""
    names: dict[str, Target] = {}
    for target in targets:
        for name, (tier, _) in LEGACY_SCOPE_ALIASES.items():
            if target.selector.scope == tier:
                alias = target_name(target.system, replace(target.selector, scope=name))
                names.setdefault(alias, target)
    return names


def lookup_target(
    text: str,
    config: ProjectConfig,
    jobs: Sequence[Job],
    *,
    system: System | None = None,
) -> Target:
    """One `--target` value: a configured target's name, a discovered target's name
    (holding-pen scopes included: asking by name is asking for it), else
    `key=value` pairs. Errors quote the value as typed."""
    found = config.target(text)
    if found is not None:
        return found
    found_targets = discover_targets(jobs, holding_pen=True)
    discovered = {t.name: t for t in found_targets}
    legacy = legacy_names(found_targets)
    target = discovered.get(text) or legacy.get(text)
    if target is not None:
        return _ad_hoc(target.system, target.selector, config)
    if "=" in text:
        return parse_target(text, config, system=system)
    configured = [t.name for t in config.targets]
    known = configured or [t.name for t in discover_targets(jobs)]
    hint = did_you_mean(text, [*configured, *discovered, *legacy])
    if not hint:
        shown = ", ".join(known[:8]) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
        hint = f"; known: {shown}" if known else "; this tree has no target"
    raise UsageError(
        f'--target "{text}": no target has this name{hint} '
        "(or give key=value pairs: scope=...,platform=...,environment=...)"
    )


def resolve_targets(
    config: ProjectConfig,
    jobs: Sequence[Job],
    *,
    values: Sequence[str] = (),
    specs: Sequence[str] = (),
    names: Sequence[str] = (),
    system: System | None = None,
    holding_pen: bool = False,
    exclude_platforms: Collection[str] = (),
) -> list[Target]:
    """The targets a command works on: the ones asked for (`values` as
    lookup_target reads them; `names` and `specs` only as names, or only as
    key=value pairs), else the configured ones, else (a tree without config) the
    ones the jobs imply (see discover_targets)."""
    targets: list[Target] = [lookup_target(v, config, jobs, system=system) for v in values]
    for name in names:
        target = lookup_target(name, config, jobs, system=system)
        if target.name != name:  # a name, not key=value pairs
            raise UsageError(f'--target "{name}": no target has this name')
        targets.append(target)
    targets.extend(parse_target(spec, config, system=system) for spec in specs)
    if targets:
        names_seen: set[str] = set()
        for target in targets:
            if target.name in names_seen:
                raise UsageError(f'target "{target.name}" is given twice')
            names_seen.add(target.name)
        return targets
    if config.targets:
        return list(config.targets)
    return discover_targets(jobs, holding_pen=holding_pen, exclude_platforms=exclude_platforms)
