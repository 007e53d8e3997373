"""The emitter registry (matrixgen.emit.registry): every CI system has one
emitter, and no module outside the systems' homes (matrixgen/systems/) asks
which system a target is."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from matrixgen.emit.registry import EMITTERS, Emitter, emitter_for
from matrixgen.model.vocab import OTHER_TIERS_SYSTEM, System
from matrixgen.systems.ci import running_or_assumed

PACKAGE = Path(__file__).resolve().parents[1] / "matrixgen"

# Where naming a system is the point: its home (matrixgen/systems/<name>/).
ALLOWED = ("systems/",)
MEMBERS = {s.name for s in System}
VALUES = {s.value for s in System}


def system_references(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of each `System.<MEMBER>` and each comparison of a `.system`
    with a system's name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "System"
            and node.attr in MEMBERS
        ):
            found.append((node.lineno, f"System.{node.attr}"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr == "system" for s in sides)
            literal = [s.value for s in sides if isinstance(s, ast.Constant)]
            if named and any(v in VALUES for v in literal):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_system_is_named_outside_the_registry_the_vocabulary_and_its_commands() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(ALLOWED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"matrixgen/{rel}:{line}: {text}" for line, text in system_references(tree)]
    assert not offenders, (
        "ask the emitter registry (emit.registry.emitter_for) or the vocabulary "
        "(model.vocab.System) instead:\n" + "\n".join(offenders)
    )


def test_the_walk_finds_a_member_and_a_comparison_by_name() -> None:
    code = (
        "if target.system is System.GITLAB:\n    pass\n"
        "if 'github' == target.system:\n    pass\n"
        "if target.system is other:\n    pass\n"
    )
    found = system_references(ast.parse(code))
    assert sorted(line for line, _ in found) == [1, 3]


def test_every_system_has_one_emitter() -> None:
    assert set(EMITTERS) == set(System)
    for system in System:
        emitter = emitter_for(system)
        assert isinstance(emitter, Emitter), f"{system}: not an Emitter"
    # One file per target: two systems writing the same kind of name could not
    # be told apart by their files.
    suffixes = [e.suffix for e in EMITTERS.values()]
    assert len(set(suffixes)) == len(suffixes)
    assert all(s.startswith(".") and len(s) > 1 for s in suffixes)


def test_every_system_has_the_facts_the_engine_needs() -> None:
    for system in System:
        assert system.events, system
        assert system.job_variable, system
    # Exactly one system runs the tiers no other claims.
    assert [s for s in System if s.tiers is None] == [OTHER_TIERS_SYSTEM]


@given(
    st.dictionaries(
        st.sampled_from(["GITHUB_ACTIONS", "GITLAB_CI", "CI"]),
        st.sampled_from(["true", "false", "", "TRUE", "1"]),
    )
)
def test_the_system_a_job_runs_in_is_read_from_its_variables(environ: dict[str, str]) -> None:
    running = System(running_or_assumed(environ).name)
    # GitHub Actions and GitLab CI each set their variable to "true" in a job.
    if environ.get("GITHUB_ACTIONS") == "true":
        assert running is System.GITHUB
    else:
        assert running is System.GITLAB
