"""Tracker references: `#N` resolved against the config's tracker base, issue
URLs, and which spellings name the same tracker: one canonical form
(`canonical_url`) that every comparison of trackers uses, and nothing looser
(docs/security.md, "tracker identity")."""

from __future__ import annotations

import re
import string

from matrixgen.util.patterns import NON_BLANK, name_pattern, whole

ISSUE_NUMBER = name_pattern(r"#(\d+)")
_HTTP_URL = name_pattern(f"https?://{NON_BLANK}+", re.IGNORECASE)


def resolve_tracker(ref: str, tracker_base: str | None) -> str | None:
    """`#N` -> the tracker base's issue N; a URL -> its canonical form; None for
    anything else (and for `#N` without a base)."""
    ref = ref.strip()
    number = whole(ISSUE_NUMBER, ref)
    if number:
        if not tracker_base:
            return None
        return canonical_url(issue_of_base(tracker_base.strip(), number[1]))
    if whole(_HTTP_URL, ref):
        return canonical_url(ref)
    return None


def issue_of_base(tracker_base: str, number: str) -> str:
    """Where `#N` points: the base + N, as the config's schema says. A base
    that ends in its path gets one `/` between (`.../issues` and `.../issues/`
    alike); one with a query or fragment takes N as written after it
    (`show_bug.cgi?id=`, `/#/issue/`)."""
    if "?" in tracker_base or "#" in tracker_base:
        return tracker_base + number
    return tracker_base.rstrip("/") + "/" + number


# RFC 3986, appendix B: scheme, authority, path, query, fragment.
_URI_PARTS = re.compile(r"([^:/?#]+):(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.DOTALL)
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_URI_CHARACTERS = _UNRESERVED | frozenset(":/?#[]@!$&'()*+,;=%")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_GITHUB_HOSTS = frozenset({"github.com", "www.github.com"})
_GITHUB_ISSUE = name_pattern(r"(/[^/]+/[^/]+)/(?:issues|pull)/([0-9]+)")


def canonical_url(url: str) -> str | None:
    """The one spelling of an http(s) tracker URL that `tracker_key` compares,
    or None when the text is not one (no host, a port that is not a number).
    What is folded (what cannot tell two issues apart) and what is kept (what
    trackers name issues by): docs/security.md, "tracker identity"."""
    parts = _URI_PARTS.fullmatch(url.strip())
    if parts is None or parts[2] is None:
        return None
    scheme, authority, path, query, fragment = parts.groups()
    scheme = _ascii_lower(scheme)
    if scheme not in _DEFAULT_PORTS:
        return None
    user, at, hostport = authority.rpartition("@")
    host, port = _host_port(hostport)
    if not host or port is None:
        return None
    host = _ascii_lower(_percent_normal(host))
    if host in _GITHUB_HOSTS:
        scheme, host = "https", "github.com"
    if port == _DEFAULT_PORTS[scheme]:
        port = ""
    path = _without_dot_segments(_percent_normal(path)).rstrip("/") or "/"
    query = _percent_normal(query) if query else ""
    fragment = _percent_normal(fragment) if fragment else ""
    issue = whole(_GITHUB_ISSUE, path) if host == "github.com" else None
    if issue:
        path, query, fragment = f"{issue[1]}/issues/{issue[2]}", "", ""
    text = f"{scheme}://{_percent_normal(user)}{at}{host}{':' if port else ''}{port}{path}"
    return text + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")


def _ascii_lower(text: str) -> str:
    return text.translate(_LOWER)


_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _host_port(hostport: str) -> tuple[str, str | None]:
    """(host, port text); port None when it is not a number a port can be."""
    if hostport.startswith("["):  # an IPv6 literal
        end = hostport.find("]")
        if end < 0:
            return "", None
        host, rest = hostport[: end + 1], hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            return "", None
        port = rest[1:]
    else:
        host, _, port = hostport.partition(":")
    if port and (not port.isascii() or not port.isdigit() or int(port) > 65535):
        return host, None
    return host, str(int(port)) if port else ""


def _percent_normal(text: str) -> str:
    """Percent-encoding in one spelling: an escape of an unreserved character
    decoded, the others' hex in upper case; a character a URI cannot hold raw
    (and a `%` that starts no escape) encoded, as UTF-8."""
    return _PERCENT_OR_CHARACTER.sub(_percent_spelling, text)


_PERCENT_OR_CHARACTER = re.compile(r"%([0-9A-Fa-f]{2})|.", re.DOTALL)


def _percent_spelling(found: re.Match[str]) -> str:
    if found[1] is not None:
        char = chr(int(found[1], 16))
        return char if char in _UNRESERVED else f"%{found[1].upper()}"
    char = found[0]
    if char in _URI_CHARACTERS and char != "%":
        return char
    return "".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass"))


def _without_dot_segments(path: str) -> str:
    """RFC 3986's remove_dot_segments, for a path that starts with `/` (or is empty)."""
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
            continue
        if last:
            out.append("")
    return "".join("/" + s for s in out)


def tracker_key(ref: str, tracker_base: str | None) -> str:
    """What names one tracker (`#7201`, `7201` and its URL alike): the canonical
    URL, or for a reference that has none (`#N` without a tracker base) the
    reference as the file writes it."""
    ref = tracker_text(ref)
    return resolve_tracker(ref, tracker_base) or ref


_ISSUE_PATH = name_pattern(r"/[^/]+/[^/]+/issues/([0-9]+)")


def issue_number(url: str) -> str | None:
    """N of a canonical `https://HOST/OWNER/REPO/issues/N` (no query, no fragment)."""
    parts = _URI_PARTS.fullmatch(url)
    if parts is None or parts[4] is not None or parts[5] is not None:
        return None
    issue = whole(_ISSUE_PATH, parts[3])
    return issue[1] if issue else None


def tracker_text(ref: str) -> str:
    """A tracker as the file writes it: a bare issue number N as "#N"."""
    ref = ref.strip()
    return f"#{ref}" if ref.isdigit() else ref


def shell_tracker(tracker: str) -> str:
    """The tracker as typed in a shell: `#7201` unquoted would start a comment."""
    number = whole(ISSUE_NUMBER, tracker)
    return number[1] if number else (tracker or "...")
