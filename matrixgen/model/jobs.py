"""The values that flow through the pipeline. All are frozen: stages build new
values, they never edit the ones they were given."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from msgspec import Struct, field

from matrixgen.model.errors import Location
from matrixgen.model.sections import SystemSettings
from matrixgen.model.templates import TemplateError, render
from matrixgen.model.vocab import System
from matrixgen.util.values import ComparedValue, JsonLayout

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
    """The quarantine entry that applies to a job in one target. `node_ids`: of
    every node-level entry that applies; `muted`: those a mute entry runs."""

    id: str
    tracker: str
    action: str
    kind: str
    node_ids: tuple[str, ...] = ()
    muted: tuple[str, ...] = ()

    # Its JSON: every field in the order declared; a list only when not empty.
    JSON: ClassVar[JsonLayout] = JsonLayout(when_set=frozenset({"node_ids", "muted"}))

    @property
    def deselected(self) -> tuple[str, ...]:
        """The node ids a deselect entry takes out of the job."""
        return tuple(n for n in self.node_ids if n not in self.muted)


class Job(ComparedValue, frozen=True, kw_only=True):
    """One expanded row: a test case with one value per axis, attributes resolved.
    A new field is compared and in the JSON unless named below the fields."""

    model: str
    test_case: str
    tag: str | None
    environment: str
    platform: str
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
    recipe: str = ""
    quarantine: QuarantineMark | None = None
    # Every resolved spec field (script, extra axes, ...), for diffs and emitters.
    spec: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    source: Location = Location("")
    # The scope as the project config declares it (`nightly`), where that differs
    # from the tier `scope` holds for matching (`L2`); None: shown as `scope`.
    declared_scope: str | None = None
    # Where every definition of this job is (file:line of each row), when more
    # than one row defines the same identity in the same scope; () otherwise.
    definitions: tuple[Location, ...] = ()

    # What makes two jobs the same job: not where it was read, nor how it is shown.
    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset(
        {"spec", "recipe", "source", "declared_scope", "definitions"}
    )
    KEY: ClassVar[tuple[str, ...]] = (*JobId.__struct_fields__, "scope")
    SORT_AFTER: ClassVar[tuple[str, ...]] = ("cadence",)
    # The JSON of `list --format json` and of jobs in diffs.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        leave_out=frozenset({"spec", "source", "declared_scope", "definitions"}),
        shown={"scope": "shown_scope"},
        as_mapping=frozenset({"env"}),
        when_set=frozenset({"quarantine"}),
    )

    @property
    def identity(self) -> JobId:
        return _IDENTITY(self)

    @property
    def label(self) -> str:
        """`model/test_case [tag]`: platform and environment are the target's."""
        return f"{self.model}/{self.test_case}" + (f" [{self.tag}]" if self.tag else "")

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
        return _DUPLICATE_KEY(self)

    def sort_key(self) -> tuple:
        """Identity, then scope and cadence: a total order for deterministic output."""
        return _SORT_KEY(self)


def _compiled(expression: str, **names: Any) -> Callable[[Any], Any]:
    """A function of one job from an expression over its fields: as fast as
    code written out by hand, for every job of a listing, sort or selection."""
    return eval(f"lambda j: {expression}", names)  # from Job's own field names


_KEY_PARTS = [f'(j.{n} or "")' for n in Job.KEY]  # None as "", as in every key
_DUPLICATE_KEY = _compiled(f"({', '.join(_KEY_PARTS)},)")
_SORT_KEY = _compiled(f"({', '.join([*_KEY_PARTS, *(f'j.{n}' for n in Job.SORT_AFTER)])},)")

_IDENTITY = _compiled(
    "JobId(" + ", ".join(f'(j.{n} or "")' for n in JobId.__struct_fields__) + ")", JobId=JobId
)


class Selector(Struct, frozen=True, kw_only=True):
    """What a target asks for; None means 'any'. Matching lives in select.py."""

    scope: str | None = None
    platform: str | None = None
    environment: str | None = None
    cadence: str | None = None
    model: str | None = None
    tag: str | None = None
    test_cases: tuple[str, ...] = ()


class TargetPlace(Struct, frozen=True, kw_only=True):
    """Where a target's jobs go, as reports name a target."""

    system: System
    scope: str | None
    platform: str | None
    environment: str | None
    cadence: str | None


class Target(ComparedValue, frozen=True, kw_only=True):
    """One place jobs go: a system, a selector, its settings (its own over the
    system's) and what a decision sets for every job."""

    name: str
    system: System
    selector: Selector
    settings: SystemSettings = SystemSettings()
    description: str | None = None
    # The launcher loads the recipe again at run time (None: as the tree's format says).
    rereads_recipe: bool | None = None
    n_repeat: int | None = None  # a decision's n_repeat (None: each job's own)
    lightweight: bool = False  # a decision's lightweight mode

    # Name, system and selector count: the rest comes with the system, the
    # config or the decision.
    NOT_COMPARED: ClassVar[frozenset[str]] = frozenset(
        {"settings", "description", "rereads_recipe", "n_repeat", "lightweight"}
    )

    @property
    def place(self) -> TargetPlace:
        """The system, and the selector's fields the place names."""
        picked = [k for k in TargetPlace.__struct_fields__ if k != "system"]
        return TargetPlace(system=self.system, **{k: getattr(self.selector, k) for k in picked})


def spec_needs(job: Job) -> list[tuple[int, str]]:
    """(index, job name) of each spec.needs entry, rendered (else as written)."""
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
