"""The quarantine's settings (the config's `quarantine` section) and its days:
the one date parser of the package, and the day expiry is judged against."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from matrixgen.model.errors import UsageError
from matrixgen.util.patterns import name_pattern, whole

if TYPE_CHECKING:
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.documents.config_sections import QuarantinePolicy


TODAY_VARIABLE = "MATRIXGEN_TODAY"


def current_day() -> dt.date:
    """The day expiry is judged against: $MATRIXGEN_TODAY (YYYY-MM-DD) when set, so
    a past CI run can be reproduced and tests do not age; else the calendar's."""
    import os

    value = os.environ.get(TODAY_VARIABLE)
    if not value:
        return dt.date.today()
    try:
        return parse_day(value)
    except ValueError:
        raise UsageError(f"{TODAY_VARIABLE}={value!r}: expected a date like 2026-12-01") from None


_DAY = name_pattern(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def option_day(text: str, option: str) -> dt.date:
    """A YYYY-MM-DD option value, or a UsageError naming the option."""
    try:
        return parse_day(text.strip())
    except ValueError:
        raise UsageError(f'{option} "{text}" is not a date: write YYYY-MM-DD') from None


def parse_day(text: str) -> dt.date:
    """The one date parser of the package: YYYY-MM-DD, what the file holds and
    its schema allows (date.fromisoformat alone also takes 20270101 and
    2027-W01-1); ValueError for anything else."""
    if not whole(_DAY, text):
        raise ValueError(text)
    return dt.date.fromisoformat(text)


def policy(config: ProjectConfig) -> QuarantinePolicy:
    """The `quarantine` section of the project config (its defaults where it says nothing)."""
    return config.doc.quarantine
