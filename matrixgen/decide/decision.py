"""Deciding what a CI event runs (`matrixgen decide`): the event's rule, then
each label's, in the config's order of precedence (`model.decide` holds the
rules and the decision; `documents.decisions` reads them from the config), and
the configured targets the decision picks, or ad hoc ones made from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from msgspec.structs import replace

from matrixgen.model.decide import ANY_CADENCE, FIELDS, LABELLED_EVENTS, Decision, Decisions
from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System, resolve_scope
from matrixgen.systems.ci import running_all


def decide(
    rules: Mapping[System, Decisions],
    targets: Sequence[Target],
    *,
    event: str,
    labels: Sequence[str] = (),
    loose_labels: Sequence[str] = (),
    system: System | None = None,
) -> Decision:
    """The decision for one event. `labels` must each be known to a rule (a
    mistyped label is a usage error); `loose_labels` (every label of a pull
    request, say) may hold others, which are ignored and reported."""
    system = _system_for(rules, event, system)
    section = rules[system]
    base = section.events.get(event)
    if base is None:
        known = list(section.events)
        raise UsageError(
            f'--event "{event}": no rule for {system.value} event "{event}"'
            f"{did_you_mean(event, known)}; decisions.{system.value}.events: {', '.join(known)}"
        )
    known_labels = [r.label for r in section.labels if r.label is not None]
    for label in labels:
        if label not in known_labels:
            raise UsageError(
                f'--label "{label}": no rule of decisions.{system.value}.labels names it'
                f"{did_you_mean(label, known_labels)}; known: {', '.join(known_labels) or 'none'}"
            )
    present = list(dict.fromkeys([*labels, *loose_labels]))
    ignored = tuple(sorted(label for label in present if label not in known_labels))
    values: dict[str, Any] = dict(base.values)
    set_by = {k: base.name for k in values}
    fired = [base.name]
    decided_by_label: set[str] = set()
    if event in LABELLED_EVENTS:
        for rule in section.labels:
            if rule.label not in present or not rule.applies_to(event):
                continue
            taken = [k for k in rule.values if k not in decided_by_label]
            if not taken:
                continue
            fired.append(rule.name)
            values.update((key, rule.values[key]) for key in taken)
            set_by.update(dict.fromkeys(taken, rule.name))
            decided_by_label.update(taken)
    cadence = values.get("cadence")
    decision = Decision(
        system=system,
        event=event,
        labels=tuple(present),
        scope=values["scope"],
        cadence=None if cadence in (None, ANY_CADENCE) else cadence,
        environment=values.get("environment"),
        n_repeat=values.get("n_repeat"),
        lightweight=values.get("lightweight") is True,
        fired=tuple(fired),
        set_by=MappingProxyType({k: set_by[k] for k in FIELDS if k in set_by}),
        ignored_labels=ignored,
    )
    return _with_targets(decision, targets)


def _system_for(rules: Mapping[System, Decisions], event: str, system: System | None) -> System:
    if not rules:
        raise UsageError("the project config has no `decisions` section: nothing to decide")
    if system is not None:
        if system not in rules:
            raise UsageError(f"the project config has no decisions.{system.value} section")
        return system
    owners = [s for s, d in sorted(rules.items()) if event in d.events]
    if len(owners) == 1:
        return owners[0]
    # Inside a CI job, its own system's rules decide.
    running = [System(home.name) for home in running_all()]
    if len(owners) > 1 and len(running) == 1 and running[0] in owners:
        return running[0]
    if len(owners) > 1:
        raise UsageError(
            f'--event "{event}" has rules for {" and ".join(s.value for s in owners)}: '
            "give --system"
        )
    every = sorted({e for d in rules.values() for e in d.events})
    raise UsageError(
        f'--event "{event}": no rule for it{did_you_mean(event, every)}; '
        f"events with rules: {', '.join(every)}"
    )


def _with_targets(decision: Decision, configured: Sequence[Target]) -> Decision:
    """One target per platform and environment among the configured targets of
    the decided system and scope, with the decided environment and cadence."""
    scope = resolve_scope(decision.scope)
    chosen: dict[tuple[str, str], Target] = {}
    for base in sorted(configured, key=lambda t: t.name):
        if base.system is not decision.system or resolve_scope(base.selector.scope or "") != scope:
            continue
        selector = replace(
            base.selector,
            environment=decision.environment or base.selector.environment,
            cadence=decision.cadence,
        )
        key = (selector.platform or "", selector.environment or "")
        if key in chosen:
            continue
        exact = next(
            (t for t in configured if t.system is decision.system and t.selector == selector), None
        )
        template = exact or base
        chosen[key] = replace(
            template,
            name=template.name if exact is not None else _ad_hoc_name(decision, selector, base),
            selector=selector,
            n_repeat=decision.n_repeat,
            lightweight=decision.lightweight,
        )
    return replace(decision, targets=tuple(chosen[k] for k in sorted(chosen)))


def _ad_hoc_name(decision: Decision, selector: Selector, base: Target) -> str:
    """`<system>-<group>-<environment>-<cadence>` where the configured target names
    an output group (github-l1-h100-lts-any), else from the selector's values."""
    group = base.settings.group
    middle = [group] if group else [(selector.scope or "").lower(), selector.platform or ""]
    parts = [
        decision.system.value,
        *middle,
        selector.environment or "",
        selector.cadence or ANY_CADENCE,
    ]
    return "-".join(p for p in parts if p)
