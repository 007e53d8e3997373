"""`matrixgen jet-trigger` against Megatron-LM's own generator (differential).

For every call its CI files make (the configure jobs' scripts run in bash for
several values of their variables), the file jet-trigger writes equals, as
parsed YAML, the file the real generator writes for the same arguments; and the
same holds on generated format_version 1 trees where the generator loses no job.
Skips when Megatron-LM's CI files or recipe tree are absent (fails under
MATRIXGEN_REQUIRE_MEGATRON=1, as `.ci/run` sets it).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import require_megatron, run_cli
from tests.megatron_ci import (
    Upstream,
    ci_calls,
    github_scripts,
    gitlab_scripts,
    read_pipeline,
    require_megatron_ci,
    with_output,
)

# The slow tier (tests/tiers.py): every test here runs Megatron-LM's generator or CI scripts.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ci() -> Path:
    return require_megatron_ci()


@pytest.fixture(scope="module")
def upstream(ci: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    reference = Upstream(ci, tmp_path_factory.mktemp("megatron-lm"), require_megatron())
    yield reference
    reference.close()


def without_self_needs(pipeline: dict) -> tuple[dict, list[str]]:
    """The generator's pipeline as jet-trigger writes it, and the jobs that
    differ. With warm-up on, the generator makes the first selected job the
    one the others need; when two selected rows define that same job (a row
    repeated), it writes the job twice under one key, and the copy that stays
    needs the first: itself. GitLab refuses such a file ("circular dependencies:
    self-dependency"); jet-trigger writes the job once, without that need
    (docs/megatron.md lists the difference; validate warns of the repeated row)."""
    out, fixed = {}, []
    for key, job in pipeline.items():
        if isinstance(job, dict) and {"job": key} in job.get("needs", []):
            job = {**job, "needs": [n for n in job["needs"] if n != {"job": key}]}
            fixed.append(key)
        out[key] = job
    return out, fixed


def compare(upstream: Upstream, args: list[str], work: Path, *extra: str) -> tuple[dict, str]:
    """Run one call through both; assert the files agree (but for the
    generator's self-need, see without_self_needs); jet-trigger's stderr."""
    theirs, ours = work / "upstream.yaml", work / "matrixgen.yaml"
    answer = upstream.run(with_output(args, theirs))
    assert answer["ok"], (args, answer)
    run = run_cli(
        ["jet-trigger", *with_output(args, ours), "--recipes", str(upstream.recipes), *extra]
    )
    assert run.code == 0, (args, run)
    expected, fixed = without_self_needs(read_pipeline(theirs))
    got = read_pipeline(ours)
    if fixed:  # only where warm-up is on and the warm-up job's row is repeated
        assert "--no-enable-warmup" not in args and "warning(s) in" in run.err, (args, fixed)
    if expected != got:
        differ = sorted(k for k in {*expected, *got} if expected.get(k) != got.get(k))
        pytest.fail(
            f"{args}: differs in {differ[:5]}: {expected.get(differ[0])!r} != "
            f"{got.get(differ[0])!r}"
        )
    return got, run.err


# --------------------------------------------------------------------------- the reference


def test_the_c_loader_reads_every_file_as_the_pure_loader_does() -> None:
    """The driver's one speed-up must not change what the reference reads."""
    recipes = require_megatron()
    files = sorted(recipes.rglob("*.yaml"))
    assert len(files) > 40
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=yaml.CSafeLoader) == yaml.load(text, Loader=yaml.SafeLoader)


# Click's and typer's names of the same parameter types.
TYPES = {"text": str, "str": str, "integer": int, "int": int, "boolean": bool, "bool": bool}


def test_options_are_the_generators_options(ci: Path, tmp_path: Path) -> None:
    """Same names, types, defaults, flags and required-ness, option by option."""
    import typer.main

    from matrixgen.cli.main import build_app

    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.test_utils.python_scripts import generate_jet_trigger_job as g;"
        "plain = lambda v: v if isinstance(v, (bool, int, str, type(None))) else None;"
        "print(json.dumps([[p.name, p.opts, p.secondary_opts, p.required, plain(p.default),"
        " p.type.name, getattr(p, 'is_flag', False)] for p in g.main.params]))"
    )
    top = tmp_path / "checkout"
    Upstream(ci, top, None).close()
    theirs = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe, str(top)],
            cwd=top,
            env={**os.environ, "PYTHONPATH": str(top)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    command = typer.main.get_command(build_app(("jet-trigger",))).commands["jet-trigger"]
    ours = {p.name: p for p in command.params}
    for name, opts, secondary, required, default, kind, is_flag in theirs:
        mine = ours.pop(name)
        assert (mine.opts, mine.secondary_opts, mine.required) == (opts, secondary, required), name
        assert (mine.default, TYPES[mine.type.name], bool(getattr(mine, "is_flag", False))) == (
            default,
            TYPES[kind],
            is_flag,
        ), name
    # What jet-trigger adds: the tree, the system asking, strictness.
    assert set(ours) == {"recipes", "local_recipes", "system", "strict"}


# --------------------------------------------------------------------------- the CI files

GITLAB_BASE = {
    "DEFAULT_A100_CLUSTER": "dgxa100_dracooci",
    "DEFAULT_H100_CLUSTER": "dgxh100_eos",
    "DEFAULT_GB200_CLUSTER": "dgxgb200_oci-hsg",
    "UTILITY_IMAGE": "registry.example/adlr/megatron-lm/mcore_utility",
    "CI_PIPELINE_ID": "41872",
    "CI_SLURM_ACCOUNT": "coreai_dlalgo_mcore",
}
# Several values of each variable, not their whole product: each set differs
# from the others in several variables at once.
GITLAB_VARIABLES = {
    ".gitlab/stages/02.test.yml": [
        {"UNIT_TEST_REPEAT": "1", "UNIT_TEST_TIMEOUT": "30"},
        {"UNIT_TEST_REPEAT": "5", "UNIT_TEST_TIMEOUT": "45", "CLUSTER_H100": "dgxh100_coreweave"},
    ],
    ".gitlab/stages/03.integration-tests.yml": [
        {
            "INTEGRATION_TEST_SCOPE": "mr",
            "INTEGRATION_TEST_TIME_LIMIT": "900",
            "INTEGRATION_TEST_CASES": "all",
        },
        {
            "INTEGRATION_TEST_SCOPE": "mr-slim",
            "INTEGRATION_TEST_TIME_LIMIT": "1200",
            "INTEGRATION_TEST_CASES": (
                "gpt3_mcore_te_tp2_pp2,gpt3_mcore_te_tp1_pp4_vp1_resume_torch"
            ),
            "CLUSTER_A100": "dgxa100_dracooci-ord",
        },
    ],
    ".gitlab/stages/04.functional-tests.yml": [
        {
            "FUNCTIONAL_TEST_SCOPE": "mr",
            "FUNCTIONAL_TEST_REPEAT": "5",
            "FUNCTIONAL_TEST_TIME_LIMIT": "2700",
            "FUNCTIONAL_TEST_CASES": "all",
        },
        {
            "FUNCTIONAL_TEST_SCOPE": "nightly",
            "FUNCTIONAL_TEST_REPEAT": "5",
            "FUNCTIONAL_TEST_TIME_LIMIT": "2700",
            "FUNCTIONAL_TEST_CASES": "all",
            "CI_MERGE_REQUEST_LABELS": "Run tests,Record checkpoints",
        },
        {
            "FUNCTIONAL_TEST_SCOPE": "weekly",
            "FUNCTIONAL_TEST_REPEAT": "1",
            "FUNCTIONAL_TEST_TIME_LIMIT": "5400",
            "FUNCTIONAL_TEST_CASES": "all",
            "FUNCTIONAL_TEST_NAME": "weekly/run-$CI_PIPELINE_ID",
        },
        {
            "FUNCTIONAL_TEST_SCOPE": "release",
            "FUNCTIONAL_TEST_REPEAT": "1",
            "FUNCTIONAL_TEST_TIME_LIMIT": "14400",
            "FUNCTIONAL_TEST_CASES": "all",
            "FUNCTIONAL_TEST_NAME": "release/core_r0.16.0",
            "FUNCTIONAL_TEST_RECORD_CHECKPOINTS": "yes",
        },
        {
            "FUNCTIONAL_TEST_SCOPE": "mr-slim",
            "FUNCTIONAL_TEST_REPEAT": "5",
            "FUNCTIONAL_TEST_TIME_LIMIT": "2700",
            "FUNCTIONAL_TEST_CASES": (
                "gpt3_mcore_te_tp2_pp2,moe_mixtral_tp1_pp1_ep8_alltoall_dropless"
            ),
            "CLUSTER_GB200": "dgxgb200_oci-hsg",
        },
    ],
}
GITHUB_VARIABLES = [
    {"SCOPE": "L1", "LIGHTWEIGHT": "false", "CADENCE": "pr"},
    {"SCOPE": "L1", "LIGHTWEIGHT": "true", "CADENCE": "mergegroup"},
    {"SCOPE": "L0", "LIGHTWEIGHT": "false", "CADENCE": "nightly"},
    {"SCOPE": "mr-github", "LIGHTWEIGHT": "false", "CADENCE": ""},
]


def _gitlab_cases() -> list[tuple[str, int]]:
    return [(rel, i) for rel, sets in GITLAB_VARIABLES.items() for i in range(len(sets))]


@pytest.mark.parametrize(("rel", "index"), _gitlab_cases())
def test_every_gitlab_call_writes_what_the_generator_writes(
    ci: Path, upstream: Upstream, tmp_path: Path, rel: str, index: int
) -> None:
    variables = {**GITLAB_BASE, **GITLAB_VARIABLES[rel][index]}
    calls = ci_calls(gitlab_scripts(ci)[rel], variables, tmp_path / "ci")
    expected_calls = {"02": 4, "03": 6, "04": 8}[Path(rel).name[:2]]
    assert len(calls) == expected_calls, calls
    jobs = 0
    for args in calls:
        got, _ = compare(upstream, args, tmp_path)
        jobs += sum(1 for v in got.values() if isinstance(v, dict) and "script" in v)
        # Warm-up on: every call site turns it off; a caller may not.
        if "--no-enable-warmup" in args:
            warm = [a for a in args if a != "--no-enable-warmup"]
            compare(upstream, warm, tmp_path)
    assert jobs > 0


def test_every_github_call_writes_what_the_generator_writes(
    ci: Path, upstream: Upstream, tmp_path: Path
) -> None:
    scripts = github_scripts(ci)
    assert set(scripts) == {
        "cicd-parse-integration-tests-h100",
        "cicd-parse-integration-tests-gb200",
    }
    seen = 0
    for (script, env), variables in itertools.product(scripts.values(), GITHUB_VARIABLES):
        assert set(env) == {"SCOPE", "LIGHTWEIGHT", "CADENCE"}
        calls = ci_calls(script, variables, tmp_path / "ci")
        assert len(calls) == 1, calls
        got, _ = compare(upstream, calls[0], tmp_path, "--system", "github")
        seen += len(got)
    assert seen > 8


def test_a_platform_no_recipe_uses_is_said_and_written_as_upstream_writes_it(
    ci: Path, upstream: Upstream, tmp_path: Path
) -> None:
    """03.integration-tests.yml passes `dgx_gb2100`: the placeholder pipeline, as
    the generator writes it, and a warning that names the platform meant."""
    calls = ci_calls(
        gitlab_scripts(ci)[".gitlab/stages/03.integration-tests.yml"],
        {**GITLAB_BASE, **GITLAB_VARIABLES[".gitlab/stages/03.integration-tests.yml"][0]},
        tmp_path / "ci",
    )
    typo = [c for c in calls if "dgx_gb2100" in c]
    assert len(typo) == 1
    got, err = compare(upstream, typo[0], tmp_path)
    assert list(got) == ["default", "empty-pipeline-placeholder-job", "stages", "workflow"]
    assert '--platform "dgx_gb2100" is used by no recipe' in err
    assert 'did you mean "dgx_gb200"?' in err
    strict = run_cli(
        [
            "jet-trigger",
            *with_output(typo[0], tmp_path / "strict.yaml"),
            "--recipes",
            str(upstream.recipes),
            "--strict",
        ]
    )
    assert strict.code == 2 and not (tmp_path / "strict.yaml").exists(), strict


# --------------------------------------------------------------------------- generated trees

MODELS = ("gpt", "moe", "gpt-nemo", "bert")
SCOPES = ("mr", "mr-slim", "nightly", "weekly", "mr-github", "mr-github-slim", "L0-smoke")
PLATFORMS = ("dgx_h100", "dgx_a100", "dgx_gb200")
CADENCES = ("pr", "nightly", "mergegroup", "weekly")


def _sub(values: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True)


@st.composite
def v1_trees(draw: st.DrawFn) -> tuple[dict[str, str], bool, list[str]]:
    """A format_version 1 tree: (files, whether rows carry tags, test cases).
    Test case names are unique across the tree and each row has at most one tag,
    so no call selects two different jobs the generator would key alike. A row
    may be repeated, as in Megatron-LM's own trees, and two rows of a block may
    overlap: a call then selects one job twice, which jet-trigger writes once
    (see without_self_needs for the one way that differs from the generator)."""
    with_tags = draw(st.booleans())
    models = draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=3, unique=True))
    counter = itertools.count()
    files: dict[str, str] = {}
    cases: list[str] = []
    for model in models:
        spec: dict = {
            "name": "{test_case}_{environment}_{platforms}",
            "model": model,
            "build": "mcore-pyt-{environment}",
            "nodes": 1,
            "gpus": 8,
            "platforms": draw(st.sampled_from(PLATFORMS)),
            "script": "echo {test_case}",
        }
        if draw(st.booleans()):
            spec["allow_failure"] = draw(st.booleans())
        blocks = []
        for _ in range(draw(st.integers(1, 3))):
            case = f"{model.replace('-', '_')}_case_{next(counter)}"
            cases.append(case)
            rows = []
            for _ in range(draw(st.integers(1, 2))):
                row: dict = {"environment": draw(_sub(("dev", "lts"))), "scope": draw(_sub(SCOPES))}
                if draw(st.booleans()):
                    row["platforms"] = draw(_sub(PLATFORMS))
                if draw(st.booleans()):
                    row["cadence"] = draw(_sub(CADENCES))
                if with_tags:
                    row["tag"] = [draw(st.sampled_from(("latest", "legacy")))]
                rows.append(row)
            if draw(st.booleans()):  # a row repeated, word for word
                rows.append(dict(draw(st.sampled_from(rows))))
            block: dict = {"test_case": [case], "products": rows}
            if draw(st.booleans()):
                block["cadence"] = draw(_sub(CADENCES))
            blocks.append(block)
        document = {"type": "basic", "format_version": 1, "spec": spec, "products": blocks}
        files[f"{draw(st.sampled_from(('h100', 'gb200', 'a100')))}/{model}.yaml"] = yaml.safe_dump(
            document, sort_keys=False
        )
    for env in ("dev", "lts"):
        files[f"_build-mcore-{env}.yaml"] = yaml.safe_dump(
            {
                "type": "build",
                "format_version": 1,
                "spec": {"name": f"mcore-pyt-{env}", "source": {"image": f"mcore-{env}"}},
            }
        )
    return files, with_tags, cases


@st.composite
def calls(draw: st.DrawFn, with_tags: bool, cases: list[str]) -> list[str]:
    args = [
        "--scope",
        draw(st.sampled_from((*SCOPES, "L1", "L2", "L3", "L0"))),
        "--environment",
        draw(st.sampled_from(("dev", "lts"))),
        "--platform",
        draw(st.sampled_from(PLATFORMS)),
        "--cluster",
        draw(st.sampled_from(("dgxh100_eos", "ghci", "dgxgb200_oci-hsg"))),
        "--container-image",
        "img",
        "--container-tag",
        draw(st.sampled_from(("latest", "41872"))),
        "--dependent-job",
        "functional:configure",
        "--slurm-account",
        "acct",
        "--n-repeat",
        str(draw(st.integers(1, 5))),
        "--time-limit",
        str(draw(st.sampled_from((1, 2700)))),
        "--output-path",
        "out.yaml",
    ]
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(cases), min_size=1, max_size=3, unique=True))
        args += ["--test-cases", ",".join(chosen)]
    else:
        args += ["--test-cases", "all"]
    if with_tags:
        args += ["--tag", draw(st.sampled_from(("latest", "legacy")))]
    cadence = draw(st.sampled_from((None, "", "pr", "nightly", "mergegroup", "weekly")))
    if cadence is not None:
        args += ["--cadence", cadence]
    record = draw(st.sampled_from((None, "true", "false")))
    if record is not None:
        args += ["--record-checkpoints", record]
    if draw(st.booleans()):
        args += ["--partition", "batch"]
    if draw(st.booleans()):
        args += ["--run-name", "release/x", "--wandb-experiment", "release-x"]
    for flag in ("--enable-lightweight-mode", "--no-enable-warmup", "--enable-error-extraction"):
        if draw(st.booleans()):
            args.append(flag)
    return args


@pytest.fixture(scope="module")
def generated_reference(ci: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """One reference process for every generated example (its tree replaced each time)."""
    reference = Upstream(ci, tmp_path_factory.mktemp("megatron-generated"), None)
    yield reference
    reference.close()


@st.composite
def generated_cases(draw: st.DrawFn) -> tuple[dict[str, str], list[list[str]]]:
    """A tree and three calls on it."""
    files, with_tags, cases = draw(v1_trees())
    return files, [draw(calls(with_tags, cases)) for _ in range(3)]


# A repeated row whose job is the first selected, with warm-up on: the generator
# writes it twice under one key, the copy that stays needing itself.
_REPEATED = yaml.safe_dump(
    {
        "type": "basic",
        "format_version": 1,
        "spec": {
            "name": "{test_case}_{environment}_{platforms}",
            "model": "gpt",
            "build": "mcore-pyt-{environment}",
            "platforms": "dgx_h100",
            "script": "echo {test_case}",
        },
        "products": [
            {
                "test_case": ["gpt_case_0"],
                "products": [{"environment": ["dev"], "scope": ["mr"]}] * 2,
            },
            {"test_case": ["gpt_case_1"], "products": [{"environment": ["dev"], "scope": ["mr"]}]},
        ],
    },
    sort_keys=False,
)
_BUILD_DEV = yaml.safe_dump(
    {
        "type": "build",
        "format_version": 1,
        "spec": {"name": "mcore-pyt-dev", "source": {"image": "i"}},
    }
)
_WARM_CALL = [
    "--scope", "mr", "--environment", "dev", "--platform", "dgx_h100", "--cluster",
    "dgxh100_eos", "--container-image", "img", "--container-tag", "latest",
    "--dependent-job", "functional:configure", "--slurm-account", "acct",
    "--output-path", "out.yaml", "--test-cases", "all",
]  # fmt: skip


@settings(max_examples=30)
@given(case=generated_cases())
@example(case=({"h100/gpt.yaml": _REPEATED, "_build-mcore-dev.yaml": _BUILD_DEV}, [_WARM_CALL]))
def test_generated_trees_write_what_the_generator_writes(
    generated_reference: Upstream,
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[dict[str, str], list[list[str]]],
) -> None:
    files, drawn = case
    work = tmp_path_factory.mktemp("generated")
    generated_reference.write_tree(files)
    for args in drawn:
        compare(generated_reference, args, work)


def test_a_repeated_warm_up_job_needs_itself_upstream_and_not_here(
    generated_reference: Upstream, tmp_path: Path
) -> None:
    """The difference itself: the generator's file holds a self-dependency
    (GitLab refuses the pipeline); jet-trigger's does not, and validate warns of
    the repeated row."""
    generated_reference.write_tree(
        {"h100/gpt.yaml": _REPEATED, "_build-mcore-dev.yaml": _BUILD_DEV}
    )
    theirs = tmp_path / "upstream.yaml"
    assert generated_reference.run(with_output(_WARM_CALL, theirs))["ok"]
    upstream_job = read_pipeline(theirs)["gpt_case_0"]
    assert {"job": "gpt_case_0"} in upstream_job["needs"]
    ours = tmp_path / "matrixgen.yaml"
    run = run_cli(
        ["jet-trigger", *with_output(_WARM_CALL, ours), "--recipes",
         str(generated_reference.recipes)]
    )  # fmt: skip
    assert run.code == 0, run
    pipeline = read_pipeline(ours)
    assert {"job": "gpt_case_0"} not in pipeline["gpt_case_0"]["needs"]
    assert {"job": "gpt_case_0"} in pipeline["gpt_case_1"]["needs"]  # the warm-up chain kept
    assert without_self_needs(read_pipeline(theirs)) == (pipeline, ["gpt_case_0"])
    shown = run_cli(["validate", "--recipes", str(generated_reference.recipes)])
    assert "defined 2 times" in shown.err and "[duplicate-job]" in shown.err


# --------------------------------------------------------------------------- the edit


def test_the_ci_files_switched_over_write_the_same_pipelines(ci: Path, tmp_path: Path) -> None:
    """docs/megatron.md's edit, made on the real CI scripts: each job's script,
    run as its job runs it from the top of a checkout, writes the same files
    with `matrixgen jet-trigger` as with the generator."""
    from tests.gitrepo import GitRepo
    from tests.megatron_ci import SWITCH, run_ci_script

    top = tmp_path / "megatron-lm"
    Upstream(ci, top, require_megatron()).close()
    repo = GitRepo(top)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "tree")
    path = [Path(sys.executable).parent]
    scripts = [
        (script, {**GITLAB_BASE, **GITLAB_VARIABLES[rel][-1]})
        for rel, script in gitlab_scripts(ci).items()
    ]
    scripts += [
        (script, {**GITHUB_VARIABLES[0], "GITHUB_ACTIONS": "true"})
        for script, _ in github_scripts(ci).values()
    ]
    files = 0
    for script, variables in scripts:
        switched = script.replace(*SWITCH)
        assert switched != script
        old = run_ci_script(script, variables, top, path)
        new = run_ci_script(switched, variables, top, path)
        assert old and old == new, sorted(set(old) ^ set(new))
        files += len(new)
    # 4 unit-test, 6 integration (one path written twice), 8 functional, 2 GitHub.
    assert files == 4 + 5 + 8 + 2
