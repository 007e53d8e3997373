"""The project config's `decisions` section read into the trigger decisions'
rules (`model.decide`): each rule checked against the vocabulary, and every
rule that can never fire, or that clashes with another, a finding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from msgspec import Struct

from matrixgen.documents.config_sections import DecisionRule, SystemDecisions, Vocabulary
from matrixgen.model.decide import ANY_CADENCE, FIELDS, LABELLED_EVENTS, Decisions, Rule
from matrixgen.model.errors import Findings, did_you_mean
from matrixgen.model.vocab import System


def parse_decisions(
    doc: Any, vocabulary: Vocabulary, locate: Any, findings: Findings
) -> dict[System, Decisions]:
    """`decisions` of the project config (documents/config_sections.Decisions)."""
    out: dict[System, Decisions] = {}
    for system in sorted(System) if doc is not None else ():
        section = doc.of(system)
        if section is None:
            continue
        scopes = list(vocabulary.scopes.get(system, ()))
        reader = _RuleReader(system, scopes, vocabulary, locate, findings)
        events = reader.event_rules(section)
        labels = reader.label_rules(section, events)
        out[system] = Decisions(
            system=system, events=MappingProxyType(events), labels=tuple(labels)
        )
    return out


class _RuleReader(Struct):
    """One system's rules read, each problem a finding at its place in the config."""

    system: System
    scopes: list[str]  # the system's
    vocabulary: Vocabulary
    locate: Any
    findings: Findings

    def add(self, where: Sequence[str | int], message: str) -> None:
        self.findings.add(self.locate(list(where)), "config-decision", message)

    def event_rules(self, section: SystemDecisions) -> dict[str, Rule]:
        """The `events` rules: one per known event, each naming its scope."""
        system, known_events = self.system, self.system.events
        events: dict[str, Rule] = {}
        for event, rule in section.events.items():
            values = _set(rule, (*FIELDS, "description"))
            where = ("decisions", system.value, "events", event)
            if event not in known_events:
                self.add(
                    where,
                    f'unknown {system.value} event "{event}"{did_you_mean(event, known_events)}; '
                    f"known: {', '.join(known_events)}",
                )
                continue
            if "scope" not in values:
                self.add(where, f"event {event}: an event's rule must name the scope it runs")
            self.check_values(values, where)
            events[event] = Rule(system=system, event=event, values=dict(values), where=where)
        return events

    def label_rules(self, section: SystemDecisions, events: Mapping[str, Rule]) -> list[Rule]:
        """The `labels` rules: each on events that have a rule and carry labels,
        setting something, and not clashing with an earlier one."""
        system = self.system
        labels: list[Rule] = []
        for i, item in enumerate(section.labels):
            where = ("decisions", system.value, "labels", i)
            values = _set(item, FIELDS)
            rule = Rule(
                system=system,
                label=item.label,
                events=item.events,
                values=values,
                where=where,
            )
            for event in rule.events:
                if event not in events:
                    self.add(
                        [*where, "events"],
                        f'label "{rule.label}": event "{event}" has no rule of its own in '
                        f"decisions.{system.value}.events{did_you_mean(event, list(events))}",
                    )
                elif event not in LABELLED_EVENTS:
                    labelled = sorted(LABELLED_EVENTS & set(system.events))
                    self.add(
                        [*where, "events"],
                        f'label "{rule.label}": {event} pipelines carry no labels '
                        f"(only {', '.join(labelled)} do)",
                    )
            if not values:
                self.add(where, f'label "{rule.label}" sets nothing ({", ".join(FIELDS)})')
            for index, earlier in enumerate(labels):
                self.check_clash(earlier, index, rule, i, events)
            self.check_values(values, where)
            labels.append(rule)
        return labels

    def check_clash(
        self, earlier: Rule, earlier_index: int, rule: Rule, index: int, events: Mapping[str, Rule]
    ) -> None:
        """The same label listed twice for a shared event: the first always wins."""
        labelled = [e for e in events if e in LABELLED_EVENTS]
        shared = [e for e in labelled if earlier.applies_to(e) and rule.applies_to(e)]
        if earlier.label != rule.label or not shared:
            return
        clash = sorted(
            k for k in set(earlier.values) & set(rule.values) if earlier.values[k] != rule.values[k]
        )
        what = f"sets {', '.join(clash)} differently" if clash else "repeats it"
        self.add(
            rule.where,
            f'label "{rule.label}" is listed twice for {", ".join(shared)} '
            f"(items {earlier_index} and {index}); the second {what}, and the "
            "first always wins: merge them into one rule",
        )

    def check_values(self, values: Mapping[str, Any], where: tuple[str | int, ...]) -> None:
        scope = values.get("scope")
        if scope is not None and scope not in self.scopes:
            self.add(
                [*where, "scope"],
                f'unknown {self.system.value} scope "{scope}"{did_you_mean(scope, self.scopes)}; '
                f"declared: {', '.join(self.scopes)}",
            )
        env = values.get("environment")
        environments = self.vocabulary.environments
        if env is not None and env not in environments:
            self.add(
                [*where, "environment"],
                f'unknown environment "{env}"{did_you_mean(env, environments)}',
            )
        cadence = values.get("cadence")
        cadences = self.vocabulary.cadences
        if cadence is not None and cadence != ANY_CADENCE and cadence not in cadences:
            self.add(
                [*where, "cadence"],
                f'cadence "{cadence}" is not declared (vocabulary.cadences: '
                f"{', '.join(sorted(cadences))}; or {ANY_CADENCE} to bypass the cadence "
                "filter)",
            )


def _set(rule: DecisionRule, names: Sequence[str]) -> dict[str, Any]:
    """The fields a rule sets (the ones it writes), by name."""
    return {name: value for name in names if (value := getattr(rule, name)) is not None}
