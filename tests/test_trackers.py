"""Tracker identity: one canonical form per tracker URL.

Two spellings are one tracker exactly when they differ only in what cannot tell
two issues apart (scheme and host case, a default port, percent-encoding of
characters that need none, dot segments, trailing slashes, an empty `?` or
`#`); anything else (the path's case, the query, the fragment, an explicit
port, `%2F` against `/`) keeps them apart, since lifting one tracker removes
every entry `tracker_key` takes for it.

The property builds each URL from its meaning (a list of atoms: a character
that needs no escape, a reserved character written raw or escaped, a character
a URI holds only escaped), spells it at random, and compares the canonical
forms' equality with the meanings' own.
"""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from matrixgen.quarantine.model import Entry, entries_tracked_by, entry_from_mapping
from matrixgen.quarantine.trackers import canonical_url, resolve_tracker, tracker_key


def one_tracker(a: str, b: str, tracker_base: str | None) -> bool:
    """Whether two references name one tracker, as lift and `list --tracker` compare them."""
    return tracker_key(a, tracker_base) == tracker_key(b, tracker_base)


UNRESERVED = string.ascii_letters + string.digits + "-._~"
SUB_DELIMS = "!$&'()*+,;="
ESCAPED_ONLY = "%:/?#[]@ " + SUB_DELIMS  # reserved characters and a blank, written as %XX
NEEDS_ESCAPE = '\u00e9\u00fc\u4e2d\U0001f600"<>\\^`{|}'  # a URI holds these only escaped
HOSTS = ["bugs.example", "tracker.example.org", "jira.corp", "127.0.0.1", "[::1]", "[2001:db8::a]"]
PORTS = {"http": 80, "https": 443}

Atom = tuple[str, str]  # (kind, character): u unreserved, r raw reserved, e escaped, n needs escape


ATOM_KINDS = ("u", "r", "e", "n")


def atom(raw_reserved: str) -> st.SearchStrategy[Atom]:
    return st.one_of(
        st.tuples(st.just("u"), st.sampled_from(UNRESERVED)),
        st.tuples(st.just("r"), st.sampled_from(raw_reserved)),
        st.tuples(st.just("e"), st.sampled_from(ESCAPED_ONLY)),
        st.tuples(st.just("n"), st.sampled_from(NEEDS_ESCAPE)),
    )


def atoms(raw_reserved: str, min_size: int = 0) -> st.SearchStrategy[tuple[Atom, ...]]:
    return st.lists(atom(raw_reserved), min_size=min_size, max_size=4).map(tuple)


def _dot_segment(segment: tuple[Atom, ...]) -> bool:
    return all(k == "u" for k, _ in segment) and "".join(c for _, c in segment) in (".", "..")


SEGMENT_RAW, QUERY_RAW, USER_RAW = SUB_DELIMS + ":@", SUB_DELIMS + ":@/?", SUB_DELIMS + ":"
SEGMENT = atoms(SEGMENT_RAW).filter(lambda s: not _dot_segment(s))
PARTS: dict[str, st.SearchStrategy[Any]] = {
    "scheme": st.sampled_from(["http", "https"]),
    "user": st.one_of(st.none(), atoms(USER_RAW)),
    "host": st.sampled_from(HOSTS),
    "port": st.one_of(st.none(), st.sampled_from([1, 80, 443, 8080, 8443, 65535])),
    "path": st.lists(SEGMENT, max_size=4).map(tuple),
    "query": st.one_of(st.none(), atoms(QUERY_RAW)),
    "fragment": st.one_of(st.none(), atoms(QUERY_RAW)),
}
MEANING = st.fixed_dictionaries(PARTS)
RAW = {"user": USER_RAW, "query": QUERY_RAW, "fragment": QUERY_RAW}


@st.composite
def nearby_atoms(draw: st.DrawFn, old: tuple[Atom, ...] | None, raw: str) -> Any:
    """Atoms that differ from `old` a little: one atom replaced (often only in
    its case, or raw against escaped), one added, or none at all."""
    if not old:
        return draw(st.one_of(st.none(), atoms(raw, min_size=1)))
    at = draw(st.integers(0, len(old) - 1))
    kind, char = old[at]
    how = draw(st.sampled_from(["case", "escape", "replace", "add", "drop"]))
    if how == "case" and char.swapcase() != char:
        new: Atom = (kind, char.swapcase())
    elif how == "escape" and kind == "r":
        new = ("e", char)
    elif how == "add":
        return (*old, draw(atom(raw)))
    elif how == "drop":
        return None
    else:
        new = draw(atom(raw))
    return (*old[:at], new, *old[at + 1 :])


@st.composite
def nearby_path(draw: st.DrawFn, old: tuple[tuple[Atom, ...], ...]) -> Any:
    """A path one step from `old`: a segment changed, an empty one put in
    (`a//b`), one added or the last one dropped."""
    how = draw(st.sampled_from(["segment", "empty", "add", "drop"]))
    if how == "segment" and old:
        at = draw(st.integers(0, len(old) - 1))
        changed = draw(nearby_atoms(old[at], SEGMENT_RAW)) or ()
        if not _dot_segment(changed):
            return (*old[:at], changed, *old[at + 1 :])
    if how == "empty" and old:
        at = draw(st.integers(0, len(old) - 1))
        return (*old[:at], (), *old[at:])
    if how == "drop" and old:
        return old[:-1]
    return (*old, draw(SEGMENT))


def normal(meaning: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two meanings apart: an explicit default port is none, an
    empty query or fragment is none, trailing empty segments go."""
    port = None if meaning["port"] == PORTS[meaning["scheme"]] else meaning["port"]
    path = list(meaning["path"])
    while path and not path[-1]:
        path.pop()
    return (
        meaning["scheme"], meaning["user"], meaning["host"], port, tuple(path),
        meaning["query"] or None, meaning["fragment"] or None,
    )  # fmt: skip


def _escape(draw: st.DrawFn, char: str) -> str:
    hexes = (f"{b:02X}" for b in char.encode())
    return "".join("%" + (h if draw(st.booleans()) else h.lower()) for h in hexes)


def _spell_atoms(draw: st.DrawFn, items: tuple[Atom, ...]) -> str:
    out = []
    for kind, char in items:
        escaped = kind == "e" or (kind in "un" and draw(st.booleans()))
        out.append(_escape(draw, char) if escaped else char)
    return "".join(out)


def _any_case(draw: st.DrawFn, text: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in text)


@st.composite
def spelled(draw: st.DrawFn, meaning: dict[str, Any]) -> str:
    """One of the many ways to write the meaning's URL."""
    scheme = _any_case(draw, meaning["scheme"])
    user = "" if meaning["user"] is None else _spell_atoms(draw, meaning["user"]) + "@"
    host = meaning["host"]
    if not host.startswith("[") and draw(st.booleans()):  # a host's letters may be escaped
        host = "".join(_escape(draw, c) if draw(st.booleans()) else c for c in host)
    host = _any_case(draw, host)
    default = PORTS[meaning["scheme"]]
    port = meaning["port"]
    if port is None:
        port_text = draw(st.sampled_from(["", ":", f":{default}", f":0{default}"]))
    else:
        port_text = draw(st.sampled_from([f":{port}", f":00{port}"]))
    segments = [_spell_atoms(draw, s) for s in meaning["path"]]
    for _ in range(draw(st.integers(0, 2))):  # dot segments that resolve away
        at = draw(st.integers(0, len(segments)))
        dots = draw(st.sampled_from([["."], ["%2e"], ["x", ".."], ["x%41", "%2E%2e"]]))
        segments[at:at] = dots
    path = "".join("/" + s for s in segments) + draw(st.sampled_from(["", "/", "//"]))
    query, fragment = meaning["query"], meaning["fragment"]
    query_text = "?" + _spell_atoms(draw, query) if query else draw(st.sampled_from(["", "?"]))
    fragment_text = (
        "#" + _spell_atoms(draw, fragment) if fragment else draw(st.sampled_from(["", "#"]))
    )
    return f"{scheme}://{user}{host}{port_text}{path}{query_text}{fragment_text}"


@st.composite
def url_pairs(draw: st.DrawFn) -> tuple[str, str, bool]:
    """Two spellings and whether they name one tracker: the second meaning is the
    first, or the first changed in one part, often a little (one character of
    the query, its case, raw against escaped), so that the only difference is
    one a canonical form could lose."""
    a = draw(MEANING)
    b = dict(a)
    part = draw(st.sampled_from([None, None, *PARTS]))
    if part == "path":
        b[part] = draw(nearby_path(a[part]))
    elif part in RAW:
        b[part] = draw(nearby_atoms(a[part], RAW[part]))
    elif part is not None:
        b[part] = draw(PARTS[part])
    return draw(spelled(a)), draw(spelled(b)), normal(a) == normal(b)


@example(
    ("https://bugs.example/show_bug.cgi?id=1", "https://bugs.example/show_bug.cgi?id=2", False)
)
@example(("https://t.example/#/issue/1", "https://t.example/#/issue/2", False))
@example(("https://t.example/acme/ML/issues/1", "https://t.example/acme/ml/issues/1", False))
@example(("https://t.example/a%2Fb", "https://t.example/a/b", False))
@example(("https://t.example/a%2fb", "https://t.example/a%2Fb", True))
@example(("https://t.example:8443/x", "https://t.example/x", False))
@example(("http://t.example:443/x", "https://t.example/x", False))
@example(("http://t.example/x", "https://t.example/x", False))
@example(("https://u@t.example/x", "https://t.example/x", False))
@example(("https://t.example/a//b", "https://t.example/a/b", False))
@example(("https://t.example/x?a=1&b=2", "https://t.example/x?b=2&a=1", False))
@example(("https://t.example/x?a+b", "https://t.example/x?a%20b", False))
@example(("HTTPS://T.Example:443/x/", "https://t.example/x", True))
@example(("https://t.example:/x", "https://t.example:0443/x//", True))
@example(("https://t.example/%7euser/%41", "https://t.example/~user/A", True))
@example(("https://t.example/%c3%a9", "https://t.example/\u00e9", True))
@example(("https://t.example/a/./b/../c", "https://t.example/a/c", True))
@example(("https://t.example/a/%2e%2E/c", "https://t.example/c", True))
@example(("https://t.example/x?", "https://t.example/x#", True))
@example(("https://t.example/%zz", "https://t.example/%25zz", True))
@example(("https://t.example/x?a=%41", "https://t.example/x?a=A", True))
@example(("https://[::1]:8080/x", "https://[::1]:8080/x/", True))
@settings(max_examples=300)  # cheap, and each part needs its turn at being the difference
@given(url_pairs())
def test_two_spellings_are_one_tracker_exactly_when_they_mean_one_url(
    case: tuple[str, str, bool],
) -> None:
    a, b, same = case
    first, second = canonical_url(a), canonical_url(b)
    assert first is not None and second is not None
    assert (first == second) is same, (first, second)
    assert one_tracker(a, b, None) is same
    # The canonical form is a spelling of itself.
    assert canonical_url(first) == first
    assert resolve_tracker(a, None) == first


@example(owner="acme", repo="ml", number=7201, other="ACME")
@example(owner="a", repo="r.x", number=1, other="a-")
@given(
    owner=st.text("abcdefgh-ABC0", min_size=1, max_size=6),
    repo=st.text("abc._-XY9", min_size=1, max_size=6),
    number=st.integers(1, 10**9),
    other=st.text("abcdefgh-ABC0", min_size=1, max_size=6),
)
def test_github_issue_urls_fold_what_github_does_and_keep_the_rest(
    owner: str, repo: str, number: int, other: str
) -> None:
    assume(repo not in (".", ".."))
    issue = f"https://github.com/{owner}/{repo}/issues/{number}"
    assert canonical_url(issue) == issue
    # github.com serves https only, numbers issues and pull requests as one, and
    # a query or fragment after an issue only points into its page.
    for spelling in (
        f"http://www.GitHub.com/{owner}/{repo}/pull/{number}/",
        f"https://github.com:443/{owner}/{repo}/issues/{number}#issuecomment-1",
        f"https://GITHUB.COM/{owner}/{repo}/issues/{number}?notification=1",
    ):
        assert one_tracker(spelling, issue, None), spelling
    # The path's case, another number or another owner: another tracker.
    assert not one_tracker(f"https://github.com/{other}/{repo}/issues/{number}", issue, None) or (
        other == owner
    )
    assert not one_tracker(f"https://github.com/{owner}/{repo}/issues/{number}0", issue, None)
    # Not github.com: no folding of pull requests into issues.
    assert not one_tracker(
        f"https://git.example/{owner}/{repo}/pull/{number}",
        f"https://git.example/{owner}/{repo}/issues/{number}",
        None,
    )


@pytest.mark.parametrize(
    ("base", "resolved"),
    [
        ("https://github.com/acme/ml/issues/", "https://github.com/acme/ml/issues/12"),
        ("https://github.com/acme/ml/issues", "https://github.com/acme/ml/issues/12"),
        ("HTTPS://GitHub.com/acme/ml/issues//", "https://github.com/acme/ml/issues/12"),
        ("https://bugs.example/show_bug.cgi?id=", "https://bugs.example/show_bug.cgi?id=12"),
        ("https://t.example/#/issue/", "https://t.example/#/issue/12"),
    ],
)
def test_an_issue_number_resolves_against_the_base_as_written(base: str, resolved: str) -> None:
    assert resolve_tracker("#12", base) == resolved
    assert one_tracker("12", resolved, base) and one_tracker("#12", resolved, base)
    assert not one_tracker("#120", resolved, base) and not one_tracker("#1", resolved, base)
    assert not one_tracker("#12", resolved, None)  # no base: #12 is no URL


@pytest.mark.parametrize(
    "text", ["https://", "https://:443/x", "https://h:abc/x", "https://h:99999/x", "https://[::1/x"]
)
def test_a_url_without_a_host_or_with_a_bad_port_is_no_tracker(text: str) -> None:
    assert canonical_url(text) is None
    assert resolve_tracker(text, None) is None


def entry(id: str, tracker: str) -> Entry:
    data = {
        "id": id,
        "tracker": tracker,
        "kind": "flaky",
        "action": "skip",
        "owner": "o",
        "reason": "r",
    }
    found, findings = entry_from_mapping({**data, "match": {"test_case": "tc"}}, tracker_base=None)
    assert found is not None and not findings, findings
    return found


def test_lifting_one_query_tracker_leaves_the_other() -> None:
    one = entry("a", "https://bugs.example/show_bug.cgi?id=1")
    two = entry("b", "https://bugs.example/show_bug.cgi?id=2")
    assert one.tracker_url == "https://bugs.example/show_bug.cgi?id=1"
    spelled_one = "HTTPS://Bugs.Example:443/show_bug.cgi?id=%31"
    assert entries_tracked_by([one, two], spelled_one, None) == [one]
    assert entries_tracked_by([one, two], "https://bugs.example/show_bug.cgi", None) == []
