"""One entry as the quarantine file writes it: its fields in a fixed order,
rendered by ruamel.yaml (round-trip dumper, flow lists) in the indentation and
quoting the file's entries use, so that PyYAML (YAML 1.1) reads back the same
values; and the readable, content-derived id of a new entry."""

from __future__ import annotations

import datetime as dt
import io
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from msgspec import Struct

from matrixgen.documents.quarantine import EntryFields, Match
from matrixgen.quarantine.model import plain
from matrixgen.util.escape import yaml_double_quoted, yaml_for_log

# The order fields are written in, whatever order the caller gives: as declared.
FIELD_ORDER = EntryFields.__struct_encode_fields__
MATCH_ORDER = Match.__struct_encode_fields__
# Lists written one item a line (node ids are long); every other list is a flow list.
BLOCK_LISTS = frozenset({"node_ids"})


class QuoteStyle(Struct, frozen=True):
    """How a file's entries quote: the quote character of its quoted strings
    (None: no quoted string yet, the dumper's own choice), and whether its
    `added` / `expires` dates are written as quoted strings."""

    quote: str | None = None
    dates_quoted: bool = False


def quote_style(items: Sequence[yaml.Node]) -> QuoteStyle:
    """The style the existing entries use: the more frequent quote character
    (the first one seen on a tie), and quoted dates when any date is quoted."""
    quotes: list[str] = []  # the quote characters of quoted scalars, in order
    dates_quoted = False
    stack = list(items)
    while stack:
        node = stack.pop(0)
        if isinstance(node, yaml.ScalarNode) and node.style in _QUOTES:
            quotes.append(node.style)
        elif isinstance(node, yaml.SequenceNode):
            stack[:0] = node.value
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value in ("added", "expires") and getattr(value, "style", None) in _QUOTES:
                    dates_quoted = True
            stack[:0] = [v for _, v in node.value]
    double, single = quotes.count('"'), quotes.count("'")
    if double == single:  # none at all too: no quote character yet
        return QuoteStyle(quotes[0] if quotes else None, dates_quoted)
    return QuoteStyle('"' if double > single else "'", dates_quoted)


_QUOTES = ('"', "'")


def render_entry(
    entry: Mapping[str, Any],
    dash_col: int,
    key_col: int,
    newline: str,
    style: QuoteStyle | None = None,
) -> str:
    """One entry as block YAML lines, indented and quoted the way the file's
    entries are (`style`)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

    style = style or QuoteStyle()
    dumper = YAML(typ="rt")
    dumper.width = 4096
    dumper.indent(mapping=2, sequence=4, offset=2)
    quoted = {'"': DoubleQuotedScalarString, "'": SingleQuotedScalarString}

    def needs_quotes(text: str) -> bool:
        out = io.StringIO()
        dumper.dump({"k": text}, out)
        return out.getvalue()[3:4] in ("'", '"')

    def scalar(value: Any, *, in_flow: bool = False) -> Any:
        if isinstance(value, dt.date) and style.dates_quoted:
            return quoted[style.quote or '"'](value.isoformat())
        if not isinstance(value, str):
            return value
        if yaml_double_quoted(value) or not value.isprintable():
            return DoubleQuotedScalarString(value)  # only double quotes can escape it
        if needs_quotes(value) or (in_flow and _FLOW_INDICATOR.search(value)):
            # The dumper quotes it anyway: in the file's way (explicitly: a flow
            # list would write what a block quotes plain, `[? x]`). In a flow
            # list YAML 1.1 also ends a plain scalar at `?` (a glob's), which the
            # dumper, writing YAML 1.2, leaves plain: `[gpt_tp?]` is unreadable.
            return quoted[style.quote or "'"](value)
        if not _plain_is_text(value):  # plain, YAML 1.1 would read another thing
            return quoted[style.quote or '"'](value)
        return value

    def flow(values: Sequence[str]) -> CommentedSeq:
        seq = CommentedSeq([scalar(v, in_flow=True) for v in values])
        seq.fa.set_flow_style()
        return seq

    data = CommentedMap()
    for key in FIELD_ORDER:
        value = entry.get(key)
        if value in (None, [], ()):
            continue
        if isinstance(value, Mapping):
            value = CommentedMap(
                (k, flow(v) if isinstance(v, list | tuple) else scalar(v))
                for k in MATCH_ORDER
                if (v := value.get(k)) not in (None, [], ())
            )
        elif key in BLOCK_LISTS:
            value = CommentedSeq([scalar(v) for v in value])
        elif isinstance(value, list | tuple):
            value = flow(list(value))
        else:
            value = scalar(value)
        data[key] = value
    out = io.StringIO()
    dumper.dump(data, out)
    body = yaml_for_log(out.getvalue()).splitlines()
    pad = " " * key_col
    lines = [" " * dash_col + "-" + " " * (key_col - dash_col - 1) + body[0]]
    lines += [pad + line if line else line for line in body[1:]]
    return newline.join(lines) + newline


_PLAIN_PUNCTUATION = frozenset(" _./+-()")
# The flow indicators: a YAML 1.1 reader ends a plain scalar at any of them in a flow list.
_FLOW_INDICATOR = re.compile(r"[,?\[\]{}]")


def _plain_is_text(value: str) -> bool:
    if not value or value != value.strip() or value[0] in "-.(":
        return False
    if not all(c.isalnum() or c in _PLAIN_PUNCTUATION for c in value[:1]):
        return False
    if not all(c.isalnum() or c in _PLAIN_PUNCTUATION or c in "*?" for c in value[1:]):
        return False  # a glob's * and ? are plain past the first character
    resolved = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))
    return resolved == "tag:yaml.org,2002:str"


_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
# The readable part of a derived id: with its hash, well under the schema's 128.
SLUG_MAX = 48


def slug(text: str) -> str:
    cleaned = _ID_CHARS.sub("-", text).strip("-._") or "entry"
    return cleaned[:SLUG_MAX].rstrip("-._")


def entry_id(entry: Mapping[str, Any]) -> str:
    """A readable, content-derived id: the test case, then a short hash of what
    the entry matches, where, and its tracker."""
    import hashlib
    import json

    basis = json.dumps(
        {
            "match": plain(entry.get("match", {}), sparse=True),
            "where": sorted(entry.get("where") or []),
            "tracker": entry.get("tracker"),
            "action": entry.get("action"),
            "node_ids": sorted(entry.get("node_ids") or []),
        },
        sort_keys=True,
    )
    digest = hashlib.sha256(basis.encode()).hexdigest()[:6]
    cases = entry.get("match", {}).get("test_case", "entry")
    first = cases[0] if isinstance(cases, list) and cases else cases
    return f"{slug(str(first))}-{digest}"


def unique_id(wanted: str, taken: set[str]) -> str:
    candidates = itertools.chain([wanted], (f"{wanted}-{n}" for n in itertools.count(2)))
    return next(c for c in candidates if c not in taken)
