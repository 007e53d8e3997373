"""`{field}` templates of recipe specs (`name`, `build`, `script`).

Only plain placeholders are allowed: no attribute access or indexing, so a
recipe can never reach into Python objects through a format string.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

_FORMATTER = string.Formatter()
MAX_WIDTH = 999
_HUGE = re.compile(r"[1-9][0-9]{3,}")

Piece = tuple[str, str | None, str, str | None]


class TemplateError(ValueError):
    """A template that is malformed or names fields that do not exist."""


@lru_cache(maxsize=4096)
def parse_template(template: str) -> tuple[Piece, ...]:
    try:
        pieces = tuple(
            (literal, name, spec or "", conversion)
            for literal, name, spec, conversion in _FORMATTER.parse(template)
        )
    except ValueError as exc:
        raise TemplateError(f"malformed template: {exc}") from None
    for _, name, spec, conversion in pieces:
        if name is None:
            continue
        if not name.isidentifier():
            raise TemplateError(
                f'placeholder "{{{name}}}" is not a plain field name; '
                "only {field} placeholders are allowed"
            )
        if conversion not in (None, "s", "r") or "{" in spec:
            raise TemplateError(f'placeholder "{{{name}}}" uses an unsupported conversion')
        if _HUGE.search(spec):
            # `{n:.999999999f}` would take a minute and a gigabyte for each job.
            raise TemplateError(
                f'placeholder "{{{name}}}": a width or precision of at most {MAX_WIDTH} please'
            )
    return pieces


@lru_cache(maxsize=4096)
def placeholders(template: str) -> tuple[str, ...]:
    """The field names a template uses, in order of first use."""
    return tuple(dict.fromkeys(name for _, name, _, _ in parse_template(template) if name))


def render(template: str, fields: Mapping[str, Any]) -> str:
    """Fill a template; raise TemplateError naming every missing field."""
    pieces = parse_template(template)
    out: list[str] = []
    for literal, name, spec, conversion in pieces:
        out.append(literal)
        if name is not None:
            try:
                value = fields[name]
            except KeyError:
                raise _missing(pieces, fields) or TemplateError(name) from None
            if conversion == "r":
                value = repr(value)
            try:
                out.append(format(value, spec) if spec else str(value))
            except (ValueError, TypeError) as exc:
                # A missing field is reported first, wherever it comes.
                raise _missing(pieces, fields) or TemplateError(
                    f'placeholder "{{{name}}}": {exc}'
                ) from None
    return "".join(out)


def _missing(pieces: tuple[Piece, ...], fields: Mapping[str, Any]) -> TemplateError | None:
    """The error naming every field a template uses that `fields` lacks (None: none)."""
    missing = [name for _, name, _, _ in pieces if name is not None and name not in fields]
    if not missing:
        return None
    names = ", ".join(f"{{{m}}}" for m in dict.fromkeys(missing))
    return TemplateError(f"placeholder {names} does not resolve to a field of the job")
