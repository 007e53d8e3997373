"""Stage 1, load: read a recipe tree (a directory, or files from git) into values.

A tree is every `*.yaml` file below its root, in sorted path order, except the
project config (`matrixgen.yaml`) and the quarantine file at the root. Each file
is parsed on its own, so one broken file does not hide the others' problems.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrixgen.config import DEFAULT_CONFIG, ProjectConfig, parse_config
from matrixgen.errors import Finding, Findings, Location, RecipeError, Severity
from matrixgen.model import RecipeFile
from matrixgen.vocab import CONFIG_FILENAME, QUARANTINE_FILENAME, RecipeType
from matrixgen.yamlio import parse_yaml

RESERVED_FILES = frozenset({CONFIG_FILENAME, QUARANTINE_FILENAME})


@dataclass(frozen=True, slots=True, kw_only=True)
class RecipeTree:
    """A loaded tree: its files, its config, and what loading found wrong."""

    root: str  # how to show the tree's root in messages
    files: tuple[RecipeFile, ...]
    config: ProjectConfig
    findings: tuple[Finding, ...] = ()
    extra_files: Mapping[str, bytes] | None = None  # root-level files we do not parse here
    # Content ids (git blob ids) of the files, when known: keys for reusing results.
    blob_ids: Mapping[str, str] | None = None

    @property
    def format_version(self) -> int:
        return 2 if self.config.vocabulary is not None else 1

    @property
    def builds(self) -> tuple[RecipeFile, ...]:
        return tuple(f for f in self.files if f.kind is RecipeType.BUILD)

    @property
    def tests(self) -> tuple[RecipeFile, ...]:
        return tuple(f for f in self.files if f.kind is RecipeType.BASIC)


def read_directory(root: Path) -> dict[str, bytes]:
    """Every file a tree may need, keyed by '/'-separated path relative to root."""
    if not root.is_dir():
        from matrixgen.errors import UsageError

        raise UsageError(f"recipe directory not found: {root}")
    files: dict[str, bytes] = {}
    for path in root.rglob("*"):
        if path.suffix in (".yaml", ".yml") and path.is_file():
            try:
                files[path.relative_to(root).as_posix()] = path.read_bytes()
            except OSError as exc:
                raise RecipeError(f"{path}: cannot be read: {exc.strerror}") from None
    return files


def load_tree(
    files: Mapping[str, bytes],
    *,
    root: str = ".",
    blob_ids: Mapping[str, str] | None = None,
    cache: dict[Hashable, Any] | None = None,
) -> RecipeTree:
    """Parse the files of one tree. Raises ConfigError for a bad project config;
    recipe problems are returned as findings, not raised.

    With `blob_ids` (content ids of the files, e.g. git blob ids) and a `cache`
    shared between calls, a file whose content was parsed before (at the same
    shown path) is not parsed again: the diff loads two revisions of one tree.
    """
    findings = Findings()
    config = DEFAULT_CONFIG
    ids = blob_ids or {}
    if CONFIG_FILENAME in files:
        shown = _display(root, CONFIG_FILENAME)
        key = ("config", ids.get(CONFIG_FILENAME), shown)
        cached = cache.get(key) if cache is not None and key[1] else None
        if cached is None:
            cached = parse_config(files[CONFIG_FILENAME], shown)
            if cache is not None and key[1]:
                cache[key] = cached
        config = cached
    parsed: list[RecipeFile] = []
    for rel in sorted(files):
        if rel in RESERVED_FILES:
            continue
        shown = _display(root, rel)
        if not rel.endswith(".yaml"):
            findings.add(
                Location(shown),
                "file-ignored",
                "ignored: recipe files must end in .yaml",
                Severity.WARNING,
            )
            continue
        key = ("recipe", ids.get(rel), shown)
        hit = cache.get(key) if cache is not None and key[1] else None
        if hit is None:
            found = Findings()
            hit = (parse_recipe(files[rel], rel, shown, found), tuple(found.items))
            if cache is not None and key[1]:
                cache[key] = hit
        recipe, file_findings = hit
        findings.extend(file_findings)
        if recipe is not None:
            parsed.append(recipe)
    extra = {k: v for k, v in files.items() if k in RESERVED_FILES}
    return RecipeTree(
        root=root,
        files=tuple(parsed),
        config=config,
        findings=tuple(findings.items),
        extra_files=extra,
        blob_ids=dict(ids) if blob_ids is not None else None,
    )


def parse_recipe(raw: bytes, rel: str, shown: str, findings: Findings) -> RecipeFile | None:
    """One recipe file, or None (with findings) when it cannot be used at all."""
    document = parse_yaml(raw, shown, findings)
    if document is None:
        return None
    data = document.data
    if not isinstance(data, dict):
        findings.add(
            document.locate([]),
            "recipe-type",
            f"a recipe file must be a mapping with spec and products, not {_kind(data)}",
        )
        return None
    version = data.get("format_version", 1)
    if version not in (1, 2) or isinstance(version, bool):
        findings.add(
            document.locate(["format_version"]),
            "recipe-format-version",
            f"format_version must be 1 or 2, not {version!r}",
        )
        return None
    name = rel.rsplit("/", 1)[-1]
    declared = data.get("type")
    if declared == RecipeType.BUILD or name.startswith("_build"):
        kind = RecipeType.BUILD
    elif declared in (None, RecipeType.BASIC):
        kind = RecipeType.BASIC
    else:
        findings.add(
            document.locate(["type"]),
            "recipe-type",
            f'type must be "basic" or "build", not {declared!r}',
        )
        return None
    return RecipeFile(path=shown, rel=rel, document=document, kind=kind, format_version=version)


def _display(root: str, rel: str) -> str:
    return rel if root in ("", ".") else f"{root.rstrip('/')}/{rel}"


def _kind(value: object) -> str:
    if value is None:
        return "an empty document"
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
