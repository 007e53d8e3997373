"""JSON text exactly as the standard library writes it, written by orjson.

`json.dumps(indent=2)` runs the pure-Python encoder; orjson writes the same
bytes for what we emit, tens of times faster. What it would write otherwise
(floats, ints past 64 bits, lone surrogates, non-str keys, other types) goes to
the standard library. A non-finite float is a ValueError: JSON has none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; the standard library still works
    orjson = None  # type: ignore[assignment]


def pretty(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False) + "\\n"`, byte for byte
    (a non-finite float refused)."""
    text = _orjson(value, indent=True)
    if text is not None:
        return text + "\n"
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def compact(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, byte for byte."""
    text = _orjson(value, indent=False)
    if text is not None:
        return text
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _refuse(value: Any) -> Any:
    raise TypeError  # anything orjson would write but json would not: let json decide


def _orjson(value: Any, *, indent: bool) -> str | None:
    if orjson is None or _has_float(value):
        return None
    # Dataclasses and dates go to `_refuse` (json.dumps refuses them); str and int
    # subclasses (StrEnum, IntEnum) are written as their values, as json does.
    option = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    if indent:
        option |= orjson.OPT_INDENT_2
    try:
        return orjson.dumps(value, default=_refuse, option=option).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return None


def _has_float(value: Any) -> bool:
    """Whether a float is anywhere in the value (without recursing: any depth)."""
    stack: list[Any] = [(value,)]
    while stack:
        items = stack.pop()
        for item in items.values() if type(items) is dict else items:
            kind = type(item)
            if kind is float:
                return True
            if kind is dict or kind is list or kind is tuple:
                stack.append(item)
    return False


# --------------------------------------------------------------------------- reading

# Bounds on every JSON document matrixgen reads (--labels-json, the manifest of
# a `generate --output-dir` folder, the tracker API's answers): its size, and how deep
# its arrays and objects nest (the parsers recurse: 60,000 levels would end in
# a RecursionError).
JSON_MAX_BYTES = 16 * 1024 * 1024
JSON_MAX_DEPTH = 100

_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class JsonInputError(ValueError):
    """A JSON input refused: the message says why (and where, as line:column),
    not which input: the caller names it. `line` and `column` (1-based; 0:
    not known) say where for a caller that places it itself."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def load_bounded(
    data: str | bytes,
    *,
    max_bytes: int = JSON_MAX_BYTES,
    max_depth: int = JSON_MAX_DEPTH,
    constants: bool = False,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    parse_int: Callable[[str], Any] | None = None,
) -> Any:
    """Parse one JSON document within the bounds; JsonInputError otherwise. The
    constants NaN and Infinity, which JSON does not have, are refused too, unless
    `constants` (a file another program's `json.dump` wrote, as Python writes a
    NaN). `object_pairs_hook` and `parse_int` are `json.loads`'s (to see keys
    given twice; to read a long whole number otherwise than as an int)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise JsonInputError(
            f"{len(raw):,} bytes, more than the {max_bytes:,} a JSON input may have"
        )
    depth = 0
    # Fewer brackets than levels allowed cannot nest too deep: no walk needed.
    shallow = raw.count(b"[") + raw.count(b"{") <= max_depth
    for token in () if shallow else _TOKENS.finditer(raw):
        first = token.group()[:1]
        if first in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                line = raw.count(b"\n", 0, token.start()) + 1
                column = token.start() - raw.rfind(b"\n", 0, token.start())
                raise JsonInputError(
                    f"nested deeper than {max_depth} levels (at {line}:{column})", line, column
                )
        elif first in (b"]", b"}"):
            depth -= 1
    try:
        return json.loads(
            raw,
            parse_constant=float if constants else _no_constant,
            parse_int=parse_int,
            object_pairs_hook=object_pairs_hook,
        )
    except JsonInputError:
        raise
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise JsonInputError(
                f"not JSON ({exc.msg} at {exc.lineno}:{exc.colno})", exc.lineno, exc.colno
            ) from None
        raise JsonInputError(f"not JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise JsonInputError(f"{name} is not a JSON value")
