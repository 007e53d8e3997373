"""The running CI, read from its variables: the one place matrixgen reads them
(docs/emitters.md). The rest of matrixgen asks for a role (`Home.variables`),
never for a variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from matrixgen.systems import HOMES, other_tiers_home
from matrixgen.systems.home import Home


def running_all(environ: Mapping[str, str] | None = None) -> tuple[Home, ...]:
    """Every system whose job variable is "true" (more than one: no telling)."""
    env = os.environ if environ is None else environ
    return tuple(h for h in HOMES if env.get(h.job_variable) == "true")


def running(environ: Mapping[str, str] | None = None) -> Home | None:
    """The system whose job this process runs in, None outside any CI."""
    return next(iter(running_all(environ)), None)


def running_or_assumed(environ: Mapping[str, str] | None = None) -> Home:
    """The running system, else the one assumed outside any CI."""
    return running(environ) or other_tiers_home()


def _asked_order(environ: Mapping[str, str]) -> list[Home]:
    first = running_or_assumed(environ)
    return [first, *(h for h in HOMES if h is not first)]


def ci_value(role: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of the CI variable of a role (stripped; an empty one is unset):
    the running system's first, then the others' in `_asked_order`."""
    env = os.environ if environ is None else environ
    for home in _asked_order(env):
        name = home.variables.get(role)
        value = env.get(name, "").strip() if name else ""
        if value:
            return value
    return None


def variables_of(role: str) -> tuple[str, ...]:
    """The variables a role is read from, in the order outside any CI asks them."""
    return tuple(h.variables[role] for h in _asked_order({}) if role in h.variables)


def job_variables() -> tuple[str, ...]:
    """Every system's job variable, in the registry's order."""
    return tuple(h.job_variable for h in HOMES)
