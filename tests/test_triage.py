"""`matrixgen triage` on real runs of a pytest project, and at the verdicts'
boundaries on stores built here; the same on SQLite and on a real PostgreSQL
server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.model.errors import ExitCode
from tests.results_fixtures import (
    RECIPES,
    TODAY,
    db,  # noqa: F401
)
from tests.triage_fixtures import (  # noqa: F401
    BUCKET,
    ENTRIES,
    NODE,
    START,
    TriageRun,
    _ingest,
    _store,
    triage_runs,
)

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "triage.schema.json"
DATA = "tests/unit_tests/data/test_triage_cases.py"


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)


@pytest.fixture
def recipes(shipped_recipes: Path) -> Path:
    quarantine = shipped_recipes / "quarantine.yaml"
    quarantine.write_text(quarantine.read_text() + ENTRIES)
    return shipped_recipes


def _triage(capsys, db: str, recipes: Path, run: str, *extra: str) -> tuple[int, str, str]:  # noqa: F811
    code = main(["results", "triage", "--run", run, "--db", db, "--recipes", str(recipes), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _verdicts(payload: dict) -> dict[str, str]:
    return {f["node_id"] or f["test_case"]: f["verdict"] for f in payload["failures"]}


def test_triage_gives_each_failure_of_a_real_run_its_verdict(
    capsys,
    db: str,  # noqa: F811
    recipes: Path,
    triage_runs: list[TriageRun],  # noqa: F811
) -> None:
    import jsonschema

    _ingest(db, recipes, triage_runs)
    capsys.readouterr()
    base = ("--baseline-ref", "main", "--baseline-source", "schedule")
    code, out, err = _triage(capsys, db, recipes, "6000", *base, "--format", "json")
    assert code == ExitCode.EXPECTATION, err
    payload = json.loads(out)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(payload)
    # The functional job fails in every run, but an entry lets it fail: quarantined
    # before baseline. The broken test failed in the latest scheduled run; the
    # flaky one passed there, and flipped on main; the branch's test is new.
    assert _verdicts(payload) == {
        f"{DATA}::test_fails_on_the_branch": "new",
        f"{DATA}::test_broken_on_main": "baseline",
        f"{DATA}::test_flaky_on_some_seeds": "flaky",
        "gpt3_tp1_pp1": "quarantined",
    }
    assert list(_verdicts(payload).values()) == ["new", "baseline", "flaky", "quarantined"]
    summary = {"new": 1, "baseline": 1, "flaky": 1, "known": 0, "quarantined": 1}
    assert payload["summary"] == summary
    # Each failure's reason: its kind and message's first line, numbers and
    # quoted values masked; the functional job failed its loss check.
    reasons = {f["node_id"] or f["metric"]: f["reason"] for f in payload["failures"]}
    assert reasons == {
        f"{DATA}::test_fails_on_the_branch": (
            "failure: AssertionError: the branch's change broke this"
        ),
        f"{DATA}::test_broken_on_main": (
            "failure: AssertionError: broken on main since before the branch"
        ),
        f"{DATA}::test_flaky_on_some_seeds": (
            "failure: AssertionError: worker order depends on seed <n>"
        ),
        "tests/functional/test_golden_values.py::test_loss_matches_golden_values": (
            "failure: AssertionError: loss <n> at step <n>, golden value <n>"
        ),
    }
    assert [g["count"] for g in payload["groups"]] == [1, 1, 1, 1]
    assert payload["baseline"]["ref"] == "main"
    assert [r["run_id"] for r in payload["baseline"]["runs"]] == ["5007"]
    by_verdict = {f["verdict"]: f for f in payload["failures"]}
    assert by_verdict["baseline"]["baseline_run"] == {
        "run_id": "5007",
        "commit": "07" * 20,
        "at": "2026-11-27T02:00:00Z",
    }
    assert by_verdict["baseline"]["evidence"].endswith(", with the same reason")
    assert by_verdict["new"]["baseline_reason"] is None  # the baseline did not fail it
    assert by_verdict["quarantined"]["entry"] == {
        "id": "gpt3-golden-values",
        "action": "allow-failure",
        "kind": "baseline-failure",
        "tracker": "https://github.com/example/mcore/issues/8101",
    }
    assert "failed 2 of 8 runs" in by_verdict["flaky"]["evidence"]
    assert "4 flips" in by_verdict["flaky"]["evidence"]
    # The checkpoint bucket, allowed to fail, passed here and in the baseline.
    assert [(c["id"], c["jobs"]) for c in payload["lift_candidates"]] == [
        ("ckpt-bucket-allow-failure", 1)
    ]
    assert payload["note"] is None
    assert "1 new failure(s) in run 6000" in err

    # Fixed on the branch: nothing new, exit 0.
    code, out, err = _triage(capsys, db, recipes, "6001", *base, "--format", "json")
    assert code == 0, err
    summary = {"new": 0, "baseline": 1, "flaky": 1, "known": 0, "quarantined": 1}
    assert json.loads(out)["summary"] == summary


def test_triage_table_and_markdown(
    capsys,
    tmp_path: Path,
    recipes: Path,
    triage_runs: list[TriageRun],  # noqa: F811
) -> None:
    from matrixgen.results.triage_markdown import MARKER

    store_db = str(tmp_path / "results.store_db")
    _ingest(store_db, recipes, triage_runs)
    capsys.readouterr()
    code, out, _ = _triage(capsys, store_db, recipes, "6000", "--format", "markdown")
    assert code == ExitCode.EXPECTATION
    lines = out.splitlines()
    assert lines[0] == MARKER
    # New failures first, outside the fold; the known ones inside it.
    new_at = out.index("#### New failures")
    fold_at = out.index("<details>")
    assert new_at < out.index("test_fails_on_the_branch") < fold_at
    assert fold_at < out.index("test_broken_on_main")
    assert fold_at < out.index("test_flaky_on_some_seeds")
    assert (
        "quarantined by entry [gpt3\\-golden\\-values]"
        "(https://github.com/example/mcore/issues/8101) (allow\\-failure, baseline\\-failure) |"
    ) in out
    assert "| `ckpt-bucket-allow-failure` | allow\\-failure |" in out
    code, out, _ = _triage(capsys, store_db, recipes, "6000")
    assert code == ExitCode.EXPECTATION
    assert out.splitlines()[0].split() == [
        "verdict",
        "model",
        "test_case",
        "node_id",
        "platform",
        "environment",
        "scope",
    ]
    assert "lift candidate: ckpt-bucket-allow-failure (allow-failure)" in out


def test_a_run_without_a_baseline_says_so(
    capsys,
    tmp_path: Path,
    recipes: Path,
    triage_runs: list[TriageRun],  # noqa: F811
) -> None:
    store_db = str(tmp_path / "results.store_db")
    _ingest(store_db, recipes, triage_runs[-2:])  # the branch's runs only
    capsys.readouterr()
    code, out, err = _triage(capsys, store_db, recipes, "6000", "--format", "json")
    assert code == ExitCode.EXPECTATION
    payload = json.loads(out)
    assert payload["baseline"]["runs"] == []
    assert payload["note"].startswith("no baseline: no run of ref main finished before run 6000")
    assert "matrixgen: note: no baseline" in err
    news = [f for f in payload["failures"] if f["verdict"] == "new"]
    assert len(news) == 3 and all(f["evidence"].startswith("no baseline") for f in news)
    assert payload["lift_candidates"] == []  # nothing to judge a lift on
    code, out, _ = _triage(capsys, store_db, recipes, "6000", "--format", "markdown")
    assert "**No baseline.**" in out


def test_triage_of_an_unknown_run_is_a_usage_error(
    capsys,
    tmp_path: Path,
    recipes: Path,
    triage_runs: list[TriageRun],  # noqa: F811
) -> None:
    store_db = str(tmp_path / "results.store_db")
    _ingest(store_db, recipes, triage_runs[:1])
    capsys.readouterr()
    code, _, err = _triage(capsys, store_db, recipes, "9999")
    assert code == ExitCode.USAGE
    assert "--run 9999: no such run in" in err and "(the latest: 5000)" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- boundaries


def _flaky_verdict(capsys, db: str, *extra: str) -> str | None:  # noqa: F811
    assert main(["results", "flaky", "--db", db, "--ref", "main", "--format", "json", *extra]) == 0
    rows = json.loads(capsys.readouterr().out)
    return rows[0]["verdict"] if rows else None


def _triaged(capsys, db: str, runs: int, *extra: str) -> tuple[int, dict]:  # noqa: F811
    code, out, err = _triage(capsys, db, RECIPES, str(100 + runs), "--format", "json", *extra)
    assert code in (0, ExitCode.EXPECTATION), err
    (failure,) = json.loads(out)["failures"]
    return code, failure


@pytest.mark.parametrize(
    ("baseline", "flaky", "triage"),
    [
        # 1 flip in 11 runs: 1 / 10 = 0.1, not above --flip-rate 0.1: ok, so new.
        ("F" + "P" * 10, "ok", "new"),
        # 2 flips in 11 runs: 0.2, above it: flaky.
        ("PFP" + "P" * 8, "flaky", "flaky"),
    ],
)
def test_the_flip_rate_threshold_is_exclusive(
    capsys,
    db: str,  # noqa: F811
    baseline: str,
    flaky: str,
    triage: str,
) -> None:
    _store(db, baseline)
    assert _flaky_verdict(capsys, db, "--flip-rate", "0.1") == flaky
    code, failure = _triaged(capsys, db, len(baseline), "--flip-rate", "0.1")
    assert failure["verdict"] == triage
    assert code == (ExitCode.EXPECTATION if triage == "new" else 0)


def test_exactly_broken_runs_failures_is_broken(capsys, db: str) -> None:  # noqa: F811
    _store(db, "PPFPFF")  # the last 2 failed (flips 4 of 5: flaky when not broken)
    assert _flaky_verdict(capsys, db, "--broken-runs", "2") == "broken"
    assert _flaky_verdict(capsys, db, "--broken-runs", "3") == "flaky"
    # The latest baseline run failed: baseline, whatever --broken-runs says.
    for broken in ("2", "3"):
        code, failure = _triaged(capsys, db, 6, "--broken-runs", broken)
        assert (code, failure["verdict"]) == (0, "baseline")
        assert failure["baseline_run"]["run_id"] == "105"


@pytest.mark.parametrize(("baseline", "judged"), [("PFPFP", True), ("FPFP", False)])
def test_one_run_fewer_than_min_runs_is_not_judged(
    capsys,
    db: str,  # noqa: F811
    baseline: str,
    judged: bool,
) -> None:
    _store(db, baseline)
    assert _flaky_verdict(capsys, db, "--min-runs", "5") == ("flaky" if judged else None)
    code, failure = _triaged(capsys, db, len(baseline), "--min-runs", "5")
    if judged:
        assert (code, failure["verdict"]) == (0, "flaky")
    else:
        assert (code, failure["verdict"]) == (ExitCode.EXPECTATION, "new")
        assert "only 4 runs on ref main" in failure["evidence"]
        assert "fewer than --min-runs 5" in failure["evidence"]


def test_baseline_runs_and_source_choose_the_baseline(capsys, db: str) -> None:  # noqa: F811
    _store(db, "PPPPFP")  # failed in the one before the latest
    code, failure = _triaged(capsys, db, 6, "--min-runs", "99")
    assert failure["verdict"] == "new"
    code, failure = _triaged(capsys, db, 6, "--min-runs", "99", "--baseline-runs", "2")
    assert (code, failure["verdict"]) == (0, "baseline")
    assert failure["baseline_run"]["run_id"] == "104"
    assert "(1 of the 2 baseline runs)" in failure["evidence"]
    code, out, _ = _triage(
        capsys, db, RECIPES, "106", "--baseline-source", "push", "--format", "json"
    )
    assert json.loads(out)["baseline"]["runs"] == []


def test_the_markdown_escapes_what_the_reports_say(capsys, tmp_path: Path) -> None:
    """A node id comes from a pull request's JUnit report: in the comment it
    stays inert text, in code, and cannot break the table or open a tag."""
    from matrixgen.results.triage_markdown import MARKER

    hostile = "tests/unit_tests/x/test_x.py::test_x[<img src=x onerror=alert(1)>|`]"
    path = str(tmp_path / "results.db")
    # Its message too: its reason goes in a cell of its own.
    _store(path, "PPP", node=hostile, messages=("", "boom | <img src=y onerror=alert(2)> `z` *"))
    code, out, _ = _triage(capsys, path, RECIPES, "103", "--format", "markdown")
    assert code == ExitCode.EXPECTATION
    assert out.startswith(MARKER + "\n")
    lines = out.splitlines()
    (row,) = [line for line in lines if line.startswith("| new |")]
    at = lines.index(row)
    # Rendered as GitHub renders the comment: the table keeps its six cells, and
    # the node id shows as written, in code, opening no tag.
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render("\n".join(lines[at - 2 : at + 1]))
    assert "<img" not in html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html.split("<tbody>")[1], flags=re.S)
    assert len(cells) == 7, html
    assert "<code>" in cells[2]

    def shown(cell: str) -> str:
        cell = re.sub(r"<[^>]+>", "", cell)
        for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&")):
            cell = cell.replace(entity, char)
        return cell.replace(" ", "")

    assert shown(cells[2]) == hostile.replace(" ", "")
    assert "<code>" in cells[5]
    assert shown(cells[5]) == "failure:boom|<imgsrc=yonerror=alert(<n>)>`z`*"


def test_failed_every_baseline_run_but_too_few_to_be_broken(capsys, db: str) -> None:  # noqa: F811
    _store(db, "FF")  # both baseline runs failed: fewer than --broken-runs 3
    assert _flaky_verdict(capsys, db, "--min-runs", "1", "--broken-runs", "3") == "failing"
    assert _flaky_verdict(capsys, db, "--min-runs", "1", "--broken-runs", "2") == "broken"
    # Triage never calls it new at the boundary: it failed in the latest baseline run.
    for broken in ("2", "3"):
        code, failure = _triaged(capsys, db, 2, "--min-runs", "1", "--broken-runs", broken)
        assert (code, failure["verdict"]) == (0, "baseline"), failure


@given(value=st.text(max_size=12))
@example(value="a\\b|`c`\n##[error]<img src=x>\r_*")
@example(value="")
def test_the_triage_tables_keep_their_columns_each_cell_escaped_once(value: str) -> None:
    """The failures' table for a terminal and for the comment, and the lift
    candidates', from one declaration each: their columns, each cell escaped
    once; an entry or a known failure is linked to its tracker."""
    from matrixgen.results.known import KnownRef
    from matrixgen.results.lifts import EntryRef, LiftCandidate
    from matrixgen.results.store import JobKey
    from matrixgen.results.triage import Failure, TriageVerdict
    from matrixgen.results.triage_markdown import failures_table, lifts_table
    from matrixgen.util.escape import markdown_code, markdown_link, markdown_text
    from matrixgen.views.table import table

    job = JobKey("gitlab", "mr" + value, "p" + value, "e" + value, "m" + value, "c" + value, "")
    tracker = "https://tracker.example/8101"
    entry = EntryRef(id="id" + value, action="allow-failure", kind="flaky", tracker=tracker)
    known = KnownRef(pattern="p" + value, tracker=tracker, kind="infra")
    failures = [
        Failure(job=job, node_id="n" + value, verdict=TriageVerdict.QUARANTINED,
                evidence="e" + value, entry=entry, reason="r" + value),
        Failure(job=job, node_id=None, verdict=TriageVerdict.NEW, evidence="e" + value),
        Failure(job=job, node_id=None, metric="m" + value, verdict=TriageVerdict.KNOWN,
                evidence=known.introduction() + "x" + value, known=known),
    ]  # fmt: skip
    case, where, place = markdown_code(job.case), markdown_text(job.where), markdown_text(job.place)
    evidence = f"quarantined by entry {markdown_link(entry.id, tracker)} (allow\\-failure, flaky)"
    reason = markdown_code("r" + value)
    explained = f"{markdown_link('known infra failure', tracker)}: {markdown_text('x' + value)}"
    rows = [
        ["quarantined", case, markdown_code("n" + value), where, place, reason, evidence],
        ["new", case, "", where, place, "", markdown_text("e" + value)],
        ["known", case, markdown_code("m" + value), where, place, "", explained],
    ]
    assert failures_table(failures).markdown() == [
        "| verdict | case | test | platform/env | scope | reason | evidence |",
        "| :-- | :-- | :-- | :-- | :-- | :-- | :-- |",
        *(f"| {' | '.join(cells)} |" for cells in rows),
    ]
    headers = ["verdict", "model", "test_case", "node_id", "platform", "environment", "scope"]
    names = [job.model, job.case]
    plain = [
        ["quarantined", *names, "n" + value, job.platform, job.environment, job.place],
        ["new", *names, "", job.platform, job.environment, job.place],
        ["known", *names, "m" + value, job.platform, job.environment, job.place],
    ]
    assert failures_table(failures).text() == table(plain, headers)
    lift = LiftCandidate(entry=entry, jobs=1, reason="w" + value)
    assert lifts_table([lift]).markdown() == [
        "| entry | action | tracker | why |",
        "| :-- | :-- | :-- | :-- |",
        f"| {markdown_code(entry.id)} | allow\\-failure | {markdown_link(tracker, tracker)} "
        f"| {markdown_text(lift.reason)} |",
    ]


# --------------------------------------------------------------------------- node-level entries


def test_a_one_node_mute_covers_that_test_alone(
    capsys,
    db: str,  # noqa: F811
    shipped_recipes: Path,
    triage_runs: list[TriageRun],  # noqa: F811
) -> None:
    """A mute entry naming one node id of the data bucket (here a prefix of the
    branch's failing test, and a test no run has) leaves every other failure of
    the bucket its own verdict, and is no lift candidate: its test never ran."""
    quarantine = shipped_recipes / "quarantine.yaml"
    quarantine.write_text(
        quarantine.read_text()
        + ENTRIES
        + f"""
  - id: one-node-mute
    tracker: "#8103"
    kind: flaky
    action: mute
    match: {{model: unit-tests, test_case: tests/unit_tests/data/}}
    node_ids: ["{DATA}::test_fails_on_the"]
    owner: mcore-data
    expires: "2027-01-31"
    reason: one test only
"""
    )
    _ingest(db, shipped_recipes, triage_runs)
    capsys.readouterr()
    base = ("--baseline-ref", "main", "--baseline-source", "schedule")
    code, out, err = _triage(capsys, db, shipped_recipes, "6000", *base, "--format", "json")
    assert code == ExitCode.EXPECTATION, err
    payload = json.loads(out)
    assert _verdicts(payload) == {
        f"{DATA}::test_fails_on_the_branch": "new",
        f"{DATA}::test_broken_on_main": "baseline",
        f"{DATA}::test_flaky_on_some_seeds": "flaky",
        "gpt3_tp1_pp1": "quarantined",
    }
    assert "one-node-mute" not in [c["id"] for c in payload["lift_candidates"]]


_BUCKET = "tests/unit_tests/x/test_x.py"
# Test names around the dangerous ones: prefixes of each other, a class and its
# method, parametrised children (one with `::` inside its parameters).
_NAMES = st.sampled_from(
    [
        "test_x",
        "test_x_after_restart",
        "test_x[1]",
        "test_x[a::b]",
        "test_xy",
        "TestK",
        "TestK::test_x",
        "TestK::test_x[2]",
        "test_y",
    ]
)


def _reference_covers(named: str, node: str) -> bool:
    """Written apart from util.nodeid: the id itself, or the id with one
    bracket group of parameters after it."""
    return node == named or (
        node.startswith(named + "[") and node.endswith("]") and "[" not in named
    )


def _node_entry(action: str, named: list[str]) -> Any:
    from matrixgen.quarantine.model import parse_quarantine

    text = (
        "entries:\n  - id: node-entry\n    tracker: '#1'\n    kind: flaky\n"
        f"    action: {action}\n    match: {{model: unit-tests, test_case: {_BUCKET}}}\n"
        "    node_ids: [" + ", ".join(json.dumps(f"{_BUCKET}::{n}") for n in named) + "]\n"
        "    owner: o\n    reason: r\n"
    )
    qfile = parse_quarantine(text.encode(), "quarantine.yaml")
    assert not qfile.errors, qfile.errors
    return qfile.entries[0]


def _bucket_place() -> tuple[Any, Any, Any]:
    from matrixgen.model.jobs import Selector, Target
    from matrixgen.model.vocab import System
    from matrixgen.results.mapping import job_key
    from tests.emit_fixtures import make_job

    job = make_job(_BUCKET, model="unit-tests", scope="unit-tests", tag="latest")
    selector = Selector(scope="unit-tests", platform="dgx_h100", environment="dev")
    target = Target(name="gitlab-unit-tests", system=System.GITLAB, selector=selector)
    return job_key(job, System.GITLAB), target, job


@given(
    action=st.sampled_from(["deselect", "mute"]),
    named=st.lists(_NAMES, min_size=1, max_size=3, unique=True),
    failed=st.none() | _NAMES,
)
@example(action="mute", named=["test_x"], failed="test_y")  # another test of the bucket
@example(action="mute", named=["test_x"], failed="test_x_after_restart")  # a longer name
@example(action="mute", named=["test_x"], failed=None)  # the bucket failed with no test
@example(action="deselect", named=["TestK"], failed="TestK::test_x")  # a class is no prefix
@example(action="mute", named=["test_x"], failed="test_x[a::b]")  # its parametrised child
@example(action="mute", named=["test_x[1]"], failed="test_x")  # a child names no parent
def test_a_node_level_entry_covers_exactly_the_tests_it_names(
    action: str, named: list[str], failed: str | None
) -> None:
    from matrixgen.results.triage import covering_entry

    entry = _node_entry(action, named)
    _, target, job = _bucket_place()
    node = f"{_BUCKET}::{failed}" if failed is not None else None
    found = covering_entry(node, [(target, job)], [entry], {_BUCKET})
    expected = node is not None and any(_reference_covers(f"{_BUCKET}::{n}", node) for n in named)
    assert (found is entry) is expected


@given(
    named=st.lists(_NAMES, min_size=1, max_size=2, unique=True),
    results=st.lists(
        st.dictionaries(_NAMES, st.sampled_from(["passed", "failed", "muted", "skipped"])),
        min_size=2,
        max_size=2,
    ),
)
@example(named=["test_x"], results=[{"test_y": "failed"}, {"test_y": "passed"}])  # never ran
@example(
    named=["test_x"],
    results=[{"test_x": "passed", "test_x_after_restart": "failed"}, {"test_x": "passed"}],
)
@example(named=["test_x"], results=[{"test_x[1]": "passed", "test_x[2]": "muted"}, {}])
@example(named=["test_x"], results=[{"test_x": "skipped"}, {"test_x": "passed"}])
def test_a_node_level_entry_is_lifted_only_on_passes_of_its_own_tests(
    named: list[str], results: list[dict[str, str]]
) -> None:
    """A lift candidate for a mute entry needs each named test to have run and
    passed in the run and its baseline run: a test it does not name, failing or
    not, and a test that never ran, are no evidence."""
    from matrixgen.results.junit import Outcome
    from matrixgen.results.lifts import lift_candidates
    from matrixgen.results.queries import RunOutcomes
    from matrixgen.results.store import RunRow

    entry = _node_entry("mute", named)
    key, target, job = _bucket_place()
    run, base = RunRow(1, "run", "a" * 40, 200), RunRow(2, "base", "b" * 40, 100)
    tests = {
        ref: {key: {f"{_BUCKET}::{n}": Outcome(o) for n, o in ran.items()}}
        for ref, ran in zip((1, 2), results, strict=True)
    }
    job_outcome = {
        ref: Outcome.FAILED
        if any(o in (Outcome.FAILED, Outcome.ERROR) for o in tests[ref][key].values())
        else Outcome.PASSED
        for ref in (1, 2)
    }
    outcomes = RunOutcomes(
        run=run,
        baseline=(base,),
        jobs={ref: {key: o} for ref, o in job_outcome.items()},
        failed_tests={},
    )
    found = lift_candidates(outcomes, {key: [(target, job)]}, [entry], {_BUCKET}, tests)
    expected = all(
        (mine := [o for n, o in ran.items() if _reference_covers(named_id, n)])
        and all(o == "passed" for o in mine)
        for ran in results
        for named_id in named
    )
    assert [c.entry.id for c in found] == (["node-entry"] if expected else [])


def test_the_baseline_run_named_is_the_latest_it_failed_in(capsys, db: str) -> None:  # noqa: F811
    _store(db, "PPFPFF")  # of the latest four (102-105), failed in 102, 104 and 105
    code, failure = _triaged(capsys, db, 6, "--min-runs", "99", "--baseline-runs", "4")
    assert (code, failure["verdict"]) == (0, "baseline")
    assert failure["baseline_run"]["run_id"] == "105"
    assert "also failed in baseline run 105 " in failure["evidence"]
    assert "(3 of the 4 baseline runs)" in failure["evidence"]


def test_a_baseline_run_that_finished_with_the_run_is_its_baseline(
    capsys,
    db: str,  # noqa: F811
) -> None:
    """A baseline run finishes no later than the run: the same second counts."""
    from matrixgen.results import junit
    from matrixgen.results.ingest import ingest
    from matrixgen.results.store import JobResults, RunInfo, open_store

    test = junit.Testcase(node_id=NODE, classname="x", name="test_x", suite="",
                          outcome=junit.Outcome.FAILED, duration=1.0)  # fmt: skip
    group = JobResults(job=BUCKET, job_name="unit", target="", testcases=(test,))
    store = open_store(db, write=True)
    try:
        for run_id, ref, source in (("300", "main", "schedule"), ("301", "f", "push")):
            info = RunInfo(run_id=run_id, commit=run_id * 8, finished_at=START, ref=ref,
                           source=source)  # fmt: skip
            ingest(store, info, [group])
    finally:
        store.close()
    _, out, err = _triage(capsys, db, RECIPES, "301", "--format", "json", "--min-runs", "99")
    (failure,) = json.loads(out)["failures"]
    assert (failure["verdict"], failure["baseline_run"]["run_id"]) == ("baseline", "300"), err
