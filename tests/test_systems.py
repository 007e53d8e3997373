"""One home per CI system (matrixgen/systems/): nothing outside it names a
system or reads a CI variable, the vocabulary is the registry's, the running
CI's variables are read in one place, and a third system is a package and a
line in the registry."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.model.vocab import OTHER_TIERS_SYSTEM, System
from matrixgen.systems import HOMES, assumed_first, home_of, names
from matrixgen.systems.ci import ci_value, running, variables_of
from matrixgen.systems.home import VARIABLE_ROLES
from tests.schema_fixtures import copy_checkout
from tests.systems_fixtures import (
    add_toy_system,
    names_outside_systems,
    system_names_in,
    toy_system_reaches,
)

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "matrixgen"


def test_no_system_name_or_ci_variable_outside_systems() -> None:
    found = names_outside_systems(PACKAGE)
    assert not found, (
        "a system's name or CI variable outside matrixgen/systems/: ask the registry "
        "(systems.HOMES, model.vocab.System) or systems.ci instead, or move it into "
        "the system's home:\n" + "\n".join(found)
    )


def test_the_scan_sees_each_way_of_naming_a_system() -> None:
    source = (
        '"""A docstring may say github and $GITHUB_OUTPUT: prose."""\n'
        "import matrixgen.systems.gitlab.limits\n"
        "from matrixgen.systems.github import emitter\n"
        "from matrixgen.systems import gitlab\n"
        "from matrixgen.systems.ci import ci_value\n"
        'a = "github"\n'
        'b = "GitLab"\n'
        'c = "--github-output"\n'
        'd = os.environ.get("CI_COMMIT_SHA")\n'
        'e = f"run {x} on gitlab"\n'
        "f = System.GITHUB\n"
        'g = "RUNNER_TEMP"\n'
        'h = "see https://github.com/o/r/issues/1 (GITHUB_TOKEN)"\n'
        'i = "mr-github-slim"\n'
        'j = "a GitHub matrix"\n'
    )
    lines = [line for line, _ in system_names_in(source)]
    assert lines == [2, 3, 4, 6, 7, 8, 9, 10, 11, 12]


@given(st.sampled_from(sorted(VARIABLE_ROLES)), st.dictionaries(
    st.sampled_from(sorted({v for h in HOMES for v in (h.job_variable, *h.variables.values())})),
    st.sampled_from(["", " ", "true", "x", " y "]),
))  # fmt: skip
@example("commit", {"CI_COMMIT_SHA": "a", "GITHUB_SHA": "b", "GITHUB_ACTIONS": "true"})
@example("commit", {"CI_COMMIT_SHA": "a", "GITHUB_SHA": "b"})
@example("ref", {"CI_COMMIT_REF_NAME": " ", "GITHUB_REF_NAME": "main"})
def test_the_running_ci_s_variable_wins_then_the_assumed_order(
    role: str, environ: dict[str, str]
) -> None:
    value = ci_value(role, environ)
    asked = variables_of(role)
    set_values = [environ[v].strip() for v in asked if environ.get(v, "").strip()]
    here = running(environ)
    own = here.variables.get(role) if here is not None else None
    if own is not None and environ.get(own, "").strip():
        assert value == environ[own].strip()  # the running system's own wins
    elif here is None:
        assert value == (set_values[0] if set_values else None)  # the assumed order
    else:
        assert value in {*set_values, None} and (value is None) == (not set_values)


def test_outside_ci_the_system_assumed_there_is_asked_first() -> None:
    assert assumed_first()[0].name == OTHER_TIERS_SYSTEM.value
    assert variables_of("commit")[0] == assumed_first()[0].variables["commit"]
    assert running({}) is None


def test_the_vocabulary_is_the_registry() -> None:
    assert [s.value for s in System] == list(names())
    for system in System:
        home = home_of(system.value)
        assert system.home is home
        assert (system.events, system.job_variable, system.tiers) == (
            home.events,
            home.job_variable,
            home.tiers,
        )


def test_every_part_a_home_declares_is_a_module_of_it() -> None:
    for home in HOMES:
        for part in home.parts:
            module = home.part(part)
            assert module is not None
            path = PACKAGE.parent / (module.replace(".", "/") + ".py")
            assert path.is_file(), f"{home.name} declares {part}, but {path} is missing"


def test_a_third_system_is_a_package_and_a_line_in_the_registry(tmp_path: Path) -> None:
    """The toy system (tests/systems_fixtures.py): its package and its registry
    line are the only files edited by hand; the rest are written again by
    `python -m matrixgen.documents` and `python -m matrixgen.cli.reference`; and
    it is then in the vocabulary, the config's schema, the emitter registry and
    the CLI, and emits its target's jobs with its own setting."""
    checkout = copy_checkout(tmp_path / "checkout")
    by_hand, written = add_toy_system(checkout)
    assert by_hand == ["matrixgen/systems/__init__.py", "matrixgen/systems/toy/"]
    assert set(written) <= {
        "docs/cli.md",
        "schema/config.schema.json",
        "schema/quarantine.schema.json",
    }
    reached = toy_system_reaches(checkout, tmp_path / "tree")
    stderr = reached.pop("stderr")
    assert all(reached.values()), (reached, stderr)
