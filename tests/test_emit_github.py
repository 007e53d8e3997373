"""GitHub Actions matrices: rows, order, sharding past 256 rows and 1 MB,
quarantine marks, $GITHUB_OUTPUT, and the `github` command."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matrixgen.emit.common import EmitSettings
from matrixgen.model.errors import LimitError
from matrixgen.model.jobs import Job, QuarantineMark, Selector, Target
from matrixgen.model.vocab import System
from matrixgen.systems.github.emitter import GithubMatrix, compact, emit_github, shard_rows
from matrixgen.systems.github.limits import GITHUB_MAX_OUTPUT_BYTES
from matrixgen.systems.github.outputs import (
    append_github_outputs,
    github_output_text,
    heredoc_delimiter,
)
from tests.emit_fixtures import HOSTILE, V2_TREE, target_jobs


def make_job(i: int = 0, **changes: object) -> Job:
    fields: dict = {
        "model": "gpt",
        "test_case": f"case{i:04d}",
        "environment": "dev",
        "platform": "dgx_h100",
        "tag": None,
        "scope": "L1",
        "cadence": ("pr",),
        "name": f"case{i:04d}_dev_dgx_h100",
        "build": None,
        "n_repeat": 5,
        "time_limit": 2700,
    }
    fields.update(changes)
    return Job(**fields)


def bare_settings(**changes: object) -> EmitSettings:
    target = Target(
        name="t",
        system=System.GITHUB,
        selector=Selector(scope="L1", platform="dgx_h100", environment="dev"),
    )
    return msgspec.structs.replace(EmitSettings(target=target), **changes)


def parse_github_output(text: str) -> dict[str, str]:
    """Read $GITHUB_OUTPUT the way the runner does: `k=v` lines and `k<<D` blocks."""
    out: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        if "<<" in line:
            key, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            else:
                raise AssertionError(f"unterminated heredoc {delimiter}")
            out[key] = "\n".join(body)
        else:
            key, value = line.split("=", 1)
            out[key] = value
    return out


# --------------------------------------------------------------------------- rows


def test_rows_of_a_configured_target() -> None:
    _, jobs, settings = target_jobs("gh-l1-h100")
    matrix = emit_github(jobs, settings)
    document = json.loads(matrix.text())
    assert list(document) == ["include"]
    rows = document["include"]
    assert [r["test_case"] for r in rows] == ["gpt3_tp1", HOSTILE]  # sorted
    row = rows[0]
    assert row == {
        "model": "gpt",
        "test_case": "gpt3_tp1",
        "name": "gpt3_tp1_dev_dgx_h100",
        "platform": "dgx_h100",
        "environment": "dev",
        "tag": "",
        "n_repeat": 5,
        "timeout": 225,  # 5 repeats of 45 minutes
        "nodes": 1,
        "gpus": 8,
        "image": "nvcr.io/nvidia/pytorch:26.09-py3",  # images.github
        "runner": ["h100-runner"],  # platforms.dgx_h100.runner_tags
        "env": {"NVTE_FLASH_ATTN_V4": "0"},
        "args": ["--flash-attention-version", "2"],
    }


def test_env_and_args_only_where_set_and_timeout_rounds_up() -> None:
    rows = emit_github(
        [
            make_job(1, time_limit=2701, n_repeat=1),
            make_job(2, time_limit=59, n_repeat=1, tag="latest"),
        ],
        bare_settings(),
    ).rows
    assert [r["timeout"] for r in rows] == [46, 1]
    assert rows[1]["tag"] == "latest"
    for row in rows:
        assert not {"env", "args", "image", "runner", "continue-on-error"} & set(row)
    rows = emit_github([make_job(1)], bare_settings(timeout=600)).rows
    assert rows[0]["timeout"] == 10  # the settings' timeout wins over the derived one
    rows = emit_github([make_job(1)], bare_settings(timeout_overhead=600)).rows
    assert rows[0]["timeout"] == 235  # 5 x 2700 s + 600 s


def mark(action: str, node_ids: tuple[str, ...] = ()) -> QuarantineMark:
    return QuarantineMark(
        id=f"q-{action}", tracker="#7734", action=action, kind="broken", node_ids=node_ids
    )


def test_quarantine_and_allow_failure_marks() -> None:
    jobs = [
        make_job(1, quarantine=mark("allow-failure")),
        make_job(2, quarantine=mark("deselect", ("t.py::x",))),
        make_job(3, quarantine=mark("skip")),
        make_job(4, allow_failure=True),
    ]
    rows = {r["test_case"]: r for r in emit_github(jobs, bare_settings()).rows}
    assert "case0003" not in rows  # skipped jobs are not in the matrix
    assert rows["case0001"]["continue-on-error"] is True
    assert rows["case0001"]["quarantine"] == {
        "id": "q-allow-failure",
        "tracker": "#7734",
        "action": "allow-failure",
        "kind": "broken",
    }
    assert "continue-on-error" not in rows["case0002"]
    assert rows["case0002"]["quarantine"]["id"] == "q-deselect"
    assert "deselect" not in rows["case0002"]  # pytest's --deselect matches by prefix
    assert rows["case0002"]["env"]["MATRIXGEN_QUARANTINE"] == "quarantine.yaml"
    assert rows["case0002"]["env"]["MATRIXGEN_TEST_CASE"] == "case0002"
    assert rows["case0004"]["continue-on-error"] is True
    assert "quarantine" not in rows["case0004"]


@settings(max_examples=30)
@given(st.permutations(list(range(12))))
def test_row_order_does_not_depend_on_input_order(order: list[int]) -> None:
    jobs = [make_job(i % 4, environment=("dev", "lts")[i % 2], tag=str(i // 4)) for i in range(12)]
    expected = emit_github(jobs, bare_settings()).text()
    assert emit_github([jobs[i] for i in order], bare_settings()).text() == expected


# --------------------------------------------------------------------------- sharding


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=700),
    max_rows=st.integers(min_value=1, max_value=300),
    pad=st.integers(min_value=0, max_value=400),
    max_bytes=st.integers(min_value=1_000, max_value=60_000),
)
def test_shards_respect_both_limits_and_keep_every_row(
    n: int, max_rows: int, pad: int, max_bytes: int
) -> None:
    rows = [{"name": f"r{i}", "pad": "x" * ((i * 7) % (pad + 1))} for i in range(n)]
    try:
        shards = shard_rows(rows, max_rows=max_rows, max_bytes=max_bytes)
    except LimitError:
        # Only when one row alone does not fit.
        assert max(len(compact({"include": [r]})) for r in rows) > max_bytes
        return
    assert [r for s in shards for r in s] == rows  # in order, none dropped or doubled
    for shard in shards:
        assert 1 <= len(shard) <= max_rows
        assert len(compact({"include": shard}).encode()) <= max_bytes
    sizes = [len(s) for s in shards]
    assert not sizes or max(sizes) - min(sizes) <= 1  # nearly equal shards
    if n and sum(len(compact(r)) + 1 for r in rows) + 20 <= max_bytes:
        assert len(shards) == -(-n // max_rows)  # the row limit alone decides


def test_past_256_jobs_the_file_holds_shards() -> None:
    jobs = [make_job(i) for i in range(600)]
    matrix = emit_github(jobs, bare_settings())
    document = json.loads(matrix.text())
    assert document["shards"] == 3 == len(document["matrices"])
    sizes = [len(m["include"]) for m in document["matrices"]]
    assert sizes == [200, 200, 200]
    names = [r["name"] for m in document["matrices"] for r in m["include"]]
    assert names == sorted(j.name for j in jobs)
    exactly = emit_github(jobs[:256], bare_settings())  # GitHub's limit, as it says it
    assert list(json.loads(exactly.text())) == ["include"]  # 256 rows: one matrix
    assert len(emit_github(jobs[:257], bare_settings()).shards) == 2


def test_past_1_mb_the_rows_are_sharded_by_size() -> None:
    big = tuple(("--pad", "y" * 10_000))  # ~10 kB per row, 150 rows: ~1.5 MB
    jobs = [make_job(i, args=big) for i in range(150)]
    matrix = emit_github(jobs, bare_settings())
    assert len(matrix.shards) == 2
    for name, value in matrix.outputs()[1:]:
        assert len(value.encode()) <= GITHUB_MAX_OUTPUT_BYTES, name
    assert len(matrix.rows) == 150


def test_one_row_over_1_mb_is_a_limit_error() -> None:
    with pytest.raises(LimitError, match="one row alone"):
        emit_github([make_job(0, args=("z" * GITHUB_MAX_OUTPUT_BYTES,))], bare_settings())


# --------------------------------------------------------------------------- outputs


def test_outputs_shape() -> None:
    empty = GithubMatrix(shards=())
    assert empty.outputs() == [("shards", "0"), ("matrix", '{"include":[]}')]
    assert json.loads(empty.text()) == {"include": []}
    matrix = emit_github([make_job(i) for i in range(300)], bare_settings())
    outputs = dict(matrix.outputs())
    assert list(outputs) == ["shards", "matrix", "matrix-1"]
    assert outputs["shards"] == "2"
    rows = json.loads(outputs["matrix"])["include"] + json.loads(outputs["matrix-1"])["include"]
    assert rows == matrix.rows


@given(st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=300))
def test_heredoc_delimiter_never_occurs_in_the_content(content: str) -> None:
    delimiter = heredoc_delimiter(content)
    assert delimiter not in content.splitlines()
    assert delimiter == heredoc_delimiter(content)  # same content, same delimiter
    assert re.fullmatch(r"ghadelimiter_[0-9a-f]{32}", delimiter)


def test_heredoc_delimiter_steps_around_a_hostile_line() -> None:
    content = "x"
    first = heredoc_delimiter(content)
    hostile = f"{content}\n{first}"
    assert heredoc_delimiter(hostile) not in hostile.splitlines()


def test_github_output_appends_and_reads_back(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "out"
    path.write_text("earlier=kept\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(path))
    matrix = emit_github([make_job(i) for i in range(300)], bare_settings())
    append_github_outputs(matrix.outputs())
    parsed = parse_github_output(path.read_text())
    assert parsed.pop("earlier") == "kept"
    assert parsed == dict(matrix.outputs())
    text = github_output_text([("k", "a\nb")])
    assert parse_github_output(text) == {"k": "a\nb"}


def test_github_output_never_joins_an_unterminated_line(tmp_path: Path, monkeypatch) -> None:
    # `echo -n k=v >> "$GITHUB_OUTPUT"` leaves no newline: appending right after it
    # would turn our first line into part of that value, and the runner would then
    # refuse the next line.
    path = tmp_path / "out"
    path.write_bytes(b"earlier=kept")
    monkeypatch.setenv("GITHUB_OUTPUT", str(path))
    matrix = emit_github([make_job(i) for i in range(3)], bare_settings())
    append_github_outputs(matrix.outputs())
    parsed = parse_github_output(path.read_text())
    assert parsed.pop("earlier") == "kept"
    assert parsed == dict(matrix.outputs())
    # A file that ends its lines gets no blank line in between.
    append_github_outputs(matrix.outputs())
    assert "\n\n" not in path.read_text()


def test_github_output_refuses_more_than_1_mb_per_job(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    jobs = [make_job(i, args=("y" * 10_000,)) for i in range(150)]
    with pytest.raises(LimitError, match="at most 1,000,000"):
        append_github_outputs(emit_github(jobs, bare_settings()).outputs())
    assert not (tmp_path / "out").exists()  # nothing half written


# --------------------------------------------------------------------------- CLI


def test_github_command(tree, cli: Callable, tmp_path: Path, monkeypatch) -> None:
    root = tree(V2_TREE)
    _, jobs, settings = target_jobs("gh-l1-h100")
    expected = emit_github(jobs, settings).text()
    run = cli("github", "--recipes", root, "--target-name", "gh-l1-h100")
    assert run.code == 0, run
    assert run.out == expected
    # An ad hoc target: the system defaults to github in the `github` command.
    adhoc = cli(
        "github", "--recipes", root, "--target", "scope=L1,platform=dgx_h100,environment=dev"
    )
    assert adhoc.code == 0 and json.loads(adhoc.out)["include"][0]["test_case"] == "gpt3_tp1"
    out = tmp_path / "m.json"
    assert (
        cli("github", "--recipes", root, "--target-name", "gh-l1-h100", "--output", out).code == 0
    )
    assert out.read_text() == expected
    gh_out = tmp_path / "gh_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(gh_out))
    assert (
        cli("github", "--recipes", root, "--target-name", "gh-l1-h100", "--github-output").code == 0
    )
    assert parse_github_output(gh_out.read_text())["matrix"] == expected.strip()
    monkeypatch.delenv("GITHUB_OUTPUT")
    unset = cli("github", "--recipes", root, "--target-name", "gh-l1-h100", "--github-output")
    assert unset.code == 2 and "GITHUB_OUTPUT" in unset.err


def test_github_command_usage_errors(tree, cli: Callable) -> None:
    root = tree(V2_TREE)
    assert cli("github", "--recipes", root).code == 2
    wrong = cli("github", "--recipes", root, "--target-name", "gl-mr-h100")
    assert wrong.code == 2 and "gitlab target" in wrong.err
    two = cli(
        "github", "--recipes", root, "--target-name", "gh-l1-h100", "--target-name", "gh-l0-gb200"
    )
    assert two.code == 2 and "one target at a time" in two.err
    bad = cli("github", "--recipes", root, "--target", "scope=L1,platfrom=dgx_h100")
    assert bad.code == 2 and 'did you mean "platform"' in bad.err
