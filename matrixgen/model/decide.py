"""Trigger decisions (docs/decisions.md): what a CI event and the labels on its
pull or merge request run. Here, the values: the rules read from the config
(`documents.decisions`) and a decision; deciding is `matrixgen.decide`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from msgspec import Struct, field

from matrixgen.model.jobs import Target
from matrixgen.model.vocab import System
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
