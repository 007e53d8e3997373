"""The streamed ingest: records go to the store in batches as the reports are
read, and what is stored is what the whole reports, folded in memory, say."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from matrixgen.cli.main import main
from matrixgen.model.errors import ExitCode
from matrixgen.results import ingest as ingest_module
from matrixgen.results.junit import parse_report
from matrixgen.results.queries import counts
from matrixgen.results.store import open_store
from tests.results_fixtures import RECIPES, TARGET, TODAY
from tests.results_fixtures import db as store_db  # noqa: F401  (SQLite and PostgreSQL)

BUCKET = "tests/unit_tests/data"
OUTCOMES = {"passed": 0, "failed": 1, "error": 2, "skipped": 3}
_BODY = {
    "passed": "",
    "failed": '<failure message="f"/>',
    "error": '<error message="e"/>',
    "skipped": "<skipped/>",
}


@pytest.fixture(autouse=True)
def _today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIXGEN_TODAY", TODAY)


def _xml(records: list[tuple[int, str, int]]) -> str:
    """A report: (test number, outcome, rerun children) per record, in order."""
    cases = "".join(
        f'<testcase classname="tests.unit_tests.data.test_s" name="test_{n}" time="0.5">'
        f"{_BODY[outcome]}{'<rerunFailure/>' * reruns}</testcase>\n"
        for n, outcome, reruns in records
    )
    return (
        '<testsuites><testsuite name="pytest" timestamp="2026-11-20T10:00:00" time="1">\n'
        f"{cases}</testsuite></testsuites>\n"
    )


def _expected(files: list[str]) -> dict[str, tuple[int, int]]:
    """node id -> (outcome code, reruns), folded as the whole reports say: each
    report read whole (parse_report folds a test's records in it), then a test
    in a later file of the job is run again (its reruns added, plus one)."""
    found: dict[str, tuple[int, int]] = {}
    for text in files:
        for t in parse_report(text.encode(), "r.xml").testcases:
            before = found.get(t.node_id)
            reruns = t.reruns + (before[1] + 1 if before is not None else 0)
            found[t.node_id] = (OUTCOMES[t.outcome.value], reruns)
    return found


def _stored(db: str) -> dict[str, tuple[int, int]]:
    import sqlalchemy as sa

    from matrixgen.results.tables import cases, results

    store = open_store(db, write=False)
    try:
        with store.transaction() as conn:
            rows = conn.execute(
                sa.select(cases.c.node_id, results.c.outcome, results.c.reruns).select_from(
                    results.join(cases, cases.c.id == results.c.case_id)
                )
            ).all()
    finally:
        store.close()
    return {node: (outcome, reruns) for node, outcome, reruns in rows}


def _ingest(paths: list[Path], db: str, run_id: str = "1") -> int:
    return main(
        ["results", "ingest", *map(str, paths), "--run-id", run_id, "--target", TARGET,
         "--tag", "latest", "--recipes", str(RECIPES), "--db", db, "--format", "json"]
    )  # fmt: skip


_RECORD = st.tuples(st.integers(0, 5), st.sampled_from(sorted(OUTCOMES)), st.integers(0, 2))


@pytest.mark.slow  # seconds by itself (tests/tiers.py)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.lists(_RECORD, min_size=1, max_size=8), min_size=1, max_size=3),
    batch=st.sampled_from([1, 2, 3, 5000]),
)
def test_a_streamed_ingest_stores_what_the_whole_reports_say(
    files: list[list[tuple[int, str, int]]],
    batch: int,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the batch size and however a test's records repeat (reruns in
    one file, the same test in several files of the job): one result per test,
    its last record's outcome, its failed attempts counted as reruns."""
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", batch)
    tmp = tmp_path_factory.mktemp("streamed")
    texts = [_xml(records) for records in files]
    paths = []
    for n, text in enumerate(texts):
        paths.append(tmp / f"r{n}.xml")
        paths[-1].write_text(text, encoding="utf-8")
    db = str(tmp / "results.db")
    assert _ingest(paths, db) == 0
    assert _stored(db) == _expected(texts)


def test_a_bad_file_after_flushed_batches_leaves_no_partial_run(
    store_db: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The good file's records went to the store batch by batch before the bad
    file was read: the one transaction takes them all back."""
    db = store_db
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", 2)
    first = tmp_path / "a.xml"
    first.write_text(_xml([(n, "passed", 0) for n in range(6)]), encoding="utf-8")
    assert _ingest([first], db, run_id="1") == 0
    store = open_store(db, write=False)
    try:
        before = dict(counts(store))
    finally:
        store.close()
    flushed = []
    real = ingest_module._bulk_insert

    def counted(conn, table, keys, rows):
        flushed.append(len(rows))
        return real(conn, table, keys, rows)

    monkeypatch.setattr(ingest_module, "_bulk_insert", counted)
    bad = tmp_path / "b.xml"
    bad.write_text(_xml([(n, "failed", 0) for n in range(6)])[:-30], encoding="utf-8")
    capsys.readouterr()
    assert _ingest([first, bad], db, run_id="2") == ExitCode.RESULTS_FILE
    assert "b.xml:" in capsys.readouterr().err
    assert len(flushed) >= 3  # a.xml's six records, two a batch, and some of b.xml's
    store = open_store(db, write=False)
    try:
        assert dict(counts(store)) == before
    finally:
        store.close()


def test_a_test_no_job_holds_stores_nothing_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mapping error raised from inside the parser's handler is the usage
    error it is (exit 2, located), not a report the parser could not read; and
    the SQLite store the ingest would have created is not left behind."""
    monkeypatch.setattr(ingest_module, "_STAGE_BATCH", 1)
    report = tmp_path / "r.xml"
    text = _xml([(0, "passed", 0), (1, "passed", 0)])
    elsewhere = 'classname="nowhere.test_x" name="test_1"'
    text = text.replace('classname="tests.unit_tests.data.test_s" name="test_1"', elsewhere)
    report.write_text(text, encoding="utf-8")
    db = tmp_path / "results.db"
    assert _ingest([report], str(db)) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"{report}:3: test nowhere/test_x.py::test_1 is in no unit-test bucket" in err
    assert not db.exists()


def test_the_ingest_names_its_jobs_as_before(tmp_path: Path, capsys) -> None:
    """The table and JSON of `results ingest`: per job its tests (each once),
    failures, skips and reruns; a second ingest of the run stores nothing."""
    import orjson

    report = tmp_path / "r.xml"
    records = [(0, "failed", 0), (0, "passed", 1), (1, "skipped", 0), (2, "error", 0)]
    report.write_text(_xml(records), encoding="utf-8")
    db = str(tmp_path / "results.db")
    assert _ingest([report], db) == 0
    out, err = capsys.readouterr()
    (job,) = orjson.loads(out)["jobs"]
    columns = ["job", "target", "platform", "environment", "scope", "tests", "failed"]
    assert list(job) == [*columns, "skipped", "reruns", "status"]
    assert job["target"] == TARGET and job["environment"] == "dev" != job["platform"]
    assert (job["tests"], job["failed"], job["skipped"], job["reruns"]) == (3, 1, 1, 2)
    assert job["status"] == "stored" and job["scope"] == "gitlab/mr"
    assert "run 1: 1 file(s), 3 test(s); stored 3 result(s) of 1 job(s)" in err
    assert _ingest([report], db) == 0
    out, err = capsys.readouterr()
    assert orjson.loads(out)["jobs"][0]["status"] == "already stored"
    assert "stored 0 result(s) of 0 job(s)" in err


# --------------------------------------------------------------------------- muted by whom


def _claimed_xml(names: list[str]) -> str:
    """A report whose failing tests each claim a mute (the property the pytest
    plugin writes, which a test can write for itself too)."""
    prop = '<properties><property name="quarantined" value="forged"/></properties>'
    cases = "".join(
        f'<testcase classname="tests.unit_tests.data.test_s" name="{n}" time="0.5">'
        f'{prop}<failure message="f"/></testcase>\n'
        for n in names
    )
    return (
        '<testsuites><testsuite name="pytest" timestamp="2026-11-20T10:00:00" time="1">\n'
        f"{cases}</testsuite></testsuites>\n"
    )


_MUTE = """
  - id: {id}
    tracker: "#8001"
    kind: flaky
    action: {action}
    match: {{model: unit-tests, test_case: tests/unit_tests/data/}}
    where: [{where}]
    node_ids: ["tests/unit_tests/data/test_s.py::{node}"]
    owner: mcore-data
    expires: "2099-01-01"
    reason: flaky
"""
_NAMES = st.sampled_from(["test_x", "test_x_after_restart", "test_x[1]", "test_y"])


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    claimed=st.lists(_NAMES, min_size=1, max_size=3, unique=True),
    entry=st.none()
    | st.tuples(
        st.sampled_from(["mute", "deselect"]), st.sampled_from(["gitlab/mr", "github"]), _NAMES
    ),
)
@example(claimed=["test_x"], entry=None)  # no entry at all: a forged mark
@example(claimed=["test_x_after_restart"], entry=("mute", "gitlab/mr", "test_x"))  # a prefix
@example(claimed=["test_x"], entry=("mute", "github", "test_x"))  # another system's entry
@example(claimed=["test_x"], entry=("deselect", "gitlab/mr", "test_x"))  # not a mute
@example(claimed=["test_x[1]"], entry=("mute", "gitlab/mr", "test_x"))  # its child: granted
def test_a_report_marks_a_failure_muted_only_where_the_quarantine_file_does(
    tmp_path_factory: pytest.TempPathFactory,
    claimed: list[str],
    entry: tuple[str, str, str] | None,
) -> None:
    import shutil

    folder = tmp_path_factory.mktemp("claims")
    recipes = folder / "recipes"
    shutil.copytree(RECIPES, recipes)
    if entry is not None:
        action, where, node = entry
        path = recipes / "quarantine.yaml"
        path.write_text(path.read_text() + _MUTE.format(id="m", action=action, where=where,
                                                         node=node))  # fmt: skip
    report = folder / "r.xml"
    report.write_text(_claimed_xml(claimed))
    db = str(folder / "results.db")
    code = main(["results", "ingest", str(report), "--run-id", "1", "--target", TARGET,
                 "--tag", "latest", "--recipes", str(recipes), "--db", db])  # fmt: skip
    assert code == 0
    stored = _stored(db)
    for name in claimed:
        granted = (
            entry is not None
            and entry[0] == "mute"
            and entry[1] == "gitlab/mr"
            and (name == entry[2] or name.startswith(entry[2] + "["))
        )
        node = f"tests/unit_tests/data/test_s.py::{name}"
        assert stored[node][0] == (4 if granted else 1), (name, entry)  # muted, else failed


def test_a_pull_requests_own_entry_grants_nothing_when_the_base_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch adds a mute entry for its failing test; with --base (a merge
    request's base, $CI_MERGE_REQUEST_DIFF_BASE_SHA in GitLab) only the base's
    file decides: the failure is stored as failed, and said so."""
    import shutil

    from tests.gitrepo import GitRepo

    repo = GitRepo(tmp_path / "repo")
    shutil.copytree(RECIPES, repo.top / "recipes")
    repo.git("add", "-A")
    repo.git("commit", "-qm", "base")
    base = repo.git("rev-parse", "HEAD")
    path = repo.top / "recipes" / "quarantine.yaml"
    path.write_text(path.read_text() + _MUTE.format(id="m", action="mute", where="gitlab/mr",
                                                     node="test_x"))  # fmt: skip
    repo.git("commit", "-qam", "the branch mutes its own failure")
    report = tmp_path / "r.xml"
    report.write_text(_claimed_xml(["test_x"]))
    node = "tests/unit_tests/data/test_s.py::test_x"
    monkeypatch.chdir(repo.top)
    args = ["results", "ingest", str(report), "--target", TARGET, "--tag", "latest",
            "--recipes", "recipes"]  # fmt: skip
    assert main([*args, "--run-id", "1", "--db", str(tmp_path / "a.db")]) == 0
    assert _stored(str(tmp_path / "a.db"))[node][0] == 4  # the tree as it is: granted
    capsys.readouterr()
    monkeypatch.setenv("CI_MERGE_REQUEST_DIFF_BASE_SHA", base)
    assert main([*args, "--run-id", "1", "--db", str(tmp_path / "b.db")]) == 0
    assert _stored(str(tmp_path / "b.db"))[node][0] == 1  # the base's file: failed
    err = capsys.readouterr().err
    assert f"named by no mute entry of recipes/quarantine.yaml at {base[:12]}" in err
    assert main([*args, "--run-id", "1", "--db", str(tmp_path / "c.db"), "--base", "nosuch"]) == 2


@pytest.mark.parametrize(
    ("field", "longest", "message"),
    [
        ("run_id", 255, "--run-id is 256 characters (at most 255)"),
        ("commit", 64, "--commit is 65 characters (at most 64)"),  # a SHA-256 commit fits
        ("ref", 255, "--ref is 256 characters (1 to 255)"),
        ("source", 64, "--source is 65 characters (1 to 64)"),
    ],
)
def test_each_run_value_fits_its_column_up_to_its_limit(
    field: str, longest: int, message: str
) -> None:
    import datetime as dt

    from matrixgen.model.errors import UsageError
    from matrixgen.results.ingest import check_lengths
    from matrixgen.results.store import RunInfo

    def run(value: str) -> RunInfo:
        base = {"run_id": "1", "commit": "a" * 40, "ref": "main", "source": "push"}
        at = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
        return RunInfo(**{**base, field: value}, finished_at=at)

    check_lengths(run("x" * longest))
    with pytest.raises(UsageError) as info:
        check_lengths(run("x" * (longest + 1)))
    assert str(info.value) == message
    if field in ("ref", "source"):  # an empty one is no value
        with pytest.raises(UsageError, match=f"--{field} is 0 characters"):
            check_lengths(run(""))
