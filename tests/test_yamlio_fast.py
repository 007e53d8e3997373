"""The fast constructor against PyYAML's: same values, types, sharing, node
trees and findings for every document, whichever path builds it."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.documents import yamlio
from matrixgen.documents.yamlio import MAX_NESTING_DEPTH, parse_yaml
from matrixgen.model.errors import Findings

# Plain scalars of every implicit type YAML 1.1 knows, and the tricky ones.
PLAIN = [
    "x", "hello world", "a:b", "a-b", "y", "n", "yes", "No", "on", "OFF", "true", "False",
    "TRUE", "null", "Null", "~", "0", "-0", "+12", "017", "0o17", "0x1F", "0b101", "1_000",
    "1__0", "1:20", "-1:20:30", "190:20:30", ".inf", "-.Inf", "+.INF", ".nan", ".NaN",
    "1e3", "1.5", "3.", "-.5", "6.8523015e+5", "685.230_15e+03", "1:20.5", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2002-1-2 3:04:05Z",
    "9223372036854775807", "-9223372036854775808", "<<", "é", "x y z", "0.", "00", "08",
    "0xG", "x\\0y", "", "oN", "nULL", "tRUE", "yES", "NaN", ".NAN", "0X1F", "1E3",
]  # fmt: skip
QUOTED = [
    "'on'", "'1_000'", '"7"', '"2001-12-14"', "'it''s'", '"tab\\there"', '"\\u00e9"',
    "''", '""', '"null"', "'~'", '"<<"', "'x\\0y'", '"="',
]  # fmt: skip
TAGGED = [
    "!!str 12", "!!int '12'", "!!int 0x10", "!!float 3", "!!bool yes", "!!null ''",
    "!!binary aGVsbG8=", "!!timestamp 2001-12-14", "!!str", "!!map {a: 1}", "!!seq [a]",
]  # fmt: skip
# Read by PyYAML, but left to it by the fast walk (by design, not a silent fallback).
UNUSUAL = ["!!set {a, b}", "!!omap [{a: 1}, {b: 2}]", "!!pairs [{a: 1}]"]
# Each an error of its own.
BAD = [
    "2025-02-30", "2001-13-01", "9223372036854775808", "-9223372036854775809",
    "9999999999999999999", "12345678901234567890", "1" * 30, "!!int x", "!!bool x",
    "!!float x", "!!timestamp x",
    "!!binary '***'", '"a\\0b"', '"\\x00"', "!custom 3", "!!map [1]", "!!seq {a: 1}",
    "!!str [a]", "!!python/name:os.system", "=",
]  # fmt: skip
KEYS = [
    "a", "b", "name", "on", "y", "1", "0o17", "null", "~", "2024-01-31", "1:20", ".inf",
    "3.5", "'on'", '"1"', "!!str 1", "!!binary aGk=", "''", "=",
]  # fmt: skip
BAD_KEYS = ["[a]", "{a: 1}", "!!set {a}", '"a\\0b"']
BAD_MERGES = ["<<: 3", "<<: [x]", "<<: [[a]]"]
FLOW_SAFE = [s for s in PLAIN + QUOTED if s and not any(c in s for c in ",[]{}:#")]


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A YAML document in block style (flow for small leaves), with anchors,
    aliases, merge keys, duplicate and odd keys; one in four may hold errors."""
    bad = draw(st.integers(0, 3)) == 0
    anchors: list[str] = []  # of nodes already complete
    mapping_anchors: list[str] = []
    count = [0]

    def rare(pool: list[str], odds: int) -> bool:
        return bool(pool) and draw(st.integers(0, odds)) == 0

    def scalar() -> str:
        if rare(BAD if bad else [], 8):
            return draw(st.sampled_from(BAD))
        if rare(UNUSUAL, 40):
            return draw(st.sampled_from(UNUSUAL))
        return draw(st.sampled_from(draw(st.sampled_from([PLAIN, PLAIN, QUOTED, TAGGED, KEYS]))))

    def key() -> str:
        if rare(BAD_KEYS if bad else [], 20):
            return draw(st.sampled_from(BAD_KEYS))
        return draw(st.sampled_from(KEYS))

    def node(depth: int) -> tuple[str, list[str]]:
        """(text on the parent's line, lines below it, indented by the caller)."""
        if anchors and draw(st.integers(0, 6)) == 0:
            return "*" + draw(st.sampled_from(anchors)), []
        name = ""
        if draw(st.integers(0, 4)) == 0:
            count[0] += draw(st.sampled_from([1, 1, 1, 0]))  # a name used again, at times
            name = f"a{count[0]}"
        prefix = f"&{name}" if name else ""
        choice = draw(st.integers(0, 9)) if depth < 4 else 0
        is_mapping = False
        if choice <= 4:
            head, lines = scalar(), []
            if draw(st.integers(0, 30)) == 0:  # lists nested as deep as allowed, or one more
                levels = MAX_NESTING_DEPTH - depth + draw(st.integers(0, 1))
                head = "[" * levels + (head if head in FLOW_SAFE else "x") + "]" * levels
        elif choice == 5:
            items = draw(st.lists(st.sampled_from(FLOW_SAFE), max_size=3))
            if draw(st.booleans()):
                head = "[" + ", ".join(items) + "]"
            else:
                head = "{" + ", ".join(f"k{i % 2}: {v}" for i, v in enumerate(items)) + "}"
                is_mapping = True
            lines = []
        elif choice <= 7:
            head, lines, is_mapping = "", mapping(depth), True
        else:
            head, lines = "", sequence(depth)
        if not lines and not head:
            head = "{}" if is_mapping else "[]"
        if name:
            (mapping_anchors if is_mapping else anchors).append(name)
            if is_mapping and draw(st.booleans()):
                anchors.append(name)
        return " ".join(p for p in (prefix, head) if p), lines

    def entry(lead: str, depth: int) -> list[str]:
        head, lines = node(depth + 1)
        return [f"{lead} {head}".rstrip()] + ["  " + line for line in lines]

    def mapping(depth: int) -> list[str]:
        out: list[str] = []
        for _ in range(draw(st.integers(0, 4))):
            if mapping_anchors and draw(st.integers(0, 5)) == 0:
                merged = draw(st.lists(st.sampled_from(mapping_anchors), min_size=1, max_size=2))
                if len(merged) == 1 and draw(st.booleans()):
                    out.append(f"<<: *{merged[0]}")
                else:
                    out.append("<<: [" + ", ".join("*" + m for m in merged) + "]")
            elif rare(BAD_MERGES if bad else [], 8):
                out.append(draw(st.sampled_from(BAD_MERGES)))
            elif draw(st.integers(0, 15)) == 0:
                out.append("<<: {m: 1, b: 2, <<: {n: 3}}")
            out += entry(f"{key()}:", depth)
        return out

    def sequence(depth: int) -> list[str]:
        out: list[str] = []
        for _ in range(draw(st.integers(0, 4))):
            out += entry("-", depth)
        return out

    if draw(st.integers(0, 9)) == 0:
        head, lines = node(0)
        body = [head, *lines] if head else lines
    else:
        body = mapping(0) or ["{}"]
    return "\n".join(body) + "\n"


@contextlib.contextmanager
def pyyaml_only() -> Iterator[None]:
    """parse_yaml as it was before the fast walk and resolver: PyYAML's
    constructor and resolver throughout."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise yamlio._Unusual

    stock = yaml.resolver.BaseResolver
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(yamlio, "_construct_fast", refuse))
        for name in ("resolve", "descend_resolver", "ascend_resolver"):
            stack.enter_context(mock.patch.object(yamlio._Loader, name, getattr(stock, name)))
        yield


def outcome(raw: bytes) -> tuple[str, Any, Any, list]:
    findings = Findings()
    try:
        document = parse_yaml(raw, "f.yaml", findings)
    except Exception as exc:  # the same crash, if any, on both paths
        return "raised", f"{type(exc).__name__}: {exc}", None, findings.items
    if document is None:
        return "refused", None, None, findings.items
    return "read", document.data, nodes(document.root), findings.items


def nodes(root: yaml.Node | None) -> Any:
    """A node tree as plain values (shared nodes by their first number)."""
    seen: dict[int, int] = {}

    def walk(node: yaml.Node) -> Any:
        if id(node) in seen:
            return ("shared", seen[id(node)])
        seen[id(node)] = len(seen)
        mark = (node.start_mark.line, node.start_mark.column)
        if isinstance(node, yaml.ScalarNode):
            return (node.tag, node.value, mark)
        if isinstance(node, yaml.MappingNode):
            return (node.tag, mark, [(walk(k), walk(v)) for k, v in node.value])
        return (node.tag, mark, [walk(v) for v in node.value])

    return None if root is None else walk(root)


def assert_same(new: Any, old: Any, pairs: dict[int, int] | None = None) -> None:
    """Equal, of the same types all the way down, in the same order, with the
    same lists and mappings shared (`pairs`: each list or mapping met so far
    on either side, by id, with its counterpart)."""
    pairs = {} if pairs is None else pairs
    assert type(new) is type(old), (new, old)
    if isinstance(new, list | dict):
        if id(new) in pairs or -id(old) in pairs:
            assert pairs.get(id(new)) == id(old), "sharing differs"
            assert pairs.get(-id(old)) == id(new), "sharing differs"
            return
        pairs[id(new)], pairs[-id(old)] = id(old), id(new)
    if isinstance(new, dict):
        assert list(new) == list(old)
        for (knew, vnew), (kold, vold) in zip(new.items(), old.items(), strict=True):
            assert_same(knew, kold, pairs)
            assert_same(vnew, vold, pairs)
    elif isinstance(new, list):
        assert len(new) == len(old)
        for a, b in zip(new, old, strict=True):
            assert_same(a, b, pairs)
    elif isinstance(new, float) and math.isnan(new):
        assert math.isnan(old)
    else:
        assert new == old, (new, old)
        if isinstance(new, dt.datetime):
            assert new.tzinfo == old.tzinfo


def assert_loads_as_pyyaml(text: str) -> tuple[str, Any, Any, list]:
    raw = text.encode()
    new = outcome(raw)
    with pyyaml_only():
        old = outcome(raw)
    assert new[0] == old[0], (new, old)
    assert new[3] == old[3]  # findings: same codes, places, messages, order
    assert_same(new[1], old[1])
    assert new[2] == old[2]  # node trees (merge keys rewrite them) and positions
    return new


def fell_back(text: str) -> bool:
    """Whether the fast walk gave up on a document."""
    calls: list[bool] = []
    real = yamlio._construct_fast

    def spy(*args: Any, **kwargs: Any) -> Any:
        try:
            result = real(*args, **kwargs)
        except yamlio._Unusual:
            calls.append(True)
            raise
        calls.append(False)
        return result

    with mock.patch.object(yamlio, "_construct_fast", spy):
        parse_yaml(text.encode(), "f.yaml", Findings())
    return any(calls)


@example("a: &x [1, 2]\nb: *x\nc: {<<: &m {k: 1}, k: 2}\nd: *m\n")
@example("on: 1\n1: a\ntrue: b\n1: c\n")
@example("a: &a {b: 1}\nc:\n  <<: [*a, {b: 2, on: 3}]\n  b: 4\n  b: 5\n")
@given(documents())
def test_documents_load_as_pyyaml_loads_them(text: str) -> None:
    status = assert_loads_as_pyyaml(text)[0]
    # The fast walk gives up only where PyYAML has something to say, or on what
    # it leaves to PyYAML by design: never silently on an ordinary document.
    if status == "read" and not any(marker in text for marker in UNUSUAL):
        assert not fell_back(text), text


@pytest.mark.parametrize(
    "text",
    [
        # values and types of every implicit kind, and key order
        "z: 1\na: on\nm: [0o17, 017, 1_000, 1:20, .inf, -.inf, .nan, 2001-12-14, ~, '']\n",
        "t: 2001-12-14t21:59:43.10-05:00\nb: !!binary aGVsbG8=\nf: 6.8523015e+5\n",
        # duplicate keys (the later one reported), odd keys re-keyed as written
        "a: 1\nb: 2\na: 3\non: x\n7: y\n~: z\n2024-01-31: d\n'on': q\n",
        "{1: a, true: b, 1.0: c}\n",
        # merge keys: one, several, overridden, inline, nested, and bad ones
        "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\n",
        "a: &a {x: 1}\nb: &b {x: 2, z: 0}\nc: {<<: [*a, *b], w: 1}\n",
        "c:\n  <<: {x: 1, <<: {y: 2}}\n  z: 3\n",
        "a: &a [1]\nc: {<<: *a}\n",
        "c: {<<: 3}\n",
        # aliases: a list used twice is one list
        "a: &x [1, {b: 2}]\nb: *x\nc: [*x, *x]\n",
        "a: &s text\nb: *s\n",
        # errors: located, and the first one in PyYAML's order
        "a: [1, 2025-02-30]\nb: 99999999999999999999\n",
        "a: [9223372036854775807, 999999999999999999]\n",
        "a: 9223372036854775808\n",
        "a: 9999999999999999999\n",
        "deep: [[[[ 99999999999999999999 ]]]]\nshallow: 2025-02-30\n",
        "a: !!set {x, y}\nb: !!omap [{k: 1}]\n",
        "a: !custom 1\n",
        "? [a]\n: 1\n",
        "=: 1\n",
        # NUL: refused where the escape is, a plain `\\0` elsewhere is text
        'a: "x\\0y"\n',
        "a: 'x\\0y'\n",
        "a: x\\0y\n",
        # a plain document root
        "just text\n",
        "12\n",
        "[]\n",
    ],
)
def test_edges_load_as_pyyaml_loads_them(text: str) -> None:
    assert_loads_as_pyyaml(text)


def test_a_list_used_twice_is_one_list_and_the_walk_builds_it() -> None:
    text = "a: &x [1, {b: 2}]\nb: *x\nc: [*x]\n"
    status, data, _, findings = assert_loads_as_pyyaml(text)
    assert status == "read" and not findings
    assert data["a"] is data["b"] is data["c"][0]
    assert data["a"][1] is data["c"][0][1]
    assert not fell_back(text)


def test_merge_keys_are_built_by_the_walk() -> None:
    text = "a: &a {x: 1, y: 2}\nb:\n  <<: *a\n  y: 3\n  y: 4\n"
    _, data, _, findings = assert_loads_as_pyyaml(text)
    assert data["b"] == {"x": 1, "y": 4}
    assert ("yaml-duplicate-key", 5) in [(f.code, f.location.line) for f in findings]
    assert not fell_back(text)


def test_odd_keys_are_re_keyed_by_the_walk() -> None:
    text = "a:\n  on: 1\n  7: x\n  plain: y\n"
    _, data, _, findings = assert_loads_as_pyyaml(text)
    assert data == {"a": {"on": 1, "7": "x", "plain": "y"}}
    assert list(data["a"]) == ["on", "7", "plain"]
    assert [f.code for f in findings] == ["yaml-key-type", "yaml-key-type"]
    assert not fell_back(text)


@pytest.mark.parametrize("extra", [0, 1])
@pytest.mark.parametrize("flow", [True, False])
def test_the_walk_stops_past_the_nesting_limit(extra: int, flow: bool) -> None:
    depth = MAX_NESTING_DEPTH + extra
    if flow:
        text = "a: " + "[" * (depth - 1) + "x" + "]" * (depth - 1) + "\n"
    else:
        text = "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + "  " * depth + "x\n"
    status, _, _, findings = assert_loads_as_pyyaml(text)
    if extra:
        assert status == "refused" and [f.code for f in findings] == ["yaml-too-deep"]
    else:
        assert status == "read" and not findings


def test_nul_is_refused_only_where_the_escape_is() -> None:
    status, _, _, findings = assert_loads_as_pyyaml('a: ok\nb: "x\\0y"\n')
    assert status == "refused" and findings[0].location.line == 2
    assert not fell_back('a: "x\\ty"\n')


def test_the_megatron_tree_is_built_by_the_walk_as_pyyaml_builds_it(megatron_dir: Path) -> None:
    paths = sorted(megatron_dir.rglob("*.yaml"))
    assert paths
    for path in paths:
        text = path.read_text()
        assert_loads_as_pyyaml(text)
        assert not fell_back(text), path


def test_the_loader_has_no_path_resolvers() -> None:
    # Its resolver remembers tags by text and skips path bookkeeping: right only
    # while no path resolver (`add_path_resolver`) is registered.
    assert not yamlio._Loader.yaml_path_resolvers


@given(st.lists(st.one_of(st.sampled_from(PLAIN + KEYS), st.text(max_size=12)), max_size=20))
def test_plain_scalars_get_the_tags_pyyaml_gives_them(values: list[str]) -> None:
    loader = yamlio._Loader("")
    stock = yaml.resolver.BaseResolver
    try:
        for value in values + values:  # the second time from what was remembered
            for implicit in [(True, False), (False, True), (False, False)]:
                want = stock.resolve(loader, yaml.ScalarNode, value, implicit)
                assert loader.resolve(yaml.ScalarNode, value, implicit) == want, value
        for kind in (yaml.SequenceNode, yaml.MappingNode):
            assert loader.resolve(kind, None, True) == stock.resolve(loader, kind, None, True)
    finally:
        loader.dispose()
