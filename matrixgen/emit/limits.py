"""The hard limits of the CI systems matrixgen writes for (docs/ci-limits.md):
each system's are in its home (`systems/<name>/limits`), one check per limit
returning what is wrong or None; `refuse` turns a problem into a LimitError
(exit 4). The emitters refuse a file past a limit; `jet-trigger` and
`jet-buckets`, which write what Megatron-LM's generator writes, say so (an error
with `--strict`).
"""

from __future__ import annotations

from msgspec import Struct

from matrixgen.model.errors import LimitError


def refuse(problem: str | None) -> None:
    """A LimitError for a problem one of the checks found."""
    if problem is not None:
        raise LimitError(problem)


class Notice(Struct, frozen=True):
    """Something a call's output cannot show (Megatron-LM's drop-ins): printed on stderr."""

    code: str
    message: str


# The code of a notice that a CI system's limit would be broken.
LIMIT_NOTICE = "ci-limit"


def limit_notices(*problems: str | None) -> list[Notice]:
    """The problems the limits' checks found, as notices."""
    return [Notice(LIMIT_NOTICE, p) for p in problems if p is not None]
