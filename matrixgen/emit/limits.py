"""The CI systems' hard limits (docs/ci-limits.md; each system's checks are in
its home): the emitters refuse a file past one, Megatron-LM's drop-ins only
say so, as a notice."""

from __future__ import annotations

from msgspec import Struct

from matrixgen.model.errors import LimitError


def refuse(problem: str | None) -> None:
    if problem is not None:
        raise LimitError(problem)


class Notice(Struct, frozen=True):
    """Something a call's output cannot show (Megatron-LM's drop-ins): printed on stderr."""

    code: str
    message: str


# The code of a notice that a CI system's limit would be broken.
LIMIT_NOTICE = "ci-limit"


def limit_notices(*problems: str | None) -> list[Notice]:
    return [Notice(LIMIT_NOTICE, p) for p in problems if p is not None]
