"""The pytest plugin (matrixgen.results.pytest_plugin) on real pytest runs.

Most tests run `python -m pytest` in a subprocess on a small project in a
temporary folder, with nothing but the installed `pytest11` entry point to load
the plugin: what a test container with matrixgen installed does. The property
test runs pytest in-process (pytester) to try many node-id sets quickly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.quarantine import jobenv
from matrixgen.quarantine import model as quarantine_model
from matrixgen.results import pytest_plugin
from matrixgen.results.junit import Outcome, parse_report
from matrixgen.util.nodeid import base_id
from tests import tiers

pytest_plugins = ("pytester",)

TEST_FILE = "tests/unit/test_things.py"
TESTS = """
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2, "the muted failure"

def test_errors(broken):
    pass

def test_to_deselect():
    raise SystemExit("a deselected test ran")

@pytest.fixture
def broken():
    raise RuntimeError("fixture blew up")

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1

class TestGroup:
    def test_in_class(self):
        pass
"""

IDENTITY = {
    "MATRIXGEN_SYSTEM": "gitlab",
    "MATRIXGEN_SCOPE": "unit-tests",
    "MATRIXGEN_PLATFORM": "dgx_h100",
    "MATRIXGEN_ENVIRONMENT": "dev",
    "MATRIXGEN_MODEL": "unit-tests",
    "MATRIXGEN_TEST_CASE": "tests/unit/test_things.py",
    "MATRIXGEN_TAG": "latest",
}


def entry(
    entry_id: str,
    action: str,
    node_ids: list[str],
    *,
    match: str = "{model: unit-tests, test_case: tests/unit/test_things.py}",
    where: str | None = None,
    expires: str = "2099-01-01",
) -> str:
    lines = [
        f"  - id: {entry_id}",
        f"    tracker: https://github.com/o/r/issues/{len(entry_id)}",
        "    kind: flaky",
        f"    action: {action}",
        f"    match: {match}",
        *([f"    where: {where}"] if where else []),
        "    node_ids:",
        *(f"      - {n!r}" for n in node_ids),
        "    owner: team",
        f'    expires: "{expires}"',
        "    reason: flaky in CI",
    ]
    return "\n".join(lines)


def project(tmp_path: Path, *entries: str, tests: str = TESTS) -> Path:
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / TEST_FILE).write_text(textwrap.dedent(tests))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    body = "\n".join(entries) if entries else "  []"
    if entries:
        (recipes / "quarantine.yaml").write_text("entries:\n" + body + "\n")
    else:
        (recipes / "quarantine.yaml").write_text("entries: []\n")
    return tmp_path


def run_pytest(
    root: Path, env: dict[str, str] | None, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`python -m pytest` in `root`, the plugin loaded only by its entry point;
    the environment holds none of this process's MATRIXGEN_* or PYTEST_* values."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MATRIXGEN_", "PYTEST_", "GITHUB_ACTIONS"))
    }
    tiers.uses("pytest")
    clean.update(env or {})
    junit = root / "report.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:hypothesispytest",
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            *args,
        ],
        cwd=root,
        env=clean,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done, junit


def quarantined(root: Path) -> dict[str, str]:
    return {**IDENTITY, "MATRIXGEN_QUARANTINE": "recipes/quarantine.yaml"}


def outcomes(junit: Path) -> dict[str, Outcome]:
    report = parse_report(junit.read_bytes(), str(junit))
    return {t.node_id: t.outcome for t in report.testcases}


# --------------------------------------------------------------------------- loading


def test_the_entry_point_is_installed_and_names_the_plugin_module() -> None:
    found = [e for e in entry_points(group="pytest11") if e.value == pytest_plugin.__name__]
    assert [e.name for e in found] == ["matrixgen-quarantine"]
    assert found[0].load() is pytest_plugin


def test_the_variable_name_is_the_one_jobenv_defines() -> None:
    # The plugin spells it out to import nothing when it is unset.
    assert pytest_plugin.QUARANTINE_VARIABLE == jobenv.QUARANTINE_VARIABLE


@pytest.mark.slow
def test_without_the_variable_the_plugin_does_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, entry("m", "deselect", [f"{TEST_FILE}::test_to_deselect"]))
    done, junit = run_pytest(root, {**IDENTITY}, "-q")
    # The run is pytest's own: the deselected test runs (and stops the run).
    assert "a deselected test ran" in done.stdout + done.stderr
    assert "matrixgen quarantine" not in done.stdout
    assert done.returncode == 1
    assert outcomes(junit)[f"{TEST_FILE}::test_to_deselect"] is Outcome.FAILED


@pytest.mark.slow
def test_without_the_variable_no_matrixgen_module_but_the_plugin_is_imported(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    probe = root / "tests" / "unit" / "test_probe.py"
    probe.write_text(
        "import sys\n"
        "def test_probe():\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('matrixgen'))\n"
        "    assert loaded == ['matrixgen', 'matrixgen.results',"
        " 'matrixgen.results.pytest_plugin'], loaded\n"
    )
    done, _ = run_pytest(root, None, "-q", str(probe))
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- deselect


@pytest.mark.slow
def test_a_deselected_node_does_not_run(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect", f"{TEST_FILE}::test_param"]),
    )
    done, junit = run_pytest(root, quarantined(root), TEST_FILE)
    out = done.stdout
    assert "a deselected test ran" not in out + done.stderr
    assert "3 deselected" in out  # test_to_deselect and both test_param children
    found = outcomes(junit)
    assert f"{TEST_FILE}::test_to_deselect" not in found
    assert not any("test_param" in n for n in found)
    assert found[f"{TEST_FILE}::test_passes"] is Outcome.PASSED
    assert "3 test(s) deselected by quarantine entries" in out


@pytest.mark.parametrize(
    ("node_id", "base"),
    [
        ("a.py::test_x[1]", "a.py::test_x"),
        ("tests/d[x]/a.py::test_x[1]", "tests/d[x]/a.py::test_x"),  # brackets in a folder
        ("a.py::K::test_x[a::b[c]]", "a.py::K::test_x"),  # anything in a parameter id
        ("a.py::test_x", None),
        ("tests/d[x]/a.py", None),
        ("a.py::test_x[1]y", None),
    ],
)
def test_a_parametrised_id_names_its_function(node_id: str, base: str | None) -> None:
    assert base_id(node_id) == base


@pytest.mark.slow
def test_deselect_is_exact_never_a_prefix(tmp_path: Path) -> None:
    # `tests/unit` (a folder), `...::test_pass` (a prefix of test_passes) and the
    # class alone match nothing: no test leaves, and each is reported.
    nodes = [f"{TEST_FILE}::test_pass", f"{TEST_FILE}::TestGroup"]
    root = project(tmp_path / "prefixes", entry("prefixes", "deselect", nodes))
    done, junit = run_pytest(root, quarantined(root), "-q")
    found = outcomes(junit)
    assert f"{TEST_FILE}::test_passes" in found
    assert f"{TEST_FILE}::TestGroup::test_in_class" in found
    assert "deselected" not in done.stdout.splitlines()[-1]
    for node in nodes:
        assert f"entry prefixes (deselect): {node} matches no collected test" in done.stdout
        assert f"names {node}, which matches no collected test" in done.stdout  # the warning
    # A bare path or folder is no node id at all: the quarantine file is refused
    # before a test runs (pytest's own --deselect would take it as a prefix).
    folder = project(tmp_path / "folder", entry("folder", "deselect", ["tests/unit"]))
    done, _ = run_pytest(folder, quarantined(folder), "-q")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert '"tests/unit" is not a pytest node id' in done.stdout + done.stderr


# --------------------------------------------------------------------------- mute


@pytest.mark.slow
def test_muted_failures_leave_the_run_green_and_are_marked_in_the_junit_xml(
    tmp_path: Path,
) -> None:
    muted = [f"{TEST_FILE}::test_fails", f"{TEST_FILE}::test_errors", f"{TEST_FILE}::test_param"]
    root = project(
        tmp_path,
        entry("muted-ones", "mute", muted),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-rA")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    # Reported, not hidden: each muted failure, with its entry and message.
    assert "MUTED tests/unit/test_things.py::test_fails (entry muted-ones, " in out
    assert "the muted failure" in out
    assert "MUTED tests/unit/test_things.py::test_errors" in out
    assert "fixture blew up" in out
    assert "MUTED tests/unit/test_things.py::test_param[2]" in out
    assert "3 muted test(s) failed; the run does not fail for them" in out
    assert "3 muted" in out.splitlines()[-1] and "failed" not in out.splitlines()[-1]
    # The JUnit XML keeps the failure and marks the testcase quarantined.
    text = junit.read_text()
    assert text.count('<property name="quarantined" value="muted-ones"') == 4  # param[1] too
    assert '<property name="quarantine_action" value="mute"' in text
    assert 'message="AssertionError: the muted failure' in text
    found = outcomes(junit)
    assert found[f"{TEST_FILE}::test_fails"] is Outcome.MUTED
    assert found[f"{TEST_FILE}::test_errors"] is Outcome.MUTED
    assert found[f"{TEST_FILE}::test_param[2]"] is Outcome.MUTED
    assert found[f"{TEST_FILE}::test_param[1]"] is Outcome.PASSED  # a muted pass passes
    assert found[f"{TEST_FILE}::test_passes"] is Outcome.PASSED


@pytest.mark.slow
def test_a_failure_that_is_not_muted_still_fails_the_run(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("only-fails", "mute", [f"{TEST_FILE}::test_fails"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-q")
    assert done.returncode == 1
    found = outcomes(junit)
    assert found[f"{TEST_FILE}::test_fails"] is Outcome.MUTED
    assert found[f"{TEST_FILE}::test_errors"] is Outcome.ERROR
    assert found[f"{TEST_FILE}::test_param[2]"] is Outcome.FAILED


@pytest.mark.slow
def test_maxfail_does_not_count_muted_failures(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("m", "mute", [f"{TEST_FILE}::test_fails", f"{TEST_FILE}::test_errors"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-x", "-q")
    found = outcomes(junit)
    # -x stops at the first failure that counts (test_param[2]), not before.
    assert f"{TEST_FILE}::test_param[2]" in found
    assert found[f"{TEST_FILE}::test_param[2]"] is Outcome.FAILED
    assert f"{TEST_FILE}::TestGroup::test_in_class" not in found
    assert done.returncode == 1


@pytest.mark.slow
def test_a_muted_passing_node_passes(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("m", "mute", [f"{TEST_FILE}::test_passes"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_passes")
    assert done.returncode == 0, done.stdout
    assert outcomes(junit) == {f"{TEST_FILE}::test_passes": Outcome.PASSED}
    assert "1 muted test(s) passed" in done.stdout
    assert '<property name="quarantined" value="m"' in junit.read_text()


@pytest.mark.slow
def test_a_node_id_that_matches_nothing_is_reported(tmp_path: Path) -> None:
    missing = f"{TEST_FILE}::test_renamed_away"
    root = project(
        tmp_path,
        entry("stale", "mute", [missing, f"{TEST_FILE}::test_passes"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    done, _ = run_pytest(root, quarantined(root), "-q", "-rw")
    assert f"entry stale (mute): {missing} matches no collected test" in done.stdout
    assert "PytestWarning: matrixgen quarantine: entry stale (mute) names" in done.stdout
    # The warning points at the entry in the quarantine file.
    assert "recipes/quarantine.yaml:2" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", [("-W", "error"), ("-o", "filterwarnings=error")])
def test_a_stale_node_id_under_warnings_as_errors_is_reported_never_fatal(
    tmp_path: Path, mode: tuple[str, str]
) -> None:
    """Under `filterwarnings = error` the warning for a node id that names no
    test would stop pytest at collection (INTERNALERROR, no test run)."""
    missing = f"{TEST_FILE}::test_renamed_away"
    root = project(
        tmp_path,
        entry("stale", "mute", [missing, f"{TEST_FILE}::test_fails"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect"]),
    )
    chosen = [f"{TEST_FILE}::{n}" for n in ("test_passes", "test_fails", "test_to_deselect")]
    done, junit = run_pytest(root, quarantined(root), *mode, *chosen)
    out = done.stdout + done.stderr
    assert "INTERNALERROR" not in out
    assert done.returncode == 0, out
    assert f"entry stale (mute): {missing} matches no collected test" in done.stdout
    assert f"names {missing}, which matches no collected test" in done.stdout  # the warning
    assert outcomes(junit) == {
        f"{TEST_FILE}::test_passes": Outcome.PASSED,
        f"{TEST_FILE}::test_fails": Outcome.MUTED,
    }


@pytest.mark.slow
def test_under_xdist_the_controller_says_what_the_workers_deselected_and_muted(
    tmp_path: Path,
) -> None:
    pytest.importorskip("xdist")
    missing = f"{TEST_FILE}::test_renamed_away"
    root = project(
        tmp_path,
        entry("m", "mute", [f"{TEST_FILE}::test_fails", missing]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect", f"{TEST_FILE}::test_param"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-n", "2", "-p", "xdist", "-rA")
    out = done.stdout
    assert "- matrixgen quarantine -" in out, out
    section = out.split("- matrixgen quarantine -", 1)[1]
    # Each worker collected every test: each deselected test counted once.
    assert "3 test(s) deselected by quarantine entries" in section
    assert f"entry m (mute): {missing} matches no collected test" in section
    assert section.count("matches no collected test") == 1
    assert "MUTED tests/unit/test_things.py::test_fails (entry m, " in section
    assert "a deselected test ran" not in out + done.stderr
    found = outcomes(junit)
    assert found[f"{TEST_FILE}::test_fails"] is Outcome.MUTED
    assert f"{TEST_FILE}::test_to_deselect" not in found
    assert found[f"{TEST_FILE}::test_errors"] is Outcome.ERROR  # not muted: the run fails
    assert done.returncode == 1


# --------------------------------------------------------------------------- which entries


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "match", "where"),
    [
        ("platform", "{test_case: tests/unit/test_things.py, platforms: [dgx_gb200]}", None),
        ("environment", "{test_case: tests/unit/test_things.py, environments: [lts]}", None),
        ("tag", "{test_case: tests/unit/test_things.py, tags: [legacy]}", None),
        ("model", "{test_case: tests/unit/test_things.py, model: gpt}", None),
        ("test case", "{test_case: tests/unit/test_other.py}", None),
        ("scope", "{test_case: tests/unit/test_things.py}", "[gitlab/mr]"),
        ("system", "{test_case: tests/unit/test_things.py}", "[github]"),
    ],
)
def test_an_entry_for_another_job_or_place_does_not_apply(
    tmp_path: Path, case: str, match: str, where: str | None
) -> None:
    root = project(
        tmp_path,
        entry(
            "elsewhere", "deselect", [f"{TEST_FILE}::test_to_deselect"], match=match, where=where
        ),
    )
    done, _ = run_pytest(root, quarantined(root))
    assert "a deselected test ran" in done.stdout + done.stderr, case
    assert "no node-level entry applies to this job" in done.stdout


@pytest.mark.slow
def test_the_same_entry_applies_where_it_names_the_job(tmp_path: Path) -> None:
    # The counterpart of the test above: the same fields, matching.
    match = (
        "{model: unit-tests, test_case: 'tests/unit/*.py', platforms: [dgx_h100], "
        "environments: [dev], tags: [latest]}"
    )
    root = project(
        tmp_path,
        entry(
            "here", "deselect", [f"{TEST_FILE}::test_to_deselect"], match=match, where="[gitlab]"
        ),
    )
    done, _ = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_to_deselect")
    assert "a deselected test ran" not in done.stdout + done.stderr
    assert "1 deselected" in done.stdout


@pytest.mark.slow
def test_the_system_defaults_to_github_in_github_actions(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("gh", "deselect", [f"{TEST_FILE}::test_to_deselect"], where="[github/unit-tests]"),
    )
    env = {k: v for k, v in quarantined(root).items() if k != "MATRIXGEN_SYSTEM"}
    done, _ = run_pytest(root, {**env, "GITHUB_ACTIONS": "true"}, "-q", TEST_FILE)
    assert "1 deselected" in done.stdout
    done, _ = run_pytest(root, env, "-q", f"{TEST_FILE}::test_to_deselect")
    assert "a deselected test ran" in done.stdout + done.stderr  # gitlab: not there


@pytest.mark.slow
def test_an_expired_entry_no_longer_applies_and_says_so(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        entry("old", "deselect", [f"{TEST_FILE}::test_to_deselect"], expires="2026-11-01"),
    )
    env = {**quarantined(root), "MATRIXGEN_TODAY": "2026-12-01"}
    done, _ = run_pytest(root, env, "-q", f"{TEST_FILE}::test_to_deselect")
    assert "a deselected test ran" in done.stdout + done.stderr
    assert "entry old (deselect) expired on 2026-11-01: no longer applied" in done.stdout
    env["MATRIXGEN_TODAY"] = "2026-10-31"
    done, _ = run_pytest(root, env, "-q", f"{TEST_FILE}::test_to_deselect")
    assert "1 deselected" in done.stdout


@pytest.mark.slow
def test_an_exact_bucket_name_that_looks_like_a_glob_matches_only_itself(tmp_path: Path) -> None:
    # Megatron-LM names buckets like globs; with the tree beside the quarantine
    # file, `tests/unit/*.py` (a bucket of its own) is not a pattern.
    root = project(
        tmp_path,
        entry(
            "bucket",
            "deselect",
            [f"{TEST_FILE}::test_to_deselect"],
            match="{test_case: 'tests/unit/*.py'}",
        ),
    )
    (root / "recipes" / "unit.yaml").write_text(
        textwrap.dedent(
            """\
            type: basic
            format_version: 1
            maintainers: [team]
            spec: {name: "{test_case}", model: unit-tests, build: x, script: "true"}
            products:
              - test_case: ["tests/unit/*.py"]
                products: [{environment: [dev], scope: [unit-tests], platforms: [dgx_h100]}]
              - test_case: [tests/unit/test_things.py]
                products: [{environment: [dev], scope: [unit-tests], platforms: [dgx_h100]}]
            """
        )
    )
    done, _ = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_to_deselect")
    assert "a deselected test ran" in done.stdout + done.stderr, done.stdout
    (root / "recipes" / "unit.yaml").unlink()  # no tree: the name is read as a glob
    done, _ = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_to_deselect")
    assert "1 deselected" in done.stdout


# --------------------------------------------------------------------------- bad input


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing-file", "MATRIXGEN_QUARANTINE=recipes/nothere.yaml: no such file"),
        ("directory", "MATRIXGEN_QUARANTINE=recipes: it is a directory, not a regular file"),
        ("bad-yaml", "in the quarantine file: recipes/quarantine.yaml:2:1: error: while parsing"),
        ("bad-action", "'silence' is not one of ['skip', 'allow-failure', 'deselect', 'mute']"),
        ("no-node-ids", "action mute needs node_ids"),
        ("no-identity", "MATRIXGEN_PLATFORM, MATRIXGEN_MODEL not set"),
        ("bad-system", "MATRIXGEN_SYSTEM='jenkins': expected github or gitlab"),
    ],
)
def test_bad_input_is_a_usage_error_not_a_traceback(
    tmp_path: Path, setup: str, expected: str
) -> None:
    root = project(tmp_path, entry("m", "mute", [f"{TEST_FILE}::test_fails"]))
    env = quarantined(root)
    qfile = root / "recipes" / "quarantine.yaml"
    if setup == "missing-file":
        env["MATRIXGEN_QUARANTINE"] = "recipes/nothere.yaml"
    elif setup == "directory":
        env["MATRIXGEN_QUARANTINE"] = "recipes"
    elif setup == "bad-yaml":
        qfile.write_text("entries: [\n")
    elif setup == "bad-action":
        qfile.write_text(qfile.read_text().replace("action: mute", "action: silence"))
    elif setup == "no-node-ids":
        qfile.write_text(
            qfile.read_text().split("    node_ids:")[0] + "    owner: x\n    reason: y\n"
        )
    elif setup == "no-identity":
        del env["MATRIXGEN_PLATFORM"], env["MATRIXGEN_MODEL"]
    elif setup == "bad-system":
        env["MATRIXGEN_SYSTEM"] = "jenkins"
    done, _ = run_pytest(root, env, "-q")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert expected in done.stderr, done.stderr
    assert done.stderr.startswith("ERROR: matrixgen quarantine: ")


_ENTRY_IDS = st.lists(st.from_regex(jobenv.ENTRY_ID, fullmatch=True), min_size=1, max_size=3)
_SCHEMES = st.sampled_from(["https", "http", "HTTPS", "Https", "hTtP"])
_HOSTS = st.sampled_from(["github.com", "GITHUB.COM", "GitHub.com", "gitlab.example"])
_PATHS = st.text(st.characters(codec="ascii", categories=["L", "N", "P", "S"]), max_size=20)
_TRACKERS = st.lists(
    st.builds(lambda s, h, p: f"{s}://{h}/{p}", _SCHEMES, _HOSTS, _PATHS)
    | st.integers(0, 10**9).map(lambda n: f"#{n}"),
    min_size=1,
    max_size=3,
)


@given(ids=_ENTRY_IDS, trackers=_TRACKERS)
@example(ids=["ut-flaky"], trackers=["HTTPS://GITHUB.COM/o/r/issues/1"])  # upper-case scheme
@example(ids=["a", "b.c+d"], trackers=["#7", "Https://GitHub.com/o/r/issues/8"])
@example(ids=["x"], trackers=["https://github.com/o/r/issues/1?a=b,c"])  # a comma inside
def test_every_label_an_emitter_writes_is_one_the_plugin_knows(
    ids: list[str], trackers: list[str]
) -> None:
    """The GitLab emitter writes a quarantined job's label into
    MATRIXGEN_QUARANTINE; the plugin must know it for a label, or the job stops
    with a usage error (exit 4) and its tests never run. Every tracker the
    quarantine file accepts (`resolve_tracker`, or "#N") and every entry id the
    schema allows round-trips through the emitter's own output."""
    import yaml

    from matrixgen.model.jobs import QuarantineMark
    from matrixgen.quarantine.trackers import ISSUE_NUMBER, resolve_tracker
    from matrixgen.systems.gitlab.emitter import emit_gitlab
    from matrixgen.util.patterns import whole
    from tests.emit_fixtures import bare_settings, make_job

    trackers = [
        t for t in trackers if whole(ISSUE_NUMBER, t) or resolve_tracker(t, None) is not None
    ]
    if not trackers:
        return
    mark = QuarantineMark(
        id=", ".join(ids), tracker=", ".join(trackers), action="allow-failure", kind="flaky"
    )
    text = emit_gitlab([make_job(name="job", quarantine=mark)], bare_settings()).text
    value = yaml.safe_load(text)["job"]["variables"]["MATRIXGEN_QUARANTINE"]
    value = value["value"] if isinstance(value, dict) else value  # written unexpanded
    assert jobenv.is_entry_label(value), value
    assert jobenv.load_job_quarantine({"MATRIXGEN_QUARANTINE": value}) is None


def test_the_label_rule_holds_the_schemas_entry_id_pattern() -> None:
    import json

    schema = Path(__file__).resolve().parents[1] / "schema" / "quarantine.schema.json"
    pattern = json.loads(schema.read_text())["$defs"]["entry"]["properties"]["id"]["pattern"]
    assert pattern == f"^{jobenv.ENTRY_ID}$(?!\\n)"


@pytest.mark.slow
def test_an_entry_label_from_an_older_emitter_is_not_read_as_a_file(tmp_path: Path) -> None:
    # matrixgen's GitLab jobs carry `<entry id> <tracker>` in the variable when
    # their launcher gets the node ids; such a job must still run.
    root = project(tmp_path)
    env = {"MATRIXGEN_QUARANTINE": "ut-flaky https://github.com/o/r/issues/7958"}
    done, _ = run_pytest(root, env, "-q", f"{TEST_FILE}::test_passes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert jobenv.is_entry_label("a, b #1, https://x.example/i/2")
    assert not jobenv.is_entry_label("recipes/quarantine.yaml")
    assert not jobenv.is_entry_label("ut-flaky")


# --------------------------------------------------------------------------- property


# Test names, with the dangerous ones forced in: each a prefix of another.
_NAME = st.sampled_from(["test_x", "test_x_after_restart", "test_xy", "test_x_"]) | st.from_regex(
    r"test_[a-z]{1,6}", fullmatch=True
)


@st.composite
def _deselect_cases(
    draw: st.DrawFn,
) -> tuple[dict[str, int], list[str], list[str], tuple[str, ...]]:
    """(test name -> parametrised children (0: none), names deselected, node ids
    that name no test: absent names and prefixes of collected ones, the
    warnings' treatment)."""
    names = draw(st.lists(_NAME, min_size=1, max_size=8, unique=True))
    params = {n: draw(st.integers(0, 2)) for n in names}
    chosen = draw(st.lists(st.sampled_from(names), unique=True))
    strays = draw(
        st.lists(
            st.sampled_from(["nothing", "test_x", *(n[:-1] for n in names)]),
            unique=True,
            min_size=0 if chosen else 1,
        )
    )
    strays = [n for n in strays if n not in names] or ([] if chosen else ["nothing"])
    return params, chosen, strays, draw(st.sampled_from(WARNING_MODES))


# How the run treats warnings: pytest's default, every warning an error (the
# option and the ini setting), warnings ignored.
WARNING_MODES: list[tuple[str, ...]] = [
    (),
    ("-W", "error"),
    ("-o", "filterwarnings=error"),
    ("-W", "ignore"),
]


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_deselect_cases())
# An entry for test_x leaves test_x_after_restart, test_xy and test_x_ running
# (pytest's --deselect, a prefix match, would drop them all).
@example(case=({"test_x": 0, "test_x_after_restart": 0, "test_xy": 1}, ["test_x"], [], ()))
# Its parametrised children go with it; a name's prefix takes nothing.
@example(case=({"test_x": 2, "test_x_after_restart": 2}, ["test_x"], [], ()))
@example(case=({"test_x_after_restart": 0, "test_xy": 0}, [], ["test_x"], ()))
# A stale node id is reported, never an error that stops the run: under -W
# error and filterwarnings = error too.
@example(case=({"test_a": 0}, [], ["nothing"], ("-W", "error")))
@example(case=({"test_a": 1}, ["test_a"], ["test_"], ("-o", "filterwarnings=error")))
def test_the_tests_run_are_the_collected_minus_the_deselected(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[dict[str, int], list[str], list[str], tuple[str, ...]],
) -> None:
    params, chosen_names, stray_names, warning_mode = case
    source = ["import pytest"]
    collected: list[str] = []
    for name, count in params.items():
        if count:
            source += [f"@pytest.mark.parametrize('i', range({count}))", f"def {name}(i): pass"]
            collected += [f"test_gen.py::{name}[{i}]" for i in range(count)]
        else:
            source.append(f"def {name}(): pass")
            collected.append(f"test_gen.py::{name}")
    chosen = [f"test_gen.py::{n}" for n in chosen_names]
    strays = [f"test_gen.py::{n}" for n in stray_names]
    (pytester.path / "test_gen.py").write_text("\n".join(source) + "\n")
    (pytester.path / "q.yaml").write_text(
        "entries:\n" + entry("d", "deselect", [*chosen, *strays], match="{test_case: b}") + "\n"
    )
    for key, value in {**IDENTITY, "MATRIXGEN_TEST_CASE": "b"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MATRIXGEN_QUARANTINE", str(pytester.path / "q.yaml"))
    # What the plugin imports once it has work is loaded here already: pytester
    # drops the modules a run imports, and PyYAML's must stay one set.
    assert quarantine_model.parse_quarantine
    result = pytester.inline_run("-p", "no:cacheprovider", *warning_mode, "test_gen.py")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), warning_mode
    ran = sorted(
        r.nodeid for r in result.getreports("pytest_runtest_logreport") if r.when == "call"
    )
    expected = sorted(n for n in collected if n.split("[")[0] not in chosen)
    assert ran == expected
    deselected = sorted(i.nodeid for c in result.getcalls("pytest_deselected") for i in c.items)
    assert deselected == sorted(set(collected) - set(expected))
    plugin = result.getcalls("pytest_sessionfinish")[0].session.config.pluginmanager.get_plugin(
        pytest_plugin.PLUGIN_NAME
    )
    assert sorted(n for _, n in plugin.unmatched) == sorted(strays)


# --------------------------------------------------------------------------- evidence


@pytest.mark.slow
def test_a_muted_failure_is_a_failure_of_the_test_but_not_of_the_job(tmp_path: Path) -> None:
    """From a real run's JUnit XML into the results store: `flaky` counts the
    muted failure against the test (the evidence for lifting keeps coming), and
    the job, which CI saw pass, is stored as passed."""
    import datetime as dt

    from matrixgen.results.flaky import FlakyPolicy, flaky_rows
    from matrixgen.results.ingest import ingest
    from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store

    root = project(
        tmp_path,
        entry("m", "mute", [f"{TEST_FILE}::test_fails", f"{TEST_FILE}::test_errors"]),
        entry("gone", "deselect", [f"{TEST_FILE}::test_to_deselect", f"{TEST_FILE}::test_param"]),
    )
    done, junit = run_pytest(root, quarantined(root), "-q")
    assert done.returncode == 0, done.stdout
    report = parse_report(junit.read_bytes(), str(junit))
    key = JobKey("gitlab", "unit-tests", "dgx_h100", "dev", "unit-tests", TEST_FILE, "latest", True)
    store = open_store(str(tmp_path / "results.db"), write=True)
    try:
        for n in range(3):
            at = dt.datetime(2026, 11, 10 + n, tzinfo=dt.UTC)
            group = JobResults(job=key, job_name="b", target="t", testcases=report.testcases)
            run = RunInfo(run_id=f"r{n}", commit=f"c{n}", finished_at=at)
            assert ingest(store, run, [group]).jobs[0].failed == 0  # muted: the job passed
        rows = flaky_rows(
            store, FlakyPolicy(since_days=None, min_runs=1), unit_jobs_whole=True
        ).rows
    finally:
        store.close()
    by_node = {r.node_id: r for r in rows}
    assert by_node[f"{TEST_FILE}::test_fails"].failures == 3
    assert by_node[f"{TEST_FILE}::test_fails"].verdict.value == "broken"
    assert by_node[f"{TEST_FILE}::test_errors"].failures == 3
    assert by_node[f"{TEST_FILE}::test_passes"].failures == 0
    assert by_node[None].failures == 0 and by_node[None].verdict.value == "ok"  # the job


@pytest.mark.slow
def test_a_tracker_written_as_a_number_reaches_the_junit_xml_as_its_url(tmp_path: Path) -> None:
    root = project(tmp_path, entry("m", "mute", [f"{TEST_FILE}::test_passes"]))
    qfile = root / "recipes" / "quarantine.yaml"
    qfile.write_text(qfile.read_text().replace("https://github.com/o/r/issues/1", '"#42"'))
    config = root / "recipes" / "matrixgen.yaml"
    config.write_text("quarantine: {tracker_base: https://github.com/o/r/issues/}\n")
    done, junit = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_passes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '<property name="quarantine_tracker" value="https://github.com/o/r/issues/42"' in (
        junit.read_text()
    )
    # The config is read as every command reads it (quarantine.project): one
    # validate refuses (format_version without a vocabulary) does not stop the
    # tests, and the tracker reaches the XML as written.
    config.write_text("format_version: 2\n" + config.read_text())
    done, junit = run_pytest(root, quarantined(root), "-q", f"{TEST_FILE}::test_passes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '<property name="quarantine_tracker" value="#42"' in junit.read_text()


# --------------------------------------------------------------------------- which system


_PLACES = st.lists(
    st.sampled_from(["gitlab/unit-tests", "github/unit-tests", "gitlab", "github", "gitlab/mr"]),
    unique=True,
    max_size=3,
)
_SIGNALS = st.sampled_from(
    [{}, {"MATRIXGEN_SYSTEM": "gitlab"}, {"MATRIXGEN_SYSTEM": "github"},
     {"GITHUB_ACTIONS": "true"}, {"GITLAB_CI": "true"}, {"GITHUB_ACTIONS": "false"}]
)  # fmt: skip


@settings(max_examples=40)
@given(where=_PLACES, signal=_SIGNALS)
# Megatron-LM's launchers pass no GITHUB_ACTIONS into the container: a GitLab
# entry must not act on GitHub's job that says nothing of its system.
@example(where=["gitlab/unit-tests"], signal={})
@example(where=["gitlab/unit-tests"], signal={"MATRIXGEN_SYSTEM": "gitlab"})
@example(where=["gitlab/unit-tests"], signal={"MATRIXGEN_SYSTEM": "github"})
@example(where=[], signal={})  # everywhere: applies whatever the system
@example(where=["gitlab/unit-tests", "github/unit-tests"], signal={})  # both systems
def test_an_entry_for_one_system_acts_only_where_the_job_says_it_runs(
    tmp_path_factory: pytest.TempPathFactory, where: list[str], signal: dict[str, str]
) -> None:
    root = tmp_path_factory.mktemp("system")
    places = f"[{', '.join(where)}]" if where else None
    (root / "q.yaml").write_text(
        "entries:\n" + entry("e", "mute", [f"{TEST_FILE}::test_fails"], where=places) + "\n"
    )
    env = {**IDENTITY, "MATRIXGEN_QUARANTINE": str(root / "q.yaml")}
    del env["MATRIXGEN_SYSTEM"]
    env.update(signal)
    loaded = jobenv.load_job_quarantine(env)
    assert loaded is not None
    said = signal.get("MATRIXGEN_SYSTEM") or (
        "github" if signal.get("GITHUB_ACTIONS") == "true"
        else "gitlab" if signal.get("GITLAB_CI") == "true" else None
    )  # fmt: skip

    def covers(system: str) -> bool:
        return not where or any(p in (system, f"{system}/unit-tests") for p in where)

    if said is None:
        expected = covers("github") and covers("gitlab")
        undecided = covers("github") != covers("gitlab")
    else:
        expected, undecided = covers(said), False
    assert bool(loaded.entries) is expected, (where, signal)
    assert bool(loaded.undecided) is undecided
    if undecided:  # the run says which entry, and where it applies
        from matrixgen.results.pytest_plugin import _undecided_lines

        (line,) = _undecided_lines(loaded.undecided)
        assert line.startswith(f"entry e (mute) applies on {', '.join(where)} only"), line
