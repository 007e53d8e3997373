"""Which targets a diff compares, each as the base and the head define it: the
ones asked for (`--target`, `--target-name`), else every target configured on
either side, else every scope x platform x environment used on either side
(Megatron-LM's habit scopes only with --holding-pen)."""

from __future__ import annotations

from collections.abc import Sequence

from matrixgen.diff.model import TargetPair
from matrixgen.engine.checks import typo_platforms
from matrixgen.engine.targets import discover_targets, is_holding_pen, parse_target
from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Target
from matrixgen.pipeline import Generation


def resolve_diff_targets(
    base: Generation,
    head: Generation,
    *,
    values: Sequence[str] = (),
    holding_pen: bool = False,
) -> list[TargetPair]:
    """The targets to compare, each as the base and the head define it;
    `values` are `--target` values: a target's name (configured, or discovered,
    on either side), else key=value pairs."""
    base_config, head_config = base.tree.config, head.tree.config
    # The targets the jobs imply, by name: only looked up for targets given.
    discovered = (
        {t.name: t for t in discover_targets([*base.jobs, *head.jobs], holding_pen=True)}
        if values
        else {}
    )

    def named(value: str) -> bool:
        if "=" not in value or value in discovered:
            return True
        return base_config.target(value) is not None or head_config.target(value) is not None

    pairs: list[TargetPair] = []
    for name in filter(named, values):
        pair = _configured_pair(name, base, head)
        if pair is None and name in discovered:
            found = discovered[name]
            pair = TargetPair(found, found, found)
        if pair is None:
            known = sorted({t.name for t in (*base_config.targets, *head_config.targets)})
            hint = did_you_mean(name, known or list(discovered))
            if not hint:
                hint = f"; configured: {', '.join(known)}" if known else "; no target is configured"
            raise UsageError(f'--target "{name}": no target has this name{hint}')
        pairs.append(pair)
    for spec in (v for v in values if not named(v)):
        head_target = parse_target(spec, head_config)
        pairs.append(
            TargetPair(head_target, parse_target(spec, base_config), head_target, ad_hoc=True)
        )
    if pairs:
        seen: set[str] = set()
        for pair in pairs:
            if pair.shown.name in seen:
                raise UsageError(f'target "{pair.shown.name}" is given twice')
            seen.add(pair.shown.name)
        return pairs
    # In config order (head's, then the targets only the base has), as elsewhere.
    configured = list(dict.fromkeys(t.name for t in (*head_config.targets, *base_config.targets)))
    if configured:
        return [p for p in (_configured_pair(n, base, head) for n in configured) if p]
    typos = typo_platforms(base.tree) | typo_platforms(head.tree)
    return [
        TargetPair(_pen(t), t, t)
        for t in discover_targets(
            [*base.jobs, *head.jobs], holding_pen=holding_pen, exclude_platforms=typos
        )
    ]


def _pen(target: Target) -> Target:
    """A discovered holding pen, shown by a name that claims no system
    (`holding-pen-mr-broken-dgx_h100-dev`): no pipeline runs it."""
    sel = target.selector
    if not is_holding_pen(sel.scope):
        return target
    parts = ["holding-pen", sel.scope, sel.platform, sel.environment]
    from msgspec.structs import replace as _replace

    return _replace(target, name="-".join(p for p in parts if p))


def _configured_pair(name: str, base: Generation, head: Generation) -> TargetPair | None:
    """A configured target on each side. A side without a vocabulary (a tree that
    has not moved to format_version 2 yet, whose config, if any, has no targets)
    selects with the other side's definition."""
    base_target = base.tree.config.target(name)
    head_target = head.tree.config.target(name)
    if base_target is None and head_target is None:
        return None
    if base_target is None and base.tree.config.vocabulary is None:
        base_target = head_target
    if head_target is None and head.tree.config.vocabulary is None:
        head_target = base_target
    shown = head_target or base_target
    assert shown is not None
    return TargetPair(shown, base_target, head_target)
