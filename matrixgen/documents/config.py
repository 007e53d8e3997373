"""The project config (`matrixgen.yaml` at the root of a recipe tree).

A tree whose file declares a vocabulary is a format_version 2 tree: it declares
its vocabularies, defaults, targets, pins and the settings of each CI system. A
tree without the file, or with one that declares no vocabulary (Megatron-LM's,
with only its quarantine and jet settings, say), works with built-in defaults and
the values its jobs use.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from matrixgen.documents.known_failures import NO_TRIAGE_SETTINGS, TriageSettings, parse_triage
from matrixgen.documents.yamlio import YamlDocument, parse_yaml
from matrixgen.engine.decide import Decisions, parse_decisions
from matrixgen.engine.errors import ConfigError, Findings, Location, did_you_mean
from matrixgen.engine.model import EMPTY_MAPPING, Selector, Target
from matrixgen.engine.references import (
    ReferenceSettings,
    ReferenceTemplate,
    root_problem,
    template_problem,
)
from matrixgen.engine.schemas import check_against_schema
from matrixgen.engine.vocab import (
    ALL_CADENCES,
    DEFAULT_MAX_JOBS,
    DEFAULT_N_REPEAT,
    DEFAULT_TIME_LIMIT,
    LEGACY_SCOPE_ALIASES,
    System,
    resolve_scope,
    scope_word,
)


class Vocabulary(Struct, frozen=True, kw_only=True):
    platforms: frozenset[str]
    environments: frozenset[str]
    scopes: Mapping[System, tuple[str, ...]]
    cadences: frozenset[str]
    tags: frozenset[str] | None = None
    models: frozenset[str] | None = None
    axes: frozenset[str] = frozenset()
    spec_keys: frozenset[str] = frozenset()

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


class ProjectConfig(Struct, frozen=True, kw_only=True):
    """The parsed project config; sections not modelled here stay in `raw`."""

    path: str
    document: YamlDocument | None
    vocabulary: Vocabulary | None = None
    time_limit: int = DEFAULT_TIME_LIMIT
    n_repeat: int = DEFAULT_N_REPEAT
    max_jobs: int = DEFAULT_MAX_JOBS
    targets: tuple[Target, ...] = ()
    references: ReferenceSettings | None = None  # the `references` section
    # decisions.<system>: what each CI event runs (engine/decide.py)
    decisions: Mapping[System, Decisions] = field(default_factory=lambda: EMPTY_MAPPING)
    triage: TriageSettings = NO_TRIAGE_SETTINGS  # the `triage` section (known failures)
    raw: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)

    def section(self, name: str) -> Mapping[str, Any]:
        value = self.raw.get(name)
        return value if isinstance(value, Mapping) else EMPTY_MAPPING

    def platform_info(self, platform: str) -> Mapping[str, Any]:
        info = self.section("platforms").get(platform)
        return info if isinstance(info, Mapping) else EMPTY_MAPPING

    def target(self, name: str) -> Target | None:
        return next((t for t in self.targets if t.name == name), None)

    def scope_word(self, scope: str) -> str:
        """A scope (a tier, as the jobs and the results store hold it) as this
        tree names it: `nightly` for `L2` where the vocabulary declares nightly;
        without a vocabulary, the legacy name, as Megatron-LM's recipes write it."""
        vocab = self.vocabulary
        if vocab is None:
            return scope_word(scope, LEGACY_SCOPE_ALIASES)
        return scope_word(scope, [s for names in vocab.scopes.values() for s in names])

    def locate(self, keys: list[str | int]) -> Location:
        if self.document is None:
            return Location(self.path)
        return self.document.locate(keys)


# The config of a tree that has none (format_version 1 trees).
DEFAULT_CONFIG = ProjectConfig(path="", document=None)


def parse_config(raw: bytes, path: str) -> ProjectConfig:
    """Parse and check a project config; raise ConfigError listing every problem."""
    findings = Findings()
    document = parse_yaml(raw, path, findings)
    if document is not None:
        if not isinstance(document.data, dict):
            findings.add(document.locate([]), "config-type", "the project config must be a mapping")
        else:
            check_against_schema("config", document, findings)
            _refuse_api_url(document, findings)
    if findings.errors or document is None:
        raise ConfigError(f"invalid project config {path}", findings=findings.errors)
    data: dict[str, Any] = document.data
    vocab_raw = data.get("vocabulary")
    vocabulary = None
    if vocab_raw is not None:
        vocabulary = Vocabulary(
            platforms=frozenset(vocab_raw["platforms"]),
            environments=frozenset(vocab_raw["environments"]),
            scopes=MappingProxyType(
                {System(k): tuple(v) for k, v in sorted(vocab_raw["scopes"].items())}
            ),
            cadences=frozenset(vocab_raw.get("cadences", ALL_CADENCES)),
            tags=frozenset(vocab_raw["tags"]) if "tags" in vocab_raw else None,
            models=frozenset(vocab_raw["models"]) if "models" in vocab_raw else None,
            axes=frozenset(vocab_raw.get("axes", ())),
            spec_keys=frozenset(vocab_raw.get("spec_keys", ())),
        )
    defaults = data.get("defaults", {})
    config = ProjectConfig(
        path=path,
        document=document,
        vocabulary=vocabulary,
        time_limit=defaults.get("time_limit", DEFAULT_TIME_LIMIT),
        n_repeat=defaults.get("n_repeat", DEFAULT_N_REPEAT),
        max_jobs=defaults.get("max_jobs", DEFAULT_MAX_JOBS),
        raw=MappingProxyType(data),
    )
    # Targets and decisions name vocabulary values: the schema asks for a
    # vocabulary beside them.
    targets: tuple[Target, ...] = ()
    decisions: dict = {}
    if vocabulary is not None:
        # In the order the config writes them: every command lists targets so.
        targets = tuple(
            _target(name, spec, config, findings)
            for name, spec in (data.get("targets") or {}).items()
        )
        decisions = parse_decisions(
            data.get("decisions"),
            scopes=vocabulary.scopes,
            environments=vocabulary.environments,
            cadences=vocabulary.cadences,
            locate=config.locate,
            findings=findings,
        )
    references = _references(data.get("references"), config, targets, findings)
    triage = parse_triage(data.get("triage"), config.locate, findings)
    if findings.errors:
        raise ConfigError(f"invalid project config {path}", findings=findings.errors)
    return replace(
        config,
        targets=targets,
        decisions=MappingProxyType(decisions),
        references=references,
        triage=triage,
    )


def _references(
    raw: Mapping[str, Any] | None,
    config: ProjectConfig,
    targets: tuple[Target, ...],
    findings: Findings,
) -> ReferenceSettings | None:
    """The declared reference templates (the schema checked the shape)."""
    if raw is None:
        return None
    templates = []
    for name, template in sorted(raw["templates"].items()):
        problem = template_problem(template)
        if problem is not None:
            findings.add(
                config.locate(["references", "templates", name]),
                "config-references",
                f'reference "{name}": {problem}',
            )
        templates.append(ReferenceTemplate(name, template))
    root = str(raw.get("root", ""))
    problem = root_problem(root)
    root = root.rstrip("/")
    if problem is not None:
        findings.add(config.locate(["references", "root"]), "config-references", problem)
    names = [t.name for t in targets]
    for i, pattern in enumerate(raw.get("gating", ())):
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            findings.add(
                config.locate(["references", "gating", i]),
                "config-references",
                f'references.gating: "{pattern}" names no configured target'
                f"{did_you_mean(pattern, names)}",
            )
    return ReferenceSettings(
        templates=tuple(templates),
        root=root,
        gating=tuple(raw.get("gating", ())),
        refuse_generate=bool(raw.get("refuse_generate", False)),
    )


def _refuse_api_url(document: YamlDocument, findings: Findings) -> None:
    """Where a tracker token is sent is not the tree's to say: a pull request could
    point it at a server of its own."""
    section = document.data.get("quarantine")
    if isinstance(section, dict) and "api_url" in section:
        findings.add(
            document.locate(["quarantine", "api_url"], key=True),
            "config-api-url",
            "quarantine.api_url is not read from the tree (a pull request could send the "
            "tracker token to a server of its own): give the API root with --api-url or "
            "GITHUB_API_URL, and remove this key",
        )


def _target(
    name: str, spec: Mapping[str, Any], config: ProjectConfig, findings: Findings
) -> Target:
    """A configured target, with its system's shared settings under its own."""
    system = System(spec["system"])
    vocab = config.vocabulary
    assert vocab is not None
    checks = (
        ("scope", vocab.scopes.get(system, ()), "scope of " + system.value),
        ("platform", vocab.platforms, "platform"),
        ("environment", vocab.environments, "environment"),
    )
    for key, known, what in checks:
        value = spec[key]
        allowed = set(known) | {resolve_scope(k) for k in known} if key == "scope" else set(known)
        if value not in allowed:
            findings.add(
                config.locate(["targets", name, key]),
                "config-target",
                f'target "{name}": unknown {what} "{value}"{did_you_mean(value, known)}',
            )
    settings = {**config.section("systems").get(system.value, {}), **spec}
    selector = Selector(
        scope=spec["scope"],
        cadence=spec.get("cadence"),
        environment=spec["environment"],
        platform=spec["platform"],
        model=spec.get("model"),
        tag=spec.get("tag"),
    )
    return Target(name=name, system=system, selector=selector, settings=MappingProxyType(settings))
