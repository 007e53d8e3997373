"""Entries drafted from the real runs, written through the safe editor, and lifts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.results.propose import rectangles
from matrixgen.util.nodeid import is_node_id
from tests.results_fixtures import TODAY

ASYNC = "tests/unit_tests/dist_checkpointing/test_async_save.py"


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)


def _propose(capsys, recipes: Path, store: Path, *extra: str) -> tuple[int, dict, str]:
    code = main(
        ["quarantine", "propose", "--recipes", str(recipes), "--db", str(store),
         "--format", "json", *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_propose_drafts_fit_the_case(capsys, shipped_recipes: Path, evidence_store: Path) -> None:
    code, got, err = _propose(capsys, shipped_recipes, evidence_store, "--tracker", "#8012")
    assert code == 0
    entries = {d["entry"]["action"] + ":" + d["entry"]["kind"]: d["entry"] for d in got["drafts"]}
    assert sorted(entries) == ["allow-failure:flaky", "deselect:broken", "deselect:flaky"]
    flaky_test = entries["deselect:flaky"]
    assert flaky_test["node_ids"] == [f"{ASYNC}::TestAsyncSave::test_parallel_write_order"]
    # Exactly where the evidence is: one platform, environment, tag and place.
    assert flaky_test["match"] == {
        "model": "unit-tests",
        "test_case": ASYNC,
        "platforms": ["dgx_h100"],
        "environments": ["dev"],
        "tags": ["latest"],
    }
    assert flaky_test["where"] == ["gitlab/mr"]
    assert flaky_test["owner"] == "mcore"  # the recipe's maintainers
    assert (flaky_test["added"], flaky_test["expires"]) == ("2026-12-01", "2026-12-31")
    assert flaky_test["tracker"] == "#8012"
    assert "failed 5 of 24 runs" in flaky_test["reason"]
    assert "run 9104" in flaky_test["reason"] and "run 9124" in flaky_test["reason"]
    assert flaky_test["id"].startswith("test_parallel_write_order-")
    functional = entries["allow-failure:flaky"]
    assert functional["match"]["test_case"] == "gpt3_tp1_pp1" and "tags" not in functional["match"]
    broken = entries["deselect:broken"]
    assert broken["node_ids"] == ["tests/unit_tests/data/test_blend.py::test_blend_weights"]
    assert "every run since commit" in broken["reason"] and "run 9116" in broken["reason"]
    # The deselected test of #7958 passed all 24 runs: lift it.
    assert [lift["id"] for lift in got["lifts"]] == ["ut-async-save-flaky-dev"]
    assert "passed all 24 runs on dgx_h100/dev" in got["lifts"][0]["reason"]
    assert got["written"] is False
    assert "nothing written" in err


def test_propose_write_goes_through_the_editor(
    capsys,
    shipped_recipes: Path,
    evidence_store: Path,
) -> None:
    qfile = shipped_recipes / "quarantine.yaml"
    before = qfile.read_text()
    code, got, _ = _propose(
        capsys, shipped_recipes, evidence_store, "--tracker", "#8012", "--write"
    )
    assert code == 0 and got["written"] is True
    after = qfile.read_text()
    data = yaml.safe_load(after)
    ids = [e["id"] for e in data["entries"]]
    assert "ut-async-save-flaky-dev" not in ids  # lifted
    assert len(ids) == 4 - 1 + 4  # 5 shipped, one lifted, three added
    # Comments of the entries kept stay byte for byte.
    assert "# Two H100 EP8 cases hang in the all-to-all" in after
    assert before.splitlines()[0] == after.splitlines()[0]
    # The tree still validates, and the new entries apply where the evidence was.
    assert main(["validate", "--recipes", str(shipped_recipes)]) == 0
    capsys.readouterr()
    listed = ["list", "--recipes", str(shipped_recipes), "--scope", "mr", "--model", "gpt"]
    listed += ["--platform", "dgx_h100", "--environment", "dev", "--format", "json"]
    assert main(listed) == 0
    jobs = {j["test_case"]: j for j in json.loads(capsys.readouterr().out)}
    assert jobs["gpt3_tp1_pp1"]["quarantine"]["action"] == "allow-failure"
    # Proposing again drafts nothing: the entries cover the evidence now.
    code, again, _ = _propose(capsys, shipped_recipes, evidence_store, "--tracker", "#8012")
    assert again["drafts"] == [] and again["lifts"] == []
    assert len(again["already_quarantined"]) == 3


def test_propose_write_needs_a_tracker(capsys, shipped_recipes: Path, evidence_store: Path) -> None:
    code, _, err = _propose(capsys, shipped_recipes, evidence_store, "--write")
    assert code == 2 and "--write needs --tracker" in err


def test_propose_text_shows_drafts_as_yaml(
    capsys,
    shipped_recipes: Path,
    evidence_store: Path,
) -> None:
    args = ["quarantine", "propose", "--recipes", str(shipped_recipes), "--db", str(evidence_store)]
    assert main(args) == 0
    out, err = capsys.readouterr()
    drafts = yaml.safe_load(
        "\n".join(line for line in out.splitlines() if not line.startswith("#"))
    )
    assert len(drafts) == 3 and all("tracker" not in d for d in drafts)
    assert "# lifts (1)" in out
    assert "the drafts name no tracker" in err


def test_a_lift_waits_for_enough_passing_runs(
    capsys,
    shipped_recipes: Path,
    evidence_store: Path,
) -> None:
    _, got, _ = _propose(capsys, shipped_recipes, evidence_store, "--lift-runs", "25")
    assert got["lifts"] == []
    kept = dict((k["id"], k["why"]) for k in got["not_judged"])
    assert "passed only its last 24 runs" in kept["ut-async-save-flaky-dev"]


def test_audit_shows_the_evidence_beside_each_entry(
    capsys,
    shipped_recipes: Path,
    evidence_store: Path,
) -> None:
    args = ["quarantine", "audit", "--recipes", str(shipped_recipes), "--db", str(evidence_store)]
    assert main([*args, "--format", "json"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert evidence["ut-async-save-flaky-dev"] == (
        "passed all 24 runs on dgx_h100/dev since 2026-11-02"
    )
    assert evidence["moe-ep8-etp1-fp8-h100"] == "no results in the last 30 days"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ut-async-save-flaky-dev                  passed all 24 runs" in out


_CELL = st.tuples(
    st.sampled_from(["h100", "gb200"]),
    st.sampled_from(["dev", "lts"]),
    st.sampled_from(["", "latest", "legacy"]),
    st.sampled_from(["gitlab/mr", "gitlab/nightly", "github/L1"]),
)


@given(st.sets(_CELL, min_size=1, max_size=24))
def test_rectangles_cover_exactly_the_cells(cells) -> None:
    import itertools

    covered = []
    for rect in rectangles(set(cells)):
        covered.extend(itertools.product(*rect))
    assert sorted(covered) == sorted(cells)  # every cell once, nothing more


def _bucket_report(path: Path, *, failed: bool) -> Path:
    """A report of one run: pytest's record of a collection error in the data
    bucket (its name the directory, no class, no file) beside a real test."""
    failure = '<error message="collection failed"/>' if failed else ""
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        f'<testcase classname="" name="tests/unit_tests/data/" time="0.1">{failure}</testcase>'
        '<testcase classname="tests.unit_tests.data.test_blend" name="test_mix" time="0.2"/>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    return path


def test_a_record_that_names_a_directory_never_becomes_a_deselect(
    capsys, shipped_recipes: Path, tmp_path: Path
) -> None:
    """It passes and fails in turn, so it is judged flaky; a deselect of it would
    take the whole bucket out (pytest's --deselect matches by prefix)."""
    from tests.results_fixtures import TARGET

    db = tmp_path / "results.db"
    for n in range(6):
        report = _bucket_report(tmp_path / f"run{n}.xml", failed=n % 2 == 0)
        code = main(
            ["results", "ingest", str(report), "--run-id", f"r{n}", "--target", TARGET,
             "--tag", "latest", "--recipes", str(shipped_recipes), "--db", str(db),
             "--finished-at", f"2026-11-2{n}T10:00:00Z", "--format", "json"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["not_node_ids"] == ["tests/unit_tests/data/"]
        assert "1 record(s) of unit-test buckets name no test" in err
        assert "never used to draft a deselect" in err
    code, got, err = _propose(capsys, shipped_recipes, db, "--tracker", "#1")
    assert code == 0, err
    drafted = [n for d in got["drafts"] for n in d["entry"].get("node_ids", [])]
    assert "tests/unit_tests/data/" not in drafted
    assert [r["node_id"] for r in got["not_node_ids"]] == ["tests/unit_tests/data/"]
    assert got["not_node_ids"][0]["verdict"] == "flaky"
    code = main(["quarantine", "propose", "--recipes", str(shipped_recipes), "--db", str(db),
                 "--tracker", "#1", "--write"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "not a pytest node id (path::name), so never drafted as a deselect" in out
    written = yaml.safe_load((shipped_recipes / "quarantine.yaml").read_text())["entries"]
    assert all(is_node_id(n) for e in written for n in e.get("node_ids", []))
    assert main(["validate", "--recipes", str(shipped_recipes)]) == 0


def test_propose_names_places_in_the_trees_words(
    capsys, shipped_recipes: Path, store_copy: Path
) -> None:
    import sqlite3

    # The entry allowed to fail in nightly has no results: its place as the
    # tree says it (`where: [gitlab/nightly]`), not as the store's tier L2.
    args = ["quarantine", "propose", "--recipes", str(shipped_recipes), "--db", str(store_copy)]
    assert main(args) == 0
    kept = [line for line in capsys.readouterr().out.splitlines() if line.startswith("# kept: ")]
    assert any(
        line.startswith("# kept: hybrid-moe-ep4-convergence-lts-baseline: no results for ")
        and line.endswith("on dgx_h100/lts (gitlab/nightly)")
        for line in kept
    ), kept
    # Results stored under the tier (as a nightly run stores them) draft entries
    # for the place the tree names, which read back to the same scope.
    with sqlite3.connect(store_copy) as conn:
        conn.execute("UPDATE jobs SET scope = 'L2'")
    code, got, _ = _propose(capsys, shipped_recipes, store_copy, "--tracker", "#8012")
    assert code == 0 and got["drafts"]
    assert {w for d in got["drafts"] for w in d["entry"]["where"]} == {"gitlab/nightly"}
    assert all("(gitlab/nightly)" in d["entry"]["reason"] for d in got["drafts"])
    assert all(r["scope"] == "nightly" for d in got["drafts"] for r in d["evidence"])


# --------------------------------------------------------------------------- whose runs lift


_DESELECTED = f"{ASYNC}::TestAsyncSave::test_async_is_equivalent_to_sync"
_RUNS = st.lists(st.tuples(st.sampled_from(["main", "feature", "release"]), st.booleans()),
                 min_size=1, max_size=7)  # fmt: skip


def _bucket_store(path: Path, runs: list[tuple[str, bool]]) -> None:
    """One run a day of the shipped deselect entry's test, of a branch each."""
    import datetime as dt

    from matrixgen.results.ingest import ingest
    from matrixgen.results.junit import Outcome, Testcase
    from matrixgen.results.store import JobKey, JobResults, RunInfo, open_store

    job = JobKey("gitlab", "mr", "dgx_h100", "dev", "unit-tests", ASYNC, "latest", True)
    store = open_store(str(path), write=True)
    try:
        for k, (ref, passed) in enumerate(runs):
            outcome = Outcome.PASSED if passed else Outcome.FAILED
            test = Testcase(node_id=_DESELECTED, classname="c", name="n", suite="",
                            outcome=outcome, duration=1.0)  # fmt: skip
            at = dt.datetime(2026, 11, 20, tzinfo=dt.UTC) + dt.timedelta(hours=k)
            run = RunInfo(run_id=f"{700 + k}", commit=f"{k:040x}", finished_at=at, ref=ref)
            ingest(store, run, [JobResults(job=job, job_name="u", target="", testcases=(test,))])
    finally:
        store.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(runs=_RUNS, refs=st.lists(st.sampled_from(["main", "feature", "release"]), unique=True))
# Failing on main, passing on an unreviewed branch after: no lift by default.
@example(runs=[("main", False), ("feature", True), ("feature", True), ("feature", True)], refs=[])
@example(runs=[("main", False), ("feature", True), ("feature", True)], refs=["feature"])
@example(runs=[("release", True), ("main", True), ("release", True)], refs=["main", "release"])
@example(runs=[("feature", True), ("feature", True)], refs=[])  # main has no run at all
def test_lifts_are_judged_on_the_runs_of_the_refs_named_only(
    capsys: pytest.CaptureFixture[str],
    tmp_path_factory: pytest.TempPathFactory,
    runs: list[tuple[str, bool]],
    refs: list[str],
) -> None:
    import shutil

    from tests.results_fixtures import RECIPES

    folder = tmp_path_factory.mktemp("lift")
    recipes = folder / "recipes"
    shutil.copytree(RECIPES, recipes)
    _bucket_store(folder / "r.db", runs)
    args = ["--lift-runs", "2", *(x for r in refs for x in ("--ref", r))]
    code, got, err = _propose(capsys, recipes, folder / "r.db", *args)
    assert code == 0, err
    named = refs or ["main"]
    trusted = [passed for ref, passed in runs if ref in named]
    streak = len(trusted) if all(trusted) else trusted[::-1].index(False)
    lifted = "ut-async-save-flaky-dev" in [lift["id"] for lift in got["lifts"]]
    assert lifted is (streak >= 2), (runs, refs, got["lifts"])
    # The proposal says which runs it used.
    used = [f"{700 + k}" for k, (ref, _) in enumerate(runs) if ref in named]
    assert got["lift_evidence"] == {"refs": named, "runs": used}
    assert f"lifts judged on the {len(used)} run(s) of ref(s) {', '.join(named)}" in err or not used


@pytest.mark.parametrize(("lift_runs", "lifted"), [(24, True), (25, False)])
def test_a_lift_needs_exactly_lift_runs_passes_in_a_row(
    capsys, shipped_recipes: Path, evidence_store: Path, lift_runs: int, lifted: bool
) -> None:
    """ut-async-save-flaky-dev's test passed every one of its 24 runs."""
    _, got, _ = _propose(capsys, shipped_recipes, evidence_store, "--lift-runs", str(lift_runs))
    assert [lift["id"] for lift in got["lifts"]] == (["ut-async-save-flaky-dev"] if lifted else [])


@pytest.mark.parametrize(("min_runs", "drafts"), [(24, 3), (25, 0)])
def test_a_key_with_min_runs_runs_is_judged(
    capsys, shipped_recipes: Path, evidence_store: Path, min_runs: int, drafts: int
) -> None:
    """Every key of the fixture has 24 runs: judged at --min-runs 24, not at 25."""
    _, got, _ = _propose(capsys, shipped_recipes, evidence_store, "--min-runs", str(min_runs))
    assert len(got["drafts"]) == drafts
