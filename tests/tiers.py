"""The suite's two tiers (docs/testing.md): `slow` tests, and `fast` ones, the rest.

    python -m pytest -m fast        # a developer's run: no browser, server,
                                    # real validator, external generator or
                                    # real pytest run
    python -m pytest                # everything (what CI runs)

A test is slow when it uses one of the slow resources (RESOURCES), or takes
seconds of its own. It is marked so:
- by its fixtures, at collection (`mark_tiers`, from FIXTURE_RESOURCES): the
  real pytest runs behind the evidence stores, the PostgreSQL side of the
  store fixtures, Megatron-LM's generator;
- by its module (`pytestmark = pytest.mark.slow`) or by hand
  (`@pytest.mark.slow`), for what a test's body starts itself.

Every entry point to a slow resource calls `uses`: a test that reaches one
without the mark fails and says which, so a forgotten mark cannot slow down the
fast tier unnoticed (the full suite, run in CI, checks every mark).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

SLOW = "slow"
FAST = "fast"

RESOURCES = {
    "browser": "Chromium driven by playwright",
    "validators": "a real validator (check-jsonschema, actionlint, gitlab-ci-local, jq, ...)",
    "generator": "Megatron-LM's own generator and CI scripts",
    "pytest": "a real pytest run in a subprocess",
    "postgresql": "the PostgreSQL server",
    "docs": "the docs' transcripts, each command a process",
}

# Fixtures whose tests are slow, and why.
FIXTURE_RESOURCES = {
    "evidence_runs": "pytest",
    "triage_runs": "pytest",
    "ci": "generator",
    "upstream": "generator",
    "generated_reference": "generator",
}
# The parameter of the store fixtures (`db` and its aliases) that is the server.
POSTGRESQL_PARAM = "postgresql"

_current: list[pytest.Item] = []


def slow_reasons(item: pytest.Item) -> list[str]:
    """Why the item is slow by its fixtures and parameters (empty: not by them)."""
    reasons = [FIXTURE_RESOURCES[f] for f in item.fixturenames if f in FIXTURE_RESOURCES]
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(isinstance(v, str) and v == POSTGRESQL_PARAM for v in params.values()):
        reasons.append("postgresql")
    return reasons


def mark_tiers(items: Iterable[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(SLOW) is None and slow_reasons(item):
            item.add_marker(SLOW)
        if item.get_closest_marker(SLOW) is None:
            item.add_marker(FAST)


def enter(item: pytest.Item) -> None:
    _current.append(item)


def leave(item: pytest.Item) -> None:
    if _current and _current[-1] is item:
        _current.pop()


def uses(resource: str) -> None:
    """Called where a slow resource starts: fails the running test unless it is
    marked slow (outside a test, or in a slow one, nothing happens)."""
    if not _current:
        return
    item = _current[-1]
    if item.get_closest_marker(SLOW) is None:
        pytest.fail(
            f"{item.nodeid} uses {RESOURCES[resource]} but is not marked slow: add "
            "@pytest.mark.slow (or module-level pytestmark), or leave the resource out "
            "of the fast tier's tests",
            pytrace=False,
        )
