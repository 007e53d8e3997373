"""Verdicts on the real runs of the fixture project, and on histories built here."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.model.errors import ExitCode
from matrixgen.results.flaky import FlakyPolicy, Verdict, flaky_rows, judge, rank
from matrixgen.results.store import History, JobKey, RunRow, open_store
from tests.results_fixtures import TODAY, Run

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "flaky.schema.json"
ASYNC = "tests/unit_tests/dist_checkpointing/test_async_save.py"
DATA = "tests/unit_tests/data/"


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)


def _flaky_json(capsys, store: Path, *extra: str) -> list[dict]:
    assert main(["results", "flaky", "--db", str(store), "--format", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_flaky_on_real_runs(capsys, evidence_store: Path, evidence_runs: list[Run]) -> None:
    rows = _flaky_json(capsys, evidence_store)
    got = [(r["verdict"], r["test_case"], r["node_id"], r["runs"], r["failures"]) for r in rows]
    assert got == [
        ("broken", DATA, f"{DATA}test_blend.py::test_blend_weights", 24, 9),
        ("flaky", ASYNC, f"{ASYNC}::TestAsyncSave::test_parallel_write_order", 24, 5),
        ("flaky", "gpt3_tp1_pp1", None, 24, 4),
        ("ok", DATA, f"{DATA}test_blend.py::test_blend_rejects_empty", 24, 0),
        ("ok", ASYNC, f"{ASYNC}::TestAsyncSave::test_async_is_equivalent_to_sync", 24, 0),
        ("ok", ASYNC, f"{ASYNC}::TestAsyncSave::test_roundtrip", 24, 0),
    ]  # fmt: skip
    broken, order, functional = rows[:3]
    # Broken since the sixth commit: its first run is the sixteenth.
    assert broken["broken_since"]["run_id"] == "9116"
    assert broken["broken_since"]["commit"] == evidence_runs[15].commit
    assert broken["flips"] == 1 and broken["passing_streak"] == 0
    # Seeds 3, 8, 13, 18, 23 fail; three runs per commit, so it failed and
    # passed on each of those commits.
    assert order["failures"] == 5 and order["flips"] == 9
    assert len(order["same_commit"]) == 5
    assert order["first_failure"]["run_id"] == "9104"
    assert order["last_failure"]["run_id"] == "9124"
    # The functional case: four real failures and six runs saved by a rerun.
    assert functional["rerun_passes"] == 6
    assert functional["model"] == "gpt" and functional["tag"] is None
    assert functional["scope"] == "mr" and functional["system"] == "gitlab"
    assert (
        "failed 4 of 24 runs on dgx_h100/dev (gitlab/mr) since 2026-11-02"
        in (functional["evidence"])
    )


def test_flaky_json_follows_its_schema(capsys, evidence_store: Path) -> None:
    import jsonschema

    rows = _flaky_json(capsys, evidence_store)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(rows)
    required = {"model", "test_case", "tag", "node_id", "platform", "environment", "scope"}
    assert required | {"runs", "failures", "flips", "rate", "verdict"} <= set(rows[0])


def test_flaky_filters_and_windows(capsys, evidence_store: Path, monkeypatch) -> None:
    assert [r["verdict"] for r in _flaky_json(capsys, evidence_store, "--verdict", "broken")] == [
        "broken"
    ]
    # Judged from 2026-11-24, the last 7 days hold runs 9120-9124 only (five runs):
    # the flaky test failed in two of them, the functional case in one.
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-11-24")
    rows = _flaky_json(capsys, evidence_store, "--since", "7")
    assert {r["runs"] for r in rows} == {5}
    args = ["--since", "7", "--min-runs", "6", "--format", "json"]
    assert main(["results", "flaky", "--db", str(evidence_store), *args]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert "6 key(s) with fewer than 6 run(s) left out" in err


def test_flaky_table_and_markdown(capsys, evidence_store: Path) -> None:
    assert main(["results", "flaky", "--db", str(evidence_store)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[2].startswith("broken   unit-tests  tests/unit_tests/data/[latest]")
    headers = "verdict model test_case node_id platform environment scope runs failures flips rate"
    assert out.splitlines()[0].split() == [*headers.split(), "first", "failure", "last", "failure"]
    # A test of a bucket that is one file is shown without that file again.
    row = next(line for line in out.splitlines() if "test_parallel_write_order" in line)
    assert row.count(ASYNC) == 1 and " ::TestAsyncSave::test_parallel_write_order " in row
    assert err.strip() == "6 key(s) over 24 run(s): 1 broken, 2 flaky, 3 ok"
    assert main(["results", "flaky", "--db", str(evidence_store), "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| verdict | case |")
    # Markdown markup in names is escaped: `_` would start emphasis.
    assert "| flaky | `gpt3_tp1_pp1` | dgx\\_h100/dev | gitlab/mr | 24 | 4 |" in lines[4]


def test_flaky_without_a_store_is_an_error(capsys, tmp_path: Path) -> None:
    assert main(["results", "flaky", "--db", str(tmp_path / "none.db")]) == ExitCode.RESULTS_STORE
    assert "no results store at" in capsys.readouterr().err


# --------------------------------------------------------------------------- pure

JOB = JobKey("gitlab", "mr", "dgx_h100", "dev", "gpt", "gpt3", "")


def _history(outcomes: list[tuple[bool, int]], commits: list[str | None]) -> tuple:
    runs = {i: RunRow(i, str(100 + i), commits[i], 1000 + i) for i in range(len(outcomes))}
    seq = tuple((1000 + i, i, failed, reruns) for i, (failed, reruns) in enumerate(outcomes))
    failures = sum(f for f, _ in outcomes)
    history = History(
        job=JOB,
        node_id=None,
        runs=len(outcomes),
        failures=failures,
        rerun_runs=sum(1 for _, r in outcomes if r),
        first_at=1000,
        last_at=1000 + len(outcomes) - 1,
        sequence=seq if failures or any(r for _, r in outcomes) else None,
    )
    return history, runs


@given(
    outcomes=st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=30),
    commit_every=st.integers(1, 4),
    broken_runs=st.integers(1, 5),
)
def test_verdict_rules(outcomes, commit_every, broken_runs) -> None:
    commits = [f"c{i // commit_every}" for i in range(len(outcomes))]
    history, runs = _history(outcomes, commits)
    policy = FlakyPolicy(broken_runs=broken_runs, flip_rate=0.1)
    row = judge(history, runs, policy)
    flags = [f for f, _ in outcomes]
    flips = sum(1 for a, b in itertools.pairwise(flags) if a != b)
    streak = len(flags) - next((i + 1 for i in range(len(flags) - 1, -1, -1) if not flags[i]), 0)
    mixed = {
        c
        for c in set(commits)
        if len({f for (f, r), cc in zip(outcomes, commits, strict=True) if cc == c}
               | {True for (f, r), cc in zip(outcomes, commits, strict=True) if cc == c and r})
        == 2
    }  # fmt: skip
    assert row.flips == (flips if history.sequence is not None else 0)
    if streak >= broken_runs:
        assert row.verdict is Verdict.BROKEN
        assert row.broken_since is not None
        assert row.broken_since.run_id == str(100 + len(flags) - streak)
    elif streak == len(flags):  # failed every run, fewer than broken_runs of them
        assert row.verdict is Verdict.FAILING
    elif mixed or (len(flags) > 1 and flips / (len(flags) - 1) > 0.1):
        assert row.verdict is Verdict.FLAKY
        assert set(row.same_commit) == mixed
    else:
        assert row.verdict is Verdict.OK


def test_a_rerun_pass_is_flaky_on_its_own() -> None:
    history, runs = _history([(False, 0)] * 9 + [(False, 1)], [f"c{i}" for i in range(10)])
    row = judge(history, runs, FlakyPolicy())
    assert (row.verdict, row.failures, row.rerun_passes, row.same_commit) == (
        Verdict.FLAKY,
        0,
        1,
        ("c9",),
    )


def test_rows_are_ranked_broken_flaky_ok_then_by_failures() -> None:
    rows = []
    for outcomes in ([(True, 0)] * 2 + [(False, 0)] * 8, [(False, 0)] * 7 + [(True, 0)] * 3,
                     [(True, 0), (False, 0)] * 5, [(False, 0)] * 10):  # fmt: skip
        history, runs = _history(outcomes, [None] * 10)
        rows.append(judge(history, runs, FlakyPolicy(flip_rate=0.2)))
    ranked = rank(rows)
    assert [r.verdict for r in ranked] == [Verdict.BROKEN, Verdict.FLAKY, Verdict.OK, Verdict.OK]
    assert [r.failures for r in ranked] == [3, 5, 2, 0]


def test_flaky_rows_reads_only_eventful_histories(evidence_store: Path) -> None:
    """Keys that always passed come back without a sequence (phase 2 skips them)."""
    from matrixgen.results.queries import histories

    store = open_store(str(evidence_store), write=False)
    try:
        _, found = histories(store, since=None)
        report = flaky_rows(store, FlakyPolicy(since_days=None))
    finally:
        store.close()
    assert {h.node_id: h.sequence is None for h in found if h.failures == 0 and not h.rerun_runs}
    assert all(h.sequence is None for h in found if h.failures == 0 and not h.rerun_runs)
    assert all(h.sequence is not None for h in found if h.failures or h.rerun_runs)
    assert len(report.rows) == 6


def test_flaky_names_scopes_in_the_trees_words(
    capsys, store_copy: Path, shipped_recipes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    # A nightly job's results are stored under its tier (results.mapping.job_key
    # keys a job by Job.scope, which for `nightly` is L2): as a nightly run stores them.
    with sqlite3.connect(store_copy) as conn:
        conn.execute("UPDATE jobs SET scope = 'L2'")
    monkeypatch.setenv("MATRIXGEN_RECIPES", str(store_copy.parent / "no-tree"))
    assert {r["scope"] for r in _flaky_json(capsys, store_copy)} == {"L2"}  # no tree: as stored
    # The shipped tree declares nightly: named so everywhere, L2 nowhere.
    got = _flaky_json(capsys, store_copy, "--recipes", str(shipped_recipes))
    assert {r["scope"] for r in got} == {"nightly"}
    assert all("(gitlab/nightly)" in r["evidence"] for r in got if r["failures"])
    assert (
        main(["results", "flaky", "--db", str(store_copy), "--recipes", str(shipped_recipes)]) == 0
    )
    out = capsys.readouterr().out
    assert "gitlab/nightly" in out and "L2" not in out
    # A tree without config writes legacy names (Megatron-LM's habit).
    bare = shipped_recipes.parent / "bare"
    bare.mkdir()
    got = _flaky_json(capsys, store_copy, "--recipes", str(bare))
    assert {r["scope"] for r in got} == {"nightly"}


def test_a_key_that_failed_every_run_it_has_is_never_ok(
    capsys, evidence_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Judged from 2026-11-24, the last 7 days hold runs 9120-9124: the blend test,
    # broken since run 9116, failed all five. Five runs are fewer than
    # --broken-runs 6, so not broken; but never ok: failing, ranked above the rest.
    monkeypatch.setenv("MATRIXGEN_TODAY", "2026-11-24")
    args = ["--since", "7", "--min-runs", "1", "--broken-runs", "6"]
    rows = _flaky_json(capsys, evidence_store, *args)
    first = rows[0]
    assert (first["verdict"], first["node_id"], first["runs"], first["failures"]) == (
        "failing",
        f"{DATA}test_blend.py::test_blend_weights",
        5,
        5,
    )
    assert [r["verdict"] for r in rows].count("failing") == 1
    order = ["broken", "failing", "flaky", "ok"]
    ranks = [order.index(r["verdict"]) for r in rows]
    assert ranks == sorted(ranks) and "ok" in {r["verdict"] for r in rows}
    assert main(["results", "flaky", "--db", str(evidence_store), *args]) == 0
    err = capsys.readouterr().err
    assert "1 failing (every run failed, fewer than --broken-runs 6)" in err
    # The boundary: with --broken-runs 5 the same five runs are broken.
    rows = _flaky_json(
        capsys, evidence_store, "--since", "7", "--min-runs", "1", "--broken-runs", "5"
    )
    assert rows[0]["verdict"] == "broken" and "failing" not in {r["verdict"] for r in rows}
    # The JSON, failing included, follows the schema.
    import jsonschema

    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(
        _flaky_json(capsys, evidence_store, *args)
    )


def test_failing_is_judged_on_a_single_run() -> None:
    history, runs = _history([(True, 0)], ["c0"])
    assert judge(history, runs, FlakyPolicy(broken_runs=3)).verdict is Verdict.FAILING
    assert judge(history, runs, FlakyPolicy(broken_runs=1)).verdict is Verdict.BROKEN
    # Ranked above ok and flaky, below broken.
    judged = [
        judge(*_history(outcomes, [None] * len(outcomes)), FlakyPolicy(broken_runs=3))
        for outcomes in (
            [(False, 0)] * 4,
            [(True, 0), (False, 0)] * 2,
            [(True, 0)] * 2,
            [(True, 0)] * 3,
        )
    ]
    assert [r.verdict for r in rank(judged)] == [
        Verdict.BROKEN,
        Verdict.FAILING,
        Verdict.FLAKY,
        Verdict.OK,
    ]


def test_an_empty_flaky_table_says_so(capsys, evidence_store: Path) -> None:
    # No key failed every run with fewer runs than --broken-runs at the defaults.
    assert main(["results", "flaky", "--db", str(evidence_store), "--verdict", "failing"]) == 0
    assert capsys.readouterr().out == "no key has this verdict\n"
    assert main(["results", "flaky", "--db", str(evidence_store), "--min-runs", "99"]) == 0
    assert capsys.readouterr().out == "no key has enough runs to judge\n"


# --------------------------------------------------------------------------- future results

_UNIT = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", "tests/unit_tests/", "", True)
_NODE = "tests/unit_tests/test_a.py::test_b"
_DAY = 86_400
# Seconds from now of a run's end: the past, within the clock skew allowed,
# just past it, next year, and 2099.
_OFFSETS = st.sampled_from([-10 * _DAY, -_DAY, 0, 299, 301, 3600, 365 * _DAY]) | st.just(
    4_070_908_800  # 2099-01-01, an absolute time: see _when
)


def _when(offset: int) -> Any:
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    if offset > 10**9:
        return dt.datetime.fromtimestamp(offset, dt.UTC)
    return now + dt.timedelta(seconds=offset)


def _store_runs(path: Path, outcomes: str, last_at: Any) -> None:
    """A run a day for each F/P of `outcomes` (the last one at `last_at`)."""
    import datetime as dt

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobResults, RunInfo

    store = open_store(str(path), write=True)
    try:
        now = dt.datetime.now(dt.UTC)
        for k, c in enumerate(outcomes):
            at = last_at if k == len(outcomes) - 1 else now - dt.timedelta(days=len(outcomes) - k)
            outcome = Outcome.FAILED if c == "F" else Outcome.PASSED
            test = Testcase(node_id=_NODE, classname="c", name="n", suite="", outcome=outcome,
                            duration=1.0)  # fmt: skip
            run = RunInfo(run_id=f"r{k}", commit=f"{k:040x}", finished_at=at)
            ingest(store, run, [JobResults(job=_UNIT, job_name="u", target="", testcases=(test,))])
    finally:
        store.close()


def _verdicts(path: Path) -> list[tuple[str | None, str, int]]:
    store = open_store(str(path), write=False)
    try:
        rows = flaky_rows(store, FlakyPolicy(since_days=30, min_runs=1), unit_jobs_whole=True).rows
    finally:
        store.close()
    return [(r.node_id, r.verdict.value, r.failures) for r in rows]


@settings(max_examples=12, deadline=None)
@given(outcomes=st.text("FP", min_size=2, max_size=6), offset=_OFFSETS)
@example(outcomes="FFFP", offset=4_070_908_800)  # broken, then a pass dated 2099
@example(outcomes="FFFP", offset=301)  # just past the skew allowed
@example(outcomes="FFFP", offset=299)  # within it: kept as it is
def test_a_run_dated_in_the_future_is_stored_as_finished_now(
    tmp_path_factory: pytest.TempPathFactory, outcomes: str, offset: int
) -> None:
    """Whoever ingests (the library too, not only the CLI, which also says so):
    a run's end past now plus the skew is stored as now, so its verdicts are
    those of the same run finishing now."""
    import datetime as dt
    import sqlite3
    import types
    from unittest import mock

    from matrixgen.results import ingest as ingest_module

    # The ingest's clock stands still for the test: the boundary examples (299
    # and 301 seconds ahead) must not move by the time a loaded machine takes
    # to ingest the runs before the last one.
    frozen = dt.datetime.now(dt.UTC).replace(microsecond=0)

    class _Still(dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return frozen

    clock = types.ModuleType("datetime")
    clock.__dict__.update(vars(dt))
    clock.datetime = _Still  # type: ignore[attr-defined]
    last_at = _when(offset) if offset > 10**9 else frozen + dt.timedelta(seconds=offset)

    folder = tmp_path_factory.mktemp("future")
    late, now = folder / "late.db", folder / "now.db"
    with mock.patch.object(ingest_module, "dt", clock):
        _store_runs(late, outcomes, last_at)
    with sqlite3.connect(late) as conn:
        (stored,) = conn.execute("SELECT max(finished_at) FROM runs").fetchone()
    conn.close()
    moment = int(frozen.timestamp())
    if offset > 300:
        assert stored == moment
        _store_runs(now, outcomes, dt.datetime.fromtimestamp(stored, dt.UTC))
        assert _verdicts(late) == _verdicts(now)
    else:  # kept as given (the latest run may be an earlier one)
        assert moment - 10 * 86_400 <= stored <= moment + 300
        assert int(last_at.timestamp()) <= stored


@settings(max_examples=8, deadline=None)
@given(outcomes=st.text("FP", min_size=2, max_size=6), offset=_OFFSETS, failed=st.booleans())
@example(outcomes="FFF", offset=4_070_908_800, failed=False)  # a pass in 2099: not ok
@example(outcomes="PPPP", offset=301, failed=True)  # a failure just past the skew
def test_a_result_later_than_now_is_never_evidence(
    tmp_path_factory: pytest.TempPathFactory, outcomes: str, offset: int, failed: bool
) -> None:
    """A result the store holds with a time past now plus the skew (a store an
    older tool or another writer filled: the ingest clamps) changes no verdict."""
    import sqlite3

    folder = tmp_path_factory.mktemp("read")
    path = folder / "r.db"
    _store_runs(path, outcomes, _when(-3600))
    expected = _verdicts(path)
    at = int(_when(offset).timestamp())
    with sqlite3.connect(path) as conn:
        (case_id,) = conn.execute("SELECT id FROM cases").fetchone()
        (job_id,) = conn.execute("SELECT id FROM jobs").fetchone()
        conn.execute(
            "INSERT INTO runs (run_id, commit_sha, finished_at, ingested_at) VALUES (?, ?, ?, ?)",
            ("forged", "f" * 40, at, at),
        )
        (ref,) = conn.execute("SELECT id FROM runs WHERE run_id = 'forged'").fetchone()
        conn.execute(
            "INSERT INTO results (case_id, finished_at, run_ref, outcome, reruns) "
            "VALUES (?, ?, ?, ?, 0)",
            (case_id, at, ref, 1 if failed else 0),
        )
        conn.execute(
            "INSERT INTO run_jobs (job_id, finished_at, run_ref, job_name, target, outcome, "
            "tests, failures, reruns) VALUES (?, ?, ?, 'u', '', ?, 1, ?, 0)",
            (job_id, at, ref, 1 if failed else 0, int(failed)),
        )
    conn.close()
    if offset > 300:
        assert _verdicts(path) == expected


@pytest.mark.parametrize(
    ("outcomes", "verdict"),
    [
        ([True] + [False] * 10, Verdict.OK),  # 1 flip in 10 steps: the rate itself
        ([True] + [False] * 9, Verdict.FLAKY),  # 1 flip in 9 steps: over it
    ],
)
def test_a_flip_rate_equal_to_the_threshold_is_not_flaky(
    outcomes: list[bool], verdict: Verdict
) -> None:
    history, runs = _history([(f, 0) for f in outcomes], [f"c{i}" for i in range(len(outcomes))])
    assert judge(history, runs, FlakyPolicy(flip_rate=0.1)).verdict is verdict


@pytest.mark.parametrize(
    ("field", "lowest", "below", "said"),
    [
        ("since_days", 1, 0, "--since must be 1 day or more"),
        ("min_runs", 1, 0, "--min-runs must be 1 or more"),
        ("broken_runs", 1, 0, "--broken-runs must be 1 or more"),
        ("flip_rate", 0.0, -0.01, "--flip-rate must be at least 0 and below 1"),
    ],
)
def test_each_policy_value_is_taken_from_its_lowest_allowed(
    field: str, lowest: float, below: float, said: str
) -> None:
    from matrixgen.model.errors import UsageError

    FlakyPolicy(**{field: lowest}).check()
    with pytest.raises(UsageError, match=said):
        FlakyPolicy(**{field: below}).check()


def test_a_flip_rate_must_stay_below_1() -> None:
    from matrixgen.model.errors import UsageError

    FlakyPolicy(flip_rate=0.99).check()
    with pytest.raises(UsageError, match="below 1"):
        FlakyPolicy(flip_rate=1.0).check()


# Names from a pull request's reports: what a terminal or Markdown could take for markup.
HOSTILE = "a\\b|`c`\n##[error]<img src=x>\r_*"


@given(value=st.text(max_size=12))
@example(value=HOSTILE)
@example(value="")
def test_flaky_tables_keep_their_columns_each_cell_escaped_once(value: str) -> None:
    """Both of flaky's tables from one declaration: the terminal's thirteen
    columns, Markdown's eight, each cell escaped once for where it goes."""
    from matrixgen.results.flaky import FlakyRow, RunRef, flaky_markdown, flaky_table
    from matrixgen.util.escape import markdown_code, markdown_text
    from matrixgen.views.table import table

    job = JobKey("gitlab", value, "p" + value, "e" + value, "m" + value, "c" + value, value)
    ref = RunRef(value, None, 86400)
    row = FlakyRow(job=job, node_id="n" + value, runs=3, failures=2, flips=1, first_at=86400,
                   verdict=Verdict.FLAKY, first_failure=ref, last_failure=ref)  # fmt: skip
    md = flaky_markdown([row]).split("\n")
    assert md[:2] == [
        "| verdict | case | platform/env | scope | runs | failures | flips | evidence |",
        "| :-- | :-- | :-- | :-- | --: | --: | --: | :-- |",
    ]
    cells = ["flaky", markdown_code(row.node_id), markdown_text(job.where)]
    cells += [markdown_text(job.place), "3", "2", "1", markdown_text(row.evidence())]
    assert md[2:] == [f"| {' | '.join(cells)} |", ""]
    headers = "verdict model test_case node_id platform environment scope runs failures flips rate"
    case = job.test_case + (f"[{value}]" if value else "")
    shown = f"{value} (1970-01-02)"
    plain = ["flaky", job.model, case, row.node_id, job.platform, job.environment, job.place]
    plain += ["3", "2", "1", "0.67", shown, shown]
    expected = table([plain], [*headers.split(), "first failure", "last failure"])
    assert flaky_table([row]).text() == expected
