"""Bad YAML input: every case is a located finding, never a traceback or a hang."""

from __future__ import annotations

import datetime as dt
import time

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.documents.yamlio import _MAY_HAVE_ANCHOR, MAX_EXPANDED_NODES, parse_yaml
from matrixgen.model.errors import Findings


def parse(text: str | bytes) -> tuple[object, Findings]:
    findings = Findings()
    raw = text.encode() if isinstance(text, str) else text
    doc = parse_yaml(raw, "f.yaml", findings)
    return (doc.data if doc else None), findings


def only(findings: Findings) -> str:
    assert len(findings.items) == 1, findings.items
    return str(findings.items[0])


def test_plain_document_loads_with_positions() -> None:
    findings = Findings()
    doc = parse_yaml(b"a:\n  b: [1, 2]\n  c: x\n", "f.yaml", findings)
    assert doc is not None and not findings.items
    assert doc.data == {"a": {"b": [1, 2], "c": "x"}}
    loc = doc.locate(["a", "b", 1])
    assert (loc.line, loc.column) == (2, 10)
    key = doc.locate(["a", "c"], key=True)
    assert (key.line, key.column) == (3, 3)
    # A missing key points at the deepest mapping that exists.
    missing = doc.locate(["a", "nope", 3])
    assert (missing.line, missing.column) == (2, 3)


def test_syntax_error_is_located() -> None:
    data, findings = parse("a: [1, 2\nb: 3\n")
    assert data is None
    message = only(findings)
    assert message.startswith("f.yaml:2:")
    assert "yaml-syntax" in message


@pytest.mark.parametrize(
    "text",
    [
        "!!python/object/apply:os.system ['touch /tmp/pwned']\n",
        "a: !!python/name:os.system\n",
        "a: !custom 3\n",
    ],
)
def test_python_and_unknown_tags_are_refused(text: str) -> None:
    data, findings = parse(text)
    assert data is None
    message = only(findings)
    assert "unsupported tag" in message and "f.yaml:1:" in message


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        refs = ",".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    start = time.process_time()  # CPU time: the machine may be busy
    data, findings = parse("\n".join(lines) + "\n")
    assert time.process_time() - start < 5
    assert data is None
    message = only(findings)
    assert "yaml-alias-bomb" in message and f"{MAX_EXPANDED_NODES:,}" in message


def test_small_aliases_are_fine() -> None:
    data, findings = parse("base: &b [dev, lts]\nother: *b\n")
    assert not findings.items
    assert data == {"base": ["dev", "lts"], "other": ["dev", "lts"]}


def test_recursive_alias_is_refused() -> None:
    data, findings = parse("a: &a\n  - *a\n")
    assert data is None
    assert "yaml-recursive-alias" in only(findings)


def test_binary_and_non_utf8_and_empty_files() -> None:
    assert "file-binary" in only(parse(b"\x89PNG\r\n\x1a\n\x00\x00")[1])
    assert "file-encoding" in only(parse(b"a: \xff\xfe\n")[1])
    assert "file-empty" in only(parse(b"")[1])
    assert "file-empty" in only(parse(b"# only a comment\n")[1])


def test_several_documents_are_refused() -> None:
    data, findings = parse("a: 1\n---\nb: 2\n")
    assert data is None
    assert "f.yaml:" in only(findings)


def test_duplicate_keys_are_reported_not_dropped() -> None:
    _, findings = parse("spec:\n  name: a\n  model: x\n  name: b\n")
    message = only(findings)
    assert message.startswith("f.yaml:4:3:") and 'duplicate key "name"' in message


def test_merge_keys_are_not_duplicates() -> None:
    data, findings = parse("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n")
    assert not findings.items
    assert data == {"base": {"x": 1}, "c": {"x": 1, "y": 2}}


def _depth(data: object) -> int:
    depth = 0
    while isinstance(data, list) and data:
        data, depth = data[0], depth + 1
    return depth


def test_deep_nesting_is_one_located_error() -> None:
    # Past the parser's nesting limit: one finding at the line, never a crash.
    data, findings = parse("[" * 5000 + "]" * 5000)
    assert data is None
    message = only(findings)
    assert message.startswith("f.yaml:1:"), message
    assert "nesting depth" in message or "[yaml-too-deep]" in message, message


def test_nesting_within_the_limit_loads_in_full() -> None:
    data, findings = parse("[" * 50 + "]" * 50)
    assert not findings.items and _depth(data) == 49


def test_impossible_date_is_a_located_finding() -> None:
    data, findings = parse("added: 2025-02-30\n")
    assert data is None
    message = only(findings)
    assert message.startswith("f.yaml:1:8:") and "not a valid date" in message


def test_keys_yaml_reads_as_values_are_located_errors_keyed_as_written() -> None:
    # YAML 1.1 reads these keys as a boolean, a number, null and a date: no
    # recipe, config or quarantine key is ever meant so, and a later stage that
    # met a non-string key (sorting, JSON Schema) would crash.
    text = "a:\n  on: 1\n  7: x\n  null: y\n  2024-01-31: z\n  plain: w\nb: [{~: 1}]\n"
    data, findings = parse(text)
    assert data == {
        "a": {"on": 1, "7": "x", "null": "y", "2024-01-31": "z", "plain": "w"},
        "b": [{"~": 1}],
    }
    found = sorted((f.location.line, f.location.column, f.code, f.message) for f in findings.items)
    assert [(line, col, code) for line, col, code, _ in found] == [
        (2, 3, "yaml-key-type"),
        (3, 3, "yaml-key-type"),
        (4, 3, "yaml-key-type"),
        (5, 3, "yaml-key-type"),
        (7, 6, "yaml-key-type"),
    ]
    assert "key on is read as a boolean" in found[0][3] and '("on")' in found[0][3]
    assert "a number" in found[1][3] and "a null value" in found[2][3]
    assert "a date" in found[3][3]
    # Quoted, they are names, and nothing is reported.
    data, findings = parse("'on': 1\n\"7\": x\n")
    assert data == {"on": 1, "7": "x"} and not findings.items


@pytest.mark.parametrize(
    "number",
    [
        "1" * 5000,
        "0x" + "f" * 5000,
        "1" + "_0" * 3000,
        "9223372036854775808",
        "-9223372036854775809",
    ],
)
def test_numbers_past_64_bits_are_located_findings(number: str) -> None:
    # Python will not even read (or print) an int past 4,300 digits, and no CI
    # system takes one past 64 bits: a finding, never a traceback further on.
    data, findings = parse(f"spec:\n  n_repeat: {number}\n")
    assert data is None
    message = only(findings)
    assert message.startswith("f.yaml:2:13: error: the number ") and "fit in 64 bits" in message
    assert len(message) < 200


def test_64_bit_numbers_still_load() -> None:
    data, findings = parse("a: [9223372036854775807, -9223372036854775808, 0x10, 1_000]\n")
    assert data == {"a": [2**63 - 1, -(2**63), 16, 1000]} and not findings.items


def test_deep_nesting_with_an_anchor_is_not_called_a_recursive_alias() -> None:
    # The alias check walks the document: running out of stack there means the
    # document is too deep, not that an alias contains itself.
    depth = 3000
    _, findings = parse("a: &x 1\nb: " + "[" * depth + "]" * depth + "\n")
    messages = [str(f) for f in findings.items]
    assert not any("yaml-recursive-alias" in m for m in messages), messages
    _, findings = parse("a: &a\n  - *a\n")
    assert "yaml-recursive-alias" in only(findings)


# Pieces of YAML around an anchor: the separators libyaml allows before one, and
# text that only looks like one (`a&&b`, `2>&1`).
_ANCHOR_PIECES = [" ", "\n", "\t", "\r", "\x85", "\u2028", "\ufeff", "?", ":", "-", "[", "]"]
_ANCHOR_PIECES += ["{", "}", ",", "&", "&a", "a", "*a", "!", "!!", '"', "'", "|", "#", "---", ">"]


@example(["[", "?", "&a", " ", "[", "*a", "]", "]"])  # `?` needs no space after it in flow
@example(["\ufeff", "&a", "\n", "-", " ", "*a"])  # a second byte-order mark
@given(st.lists(st.sampled_from(_ANCHOR_PIECES), max_size=10))
def test_every_anchor_libyaml_reads_is_seen_by_the_anchor_pattern(pieces: list[str]) -> None:
    # Files without a match skip the alias checks (recursive aliases, alias bombs)
    # and later walks assume there is none: a miss must never happen.
    text = "".join(pieces)
    try:
        events = list(yaml.parse(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        return
    if any(getattr(e, "anchor", None) for e in events if not isinstance(e, yaml.AliasEvent)):
        assert _MAY_HAVE_ANCHOR.search(text), text


@pytest.mark.parametrize(
    "text",
    ["[?&a [*a]]\n", "\ufeff&a\n- *a\n"],
    ids=["flow-question-mark", "byte-order-mark"],
)
def test_recursive_alias_behind_an_unusual_separator_is_refused(text: str) -> None:
    # (The first file starts with a byte-order mark, which the decoder drops,
    # and a second one, which libyaml skips.)
    data, findings = parse(b"\xef\xbb\xbf" + text.encode())
    assert data is None
    assert "yaml-recursive-alias" in only(findings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!bool x\n", '"x" is not a boolean (true or false)'),
        ("a: !!float x\n", '"x" is not a number'),
        ("a: !!float 1:x\n", '"1:x" is not a number'),
        ("a: !!timestamp x\n", '"x" is not a date'),
        (
            "a: !!timestamp " + "9" * 40 + "\n",
            '"99999999999999999999... (40 characters)" is not a date',
        ),
    ],
)
def test_explicit_tags_on_text_they_cannot_read_are_located_findings(
    text: str, message: str
) -> None:
    # Only an explicit tag puts such a text there (YAML gives `x` no such tag itself).
    data, findings = parse(text)
    assert data is None
    assert only(findings) == f"f.yaml:1:4: error: {message} [yaml-syntax]"


def test_explicit_tags_on_text_they_read_still_load() -> None:
    data, findings = parse(
        "a: !!bool yes\nb: !!float 3\nc: !!timestamp 2001-12-14\nd: !!float 1:30\n"
    )
    assert not findings.items
    assert data == {"a": True, "b": 3.0, "c": dt.date(2001, 12, 14), "d": 90.0}
