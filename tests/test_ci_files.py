"""The project's own CI files: .gitlab-ci.yml (test, generate, one trigger job per
GitLab target) and .github/workflows/ (generate the matrices, fan out with
fromJSON). Kept in step with recipes/matrixgen.yaml, checked by the real
validators, and the GitLab pipeline run end to end under gitlab-ci-local."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from matrixgen.pipeline import generate
from matrixgen.quarantine.policy import TODAY_VARIABLE
from tests import realvalidators as rv
from tests.conftest import SHIPPED_QUARANTINE_DAY

# The shipped quarantine entries expire by design: judge them on a fixed day.
pytestmark = pytest.mark.usefixtures("pinned_today")

REPO = Path(__file__).resolve().parents[1]
GITLAB_CI = REPO / ".gitlab-ci.yml"
WORKFLOWS = REPO / ".github" / "workflows"
FUNCTIONAL = WORKFLOWS / "functional.yml"


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((REPO / "recipes" / "matrixgen.yaml").read_text())


@pytest.fixture(scope="module")
def gitlab_ci() -> dict:
    return yaml.safe_load(GITLAB_CI.read_text())


def targets_of(config: dict, system: str) -> dict[str, dict]:
    return {n: t for n, t in config["targets"].items() if t["system"] == system}


# --------------------------------------------------------------------------- GitLab


def test_one_trigger_job_per_gitlab_target(config: dict, gitlab_ci: dict) -> None:
    triggers = {n: j for n, j in gitlab_ci.items() if isinstance(j, dict) and "trigger" in j}
    targets = targets_of(config, "gitlab")
    missing = sorted(set(targets) - set(triggers))
    stale = sorted(set(triggers) - set(targets))
    add = "".join(
        f"\n{n}:\n  extends: [.trigger, .on-{targets[n]['scope']}]\n  trigger:\n    include:\n"
        f"      - artifact: generated/{n}.yml\n        job: generate\n    strategy: depend\n"
        for n in missing
    )
    assert not missing and not stale, (
        f".gitlab-ci.yml is out of step with recipes/matrixgen.yaml: remove {stale}; add:{add}"
    )
    for name, job in triggers.items():
        scope = config["targets"][name]["scope"]
        assert job["trigger"]["include"] == [
            {"artifact": f"generated/{name}.yml", "job": "generate"}
        ], name
        assert job["trigger"]["strategy"] == "depend"
        # Rules by scope: a trigger job runs in the pipelines of its target's scope.
        assert job["extends"] == [".trigger", f".on-{scope}"], name
    assert gitlab_ci[".trigger"]["needs"] == ["generate"]
    assert gitlab_ci[".trigger"]["stage"] == "trigger"


def test_generate_job_writes_what_the_triggers_include(
    gitlab_ci: dict, tmp_path: Path, cli
) -> None:
    job = gitlab_ci["generate"]
    script = " ".join(job["script"])
    assert "matrixgen validate" in script
    match = re.search(r"matrixgen generate --recipes (\S+) --output-dir (\S+)", script)
    assert match, script
    recipes, out = match.groups()
    assert job["artifacts"]["paths"] == [f"{out}/"]
    # The files generate writes are exactly the ones the trigger jobs include.
    run = cli("generate", "--recipes", REPO / recipes, "--out", tmp_path)
    assert run.code == 0, run
    written = {f"{out}/{p.name}" for p in tmp_path.iterdir() if p.suffix == ".yml"}
    included = {
        item["artifact"]
        for j in gitlab_ci.values()
        if isinstance(j, dict) and "trigger" in j
        for item in j["trigger"]["include"]
    }
    assert written == included


def test_report_job_publishes_the_site(gitlab_ci: dict, tmp_path: Path, cli) -> None:
    """The report job writes the site where its artifact picks it up, and the
    artifact is linked from merge requests (expose_as)."""
    job = gitlab_ci["report"]
    script = " ".join(job["script"])
    match = re.search(r"matrixgen report --recipes (\S+) --output-dir (\S+)", script)
    assert match, job["script"]
    recipes, out = match.groups()
    assert job["artifacts"]["paths"] == [f"{out}/"]
    assert job["artifacts"]["expose_as"]
    # After the triage job when it is in the pipeline (at once when not), and
    # whatever it ended with (exit 6 on a new failure): the report is wanted most then.
    assert job["needs"] == [{"job": "triage", "optional": True}] and job["stage"] == "triage"
    assert all(r.get("when") in ("always", "never") for r in job["rules"][:3]), job["rules"]
    run = cli("report", "--recipes", REPO / recipes, "--out", tmp_path / out)
    assert run.code == 0, run
    assert (tmp_path / out / "index.html").is_file()


def test_report_job_shows_the_run_the_triage_job_stored(gitlab_ci: dict) -> None:
    """The triage job names its run in triaged-run once the reports are
    ingested (before triage, which may exit 6), and keeps it as an artifact;
    the report job passes that run, with triage's baseline, only when the file
    is there."""
    triage = gitlab_ci["triage"]
    script = "\n".join(triage["script"])
    ingest_at = script.index("matrixgen results ingest")
    marker_at = script.index('echo "$CI_PIPELINE_ID" > triaged-run')
    assert ingest_at < marker_at < script.index("matrixgen results triage --run")
    assert "triaged-run" in triage["artifacts"]["paths"] and triage["artifacts"]["when"] == "always"
    report = "\n".join(gitlab_ci["report"]["script"])
    assert 'run="$(cat triaged-run 2>/dev/null || true)"' in report
    baseline = '--baseline-ref "$CI_DEFAULT_BRANCH" --baseline-source schedule'
    assert baseline in script
    assert f'${{run:+--run "$run" {baseline}}}' in report


def test_test_job_runs_the_suite(gitlab_ci: dict) -> None:
    assert gitlab_ci["test"]["script"] == ["bash .ci/run"]
    assert gitlab_ci["stages"] == ["test", "generate", "trigger", "triage"]


def test_triage_job_follows_the_child_pipelines(gitlab_ci: dict) -> None:
    """After every trigger job (each optional: rules pick some), the reports
    ingested as this pipeline's run first, then triaged against the scheduled
    runs of the default branch; never without a store to read."""
    job = gitlab_ci["triage"]
    triggers = sorted(n for n, j in gitlab_ci.items() if isinstance(j, dict) and "trigger" in j)
    assert job["stage"] == "triage"
    assert job["needs"] == [{"job": n, "optional": True} for n in triggers]
    script = "\n".join(job["script"])
    ingest_at = script.index('matrixgen results ingest "$dir" --run-id "$CI_PIPELINE_ID"')
    triage_at = script.index('matrixgen results triage --run "$CI_PIPELINE_ID"')
    assert script.index(".ci/child-junit") < ingest_at < triage_at
    assert '--baseline-ref "$CI_DEFAULT_BRANCH" --baseline-source schedule' in script
    assert job["rules"][0] == {
        "if": '$MATRIXGEN_RESULTS_DB == null || $MATRIXGEN_RESULTS_DB == ""',
        "when": "never",
    }
    assert job["rules"][-1]["when"] == "always"  # the children's failures are its input
    assert (REPO / ".ci" / "child-junit").stat().st_mode & 0o111


# --------------------------------------------------------------------------- GitHub


def test_functional_workflow_covers_every_github_target(config: dict) -> None:
    """The workflow decides with `matrixgen decide` and the action's `event`
    (`generate --event`, no shell conditionals), and every output group of the
    GitHub targets reaches a fan-out job of the same name through fromJSON."""
    workflow = yaml.safe_load(FUNCTIONAL.read_text())
    generate_job = workflow["jobs"]["generate"]
    (step,) = [s for s in generate_job["steps"] if s.get("uses") == "./"]  # action.yml
    assert step["with"]["event"] == "${{ env.EVENT }}"
    assert step["with"]["labels-json"] == "${{ env.LABELS }}"
    assert step["with"]["system"] == "github"
    steps = {
        s["id"]: " ".join(s["run"].split())
        for s in generate_job["steps"]
        if "run" in s and "id" in s
    }
    assert steps["decide"].startswith('matrixgen decide --event "$EVENT" --labels-json "$LABELS"')
    assert generate_job["env"]["EVENT"] == "${{ github.event_name }}"
    groups = {
        spec.get("group", name)
        for name, spec in config["targets"].items()
        if spec["system"] == "github"
    }
    outputs = generate_job["outputs"]
    assert set(outputs) == groups | {f"{g}-shards" for g in groups}
    step_id = step["id"]
    for group in groups:
        assert outputs[group] == (
            f"${{{{ toJSON(fromJSON(steps.{step_id}.outputs.groups)['{group}'][0]) }}}}"
        )
        assert outputs[f"{group}-shards"] == (
            f"${{{{ fromJSON(steps.{step_id}.outputs.group-shards)['{group}'] }}}}"
        )
        fan_out = workflow["jobs"][group]
        assert fan_out["needs"] == "generate"
        assert (
            fan_out["strategy"]["matrix"] == f"${{{{ fromJSON(needs.generate.outputs.{group}) }}}}"
        )
        assert fan_out["if"] == f"fromJSON(needs.generate.outputs.{group}-shards) > 0"
    # Every event the workflow listens to has a rule.
    events = set(workflow[True] if True in workflow else workflow["on"])
    assert events == set(config["decisions"]["github"]["events"])


@pytest.mark.slow
def test_ci_files_pass_check_jsonschema() -> None:
    rv.require_check_jsonschema()
    gitlab = rv.check_jsonschema_gitlab(GITLAB_CI)
    assert gitlab.ok, gitlab
    github = rv.check_jsonschema_github(*sorted(WORKFLOWS.glob("*.yml")))
    assert github.ok, github


@pytest.mark.slow
def test_workflows_pass_actionlint(tmp_path: Path) -> None:
    rv.require_actionlint()
    workflows = sorted(WORKFLOWS.glob("*.yml"))
    assert len(workflows) >= 2
    # A broken copy proves actionlint reads the references we rely on.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        FUNCTIONAL.read_text().replace(
            "fromJSON(needs.generate.outputs.l1-h100)", "fromJSON(needs.generate.outputs.l1-h200)"
        )
    )
    result = rv.actionlint(*workflows, broken)
    assert result.returncode in (0, 1), result
    for workflow in workflows:
        assert result.errors_for(workflow) == [], result
    assert any("l1-h200" in e.message for e in result.errors_for(broken)), result


# --------------------------------------------------------------------------- end to end

# Prints what it would launch and the pinned env it got (the job's variables).
# No $NAME in it: GitLab expands variables inside a variable's value.
ECHO_LAUNCHER = (
    'sh -c \'printf "LAUNCH NVTE_FLASH_ATTN_V4=%s " "$(printenv NVTE_FLASH_ATTN_V4)";'
    ' echo "$*"\' launch'
)


@pytest.fixture(scope="module")
def pipeline_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git work tree holding the pipeline and the recipes, as in a checkout."""
    root = tmp_path_factory.mktemp("pipeline")
    shutil.copy2(GITLAB_CI, root / ".gitlab-ci.yml")
    shutil.copytree(REPO / "recipes", root / "recipes")
    return root


def _env() -> dict[str, str]:
    # Jobs inherit PATH: they find this interpreter's `matrixgen`; and the day the
    # shipped quarantine entries are judged against (they expire by design).
    return {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        TODAY_VARIABLE: SHIPPED_QUARANTINE_DAY.isoformat(),
    }


@pytest.mark.slow
def test_rules_pick_the_triggers_of_each_pipeline(pipeline_repo: Path, config: dict) -> None:
    rv.require_gitlab_ci_local()
    by_scope: dict[str, set[str]] = {}
    for name, target in targets_of(config, "gitlab").items():
        by_scope.setdefault(target["scope"], set()).add(name)
    cases = [
        ({"CI_PIPELINE_SOURCE": "merge_request_event"}, by_scope["mr"]),
        (
            {"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_LABELS": "x,slim"},
            by_scope["mr-slim"],
        ),
        ({"CI_PIPELINE_SOURCE": "schedule"}, by_scope["nightly"]),
        ({"CI_PIPELINE_SOURCE": "push"}, set()),
    ]
    for variables, expected in cases:
        result = rv.gitlab_ci_local_run(
            pipeline_repo, extra_args=["--list-csv"], variables=variables, env=_env()
        )
        assert result.ok, result
        listed = {line.split(";")[0] for line in result.stdout.splitlines()[1:] if line}
        assert listed - {"test", "generate", "report"} == expected, (variables, result)
        # Merge requests, schedules and the default branch (a push here) get the report.
        assert "report" in listed, variables
        assert "generate" in listed


@pytest.mark.slow
def test_report_job_runs_under_gitlab_ci_local(pipeline_repo: Path) -> None:
    rv.require_gitlab_ci_local()
    result = rv.gitlab_ci_local_run(pipeline_repo, "report", env=_env(), timeout=240)
    assert result.ok and result.passed_jobs == ["report"], result
    site = pipeline_repo / ".gitlab-ci-local" / "artifacts" / "report" / "report"
    assert sorted(p.name for p in site.iterdir()) == [
        "flakes.html",
        "index.html",
        "quarantine.html",
        "selection.html",
        "triage.html",
    ], result


def test_report_job_triages_the_stored_run_under_gitlab_ci_local(
    tmp_path: Path, triage_evidence_store: Path
) -> None:
    """The report job in a checkout where the triage job left triaged-run (as
    its artifact does) and a store holding that run: the site's Triage page is
    that run's triage against the default branch's scheduled runs. Without the
    file, no run is triaged."""
    from tests.results_fixtures import MR_RUN

    rv.require_gitlab_ci_local()
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy2(GITLAB_CI, repo / ".gitlab-ci.yml")
    shutil.copytree(REPO / "recipes", repo / "recipes")
    shutil.copyfile(triage_evidence_store, tmp_path / "results.db")
    variables = {"CI_DEFAULT_BRANCH": "main", "MATRIXGEN_RESULTS_DB": str(tmp_path / "results.db")}
    site = repo / ".gitlab-ci-local" / "artifacts" / "report" / "report" / "triage.html"
    for marker in (None, MR_RUN):
        if marker is not None:
            (repo / "triaged-run").write_text(marker + "\n")
        result = rv.gitlab_ci_local_run(
            repo, "report", variables=variables, env={**_env(), "MATRIXGEN_TODAY": "2026-12-01"},
            timeout=240,
        )  # fmt: skip
        assert result.ok and result.passed_jobs == ["report"], result
        page = site.read_text()
        if marker is None:
            assert "No run given." in page and '<span class="verdict-' not in page
        else:
            assert f"run {MR_RUN} (ref blend-cache" in page
            assert page.count('<span class="verdict-') == 5  # its five failures
            assert "run 9123 (ref main, source schedule" in page


@pytest.mark.slow
def test_triage_runs_only_with_a_results_store(pipeline_repo: Path) -> None:
    rv.require_gitlab_ci_local()
    mr = {"CI_PIPELINE_SOURCE": "merge_request_event"}
    for variables, listed_too in (
        (mr, False),
        ({**mr, "MATRIXGEN_RESULTS_DB": "postgresql://ci@db/results"}, False),  # no token
        ({**mr, "MATRIXGEN_RESULTS_DB": "postgresql://ci@db/r", "MATRIXGEN_API_TOKEN": "t"}, True),
        (
            {"CI_PIPELINE_SOURCE": "push", "MATRIXGEN_RESULTS_DB": "x", "MATRIXGEN_API_TOKEN": "t"},
            False,
        ),
    ):
        result = rv.gitlab_ci_local_run(
            pipeline_repo, extra_args=["--list-csv"], variables=variables, env=_env()
        )
        assert result.ok, result
        listed = {line.split(";")[0] for line in result.stdout.splitlines()[1:] if line}
        assert ("triage" in listed) is listed_too, (variables, listed)


@pytest.mark.slow
def test_gitlab_pipeline_runs_end_to_end(pipeline_repo: Path) -> None:
    rv.require_gitlab_ci_local()
    result = rv.gitlab_ci_local_run(
        pipeline_repo,
        variables={"MATRIXGEN_SCOPE": "mr-slim", "MATRIXGEN_LAUNCHER": ECHO_LAUNCHER},
        env=_env(),
        timeout=240,
    )
    assert result.ok, result
    gen = generate(pipeline_repo / "recipes")
    config = gen.tree.config
    expected = {"generate"}
    skipped: set[str] = set()
    for target in config.targets:
        if target.selector.scope != "mr-slim":
            continue
        selection = gen.selection(target)
        expected.add(target.name)
        expected |= {f"[{target.name}] -> {job.name}" for job in selection.jobs}
        skipped |= {job.name for job in selection.skipped}
    assert set(result.passed_jobs) == expected
    assert skipped, "the EP8 case quarantined on gitlab/mr-slim"
    assert not any(name in result.stdout for name in skipped)
    jobs = {j.name: j for t in config.targets for j in gen.jobs_for(t)}
    launches = re.findall(r"-> (\S+) > LAUNCH (.*)$", result.stdout, re.M)
    assert len(launches) == len(expected) - 3  # generate and two trigger jobs
    for name, line in launches:
        # Every functional job got its pinned env through the child pipeline.
        assert line.startswith("NVTE_FLASH_ATTN_V4=0 --model "), line
        if jobs[name].spec.get("launcher"):
            # The dry-run launcher replaced the job's own, which holds the argument.
            assert "--flash-attention-version" not in line
        else:
            assert line.rstrip().endswith(" -- --flash-attention-version 2"), line
