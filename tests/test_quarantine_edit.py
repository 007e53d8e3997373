"""Safe edits of the quarantine file: byte-for-byte round trips, comments kept,
atomic writes, a lock so concurrent adds lose nothing, malformed files left
alone; and the `quarantine add/remove/lift/list` commands."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.model.errors import QuarantineError
from matrixgen.quarantine.edit import delete_entries, edit, insert_entries
from matrixgen.quarantine.model import parse_quarantine
from matrixgen.quarantine.render import entry_id, quote_style
from matrixgen.util.textedit import split_ending, split_lines
from tests.escape_fixtures import runner_commands
from tests.quarantine_fixtures import v1_files, v2_files

NEW = {
    "tracker": "#7201",
    "kind": "flaky",
    "action": "deselect",
    "match": {"model": "moe", "test_case": "ep8_*", "platforms": ["dgx_h100"]},
    "where": ["github/L1", "gitlab/mr"],
    "node_ids": ["tests/unit/test_a.py::test_b[x-y]"],
    "owner": "on-call",
    "added": dt.date(2025, 3, 1),
    "expires": dt.date(2025, 4, 1),
    "reason": "hangs: see #7201 (twice: 'quoted')",
}

HAND_WRITTEN = """\
# Quarantine: hand-edited header
#   with two lines
entries:
  # EP8 hang, on-call 2025-01
  - id: first
    tracker:   "#1"     # odd spacing, kept
    kind: flaky
    action: skip
    match: { test_case: a ,platforms: [ dgx_h100 ] }
    owner: me
    reason: >
      folded
      text

  - id: second
    tracker: 'https://github.com/acme/ml/issues/2'
    kind: broken
    action: allow-failure
    match:
        test_case: b
    owner: you
    reason: |-
      literal
# footer comment
"""

SAMPLES = [
    HAND_WRITTEN,
    "entries: []\n",
    "entries: []   # none yet\n",
    "# only a comment\nentries: []\n",
    "entries:\n- id: a\n  tracker: '#1'\n  kind: flaky\n  action: skip\n"
    "  match: {test_case: x}\n  owner: me\n  reason: r\n",
    HAND_WRITTEN.replace("\n", "\r\n"),
    # Files that end without a newline keep ending without one.
    HAND_WRITTEN.rstrip("\n"),
    HAND_WRITTEN.replace("\n", "\r\n").rstrip("\r\n"),
    "entries:\n- id: a\n  tracker: '#1'\n  kind: flaky\n  action: skip\n"
    "  match: {test_case: x}\n  owner: me\n  reason: r",
    "entries: []",
]


def entries_of(text: str) -> list:
    return (yaml.safe_load(text) or {}).get("entries") or []


@pytest.mark.parametrize("text", SAMPLES)
def test_add_then_remove_gives_back_the_file_byte_for_byte(text: str) -> None:
    added = insert_entries(text, [{"id": "new", **NEW}])
    assert entries_of(added)[-1]["id"] == "new"
    assert entries_of(added)[:-1] == entries_of(text)
    back = delete_entries(added, [len(entries_of(added)) - 1])
    assert back == text


def test_add_only_inserts_lines_and_keeps_every_comment() -> None:
    added = insert_entries(HAND_WRITTEN, [{"id": "new", **NEW}])
    old_lines = HAND_WRITTEN.splitlines()
    new_lines = added.splitlines()
    # The old file is a subsequence of the new one, in order, line for line.
    it = iter(new_lines)
    assert all(line in it for line in old_lines)
    # Blank-line separated entries stay blank-line separated; the footer stays last.
    assert new_lines[-1] == "# footer comment"
    new_at = new_lines.index("  - id: new")
    assert new_lines[new_at - 1] == ""
    data = entries_of(added)[-1]
    assert data["tracker"] == "#7201" and data["added"] == dt.date(2025, 3, 1)
    assert data["reason"] == NEW["reason"]
    assert data["node_ids"] == NEW["node_ids"]


QUOTED = {
    "double": (
        '"',
        'entries:\n  - id: a\n    tracker: "#1"\n    kind: flaky\n'
        "    action: skip\n    match: {test_case: x}\n    owner: me\n"
        '    added: "2025-01-01"\n    reason: r\n',
    ),
    "single": (
        "'",
        "entries:\n  - id: a\n    tracker: '#1'\n    kind: flaky\n"
        "    action: skip\n    match: {test_case: x}\n    owner: me\n"
        "    added: '2025-01-01'\n    reason: r\n",
    ),
}


@pytest.mark.parametrize("name", sorted(QUOTED))
def test_a_new_entry_quotes_the_way_the_file_does(name: str) -> None:
    quote, text = QUOTED[name]
    added = insert_entries(text, [{"id": "new", **NEW}])[len(text) :]
    assert f"    tracker: {quote}#7201{quote}\n" in added
    assert f"    added: {quote}2025-03-01{quote}\n" in added
    assert f"    expires: {quote}2025-04-01{quote}\n" in added
    # What needs no quotes stays plain, in every style.
    assert "    owner: on-call\n" in added and "      test_case: ep8_*\n" in added
    # Whatever the quotes, the values read back as given.
    entry = entries_of(text + added)[-1]
    assert entry["reason"] == NEW["reason"] and entry["tracker"] == "#7201"
    assert str(entry["added"]) == "2025-03-01"


def test_a_new_entry_in_the_shipped_file_follows_its_double_quotes() -> None:
    shipped = (Path(__file__).resolve().parent.parent / "recipes" / "quarantine.yaml").read_text()
    added = insert_entries(shipped, [{"id": "new", **NEW}])[len(shipped) :]
    assert '    tracker: "#7201"\n' in added and '    added: "2025-03-01"\n' in added
    assert "'" not in added.replace("'quoted'", "")


def test_a_file_with_plain_dates_and_no_quotes_gets_the_dumper_defaults() -> None:
    text = SAMPLES[4].replace("'#1'", "https://example.com/issues/1")
    added = insert_entries(text, [{"id": "new", **NEW}])[len(text) :]
    assert "  tracker: '#7201'\n" in added and "  added: 2025-03-01\n" in added


def test_removing_an_entry_whose_anchor_another_uses_is_refused() -> None:
    text = (
        "entries:\n"
        "  - id: a\n    tracker: '#1'\n    kind: flaky\n    action: skip\n"
        "    match: &m {test_case: x}\n    owner: me\n    reason: r\n"
        "  - id: b\n    tracker: '#2'\n    kind: flaky\n    action: skip\n"
        "    match: *m\n    owner: me\n    reason: r\n"
    )
    with pytest.raises(QuarantineError, match=r"anchor &m \(line 6\) that line 13 .*\*m"):
        delete_entries(text, [0])
    # The entry that only uses the anchor goes; so do both together.
    assert [e["id"] for e in entries_of(delete_entries(text, [1]))] == ["a"]
    assert entries_of(delete_entries(text, [0, 1])) == []


def test_remove_takes_a_heading_only_with_the_last_entry_under_it() -> None:
    text = HAND_WRITTEN
    # "EP8 hang" heads `first` and `second` (which has no comment of its own):
    # it stays above `second` when `first` goes.
    without_first = delete_entries(text, [0])
    assert [e["id"] for e in entries_of(without_first)] == ["second"]
    assert "entries:\n  # EP8 hang, on-call 2025-01\n  - id: second\n" in without_first
    assert "# Quarantine: hand-edited header" in without_first
    assert delete_entries(text, [1]).count("# EP8 hang") == 1
    both = delete_entries(text, [0, 1])
    assert entries_of(both) == [] and "entries: []" in both and "# footer comment" in both
    assert "EP8 hang" not in both
    # Once `second` has a comment of its own, the heading is `first`'s alone.
    own = text.replace("  - id: second\n", "  # second's own note\n  - id: second\n")
    without_first = delete_entries(own, [0])
    assert "EP8 hang" not in without_first and "# second's own note" in without_first
    assert "# footer comment" in without_first


entry_texts = st.builds(
    lambda i, indent, comment: (
        (f"{' ' * indent}# note {i}\n" if comment else "")
        + f"{' ' * indent}- id: e{i}\n"
        + "".join(
            f"{' ' * (indent + 2)}{line}\n"
            for line in (
                f'tracker: "#{i}"',
                "kind: flaky",
                "action: skip",
                f"match: {{test_case: t{i}}}",
                "owner: o",
                "reason: r",
            )
        )
    ),
    st.integers(0, 999),
    st.sampled_from([0, 2]),
    st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(entry_texts, min_size=1, max_size=4, unique_by=lambda t: t.split("- id: ")[1][:6]),
    st.sampled_from(["", "# head\n", "# head\n\n"]),
    st.sampled_from(["", "# tail\n", "\n# tail\n"]),
    st.sampled_from(["", "\n"]),
)
def test_round_trip_property(items: list[str], head: str, tail: str, gap: str) -> None:
    indents = {len(t) - len(t.lstrip(" ")) for t in items}
    if len(indents) > 1:
        items = [items[0]]
    text = head + "entries:\n" + gap.join(items) + tail
    before = entries_of(text)
    added = insert_entries(text, [{"id": "zz-new", **NEW}])
    assert [e["id"] for e in entries_of(added)] == [e["id"] for e in before] + ["zz-new"]
    assert delete_entries(added, [len(before)]) == text
    # Removing any one entry leaves exactly the others, in order.
    for i in range(len(before)):
        left = entries_of(delete_entries(text, [i]))
        assert left == before[:i] + before[i + 1 :]


# --------------------------------------------------------------------------- bytes kept
#
# Files built line by line with their own line breaks (LF, CRLF, CR, or mixed,
# NEL among them), with or without a final line break and a byte order mark,
# comments after blanks or tabs, an empty list in each spelling `remove` writes
# back: `edit` adding an entry and removing it again gives back every byte.

ENDINGS = {"LF": ["\n"], "CRLF": ["\r\n"], "CR": ["\r"], "mixed": ["\n", "\r\n", "\r", "\x85"]}
EMPTY_LISTS = ["entries: []", "entries: []  # none", "entries: [] # none", "entries: []\t# none",
               "entries:\t[]\t# none"]  # fmt: skip


@st.composite
def byte_files(draw: st.DrawFn) -> bytes:
    ending = draw(st.sampled_from(sorted(ENDINGS)))

    def nl() -> str:
        return draw(st.sampled_from(ENDINGS[ending]))

    def comment(what: str) -> str:
        sep = draw(st.sampled_from([" ", "  ", "\t"]))
        return f"{sep}# {what}" if draw(st.booleans()) else ""

    lines = [f"# header{comment('more')}"] if draw(st.booleans()) else []
    count = draw(st.integers(0, 3))
    dash = draw(st.sampled_from([0, 2]))
    pad = " " * (dash + 2)
    if not count:
        lines.append(draw(st.sampled_from(EMPTY_LISTS)))
    else:
        lines.append(f"entries:{comment('the list')}")
        for n in range(count):
            if n and draw(st.booleans()):
                lines.append("")
            if draw(st.booleans()):
                lines.append(f"{' ' * dash}# about e{n}")
            lines += [
                f"{' ' * dash}- id: e{n}{comment('id')}",
                f"{pad}tracker: '#{n + 1}'",
                f"{pad}kind: flaky{comment('kind')}",
                f"{pad}action: skip",
                f"{pad}match: {{test_case: t{n}}}",
                f"{pad}owner: me",
                f"{pad}reason: r{n}",
            ]
    if draw(st.booleans()):
        lines.append(f"# footer{comment('end')}")
    text = "".join(line + nl() for line in lines)
    if not draw(st.booleans()):  # no final line break
        text = text[: len(text) - len(split_ending(text)[1])]
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    return bom + text.encode("utf-8")


def _common_prefix(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _ids(raw: bytes) -> list[str]:
    """The entries' ids, as every command reads the file (a tab before a comment
    included, which PyYAML's pure-Python reader refuses)."""
    return [e.id for e in parse_quarantine(raw, "quarantine.yaml").entries]


@example(raw=b"entries: []\r")
@example(raw=b"entries:\r  - id: a\r    tracker: '#1'\r    kind: flaky\r    action: skip\r"
         b"    match: {test_case: t}\r    owner: me\r    reason: r\r# tail")  # fmt: skip
@example(raw=b"\xef\xbb\xbfentries:\r\n- id: a\n  tracker: '#1'\r  kind: flaky\r\n  action: skip\n"
         b"  match: {test_case: t}\r  owner: me\r\n  reason: r\xc2\x85")  # fmt: skip
@example(raw=b"entries: []\t# none\r\n")
@example(raw=b"entries:\t# the list\n  - id: a\t# id\n    tracker: '#1'\n    kind: flaky\n"
         b"    action: skip\n    match: {test_case: t}\n    owner: me\n    reason: r")  # fmt: skip
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=byte_files())
def test_add_then_remove_gives_back_every_byte(tmp_path_factory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("b") / "quarantine.yaml"
    path.write_bytes(raw)
    text = raw.decode("utf-8-sig")
    ids = _ids(raw)
    assert not parse_quarantine(raw, "quarantine.yaml").errors
    edit(path, lambda q: ([{"id": "zz-new", **NEW}], []))
    added = path.read_bytes()
    assert _ids(added) == [*ids, "zz-new"]
    assert added.startswith(b"\xef\xbb\xbf") == raw.startswith(b"\xef\xbb\xbf")
    new = added.decode("utf-8-sig")
    if ids:
        # The new entry is one run of text put in; nothing else changed.
        head = _common_prefix(text, new)
        tail = _common_prefix(text[head:][::-1], new[head:][::-1])
        assert head + tail == len(text), (text, new)
        inserted = new[head : len(new) - tail]
    else:  # `entries: []` became `entries:` followed by the list
        lines = split_lines(new)
        key = next(n for n, line in enumerate(lines) if line.startswith("entries:"))
        count = len(lines) - len(split_lines(text))
        inserted = "".join(lines[key + 1 : key + 1 + count])
    # Its lines end as the file's lines do: CR in a CR-only file, CRLF in a CRLF
    # one (LF where the file has no LF, CRLF or CR: a NEL is no break to YAML 1.2).
    breaks = {split_ending(line)[1] for line in split_lines(inserted)} - {""}
    used = {split_ending(line)[1] for line in split_lines(text)} & {"\n", "\r\n", "\r"}
    assert len(breaks) == 1 and breaks <= (used or {"\n"}), (breaks, used)
    edit(path, lambda q: ([], [len(ids)]))
    assert path.read_bytes() == raw


# --------------------------------------------------------------------------- edit()


# --------------------------------------------------------------------------- comments kept
#
# Files with comments in every position, built piece by piece with the owner of
# each comment known: a heading (a comment block directly above an entry) belongs
# to its group, the entry and the ones after it up to the next comment between
# entries;
# comments inside an entry (own lines, ends of lines) belong to the entry; every
# other comment (file header, the `entries:` line, free-standing blocks between
# entries, a note after an entry followed by a blank line, the footer) belongs to
# no entry. Each comment line carries a unique marker `# cN`.


@dataclass
class _Piece:
    text: str  # lines, each ending in a newline
    owner: tuple[str, str] | None  # ("entry", id) / ("group", id of its first entry) / None


@dataclass
class _Model:
    pieces: list[_Piece]
    ids: list[str]  # entries in file order
    trackers: dict[str, str]
    headed: set[str]  # ids of the entries a heading sits directly above


def _entry_lines(draw, n: int, marker, dash: int, key: int, tracker: str, quote: str) -> str:
    pad = " " * key
    fields = [
        f"id: e{n}",
        f"tracker: {quote}#{tracker}{quote}",
        "kind: flaky",
        "action: skip",
        f"match: {{test_case: case{n}}}",
        "owner: me",
        f"reason: reason {n}",
    ]
    out = []
    for k, field in enumerate(fields):
        line = field
        if k and draw(st.integers(0, 5)) == 0:
            line += f"  # c{next(marker)} end of {field.split(':')[0]}"
        if k and draw(st.integers(0, 6)) == 0:
            out.append(f"{pad}# c{next(marker)} inside e{n}\n")
        out.append((" " * dash + "- " + " " * (key - dash - 2) if k == 0 else pad) + line + "\n")
    return "".join(out)


@st.composite
def commented_files(draw) -> _Model:
    marker = iter(range(1_000_000))
    dash, key = draw(st.sampled_from([(2, 4), (0, 2), (4, 6)]))
    quote = draw(st.sampled_from(['"', "'"]))

    def comments(indent: int, what: str, most: int = 2) -> str:
        count = draw(st.integers(1, most))
        return "".join(f"{' ' * indent}# c{next(marker)} {what}\n" for _ in range(count))

    pieces: list[_Piece] = []
    if draw(st.booleans()):
        pieces.append(_Piece(comments(0, "file header", 3) + "\n" * draw(st.integers(0, 1)), None))
    trailing = f"  # c{next(marker)} on the entries line" if draw(st.booleans()) else ""
    pieces.append(_Piece(f"entries:{trailing}\n", None))
    count = draw(st.integers(1, 5))
    trackers = {f"e{n}": str(draw(st.integers(1, 3))) for n in range(count)}
    separated = draw(st.booleans())
    headed: set[str] = set()
    for n in range(count):
        if n and (separated or draw(st.integers(0, 3)) == 0):
            pieces.append(_Piece("\n", None))
        if draw(st.integers(0, 3)) == 0:
            pieces.append(_Piece(comments(dash, "free-standing") + "\n", None))
        if draw(st.booleans()):
            pieces.append(_Piece(comments(dash, f"heading of e{n}"), ("group", f"e{n}")))
            headed.add(f"e{n}")
        body = _entry_lines(draw, n, marker, dash, key, trackers[f"e{n}"], quote)
        pieces.append(_Piece(body, ("entry", f"e{n}")))
        if draw(st.integers(0, 4)) == 0:
            pieces.append(_Piece(comments(key, f"note after e{n}") + "\n", None))
    if draw(st.booleans()):
        pieces.append(_Piece("\n" * draw(st.integers(0, 1)) + comments(0, "footer"), None))
    return _Model(pieces, [f"e{n}" for n in range(count)], trackers, headed)


def _marked_lines(text: str) -> list[str]:
    """Each comment: a comment line whole (its indentation included), a comment
    at the end of a line from its `#` on (`entries:` becomes `entries: []` when
    the list empties, and keeps its comment)."""
    found = []
    for line in text.splitlines():
        at = re.search(r"# c\d+ ", line)
        if at:
            found.append(line if not line[: at.start()].strip() else line[at.start() :])
    return found


def _apply_removal(model: _Model, gone: set[str]) -> None:
    """What removing the entries `gone` does to who owns which comment: a heading
    goes with the last entry of its group; until then it heads the first entry of
    the group that remains."""
    groups: dict[str, list[str]] = {}
    current = None
    started = False
    for piece in model.pieces:
        if piece.owner is None:
            # A comment between entries ends a group; blank lines do not.
            if started and "#" in piece.text:
                current = None
        elif piece.owner[0] == "group":
            current = piece.owner[1]
        else:
            started = True
            if current is not None:
                groups.setdefault(current, []).append(piece.owner[1])
    kept = []
    for piece in model.pieces:
        if piece.owner is None:
            kept.append(piece)
            continue
        kind, owner = piece.owner
        if kind == "entry" and owner in gone:
            continue
        if kind == "group":
            rest = [e for e in groups[owner] if e not in gone]
            if not rest:
                continue
            piece = _Piece(piece.text, ("group", rest[0]))
        kept.append(piece)
    model.pieces = kept
    model.headed = {p.owner[1] for p in kept if p.owner and p.owner[0] == "group"}
    model.ids = [e for e in model.ids if e not in gone]


OPS = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "lift"]), st.integers(0, 10)),
    min_size=1,
    max_size=3,
)


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=commented_files(), ops=OPS)
def test_edits_keep_every_comment_no_removed_entry_owns(
    tmp_path_factory, model: _Model, ops: list[tuple[str, int]]
) -> None:
    path = tmp_path_factory.mktemp("q") / "quarantine.yaml"
    original = "".join(p.text for p in model.pieces)
    path.write_text(original, encoding="utf-8")
    assert entries_of(original) and [e["id"] for e in entries_of(original)] == model.ids
    expected = _marked_lines(original)
    added = 0
    for op, pick in ops:
        if op == "add" or not model.ids:
            new_id = f"new{added}"
            added += 1
            entry = {**NEW, "id": new_id}
            edit(path, lambda q, entry=entry: ([entry], []))
            # The new entry lands after the last one (after `entries:` in an
            # emptied list), and joins the group the last one is in.
            at = max(
                n
                for n, piece in enumerate(model.pieces)
                if (piece.owner and piece.owner[0] == "entry") or piece.text.startswith("entries:")
            )
            model.pieces.insert(at + 1, _Piece("", ("entry", new_id)))
            model.ids.append(new_id)
            model.trackers[new_id] = NEW["tracker"]
            continue
        target = model.ids[pick % len(model.ids)]
        gone = (
            {target}
            if op == "remove"
            else {e for e in model.ids if model.trackers[e] == model.trackers[target]}
        )
        indices = [i for i, e in enumerate(model.ids) if e in gone]
        edit(path, lambda q, indices=indices: ([], indices))
        _apply_removal(model, gone)
    text = path.read_text(encoding="utf-8")
    assert [e["id"] for e in entries_of(text)] == model.ids
    # Every comment no removed entry owned is there, byte for byte, in order;
    # no comment of a removed entry is.
    survivors = set(_marked_lines("".join(p.text for p in model.pieces)))
    assert _marked_lines(text) == [line for line in expected if line in survivors]
    # A heading that stayed still sits directly above an entry of its group.
    lines = text.splitlines()
    for piece in model.pieces:
        if piece.owner and piece.owner[0] == "group":
            last = piece.text.splitlines()[-1]
            below = lines[lines.index(last) + 1]
            assert below.lstrip().startswith(f"- id: {piece.owner[1]}"), (piece, text)


def test_edit_writes_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.yaml"
    path.write_text(HAND_WRITTEN)
    path.chmod(0o640)
    edit(path, lambda q: ([{"id": "new", **NEW}], []))
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["quarantine.yaml"]  # no temp, no lock file
    edit(path, lambda q: ([], [q.by_id("new").index]))
    assert path.read_text() == HAND_WRITTEN


def test_what_the_text_edits_refuse_names_the_file(tree: Callable[..., Path], cli) -> None:
    one_line = (
        "entries: [{id: a, tracker: '#1', kind: flaky, action: skip,"
        " match: {test_case: ep8_muon}, owner: o, reason: r}]\n"
    )
    root = tree(v2_files(quarantine=one_line))
    run = cli("quarantine", "remove", "a", "--recipes", root)
    assert run.code == 7, run
    assert "quarantine.yaml: entries is written as a one-line [..] list" in run.err
    assert (root / "quarantine.yaml").read_text() == one_line


def test_a_symlinked_file_is_edited_where_it_points(tmp_path: Path) -> None:
    real = tmp_path / "tree" / "shared" / "quarantine.yaml"
    real.parent.mkdir(parents=True)
    real.write_text(HAND_WRITTEN)
    link = tmp_path / "tree" / "quarantine.yaml"
    link.symlink_to("shared/quarantine.yaml")  # inside the tree: followed
    edit(link, lambda q: ([{"id": "new", **NEW}], []))
    # Renaming over the link would have turned it into a copy, the real file unchanged.
    assert link.is_symlink() and os.readlink(link) == "shared/quarantine.yaml"
    assert entries_of(real.read_text())[-1]["id"] == "new"
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["quarantine.yaml", "shared"]
    assert [p.name for p in real.parent.iterdir()] == ["quarantine.yaml"]  # no lock, no temp
    edit(link, lambda q: ([], [q.by_id("new").index]))
    assert link.is_symlink() and real.read_text() == HAND_WRITTEN


def test_a_link_leaving_the_tree_is_refused_and_its_target_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_text("entries: []\n# token: s3cr3t\n")
    (tmp_path / "tree").mkdir()
    link = tmp_path / "tree" / "quarantine.yaml"
    link.symlink_to(outside)
    with pytest.raises(QuarantineError, match="leaves the recipe tree") as caught:
        edit(link, lambda q: ([{"id": "new", **NEW}], []))
    assert caught.value.exit_code == 7 and "s3cr3t" not in str(caught.value)
    assert outside.read_text() == "entries: []\n# token: s3cr3t\n" and link.is_symlink()


def test_a_read_only_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.yaml"
    path.write_text(HAND_WRITTEN)
    path.chmod(0o444)
    # A rename over it needs only a writable directory (and root may do anything).
    with pytest.raises(QuarantineError, match="read-only; the file was not changed"):
        edit(path, lambda q: ([{"id": "new", **NEW}], []))
    assert path.read_text() == HAND_WRITTEN and path.stat().st_mode & 0o777 == 0o444
    # A dry run still shows what would change.
    _old, new = edit(path, lambda q: ([{"id": "new", **NEW}], []), dry_run=True)
    assert entries_of(new.decode())[-1]["id"] == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["quarantine.yaml"]


def test_malformed_file_is_reported_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.yaml"
    for bad in ("entries:\n  - id: [\n", "entries:\n  - id: a\n    action: explode\n"):
        path.write_text(bad)
        with pytest.raises(QuarantineError) as caught:
            edit(path, lambda q: ([{"id": "new", **NEW}], []))
        assert "was not changed" in str(caught.value)
        assert "quarantine.yaml:" in str(caught.value)
        assert path.read_text() == bad


def test_a_failed_check_leaves_the_file_alone(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "quarantine.yaml"
    path.write_text(HAND_WRITTEN)
    import matrixgen.quarantine.edit as qe

    monkeypatch.setattr(qe, "insert_entries", lambda text, entries: text + "garbage: [\n")
    with pytest.raises(QuarantineError):
        edit(path, lambda q: ([{"id": "new", **NEW}], []))
    assert path.read_text() == HAND_WRITTEN
    assert [p.name for p in tmp_path.iterdir()] == ["quarantine.yaml"]


def _add_one(args: tuple[str, int]) -> str:
    path, n = args
    entry = {**NEW, "match": {"test_case": f"case_{n}"}}

    def change(qfile):  # type: ignore[no-untyped-def]
        return [{"id": f"e{n}", **entry}], []

    edit(Path(path), change)
    return f"e{n}"


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_concurrent_adds_lose_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "quarantine.yaml"
    path.write_text(HAND_WRITTEN)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(8) as pool:
        ids = pool.map(_add_one, [(str(path), n) for n in range(24)])
    found = [e["id"] for e in entries_of(path.read_text())]
    assert sorted(found) == sorted(["first", "second", *ids])
    # And the file still starts with the hand-written part, untouched.
    assert path.read_text().startswith(HAND_WRITTEN[: HAND_WRITTEN.index("# footer")])


def test_derived_ids_are_stable_and_readable() -> None:
    assert entry_id(NEW) == entry_id(dict(reversed(list(NEW.items()))))
    assert entry_id(NEW).startswith("ep8-")
    other = {**NEW, "where": ["gitlab/mr"]}
    assert entry_id(other) != entry_id(NEW)


# --------------------------------------------------------------------------- commands


def test_add_dry_run_prints_jobs_per_target_and_writes_nothing(
    tree: Callable[..., Path], cli
) -> None:
    root = tree(v2_files(quarantine=None))
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_dist_opt",
        "--tracker", "7201", "--kind", "flaky", "--action", "skip",
        "--platform", "dgx_h100", "--scope", "github/L1", "--scope", "gitlab/mr",
        "--owner", "alice", "--reason", "EP8 hang", "--dry-run",
    )  # fmt: skip
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert lines[0] == "github-L1-dgx_h100-dev: skips 1 job"
    assert lines[1].startswith("  moe/ep8_dist_opt on dgx_h100/dev")
    assert "gitlab-mr-dgx_h100-dev: skips 1 job" in lines
    assert not any("mr-slim" in line for line in lines)
    assert lines[-1].startswith("ep8_dist_opt-")  # the new id, last
    assert "dry run" in run.err
    assert not (root / "quarantine.yaml").exists()


def test_add_says_when_the_checkouts_ci_still_calls_megatrons_generator(
    tmp_path: Path, cli
) -> None:
    """Megatron-LM's generator reads no quarantine file: while a CI file of the
    checkout calls it, `quarantine add` says so, once; after the switch to
    jet-trigger (or outside a checkout) it says nothing of it."""
    from tests.conftest import write_tree
    from tests.gitrepo import GitRepo

    top = tmp_path / "megatron-lm"
    root = write_tree(top / "tests" / "test_utils" / "recipes", v2_files(quarantine=None))
    ci = top / ".gitlab" / "stages" / "04.functional-tests.yml"
    ci.parent.mkdir(parents=True)
    call = "      python tests/test_utils/python_scripts/generate_jet_trigger_job.py \\\n"
    ci.write_text("functional:configure:\n  script:\n    - |\n" + call)
    GitRepo(top).commit(message="checkout")
    args = (
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_dist_opt",
        "--tracker", "7201", "--kind", "flaky", "--action", "skip", "--owner", "alice",
        "--reason", "EP8 hang", "--dry-run",
    )  # fmt: skip
    run = cli(*args)
    assert run.code == 0, run
    assert run.err.count("note: .gitlab/stages/04.functional-tests.yml still call") == 1
    assert "reads no quarantine file" in run.err and "`matrixgen jet-trigger`" in run.err
    generator = "python tests/test_utils/python_scripts/generate_jet_trigger_job.py"
    ci.write_text(ci.read_text().replace(generator, "matrixgen jet-trigger"))
    switched = cli(*args)
    assert switched.code == 0 and "generate_jet_trigger_job" not in switched.err, switched


def test_add_needs_an_owner_or_the_configured_default(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files(quarantine=None))
    args = ("quarantine", "add", "--recipes", root, "--test-case", "ep8_dist_opt", "--tracker",
            "7201", "--kind", "flaky", "--action", "skip", "--reason", "EP8 hang")  # fmt: skip
    run = cli(*args)
    assert run.code == 2 and "--owner is needed" in run.err, run
    assert "quarantine.default_owner" in run.err
    assert not (root / "quarantine.yaml").exists()
    config = root / "matrixgen.yaml"
    text = config.read_text().replace("quarantine:\n", "quarantine:\n  default_owner: moe-team\n")
    config.write_text(text)
    run = cli(*args)
    assert run.code == 0, run
    assert "owner: moe-team" in (root / "quarantine.yaml").read_text()
    run = cli(*args, "--owner", "alice", "--id", "mine")
    assert run.code == 0, run
    assert "owner: alice" in (root / "quarantine.yaml").read_text()


def test_add_writes_an_entry_that_list_and_generation_see(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    before = (root / "quarantine.yaml").read_bytes()
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "cp2_*",
        "--tracker", "https://github.com/acme/ml/issues/7733", "--kind", "infra",
        "--action", "allow-failure", "--platform", "dgx_gb200", "--owner", "bob",
        "--reason", "one-node alias", "--id", "cp2-gb200", "--format", "json",
    )  # fmt: skip
    assert run.code == 0, run
    out = json.loads(run.out)
    assert out["id"] == "cp2-gb200" and out["written"] is True
    assert sorted(t["target"] for t in out["targets"]) == [
        "github-L1-dgx_gb200-dev",
        "gitlab-L2-dgx_gb200-dev",  # nightly is the L2 tier
    ]
    after = (root / "quarantine.yaml").read_bytes()
    assert after.startswith(before)  # appended; the rest is untouched
    listed = json.loads(cli("quarantine", "list", "--recipes", root, "--format", "json").out)
    mine = next(e for e in listed if e["id"] == "cp2-gb200")
    assert mine["match"] == {"test_case": "cp2_*", "platforms": ["dgx_gb200"]}
    assert mine["added"] == dt.date.today().isoformat()
    assert mine["expires"] == (dt.date.today() + dt.timedelta(days=30)).isoformat()
    jobs = json.loads(cli("list", "--recipes", root, "--format", "json").out)
    cp2 = [j for j in jobs if j["test_case"] == "cp2_one_node"]
    assert cp2 and all(j["quarantine"]["id"] == "cp2-gb200" for j in cp2)
    # Same id again: refused, file unchanged.
    again = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "cp2_*", "--tracker", "#1",
        "--kind", "infra", "--action", "skip", "--owner", "b", "--reason", "r", "--id", "cp2-gb200",
    )  # fmt: skip
    assert again.code == 2 and "exists already" in again.err
    assert (root / "quarantine.yaml").read_bytes() == after


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--test-case", "ep8_muonn"], 'did you mean "ep8_muon"'),
        (["--test-case", "ep8_muon", "--platform", "dgx_h10"], 'did you mean "dgx_h100"'),
        (["--test-case", "ep8_muon", "--scope", "mr"], "write SYSTEM/SCOPE"),
        (["--test-case", "ep8_muon", "--scope", "gitlab/mr-slimm"], 'did you mean "mr-slim"'),
        (["--test-case", "ep8_muon", "--platform", "dgx_gb200"], "applies to no job"),
        (["--test-case", "ep8_muon", "--expires", "2001-01-01"], "in the past"),
        (["--test-case", "ep8_muon", "--expires", "soon"], "YYYY-MM-DD"),
        (
            ["--test-case", "ep8_muon", "--node-id", "a::b"],
            "only goes with --action deselect or --action mute",
        ),
        # date.fromisoformat alone takes these too; the file's dates are YYYY-MM-DD.
        (["--test-case", "ep8_muon", "--expires", "20990101"], "YYYY-MM-DD"),
        (["--test-case", "ep8_muon", "--expires", "2099-W01-1"], "YYYY-MM-DD"),
        (["--test-case", "ep8_muon", "--id", "a b"], "the entry is not valid: id: 'a b' does"),
    ],
)
def test_add_refuses_what_cannot_be_right(
    tree: Callable[..., Path], cli, extra: list[str], message: str
) -> None:
    root = tree(v2_files())
    before = (root / "quarantine.yaml").read_bytes()
    run = cli(
        "quarantine", "add", "--recipes", root, "--tracker", "#1", "--kind", "flaky",
        "--action", "skip", "--owner", "o", "--reason", "r", *extra,
    )  # fmt: skip
    assert run.code == 2, run
    assert message in run.err
    assert (root / "quarantine.yaml").read_bytes() == before


def test_deselect_needs_node_ids(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_muon", "--tracker", "#1",
        "--kind", "flaky", "--action", "deselect", "--owner", "o", "--reason", "r",
    )  # fmt: skip
    assert run.code == 2 and "--node-id" in run.err


def test_mute_needs_node_ids_and_adds_an_entry_list_shows(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    base = (
        "quarantine", "add", "--recipes", root,
        "--test-case", "tests/unit_tests/models/test_gpt.py", "--tracker", "#1",
        "--kind", "flaky", "--action", "mute", "--owner", "o", "--reason", "r",
    )  # fmt: skip
    run = cli(*base)
    assert run.code == 2 and "--action mute needs at least one --node-id" in run.err
    nodes = ("--node-id", "tests/unit_tests/models/test_gpt.py::test_x")
    run = cli(
        *base, *nodes, "--node-id", "tests/unit_tests/models/test_gpt.py::test_y", "--id", "m"
    )
    assert run.code == 0, run
    assert run.out.splitlines()[0] == "gitlab-mr-dgx_h100-dev: mutes in 1 job"
    listed = json.loads(
        cli("quarantine", "list", "--recipes", root, "--action", "mute", "--format", "json").out
    )
    assert [(e["id"], e["action"], e["node_ids"]) for e in listed] == [
        (
            "m",
            "mute",
            [
                "tests/unit_tests/models/test_gpt.py::test_x",
                "tests/unit_tests/models/test_gpt.py::test_y",
            ],
        )
    ]
    jobs = json.loads(cli("list", "--recipes", root, "--format", "json").out)
    marks = [j["quarantine"] for j in jobs if j.get("quarantine") and j["model"] == "unit-tests"]
    mine = [m for m in marks if m["id"] == "m"]
    assert len(mine) == 1 and mine[0]["action"] == "mute" and len(mine[0]["muted"]) == 2


def test_add_refuses_a_node_level_entry_that_cannot_reach_the_tests(
    tree: Callable[..., Path], cli
) -> None:
    # The moe jobs run Megatron-LM's launcher with no script of their own that
    # hands the quarantine to pytest: the node ids would reach nothing.
    root = tree(v2_files())
    before = (root / "quarantine.yaml").read_bytes()
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_muon", "--tracker", "#1",
        "--kind", "flaky", "--action", "mute", "--node-id", "t.py::x", "--owner", "o",
        "--reason", "r",
    )  # fmt: skip
    assert run.code == 2, run
    # GitLab's launcher only: a GitHub row's env reaches the workflow's test command.
    assert "cannot reach the tests of target(s) gitlab-mr-dgx_h100-dev (moe/ep8_muon" in run.err
    assert "launch_jet_workload.py) takes no node ids" in run.err
    assert (root / "quarantine.yaml").read_bytes() == before


def test_add_refuses_a_malformed_file_with_exit_7(tree: Callable[..., Path], cli) -> None:
    bad = "entries:\n  - id: a\n    tracker: '#1'\n    kind: flaky\n    action: skipp\n"
    root = tree(v2_files(quarantine=bad))
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_muon", "--tracker", "#1",
        "--kind", "flaky", "--action", "skip", "--owner", "o", "--reason", "r",
    )  # fmt: skip
    assert run.code == 7, run
    assert "quarantine.yaml:5:13:" in run.err
    assert (root / "quarantine.yaml").read_text() == bad
    listed = cli("quarantine", "list", "--recipes", root)
    assert listed.code == 7 and "quarantine.yaml:5:13:" in listed.err
    assert "was not changed" not in listed.err  # listing never changes it anyway


def test_remove_and_lift(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    path = root / "quarantine.yaml"
    original = path.read_bytes()
    missing = cli("quarantine", "remove", "ep8-muom", "--recipes", root)
    assert missing.code == 2 and 'did you mean "ep8-muon"' in missing.err
    run = cli("quarantine", "remove", "ep8-muon", "--recipes", root)
    assert run.code == 0 and run.out.strip() == "ep8-muon"
    assert "ep8-muon" not in path.read_text()
    assert "# Quarantines of the EP8 cases (kept comment)" in path.read_text()
    # #7201 is written as "#7201"; lifting by its URL finds it too.
    dry = cli("quarantine", "lift", "--tracker", "https://github.com/acme/ml/issues/7201",
              "--recipes", root, "--dry-run")  # fmt: skip
    assert dry.code == 0 and dry.out.split() == ["ep8-dist-opt"]
    assert "ep8-dist-opt" in path.read_text()
    lifted = cli("quarantine", "lift", "--tracker", "7201", "--recipes", root)
    assert lifted.code == 0 and lifted.out.split() == ["ep8-dist-opt"]
    assert [e["id"] for e in entries_of(path.read_text())] == ["unit-bucket"]
    none = cli("quarantine", "lift", "--tracker", "#7201", "--recipes", root)
    assert none.code == 2 and "no quarantine entry is tracked by #7201" in none.err
    assert path.read_bytes() != original


@pytest.mark.parametrize(
    "spelling",
    [
        "https://github.com/acme/ml/issues/7201#issuecomment-99",  # a comment's link
        "HTTPS://GitHub.com:443/acme/ml/issues/7201/",
        "http://www.github.com/acme/ml/pull/7201",  # one number space on GitHub
        "https://github.com/acme/ml/issues/7201?q=1",
    ],
)
def test_lift_finds_a_tracker_however_its_url_is_spelled(
    tree: Callable[..., Path], cli, spelling: str
) -> None:
    root = tree(v2_files())
    run = cli("quarantine", "lift", "--tracker", spelling, "--recipes", root, "--dry-run")
    assert run.code == 0, run
    assert run.out.split() == ["ep8-dist-opt"]


@pytest.mark.parametrize(
    "other",
    [
        "https://github.com/acme/ml/issues/72011",
        "https://github.com/acme/mlx/issues/7201",
        "https://github.com/ACME/ml/issues/7201",  # a path is compared with its case
    ],
)
def test_lift_does_not_take_a_neighbouring_tracker(
    tree: Callable[..., Path], cli, other: str
) -> None:
    run = cli("quarantine", "lift", "--tracker", other, "--recipes", tree(v2_files()))
    assert run.code == 2 and "no quarantine entry is tracked by" in run.err


def test_lift_keeps_the_entries_of_a_tracker_that_differs_only_in_its_query(
    tree: Callable[..., Path], cli
) -> None:
    def one(n: str, case: str, url: str) -> str:
        return (
            f"  - id: e{n}\n    tracker: '{url}'\n    kind: flaky\n    action: skip\n"
            f"    match: {{test_case: {case}}}\n    owner: o\n    reason: r\n"
        )

    text = "entries:\n" + one("1", "tc_a", "https://bugs.example/show_bug.cgi?id=1")
    text += one("2", "tc_b", "https://bugs.example/show_bug.cgi?id=2")
    root = tree(v1_files(quarantine=text))
    run = cli("quarantine", "lift", "--tracker", "HTTPS://Bugs.Example/show_bug.cgi?id=1",
              "--recipes", root)  # fmt: skip
    assert run.code == 0 and run.out.split() == ["e1"], run
    assert [e["id"] for e in entries_of((root / "quarantine.yaml").read_text())] == ["e2"]
    none = cli("quarantine", "lift", "--tracker", "https://bugs.example/show_bug.cgi",
               "--recipes", root)  # fmt: skip
    assert none.code == 2 and "no quarantine entry is tracked by" in none.err


def test_lift_by_number_without_a_tracker_base(tree: Callable[..., Path], cli) -> None:
    def one(n: str, case: str, url: str) -> str:
        return (
            f"  - id: e{n}\n    tracker: {url}\n    kind: flaky\n    action: skip\n"
            f"    match: {{test_case: {case}}}\n    owner: o\n    reason: r\n"
        )

    text = "entries:\n" + one("1", "tc_a", "https://github.com/acme/ml/issues/7733")
    text += one("2", "tc_b", "https://github.com/acme/ml/issues/7734")
    root = tree(v1_files(quarantine=text))  # no config: "#7733" resolves to nothing
    for spelling in ("7733", "#7733"):
        run = cli("quarantine", "lift", "--tracker", spelling, "--recipes", root, "--dry-run")
        assert run.code == 0 and run.out.split() == ["e1"], run
    # The same number in another repository: which one is meant is unclear.
    text += one("3", "tc_b", "https://github.com/acme/other/issues/7733")
    root = tree(v1_files(quarantine=text))
    run = cli("quarantine", "lift", "--tracker", "7733", "--recipes", root)
    assert run.code == 2 and "ambiguous" in run.err and "acme/other/issues/7733" in run.err
    assert (root / "quarantine.yaml").read_text() == text


def test_add_says_which_entries_already_apply(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_*", "--tracker", "#9",
        "--kind", "flaky", "--action", "allow-failure", "--scope", "gitlab/mr",
        "--owner", "o", "--reason", "r", "--dry-run",
    )  # fmt: skip
    assert run.code == 0, run
    # ep8_dist_opt on H100 is skipped in gitlab/mr already; ep8_muon allowed to fail.
    assert "note: entry ep8-dist-opt already applies to 1 of these job(s)" in run.err
    assert "note: entry ep8-muon already applies to 1 of these job(s)" in run.err
    assert "skip beats allow-failure" in run.err


def test_lift_by_tracker_removes_every_entry_of_it(tree: Callable[..., Path], cli) -> None:
    root = tree(v1_files(quarantine="entries: []\n"))
    for case in ("tc_a", "tc_b"):
        run = cli(
            "quarantine", "add", "--recipes", root, "--test-case", case, "--tracker",
            "https://github.com/acme/ml/issues/7733", "--kind", "broken", "--action", "skip",
            "--scope", "gitlab/mr", "--owner", "o", "--reason", "CP2",
        )  # fmt: skip
        assert run.code == 0, run
    assert len(entries_of((root / "quarantine.yaml").read_text())) == 2
    run = cli("quarantine", "lift", "--tracker", "https://github.com/acme/ml/issues/7733",
              "--recipes", root)  # fmt: skip
    assert run.code == 0 and len(run.out.split()) == 2
    assert (root / "quarantine.yaml").read_text() == "entries: []\n"


def test_list_table(tree: Callable[..., Path], cli) -> None:
    run = cli("quarantine", "list", "--recipes", tree(v2_files()))
    assert run.code == 0
    header, _rule, *rows = run.out.splitlines()
    assert header.split() == [
        "id", "action", "kind", "tracker", "matches", "platforms", "environments", "where",
        "owner", "expires",
    ]  # fmt: skip
    assert [r.split()[0] for r in rows] == ["ep8-dist-opt", "ep8-muon", "unit-bucket"]
    assert "https://github.com/acme/ml/issues/7201" in rows[0]
    assert "3 entries" in run.err


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
def test_concurrent_add_commands_lose_no_entry(tree: Callable[..., Path]) -> None:
    root = tree(v1_files(quarantine="# shared file\nentries: []\n"))
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}

    def command(n: int, case: str, scope: str) -> list[str]:
        return [
            sys.executable, "-m", "matrixgen", "quarantine", "add", "--recipes", str(root),
            "--test-case", case, "--tracker", f"#{n}", "--kind", "flaky", "--action", "skip",
            "--scope", scope, "--owner", "o", "--reason", "r",
        ]  # fmt: skip

    asked = [("tc_a", "gitlab/mr"), ("tc_a", "github/L1"), ("tc_b", "gitlab/mr"), ("tc_b", "L0")]
    procs = [
        subprocess.Popen(
            command(n, case, scope if "/" in scope else f"github/{scope}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for n, (case, scope) in enumerate(asked)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ids = {out.decode().splitlines()[-1] for out, _ in outs}
    text = (root / "quarantine.yaml").read_text()
    assert {e["id"] for e in entries_of(text)} == ids and len(ids) == 4
    assert text.startswith("# shared file\nentries:\n")


# ------------------------------------------------- every plain string reads back as itself

# What a quarantine file (UTF-8) can carry: any text but lone surrogates.
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1)
YAML_WORDS = st.sampled_from(
    ["on", "off", "yes", "no", "Yes", "NO", "true", "null", "Null", "~", "1:30", "190:20:30",
     "2024-01-31", "2024-01-31 10:00:00", "1e3", "0x1f", "0o17", "017", "1_000", ".inf", "-.NaN",
     "=", "<<", "+1", "- x", "? x", "#x", "'q'", '"q"', "a: b", "a\x85b", "\u2028", " lead",
     "trail ", "x\ufeff", "\x00", "a\nb", "##[error]x", "::add-mask::x", "\u202e"]
)  # fmt: skip


@settings(max_examples=150)
# `?` ends a plain scalar in a YAML 1.1 flow list (found by a random run); `,` splits it.
@example(owner="o", reason="r", test_case="t", node="n", tag="0?")
@example(owner="o", reason="r", test_case="gpt_tp?_*", node="n", tag="a,b")
@given(
    owner=st.one_of(YAML_WORDS, ANY_TEXT),
    reason=st.one_of(YAML_WORDS, ANY_TEXT),
    test_case=st.one_of(YAML_WORDS, ANY_TEXT),
    node=st.one_of(YAML_WORDS, ANY_TEXT),
    tag=st.one_of(YAML_WORDS, ANY_TEXT),
)
def test_every_string_value_reads_back_as_itself(
    owner: str, reason: str, test_case: str, node: str, tag: str
) -> None:
    entry = {
        "id": "e", "tracker": "#1", "kind": "flaky", "action": "deselect",
        "match": {"test_case": test_case, "tags": [tag]}, "node_ids": [node],
        "owner": owner, "added": dt.date(2026, 1, 1), "reason": reason,
    }  # fmt: skip
    text = insert_entries("entries: []\n", [entry])
    (back,) = yaml.safe_load(text)["entries"]
    assert back == entry
    # Printed as it is (migrate prints entries), no line of it is a command.
    assert runner_commands(text) == []


def test_plain_words_as_owner_and_reason_through_the_cli(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    words = ["on", "yes", "1:30", "null", "~", "2024-01-31", "no\nnewline"]
    for n, word in enumerate(words):
        run = cli(
            "quarantine", "add", "--recipes", root, "--test-case", "cp2_*", "--tracker", "#7733",
            "--kind", "infra", "--action", "skip", "--owner", word, "--reason", f"{word} ",
            "--id", f"w{n}",
        )  # fmt: skip
        assert run.code == 0, run
        assert "please report" not in run.err
    listed = json.loads(cli("quarantine", "list", "--recipes", root, "--format", "json").out)
    got = {e["id"]: (e["owner"], e["reason"]) for e in listed if e["id"].startswith("w")}
    assert got == {f"w{n}": (w.strip(), w.strip()) for n, w in enumerate(words)}


def test_arguments_that_are_not_utf8_are_refused(tree: Callable[..., Path], cli) -> None:
    root = tree(v2_files())
    before = (root / "quarantine.yaml").read_bytes()
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "cp2_*", "--tracker", "#7733",
        "--kind", "infra", "--action", "skip", "--owner", "bad\udcff", "--reason", "r",
    )  # fmt: skip
    assert run.code == 2 and '--owner "bad\\udcff" is not valid UTF-8 text' in run.err, run
    assert (root / "quarantine.yaml").read_bytes() == before


@pytest.mark.parametrize(("expires", "added"), [("2026-12-01", True), ("2026-11-30", False)])
def test_add_takes_an_expiry_of_today_and_refuses_yesterday(
    tree: Callable[..., Path], cli, monkeypatch: pytest.MonkeyPatch, expires: str, added: bool
) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-12-01")
    root = tree(v2_files())
    run = cli(
        "quarantine", "add", "--recipes", root, "--test-case", "ep8_muon", "--tracker", "#1",
        "--kind", "flaky", "--action", "skip", "--owner", "o", "--reason", "r",
        "--expires", expires,
    )  # fmt: skip
    if added:
        assert run.code == 0, run
        assert f"expires: {expires}" in (root / "quarantine.yaml").read_text(encoding="utf-8")
    else:
        assert run.code == 2 and f"--expires {expires} is in the past" in run.err, run


@pytest.mark.parametrize(
    ("text", "quote", "dates_quoted"),
    [
        ("- a: 'x'\n  b: \"y\"\n", "'", False),
        ("- a: \"x\"\n  b: 'y'\n", '"', False),
        ("- a: 'x'\n  b: 'y'\n  c: \"z\"\n", "'", False),
        ("- a: [x, \"y\"]\n  expires: '2027-01-01'\n", '"', True),
        ("- a: x\n  added: 2027-01-01\n", None, False),
    ],
)
def test_new_entries_quote_as_most_entries_do_and_as_the_first_on_a_tie(
    text: str, quote: str | None, dates_quoted: bool
) -> None:
    style = quote_style(yaml.compose(text).value)
    assert (style.quote, style.dates_quoted) == (quote, dates_quoted)


_ONE_ENTRY = (
    "  - id: a1\n    tracker: https://github.com/o/r/issues/2\n    kind: flaky\n"
    "    action: skip\n    match: {test_case: tc}\n    owner: me\n    reason: r\n"
)


@given(st.text(" \t", min_size=1, max_size=4))
@example(" ")  # `entries: # note`, the usual spelling
@example("\t")  # a tab before the comment, which the reader takes
@example("  ")
def test_removing_the_last_entry_keeps_a_comment_on_the_entries_line(gap: str) -> None:
    """The emptied list is `entries: []` with a blank after the colon, whatever
    the blanks before the comment were (`entries:[]` is no key of a mapping)."""
    text = f"entries:{gap}# the list\n{_ONE_ENTRY}"
    emptied = delete_entries(text, [0])
    first = emptied.splitlines()[0]
    assert first[len("entries:")] in " \t" and "[]" in first, first
    assert first.endswith("# the list"), first
    parsed = parse_quarantine(emptied.encode(), "quarantine.yaml")
    assert not parsed.errors and parsed.entries == (), parsed.errors
