"""The project config (`matrixgen.yaml`), declared once: a Struct per section.

`ConfigDocument` is the file; its schema, check and typed values come from these
declarations (docs/config.md). What no schema states (a target's scope, a
template that renders, a decision that can fire) is checked in documents/config.py.
Each CI system's settings Struct (`SYSTEM_SETTINGS`) makes the `systems` section
and that system's targets (`per_system`, `TARGETS`), see docs/emitters.md.
"""

# Annotations are evaluated where they are written (no `from __future__ import
# annotations`): the targets of each system are made from the settings' fields.
import functools
import importlib
import operator
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from msgspec import Meta, Struct, defstruct, field

from matrixgen.model.sections import (
    Arch,
    EnvName,
    Key,
    Names,
    Positive,
    Scopes,
    Section,
    SystemSettings,
    Text,
    Texts,
    Unique,
    Url,
    Word,
)
from matrixgen.model.vocab import (
    DEFAULT_MAX_JOBS,
    DEFAULT_N_REPEAT,
    DEFAULT_TIME_LIMIT,
    MAX_JOBS_CEILING,
    Cadence,
    QuarantineKind,
    System,
    resolve_scope,
)
from matrixgen.systems import HOMES, names


class Vocabulary(Section, frozen=True, kw_only=True):
    platforms: Names
    environments: Names
    scopes: Annotated[dict[System, Scopes], Meta(min_length=1)]
    cadences: Annotated[frozenset[Cadence], Meta(min_length=1)] = frozenset(Cadence)
    tags: Names | None = None
    models: Names | None = None
    axes: Names = frozenset()
    spec_keys: Names = frozenset()

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "scopes": "Scopes per system; legacy names (nightly, mr-github, ...) may be used and "
        "resolve to their tier.",
        "axes": "Extra row keys allowed as axes besides the built-in ones.",
        "spec_keys": "Extra spec keys allowed besides the built-in ones.",
    }

    @property
    def all_scopes(self) -> frozenset[str]:
        """Every scope of every system, with the tier each legacy name resolves to."""
        names = {s for scopes in self.scopes.values() for s in scopes}
        return frozenset(names | {resolve_scope(s) for s in names})

    def declared(self, key: str) -> frozenset[str] | None:
        """The values declared for a job field (scope, platform, environment,
        model, tag); None when none are (no list for it; test cases never)."""
        return {
            "scope": self.all_scopes,
            "platform": self.platforms,
            "environment": self.environments,
            "model": self.models,
            "tag": self.tags,
        }.get(key)


class Defaults(Section, frozen=True, kw_only=True):
    time_limit: Positive = DEFAULT_TIME_LIMIT
    n_repeat: Positive = DEFAULT_N_REPEAT
    max_jobs: Annotated[int, Meta(ge=1, le=MAX_JOBS_CEILING)] = DEFAULT_MAX_JOBS

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "time_limit": "Seconds; 2700 when unset.",
        "n_repeat": "5 when unset.",
        "max_jobs": "Cap on the jobs one tree may expand to; 100000 when unset, at most 500000 "
        "(matrixgen's own ceiling).",
    }


class PlatformInfo(Section, frozen=True, kw_only=True):
    arch: Arch | None = None
    counted: bool = True
    alias_of: Text | None = None
    runner_tags: tuple[Text, ...] | None = None
    cluster: str | None = None
    gpu_hour_weight: Annotated[float, Meta(gt=0)] | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "counted": "false: left out of counts and stats by default.",
        "alias_of": "This platform is a variant (e.g. one-node) of another: stats count it "
        "under that one too.",
        "gpu_hour_weight": "What one GPU-hour of this platform costs against the others "
        "(default 1): `stats --cost` and the diff weigh its GPU-hours by it.",
    }


class ImagePin(Section, frozen=True, kw_only=True):
    repository: Word
    tag: Word
    version: str | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "tag": "A string: quote tags that look like numbers.",
        "version": "This pin's own version when it differs from images.version on purpose.",
    }

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.tag}"


class ImageSet(Section, frozen=True, kw_only=True):
    """One pin for every architecture (repository, tag), or one per architecture."""

    repository: Word | None = None
    tag: Word | None = None
    version: str | None = None
    amd64: ImagePin | None = None
    arm64: ImagePin | None = None

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "One pin for every architecture, or one per architecture.",
        "if": {"required": ["repository"]},
        "then": {"required": ["repository", "tag"], "properties": {"amd64": False, "arm64": False}},
        "else": {"minProperties": 1, "properties": {"tag": False, "version": False}},
    }

    @property
    def shared(self) -> ImagePin | None:
        """The one pin of every architecture, when it is written so."""
        if self.repository is None or self.tag is None:
            return None
        return ImagePin(repository=self.repository, tag=self.tag, version=self.version)

    def pins(self) -> dict[str, ImagePin]:
        """Each pin by its architecture ("" for the one of every architecture)."""
        if self.shared is not None:
            return {"": self.shared}
        return {a: p for a in ("amd64", "arm64") if (p := getattr(self, a)) is not None}


def per_system(
    name: str,
    kind: Any,
    *,
    before: tuple[tuple[Any, ...], ...] = (),
    after: tuple[tuple[Any, ...], ...] = (),
    schema: Mapping[str, Any] | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> Any:
    """A section with the fields `before`, one optional field per CI system (of
    `kind`, or `kind[system]` when it is a mapping), then `after`; `.of(system)`
    reads a system's."""
    kinds = kind if isinstance(kind, Mapping) else dict.fromkeys(System, kind)
    return defstruct(
        name,
        [*before, *((s.value, kinds[s] | None, None) for s in System), *after],
        bases=(Section,),
        kw_only=True,
        frozen=True,
        namespace={
            "SCHEMA": dict(schema or {}),
            "DESCRIPTIONS": dict(descriptions or {}),
            "of": _of,
            "__doc__": None,
        },
    )


def _of(self: Any, system: System) -> Any:
    """This section's value for one system (None when it has none)."""
    return getattr(self, system.value)


EnvironmentImages = per_system("EnvironmentImages", ImageSet, schema={"minProperties": 1})
Images = per_system(
    "Images",
    ImageSet,
    before=(("version", Word | None, None), ("version_pattern", Text | None, None)),
    after=(("environments", dict[str, EnvironmentImages], field(default_factory=dict)),),
    schema={
        "description": "Container image pins per system (and architecture; optionally per "
        "environment). Every pin's tag carries a version; they must agree (`matrixgen "
        "validate`, `matrixgen pins`)."
    },
    descriptions={
        "version": 'The version every pin without its own must carry, e.g. "26.09" (quote it: '
        "26.10 unquoted is the number 26.1). Unset: the pins must agree with each other.",
        "version_pattern": "Regular expression that finds the version in a tag; its first group "
        "(or the whole match). Default (\\d{2}\\.\\d{2}).",
        "environments": "Pins for one environment (e.g. lts), used before the system's own.",
    },
)


class PinExclude(Section, frozen=True, kw_only=True):
    models: Names | None = None
    platforms: Names | None = None
    environments: Names | None = None
    test_cases: Names | None = None

    SCHEMA: ClassVar[Mapping[str, Any]] = {"minProperties": 1}
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {"test_cases": "Test case names or globs."}


class Pin(Section, frozen=True, kw_only=True):
    env: Annotated[dict[EnvName, str | int | float | bool], Meta(min_length=1)] | None = None
    args: Texts | None = None
    models: Names | None = None
    platforms: Names | None = None
    environments: Names | None = None
    exclude: PinExclude | None = None
    reason: str | None = None

    SCHEMA: ClassVar[Mapping[str, Any]] = {"anyOf": [{"required": ["env"]}, {"required": ["args"]}]}


# --------------------------------------------------------------------------- systems


# Each CI system's settings (by the system each names): `systems.<system>` and
# the targets of the system take them.
SYSTEM_SETTINGS: Mapping[System, type[SystemSettings]] = {
    System(home.name): importlib.import_module(home.part("settings") or "").SETTINGS
    for home in HOMES
}
Systems = per_system(
    "Systems",
    SYSTEM_SETTINGS,
    schema={
        "description": "Settings shared by every target of a system; a target may override them."
    },
)


class TargetFields(Section, frozen=True, kw_only=True):
    """What a target selects, whatever its system (its settings follow)."""

    scope: str
    platform: str
    environment: str
    cadence: Annotated[Cadence | None, Meta(extra={"nullable": True})] = None
    model: str | None = None
    tag: str | None = None
    description: str | None = None
    rereads_recipe: bool | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "rereads_recipe": "The target's launcher loads the recipe again at run time and submits "
        "its resolved workload (as Megatron-LM's launcher does; every target of a "
        "format_version 1 tree is taken so): `diff` then compares every resolved workload "
        "field of its jobs, not only the emitted ones."
    }


def _target(system: System) -> Any:
    """A target of one system: its selector's fields, then its system's settings."""
    settings = SYSTEM_SETTINGS[system]
    return defstruct(
        f"{system.value.capitalize()}Target",
        [*_fields(TargetFields), *_fields(settings)],
        bases=(Section,),
        kw_only=True,
        frozen=True,
        tag_field="system",
        tag=system.value,
        namespace={
            "system": property(_system),
            "DESCRIPTIONS": {**TargetFields.DESCRIPTIONS, **getattr(settings, "DESCRIPTIONS", {})},
        },
    )


def _fields(cls: type[Struct]) -> list[tuple[Any, ...]]:
    """A Section's fields as `defstruct` takes them (its annotations are types)."""
    annotations = (getattr(base, "__annotations__", {}) for base in reversed(cls.__mro__))
    types: dict[str, Any] = {name: kind for each in annotations for name, kind in each.items()}
    names, defaults = cls.__struct_fields__, cls.__struct_defaults__
    # The defaults are those of the last fields (msgspec's own layout).
    given = {
        name: field(default_factory=d.factory) if hasattr(d, "factory") else d
        for name, d in zip(names[len(names) - len(defaults) :], defaults, strict=True)
    }
    return [(n, types[n], given[n]) if n in given else (n, types[n]) for n in names]


def _system(self: Any) -> System:
    return System(type(self).__struct_config__.tag)


TARGETS: Mapping[System, Any] = {s: _target(s) for s in System}
AnyTarget = functools.reduce(operator.or_, TARGETS.values())


# --------------------------------------------------------------------------- the rest


class Jet(Section, frozen=True, kw_only=True):
    runner_tags: tuple[str, ...] | None = None
    clusters: dict[str, str] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Megatron-LM's JET pipelines (`matrixgen jet-trigger`): runner tags of "
        "every job, and cluster names resolved as that project's CI resolves them."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "runner_tags": "Runner tags every job carries (beside its cluster's).",
        "clusters": "Cluster name -> resolved name (e.g. dgxh100_eos: eos); extends the "
        "built-in map.",
    }


class QuarantinePolicy(Section, frozen=True, kw_only=True):
    """The quarantine's settings (entries live in quarantine.yaml next to the config)."""

    default_owner: Annotated[str, Meta(pattern="\\S")] | None = None
    tracker_base: Url | None = None
    api_url: Url | None = None
    grace_days: Annotated[int, Meta(ge=0)] = 14
    default_expiry_days: Positive = 30

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Quarantine policy (entries live in quarantine.yaml next to this file)."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "default_owner": "Owner of the entries `quarantine add` and `migrate` write when none "
        "is given (migrate: when the recipe names no maintainers either).",
        "tracker_base": "URL that a tracker written as #N resolves against: tracker_base + N "
        "(for example https://github.com/OWNER/REPO/issues/).",
        "api_url": "Refused: where the tracker token is sent is not read from the tree (a pull "
        "request could change it). Give the API root with `quarantine audit --api-url` or "
        "GITHUB_API_URL.",
        "grace_days": "An expired entry is a warning for this many days, then an error "
        "(default 14).",
        "default_expiry_days": "`quarantine add` and `migrate` set expires to added + this many "
        "days when none is given (default 30).",
    }


class References(Section, frozen=True, kw_only=True):
    templates: Annotated[dict[Key, Text], Meta(min_length=1)]
    root: str = ""
    gating: Annotated[tuple[Text, ...], Unique] = ()
    refuse_generate: bool = False

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "The reference files each functional job compares with (`matrixgen "
        "coverage`; a missing one is a `validate` error in gating targets, a warning "
        "elsewhere). A recipe spec or a row opts out with references: {skip: all | [NAME, "
        "...], reason: TEXT}."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "templates": "NAME: path template relative to the root, over the job's fields "
        "({model}, {test_case}, {environment}, {platforms} or {platform}, {tag}, {scope}, any "
        "spec field), e.g. golden: tests/functional_tests/test_cases/{model}/{test_case}/"
        "golden_values_{environment}_{platforms}.json",
        "root": "The reference tree's directory relative to the top of the repository "
        "(default: the top; outside a git checkout, the recipe tree's parent directory).",
        "gating": "Target names or globs: a missing reference of theirs is a `validate` error "
        "(elsewhere a warning).",
        "refuse_generate": f"true: generate, {' and '.join(names())} refuse to run while a "
        "gating target misses a reference (default false).",
    }


class Changes(Section, frozen=True, kw_only=True):
    ignore: tuple[Text, ...] = ()

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Change-based selection (`--changed-since`)."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "ignore": "Globs of repository paths no case needs (docs, say): a change to them alone "
        "runs only the `always` cases."
    }


class DecisionRule(Section, frozen=True, kw_only=True):
    """What one rule sets (an event's own, or a label's)."""

    scope: Text | None = None
    cadence: Text | None = None
    environment: Text | None = None
    n_repeat: Positive | None = None
    lightweight: bool | None = None
    description: str | None = None

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "cadence": "The cadence the targets select; `any` bypasses the cadence filter.",
        "lightweight": "Run the launcher's lightweight mode (GitHub: the row's `lightweight`; "
        "GitLab: `--lightweight`).",
    }


class LabelRule(DecisionRule, frozen=True, kw_only=True):
    label: Text
    events: Annotated[tuple[Text, ...], Unique, Meta(min_length=1)] = ()


class SystemDecisions(Section, frozen=True, kw_only=True):
    events: Annotated[dict[str, DecisionRule], Meta(min_length=1)]
    labels: tuple[LabelRule, ...] = ()

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "events": "Each event's own rule: the base of its decision.",
        "labels": "Label rules in order of precedence: a label overrides the event's rule for "
        "the fields it sets; of several labels present, the first listed wins each field.",
    }


Decisions = per_system(
    "Decisions",
    SystemDecisions,
    schema={
        "description": "What each CI event (and the labels on its pull or merge request) runs: "
        "`matrixgen decide`, `generate --event`."
    },
)


class Graph(Section, frozen=True, kw_only=True):
    external: dict[System, Names] = field(default_factory=dict)

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "Job graph (`matrixgen graph`; cycles and missing needs are `validate` "
        "errors)."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "external": "Jobs outside the recipes that a spec's needs may name, per system (e.g. a "
        "job of the parent pipeline)."
    }


class KnownFailureRule(Section, frozen=True, kw_only=True):
    pattern: Annotated[str, Meta(min_length=1, max_length=1000)]
    tracker: Text
    kind: QuarantineKind

    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "pattern": "A regular expression in RE2's syntax (Python's without backreferences and "
        "lookaround), searched within each line: it runs in time linear in the text, and one "
        "RE2 refuses, or one that matches the empty text, is a config error at its place.",
        "tracker": 'Issue URL, or "#N" (quoted: a bare # starts a YAML comment) resolved against '
        "quarantine.tracker_base.",
        "kind": "What sort of failure it is, as a quarantine entry's kind: infra for the "
        "machines, the network, the cluster.",
    }


class Triage(Section, frozen=True, kw_only=True):
    known_failures: Annotated[tuple[KnownFailureRule, ...], Meta(max_length=500)] = ()

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "description": "What `matrixgen results triage` knows besides the results store."
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "known_failures": "Failures with a known cause: one whose message, or a line of its "
        "report's output (system-out, system-err, the failure's text, read at ingest), a pattern "
        "matches gets the verdict `known` in triage, with the tracker and kind, before `baseline` "
        "and `flaky`; it does not fail the triage."
    }


class ConfigDocument(Section, frozen=True, kw_only=True):
    format_version: Literal[2] | None = None
    project: str | None = None
    vocabulary: Vocabulary | None = None
    defaults: Defaults = Defaults()
    platforms: dict[str, PlatformInfo] = field(default_factory=dict)
    images: Images = Images()  # type: ignore[valid-type]
    pins: dict[Key, Pin] = field(default_factory=dict)
    systems: Systems = Systems()  # type: ignore[valid-type]
    targets: dict[Key, AnyTarget] = field(default_factory=dict)  # type: ignore[valid-type]
    jet: Jet = Jet()
    quarantine: QuarantinePolicy = QuarantinePolicy()
    references: References | None = None
    changes: Changes = Changes()
    decisions: Decisions | None = None  # type: ignore[valid-type]
    graph: Graph = Graph()
    triage: Triage = Triage()

    SCHEMA: ClassVar[Mapping[str, Any]] = {
        "$id": "https://matrixgen.invalid/schema/config.schema.json",
        "title": "matrixgen project config (matrixgen.yaml at the root of a recipe tree)",
        "description": "A format_version 2 tree declares its vocabulary here; a format_version "
        "1 tree (Megatron-LM's) may have a config without one, holding only settings "
        "(quarantine, jet, ...): its values are then the ones its jobs use.",
        "dependentRequired": {
            "format_version": ["vocabulary"],
            "vocabulary": ["format_version"],
            "targets": ["vocabulary"],
            "decisions": ["vocabulary"],
        },
    }
    DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "format_version": "2: the tree declares its vocabulary (required with it). Left out in "
        "the config of a format_version 1 tree.",
        "project": "A name for reports.",
        "platforms": "Facts about each platform of the vocabulary.",
        "pins": "Env and argument pins: every job a pin covers must carry them (`matrixgen "
        "validate`). A job with its own spec.launcher must carry argument pins on that command.",
        "targets": "Named targets: where jobs go, with settings that override the system's.",
    }
