"""Which variables a shell script surely hands to the commands it runs, read as
the shell reads it, never by a text search (docs/security.md, node-level
quarantine): `export NAME=VALUE`, `NAME=VALUE` with `export NAME`, an environment
prefix; `unset` and `export -n` take one back. Conservative: only the top level
counts, an empty value sets nothing, and a script whose quotes or here-documents
do not close exports nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from itertools import chain

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")")
# Words that open or close a compound command when they start a command.
_OPENERS = frozenset({"if", "for", "while", "until", "case", "select", "{", "function"})
# Each closing word and the openers it closes.
_CLOSES = {
    "fi": ("if",),
    "done": ("for", "while", "until", "select"),
    "esac": ("case",),
    "}": ("{", "function", "()"),
    ")": ("(",),
}
_KEYWORDS = frozenset({"then", "else", "elif", "do", "!", "in", "time"})
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([^\s'\";&|<>()]+)\2")


class ShellSyntaxError(ValueError):
    """A quote, substitution or here-document that does not close."""


def _tokens(script: str) -> Iterator[tuple[str, bool]]:
    """(word, is_operator) of the whole script, as the shell splits it, in one
    pass: a line break is the operator `;`, a backslash before one joins the
    lines, here-documents' bodies are skipped. Words keep their quotes (a
    quoted word is never an assignment's name)."""
    text = script.replace("\r\n", "\n")
    i, n = 0, len(text)
    word: list[str] = []
    pending: list[tuple[str, bool]] = []  # here-documents of this line: (delimiter, strip)
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\n", i + 1):
            i += 2  # a continuation
            continue
        if c in " \t\r\n":
            if word:
                yield "".join(word), False
                word = []
            i += 1
            if c == "\n":
                yield ";", True
                i = _skip_here_documents(text, i, pending)
                pending = []
            continue
        if c == "#" and not word:
            end = text.find("\n", i)
            i = n if end < 0 else end  # a comment, to the end of the line
            continue
        if text.startswith("<<<", i):  # a here-string: its word follows
            word.append("<<<")
            i += 3
            continue
        if text.startswith("<<", i):
            if word:
                yield "".join(word), False
                word = []
            found = _HEREDOC.match(text, i)
            if found is None:
                raise ShellSyntaxError("a here-document without a delimiter")
            pending.append((found.group(3), found.group(1) == "-"))
            i = found.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None:
            if word:
                yield "".join(word), False
                word = []
            yield op, True
            i += len(op)
            continue
        end = _word_part_end(text, i)
        word.append(text[i:end])
        i = end
    if word:
        yield "".join(word), False
    if pending:
        raise ShellSyntaxError(f"the here-document {pending[0][0]} does not close")


def _skip_here_documents(text: str, i: int, pending: list[tuple[str, bool]]) -> int:
    """Past the bodies of the line's here-documents, which start at `i`."""
    for delimiter, strip in pending:
        while True:
            if i >= len(text):
                raise ShellSyntaxError(f"the here-document {delimiter} does not close")
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            line = text[i:end]
            i = end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
    return i


def _word_part_end(text: str, i: int) -> int:
    """Where the part of a word that starts at `i` ends (a quoted string, an
    escape, a substitution, or one plain character)."""
    c = text[i]
    if c == "\\":
        return min(i + 2, len(text))
    if c == "'":
        end = text.find("'", i + 1)
        if end < 0:
            raise ShellSyntaxError("a single quote does not close")
        return end + 1
    if c == "$" and text.startswith("$'", i):
        return _past(text, i + 2, "'", "a $'...' string")
    if c == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j = _word_part_end(text, j) if text[j] in "\\$`" else j + 1
        if j >= len(text):
            raise ShellSyntaxError("a double quote does not close")
        return j + 1
    if c == "`":
        return _past(text, i + 1, "`", "a backquote")
    if c == "$" and i + 1 < len(text) and text[i + 1] in "({":
        closing = ")" if text[i + 1] == "(" else "}"
        depth, j = 0, i + 1
        while j < len(text):
            ch = text[j]
            if ch in "({":
                depth += 1
            elif ch in ")}":
                depth -= 1
                if depth == 0:
                    return j + 1
            elif ch in "'\"`\\":
                j = _word_part_end(text, j)
                continue
            j += 1
        raise ShellSyntaxError(f"a ${text[i + 1]}...{closing} does not close")
    return i + 1


def _past(text: str, j: int, closing: str, what: str) -> int:
    """Past the `closing` character from `j` on, a backslash escaping the next."""
    while j < len(text) and text[j] != closing:
        j += 2 if text[j] == "\\" else 1
    if j >= len(text):
        raise ShellSyntaxError(f"{what} does not close")
    return j + 1


def _unquote(word: str) -> str:
    """A word's text for an assignment's value test: quotes removed, so that
    `""` and `''` are empty (substitutions kept as written)."""
    return re.sub(r"""\A(['"])(.*)\1\Z""", r"\2", word, flags=re.S) if len(word) >= 2 else word


def exported(script: str) -> Mapping[str, str]:
    """NAME -> VALUE (as written) of every variable the script surely hands on
    at its top level (see the module doc): exported and still set at its end,
    or given as a top-level command's environment prefix. Empty for a script
    the shell could not read."""
    try:
        return _exported(script)
    except ShellSyntaxError:
        return {}


def _exported(script: str) -> dict[str, str]:
    assigned: dict[str, str] = {}  # shell variables, set at the top level
    marked: set[str] = set()  # names exported, with or without a value yet
    prefixed: dict[str, str] = {}  # environment prefixes of top-level commands
    nesting: list[str] = []  # the compound commands open, innermost last
    command: list[str] = []
    for word, operator in chain(_tokens(script), [(";", True)]):
        if not operator:
            command.append(word)
            continue
        if word == "(":
            nesting.append("()" if command else "(")  # after a word: a function's `name ( )`
            command = []
            continue
        if word == ")" and nesting and nesting[-1] == "case":
            command = []  # a case pattern's end: the pattern is no command
            continue
        if word == ")" and nesting and nesting[-1] == "()":
            continue  # `name()`: the body's opener comes next
        if word == ")" and not command:
            _close(")", nesting)
            continue
        _run(command, nesting, assigned, marked, prefixed)
        command = []
        if word == ")":
            _close(")", nesting)
    return {
        **prefixed,
        **{n: assigned[n] for n in marked if n in assigned and _unquote(assigned[n])},
    }


def _close(word: str, nesting: list[str]) -> None:
    """A closing word: the innermost opener it closes goes, with what it holds."""
    for at in range(len(nesting) - 1, -1, -1):
        if nesting[at] in _CLOSES[word]:
            del nesting[at:]
            return


def _run(
    words: list[str],
    nesting: list[str],
    assigned: dict[str, str],
    marked: set[str],
    prefixed: dict[str, str],
) -> None:
    """One simple command (its words): its effect on the variables when it runs
    at the top level, and on the nesting."""
    while words and words[0] in _KEYWORDS:
        words = words[1:]
    if not words:
        return
    head = words[0]
    if head in _OPENERS:
        nesting.append(head)  # `if ...`, `{`, `function f`: what follows is nested
        if head == "{" and nesting[-2:-1] == ["()"]:
            nesting.pop()  # `f() {`: the function's body, opened once
        return
    if head in _CLOSES:
        _close(head, nesting)
        return
    if nesting:
        return
    prefix: dict[str, str] = {}
    rest = words
    while rest and (found := _ASSIGNMENT.fullmatch(rest[0])):
        prefix[found.group(1)] = found.group(2)
        rest = rest[1:]
    if not rest:  # NAME=VALUE ...: shell variables (exported if marked)
        assigned.update(prefix)
        return
    if rest[0] in ("export", "declare", "typeset") and not prefix:
        _export(rest, assigned, marked)
    elif rest[0] == "unset" and not prefix:
        for name in rest[1:]:
            assigned.pop(name, None)
            marked.discard(name)
    else:
        prefixed.update({k: v for k, v in prefix.items() if _unquote(v)})


def _export(words: list[str], assigned: dict[str, str], marked: set[str]) -> None:
    """`export [-n] NAME[=VALUE]...`, `declare -x ...` (`typeset` alike)."""
    flags = [w for w in words[1:] if w.startswith("-")]
    if words[0] != "export" and not any("x" in f for f in flags):
        return  # declare without -x: a shell variable, not exported
    removing = any("n" in f for f in flags) or any(f.startswith("+") for f in flags)
    for word in words[1:]:
        if word.startswith(("-", "+")):
            continue
        found = _ASSIGNMENT.fullmatch(word)
        name = found.group(1) if found else word
        if not _NAME.fullmatch(name):
            continue
        if removing:
            marked.discard(name)
            continue
        if found:
            assigned[name] = found.group(2)
        marked.add(name)
