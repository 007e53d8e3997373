"""Repository-path globs (`paths` of a recipe, `changes.ignore` of the config),
matched in time linear in the path's length whatever the glob (docs/security.md).

`**/` is any number of folders (none included), `**` anything, `*` and `?`
within one folder; everything else is literal. A glob is a small automaton run
as a lazily built deterministic one, never backtracking: a regular expression
for `**/**/...` costs seconds against a deep path.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Bounds on one glob, checked by validate: real globs are a path prefix and a
# wildcard or two; these leave room for long literal paths.
MAX_GLOB_LENGTH = 1024
MAX_GLOB_WILDCARDS = 16
# Deterministic states kept per glob; past it they are made again as needed
# (still one step per token and character), so memory stays bounded.
MAX_STATES = 4096

# Token kinds.
_LITERAL = 0  # one given character
_ONE = 1  # `?`: one character but `/`
_STAR = 2  # `*`: any run without `/`
_ANY = 3  # `**` not followed by `/`: any run
_FOLDERS = 4  # `**/`: nothing, or any run that ends with `/`
_LOOPS = frozenset({_STAR, _ANY, _FOLDERS})  # may match nothing: a free step past them
# Each wildcard as written, left to right (no backtracking: one pass).
_WILDCARD = re.compile(r"\*\*/?|[*?]")
_SPLIT = re.compile(f"({_WILDCARD.pattern})")  # literal text and wildcards, alternately
_KINDS = {"**/": _FOLDERS, "**": _ANY, "*": _STAR, "?": _ONE}


def tokens(glob: str) -> list[tuple[int, str]]:
    """The glob's tokens, each pair of wildcards side by side that means what
    one of them means made that one: `**/**/` is `**/`, and `**` beside another
    wildcard, or `**/` before `*`, is `**`."""
    if glob.endswith("/"):
        glob += "**"
    out: list[tuple[int, str]] = []
    for index, part in enumerate(_SPLIT.split(glob)):
        if index % 2 == 0:
            out += [(_LITERAL, char) for char in part]
            continue
        out.append((_KINDS[part], ""))
        while len(out) >= 2 and (merged := _merged(out[-2][0], out[-1][0])) is not None:
            out[-2:] = [(merged, "")]
    return out


def _merged(first: int, second: int) -> int | None:
    """The one wildcard two side by side amount to, or None."""
    if first not in _LOOPS or second not in _LOOPS:
        return None
    if first == second:
        return first
    if _ANY in (first, second) or (first, second) == (_FOLDERS, _STAR):
        return _ANY  # any folders, then the rest of a name: anything
    return None


def wildcards(glob: str) -> int:
    """How many wildcard tokens the glob has, as written (`**/` is one)."""
    return len(_WILDCARD.findall(glob))


def glob_problem(glob: str) -> str | None:
    """Why validate refuses the glob (too long, too many wildcards), or None."""
    if len(glob) > MAX_GLOB_LENGTH:
        return f"is {len(glob)} characters long; a glob has at most {MAX_GLOB_LENGTH}"
    count = wildcards(glob)
    if count > MAX_GLOB_WILDCARDS:
        return f"has {count} wildcards (*, **, ?); a glob has at most {MAX_GLOB_WILDCARDS}"
    return None


class Glob:
    """One compiled glob: `Glob(text).matches(path)`."""

    __slots__ = ("_accepts", "_dead", "_ids", "_kinds", "_moves", "_prefix", "_sets", "_start")

    def __init__(self, glob: str) -> None:
        toks = tokens(glob)
        # The literal start is compared as a string: most paths fail there.
        n = next((i for i, (kind, _) in enumerate(toks) if kind != _LITERAL), len(toks))
        self._prefix = "".join(char for _, char in toks[:n])
        self._kinds = toks[n:]
        self._reset()

    def _reset(self) -> None:
        self._ids: dict[frozenset[int], int] = {}
        self._sets: list[frozenset[int]] = []
        self._moves: list[dict[str, int]] = []
        self._accepts: list[bool] = []
        self._start = self._state(self._closure({0}))
        self._dead = self._state(frozenset())

    def _closure(self, states: set[int]) -> frozenset[int]:
        """The states with the free steps past loops taken. State i < m is before
        token i, m is the end, and m + 1 + i is inside the folders of token i
        (`**/` past a character that is not `/`)."""
        toks, m = self._kinds, len(self._kinds)
        todo = [s for s in states if s < m]
        seen = set(states)
        while todo:
            s = todo.pop()
            if toks[s][0] in _LOOPS and s + 1 not in seen:
                seen.add(s + 1)
                if s + 1 < m:
                    todo.append(s + 1)
        return frozenset(seen)

    def _state(self, states: frozenset[int]) -> int:
        found = self._ids.get(states)
        if found is None:
            found = self._ids[states] = len(self._sets)
            self._sets.append(states)
            self._moves.append({})
            self._accepts.append(len(self._kinds) in states)
        return found

    def _step(self, state: int, char: str) -> int:
        toks, m = self._kinds, len(self._kinds)
        slash = char == "/"
        nxt: set[int] = set()
        for s in self._sets[state]:
            if s > m:  # inside the folders of `**/`
                i = s - m - 1
                nxt.add(i if slash else s)
                continue
            if s == m:
                continue
            kind, literal = toks[s]
            if (kind == _LITERAL and char == literal) or (kind == _ONE and not slash):
                nxt.add(s + 1)
            elif (kind == _STAR and not slash) or kind == _ANY:
                nxt.add(s)
            elif kind == _FOLDERS:  # a `/` ends a folder, anything else is inside one
                nxt.add(s if slash else m + 1 + s)
        if len(self._sets) >= MAX_STATES:
            self._reset()
            return self._state(self._closure(nxt))
        target = self._state(self._closure(nxt))
        self._moves[state][char] = target
        return target

    def matches(self, path: str) -> bool:
        prefix = self._prefix
        if not path.startswith(prefix):
            return False
        state, dead, moves = self._start, self._dead, self._moves
        for char in path[len(prefix) :]:
            found = moves[state].get(char)
            if found is None:
                found = self._step(state, char)
                moves, dead = self._moves, self._dead  # a reset makes new tables
            if found == dead:
                return False
            state = found
        return self._accepts[state]


_compiled = lru_cache(maxsize=4096)(Glob)


def matches(glob: str, path: str) -> bool:
    """Whether the repository path matches the glob (the whole path)."""
    return _compiled(glob).matches(path)
