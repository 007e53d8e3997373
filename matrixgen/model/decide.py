"""Trigger decisions: what a CI event (and the labels on its pull or merge request)
runs, as data in the project config instead of shell conditionals in a workflow.

    decisions:
      github:
        events:                       # the event's own rule: the base of a decision
          pull_request: {scope: L0, cadence: pr}
          merge_group: {scope: L1, cadence: mergegroup, n_repeat: 1}
        labels:                       # listed in order of precedence
          - {label: Run tests, events: [pull_request], scope: L1, n_repeat: 1,
             lightweight: true, cadence: any}
          - {label: "container::lts", environment: lts}

Precedence: a label rule overrides the event's rule for the fields it sets; when
several labels are present, the first one listed wins each field it sets (a later
label still sets the fields no earlier one set). `cadence: any` bypasses the
cadence filter. A decision picks the configured targets of the system and the
decided scope, one per platform and environment, with the decided environment
and cadence; where no configured target has exactly that selector, an ad hoc one
is made from the configured target's settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.model.errors import UsageError, did_you_mean
from matrixgen.model.jobs import Selector, Target
from matrixgen.model.vocab import System, resolve_scope
from matrixgen.systems.ci import running_all
from matrixgen.util.values import JsonLayout

# Events whose pipelines carry the labels of a pull or merge request.
LABELLED_EVENTS = frozenset({"pull_request", "merge_request_event"})
ANY_CADENCE = "any"
# The fields a rule may set, in the order a decision shows them.
FIELDS = ("scope", "cadence", "environment", "n_repeat", "lightweight")


class Rule(Struct, frozen=True, kw_only=True):
    """One rule of `decisions.<system>`: an event's own, or a label's."""

    system: System
    event: str | None = None  # an event rule
    label: str | None = None  # a label rule
    events: tuple[str, ...] = ()  # a label rule's events (empty: every labelled event)
    values: Mapping[str, Any] = field(default_factory=dict)
    where: tuple[str | int, ...] = ()

    @property
    def name(self) -> str:
        return f"event {self.event}" if self.event is not None else f'label "{self.label}"'

    def applies_to(self, event: str) -> bool:
        return not self.events or event in self.events


class Decisions(Struct, frozen=True, kw_only=True):
    """The rules of one system."""

    system: System
    events: Mapping[str, Rule]
    labels: tuple[Rule, ...] = ()


class Decision(Struct, frozen=True, kw_only=True):
    """What one event runs: the decided fields, the rule behind each, the targets."""

    system: System
    event: str
    labels: tuple[str, ...]
    scope: str
    cadence: str | None  # None: the cadence filter is bypassed
    environment: str | None  # None: each configured target's own
    n_repeat: int | None  # None: each job's own
    lightweight: bool
    fired: tuple[str, ...]  # the rules that fired, in precedence order
    set_by: Mapping[str, str]  # field -> the rule that decided it
    ignored_labels: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()

    # Its JSON (`matrixgen decide --format json`): the cadence `any` when bypassed,
    # the rules that fired, the targets by name.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            *((k, k) for k in ("system", "event", "labels", "ignored_labels", "scope")),
            ("cadence", "cadence_shown"),
            *((k, k) for k in ("environment", "n_repeat", "lightweight")),
            ("rules", "fired"),
            ("set_by", "set_by"),
            ("targets", "target_names"),
        )
    )

    @property
    def cadence_shown(self) -> str:
        return self.cadence if self.cadence is not None else ANY_CADENCE

    @property
    def target_names(self) -> list[str]:
        return [t.name for t in self.targets]


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
            for key in taken:
                values[key] = rule.values[key]
                set_by[key] = rule.name
                decided_by_label.add(key)
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
