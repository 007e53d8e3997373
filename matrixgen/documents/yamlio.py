"""Safe YAML reading that keeps the composed node tree, so that any finding maps
back to `file:line:column`. Values are built by the fast walk of yamlfast.py,
or by PyYAML's own constructor where it gives up: both give the same values
and findings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml
from msgspec import Struct

from matrixgen.documents.yamlfast import (
    MAX_NESTING_DEPTH,
    _construct_fast,
    _note_duplicate_keys,
    _rename_odd_keys,
    _Unusual,
)
from matrixgen.model.errors import Findings, Location

# libyaml's C parser when PyYAML was built with it; the pure-Python one otherwise.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Past this many nodes (aliases counted once per use) a document is refused:
# anchors and aliases can make a tiny file expand to billions of values.
MAX_EXPANDED_NODES = 2_000_000


# An anchor is `&name` after a space, a line start, flow punctuation, a `?` or a
# byte-order mark; shell text (`a && b`, `2>&1`) is none, so only files that may
# hold aliases pay for the expansion walk. A false positive only costs time; a
# miss would let a recursive alias or an alias bomb through.
_MAY_HAVE_ANCHOR = re.compile(r"(?:^|[\s\[\]{},:?\ufeff-])&[^\s&\[\]{},]", re.MULTILINE)


# Tags of plain scalars by their text, as the resolver gives them; bounded, so a
# tree of many distinct values costs only the resolver's own time past the bound.
_RESOLVED: dict[str, str] = {}
_RESOLVED_MAX = 1 << 15
_RESOLVED_MAX_TEXT = 64
_DEFAULT_TAGS = {
    yaml.ScalarNode: yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG,
    yaml.SequenceNode: yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
    yaml.MappingNode: yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
}


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loader that records duplicate mapping keys instead of dropping them,
    and keys that YAML reads as something other than a name."""

    duplicate_keys: list[tuple[yaml.Node, str]]
    odd_keys: list[tuple[yaml.Node, str]]

    # PyYAML's resolver costs as much as the rest of composing. Without path
    # resolvers (a test holds it so) a scalar's tag depends on its text alone and
    # a collection's on its kind: tags are remembered by text, and the resolver's
    # path bookkeeping is skipped.

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            tag = _RESOLVED.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(value) <= _RESOLVED_MAX_TEXT and len(_RESOLVED) < _RESOLVED_MAX:
                    _RESOLVED[value] = tag
            return tag
        return _DEFAULT_TAGS[kind]

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        mapping = super().construct_mapping(node, deep=deep)
        # Fewer keys than entries: some key came twice (or a merge key was folded in).
        if len(mapping) < len(node.value):
            _note_duplicate_keys(node.value, self.duplicate_keys)
        # `on:`, `1:`, `null:`, `2024-01-01:` are no names to YAML: each is recorded
        # and keyed by its text, so no later stage meets a key that is not a string.
        if any(type(key) is not str for key in mapping):
            _rename_odd_keys(node.value, mapping, self.constructed_objects.get, self.odd_keys)
        return mapping

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        # `2025-02-30` looks like a date to YAML but is none, and `!!timestamp x`
        # is not even shaped like one: say where, don't crash.
        text = self.construct_scalar(node)
        if self.timestamp_regexp.match(text) is None:  # prefix: PyYAML's own test
            raise _refused(node, f'"{_shown(text)}" is not a date')
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise _refused(node, f'"{node.value}" is not a valid date ({exc})') from None

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> Any:
        # Only `!!bool x` gets here with a text that is not a boolean.
        text = self.construct_scalar(node)
        if text.lower() not in self.bool_values:
            raise _refused(node, f'"{_shown(text)}" is not a boolean (true or false)')
        return super().construct_yaml_bool(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> Any:
        # Only `!!float x` gets here with a text that is not a number.
        try:
            return super().construct_yaml_float(node)
        except ValueError:
            raise _refused(node, f'"{_shown(node.value)}" is not a number') from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        # Past 4,300 digits Python refuses to read (or print) an int at all, and
        # past 64 bits no CI system takes it: say where, don't crash later.
        try:
            value = super().construct_yaml_int(node)
        except ValueError:
            value = None
        if value is None or not -(2**63) <= value < 2**63:
            raise _refused(node, f"the number {_shown(node.value)} does not fit in 64 bits")
        return value

    def construct_yaml_str(self, node: yaml.ScalarNode) -> Any:
        # The fast walk builds plain strings itself unless the text may hold a NUL
        # (`_MAY_HAVE_NUL_ESCAPE`): only then, or past the walk, is this reached.
        value = super().construct_yaml_str(node)
        if "\x00" in value:
            raise _refused(
                node,
                "the string holds a NUL character (\\0), which no shell argument, "
                "environment variable or CI job name can carry",
            )
        return value


def _refused(node: yaml.Node, problem: str) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _shown(text: str) -> str:
    """A scalar's text as a message shows it: cut short past 24 characters."""
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_timestamp)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:bool", _Loader.construct_yaml_bool)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:str", _Loader.construct_yaml_str)


# A NUL character reaches a string only through a double-quoted escape (a raw
# NUL byte makes the file binary); only a text with such an escape pays for the check.
_MAY_HAVE_NUL_ESCAPE = re.compile(r"\\(?:0|x00|u0000|U00000000)")


class YamlDocument(Struct, frozen=True):
    """A parsed document: its plain-Python value and the node tree it came from."""

    path: str
    data: Any
    root: yaml.Node | None

    def locate(self, keys: Sequence[str | int], *, key: bool = False) -> Location:
        """Position of the value at `keys` (or of its key), else of its deepest
        ancestor: a finding about a missing key points at the mapping that lacks it."""
        node = self.root
        best = node
        for i, step in enumerate(keys):
            nxt = _child(node, step, want_key=key and i == len(keys) - 1)
            if nxt is None:
                break
            node = best = nxt
        return _mark_location(self.path, best.start_mark if best is not None else None)


def _child(node: yaml.Node | None, step: str | int, *, want_key: bool) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode) and not isinstance(step, int):
        found = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(step):
                found = key_node if want_key else value_node  # last one wins, as in loading
        return found
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int):
        return node.value[step] if 0 <= step < len(node.value) else None
    return None


def _mark_location(path: str, mark: Any) -> Location:
    if mark is None:
        return Location(path)
    return Location(path, mark.line + 1, mark.column + 1)


class _AliasCycle(Exception):
    """An alias inside the node it names."""


def _check_expansion(root: yaml.Node, path: str, findings: Findings) -> bool:
    """Refuse recursive aliases and alias bombs; True when the document is safe."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        ident = id(node)
        if ident in sizes:
            return sizes[ident]
        if ident in active:
            raise _AliasCycle(node)
        active.add(ident)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(map(size, node.value))
        active.discard(ident)
        sizes[ident] = total
        return total

    try:
        total = size(root)
    except _AliasCycle as exc:
        # (Python's own RecursionError, a document nested too deeply, is the caller's.)
        node = exc.args[0]
        findings.add(
            _mark_location(path, node.start_mark),
            "yaml-recursive-alias",
            "an alias refers to a node that contains it; recursive documents are not allowed",
        )
        return False
    if total > MAX_EXPANDED_NODES:
        findings.add(
            Location(path, 1, 1),
            "yaml-alias-bomb",
            f"anchors and aliases expand this document to {total:,} nodes "
            f"(limit {MAX_EXPANDED_NODES:,}); write the values out instead",
        )
        return False
    return True


def _depth_ok(root: yaml.Node, path: str, findings: Findings) -> bool:
    """False (with a finding) when lists and mappings nest past MAX_NESTING_DEPTH:
    level by level (no recursion; aliases were checked before)."""
    mapping = yaml.MappingNode
    level = [root] if isinstance(root.value, list) else []
    depth = 1
    while level:
        if depth > MAX_NESTING_DEPTH:
            findings.add(
                _mark_location(path, level[0].start_mark),
                "yaml-too-deep",
                f"lists and mappings are nested here deeper than {MAX_NESTING_DEPTH} levels, "
                "the most matrixgen reads",
            )
            return False
        below: list[yaml.Node] = []
        for node in level:
            if type(node) is mapping:
                for key, value in node.value:
                    if type(key.value) is list:
                        below.append(key)
                    if type(value.value) is list:
                        below.append(value)
            else:
                below.extend([v for v in node.value if type(v.value) is list])
        level = below
        depth += 1
    return True


def parse_yaml(raw: bytes, path: str, findings: Findings) -> YamlDocument | None:
    """Parse one YAML document; on any problem add a finding and return None."""
    text = _text(raw, path, findings)
    if text is None:
        return None
    nul = _MAY_HAVE_NUL_ESCAPE.search(text) is not None
    loader = _loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            findings.add(Location(path), "file-empty", "the file is empty")
            return None
        # Without an `&` no node is reached twice; without `<<` none is merged.
        shared = "&" in text
        merges = "<<" in text
        # The anchor walk only where an anchor may be: `&` first (cheap), then the pattern.
        if shared and _MAY_HAVE_ANCHOR.search(text) and not _check_expansion(root, path, findings):
            return None
        # Aliases or merge keys make the walk see another shape than the node tree's.
        checked_depth = shared or merges
        if checked_depth and not _depth_ok(root, path, findings):
            return None
        try:
            data, duplicate_keys, odd_keys = _construct_fast(
                loader, root, shared=shared, merges=merges, nul=nul
            )
        except _Unusual:
            # The walk may have rewritten merge keys in place: read the text again.
            loader.dispose()
            loader = _loader(text)
            root = loader.get_single_node()
            if not checked_depth and not _depth_ok(root, path, findings):
                return None
            data = loader.construct_document(root)
            duplicate_keys, odd_keys = loader.duplicate_keys, loader.odd_keys
    except (yaml.YAMLError, RecursionError) as exc:
        findings.add(*_yaml_problem(exc, path))
        return None
    finally:
        loader.dispose()
    _add_key_findings(path, duplicate_keys, odd_keys, findings)
    return YamlDocument(path=path, data=data, root=root)


class YamlAnchor(Struct, frozen=True):
    """An anchor (`&name`) or, with `alias`, a use of one (`*name`), and its line (0-based)."""

    name: str
    line: int
    alias: bool


def yaml_anchors(text: str, path: str, findings: Findings) -> list[YamlAnchor] | None:
    """Every anchor and alias of a document, in order, read by `parse_yaml`'s
    parser (None, with a finding, for text it refuses). Only its events are
    read: the cost is linear in the text whatever it nests or aliases."""
    loader = _loader(text)
    found: list[YamlAnchor] = []
    try:
        while loader.check_event():
            event = loader.get_event()
            anchor = getattr(event, "anchor", None)
            if anchor:
                alias = isinstance(event, yaml.AliasEvent)
                found.append(YamlAnchor(anchor, event.start_mark.line, alias))
    except yaml.YAMLError as exc:
        findings.add(*_yaml_problem(exc, path))
        return None
    finally:
        loader.dispose()
    return found


def _text(raw: bytes, path: str, findings: Findings) -> str | None:
    if b"\x00" in raw:
        findings.add(Location(path), "file-binary", "not a text file (it contains NUL bytes)")
        return None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        findings.add(
            Location(path),
            "file-encoding",
            f"not UTF-8 text (byte {exc.start} cannot be decoded)",
        )
        return None


def _loader(text: str) -> _Loader:
    loader = _Loader(text)
    loader.duplicate_keys = []
    loader.odd_keys = []
    return loader


def _yaml_problem(exc: Exception, path: str) -> tuple[Location, str, str]:
    """(where, code, message) of a document PyYAML cannot read."""
    if isinstance(exc, RecursionError):
        return Location(path), "yaml-too-deep", "the document is nested too deeply"
    if not isinstance(exc, yaml.MarkedYAMLError):
        return Location(path), "yaml-syntax", str(exc).splitlines()[0]
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    if "could not determine a constructor" in str(exc):
        problem = f"unsupported tag {exc.problem.split('tag ', 1)[-1]}; only plain YAML is allowed"
    elif exc.context and exc.problem:
        problem = f"{exc.context}: {exc.problem}"
    return _mark_location(path, mark), "yaml-syntax", problem


def _add_key_findings(
    path: str,
    duplicate_keys: list[tuple[yaml.Node, str]],
    odd_keys: list[tuple[yaml.Node, str]],
    findings: Findings,
) -> None:
    for key_node, key in duplicate_keys:
        findings.add(
            _mark_location(path, key_node.start_mark),
            "yaml-duplicate-key",
            f'duplicate key "{key}": the earlier value would be silently overwritten',
        )
    for key_node, kind in odd_keys:
        findings.add(
            _mark_location(path, key_node.start_mark),
            "yaml-key-type",
            f"key {key_node.value or '(empty)'} is read as {kind}, not as a name; "
            f'quote it ("{key_node.value}") if a name is meant',
        )


def last_content_line(node: yaml.Node) -> int:
    """The last line (0-based) holding content of a node, not trailing comments or blanks."""
    if isinstance(node, yaml.MappingNode) and node.value and not node.flow_style:
        return last_content_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and node.value and not node.flow_style:
        return last_content_line(node.value[-1])
    end = node.end_mark
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        # A block scalar ends at the start of the line after its last line.
        return end.line - 1 if end.column == 0 else end.line
    return end.line
