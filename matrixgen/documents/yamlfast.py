"""The fast construct path of `parse_yaml`: one tight walk that builds strings,
lists and mappings itself, hands other scalars to PyYAML's constructor methods,
and gives up (`_Unusual`) on anything else.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

# Lists and mappings inside each other at most this deep (a recipe or a
# quarantine file needs fewer than ten): every later stage may walk a value
# recursively, and a deeper document would end in a RecursionError there.
MAX_NESTING_DEPTH = 64


def _kind_of(value: Any) -> str:
    if value is None:
        return "a null value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dt.date):
        return "a date"
    return f"a {type(value).__name__}"


_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_VALUE = "tag:yaml.org,2002:value"
_INT = "tag:yaml.org,2002:int"
# Scalars of these tags are built by the loader's own constructor methods (so YAML
# 1.1's reading of `on`, `0o17`, `1_000`, `1:20`, `.inf` or a date stays PyYAML's).
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "null", "bool", "int", "float", "binary", "timestamp")
)


class _Unusual(Exception):
    """What the fast constructor leaves to PyYAML's: a tag it does not build
    (`!!set`, `!!omap`, an unknown one), a merge key it was not told about, a
    key that is a list, a document too deep, or any error."""


def _builder(
    loader: SafeConstructor, below: list[tuple[yaml.Node, Any]], memo: dict[yaml.Node, Any] | None
) -> Callable[[yaml.Node], Any]:
    """The constructor of any node but a plain string: a scalar's value, or an
    empty list or dict put on `below` to be filled at its level (once, with `memo`)."""
    scalar_node = yaml.ScalarNode
    sequence_node = yaml.SequenceNode
    mapping_node = yaml.MappingNode
    constructors = loader.yaml_constructors

    def build(node: yaml.Node) -> Any:
        kind = type(node)
        tag = node.tag
        if kind is scalar_node:
            if tag == _INT:
                # Digits only, no leading 0 (octal), short of 64 bits: what
                # PyYAML's int reading comes to for such a text.
                text = node.value
                if text.isdecimal() and text[0] != "0" and len(text) < 19:
                    return int(text)
            elif tag not in _SCALAR_TAGS:
                raise _Unusual
            return constructors[tag](loader, node)
        if memo is not None and node in memo:
            return memo[node]
        if kind is sequence_node and tag == _SEQ:
            value: Any = []
        elif kind is mapping_node and tag == _MAP:
            value = {}
        else:
            raise _Unusual
        if memo is not None:
            memo[node] = value
        below.append((node, value))
        return value

    return build


def _construct_fast(
    loader: SafeConstructor, root: yaml.Node, *, shared: bool, merges: bool, nul: bool
) -> tuple[Any, list[tuple[yaml.Node, str]], list[tuple[yaml.Node, str]]]:
    """The value of a composed document, with its duplicate and odd keys, as
    `loader.construct_document` builds them. `shared`: nodes may be reached
    twice; `merges`: the text may hold `<<` keys; `nul`: strings are checked for
    NUL. Level by level, as PyYAML builds (findings in the same order).
    """
    scalar_node = yaml.ScalarNode
    fast_str = None if nul else _STR  # with NUL checks every string goes the long way
    duplicate_keys: list[tuple[yaml.Node, str]] = []
    odd_keys: list[tuple[yaml.Node, str]] = []
    below: list[tuple[yaml.Node, Any]] = []
    build = _builder(loader, below, {} if shared else None)
    try:
        if type(root) is scalar_node and root.tag == fast_str:
            return root.value, duplicate_keys, odd_keys
        top = build(root)
        depth = 1
        while below:
            if depth > MAX_NESTING_DEPTH:
                raise _Unusual
            level = below.copy()
            below.clear()
            for node, value in level:
                if type(value) is list:
                    value.extend(
                        [
                            item.value
                            if item.tag == fast_str and type(item) is scalar_node
                            else build(item)
                            for item in node.value
                        ]
                    )
                    continue
                if merges:
                    loader.flatten_mapping(node)
                pairs = node.value
                odd = False
                for key_node, value_node in pairs:
                    if key_node.tag == fast_str and type(key_node) is scalar_node:
                        key = key_node.value
                    elif type(key_node) is scalar_node:
                        if key_node.tag == _VALUE:
                            key_node.tag = _STR  # a key `=`: a name, as PyYAML's merging makes it
                        key = build(key_node)
                        odd = odd or type(key) is not str
                    else:
                        raise _Unusual  # a list or mapping as a key: PyYAML's error
                    if value_node.tag == fast_str and type(value_node) is scalar_node:
                        value[key] = value_node.value
                    else:
                        value[key] = build(value_node)
                if len(value) < len(pairs):
                    _note_duplicate_keys(pairs, duplicate_keys)
                if odd:
                    _rename_odd_keys(pairs, value, build, odd_keys)
            depth += 1
    except _Unusual:
        raise
    except Exception as exc:  # an error is reported as PyYAML reports it
        raise _Unusual from exc
    return top, duplicate_keys, odd_keys


def _note_duplicate_keys(pairs: list, found: list[tuple[yaml.Node, str]]) -> None:
    """Each key written a second time in one mapping (merge keys aside)."""
    seen: set[tuple[str, str]] = set()
    for key_node, _ in pairs:
        if type(key_node) is yaml.ScalarNode and key_node.value != "<<":
            key = (key_node.tag, key_node.value)
            if key in seen:
                found.append((key_node, key_node.value))
            seen.add(key)


def _rename_odd_keys(pairs: list, mapping: dict, build: Any, found: list) -> None:
    """Key each value whose key is no string by the key's text (recorded), in place."""
    written: dict[Any, str] = {}
    for key_node, _ in pairs:
        key = key_node.value if key_node.tag == _STR else build(key_node)
        if type(key) is not str:
            found.append((key_node, _kind_of(key)))
            written.setdefault(key, key_node.value)
    renamed = {(k if type(k) is str else written.get(k, str(k))): v for k, v in mapping.items()}
    mapping.clear()
    mapping.update(renamed)
