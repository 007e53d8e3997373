"""Escaping of untrusted text for the place it is printed (docs/security.md).

A recipe tree and a quarantine file come from pull requests, so every string in
them is hostile until escaped for its destination: a log line, a GitHub
workflow command, Markdown, or JSON printed to a log. Pure functions over
`str`; nothing here imports the rest of matrixgen.
"""

from __future__ import annotations

import re
import unicodedata

# ----------------------------------------------------------------- terminal lines

_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Categories never shown as themselves: controls (C0, DEL, C1), format characters
# (bidirectional overrides, zero-width characters), line and paragraph
# separators, and lone surrogates (which no UTF-8 stream can carry).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_LEGACY_COMMAND = "##["
_LEGACY_COMMAND_ESCAPED = "##\\x5b"
_LINE_COMMAND = re.compile(r"^(\s*):(?=:)")
_TERMINAL_ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(.))", re.S)
_UNNAMED = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN_CATEGORIES


# The characters that may be hidden: ASCII controls and DEL, and every non-ASCII
# character (most are not: `_hidden` decides). Variants leave out what the caller
# allows, so that a big text of many lines costs a regex scan, not a Python loop.
# (Non-ASCII as a negated class: a range up to U+10FFFF takes 30 ms to compile.)
_MAYBE_HIDDEN = re.compile("[\x00-\x1f\x7f]|[^\x00-\x7f]")
_MAYBE_HIDDEN_IN_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f]|[^\x00-\x7f]")  # not \t \n
_MAYBE_HIDDEN_IN_JSON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|[^\x00-\x7f]")  # not \t\n\r
_COMMAND_LINE_START = re.compile(r"^[^\S\n]*::", re.MULTILINE)


# For each pattern above: the ASCII characters it does not match (the ones the
# caller allows, and the printable ones), as bytes for `bytes.translate` to delete.
_ALLOWED_ASCII = {
    maybe: bytes(c for c in range(128) if not maybe.fullmatch(chr(c)))
    for maybe in (_MAYBE_HIDDEN, _MAYBE_HIDDEN_IN_LINES, _MAYBE_HIDDEN_IN_JSON)
}


def _any_hidden(text: str, maybe: re.Pattern[str] = _MAYBE_HIDDEN) -> bool:
    """`any(_hidden(c) for c in text)`, less the characters `maybe` leaves out:
    deleting the allowed ASCII bytes (in C, one pass) leaves the characters
    `maybe` matches (no byte of a multi-byte character is ASCII)."""
    left = text.encode("utf-8", "surrogatepass").translate(None, _ALLOWED_ASCII[maybe])
    if not left:
        return False
    return any(_hidden(char) for char in set(left.decode("utf-8", "surrogatepass")))


def _code(char: str) -> str:
    point = ord(char)
    if point <= 0xFF:
        return f"\\x{point:02x}"
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def _shown(char: str) -> str:
    return _NAMED[char] if char in "\n\r" else _code(char)


def _hidden_char(char: str) -> bool:
    return not char.isprintable() and _hidden(char)


def terminal_text(value: object) -> str:
    """One field of a terminal or log line, escaped reversibly (`unescape_terminal`):
    never a line break, a control character or a `##[`; backslashes doubled and
    invisible characters shown as Python string literals do (`\\n`, `\\xNN`)."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable() and "\\" not in text and _LEGACY_COMMAND not in text:
        return text  # the common case: nothing to do
    out = "".join(_NAMED.get(c) or (_code(c) if _hidden_char(c) else c) for c in text)
    return out.replace(_LEGACY_COMMAND, _LEGACY_COMMAND_ESCAPED)


def unescape_terminal(text: str) -> str:
    """The inverse of `terminal_text` (and of the escapes `terminal_line` adds)."""

    def one(found: re.Match[str]) -> str:
        for group in (1, 2, 3):
            if found[group]:
                return chr(int(found[group], 16))
        return _UNNAMED.get(found[4], found[0])

    return _TERMINAL_ESCAPE.sub(one, text)


def terminal_line(line: str) -> str:
    """A whole line of escaped fields made safe to print: a leading `::` (after
    blanks), `##[` and any control character left (a line break too) escaped."""
    if not line.isprintable() and any(_hidden(c) and c != "\t" for c in line):
        line = "".join(_shown(c) if c != "\t" and _hidden(c) else c for c in line)
    if _LEGACY_COMMAND in line:
        line = line.replace(_LEGACY_COMMAND, _LEGACY_COMMAND_ESCAPED)
    if ":" in line[:1] or (line[:1].isspace() and "::" in line):
        line = _LINE_COMMAND.sub(r"\1\\x3a", line, count=1)
    return line


def terminal_lines(text: str) -> str:
    """`terminal_line` on each line of text (the line breaks are kept)."""
    if (
        _LEGACY_COMMAND not in text
        and ("::" not in text or not _COMMAND_LINE_START.search(text))
        and not _any_hidden(text, _MAYBE_HIDDEN_IN_LINES)
    ):
        return text  # no line would change: one scan instead of a call per line
    return "\n".join(terminal_line(line) for line in text.split("\n"))


# -------------------------------------------------------------- workflow commands


def workflow_data(text: str) -> str:
    """The message of a GitHub workflow command (after the second `::`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A property value of a workflow command (`file=...`, `title=...`)."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int = 0,
    column: int = 0,
    title: str | None = None,
) -> str:
    """`::error file=F,line=L,col=C,title=T::message` (level: error, warning, notice).

    Every input part is escaped as the runner unescapes it, so the command is one
    line and the message reads back exactly as given."""
    props = []
    if file is not None:
        props.append(f"file={workflow_property(file)}")
        if line:
            props.append(f"line={int(line)}")
            if column:
                props.append(f"col={int(column)}")
    if title is not None:
        props.append(f"title={workflow_property(title)}")
    head = f"{level} {','.join(props)}" if props else level
    return f"::{head}::{workflow_data(message)}"


# ------------------------------------------------------------------------- JSON


def _json_code(char: str) -> str:
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000  # a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def json_for_log(text: str) -> str:
    """JSON text (`ensure_ascii=False`) safe to print in a CI log, meaning the
    same: the invisible characters json.dumps leaves as they are, and the `[`
    of `##[`, become `\\uXXXX` (only inside strings: JSON holds only ASCII outside)."""
    if not text.isprintable() and _any_hidden(text, _MAYBE_HIDDEN_IN_JSON):
        text = _MAYBE_HIDDEN_IN_JSON.sub(
            lambda found: _json_code(found[0]) if _hidden(found[0]) else found[0], text
        )
    return text.replace(_LEGACY_COMMAND, "##\\u005b")


# ------------------------------------------------------------------------- YAML

# No folding of long scalars: a folded line could start with `::`.
YAML_WIDTH = 2**31 - 1


def yaml_double_quoted(value: str) -> bool:
    """Whether a YAML emitter must write `value` double-quoted so that the document
    can be printed in a CI log: `terminal_line` then changes a line only inside a
    double-quoted scalar, where `\\xNN` means to YAML what it means to us."""
    if _LEGACY_COMMAND in value or value.lstrip().startswith(":"):
        return True
    return not value.isprintable() and _any_hidden(value)


def yaml_for_log(text: str) -> str:
    """YAML emitted with `yaml_double_quoted` strings, safe to print: what it
    escapes can only fall inside double-quoted scalars there."""
    return terminal_lines(text)


# --------------------------------------------------------------------- Markdown

# Every ASCII punctuation character may be backslash-escaped in CommonMark; the
# ones that can start markup (or end a table cell) are, but the ones HTML
# spells as character references (`_HTML`).
_MARKDOWN_SPECIAL = re.compile(r"[\\`*_{}\[\]()#+\-.!|~>=^$:@&<\"]")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def markdown_text(value: object) -> str:
    """Inline Markdown text (table cells too) that renders as the value itself, no
    markup coming out of it; invisible characters shown as in terminal lines.
    Blanks but the space at either end are character references: renderers trim
    different sets of them, a reference survives every trim."""
    text = value if isinstance(value, str) else str(value)
    shown = "".join(
        _NAMED.get(c, c) if c in "\n\r\t" else (_code(c) if _hidden_char(c) else c) for c in text
    )
    shown = _MARKDOWN_SPECIAL.sub(lambda found: _HTML.get(found[0]) or "\\" + found[0], shown)
    # The blanks at either end of the text but the space, as character references.
    core = shown.strip()
    if len(core) == len(shown):
        return shown
    lead = len(shown) - len(shown.lstrip())
    head, tail = shown[:lead], shown[lead + len(core) :] if core else ""
    return _blank_refs(head) + core + _blank_refs(tail)


def _blank_refs(blanks: str) -> str:
    return "".join(c if c == " " else f"&#{ord(c)};" for c in blanks)


def markdown_code(value: object) -> str:
    """Inline code that renders as the value itself, in text and table cells: the
    fence outruns every run of backticks in it, padded where CommonMark would
    take a space off; a `|` (it ends a cell, unescapable in a span) is `\\|`
    between two spans."""
    text = "".join(_code(c) if _hidden_char(c) else c for c in str(value))
    return "\\|".join(_code_span(part) for part in text.split("|"))


def _code_span(text: str) -> str:
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    stripped = text[0] == text[-1] == " " and text.strip(" ")
    pad = " " if text[0] == "`" or text[-1] == "`" or stripped else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_LINK_SCHEMES = ("http", "https")


def safe_link(url: object) -> str | None:
    """The URL as a Markdown link destination when it is an absolute http(s) URL with
    a host, else None (`javascript:`, `data:`, relative and odd URLs are no links).
    Characters that could end the destination or the link are percent-encoded."""
    if not isinstance(url, str) or not url or len(url) > 2048:
        return None
    if any(c.isspace() or _hidden(c) for c in url):
        return None
    from urllib.parse import quote, urlsplit  # only Markdown needs it (and ipaddress)

    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in _LINK_SCHEMES or not parts.hostname:
        return None
    if "\\" in url or "@" in parts.netloc:
        return None  # a host that browsers and parsers may read differently
    return quote(url, safe="/:?#[]!$&'*+,;=%-._~")


def markdown_link(text: object, url: object) -> str:
    """`[text](url)` with the text escaped, or the escaped text alone when the URL
    is not a safe link."""
    target = safe_link(url)
    shown = markdown_text(text)
    return f"[{shown}]({target})" if target is not None else shown


# ------------------------------------------------------------------------- HTML

_HTML_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_ATTRIBUTE = {**_HTML_TEXT, '"': "&quot;", "'": "&#39;"}
_HTML_TEXT_SPECIAL = re.compile("[&<>]")
_HTML_ATTRIBUTE_SPECIAL = re.compile("[&<>\"']")


def _html_escaped(value: object, special: re.Pattern[str], references: dict[str, str]) -> str:
    text = value if isinstance(value, str) else str(value)
    # Invisible characters spelled as in terminal lines (a backslash means
    # nothing to HTML: left as it is).
    if not text.isprintable() and _any_hidden(text):
        text = "".join(_code(c) if _hidden_char(c) else c for c in text)
    return special.sub(lambda found: references[found[0]], text)


def html_text(value: object) -> str:
    """Text for an HTML element's content: `&`, `<` and `>` as character
    references, invisible characters shown as escapes. Never markup."""
    return _html_escaped(value, _HTML_TEXT_SPECIAL, _HTML_TEXT)


def html_attribute(value: object) -> str:
    """`html_text` for a quoted attribute, both quotes as references: it cannot end it."""
    return _html_escaped(value, _HTML_ATTRIBUTE_SPECIAL, _HTML_ATTRIBUTE)


def html_link(url: object) -> str | None:
    """An `href` value for the URL under `safe_link`'s rule (an absolute http(s)
    URL with a host), escaped for a quoted attribute; None when it is no link."""
    target = safe_link(url)
    return html_attribute(target) if target is not None else None
