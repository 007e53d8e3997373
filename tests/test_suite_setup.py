"""The test suite's own set-up (tests/conftest.py, .ci/run, pyproject's test
extra): CI runs Hypothesis derandomised without a database, requires the
Megatron-LM tree and the validators, and every module a test imports is a
declared dependency."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import conftest, tiers

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("environ", "profile"),
    [
        ({}, "explore"),
        ({"CI": "true"}, "ci"),
        ({"CI": "false"}, "explore"),
        ({"MATRIXGEN_HYPOTHESIS_PROFILE": "ci"}, "ci"),
        ({"CI": "true", "MATRIXGEN_HYPOTHESIS_PROFILE": "explore"}, "explore"),
    ],
)
def test_the_profile_follows_ci_and_the_override(environ: dict, profile: str) -> None:
    assert conftest.hypothesis_profile(environ) == profile


def test_the_ci_profile_is_reproducible_and_explore_is_not() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize is True and ci.database is None and ci.print_blob is True
    explore = settings.get_profile("explore")
    assert explore.derandomize is False and explore.database is not None
    # Wall-time checks fail at random on a loaded machine: neither profile has them.
    for profile in (ci, explore):
        assert profile.deadline is None
        assert HealthCheck.too_slow in profile.suppress_health_check


def test_this_run_uses_the_profile_its_environment_selects() -> None:
    wanted = settings.get_profile(conftest.hypothesis_profile())
    assert settings.default.derandomize == wanted.derandomize
    assert (settings.default.database is None) == (wanted.database is None)


def test_ci_run_requires_the_data_and_selects_the_ci_profile() -> None:
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    for line in (
        "export MATRIXGEN_REQUIRE_VALIDATORS=1",
        "export MATRIXGEN_REQUIRE_MEGATRON=1",
        "export MATRIXGEN_HYPOTHESIS_PROFILE=ci",
    ):
        assert line in lines
    pytest_line = next(n for n, line in enumerate(lines) if "python -m pytest" in line)
    assert all(
        n < pytest_line
        for n, line in enumerate(lines)
        if line.startswith("export MATRIXGEN_REQUIRE") or "HYPOTHESIS_PROFILE" in line
    )


def test_an_absent_megatron_tree_skips_or_fails_under_the_switch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(conftest.MEGATRON_ENV, str(tmp_path / "absent"))
    monkeypatch.delenv(conftest.REQUIRE_MEGATRON_ENV, raising=False)
    assert conftest.megatron_recipes_path() is None
    with pytest.raises(pytest.skip.Exception, match="MATRIXGEN_REQUIRE_MEGATRON=1"):
        conftest.require_megatron()
    monkeypatch.setenv(conftest.REQUIRE_MEGATRON_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="absent"):
        conftest.megatron_recipes_path()
    with pytest.raises(pytest.fail.Exception, match="absent"):
        conftest.require_megatron()
    (tmp_path / "absent").mkdir()
    assert conftest.require_megatron() == tmp_path / "absent"


def _imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _requirement_name(requirement: str) -> str:
    for stop in "<>=!~[; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower().replace("_", "-")


def test_every_module_a_test_imports_is_a_declared_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = {_requirement_name(r) for r in project["dependencies"]}
    declared |= {_requirement_name(r) for r in extras["test"]}
    # The test extra names the project's own extras ("matrixgen-ci[postgres]").
    for requirement in extras["test"]:
        if _requirement_name(requirement) == project["name"] and "[" in requirement:
            for extra in requirement.split("[", 1)[1].split("]", 1)[0].split(","):
                declared |= {_requirement_name(r) for r in extras[extra.strip()]}
    owners = metadata.packages_distributions()
    imported: dict[str, str] = {}
    for path in sorted((REPO / "tests").glob("*.py")):
        for name in _imported_top_levels(path):
            local = (REPO / "tests" / f"{name}.py").exists()
            if local or name in sys.stdlib_module_names or name in ("matrixgen", "tests"):
                continue
            imported.setdefault(name, path.name)
    assert "markdown_it" in imported and "hypothesis" in imported  # the scan sees imports
    undeclared = {
        name: where
        for name, where in imported.items()
        if not {d.lower().replace("_", "-") for d in owners.get(name, [name])} & declared
    }
    assert undeclared == {}, f"imported by tests but not declared in pyproject: {undeclared}"


def test_code_docs_and_tests_cite_only_the_project_s_own_files() -> None:
    outside = re.compile(r"DESIGN(?:\.md)?\s*§|DESIGN\.md|§\s*\d")
    paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("matrixgen", "tests", "bench"):
        paths += sorted((REPO / folder).rglob("*.py"))
    citing = [
        str(p.relative_to(REPO))
        for p in paths
        if p.name != "test_suite_setup.py" and outside.search(p.read_text(encoding="utf-8"))
    ]
    assert citing == []


# --------------------------------------------------------------------------- the tiers


class _Item:
    """What the tiers read of a collected test."""

    def __init__(self, fixtures: tuple[str, ...] = (), params: dict | None = None, slow=False):
        self.nodeid = "tests/test_x.py::test_x"
        self.fixturenames = list(fixtures)
        if params is not None:
            self.callspec = type("CallSpec", (), {"params": params})()
        self.markers = {tiers.SLOW} if slow else set()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def add_marker(self, name: str) -> None:
        self.markers.add(name)


@pytest.mark.parametrize(
    ("item", "tier"),
    [
        (_Item(("tmp_path",)), tiers.FAST),
        (_Item(("tmp_path", "evidence_runs")), tiers.SLOW),
        (_Item(("triage_runs",)), tiers.SLOW),
        (_Item(("upstream",)), tiers.SLOW),
        (_Item(("db",), {"db": "sqlite"}), tiers.FAST),
        (_Item(("store_db",), {"store_db": "postgresql"}), tiers.SLOW),
        (_Item(slow=True), tiers.SLOW),
    ],
)
def test_a_test_is_slow_by_its_fixtures_and_marks_and_fast_otherwise(
    item: _Item, tier: str
) -> None:
    tiers.mark_tiers([item])  # type: ignore[list-item]
    assert item.markers == {tier}


def test_a_slow_resource_fails_a_test_not_marked_slow() -> None:
    fast, slow = _Item(), _Item(slow=True)
    tiers.enter(slow)  # type: ignore[arg-type]
    try:
        tiers.uses("validators")  # marked: nothing happens
        tiers.enter(fast)  # type: ignore[arg-type]
        try:
            with pytest.raises(pytest.fail.Exception, match=r"uses a real validator .* not marked"):
                tiers.uses("validators")
        finally:
            tiers.leave(fast)  # type: ignore[arg-type]
        tiers.uses("validators")  # back in the slow test
    finally:
        tiers.leave(slow)  # type: ignore[arg-type]


def test_this_test_runs_in_the_tier_its_marks_say(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker(tiers.FAST) is not None
    assert request.node.get_closest_marker(tiers.SLOW) is None
    with pytest.raises(pytest.fail.Exception, match="uses a real pytest run"):
        tiers.uses("pytest")


def test_every_tier_marker_is_declared() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert {tiers.SLOW, tiers.FAST} <= declared
    assert set(tiers.FIXTURE_RESOURCES.values()) <= set(tiers.RESOURCES)
