"""The validator harness works, and the real validators catch real mistakes.

These tests use hand-written files, independent of matrixgen's output, so a
failure here points at the harness or the installed tools
(``bash .ci/install-validators``), not at the generator.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

try:
    from . import realvalidators as rv
except ImportError:  # tests/ is not a package: pytest put it on sys.path
    import realvalidators as rv

# The slow tier (tests/tiers.py): every test here runs a real validator.
pytestmark = pytest.mark.slow


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


GOOD_WORKFLOW = textwrap.dedent(
    """
    name: tests
    on:
      push:
      pull_request:
    jobs:
      gen:
        runs-on: ubuntu-latest
        outputs:
          matrix: ${{ steps.matrix.outputs.matrix }}
        steps:
          - uses: actions/checkout@v4
          - id: matrix
            run: |
              echo 'matrix={"include":[{"python":"3.11","os":"ubuntu-latest"}]}' >> "$GITHUB_OUTPUT"
      test:
        needs: gen
        strategy:
          fail-fast: false
          matrix: ${{ fromJSON(needs.gen.outputs.matrix) }}
        runs-on: ${{ matrix.os }}
        steps:
          - uses: actions/checkout@v4
          - uses: actions/setup-python@v5
            with:
              python-version: ${{ matrix.python }}
          - run: python -m pytest
    """
).lstrip()

GOOD_CHILD_PIPELINE = textwrap.dedent(
    """
    stages: [test]
    variables:
      PIP_CACHE_DIR: "$CI_PROJECT_DIR/.cache/pip"
    test:
      stage: test
      image: python:3.11
      script:
        - python -m pytest
      parallel:
        matrix:
          - PYTHON: ["3.10", "3.11"]
            OS: [linux]
      retry:
        max: 2
        when: [runner_system_failure]
      rules:
        - if: $CI_PIPELINE_SOURCE == "parent_pipeline"
    """
).lstrip()


def test_installed_versions_match_pins():
    rv.require_check_jsonschema()
    rv.require_actionlint()
    rv.require_gitlab_ci_local()
    assert rv.installed_versions() == rv.pinned_versions()


# --------------------------------------------------------------------------
# GitHub Actions


def test_good_workflow_passes_check_jsonschema(tmp_path):
    rv.require_check_jsonschema()
    wf = write(tmp_path / "tests.yml", GOOD_WORKFLOW)
    result = rv.check_jsonschema_github(wf)
    assert result.ok, str(result)


def test_check_jsonschema_rejects_bad_workflow(tmp_path):
    rv.require_check_jsonschema()
    wf = write(
        tmp_path / "bad.yml",
        """
        on: push
        jobs:
          test:
            runs-on: ubuntu-latest
            timeout-minutes: soon
            steps:
              - run: echo hi
        """,
    )
    result = rv.check_jsonschema_github(wf)
    assert result.returncode == 1, str(result)
    assert "timeout-minutes" in result.output


def test_good_workflow_passes_actionlint(tmp_path):
    rv.require_actionlint()
    wf = write(tmp_path / ".github" / "workflows" / "tests.yml", GOOD_WORKFLOW)
    result = rv.actionlint(wf)
    assert result.ok, str(result)
    assert result.errors == []


BROKEN_WORKFLOWS = {
    # `needs` names a job that does not exist (and so does the expression)
    "unknown-needs.yml": (
        GOOD_WORKFLOW.replace("needs: gen", "needs: generate"),
        ['job "test" needs job "generate" which does not exist', 'property "gen" is not defined'],
    ),
    # needs.<job>.outputs for a job missing from `needs`
    "missing-needs.yml": (
        GOOD_WORKFLOW.replace("    needs: gen\n", ""),
        ['property "gen" is not defined'],
    ),
    # an output the generator job does not declare
    "unknown-output.yml": (
        GOOD_WORKFLOW.replace("needs.gen.outputs.matrix)", "needs.gen.outputs.matrices)"),
        ['property "matrices" is not defined'],
    ),
    # matrix.<key> that a literal matrix does not define
    "unknown-matrix-key.yml": (
        """
        on: push
        jobs:
          test:
            runs-on: ubuntu-latest
            strategy:
              matrix:
                python: ["3.10", "3.11"]
            steps:
              - run: echo "${{ matrix.pyversion }}"
        """,
        ['property "pyversion" is not defined'],
    ),
}


def test_actionlint_catches_broken_workflows(tmp_path):
    rv.require_actionlint()
    paths = {name: write(tmp_path / name, text) for name, (text, _) in BROKEN_WORKFLOWS.items()}
    result = rv.actionlint(*paths.values())  # one Node process for all files
    assert result.returncode == 1, str(result)
    for name, (_, expected) in BROKEN_WORKFLOWS.items():
        messages = [e.message for e in result.errors_for(paths[name])]
        for fragment in expected:
            assert any(fragment in m for m in messages), (name, fragment, messages)


def test_actionlint_reports_unreadable_input(tmp_path):
    rv.require_actionlint()
    result = rv.actionlint(tmp_path / "missing.yml")
    assert result.returncode == 2
    assert not result.ok
    assert "missing.yml" in result.stderr


# --------------------------------------------------------------------------
# GitLab CI


def test_good_child_pipeline_passes_check_jsonschema(tmp_path):
    rv.require_check_jsonschema()
    child = write(tmp_path / "child.yml", GOOD_CHILD_PIPELINE)
    result = rv.check_jsonschema_gitlab(child)
    assert result.ok, str(result)


@pytest.mark.parametrize(
    "old, new, complaint",
    [
        ("max: 2", "max: 5", "greater than the maximum of 2"),
        ("when: [runner_system_failure]", "when: [sometimes]", "sometimes"),
        ("  stage: test\n", "  stage: test\n  when: sometimes\n", "sometimes"),
        ('- PYTHON: ["3.10", "3.11"]', "- PYTHON: {minor: 11}", "matrix[0].PYTHON"),
    ],
    ids=["retry-max-5", "retry-when", "job-when", "matrix-mapping"],
)
def test_check_jsonschema_rejects_bad_child_pipeline(tmp_path, old, new, complaint):
    rv.require_check_jsonschema()
    assert old in GOOD_CHILD_PIPELINE
    child = write(tmp_path / "child.yml", GOOD_CHILD_PIPELINE.replace(old, new))
    result = rv.check_jsonschema_gitlab(child)
    assert result.returncode == 1, str(result)
    assert complaint in result.output, str(result)


# A parent pipeline whose generator job writes the child pipeline with a
# tracked Python script (the way matrixgen is run), and a trigger job that
# includes the artifact.
PARENT_PIPELINE = """
    stages: [generate, trigger]
    generate-child:
      stage: generate
      image: python:3.11
      script:
        - '"$FIXTURE_PYTHON" make_child.py child.yml'
      artifacts:
        paths: [child.yml]
    run-child:
      stage: trigger
      needs: [generate-child]
      trigger:
        include:
          - artifact: child.yml
            job: generate-child
        strategy: depend
"""

MAKE_CHILD = """
    import sys

    FAIL_ON = sys.argv[2] if len(sys.argv) > 2 else ""
    with open(sys.argv[1], "w") as f:
        f.write(
            "stages: [test]\\n"
            "test:\\n"
            "  stage: test\\n"
            "  image: python:3.11\\n"
            "  script:\\n"
            "    - echo \\"child-says PYTHON=$PYTHON OS=$OS SOURCE=$CI_PIPELINE_SOURCE\\"\\n"
            f"    - test \\"$PYTHON\\" != \\"{FAIL_ON}\\"\\n"
            "  parallel:\\n"
            "    matrix:\\n"
            "      - PYTHON: ['3.10', '3.11']\\n"
            "        OS: [linux]\\n"
        )
"""


def make_parent_repo(repo: Path, *, fail_on: str = "") -> Path:
    parent = PARENT_PIPELINE
    if fail_on:
        parent = parent.replace("child.yml'", f"child.yml {fail_on}'")
    write(repo / ".gitlab-ci.yml", parent)
    write(repo / "make_child.py", MAKE_CHILD)
    return repo


def test_gitlab_ci_local_runs_artifact_child_pipeline(tmp_path):
    rv.require_gitlab_ci_local()
    repo = make_parent_repo(tmp_path / "repo")
    result = rv.gitlab_ci_local_run(repo, env={"FIXTURE_PYTHON": sys.executable})
    assert result.ok, str(result)
    for python in ("3.10", "3.11"):
        assert f"child-says PYTHON={python} OS=linux SOURCE=parent_pipeline" in result.stdout, str(
            result
        )
        assert f"[run-child] -> test: [{python},linux]" in result.passed_jobs, str(result)
    assert {"generate-child", "run-child"} <= set(result.passed_jobs), str(result)
    assert result.failed_jobs == []
    # the child file travelled as an artifact; jobs ran in their own copies
    assert not (repo / "child.yml").exists()
    assert (repo / ".gitlab-ci-local" / "artifacts" / "generate-child" / "child.yml").is_file()
    # init_git_repo set up everything gitlab-ci-local looks for
    assert "Using fallback" not in result.output, str(result)


def test_gitlab_ci_local_failed_child_job_is_reported(tmp_path):
    rv.require_gitlab_ci_local()
    repo = make_parent_repo(tmp_path / "repo", fail_on="3.11")
    result = rv.gitlab_ci_local_run(repo, env={"FIXTURE_PYTHON": sys.executable})
    # gitlab-ci-local exits 0 although a child job failed ...
    assert result.returncode == 0, str(result)
    # ... so the harness reads the FAIL lines
    assert not result.ok
    assert result.failed_jobs == ["test: [3.11,linux]"], str(result)
    assert "[run-child] -> test: [3.10,linux]" in result.passed_jobs


def test_gitlab_ci_local_rejects_invalid_child_pipeline(tmp_path):
    rv.require_gitlab_ci_local()
    repo = tmp_path / "repo"
    write(
        repo / ".gitlab-ci.yml",
        """
        generate-child:
          script:
            - printf 'test:\\n  script: [echo hi]\\n  retry: {max: 5}\\n' > child.yml
          artifacts:
            paths: [child.yml]
        run-child:
          needs: [generate-child]
          trigger:
            include:
              - artifact: child.yml
                job: generate-child
        """,
    )
    result = rv.gitlab_ci_local_run(repo)
    assert result.returncode != 0, str(result)
    assert not result.ok
    assert "retry" in result.output, str(result)
