"""The values that flow through the pipeline. All are frozen: stages build new
values, they never edit the ones they were given."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct, field

from matrixgen.engine.errors import Location
from matrixgen.engine.templates import TemplateError, render
from matrixgen.engine.vocab import RecipeType, System
from matrixgen.engine.yamlio import YamlDocument
from matrixgen.util.values import ComparedValue

EMPTY_MAPPING: Mapping[str, Any] = MappingProxyType({})


class JobId(Struct, frozen=True, order=True):
    """What makes two jobs the same job across branches (docs/recipe-format.md)."""

    model: str
    test_case: str
    environment: str
    platform: str
    tag: str  # "" when the job has no tag, so ids sort without None

    def __str__(self) -> str:
        tag = f"[{self.tag}]" if self.tag else ""
        return f"{self.model}/{self.test_case}{tag} on {self.platform}/{self.environment}"


class QuarantineMark(Struct, frozen=True, kw_only=True):
    """The quarantine entry that applies to a job in one target.

    `node_ids` are the pytest node ids of every node-level entry (deselect and
    mute) that applies; `muted` the ones of them that a mute entry runs without
    letting them fail the job (the pytest plugin applies those)."""

    id: str
    tracker: str
    action: str
    kind: str
    node_ids: tuple[str, ...] = ()
    muted: tuple[str, ...] = ()

    @property
    def deselected(self) -> tuple[str, ...]:
        """The node ids a deselect entry takes out of the job."""
        return tuple(n for n in self.node_ids if n not in self.muted)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "tracker": self.tracker,
            "action": self.action,
            "kind": self.kind,
        }
        if self.node_ids:
            out["node_ids"] = list(self.node_ids)
        if self.muted:
            out["muted"] = list(self.muted)
        return out


class Job(ComparedValue, frozen=True, kw_only=True):
    """One expanded row: a test case with one value per axis, attributes resolved."""

    model: str
    test_case: str
    environment: str
    platform: str
    tag: str | None
    scope: str | None
    cadence: tuple[str, ...]
    name: str
    build: str | None
    n_repeat: int
    time_limit: int
    nodes: int | None = None
    gpus: int | None = None
    allow_failure: bool = False
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()
    # Every resolved spec field (script, extra axes, ...), for diffs and emitters.
    spec: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    recipe: str = ""
    source: Location = Location("")
    quarantine: QuarantineMark | None = None
    # The scope as the project config declares it (`nightly`), where that differs
    # from the tier `scope` holds for matching (`L2`); None: shown as `scope`.
    declared_scope: str | None = None
    # Where every definition of this job is (file:line of each row), when more
    # than one row defines the same identity in the same scope; () otherwise.
    definitions: tuple[Location, ...] = ()

    def compared(self) -> tuple:
        """What makes two jobs the same job: every field but where it was read
        (recipe, source, definitions), the resolved spec and the scope as
        declared. Equality and hashing use these only."""
        return (
            self.model,
            self.test_case,
            self.environment,
            self.platform,
            self.tag,
            self.scope,
            self.cadence,
            self.name,
            self.build,
            self.n_repeat,
            self.time_limit,
            self.nodes,
            self.gpus,
            self.allow_failure,
            self.env,
            self.args,
            self.quarantine,
        )

    @property
    def identity(self) -> JobId:
        return JobId(self.model, self.test_case, self.environment, self.platform, self.tag or "")

    @property
    def shown_scope(self) -> str | None:
        """The scope as users name it: the declared name, else the tier."""
        return self.declared_scope or self.scope

    @property
    def locations(self) -> tuple[Location, ...]:
        """Every row that defines this job (one, unless it is duplicated)."""
        return self.definitions or (self.source,)

    def duplicate_key(self) -> tuple[str, ...]:
        """Identity and scope: one job per key in a target."""
        return (
            self.model,
            self.test_case,
            self.environment,
            self.platform,
            self.tag or "",
            self.scope or "",
        )

    def sort_key(self) -> tuple:
        """Identity, then scope and cadence: a total order for deterministic output."""
        return (
            self.model,
            self.test_case,
            self.environment,
            self.platform,
            self.tag or "",
            self.scope or "",
            self.cadence,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `list --format json` (and of jobs in diffs)."""
        out: dict[str, Any] = {
            "model": self.model,
            "test_case": self.test_case,
            "tag": self.tag,
            "environment": self.environment,
            "platform": self.platform,
            "scope": self.shown_scope,
            "cadence": list(self.cadence),
            "name": self.name,
            "build": self.build,
            "n_repeat": self.n_repeat,
            "time_limit": self.time_limit,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "allow_failure": self.allow_failure,
            "env": dict(self.env),
            "args": list(self.args),
            "recipe": self.recipe,
        }
        if self.quarantine is not None:
            out["quarantine"] = self.quarantine.to_dict()
        return out


class RecipeFile(Struct, frozen=True, kw_only=True):
    """One parsed recipe file of a tree."""

    path: str  # as shown in messages (tree root joined with rel)
    rel: str  # relative to the tree root, '/'-separated
    document: YamlDocument
    kind: RecipeType
    format_version: int

    @property
    def data(self) -> Any:
        return self.document.data


class Selector(Struct, frozen=True, kw_only=True):
    """What a target asks for; None means 'any'. Matching lives in select.py."""

    scope: str | None = None
    cadence: str | None = None
    environment: str | None = None
    platform: str | None = None
    model: str | None = None
    tag: str | None = None
    test_cases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "platform": self.platform,
            "environment": self.environment,
            "cadence": self.cadence,
        }


class Target(ComparedValue, frozen=True, kw_only=True):
    """One place jobs go: a system plus a selector, and that system's settings."""

    name: str
    system: System
    selector: Selector
    settings: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)

    def compared(self) -> tuple:
        """Name, system and selector: the settings come with the system (and are
        not hashable)."""
        return (self.name, self.system, self.selector)

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system.value, **self.selector.to_dict()}


def spec_needs(job: Job) -> list[tuple[int, str]]:
    """(index, job name) for each entry of the job's spec.needs, templates rendered.
    An entry whose template does not render is kept as written."""
    needs = job.spec.get("needs")
    if not isinstance(needs, list):
        return []
    out = []
    for i, template in enumerate(needs):
        if not isinstance(template, str):
            continue
        try:
            out.append((i, render(template, job.spec)))
        except TemplateError:
            out.append((i, template))
    return out
