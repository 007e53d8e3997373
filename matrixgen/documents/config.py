"""The project config (`matrixgen.yaml` at the root of a recipe tree) read into
a ProjectConfig. A tree without one, or whose config declares no vocabulary,
works with built-in defaults and the values its jobs use (docs/config.md).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from msgspec import Struct, field, structs
from msgspec.structs import replace

from matrixgen.documents.config_sections import (
    SYSTEM_SETTINGS,
    ConfigDocument,
    PlatformInfo,
    References,
    SystemSettings,
    Vocabulary,
)
from matrixgen.documents.decisions import parse_decisions
from matrixgen.documents.known_failures import NO_TRIAGE_SETTINGS, TriageSettings, parse_triage
from matrixgen.documents.schema import DecodeError, check_document, decode
from matrixgen.documents.yamlio import YamlDocument, parse_yaml
from matrixgen.model.decide import Decisions
from matrixgen.model.errors import ConfigError, Findings, Location, did_you_mean
from matrixgen.model.jobs import EMPTY_MAPPING, Selector, Target
from matrixgen.model.references import (
    ReferenceSettings,
    ReferenceTemplate,
    root_problem,
    template_problem,
)
from matrixgen.model.vocab import (
    DEFAULT_MAX_JOBS,
    DEFAULT_N_REPEAT,
    DEFAULT_TIME_LIMIT,
    LEGACY_SCOPE_ALIASES,
    System,
    resolve_scope,
    scope_word,
)

__all__ = ["DEFAULT_CONFIG", "ProjectConfig", "Vocabulary", "parse_config"]

_NO_PLATFORM = PlatformInfo()


class ProjectConfig(Struct, frozen=True, kw_only=True):
    """The project config read: its document (`doc`, every section typed as
    documents/config_sections.py declares it) and what reading derives from it."""

    path: str
    document: YamlDocument | None
    doc: ConfigDocument = ConfigDocument()
    vocabulary: Vocabulary | None = None
    time_limit: int = DEFAULT_TIME_LIMIT
    n_repeat: int = DEFAULT_N_REPEAT
    max_jobs: int = DEFAULT_MAX_JOBS
    targets: tuple[Target, ...] = ()
    references: ReferenceSettings | None = None  # the `references` section
    # decisions.<system>: what each CI event runs (model/decide.py)
    decisions: Mapping[System, Decisions] = field(default_factory=lambda: EMPTY_MAPPING)
    triage: TriageSettings = NO_TRIAGE_SETTINGS  # the `triage` section (known failures)

    def platform(self, name: str) -> PlatformInfo:
        """What `platforms` says of one platform (nothing, for one it does not name)."""
        return self.doc.platforms.get(name, _NO_PLATFORM)

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
    doc = None
    if document is not None:
        if not isinstance(document.data, dict):
            findings.add(document.locate([]), "config-type", "the project config must be a mapping")
        else:
            check_document(ConfigDocument, document, findings)
            _refuse_api_url(document, findings)
            if not findings.errors:
                try:
                    doc = decode(document.data, ConfigDocument, document)
                except DecodeError as exc:
                    findings.add(exc.location, "schema", exc.message)
    if findings.errors or document is None or doc is None:
        raise ConfigError(f"invalid project config {path}", findings=findings.errors)
    vocabulary = doc.vocabulary
    if vocabulary is not None:
        # Systems in their order, whatever order the file writes them in.
        scopes = MappingProxyType(dict(sorted(vocabulary.scopes.items())))
        vocabulary = replace(vocabulary, scopes=scopes)
    config = ProjectConfig(
        path=path,
        document=document,
        doc=doc,
        vocabulary=vocabulary,
        **structs.asdict(doc.defaults),  # time_limit, n_repeat, max_jobs
    )
    # Targets and decisions name vocabulary values: the schema asks for a
    # vocabulary beside them.
    targets: tuple[Target, ...] = ()
    decisions: dict = {}
    if vocabulary is not None:
        # In the order the config writes them: every command lists targets so.
        targets = tuple(_target(name, spec, config, findings) for name, spec in doc.targets.items())
        decisions = parse_decisions(doc.decisions, vocabulary, config.locate, findings)
    references = _references(doc.references, config, targets, findings)
    triage = parse_triage(doc.triage, config.locate, findings)
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
    raw: References | None,
    config: ProjectConfig,
    targets: tuple[Target, ...],
    findings: Findings,
) -> ReferenceSettings | None:
    """The declared reference templates, each checked for rendering."""
    if raw is None:
        return None
    templates = []
    for name, template in sorted(raw.templates.items()):
        problem = template_problem(template)
        if problem is not None:
            findings.add(
                config.locate(["references", "templates", name]),
                "config-references",
                f'reference "{name}": {problem}',
            )
        templates.append(ReferenceTemplate(name, template))
    problem = root_problem(raw.root)
    if problem is not None:
        findings.add(config.locate(["references", "root"]), "config-references", problem)
    names = [t.name for t in targets]
    for i, pattern in enumerate(raw.gating):
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            findings.add(
                config.locate(["references", "gating", i]),
                "config-references",
                f'references.gating: "{pattern}" names no configured target'
                f"{did_you_mean(pattern, names)}",
            )
    return ReferenceSettings(
        templates=tuple(templates),
        root=raw.root.rstrip("/"),
        gating=raw.gating,
        refuse_generate=raw.refuse_generate,
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


def _target(name: str, spec: Any, config: ProjectConfig, findings: Findings) -> Target:
    """A configured target, with its system's shared settings under its own."""
    system = spec.system
    vocab = config.vocabulary
    assert vocab is not None
    checks = (
        ("scope", vocab.scopes.get(system, ()), "scope of " + system.value),
        ("platform", vocab.platforms, "platform"),
        ("environment", vocab.environments, "environment"),
    )
    for key, known, what in checks:
        value = getattr(spec, key)
        allowed = set(known) | {resolve_scope(k) for k in known} if key == "scope" else set(known)
        if value not in allowed:
            findings.add(
                config.locate(["targets", name, key]),
                "config-target",
                f'target "{name}": unknown {what} "{value}"{did_you_mean(value, known)}',
            )
    # A target selects by the fields of its entry that a Selector has (no test cases).
    picked = ("scope", "cadence", "environment", "platform", "model", "tag")
    return Target(
        name=name,
        system=system,
        selector=Selector(**{key: getattr(spec, key) for key in picked}),
        settings=system_settings(config, system, spec),
        description=spec.description,
        rereads_recipe=spec.rereads_recipe,
    )


def system_settings(config: ProjectConfig, system: System, own: Any = None) -> SystemSettings:
    """A target's settings: each its own (`own`: the target's entry), else its system's."""
    cls = SYSTEM_SETTINGS[system]
    shared = config.doc.systems.of(system)
    values = {}
    for name in cls.__struct_fields__:
        value = getattr(own, name, None)
        if value is None and shared is not None:
            value = getattr(shared, name)
        if value is not None:
            values[name] = value
    return cls(**values)
