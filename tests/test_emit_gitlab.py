"""GitLab child pipelines: job shape, quoting, names, limits, quarantine marks,
and real runs under gitlab-ci-local."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.emit.registry import resolve_settings
from matrixgen.emit.yamltext import dump_yaml
from matrixgen.model.errors import ConfigError, LimitError, RecipeError
from matrixgen.model.jobs import QuarantineMark
from matrixgen.pipeline import generate_from_files
from matrixgen.systems.gitlab.emitter import (
    PLACEHOLDER_JOB,
    emit_gitlab,
    gitlab_duration,
    job_names,
    job_script,
    shell_quote,
)
from matrixgen.systems.gitlab.limits import GITLAB_MAX_CHILD_YAML_BYTES, RESERVED_NAMES
from tests import realvalidators as rv
from tests.emit_fixtures import (
    HOSTILE,
    PWNED,
    V2_TREE,
    WEIRD_VALUE,
    bare_settings,
    make_job,
    target_jobs,
    tree_files,
)


def pipeline(name: str) -> dict:
    _, jobs, settings = target_jobs(name)
    return yaml.safe_load(emit_gitlab(jobs, settings).text)


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2700, "45m"), (5400, "1h 30m"), (3600, "1h"), (90, "1m 30s"), (7261, "2h 1m 1s"), (1, "1s")],
)
def test_gitlab_duration(seconds: int, text: str) -> None:
    assert gitlab_duration(seconds) == text


@given(st.integers(min_value=1, max_value=10 * 24 * 3600))
def test_duration_reads_back_as_the_same_seconds(seconds: int) -> None:
    units = {"h": 3600, "m": 60, "s": 1}
    parts = gitlab_duration(seconds).split(" ")
    assert sum(int(p[:-1]) * units[p[-1]] for p in parts) == seconds
    assert [p[-1] for p in parts] == sorted((p[-1] for p in parts), key="hms".index)


# --------------------------------------------------------------------------- job shape


def test_jobs_carry_stage_image_tags_timeout_script_retry_artifacts() -> None:
    doc = pipeline("gl-mr-h100")
    assert doc["stages"] == ["gpt", "odd"]  # one per model, sorted
    jobs = {k: v for k, v in doc.items() if k != "stages"}
    assert set(jobs) == {
        "gpt3_tp1_dev_dgx_h100",
        "gpt3_tagged_dev_dgx_h100_latest",
        "gpt3_tagged_dev_dgx_h100_legacy",
        f"{HOSTILE}_dev_dgx_h100",
        "odd_env_dev_dgx_h100",
    }
    job = jobs["gpt3_tp1_dev_dgx_h100"]
    assert job["stage"] == "gpt"
    assert job["image"] == "registry.example.com/ci:26.09-amd64"  # images.gitlab.amd64
    assert job["tags"] == ["h100-runner"]  # platforms.dgx_h100.runner_tags
    assert job["timeout"] == "3h 45m"  # 5 repeats of 45 minutes
    assert job["needs"] == []  # start at once: stages only group
    assert job["retry"] == {"max": 1, "when": ["runner_system_failure"]}
    assert job["artifacts"] == {"paths": ["results/"], "when": "always", "expire_in": "1 week"}
    assert job["variables"] == {"NVTE_FLASH_ATTN_V4": "0"}
    assert "allow_failure" not in job
    assert shlex.split(job["script"][0]) == [
        "echo",
        "launched",
        "--model",
        "gpt",
        "--test-case",
        "gpt3_tp1",
        "--environment",
        "dev",
        "--platform",
        "dgx_h100",
        "--n-repeat",
        "5",
        "--time-limit",
        "2700",
        "--nodes",
        "1",
        "--gpus",
        "8",
        "--build",
        "mcore-pyt-dev",
        "--",
        "--flash-attention-version",
        "2",
    ]
    tagged = jobs["gpt3_tagged_dev_dgx_h100_legacy"]
    assert tagged["timeout"] == "7h 30m"  # 5 repeats of 90 minutes
    assert shlex.split(tagged["script"][0])[10:12] == ["--tag", "legacy"]


def test_arm64_platform_gets_the_arm64_pin_and_parent_and_warmup_needs() -> None:
    doc = pipeline("gl-mr-gb200")
    jobs = {k: v for k, v in doc.items() if k != "stages"}
    assert {j["image"] for j in jobs.values()} == {"registry.example.com/ci:26.09-arm64"}
    parent = {"pipeline": "$PARENT_PIPELINE_ID", "job": "build-image"}
    first, *others = jobs  # the warm-up job is the first job
    assert jobs[first]["needs"] == [parent]
    for name in others:
        assert jobs[name]["needs"] == [parent, first]


def test_target_settings_override_system_settings() -> None:
    doc = pipeline("gl-nightly-h100-lts")
    (name,) = [k for k in doc if k != "stages"]
    job = doc[name]
    assert job["image"] == "custom/lts:26.09-py3"  # the target's own image, not the pin
    assert job["timeout"] == "2h"  # the target's timeout: 7200 s, not the job's 2701
    assert job["allow_failure"] is True  # the recipe's allow_failure: [true]
    assert job["retry"]["max"] == 1  # still the system's retry


def test_values_with_dollar_are_not_expanded_by_gitlab() -> None:
    doc = pipeline("gl-mr-h100")
    assert doc["odd_env_dev_dgx_h100"]["variables"]["WEIRD"] == {
        "value": WEIRD_VALUE,
        "expand": False,
    }


def test_default_retry_and_launcher_without_config() -> None:
    settings = bare_settings(retry=None)
    doc = yaml.safe_load(emit_gitlab([make_job()], settings).text)
    job = doc["case_dev_dgx_h100"]
    assert job["retry"]["max"] == 2
    assert "script_failure" not in job["retry"]["when"]  # a failing test stays red
    assert "image" not in job and "tags" not in job


def test_recipe_launcher_wins_unless_forced() -> None:
    job = make_job(spec={"launcher": "bash custom_launch.sh"})
    assert job_script(job, bare_settings().own.launcher_for(job)).startswith(
        "bash custom_launch.sh "
    )
    forced = bare_settings(launcher="echo", launcher_forced=True)
    assert job_script(job, forced.own.launcher_for(job)).startswith("echo ")


# --------------------------------------------------------------------------- quoting


@given(st.text(alphabet=st.characters(exclude_characters="\x00"), min_size=1))
def test_quoting_round_trips_through_a_posix_word_split(value: str) -> None:
    # shlex.split follows POSIX quoting, except the $(printf) spelling of backticks.
    if "`" not in value:
        assert shlex.split(shell_quote(value)) == [value]
    else:
        assert "`" not in shell_quote(value)


# What a recipe value can hold on its way to a shell: any character but NUL
# (the YAML loader refuses it: no argument can carry one) and the surrogates
# U+D800-DFFF (no UTF-8 text, and so no recipe, holds one; see the tests below).
SHELL_CARRIABLE = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab ;&|$()`'\"\\\n*?<>{}[]#~!=%^-")) | SHELL_CARRIABLE,
        min_size=1,
        max_size=40,
    )
)
def test_a_real_shell_gets_every_value_as_one_argument(tmp_path_factory, value: str) -> None:
    where = tmp_path_factory.mktemp("sh")
    job = make_job(value, tag=value, args=(value, "--x"), name="n")
    script = job_script(job, "printf '%s\\0'")
    out = subprocess.run(
        ["sh", "-c", script], cwd=where, capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    words = out.split("\0")[:-1]
    # A launcher built on argparse reads back every value as given, even one
    # that starts with "-" (`--test-case --model` would be two options to it).
    parsed = launcher_parser().parse_args(words)
    assert parsed.test_case == value and parsed.tag == value
    assert parsed.model == "gpt" and parsed.n_repeat == 1
    assert parsed.rest == [value, "--x"]
    assert list(where.iterdir()) == []  # nothing ran that made a file


def launcher_parser() -> argparse.ArgumentParser:
    """The options job_script passes, as a launcher written with argparse reads them."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for flag in ("--model", "--test-case", "--environment", "--platform", "--tag", "--build"):
        parser.add_argument(flag)
    parser.add_argument("--n-repeat", type=int)
    parser.add_argument("--time-limit", type=int)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--gpus", type=int)
    parser.add_argument("--deselect", action="append", default=[])
    parser.add_argument("rest", nargs="*")
    return parser


UNCARRIABLE_RECIPE = """\
type: basic
format_version: 1
maintainers: [x]
loggers: [stdout]
spec:
  name: "{test_case}_{environment}_{platforms}"
  model: gpt
  build: mcore
  nodes: 1
  gpus: 8
  platforms: dgx_h100
  script: echo
products:
  - test_case: [ok]
    products:
      - environment: [dev]
        scope: [mr]
        tag: [VALUE]
"""


@pytest.mark.parametrize(
    ("written", "column", "message"),
    [
        ('"bad\\0case"', 15, "NUL character"),
        ('"bad\\x00case"', 15, "NUL character"),
        ('"bad\\ud800case"', 21, "invalid Unicode character escape"),
        ('"bad\\udfffcase"', 21, "invalid Unicode character escape"),
    ],
)
def test_a_value_no_shell_can_carry_is_refused_with_its_location(
    tmp_path: Path, cli, written: str, column: int, message: str
) -> None:
    # A double-quoted escape is the only way to write NUL or a lone surrogate in
    # UTF-8 YAML: generate refuses the file, pointing at the value, writes nothing.
    root = tmp_path / "recipes"
    root.mkdir()
    (root / "a.yaml").write_text(UNCARRIABLE_RECIPE.replace("VALUE", written))
    run = cli("generate", "--recipes", root, "--out", tmp_path / "out")
    assert run.code == 1, run
    assert f"a.yaml:18:{column}: error:" in run.err and message in run.err, run
    assert "Traceback" not in run.err
    assert not (tmp_path / "out").exists()


def test_a_surrogate_encoded_as_bytes_is_refused_as_not_utf8(tmp_path: Path, cli) -> None:
    root = tmp_path / "recipes"
    root.mkdir()
    text = UNCARRIABLE_RECIPE.replace("VALUE", "bad")
    (root / "a.yaml").write_bytes(text.encode().replace(b"bad", b"b\xed\xa0\x80d"))
    run = cli("generate", "--recipes", root, "--out", tmp_path / "out")
    assert run.code == 1 and "a.yaml: error: not UTF-8 text" in run.err, run
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["-x", "--model", "--n-repeat=0", "-1", "-"])
def test_values_that_look_like_options_stay_values(value: str) -> None:
    mark = QuarantineMark(id="q", tracker="#1", action="deselect", kind="flaky", node_ids=(value,))
    job = make_job(value, tag=value, build=value, model=value, quarantine=mark)
    parsed = launcher_parser().parse_args(shlex.split(job_script(job, "run"))[1:])
    assert (parsed.model, parsed.test_case, parsed.tag, parsed.build) == (value,) * 4
    assert parsed.deselect == [] and parsed.n_repeat == 1  # node ids: the plugin's


def test_hostile_name_is_one_argument_in_the_emitted_script(tmp_path: Path) -> None:
    doc = pipeline("gl-mr-h100")
    script = doc[f"{HOSTILE}_dev_dgx_h100"]["script"][0]
    assert script.startswith("echo launched ")
    out = subprocess.run(
        ["bash", "-c", script.replace("echo launched", "printf '%s\\n'", 1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[3] == HOSTILE
    assert not any((tmp_path / p).exists() for p in PWNED)


# --------------------------------------------------------------------------- YAML 1.1


def psych_scalar(text: str) -> object:
    """What Ruby's Psych (GitLab's YAML reader) makes of a plain scalar: a port of
    Psych::ScalarScanner#tokenize (kinds stand in for the Ruby values)."""
    if text == "":
        return None
    wordlike = r"[^\d.:-]?[A-Za-z_\s!@#$%^&*(){}<>|/\\~;=]+"
    if re.match(wordlike, text) or "\n" in text:
        if len(text) > 5 or re.match(r"[^ytonf~]", text, re.I):
            return text
        if text == "~" or re.fullmatch("null", text, re.I):
            return None
        if re.fullmatch("yes|true|on", text, re.I) or re.fullmatch("no|false|off", text, re.I):
            return "bool"
        return text
    time = r"-?\d{4}-\d{1,2}-\d{1,2}(?:[Tt]|\s+)\d{1,2}:\d\d:\d\d(?:\.\d*)?"
    if re.match(time, text) or re.fullmatch(
        r"\d{4}-(?:1[012]|0\d|\d)-(?:[12]\d|3[01]|0\d|\d)", text
    ):
        return "time"
    if re.fullmatch(r"-?\.inf|\.nan", text, re.I) or re.match(":.", text):
        return "special"
    if re.fullmatch(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?", text):
        return "sexagesimal"
    float_ = r"[-+]?([0-9][0-9_,]*)?\.[0-9]*([eE][-+][0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
    if re.fullmatch(float_, text) and not re.fullmatch(r"[-+]?\.", text):
        return "float"
    integer = r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
    if re.fullmatch(integer, re.sub("[,_]", "", text)):
        return "int"
    return text


@pytest.mark.parametrize(
    "value", ["0,1,2,3", "1,000", "01:30", ":x", "yEs", "nO", "1,0.5", "0", "on", "~", "-1"]
)
def test_values_gitlab_would_not_read_as_text_are_quoted(value: str) -> None:
    assert psych_scalar(value) != value  # the port agrees: written plain, they change
    job = make_job(env=(("CUDA_VISIBLE_DEVICES", value),), tag=value)
    text = emit_gitlab([job], bare_settings()).text
    line = next(x for x in text.splitlines() if x.strip().startswith("CUDA_VISIBLE_DEVICES:"))
    assert line.split(": ", 1)[1] in (f"'{value}'", f'"{value}"'), line
    assert yaml.safe_load(text)[job.name]["variables"]["CUDA_VISIBLE_DEVICES"] == value


@given(st.text(alphabet=st.sampled_from(list("0189,:._-+eExobyYnNtTfFlL~ aZ$")), max_size=8))
def test_every_plain_scalar_reads_back_as_text_in_yaml_1_1(value: str) -> None:
    text = dump_yaml({"k": value})
    scalar = text.split(": ", 1)[1].rstrip("\n") if ": " in text else ""
    if scalar[:1] not in ("'", '"'):
        assert psych_scalar(scalar) == value, text
    assert yaml.safe_load(text) == {"k": value}


def _representer_dump(document: object) -> str:
    """The reference: PyYAML's own representer and serializer, strings quoted
    where a YAML 1.1 reader would not read them as text, never an alias."""
    from matrixgen.emit.yamltext import read_as_text_by_yaml11
    from matrixgen.util.escape import YAML_WIDTH, yaml_double_quoted, yaml_for_log

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Reference(base):  # type: ignore[misc, valid-type]
        def ignore_aliases(self, data: object) -> bool:
            return True

    def represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        if yaml_double_quoted(value):
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
        if read_as_text_by_yaml11(value):
            return dumper.represent_str(value)
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")

    Reference.add_representer(str, represent_str)
    return yaml_for_log(
        yaml.dump(
            document,
            Dumper=Reference,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=YAML_WIDTH,
        )
    )


_PLAIN_DATA = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(max_size=12)
    | st.sampled_from(["on", "1:30", "0x1F", "- a", "a: b", "#c", "x\ny", "", " s", "é\u2028"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=6), _PLAIN_DATA, max_size=5))
def test_dump_yaml_writes_what_the_representer_would(document: dict) -> None:
    """Events fed straight to the emitter give the bytes PyYAML's representer
    and serializer give (shared values included: written out, never aliased)."""
    shared = ["a", "b"]
    document = {**document, "x": shared, "y": shared}
    assert dump_yaml(document) == _representer_dump(document)
    assert yaml.safe_load(dump_yaml(document)) == document


# --------------------------------------------------------------------------- names


def test_name_collisions_add_tag_then_environment_then_platform() -> None:
    jobs = [
        make_job(name="same", tag="a"),
        make_job(name="same", tag="b"),
        make_job(name="other", environment="lts"),
        make_job(name="other", environment="dev", platform="dgx_gb200"),
        make_job(name="plat", platform="p1"),
        make_job(name="plat", platform="p2"),
    ]
    assert job_names(jobs) == [
        "same_a",
        "same_b",
        "other_lts",
        "other_dev",
        "plat_dev_p1",
        "plat_dev_p2",
    ]


def test_reserved_and_hidden_names_are_never_used() -> None:
    reserved = sorted(RESERVED_NAMES)[:3]
    jobs = [make_job(name=n) for n in reserved] + [make_job(name=".hidden")]
    with pytest.raises(LimitError):  # ".hidden" with a suffix still starts with "."
        job_names(jobs)
    names = job_names(jobs[:3])
    assert names == [f"{n}_dev" for n in reserved]


def test_unresolvable_collision_is_a_limit_error_not_an_overwrite(cli: Callable, tree) -> None:
    twins = [make_job(name="twin", cadence=("pr",)), make_job(name="twin", cadence=("nightly",))]
    with pytest.raises(LimitError, match="no unique GitLab job name"):
        job_names(twins)
    # End to end: two models' cases of one name (a v1 tree only warns about it).
    recipe = """
                type: basic
                format_version: 1
                spec: {name: twin, model: MODEL, build: b, platforms: p}
                products:
                  - test_case: [twin]
                    products:
                      - {environment: [dev], scope: [mr]}
            """
    root = tree(
        {
            "_build.yaml": "type: build\nformat_version: 1\nspec: {name: b}\n",
            "a.yaml": recipe.replace("MODEL", "m1"),
            "b.yaml": recipe.replace("MODEL", "m2"),
        }
    )
    run = cli("gitlab", "--recipes", root, "--target", "scope=mr,platform=p,environment=dev")
    assert run.code == 4, run
    assert "no unique GitLab job name" in run.err and "Traceback" not in run.err


@pytest.mark.parametrize(("count", "more"), [(5, ""), (6, "; and 1 more"), (8, "; and 3 more")])
def test_a_collision_error_names_five_jobs_and_counts_the_rest(count: int, more: str) -> None:
    twins = [make_job(f"case{i}", name="twin") for i in range(count)]
    with pytest.raises(LimitError) as info:
        job_names(twins)
    message = str(info.value)
    assert message.startswith(f"{count} job(s) cannot be written to a GitLab child pipeline: ")
    named = re.findall(r"gpt/(case\d) on dgx_h100/dev gets no unique GitLab job name", message)
    assert named == [f"case{i}" for i in range(5)]
    assert f"){more}. Give them distinct, shorter names" in message


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "a_x", "a_x_dev"]),
            st.sampled_from([None, "x", "y"]),
            st.sampled_from(["dev", "lts"]),
            st.sampled_from(["p", "q"]),
        ),
        max_size=12,
        unique=True,
    ),
    st.randoms(use_true_random=False),
)
def test_names_are_unique_and_independent_of_order(specs, rnd) -> None:
    jobs = [make_job(name=n, tag=t, environment=e, platform=p) for n, t, e, p in specs]
    try:
        names = job_names(jobs)
    except LimitError:
        shuffled = jobs[:]
        rnd.shuffle(shuffled)
        with pytest.raises(LimitError):
            job_names(shuffled)
        return
    assert len(set(names)) == len(names)
    for job, name in zip(jobs, names, strict=True):
        assert name.startswith(job.name)
    order = list(range(len(jobs)))
    rnd.shuffle(order)
    again = job_names([jobs[i] for i in order])
    assert again == [names[i] for i in order]


def test_long_names_are_refused() -> None:
    with pytest.raises(LimitError, match="at most 255"):
        job_names([make_job(name="n" * 256)])
    assert job_names([make_job(name="n" * 255)]) == ["n" * 255]
    warmup = bare_settings(warmup=True)
    jobs = [make_job("a", name="a" * 129), make_job("b", name="b")]
    with pytest.raises(LimitError, match="at most 128"):
        emit_gitlab(jobs, warmup)
    with pytest.raises(LimitError, match="at most 128"):
        emit_gitlab([make_job()], bare_settings(parent_job="p" * 129))
    # 128 characters is the limit itself: a name of that length may be needed.
    jobs = [make_job("a", name="a" * 128), make_job("b", name="b")]
    doc = yaml.safe_load(emit_gitlab(jobs, bare_settings(warmup=True, parent_job="p" * 128)).text)
    assert {"job": "p" * 128, "pipeline": "$PARENT_PIPELINE_ID"} in doc["b"]["needs"]
    assert "a" * 128 in doc["b"]["needs"]


def test_warmup_prefers_a_job_that_may_not_fail() -> None:
    jobs = [make_job("a", allow_failure=True, name="a"), make_job("b", name="b")]
    doc = yaml.safe_load(emit_gitlab(jobs, bare_settings(warmup=True)).text)
    assert doc["b"]["needs"] == [] and doc["a"]["needs"] == ["b"]


@pytest.mark.parametrize("first_sure", [0, 1, 299])
def test_the_warmup_job_never_waits_for_itself_wherever_it_is(first_sure: int) -> None:
    # Past 256 jobs too, where two equal positions are two int objects.
    jobs = [make_job(f"c{i:03}", name=f"c{i:03}", allow_failure=i < first_sure) for i in range(300)]
    doc = yaml.safe_load(emit_gitlab(jobs, bare_settings(warmup=True)).text)
    warmup = f"c{first_sure:03}"
    assert doc[warmup]["needs"] == []
    assert all(doc[j.name]["needs"] == [warmup] for j in jobs if j.name != warmup)


def test_a_lone_job_has_no_warmup_so_its_name_is_never_needed() -> None:
    # Past the 128 characters a need may name: fine, as no other job waits for it.
    doc = yaml.safe_load(emit_gitlab([make_job(name="a" * 129)], bare_settings(warmup=True)).text)
    assert doc["a" * 129]["needs"] == []


def test_a_targets_gitlab_settings_cannot_be_changed() -> None:
    # One value is shared by every job of a target.
    own = bare_settings(warmup=True).own
    with pytest.raises(AttributeError):
        own.warmup = False  # type: ignore[misc,union-attr]


def test_recipe_needs_become_gitlab_needs() -> None:
    twins = [make_job("a", name="a", tag="x"), make_job("a", name="a", tag="y")]
    spec = {"model": "gpt", "needs": ["a", "ext-job", "{model}-setup"]}  # the merged spec
    waiting = make_job("b", name="b", spec=spec)
    setup = make_job("s", name="gpt-setup")
    settings = bare_settings(external_needs=frozenset({"ext-job"}), parent_job="ext-job")
    doc = yaml.safe_load(emit_gitlab([*twins, waiting, setup], settings).text)
    parent = {"pipeline": "$PARENT_PIPELINE_ID", "job": "ext-job"}
    # The recipe's name "a" is the GitLab job "a_x" now; the parent need is not doubled;
    # a need is a template over the job's fields, like its name.
    assert doc["b"]["needs"] == [parent, "a_x", "gpt-setup"]
    assert doc["a_x"]["needs"] == [parent]
    for needs, complaint in ((["zzz"], "no job of target t"), (["b"], "the job itself")):
        lonely = make_job("b", name="b", spec={"needs": needs})
        with pytest.raises(RecipeError) as info:
            emit_gitlab([lonely], bare_settings())
        assert complaint in str(info.value) and f'"{needs[0]}"' in str(info.value)


def test_a_job_needs_at_most_50_jobs() -> None:
    needed = [make_job(f"n{i:02d}", name=f"n{i:02d}") for i in range(50)]
    waiting = make_job("w", name="w", spec={"needs": [j.name for j in needed]})
    doc = yaml.safe_load(emit_gitlab([*needed, waiting], bare_settings()).text)
    assert doc["w"]["needs"] == [j.name for j in needed]  # GitLab's limit, reached
    # One more (the parent pipeline's job) is past it.
    with pytest.raises(LimitError, match=r"job w would need 51 jobs \(at most 50\)"):
        emit_gitlab([*needed, waiting], bare_settings(parent_job="build-image"))


def test_stages_come_after_the_stages_they_need() -> None:
    # GitLab refuses a need on a job of a later stage: the warm-up job's model
    # ("moe", the first job that may not fail) and a needed model move first.
    jobs = [
        make_job("a", name="a", model="bert", allow_failure=True),
        make_job("b", name="b", model="gpt", spec={"needs": ["c"]}, allow_failure=True),
        make_job("c", name="c", model="moe"),
    ]
    doc = yaml.safe_load(emit_gitlab(jobs, bare_settings(warmup=True)).text)
    assert doc["stages"] == ["moe", "bert", "gpt"]
    assert doc["a"]["needs"] == ["c"] and doc["b"]["needs"] == ["c"]
    plain = yaml.safe_load(emit_gitlab(jobs, bare_settings()).text)
    assert plain["stages"] == ["bert", "moe", "gpt"]  # sorted, but gpt after what it needs
    looped = [
        make_job("b", name="b", model="gpt", spec={"needs": ["c"]}),
        make_job("c", name="c", model="moe", spec={"needs": ["d"]}),
        make_job("d", name="d", model="gpt"),
    ]
    with pytest.raises(LimitError, match="gpt, moe need each other"):
        emit_gitlab(looped, bare_settings())


def test_child_yaml_over_5_mb_is_refused() -> None:
    big = ("x" * 100_000,)
    jobs = [
        make_job(f"c{i}", name=f"c{i}", args=big)
        for i in range(GITLAB_MAX_CHILD_YAML_BYTES // 100_000 + 1)
    ]
    with pytest.raises(LimitError, match="5,000,000"):
        emit_gitlab(jobs, bare_settings())
    assert len(emit_gitlab(jobs[:40], bare_settings()).text) < GITLAB_MAX_CHILD_YAML_BYTES


# --------------------------------------------------------------------------- quarantine


def mark(action: str, node_ids: tuple[str, ...] = ()) -> QuarantineMark:
    return QuarantineMark(
        id=f"q-{action}", tracker="#7201", action=action, kind="flaky", node_ids=node_ids
    )


def test_quarantine_marks_reach_the_jobs() -> None:
    jobs = [
        make_job("allowed", name="allowed", quarantine=mark("allow-failure")),
        make_job("desel", name="desel", quarantine=mark("deselect", ("t.py::a b", "t.py::c"))),
        make_job("skipped", name="skipped", quarantine=mark("skip")),
        make_job("plain", name="plain"),
    ]
    doc = yaml.safe_load(emit_gitlab(jobs, bare_settings()).text)
    assert "skipped" not in doc  # a skip entry takes the job out
    assert doc["allowed"]["allow_failure"] is True
    assert doc["allowed"]["variables"] == {"MATRIXGEN_QUARANTINE": "q-allow-failure #7201"}
    assert "allow_failure" not in doc["desel"]  # deselect keeps the job blocking
    # A deselect reaches the pytest plugin (an exact match), never the
    # launcher's --deselect (pytest's prefix match).
    variables = doc["desel"]["variables"]
    assert variables["MATRIXGEN_QUARANTINE"] == "$CI_PROJECT_DIR/quarantine.yaml"
    assert variables["MATRIXGEN_QUARANTINE_ENTRY"] == "q-deselect #7201"
    assert variables["MATRIXGEN_SYSTEM"] == "gitlab"
    assert "--deselect" not in shlex.split(doc["desel"]["script"][0])
    assert "variables" not in doc["plain"] and "allow_failure" not in doc["plain"]


def test_quarantine_variable_cannot_be_shadowed_by_env() -> None:
    job = make_job(env=(("MATRIXGEN_QUARANTINE", "x"),), quarantine=mark("allow-failure"))
    with pytest.raises(Exception, match="reserved"):
        emit_gitlab([job], bare_settings())


# --------------------------------------------------------------------------- empty, config


def test_empty_selection_gives_a_placeholder_pipeline() -> None:
    doc = pipeline("gl-nightly-gb200-lts")
    assert set(doc) == {"stages", PLACEHOLDER_JOB}
    job = doc[PLACEHOLDER_JOB]
    assert job["stage"] in doc["stages"]
    assert "gl-nightly-gb200-lts" in job["script"][0]
    assert job["tags"] == ["gb200-runner"]  # runs where the target's runners are


def test_image_pinned_per_arch_needs_the_platform_arch(tree) -> None:
    config = V2_TREE["matrixgen.yaml"].replace("{arch: arm64, runner_tags: [gb200-runner]}", "{}")
    gen = generate_from_files(tree_files({**V2_TREE, "matrixgen.yaml": config}))
    target = gen.tree.config.target("gl-mr-gb200")
    with pytest.raises(ConfigError) as info:
        resolve_settings(target, gen.tree.config, gen.jobs_for(target))
    assert "platforms.dgx_gb200.arch" in str(info.value)
    assert re.search(r"matrixgen\.yaml:\d+:\d+", str(info.value))


def test_per_environment_image_pins_win_for_their_environment() -> None:
    config = V2_TREE["matrixgen.yaml"].replace(
        "    systems:",
        "      environments:\n"
        "        lts:\n"
        "          gitlab:\n"
        "            amd64: {repository: registry.example.com/lts, tag: 26.09-lts}\n"
        "    systems:",
    )
    gen = generate_from_files(tree_files({**V2_TREE, "matrixgen.yaml": config}))
    jobs = [j for j in gen.jobs if j.scope == "mr" and j.platform == "dgx_h100"][:1]
    lts = [msgspec.structs.replace(jobs[0], environment="lts")]
    gb = [msgspec.structs.replace(jobs[0], environment="lts", platform="dgx_gb200")]
    target = gen.tree.config.target("gl-mr-h100")
    settings = resolve_settings(target, gen.tree.config, [*jobs, *lts, *gb])
    assert settings.image(jobs[0]) == "registry.example.com/ci:26.09-amd64"
    assert settings.image(lts[0]) == "registry.example.com/lts:26.09-lts"
    assert settings.image(gb[0]) == "registry.example.com/ci:26.09-arm64"  # no lts arm64 pin


def test_bad_settings_are_config_errors(tree, cli: Callable) -> None:
    config = V2_TREE["matrixgen.yaml"].replace(
        "retry: {max: 1, when: [runner_system_failure]}", "retry: {max: 3}"
    )
    root = tree({**V2_TREE, "matrixgen.yaml": config})
    run = cli("gitlab", "--recipes", root, "--target-name", "gl-mr-h100")
    assert run.code == 3, run
    assert "retry" in run.err and "matrixgen.yaml:" in run.err


# --------------------------------------------------------------------------- CLI


def test_gitlab_command_writes_one_target(tree, cli: Callable, tmp_path: Path) -> None:
    root = tree(V2_TREE)
    out = tmp_path / "child.yml"
    run = cli("gitlab", "--recipes", root, "--target-name", "gl-mr-h100", "--output", out)
    assert run.code == 0, run
    assert out.read_text() == emit_gitlab(*target_jobs("gl-mr-h100")[1:]).text
    stdout = cli(
        "gitlab", "--recipes", root, "--target", "scope=mr,platform=dgx_h100,environment=dev"
    )
    assert stdout.code == 0
    assert yaml.safe_load(stdout.out).keys() == yaml.safe_load(out.read_text()).keys()
    wrong = cli("gitlab", "--recipes", root, "--target-name", "gh-l1-h100")
    assert wrong.code == 2 and "github target" in wrong.err
    assert cli("gitlab", "--recipes", root).code == 2
    unknown = cli("gitlab", "--recipes", root, "--target-name", "gl-mr-h10")
    assert unknown.code == 2 and 'did you mean "gl-mr-h100"' in unknown.err
    empty = cli("gitlab", "--recipes", root, "--target-name", "gl-mr-h100", "--launcher", " ")
    assert empty.code == 2 and "--launcher: give a command" in empty.err  # not silently ignored
    # --output below a file: say which path is in the way (mkdir says "File exists").
    (tmp_path / "plain").write_text("")
    blocked = cli(
        "gitlab",
        "--recipes",
        root,
        "--target-name",
        "gl-mr-h100",
        "--output",
        tmp_path / "plain" / "sub" / "child.yml",
    )
    assert blocked.code == 2, blocked
    assert f"{tmp_path / 'plain'} is a file, not a directory" in blocked.err


# --------------------------------------------------------------------------- gitlab-ci-local


def parent_pipeline(megatron: Path | None) -> dict:
    """A parent pipeline whose generator job runs matrixgen, and trigger jobs that
    include its artifacts as child pipelines."""
    mg = '"$MG_PYTHON" -m matrixgen'
    printf = shlex.quote('printf "weird[%s]\\n" "$WEIRD"; printf "arg[%s]\\n"')
    script = [
        f"{mg} gitlab --recipes recipes --target-name gl-mr-h100 --output args.yml"
        f" --launcher {printf}",
        f"{mg} generate --recipes recipes --out out",
    ]
    children = {"run-args": "args.yml", "run-lts": "out/gl-nightly-h100-lts.yml"}
    children["run-empty"] = "out/gl-nightly-gb200-lts.yml"
    if megatron is not None:
        script.append(
            f'{mg} gitlab --recipes "$MG_MEGATRON" --launcher echo --output megatron.yml'
            " --target scope=mr-slim,platform=dgx_h100,environment=dev"
        )
        children["run-megatron"] = "megatron.yml"
    doc: dict = {
        "stages": ["generate", "trigger"],
        "generate": {
            "stage": "generate",
            "script": script,
            "artifacts": {"paths": [*children.values()]},
        },
    }
    for job, artifact in children.items():
        doc[job] = {
            "stage": "trigger",
            "needs": ["generate"],
            "trigger": {
                "include": [{"artifact": artifact, "job": "generate"}],
                "strategy": "depend",
            },
        }
    return doc


@pytest.mark.slow
def test_generated_children_run_under_gitlab_ci_local(tmp_path: Path) -> None:
    rv.require_gitlab_ci_local()
    from tests.conftest import megatron_recipes_path, write_tree

    megatron = megatron_recipes_path()
    repo = tmp_path / "repo"
    write_tree(repo / "recipes", V2_TREE)
    (repo / ".gitlab-ci.yml").write_text(yaml.safe_dump(parent_pipeline(megatron), sort_keys=False))
    env = {"MG_PYTHON": sys.executable, "MG_MEGATRON": str(megatron or "")}
    result = rv.gitlab_ci_local_run(repo, env=env)
    assert result.ok, str(result)
    passed = set(result.passed_jobs)
    assert {"generate", "run-args", "run-lts", "run-empty"} <= passed, str(result)
    assert f"[run-args] -> {HOSTILE}_dev_dgx_h100" in passed
    assert f"[run-empty] -> {PLACEHOLDER_JOB}" in passed
    lines = result.stdout.splitlines()
    # The hostile test case arrived as one argument; the $-value as written.
    assert any(line.endswith(f"> arg[{HOSTILE}]") for line in lines), str(result)
    assert any(line.endswith(f"> weird[{WEIRD_VALUE}]") for line in lines), str(result)
    assert any("[run-lts] ->" in p and "gpt3_lts" in p for p in passed), str(result)
    assert any(
        line.endswith(
            "> launched --model gpt --test-case gpt3_lts --environment lts"
            " --platform dgx_h100 --n-repeat 5 --time-limit 2701 --nodes 1 --gpus 8 --build"
            " mcore-pyt-lts -- --flash-attention-version 2"
        )
        for line in lines
    )
    if megatron is not None:
        assert sum(p.startswith("[run-megatron] -> ") for p in passed) == 2, str(result)
    assert not [p for p in repo.rglob("pwned*")], "a quoted value was executed"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "a_dgx_h100", "stages", ".hidden", "x" * 256, "x" * 255]),
            st.sampled_from([None, "latest"]),
            st.sampled_from(["dev", "lts"]),
            st.sampled_from(["dgx_h100", "dgx_a100"]),
        ),
        max_size=6,
    )
)
@example([("stages", None, "dev", "dgx_h100")])
@example([(".hidden", None, "dev", "dgx_h100"), ("a", None, "dev", "dgx_h100")])
def test_jobs_named_as_they_are_have_no_name_problem(fields: list) -> None:
    """validate's GitLab-name check skips naming the jobs one by one only where
    naming them would find nothing, and does not skip a target of plainly
    distinct, usable names."""
    from matrixgen.model.jobs import Job
    from matrixgen.systems.gitlab.emitter import assign_names, name_problems, named_as_they_are

    jobs = [
        Job(
            model="gpt",
            test_case=f"tc{i}",
            environment=environment,
            platform=platform,
            tag=tag,
            scope="mr",
            cadence=("pr",),
            name=name,
            build=None,
            n_repeat=1,
            time_limit=60,
        )
        for i, (name, tag, environment, platform) in enumerate(fields)
    ]
    if named_as_they_are(jobs):
        assert name_problems(jobs) == []
        assert assign_names(jobs) == [j.name for j in jobs]
    else:
        names = [j.name for j in jobs]
        assert len(set(names)) < len(names) or {"stages", ".hidden", "x" * 256} & set(names)
