"""Reference files (golden values, a model config) declared as path templates
over a job's fields: the declared values, one listing of a reference tree (read
once per tree, never one stat per job) and the pure path logic.
"""

from __future__ import annotations

import bisect
import difflib
import fnmatch
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from msgspec import Struct

from matrixgen.model.jobs import Job
from matrixgen.model.templates import TemplateError, parse_template, placeholders, render
from matrixgen.util.patterns import whole

# A recipe's or row's opt-out: `references: {skip: all, reason: ...}`.
OPT_OUT_KEY = "references"
SKIP_ALL = "all"
# Fields with more values than this (test cases, say) are read without them:
# they sit between "/" anyway, where the split is not in doubt.
MAX_KNOWN_VALUES = 64
# A hint compares a missing file with at most this many names of its folder.
MAX_HINT_CANDIDATES = 256
# Template fields reported for an orphan, and the name they are reported under.
ORPHAN_FIELDS = {
    "model": "model",
    "test_case": "test_case",
    "environment": "environment",
    "platforms": "platform",
    "platform": "platform",
}


class ReferenceTemplate(Struct, frozen=True):
    """One declared reference: a name (golden, config, ...) and its path template,
    relative to the reference root."""

    name: str
    template: str

    @property
    def fields(self) -> tuple[str, ...]:
        return placeholders(self.template)

    @property
    def static_dir(self) -> str:
        """The directory before the first placeholder."""
        pieces = parse_template(self.template)
        if all(name is None for _, name, _, _ in pieces):
            return posixpath.dirname(self.template)  # no placeholder at all
        return pieces[0][0].rpartition("/")[0]


class ReferenceSettings(Struct, frozen=True, kw_only=True):
    """The config's `references` section (or `--reference NAME=TEMPLATE`, `--root DIR`)."""

    templates: tuple[ReferenceTemplate, ...]
    # The reference tree's directory relative to the top of the repository
    # ('/'-separated, "" = the top).
    root: str = ""
    # Target names or globs whose missing references are errors, not warnings.
    gating: tuple[str, ...] = ()
    # generate refuses to run when a gating target misses a reference.
    refuse_generate: bool = False

    def is_gating(self, target_name: str) -> bool:
        return any(fnmatch.fnmatchcase(target_name, g) for g in self.gating)

    @property
    def prefix(self) -> str:
        """The only part of the tree listed."""
        dirs = [t.static_dir for t in self.templates]
        return posixpath.commonpath(dirs) if dirs else ""  # whole folder names


def template_problem(template: str) -> str | None:
    try:
        parse_template(template)
    except TemplateError as exc:
        return str(exc)
    if not template.strip():
        return "the template is empty"
    if template.startswith("/") or re.match(r"[A-Za-z]:[\\/]", template):  # prefix
        return "the template must be a path relative to the reference root"
    if "\\" in template:
        return "write the template with / separators"
    if any(part in ("", ".", "..") for part in template.split("/")):
        return 'the template must not hold empty, "." or ".." path parts'
    return None


def root_problem(root: str) -> str | None:
    # "" is the repository top.
    if root.startswith("/") or "\\" in root:
        return "the root must be a '/'-separated path relative to the top of the repository"
    if any(part in (".", "..") for part in root.split("/") if part):
        return 'the root must not hold "." or ".." parts'
    return None


class OptOut(Struct, frozen=True):
    """A job's opt-out: every reference (names None) or the named ones."""

    names: frozenset[str] | None
    reason: str

    def covers(self, reference: str) -> bool:
        return self.names is None or reference in self.names


def parse_opt_out(value: Any) -> OptOut | str:
    """The opt-out a `references:` value declares, or why it is malformed."""
    if not isinstance(value, Mapping):
        return (
            "references must be a mapping {skip: all | [NAME, ...], reason: TEXT}"
            f", not {_kind(value)}"
        )
    unknown = sorted(str(k) for k in value if k not in ("skip", "reason"))
    if unknown:
        return f"unknown key(s) {', '.join(unknown)} in references (known: skip, reason)"
    skip = value.get("skip")
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return "an opt-out of references needs a reason: references: {skip: ..., reason: TEXT}"
    if skip == SKIP_ALL:
        return OptOut(None, reason.strip())
    if (
        isinstance(skip, list)
        and skip
        and all(isinstance(s, str) and s for s in skip)
        and len(set(skip)) == len(skip)
    ):
        return OptOut(frozenset(skip), reason.strip())
    return 'references.skip must be "all" or a list of distinct reference names'


def job_opt_out(job: Job) -> OptOut | None:
    """The row's opt-out, else the spec's; None also when malformed (validate says so)."""
    value = job.spec.get(OPT_OUT_KEY)
    if value is None:
        return None
    parsed = parse_opt_out(value)
    return parsed if isinstance(parsed, OptOut) else None


def reference_path(template: ReferenceTemplate, job: Job) -> str:
    """The path (relative to the root) a job looks for; TemplateError when the
    job lacks a field the template names (its spec's, and its resolved identity)."""
    fields = dict(job.spec)
    fields.update(
        model=job.model,
        test_case=job.test_case,
        environment=job.environment,
        platform=job.platform,
        platforms=job.platform,
        tag=job.tag or "",
        scope=job.scope or "",
    )
    return render(template.template, fields)


# no slots: the indexes below are cached
class ReferenceListing(Struct, frozen=True, kw_only=True, dict=True):
    """Every file of one reference tree, listed once."""

    shown_root: str  # the root as messages show it ("" = the repository top)
    files: frozenset[str]  # '/'-separated paths relative to the root
    present: bool = True  # False: the directory the templates start in does not exist
    where: str = "the working tree"  # what was listed: the working tree, or a commit

    def shown(self, rel: str) -> str:
        return posixpath.join(self.shown_root, rel) if self.shown_root else rel

    @cached_property
    def by_dir(self) -> Mapping[str, tuple[str, ...]]:
        return {d: tuple(sorted(names)) for d, names in used_by_dir(self.files).items()}

    @cached_property
    def by_dir_name(self) -> Mapping[str, tuple[str, ...]]:
        groups: dict[str, list[str]] = {}
        for directory in self.by_dir:
            groups.setdefault(directory.rpartition("/")[2], []).append(directory)
        return {n: tuple(sorted(ds)) for n, ds in groups.items()}

    def nearest(self, rel: str) -> str | None:
        """The existing file most like a missing one, for a hint: in its folder,
        else the same name in a folder of the same name (a case moved to another model)."""
        directory, _, name = rel.rpartition("/")
        names = self.by_dir.get(directory)
        if names:
            if len(names) > MAX_HINT_CANDIDATES:
                # A crowded folder: its sorted neighbours only, so a hint costs
                # the same whatever the folder holds.
                at = bisect.bisect_left(names, name)
                half = MAX_HINT_CANDIDATES // 2
                names = names[max(0, at - half) : at + half]
            # Ties go to the alphabetically first name (max() keeps the largest key).
            best = max(names, key=lambda n: (_likeness(name, n), [-ord(c) for c in n]))
            return posixpath.join(directory, best) if directory else best
        leaf = directory.rpartition("/")[2]
        for other in self.by_dir_name.get(leaf, ()) if leaf else ():
            if name in self.by_dir[other]:
                return posixpath.join(other, name)
        return None


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def list_directory(directory: Path, prefix: str, *, shown_root: str) -> ReferenceListing:
    """The files below `directory/prefix`, relative to `directory`; links to
    directories are not entered (a loop would never end)."""
    start = directory / prefix if prefix else directory
    if not start.is_dir():
        return ReferenceListing(shown_root=shown_root, files=frozenset(), present=False)
    found: list[str] = []
    pending = [(start, prefix)]
    while pending:
        here, rel = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), path))
                elif entry.is_file():
                    found.append(path)
            except OSError:
                continue
    return ReferenceListing(shown_root=shown_root, files=frozenset(found))


def listing_from_paths(
    paths: Iterable[str], *, shown_root: str = "", prefix: str = "", where: str = ""
) -> ReferenceListing:
    """A listing of paths relative to the root (git's), those below `prefix`."""
    start = prefix.rstrip("/") + "/" if prefix else ""
    files = frozenset(p for p in paths if p.startswith(start))
    present = bool(files) or not prefix
    return ReferenceListing(
        shown_root=shown_root, files=files, present=present, where=where or "the working tree"
    )


class TemplateMatcher(Struct, frozen=True):
    """Fits listed paths back to one template, with the field values they stand
    for. Values the jobs use are tried first (`golden_values_dev_dgx_gb200_1node.json`:
    dgx_gb200_1node, not dgx_gb200), then the lazy split."""

    template: ReferenceTemplate
    pattern: re.Pattern[str]

    @classmethod
    def build(
        cls, template: ReferenceTemplate, known: Mapping[str, Iterable[str]]
    ) -> TemplateMatcher:
        parts: list[str] = []
        seen: set[str] = set()
        for literal, name, spec, conversion in parse_template(template.template):
            parts.append(re.escape(literal))
            if name is None:
                continue
            if name in seen:
                parts.append(f"(?P={name})")
                continue
            seen.add(name)
            values = (
                sorted(
                    {v for v in known.get(name, ()) if v and "/" not in v},
                    key=lambda v: (-len(v), v),
                )
                if not spec and conversion is None
                else []
            )
            if len(values) > MAX_KNOWN_VALUES:
                values = []  # a long alternation would cost its length per listed file
            choices = [re.escape(v) for v in values] + ["[^/]+?"]
            parts.append(f"(?P<{name}>{'|'.join(choices)})")
        return cls(template, re.compile("".join(parts) + r"\Z"))

    def fit(self, path: str) -> dict[str, str] | None:
        match = whole(self.pattern, path)
        return match.groupdict() if match else None


def is_variant(path: str, used: Mapping[str, set[str]]) -> bool:
    """A file named like a used one with a `_suffix` before its extension
    (`..._dgx_h100_2nd.json` beside `..._dgx_h100.json`) belongs to the same job."""
    return variant_of(path, used) is not None


def variant_of(path: str, used: Mapping[str, set[str]]) -> str | None:
    """The used file a variant belongs to (the longest name that fits), or None."""
    directory, _, name = path.rpartition("/")
    names = used.get(directory)
    if not names:
        return None
    stem, dot, ext = name.rpartition(".")
    stem, suffix = (stem, dot + ext) if dot else (name, "")
    for i in range(len(stem) - 1, -1, -1):
        if stem[i] == "_" and stem[:i] + suffix in names:
            return f"{directory}/{stem[:i]}{suffix}" if directory else stem[:i] + suffix
    return None


def used_by_dir(paths: Iterable[str]) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for path in paths:
        directory, _, name = path.rpartition("/")
        groups.setdefault(directory, set()).add(name)
    return groups


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f'the string "{value}"'
    return {list: "a list", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
